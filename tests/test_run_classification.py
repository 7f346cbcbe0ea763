"""`examples/run_classification.py` runs as Transformers' own script runs: its flags, its steps, its output files, for
every family, from scratch and from a model it saved."""

import json
import os
import subprocess
import sys

import pytest

from hf_longdoc.catalog import FAMILY_NAMES

EXAMPLES = os.path.join(os.path.dirname(__file__), "..", "examples")
sys.path.insert(0, EXAMPLES)


def write_documents(path, count, offset=0):
    words = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu".split()
    with open(path, "w") as f:
        for i in range(offset, offset + count):
            label = ("sport", "business")[i % 2]
            text = " ".join(words[(i * 5 + j) % len(words)] for j in range(30 + i % 7))
            f.write(json.dumps({"text": f"{text} the {label} pages", "label": label}) + "\n")
    return str(path)


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("data")
    return {split: write_documents(folder / f"{split}.jsonl", count, offset)
            for split, count, offset in (("train", 24, 0), ("validation", 8, 100), ("test", 6, 200))}


def arguments(files, output_dir, *extra):
    return ["--train_file", files["train"], "--validation_file", files["validation"], "--test_file", files["test"],
            "--max_seq_length", "64", "--output_dir", str(output_dir), "--num_train_epochs", "1",
            "--per_device_train_batch_size", "4", "--report_to", "none", "--disable_tqdm", "true", *extra]


def test_the_script_trains_evaluates_and_predicts_then_reads_its_own_model(files, tmp_path):
    """Run as `python examples/run_classification.py --model_type ... --do_train --do_eval --do_predict`: the model,
    tokenizer and results land in --output_dir as Transformers' script leaves them (safetensors and JSON, no pickle);
    then `--model_name_or_path` that folder predicts the same labels."""
    script = os.path.join(EXAMPLES, "run_classification.py")
    run = tmp_path / "run"
    result = subprocess.run([sys.executable, script, "--model_type", "contextualizer", "--config_overrides",
                             "hidden_size=16,num_hidden_layers=1", "--do_train", "--do_eval", "--do_predict",
                             "--gradient_accumulation_steps", "2", *arguments(files, run)],
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    written = set(os.listdir(run))
    assert {"config.json", "model.safetensors", "tokenizer.json", "train_results.json", "eval_results.json",
            "predict_results.txt", "training_args.json"} <= written
    assert "training_args.bin" not in written
    assert json.loads((run / "config.json").read_text())["hidden_size"] == 16
    assert json.loads((run / "training_args.json").read_text())["gradient_accumulation_steps"] == 2
    predictions = (run / "predict_results.txt").read_text().splitlines()
    assert predictions[0] == "index\tprediction" and len(predictions) == 7
    assert {line.split("\t")[1] for line in predictions[1:]} <= {"sport", "business"}

    import run_classification

    again = tmp_path / "again"
    run_classification.main(["--model_name_or_path", str(run), "--test_file", files["test"], "--do_predict",
                             "--max_seq_length", "64", "--output_dir", str(again), "--report_to", "none"])
    assert (again / "predict_results.txt").read_text() == (run / "predict_results.txt").read_text()


def test_the_arguments_may_come_from_one_json_file(files, tmp_path):
    import run_classification

    settings = {"model_type": "contextualizer", "config_overrides": "hidden_size=16,num_hidden_layers=1",
                "train_file": files["train"], "validation_file": files["validation"], "max_seq_length": 64,
                "do_train": True, "do_eval": True, "output_dir": str(tmp_path / "run"), "num_train_epochs": 1,
                "report_to": "none", "disable_tqdm": True}
    path = tmp_path / "args.json"
    path.write_text(json.dumps(settings))
    trainer = run_classification.main([str(path)])
    assert trainer.args.num_train_epochs == 1 and (tmp_path / "run" / "eval_results.json").exists()


@pytest.mark.parametrize("argv, message", [
    (["--output_dir", "o"], "Pass at least one of --do_train"),
    (["--do_train", "--output_dir", "o"], "Pass --model_type"),
    (["--model_type", "slstm", "--do_train", "--output_dir", "o"], "--do_train needs --train_file"),
])
def test_missing_arguments_are_named_before_any_work(argv, message):
    import run_classification

    with pytest.raises(ValueError, match=message):
        run_classification.main(argv)


@pytest.mark.slow
@pytest.mark.parametrize("family", FAMILY_NAMES)
def test_every_family_runs_from_scratch(family, files, tmp_path):
    import run_classification

    run_classification.main(["--model_type", family, "--config_overrides", "hidden_size=32,num_hidden_layers=1",
                             "--do_train", "--do_eval", "--do_predict", *arguments(files, tmp_path / family)])
    assert (tmp_path / family / "predict_results.txt").exists()
    assert json.loads((tmp_path / family / "config.json").read_text())["model_type"] == family
