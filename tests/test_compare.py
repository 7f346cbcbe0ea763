"""`hf-longdoc compare`: every model trained with one budget, the report, CSVs and plots, and clear errors."""

import csv
import json

import pytest

from hf_longdoc.cli import main
from hf_longdoc.data import make_long_document_task
from hf_longdoc.experiments.compare import compare, parse_models, summarize
from hf_longdoc.experiments.settings import CompareSettings

TINY = CompareSettings(hidden_size=16, num_layers=1, num_heads=2, max_length=96, epochs=1, batch_size=8, window=16,
                       segment_length=32, vocab_size=300)


def _dataset(tmp_path):
    """A small labelled JSONL file (the built-in task's documents, evidence anywhere)."""
    data = make_long_document_task(train_size=40, validation_size=8, test_size=16, min_words=40, max_words=120,
                                   evidence="anywhere", seed=3)
    path = tmp_path / "docs.jsonl"
    with open(path, "w") as f:
        for split in ("train", "validation", "test"):
            for row in data[split]:
                f.write(json.dumps({"body": row["text"], "topic": f"t{row['label']}"}) + "\n")
    return str(path)


@pytest.mark.slow
def test_compare_writes_report_csvs_and_plots_with_seeds_and_robustness(tmp_path):
    out = tmp_path / "out"
    rows = compare(dataset=_dataset(tmp_path), text_column="body", label_column="topic",
                   models=["contextualizer", "sparse_longformer:tfidf", "segment_lm:att"], baselines=["bert-32"],
                   settings=TINY, seeds=2, evidence=("start", "end"), task_size=16, task_words=(40, 80),
                   bench_lengths=(32, 64), output_dir=str(out), progress=lambda message: None)
    assert [(row["model"], row["seed"]) for row in rows] == [
        (name, seed) for seed in (42, 43) for name in ("contextualizer", "sparse_longformer:tfidf", "segment_lm:att",
                                                        "bert-32")]
    for row in rows:
        assert 0 <= row["accuracy"] <= 1 and 0 <= row["inverted_accuracy"] <= 1
        assert row["parameters"] > 0 and row["train_seconds"] > 0 and row["inference_docs_per_s"] > 0
        assert {"evidence_start", "evidence_end", "macro_f1", "micro_f1", "train_peak_mib"} <= set(row)
    assert {row["model"]: row["max_tokens"] for row in rows}["bert-32"] == 32  # the baseline reads 32 tokens
    report = (out / "report.md").read_text()
    for name in ("contextualizer", "sparse_longformer:tfidf", "segment_lm:att", "bert-32"):
        assert f"| {name} |" in report
    assert " ± " in report and "evidence start" in report and "inverted" in report
    assert len(list(csv.DictReader(open(out / "results.csv")))) == 8
    summary = list(csv.DictReader(open(out / "summary.csv")))
    assert [entry["seeds"] for entry in summary] == ["2"] * 4
    for plot in ("accuracy_vs_speed.png", "time_memory_vs_length.png"):
        assert (out / plot).stat().st_size > 1000


def test_summarize_gives_mean_std_and_the_inverted_drop():
    rows = [{"model": "a", "seed": 42, "accuracy": 0.8, "inverted_accuracy": 0.6},
            {"model": "a", "seed": 43, "accuracy": 0.6, "inverted_accuracy": 0.6}]
    (entry,) = summarize(rows)
    assert entry["accuracy"] == pytest.approx(0.7) and entry["accuracy_std"] == pytest.approx(0.1414, abs=1e-4)
    assert entry["inverted_drop"] == pytest.approx(0.1) and entry["seeds"] == 2


def test_sparse_longformer_globals_scale_with_length_and_config_overrides_win():
    (spec,) = parse_models(["sparse_longformer:pmi"], [])

    def sized(settings):
        return spec.family.build_config(settings.size(), **spec.setting, **settings.config_overrides.get(spec.name, {}))

    assert sized(CompareSettings(max_length=1024)).num_global_tokens == 32  # the paper's 128 per 4,096
    assert sized(CompareSettings(max_length=4096)).num_global_tokens == 128
    assert sized(CompareSettings(max_length=4096)).global_selector == "pmi"
    overridden = CompareSettings(max_length=1024, config_overrides={spec.name: {"num_global_tokens": 8}})
    assert sized(overridden).num_global_tokens == 8


