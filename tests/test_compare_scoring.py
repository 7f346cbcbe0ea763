"""Honest comparisons and the threshold that belongs to the model: a multi-label model is scored at the
threshold it was trained with, `compare` refuses repeated names, and a collapsed run is marked, not averaged in."""

import json
import logging
import random

import pytest
from transformers import PretrainedConfig

from hf_longdoc.cli import main
from hf_longdoc.experiments.collapse import collapse_check
from hf_longdoc.experiments.compare import (
    CHECKPOINT_HEAD_RATE,
    CHECKPOINT_RATE,
    compare,
    parse_models,
    summarize,
)
from hf_longdoc.experiments.report import write_compare_report
from hf_longdoc.experiments.settings import CompareSettings
from hf_longdoc.inference.reading import decision_threshold


@pytest.fixture(scope="module")
def multi_label_run(tmp_path_factory):
    """A tiny multi-label Contextualizer trained through the CLI with --threshold 0.5, and its data file."""
    folder = tmp_path_factory.mktemp("issue51")
    rng = random.Random(0)
    rows = []
    for _ in range(40):
        labels = sorted(rng.sample(["A01B", "G06Q", "H04L"], rng.randint(1, 2)))
        words = [rng.choice(["alpha", "beta", "gamma", "delta"]) for _ in range(60)]
        rows.append({"text": " ".join(words + labels), "labels": labels})
    data = folder / "codes.jsonl"
    data.write_text("\n".join(json.dumps(row) for row in rows))
    output = folder / "model"
    assert main(["train", "--dataset", str(data), "--label-column", "labels", "--threshold", "0.5", "--epochs", "1",
                 "--max-length", "128", "--vocab-size", "200", "--output-dir", str(output), "--config",
                 "hidden_size=16", "rank=8", "num_hidden_layers=1"]) == 0
    return output, data


def test_the_threshold_is_saved_with_a_multi_label_model_and_evaluate_scores_at_it(multi_label_run, capsys):
    output, data = multi_label_run
    assert json.loads((output / "config.json").read_text())["multi_label_threshold"] == 0.5
    capsys.readouterr()
    assert main(["evaluate", str(output), "--dataset", str(data), "--label-column", "labels"]) == 0
    scored = json.loads(capsys.readouterr().out)
    assert scored["threshold"] == 0.5
    assert main(["evaluate", str(output), "--dataset", str(data), "--label-column", "labels", "--threshold",
                 "0.5"]) == 0
    explicit = json.loads(capsys.readouterr().out)
    scores = ("micro_precision", "micro_recall", "micro_f1", "threshold", "documents")
    assert {key: explicit[key] for key in scores} == {key: scored[key] for key in scores}  # 0.5 is what it scored at


def test_an_explicit_threshold_overrides_the_saved_one_and_says_so(multi_label_run, capsys, caplog):
    output, data = multi_label_run
    with caplog.at_level(logging.WARNING, logger="hf_longdoc.training.run"):
        assert main(["evaluate", str(output), "--dataset", str(data), "--label-column", "labels", "--threshold",
                     "0.3"]) == 0
    assert json.loads(capsys.readouterr().out)["threshold"] == 0.3
    assert any("--threshold 0.3 overrides the threshold 0.5" in record.getMessage() for record in caplog.records)


def test_decision_threshold_falls_back_to_the_default_and_checks_a_saved_one(caplog):
    assert decision_threshold(PretrainedConfig()) == 0.3  # a model saved without one (older, or not by `train`)
    assert decision_threshold(PretrainedConfig(multi_label_threshold=0.7)) == 0.7
    assert decision_threshold(PretrainedConfig(multi_label_threshold=0.7), 0.6) == 0.6
    assert decision_threshold(PretrainedConfig(), 0.6, multi_label=False) is None  # single-label: no threshold
    with pytest.raises(ValueError, match="multi_label_threshold"):
        decision_threshold(PretrainedConfig(multi_label_threshold=1.5))


@pytest.mark.parametrize("flag, names", [("--models", "contextualizer,contextualizer"), ("--baselines", "tfidf,tfidf")])
def test_compare_refuses_a_repeated_name_before_any_work(flag, names, tmp_path, capsys):
    output = tmp_path / "out"
    other = "--baselines" if flag == "--models" else "--models"
    tiny = ["--task-size", "16", "--task-words", "40,80", "--epochs", "1", "--evidence", "none", "--bench-lengths",
            "none", "--hidden-size", "16", "--num-layers", "1", "--max-length", "64"]  # short even if not refused
    assert main(["compare", flag, names, other, "", *tiny, "--output-dir", str(output)]) == 2
    err = capsys.readouterr().err
    assert flag in err and names.split(",")[0] in err and "more than once" in err and "Traceback" not in err
    assert not output.exists()
    parse_models(["slstm", "contextualizer"], ["tfidf", "bert-512"])  # distinct names are fine


def test_collapse_check_on_hand_made_predictions():
    truth = [0, 1] * 10  # balanced: the majority-class rate is .5
    assert collapse_check([0] * 20, truth)["collapsed"]  # one class for every document
    assert collapse_check([0] * 19 + [1], truth)["collapsed"]  # 95%, scoring .55: the majority rate + one document
    assert not collapse_check(truth, truth)["collapsed"]
    assert not collapse_check([1, 0] * 10, truth)["collapsed"]  # wrong every time, but not one class
    skewed = [0] * 18 + [1] * 2  # 90% of class 0 in truth: predicting it 90% of the time, right each time, is fine
    assert not collapse_check(skewed, skewed)["collapsed"]
    check = collapse_check([0] * 18 + [1, 1], [0] * 10 + [1] * 10)
    assert check["validation_top_share"] == 0.9 and check["validation_accuracy"] == 0.6 and not check["collapsed"]
    labels = [[1, 0, 1], [0, 1, 0], [1, 1, 0], [0, 0, 1]]  # multi-label: one label set for every document
    assert collapse_check([[1, 0, 0]] * 4, labels)["collapsed"]
    assert not collapse_check(labels, labels)["collapsed"]
    with pytest.raises(ValueError, match="predictions"):
        collapse_check([0, 1], [0, 1, 0])


