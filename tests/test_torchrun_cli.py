"""The CLI under `torchrun --nproc_per_node 2` (gloo, CPU), launched as a user launches it: one run is written, by
the main process, and the other process trains beside it instead of being refused by the output folder's lock."""

import json
import os

import pytest

from torchrun_cli import launch_cli

TINY_RUN = ["--task-size", "40", "--task-words", "100,200", "--max-length", "256", "--epochs", "1"]


@pytest.mark.slow
def test_torchrun_train_writes_one_run(tmp_path):
    result = launch_cli(["train", "--model", "contextualizer", *TINY_RUN, "--config", "hidden_size=32",
                         "--output-dir", "run"], tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "Another hf-longdoc run is writing" not in result.stderr
    run = tmp_path / "run"
    assert {"config.json", "model.safetensors", "metrics.json", "tokenizer.json"} <= set(os.listdir(run))
    assert not (tmp_path / ".run.partial").exists()  # committed: nothing staged is left
    metrics = json.loads((run / "metrics.json").read_text())
    arguments = json.loads((run / "training_args.json").read_text())
    assert metrics["sizes"]["train"] > 0 and arguments["output_dir"] == str(run)
    assert result.stdout.count("Saved model") == 1  # the main process reports, once


@pytest.mark.slow
def test_torchrun_train_refusal_reaches_every_process(tmp_path):
    """An output folder the main process refuses stops both processes with its message, instead of leaving the
    other one waiting for it."""
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "config.json").write_text("{}")  # the user's file, which a run would replace
    result = launch_cli(["train", "--model", "contextualizer", *TINY_RUN, "--output-dir", "run"], tmp_path)
    assert result.returncode != 0
    assert "which hf-longdoc did not write" in result.stderr
    assert (tmp_path / "run" / "config.json").read_text() == "{}"


@pytest.mark.slow
def test_torchrun_compare_writes_one_report(tmp_path):
    result = launch_cli(["compare", "--models", "contextualizer", "--baselines", "", "--seeds", "1", *TINY_RUN,
                         "--hidden-size", "32", "--evidence", "none", "--bench-lengths", "none",
                         "--output-dir", "cmp"], tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    assert {"report.md", "results.csv"} <= set(os.listdir(tmp_path / "cmp"))
    assert result.stdout.count("contextualizer") >= 1