@pytest.mark.parametrize("models, baselines, fragment", [
    (["gpt9"], [], "gpt9"),
    (["slstm:fast"], [], "slstm has no variants"),
    (["segment_lm:lstm"], [], "variant"),
    (["sparse_longformer:tf"], [], "sparse_longformer:tfidf"),
    ([], ["roberta"], "bert-<N>"),
    ([], [], "at least one model"),
])
def test_unknown_models_and_baselines_are_named(models, baselines, fragment):
    with pytest.raises(ValueError, match=fragment):
        parse_models(models, baselines)


def test_every_whole_document_baseline_is_named_in_the_help_and_the_error(capsys):
    """`modernbert` and the other native long encoders are `--baselines` a user must be able to find."""
    from hf_longdoc.experiments.baselines import BASELINES

    whole = [kind for kind, baseline in BASELINES.items() if not baseline.truncating and kind != "roberta"]
    assert {"longformer", "bigbird", "modernbert"} <= set(whole)
    with pytest.raises(ValueError) as error:
        parse_models([], ["gpt9"])
    assert main(["compare", "--help"]) == 0
    help_text = " ".join(capsys.readouterr().out.split())
    for name in whole + ["tfidf", "native", "bert-chunks", "bert-<N>-headtail"]:
        assert name in str(error.value) and name in help_text, name


def test_compare_cli_errors_name_the_argument(capsys):
    assert main(["compare", "--task-words", "9"]) == 2
    assert "--task-words" in capsys.readouterr().err
    assert main(["compare", "--config", "hidden_size=3"]) == 2
    assert "MODEL.KEY=VALUE" in capsys.readouterr().err
    assert main(["compare", "--models", "slstm", "--baselines", "", "--evidence", "everywhere"]) == 2
    assert "evidence" in capsys.readouterr().err
    assert main(["compare", "--models", "slstm", "--baselines", "", "--lr-scheduler", "cosinus"]) == 2
    assert "--lr-scheduler" in capsys.readouterr().err


def test_compare_defaults_to_the_builtin_task_at_the_task_size(tmp_path):
    rows = compare(models=["contextualizer"], baselines=[], settings=TINY, evidence=(), task_size=16,
                   task_words=(40, 80), bench_lengths=(), output_dir=str(tmp_path), progress=lambda message: None)
    assert len(rows) == 1 and "built-in long-document task (16 training documents)" in (
        tmp_path / "report.md").read_text()


def test_config_overrides_apply_family_wide_or_per_model_and_unknown_targets_fail_before_training(tmp_path):
    from hf_longdoc.experiments.compare import check_specs, overrides_of

    specs = parse_models(["sparse_longformer:pmi", "sparse_longformer:tfidf", "slstm"], ["bert-64"])
    settings = CompareSettings(config_overrides={"sparse_longformer": {"num_global_tokens": 8},
                                                 "sparse_longformer:pmi": {"num_global_tokens": 4}})
    assert [overrides_of(spec, settings) for spec in specs] == [{"num_global_tokens": 4}, {"num_global_tokens": 8},
                                                                {}, {}]
    check_specs(specs, settings)
    with pytest.raises(ValueError, match="contxtualizer"):
        check_specs(specs, CompareSettings(config_overrides={"contxtualizer": {"hidden_size": 8}}))
    with pytest.raises(ValueError, match="hidden_sise"):
        check_specs(specs, CompareSettings(config_overrides={"slstm": {"hidden_sise": 8}}))
    with pytest.raises(ValueError, match="num_global_tokens"):  # an invalid value fails before any training
        compare(models=["contextualizer", "sparse_longformer:pmi"], baselines=[], settings=CompareSettings(
            config_overrides={"sparse_longformer": {"num_global_tokens": -1}}), evidence=(), task_size=16,
                task_words=(40, 80), bench_lengths=(), output_dir=str(tmp_path), progress=lambda message: None)
    assert not (tmp_path / "results.csv").exists()
    with pytest.raises(ValueError, match="lengths"):
        compare(models=["contextualizer"], baselines=[], settings=TINY, evidence=(), task_size=16,
                task_words=(40, 80), bench_lengths=(4,), output_dir=str(tmp_path), progress=lambda message: None)