def _row(model, seed, accuracy, collapsed):
    return {"model": model, "seed": seed, "parameters": 1000, "accuracy": accuracy, "macro_f1": accuracy,
            "micro_f1": accuracy, "train_seconds": 10.0 + seed, "inference_docs_per_s": 5.0,
            "train_peak_mib": 1.0, "inference_peak_mib": 1.0, "max_tokens": 512, "inverted_accuracy": accuracy,
            "validation_accuracy": 0.5 if collapsed else accuracy, "validation_majority_rate": 0.5,
            "validation_top_share": 1.0 if collapsed else 0.5, "collapsed": collapsed}


def test_the_summary_leaves_collapsed_seeds_out_of_the_scores_and_counts_them():
    rows = [_row("bert-chunks", 42, 0.738, False), _row("bert-chunks", 43, 0.5, True),
            _row("bert-chunks", 44, 0.838, False), _row("native", 42, 0.5, True)]
    chunks, native = summarize(rows)
    assert (chunks["seeds"], chunks["healthy"], chunks["collapsed"]) == (3, 2, 1)
    assert chunks["accuracy"] == pytest.approx(0.788) and chunks["inverted_accuracy"] == pytest.approx(0.788)
    assert chunks["train_seconds"] == pytest.approx(53.0)  # a cost: every seed's
    assert (native["healthy"], native["collapsed"], native["accuracy"]) == (0, 1, 0.5)


def test_the_report_marks_collapsed_runs(tmp_path):
    rows = [_row("bert-chunks", 42, 0.738, False), _row("bert-chunks", 43, 0.5, True),
            _row("bert-chunks", 44, 0.838, False), _row("native", 42, 0.5, True), _row("native", 43, 0.5, True),
            _row("tfidf", 42, 0.7, False), _row("tfidf", 43, 0.8, False)]
    write_compare_report(rows, summarize(rows), [], CompareSettings(), "reviews", "seeds 42-44", str(tmp_path))
    report = (tmp_path / "report.md").read_text()
    table = {line.split(" | ")[0].strip("| "): line.split(" | ") for line in report.splitlines()
             if line.startswith("| ") and not line.startswith("| model")}
    assert table["bert-chunks"][2] == "0.788 ± 0.071 (2 healthy), 1 collapsed"
    assert table["native"][2] == "0.500 ± 0.000 (all 2 collapsed)"
    assert table["tfidf"][2] == "0.750 ± 0.071"
    assert "**Collapsed runs**" in report and "bert-chunks seed 43" in report and "native seed 43" in report
    assert "tfidf seed" not in report
    around = CompareSettings(learning_rate=None, backbone="minilm")
    write_compare_report(rows, summarize(rows), [], around, "reviews", "seeds 42-44", str(tmp_path))
    report = (tmp_path / "report.md").read_text()
    assert "the baselines fine-tuning the checkpoint: 2e-05, their new head 0.001" in report


def test_compare_records_whether_each_run_collapsed(tmp_path):
    """Each row carries the validation check, and the TF-IDF baseline (which separates the built-in task's topics)
    is healthy."""
    (row,) = compare(models=[], baselines=["tfidf"], settings=CompareSettings(vocab_size=300), evidence=(),
                     task_size=40, task_words=(40, 80), bench_lengths=(), output_dir=str(tmp_path),
                     progress=lambda message: None)
    assert {"collapsed", "validation_accuracy", "validation_majority_rate", "validation_top_share"} <= set(row)
    assert row["collapsed"] is False and 0 < row["validation_top_share"] < 0.98
    assert "collapsed" in (tmp_path / "results.csv").read_text().splitlines()[0]


def test_checkpoint_baselines_fine_tune_gently_with_a_fast_head_unless_told_otherwise():
    """The recipe that keeps `bert-512-headtail` and `bert-chunks` from collapsing: the checkpoint at 2e-5, its new
    head at 1e-3; a given --learning-rate is every parameter's, a given --head-learning-rate the head's."""
    specs = parse_models(["segment_lm:att"], ["bert-512-headtail", "bert-chunks", "native", "bert-64"])
    around = CompareSettings(learning_rate=None, backbone="any-folder")
    assert [spec.head_learning_rate(around) for spec in specs] == [None] + [CHECKPOINT_HEAD_RATE] * 4
    assert (CHECKPOINT_RATE, CHECKPOINT_HEAD_RATE) == (2e-5, 1e-3)
    given = CompareSettings(learning_rate=1e-4, backbone="any-folder")
    assert [spec.head_learning_rate(given) for spec in specs] == [None] * 5
    head = CompareSettings(learning_rate=None, head_learning_rate=5e-4, backbone="any-folder")
    assert {spec.head_learning_rate(head) for spec in specs} == {5e-4}
    scratch = CompareSettings()  # from scratch the baselines are not checkpoints: no separate head rate
    assert specs[-1].head_learning_rate(scratch) is None
