"""What `compare`, `bench`, `train` and the CLI say about what ran, and refuse before any work.

A `compare --time-budget` run records the epochs and optimizer steps that ran and marks a cut run; `bench` refuses
lengths whose (n x n) attention tensors cannot fit; `compare --dataset` trains no built-in evidence tasks unless asked;
a plain `train` into a folder that holds an interrupted run is refused; the batch is recorded per process and per
optimizer step; and every numeric flag refuses a negative number with the package's own message.
"""

import pytest
import torch

from hf_longdoc.cli import main
from hf_longdoc.experiments.baselines import square_tensors
from hf_longdoc.experiments.bench import check_bench_fits
from hf_longdoc.experiments.bench_models import BenchModel
from test_compare import _dataset

GIB = 2**30


# -- bench: the baselines' attention in the memory check -----------------------------------------------------------
@pytest.mark.parametrize("argv, fragments", [
    (["--models", "bert", "--lengths", "10000000", "--attention", "eager"], ["eager attention's scores",
                                                                             "--attention sdpa"]),
    (["--models", "longformer", "--lengths", "3000000"], ["attention mask", "TiB", "sparse_longformer"]),
    (["--models", "bigbird,contextualizer", "--lengths", "512,5000000"], ["bigbird", "probabilities"]),
    (["--models", "modernbert", "--lengths", "5000000", "--backward"], ["sliding-window mask", "training steps"]),
    (["--models", "eurobert", "--lengths", "20000000", "--attention", "eager", "--batch-size", "2"],
     ["eager attention's scores"]),
    # a family that builds n x n tensors says so through its registry entry (`square_bytes`)
    (["--models", "sparse_bigbird", "--lengths", "400000"],
     ["Big Bird's attention probabilities", "sparse_longformer"]),
])
def test_bench_refuses_impossible_attention_before_allocating(argv, fragments, tmp_path, capsys):
    assert main(["bench", *argv, "--output", str(tmp_path / "bench")]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and "needs at least" in err and "available" in err and "--lengths" in err, err
    assert "tokens fit" in err  # the longest length the estimate lets fit
    for fragment in fragments:
        assert fragment in err, err
    assert not list(tmp_path.iterdir())


def test_train_counts_a_familys_square_tensors_before_any_data_is_read(tmp_path, capsys):
    assert main(["train", "--model", "sparse_bigbird", "--max-length", "400000", "--output-dir",
                 str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert "Big Bird's attention probabilities" in err and "TiB" in err and "Traceback" not in err


def test_the_square_tensors_follow_the_attention_and_the_model():
    assert square_tensors("bert", "eager", 2, 4, 4).bytes(1000, 3, True) == 2 * 4 * 4 * 1000**2 * 3
    assert square_tensors("bert", "eager", 2, 4, 4).bytes(1000, 3, False) == 2 * 4 * 4 * 1000**2  # one layer at a time
    assert not square_tensors("bert", "sdpa", 2, 4, 4) and not square_tensors("eurobert", "flash_attention_2", 1, 4, 2)
    longformer = square_tensors("longformer", "eager", 3, 4, 2)  # its mask, once, whatever the layers
    assert longformer.bytes(100, 12, True) == 3 * 2 * 100**2
    assert square_tensors("modernbert", "sdpa", 1, 4, 4).shared == 8
    assert not square_tensors("modernbert", "flex_attention", 1, 4, 4)


def test_sizes_that_fit_pass_the_check(monkeypatch):
    import hf_longdoc.training.feasibility as feasibility

    monkeypatch.setattr(feasibility, "available_bytes", lambda device=None: 8 * GIB)
    sizes = dict(hidden_size=64, num_layers=2, num_heads=2, window=64)
    entries = [BenchModel.parse(name) for name in ("bert", "longformer", "bigbird", "modernbert", "contextualizer")]
    attentions = {"bert": "eager", "longformer": "eager", "bigbird": "eager", "modernbert": "sdpa"}
    check_bench_fits(entries, (512, 4096), 1, True, torch.device("cpu"), None, attentions, torch.float32, **sizes)
    # SDPA builds no scores: BERT at 100,000 ids passes where eager attention (75 GiB a layer here) is refused
    check_bench_fits(entries[:1], (100_000,), 1, False, torch.device("cpu"), None, {"bert": "sdpa"}, **sizes)
    with pytest.raises(ValueError, match="--attention sdpa"):
        check_bench_fits(entries[:1], (100_000,), 1, False, torch.device("cpu"), None, {"bert": "eager"}, **sizes)


# -- compare: what ran, the budget, the batch and the evidence runs ---------------------------------------------------
TINY_COMPARE = ["--text-column", "body", "--label-column", "topic", "--hidden-size", "16", "--num-layers", "1",
                "--num-heads", "2", "--max-length", "96", "--vocab-size", "300", "--bench-lengths", "none",
                "--task-size", "16", "--task-words", "40,80"]


def test_a_run_the_time_budget_cut_records_what_ran_and_is_marked(tmp_path, capsys):
    import csv

    out = tmp_path / "out"
    assert main(["compare", "--dataset", _dataset(tmp_path), *TINY_COMPARE, "--models", "contextualizer",
                 "--baselines", "tfidf", "--epochs", "3", "--time-budget", "1e-6", "--evidence", "start",
                 "--output-dir", str(out)]) == 0
    rows = {row["model"]: row for row in csv.DictReader(open(out / "results.csv"))}
    trained = rows["contextualizer"]
    assert trained["cut_by_time_budget"] == "True" and trained["steps"] == "1"  # the step that reached the budget
    assert 0 < float(trained["epochs"]) < 1 and float(trained["planned_epochs"]) == 3
    assert (trained["batch_per_process"], trained["processes"], trained["batch_per_step"]) == ("8", "1", "8")
    assert rows["tfidf"]["cut_by_time_budget"] == ""  # nothing trained there
    report = (out / "report.md").read_text()
    assert "time budget of 1e-06 minutes" in report and "**Runs cut by the time budget**" in report
    assert f"contextualizer seed 42 ({float(trained['epochs']):g} of 3 epochs, 1 optimizer step)" in report
    line = next(line for line in report.splitlines() if line.startswith("| contextualizer |"))
    assert "cut by the time budget" in line
    assert "batch 8 per process, 8 documents per optimizer step (one process)" in report
    # --evidence with --dataset: the built-in runs happen because they were asked for, and the report says so
    assert "evidence start" in report and "besides the dataset above (asked for with --evidence)" in report
    assert "CUT by the time budget" in capsys.readouterr().out


def test_compare_on_a_dataset_trains_no_builtin_evidence_tasks_unless_asked(tmp_path):
    from hf_longdoc.experiments.compare import compare
    from hf_longdoc.experiments.settings import CompareSettings

    (row,) = compare(dataset=_dataset(tmp_path), text_column="body", label_column="topic", models=[],
                     baselines=["tfidf"], bench_lengths=(), output_dir=str(tmp_path / "out"),
                     progress=lambda message: None)
    assert not [key for key in row if key.startswith("evidence_")]
    report = (tmp_path / "out" / "report.md").read_text()
    assert "No built-in evidence runs (--evidence start,middle,end adds them" in report
    assert CompareSettings().evidence_positions() == ("start", "middle", "end")  # the built-in task keeps them
    assert CompareSettings(dataset="x.csv").evidence_positions() == ()
    assert CompareSettings(dataset="x.csv", evidence=("end",)).evidence_positions() == ("end",)


def test_the_report_marks_runs_cut_by_the_budget_even_when_collapsed(tmp_path):
    from hf_longdoc.experiments.compare import summarize
    from hf_longdoc.experiments.report import write_compare_report
    from hf_longdoc.experiments.settings import CompareSettings

    def row(seed, accuracy, collapsed, cut):
        return {"model": "slstm", "seed": seed, "epochs": 0.25 if cut else 2.0, "planned_epochs": 2.0,
                "steps": 3 if cut else 24, "cut_by_time_budget": cut, "batch_per_process": 4, "processes": 2,
                "gradient_accumulation": 1, "batch_per_step": 8, "parameters": 1000, "accuracy": accuracy,
                "macro_f1": accuracy, "micro_f1": accuracy, "train_seconds": 1.0, "inference_docs_per_s": 5.0,
                "train_peak_mib": 1.0, "inference_peak_mib": 1.0, "max_tokens": 64, "collapsed": collapsed,
                "validation_top_share": 1.0, "validation_accuracy": 0.5, "validation_majority_rate": 0.5}

    rows = [row(42, 0.8, False, True), row(43, 0.5, True, False), row(44, 0.7, False, False)]
    settings = CompareSettings(time_budget=2.0, batch_size=4, epochs=2)
    write_compare_report(rows, summarize(rows), [], settings, "reviews", "seeds 42-44", str(tmp_path))
    report = (tmp_path / "report.md").read_text()
    assert "| 0.750 ± 0.071 (2 healthy), 1 collapsed, 1 of 3 cut by the time budget |" in report
    assert "slstm seed 42 (0.25 of 2 epochs, 3 optimizer steps)" in report and "slstm seed 44 (" not in report
    assert "batch 4 per process, 8 documents per optimizer step (2 processes)" in report  # under torchrun
    assert "2 epochs within a time budget of 2 minutes of training per model (1 run cut short" in report


@pytest.mark.parametrize("name, limit", [("bert-2", "at least 8"), ("albert-7", "at least 8"),
                                         ("bert-100-headtail", "at least 131")])
def test_a_baseline_of_the_documented_form_below_the_limit_names_the_limit(name, limit, tmp_path, capsys):
    assert main(["compare", "--models", "", "--baselines", name, "--output-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert limit in err and name in err and "Unknown baseline" not in err and "Traceback" not in err
    assert main(["compare", "--help"]) == 0
    assert "N at least 8" in capsys.readouterr().out


# -- train: an interrupted run is refused, the batch is recorded per process and per step -------------------------
TINY_TRAIN = ["--model", "contextualizer", "--task-size", "20", "--epochs", "1", "--max-length", "128",
              "--vocab-size", "300", "--config", "hidden_size=16", "rank=8", "num_hidden_layers=1"]


def test_a_plain_rerun_into_an_interrupted_run_is_refused_and_overwrite_starts_over(tmp_path, capsys):
    import json

    target = tmp_path / "model"
    staging = tmp_path / ".model.partial"
    (staging / "checkpoint-3").mkdir(parents=True)  # what a killed run leaves for --resume
    (staging / "checkpoint-3" / "trainer_state.json").write_text('{"global_step": 3}')
    assert main(["train", *TINY_TRAIN, "--output-dir", str(target)]) == 2
    err = capsys.readouterr().err
    assert "interrupted run" in err and "--resume" in err and "--overwrite" in err and "Traceback" not in err
    assert (staging / "checkpoint-3" / "trainer_state.json").exists() and not target.exists()  # nothing deleted
    assert main(["train", *TINY_TRAIN, "--output-dir", str(target), "--overwrite"]) == 0
    assert not staging.exists() and (target / "model.safetensors").exists()
    # the batch, per process and per optimizer step, in metrics.json and the card
    metrics = json.loads((target / "metrics.json").read_text())
    assert metrics["batch_size"] == {"per_process": 8, "processes": 1, "gradient_accumulation": 1,
                                     "per_optimizer_step": 8}
    card = (target / "README.md").read_text()
    assert "| batch size per process | 8 |" in card
    assert "| documents per optimizer step (batch per process x 1 processes x 1 accumulated) | 8 |" in card


def test_train_and_compare_help_say_the_batch_is_per_process(capsys):
    for command in ("train", "compare"):
        assert main([command, "--help"]) == 0
        assert "per process" in " ".join(capsys.readouterr().out.split())


# -- messages ------------------------------------------------------------------------------------------------------
def test_demo_names_a_missing_backbone_as_train_does(tmp_path, capsys):
    missing = str(tmp_path / "nonexistent")
    assert main(["demo", "--backbone", missing, "--output-dir", str(tmp_path / "demo")]) == 2
    demo = capsys.readouterr().err
    assert main(["train", "--model", "segment_lm", "--backbone", missing, "--output-dir", str(tmp_path / "t")]) == 2
    train = capsys.readouterr().err
    assert "does not exist" in demo and demo.split("error: ")[1] == train.split("error: ")[1]
    assert not (tmp_path / "demo").exists()


@pytest.mark.parametrize("environment, named", [({"TRANSFORMERS_OFFLINE": "1"}, "TRANSFORMERS_OFFLINE=1"),
                                                ({"HF_HUB_OFFLINE": "1"}, "HF_HUB_OFFLINE=1")])
def test_push_names_the_offline_variable_that_is_set(environment, named, monkeypatch):
    from hf_longdoc.publishing.hub import require_hub_for_push

    for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"):
        monkeypatch.delenv(name, raising=False)
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_OFFLINE", True)  # as huggingface_hub reads either
    with pytest.raises(ValueError) as refusal:
        require_hub_for_push()
    assert named in str(refusal.value) and "--dry-run" in str(refusal.value)
    if "TRANSFORMERS_OFFLINE" in environment:
        assert "HF_HUB_OFFLINE" not in str(refusal.value)


def numeric_flags():
    """(command, flag, integer) for every flag of every command whose value is a number (`NumberRule.parse`)."""
    import argparse

    from hf_longdoc.cli import build_parser
    from hf_longdoc.utils.rules import NumberRule

    parser = build_parser()
    commands = next(action for action in parser._actions if isinstance(action, argparse._SubParsersAction))
    found = []
    for command, subparser in commands.choices.items():
        for action in subparser._actions:
            parse = getattr(action, "convert", None) or action.type  # a settings field's flag converts in its action
            rule = getattr(parse, "__self__", None)
            if isinstance(rule, NumberRule):
                found.append((command, action.option_strings[0], rule.integer))
    return found


def test_every_numeric_flag_of_every_command_refuses_negative_numbers_with_its_own_message(capsys):
    flags = numeric_flags()
    assert len(flags) > 40 and ("train", "--learning-rate", False) in flags
    for command, flag, integer in flags:
        for value in (["-3", "-1e-3", "-2E+2", "-inf", "-.5"] if not integer else ["-3", "-1e-3"]):
            assert main([command, flag, value]) == 2, (command, flag, value)
            err = capsys.readouterr().err
            assert f"argument {flag}: must be" in err and repr(value) in err, (command, flag, value, err)
            assert "expected one argument" not in err and "Traceback" not in err
    assert main(["train", "--learning-rate", "-1e-3", "--output-dir", "unused"]) == 2
    assert "--learning-rate: must be a positive finite number" in capsys.readouterr().err


@pytest.mark.parametrize("argv, flag", [(["bench", "--lengths", "-512,1024"], "--lengths"),
                                        (["compare", "--bench-lengths", "-5,10"], "--bench-lengths"),
                                        (["compare", "--task-words", "-3,5"], "--task-words"),
                                        (["train", "--task-words", "-3,5", "--output-dir", "unused"], "--task-words")])
def test_negative_numbers_in_lists_reach_the_list_check(argv, flag, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert flag in err and "positive integers" in err and "expected one argument" not in err


def test_a_quoted_tilde_in_a_backbone_path_is_the_home_folder(tmp_path, monkeypatch):
    """`--backbone "~/models/x"` (the shell leaves a quoted tilde alone) names the folder in the home folder; it failed
    as a malformed Hub id when the tokenizer was loaded."""
    from hf_longdoc.data import fit_wordpiece_tokenizer
    from hf_longdoc.training.settings import RunSettings
    from tiny_bert import save_tiny_bert

    monkeypatch.setenv("HOME", str(tmp_path))
    tokenizer = fit_wordpiece_tokenizer(["a few words to fit a tiny vocabulary on"] * 4, vocab_size=120,
                                        model_max_length=32)
    save_tiny_bert(tmp_path / "models" / "x", tokenizer, max_positions=32)
    run = RunSettings.of(model="segment_lm", backbone="~/models/x").resolve()
    assert run.backbone == str(tmp_path / "models" / "x")