def test_bench_table_grows_from_the_shortest_length_whatever_the_order():
    from hf_longdoc.experiments.report import format_table

    rows = [{"model": "m", "length": 128, "seconds": 0.2, "peak_mib": 1.0},
            {"model": "m", "length": 64, "seconds": 0.1, "peak_mib": 1.0}]
    first, second = format_table(rows).splitlines()[1:]
    assert first.split()[-1] == "2.00" and second.split()[-1] == "1.00"


def test_the_elementwise_papers_orig_baselines_albert_and_canine(tmp_path):
    """`albert-N` reads the first N WordPiece tokens like `bert-N`; `canine-N` reads the first N characters with
    CANINE's own tokenizer (Tables 2-4 of the elementwise paper compare EWE with these ORIG models)."""
    rows = compare(dataset=_dataset(tmp_path), text_column="body", label_column="topic", models=[],
                   baselines=["albert-64", "canine-256"], settings=TINY, evidence=(), bench_lengths=(),
                   output_dir=str(tmp_path / "out"), progress=lambda message: None)
    by_name = {row["model"]: row for row in rows}
    assert set(by_name) == {"albert-64", "canine-256"}
    assert by_name["albert-64"]["max_tokens"] == 64 and by_name["canine-256"]["max_tokens"] == 256
    assert all(0 <= row["accuracy"] <= 1 for row in rows)
    with pytest.raises(ValueError, match="canine-<N>"):
        parse_models([], ["canine"])


def test_split_seed_keeps_one_split_for_every_seed(tmp_path, monkeypatch):
    """`--seeds 2` draws a split per seed unless `--split-seed` fixes it: then only the training draws differ (the
    TF-IDF row, which has none, scores the same twice), and the report says which split it was."""
    import hf_longdoc.experiments.compare as compare_module

    drawn = []
    load_task = compare_module.load_task

    def recording_load_task(*args):
        drawn.append(args[3])
        return load_task(*args)

    monkeypatch.setattr(compare_module, "load_task", recording_load_task)
    dataset = _dataset(tmp_path)
    run = dict(dataset=dataset, text_column="body", label_column="topic", models=[], baselines=["tfidf"],
               settings=TINY, seeds=2, evidence=(), bench_lengths=(), progress=lambda message: None)
    compare(**run, output_dir=str(tmp_path / "own"))
    assert drawn == [42, 43]
    assert "each drawing its own split" in (tmp_path / "own" / "report.md").read_text()
    drawn.clear()
    rows = compare(**run, output_dir=str(tmp_path / "fixed"), split_seed=7)
    assert drawn == [7, 7] and rows[0]["accuracy"] == rows[1]["accuracy"]
    assert "on the split drawn with seed 7" in (tmp_path / "fixed" / "report.md").read_text()
    with pytest.raises(ValueError, match="split_seed"):
        compare(**run, output_dir=str(tmp_path / "bad"), split_seed="7")


def test_first_seed_adds_seeds_to_an_earlier_run(tmp_path):
    """`--first-seed 43 --seeds 1` gives the row that seed 43 of `--seeds 2` gives (TF-IDF: its split decides it)."""
    run = dict(dataset=_dataset(tmp_path), text_column="body", label_column="topic", models=[], baselines=["tfidf"],
               settings=TINY, evidence=(), bench_lengths=(), progress=lambda message: None)
    both = compare(**run, seeds=2, output_dir=str(tmp_path / "both"))
    (later,) = compare(**run, seeds=1, first_seed=43, output_dir=str(tmp_path / "later"))
    assert [row["seed"] for row in both] == [42, 43] and later["seed"] == 43
    assert later["accuracy"] == both[1]["accuracy"]
    assert "seed 43" in (tmp_path / "later" / "report.md").read_text()
    with pytest.raises(ValueError, match="first_seed"):
        compare(**run, output_dir=str(tmp_path / "bad"), first_seed=-1)


def test_modernbert_is_a_baseline_of_bench_and_compare_from_scratch(tmp_path, capsys):
    """A native long encoder at the bench's size with its own long settings (a 128-token local window, global every
    third layer): bench reports every model's speed and memory against it, and compare trains it from scratch."""
    from hf_longdoc.experiments.baselines import build_baseline

    model = build_baseline("modernbert", 32, 3, 2, 256, vocab_size=300, num_labels=2)
    assert model.config.local_attention == 128
    assert model.config.layer_types == ["full_attention", "sliding_attention", "sliding_attention"]
    assert (model.config.hidden_size, model.config.num_hidden_layers, model.config.num_attention_heads) == (32, 3, 2)
    assert main(["bench", "--models", "contextualizer,modernbert", "--lengths", "64,128", "--hidden-size", "32",
                 "--num-layers", "3", "--num-heads", "2", "--repeats", "1", "--output", str(tmp_path / "b")]) == 0
    out = capsys.readouterr().out
    assert "speedup vs modernbert" in out and "memory vs modernbert" in out
    rows = list(csv.DictReader(open(tmp_path / "b.csv")))
    assert all(float(row["speedup_vs_modernbert"]) > 0 for row in rows)
    rows = compare(dataset=_dataset(tmp_path), text_column="body", label_column="topic", models=["contextualizer"],
                   baselines=["modernbert"], settings=TINY, seeds=1, evidence=(), task_size=16, task_words=(40, 80),
                   bench_lengths=(), output_dir=str(tmp_path / "c"), progress=lambda message: None)
    assert [row["model"] for row in rows] == ["contextualizer", "modernbert"]
    assert 0 <= rows[1]["accuracy"] <= 1


@pytest.mark.parametrize("name", ["eurobert", "nomicbert"])
def test_the_other_native_long_encoders_are_bench_baselines(name, tmp_path, capsys):
    """EuroBERT and NomicBERT at the bench's size, reading the task's ids (their special ids moved into its vocab)."""
    from hf_longdoc.experiments.baselines import build_baseline

    model = build_baseline(name, 32, 3, 2, 256, vocab_size=300, num_labels=2)
    assert (model.config.hidden_size, model.config.num_hidden_layers, model.config.num_attention_heads) == (32, 3, 2)
    assert max(getattr(model.config, key) or 0 for key in ("pad_token_id", "bos_token_id", "eos_token_id")) < 300
    assert main(["bench", "--models", f"contextualizer,{name}", "--lengths", "64,128", "--hidden-size", "32",
                 "--num-layers", "3", "--num-heads", "2", "--repeats", "1", "--output", str(tmp_path / "b")]) == 0
    assert f"speedup vs {name}" in capsys.readouterr().out


def test_bench_names_each_baselines_attention_and_applies_the_one_asked_for(tmp_path, capsys, monkeypatch):
    """`--attention`: SDPA by default on CPU (FlashAttention 2 needs flash-attn and a CUDA GPU), eager where a model has
    nothing else (Longformer); the choice reaches the model, the report and the CSV; an unusable one fails first."""
    import torch

    from hf_longdoc.experiments.baselines import baseline_attention

    assert baseline_attention("modernbert") == "sdpa"
    # on a CUDA GPU without FA2: FlexAttention for ModernBERT's local window, SDPA (flash) for BERT's full attention
    assert baseline_attention("modernbert", "auto", torch.device("cuda"), torch.float32) == "flex_attention"
    assert baseline_attention("bert", "auto", torch.device("cuda"), torch.float32) == "sdpa"
    assert baseline_attention("longformer") == "eager"
    assert baseline_attention("longformer", "flex_attention") == "eager"
    assert baseline_attention("modernbert", "eager") == "eager"
    args = ["bench", "--models", "modernbert,longformer", "--lengths", "64", "--hidden-size", "32", "--num-layers",
            "3", "--num-heads", "2", "--repeats", "1", "--window", "32", "--num-global", "4"]
    assert main([*args, "--attention", "eager", "--output", str(tmp_path / "b")]) == 0
    assert "Baselines' attention: modernbert eager, longformer eager" in capsys.readouterr().out
    rows = list(csv.DictReader(open(tmp_path / "b.csv")))
    assert [row["attention"] for row in rows] == ["eager", "eager"]
    from transformers.utils import is_flash_attn_2_available

    if not is_flash_attn_2_available():
        assert main([*args, "--attention", "flash_attention_2", "--output", str(tmp_path / "c")]) == 2
        assert "flash-attn" in capsys.readouterr().err
        assert not (tmp_path / "c.csv").exists()
    import transformers.utils

    from hf_longdoc.experiments.baselines import check_attention

    monkeypatch.setattr(transformers.utils, "is_flash_attn_2_available", lambda: True)  # installed, but CPU / fp32
    with pytest.raises(ValueError, match="--device cuda --dtype bfloat16"):
        check_attention("flash_attention_2", "cpu", torch.bfloat16)
    with pytest.raises(ValueError, match="--device cuda --dtype bfloat16"):
        check_attention("flash_attention_2", "cuda", torch.float32)
    assert check_attention("flash_attention_2", "cuda", torch.bfloat16) == "flash_attention_2"


def test_bench_goes_on_without_a_roofline_line_where_the_recorder_cannot_look(monkeypatch):
    """A model whose forward the matmul recorder cannot follow (flex_attention's higher-order operator) is still
    timed; its row has no roofline, and the run says why."""
    import hf_longdoc.experiments.bench as bench

    def refuse(*args, **kwargs):
        raise NotImplementedError("There was no rule registered for HigherOrderOperator flex_attention. Hint: ...")

    monkeypatch.setattr(bench, "matmul_roofline", refuse)
    said = []
    rows = bench.run_bench(models=["bert"], lengths=(64,), hidden_size=32, num_layers=1, num_heads=2, repeats=1,
                           progress=said.append)
    assert rows[0]["seconds"] > 0 and not any(key.startswith("roofline_") for key in rows[0])
    assert any("no roofline line" in line and "flex_attention" in line for line in said)


def test_compare_around_a_backbone_gives_each_family_its_train_epochs_unless_set():
    """`compare --backbone` without `--epochs` trains each family as `train` would (its recipe's fine-tuning epochs:
    the sparse Longformer 2, the segment LM 4) and the baselines 3; `--epochs` sets every model's; from scratch
    every model trains 3. The report says which."""
    from hf_longdoc.experiments.report import epochs_text

    specs = parse_models(["segment_lm:att", "sparse_longformer"], ["bert-512", "native", "tfidf"])
    around = CompareSettings(epochs=None, backbone="any-folder")
    assert [spec.epochs(around) for spec in specs] == [4, 2, 3, 3, 3]
    assert [spec.epochs(CompareSettings(epochs=None)) for spec in specs] == [3] * 5
    assert [spec.epochs(CompareSettings(epochs=1.5, backbone="any-folder")) for spec in specs] == [1.5] * 5
    summary = [{"model": "segment_lm:att", "epochs": 4}, {"model": "native", "epochs": 3}, {"model": "tfidf"}]
    assert epochs_text(around, summary) == "epochs: segment_lm:att 4, native 3"
    assert epochs_text(CompareSettings(epochs=2), summary) == "2 epochs"
    CompareSettings(epochs=None).check()  # None is a setting, not an error
    with pytest.raises(ValueError, match="epochs"):
        CompareSettings(epochs=0).check()
