"""`examples/run_classification.py` runs as Transformers' own script runs: its flags, its steps, its output files, for
every family, from scratch and from a model it saved."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import torch

from hf_longdoc.utils.catalog import FAMILY_NAMES

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


# -- Transformers' own script on a saved folder of every family ------------------------------------------------------
# Config entries the tokenizer decides (`build_model` takes them from it), left out of the conformance suite's sizes
TOKEN_SETTINGS = {"vocab_size", "num_labels", "pad_token_id", "bos_token_id", "eos_token_id", "sep_token_id",
                  "cls_token_id"}


def save_tiny_family(name, folder, texts, label_names):
    """A tiny classifier of the family `name` (the conformance suite's sizes, tests/families.py) for the labels, with
    its tokenizer (WordPiece fitted on `texts`, or the family's own), saved as `hf-longdoc train` saves one."""
    from families import FAMILY_CASES
    from hf_longdoc.modeling import get_family
    from hf_longdoc.training.recipe import build_model

    family = get_family(name)
    tiny = next(case for case in FAMILY_CASES if case.family == name).tiny
    overrides = {key: value for key, value in tiny.items() if key not in TOKEN_SETTINGS}
    if "backbone_config" in overrides:  # the backbone's vocabulary is the tokenizer's too
        overrides["backbone_config"] = {k: v for k, v in overrides["backbone_config"].items() if k != "vocab_size"}
    tokenizer = family.tokenizer_for(family.build_config(**overrides), texts, vocab_size=120, max_length=256)
    torch.manual_seed(0)
    model = build_model(family, tokenizer, label_names, False, overrides)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return str(folder)


@pytest.fixture(scope="module")
def upstream_files(tmp_path_factory):
    """Small train / validation / test files in the json layout Transformers' script reads."""
    folder = tmp_path_factory.mktemp("upstream_data")
    return {split: write_documents(folder / f"{split}.json", count, offset)
            for split, count, offset in (("train", 8, 0), ("validation", 4, 100), ("test", 5, 200))}


@pytest.fixture(scope="module")
def saved_families(upstream_files, tmp_path_factory):
    folder = tmp_path_factory.mktemp("saved")
    texts = [json.loads(line)["text"] for line in open(upstream_files["train"])]
    return {name: save_tiny_family(name, folder / name, texts, ["business", "sport"]) for name in FAMILY_NAMES}


@pytest.mark.parametrize("name", FAMILY_NAMES)
def test_transformers_script_steps_predict_on_every_family(name, saved_families, upstream_files, tmp_path):
    """Trainer driven as Transformers' run_classification.py drives it (`Trainer.predict(...).predictions`, then
    `np.argmax(predictions, axis=1)`; `compute_metrics` as the script's) on a saved folder: `predictions` is the
    logits array for every family, the segment LM included (its `alpha`, `selected_segment` and `segment_mask` are
    `keys_to_ignore_at_inference`)."""
    from transformers import Trainer

    from upstream_run_classification import run_like_upstream

    captured = {}
    predict = Trainer.predict

    def recording(self, *args, **kwargs):
        captured["output"] = output = predict(self, *args, **kwargs)
        return output

    Trainer.predict = recording
    try:
        model, predictions, metrics = run_like_upstream(saved_families[name], upstream_files, str(tmp_path / "up"),
                                                        trust_remote_code=False)
    finally:
        Trainer.predict = predict
    logits = captured["output"].predictions
    assert isinstance(logits, np.ndarray) and logits.shape == (5, 2), type(logits)
    assert len(predictions) == 5 and set(predictions) <= {"business", "sport"}
    assert 0.0 <= metrics["eval_accuracy"] <= 1.0
    written = (tmp_path / "up" / "predict_results.txt").read_text().splitlines()
    assert written[0] == "index\tprediction" and len(written) == 6
    assert (tmp_path / "up" / "README.md").exists()  # the card Trainer writes


def test_every_extra_output_is_ignored_at_inference(saved_families):
    """What a classifier returns besides `loss` and `logits` (with the defaults: no hidden states or attentions
    asked for) is named in its config's `keys_to_ignore_at_inference`, in the package and in the remote-code copy
    `save_pretrained` writes beside the weights."""
    import ast

    from transformers import AutoConfig, AutoModelForSequenceClassification, AutoTokenizer

    for name, folder in saved_families.items():
        model = AutoModelForSequenceClassification.from_pretrained(folder).eval()
        inputs = AutoTokenizer.from_pretrained(folder)(["alpha beta gamma delta"] * 2, return_tensors="pt")
        with torch.no_grad():
            outputs = model(**inputs, labels=torch.tensor([0, 1]))
        ignored = getattr(model.config, "keys_to_ignore_at_inference", [])
        assert set(outputs.keys()) - {"loss", "logits"} <= set(ignored), (name, list(outputs.keys()))
        # the saved copy's class declares the same (read from its source: a copy may import its siblings)
        module, class_name = AutoConfig.from_pretrained(folder).auto_map["AutoConfig"].split(".")
        tree = ast.parse(open(os.path.join(folder, f"{module}.py")).read())
        body = next(node for node in tree.body if isinstance(node, ast.ClassDef) and node.name == class_name).body
        declared = [ast.literal_eval(node.value) for node in body if isinstance(node, ast.Assign)
                    and [getattr(target, "id", None) for target in node.targets] == ["keys_to_ignore_at_inference"]]
        assert declared == ([type(model.config).__dict__["keys_to_ignore_at_inference"]]
                            if "keys_to_ignore_at_inference" in type(model.config).__dict__ else []), name


@pytest.mark.slow
def test_transformers_script_steps_without_hf_longdoc(saved_families, upstream_files, tmp_path):
    """The same steps where hf_longdoc cannot be imported, with `trust_remote_code=True` (what the upstream script's
    `--trust_remote_code` does): the saved folders' own code, for every family, with padding to max_seq_length (the
    script's default) and dynamic padding (`--pad_to_max_length False`)."""
    from fresh_process import run_without_hf_longdoc

    code = f"""
        import json
        sys.path.insert(0, {os.path.dirname(os.path.abspath(__file__))!r})
        from upstream_run_classification import run_like_upstream
        folders, files, out = json.loads(sys.argv[1]), json.loads(sys.argv[2]), sys.argv[3]
        for name, folder in folders.items():
            for pad in (True, False):
                model, predictions, metrics = run_like_upstream(folder, files, f"{{out}}/{{name}}-{{pad}}",
                                                                pad_to_max_length=pad)
                assert "transformers_modules" in type(model).__module__, type(model).__module__
                assert len(predictions) == 5, (name, predictions)
        print("ok")
    """
    result = run_without_hf_longdoc(code, json.dumps(saved_families), json.dumps(upstream_files), tmp_path / "up",
                                    workdir=tmp_path, timeout=600)
    assert result.stdout.strip().endswith("ok")


# -- the package's script takes the upstream command line ------------------------------------------------------------
# The fields of the upstream script's ModelArguments and DataTrainingArguments (run_classification.py in
# huggingface/transformers, read at 005c23ae), and Transformers 4's --overwrite_output_dir
UPSTREAM_FIELDS = (
    "model_name_or_path", "config_name", "tokenizer_name", "cache_dir", "use_fast_tokenizer", "model_revision",
    "token", "trust_remote_code", "ignore_mismatched_sizes", "dataset_name", "dataset_config_name", "do_regression",
    "text_column_names", "text_column_delimiter", "train_split_name", "validation_split_name", "test_split_name",
    "remove_splits", "remove_columns", "label_column_name", "max_seq_length", "preprocessing_num_workers",
    "overwrite_cache", "pad_to_max_length", "shuffle_train_dataset", "shuffle_seed", "max_train_samples",
    "max_eval_samples", "max_predict_samples", "metric_name", "train_file", "validation_file", "test_file",
    "overwrite_output_dir",
)


def test_every_upstream_flag_is_taken():
    import dataclasses

    import run_classification

    taken = {f.name for kind in (run_classification.ModelArguments, run_classification.DataTrainingArguments,
                                 run_classification.OutputArguments) for f in dataclasses.fields(kind)}
    assert set(UPSTREAM_FIELDS) <= taken, sorted(set(UPSTREAM_FIELDS) - taken)


def upstream_command(model, files, output_dir, *extra):
    """The command line of the clients report (Transformers' script on a saved folder), with more upstream flags."""
    return ["--model_name_or_path", model, "--trust_remote_code", "--train_file", files["train"],
            "--validation_file", files["validation"], "--test_file", files["test"], "--text_column_names", "text",
            "--label_column_name", "label", "--do_train", "--do_eval", "--do_predict", "--max_seq_length", "64",
            "--num_train_epochs", "1", "--learning_rate", "1e-3", "--per_device_train_batch_size", "4",
            "--output_dir", str(output_dir), "--report_to", "none", "--disable_tqdm", "true", *extra]


@pytest.mark.slow
def test_the_upstream_command_line_runs_on_a_saved_folder(saved_families, upstream_files, tmp_path):
    """An upstream command line (with --metric_name, --pad_to_max_length, --shuffle_train_dataset, --max_*_samples,
    --overwrite_output_dir, --save_strategy steps) trains, evaluates and predicts; the folder holds the package's card
    with the test scores, JSON arguments, and no pickle and no checkpoint (Trainer's are removed once the run has
    succeeded); the staging folder is gone."""
    import run_classification

    out = tmp_path / "out"
    run_classification.main(upstream_command(
        saved_families["segment_lm"], upstream_files, out, "--metric_name", "accuracy", "--pad_to_max_length",
        "--shuffle_train_dataset", "--max_train_samples", "6", "--max_eval_samples", "3", "--max_predict_samples", "4",
        "--overwrite_output_dir", "--save_strategy", "steps", "--save_steps", "1"))
    written = {os.path.relpath(os.path.join(root, name), out) for root, _, files in os.walk(out) for name in files}
    assert {"model.safetensors", "config.json", "README.md", "training_args.json", "train_results.json",
            "eval_results.json", "predict_results.txt", "all_results.json", "trainer_state.json"} <= written
    assert not [name for name in written if name.endswith((".bin", ".pt", ".pth", ".pkl")) or "checkpoint-" in name]
    assert not (tmp_path / ".out.partial").exists()
    assert json.loads((out / "train_results.json").read_text())["train_samples"] == 6
    assert json.loads((out / "eval_results.json").read_text())["eval_samples"] == 3
    assert len((out / "predict_results.txt").read_text().splitlines()) == 5
    assert json.loads((out / "training_args.json").read_text())["output_dir"] == str(out)
    card = (out / "README.md").read_text()
    assert "segment_lm" in card and "Test split" in card and "accuracy" in card


def test_with_a_validation_file_every_training_document_trains(files, tmp_path, caplog):
    """SIL-8: with --validation_file and no --do_predict nothing is carved; with --do_predict and no --test_file only
    the test split is held out (20%), and the log says how many."""
    import run_classification

    common = ["--model_type", "contextualizer", "--config_overrides", "hidden_size=16,num_hidden_layers=1",
              "--train_file", files["train"], "--validation_file", files["validation"], "--max_seq_length", "64",
              "--num_train_epochs", "1", "--report_to", "none", "--disable_tqdm", "true", "--do_train", "--do_eval"]
    run_classification.main([*common, "--save_strategy", "epoch", "--output_dir", str(tmp_path / "all")])
    assert json.loads((tmp_path / "all" / "train_results.json").read_text())["train_samples"] == 24
    # UX-21: Trainer's checkpoint (optimizer.pt, rng_state.pth, ...) is removed once the run has succeeded
    left = [name for _, folders, names in os.walk(tmp_path / "all") for name in folders + names]
    assert not [name for name in left if name.startswith("checkpoint-") or name.endswith((".bin", ".pt", ".pth"))]
    with caplog.at_level("WARNING"):
        run_classification.main([*common, "--do_predict", "--output_dir", str(tmp_path / "held")])
    assert json.loads((tmp_path / "held" / "train_results.json").read_text())["train_samples"] == 19
    assert "5 of the 24 documents of the training data are held out as the test split" in caplog.text
    assert "validation split" not in caplog.text


@pytest.mark.slow
def test_a_rerun_never_mixes_two_runs(saved_families, upstream_files, tmp_path):
    """SIL-9: a training run replaces the earlier run's files (its predict_results.txt too) and keeps the user's; a
    user's file with a name the run writes is refused before any work unless --overwrite_output_dir; a run that only
    evaluates removes the earlier predictions it does not replace."""
    import run_classification

    out = tmp_path / "out"
    model = saved_families["contextualizer"]
    run_classification.main(upstream_command(model, upstream_files, out))
    (out / "notes.txt").write_text("mine")
    run_classification.main([arg for arg in upstream_command(model, upstream_files, out) if arg != "--do_predict"])
    assert not (out / "predict_results.txt").exists() and (out / "notes.txt").read_text() == "mine"

    evaluated = tmp_path / "evaluated"
    run_classification.main(["--model_name_or_path", str(out), "--test_file", upstream_files["test"], "--do_predict",
                             "--max_seq_length", "64", "--output_dir", str(evaluated), "--report_to", "none"])
    run_classification.main(["--model_name_or_path", str(out), "--validation_file", upstream_files["validation"],
                             "--do_eval", "--max_seq_length", "64", "--output_dir", str(evaluated),
                             "--report_to", "none"])
    assert (evaluated / "eval_results.json").exists() and not (evaluated / "predict_results.txt").exists()

    users = tmp_path / "users"
    users.mkdir()
    (users / "config.json").write_text("{}")
    with pytest.raises(ValueError, match="config.json.*--overwrite_output_dir"):
        run_classification.main(upstream_command(model, upstream_files, users))
    run_classification.main([*upstream_command(model, upstream_files, users), "--overwrite_output_dir"])
    assert json.loads((users / "config.json").read_text())["model_type"] == "contextualizer"


def test_an_interrupted_run_is_named_with_this_scripts_flags(files, tmp_path):
    """A run cut short leaves its checkpoint in `.NAME.partial`; the next run into the folder is refused before any
    work, naming --resume_from_checkpoint and --overwrite_output_dir (the package's RunFolder, with these flags)."""
    import run_classification

    checkpoint = tmp_path / ".out.partial" / "checkpoint-3"
    checkpoint.mkdir(parents=True)
    (checkpoint / "trainer_state.json").write_text("{}")
    argv = ["--model_type", "contextualizer", "--train_file", files["train"], "--do_train", "--output_dir",
            str(tmp_path / "out"), "--report_to", "none"]
    with pytest.raises(ValueError, match=r"checkpoint-3\); pass --resume_from_checkpoint .* or --overwrite_output_dir"):
        run_classification.main(argv)
    with pytest.raises(ValueError, match="either --resume_from_checkpoint"):
        run_classification.main([*argv, "--resume_from_checkpoint", str(checkpoint), "--overwrite_output_dir"])
    assert checkpoint.is_dir()  # kept: nothing was discarded


def write_float_labels(path):
    with open(path, "w") as f:
        for i in range(12):
            f.write(json.dumps({"text": f"document number {i}", "label": round(0.5 + 0.137 * i, 3)}) + "\n")
    return str(path)


def test_float_labels_are_refused_as_regression_before_any_work(tmp_path, capsys):
    """CRASH-6 / UX-17: a float label column is regression, said in one line, rc 2, before any split is carved or
    any model built (the data layer says it, so `hf-longdoc train` says it too); whole numbers stay class ids."""
    import run_classification

    from hf_longdoc.data import DatasetError, load_text_classification_dataset

    floats = write_float_labels(tmp_path / "reg.jsonl")
    with pytest.raises(DatasetError, match=r"0\.5, 0\.637, .*a regression target"):
        load_text_classification_dataset(floats)
    csv_file = tmp_path / "reg.csv"
    csv_file.write_text("text,label\n" + "".join(f"doc {i},{0.5 + i / 8:.3f}\n" for i in range(12)))
    with pytest.raises(DatasetError, match="regression"):
        load_text_classification_dataset(str(csv_file))
    whole = tmp_path / "whole.jsonl"
    whole.write_text("".join(json.dumps({"text": f"doc {i}", "label": float(i % 2)}) + "\n" for i in range(12)))
    assert load_text_classification_dataset(str(whole))[1] == ["0", "1"]

    out = tmp_path / "out"
    capsys.readouterr()
    code = run_classification.cli(["--model_type", "contextualizer", "--train_file", floats, "--do_train",
                                   "--output_dir", str(out), "--report_to", "none"])
    err = capsys.readouterr().err  # datasets' progress bars, then the one line
    assert code == 2 and "Traceback" not in err
    assert [line for line in err.splitlines() if "error" in line] == [err.strip().splitlines()[-1]]
    assert err.strip().splitlines()[-1].startswith("run_classification.py: error: The labels are numbers")
    assert not out.exists() and not (tmp_path / ".out.partial").exists()
    assert run_classification.cli(["--model_type", "contextualizer", "--train_file", floats, "--do_train",
                                   "--do_regression", "--output_dir", str(out)]) == 2
    assert "--do_regression" in capsys.readouterr().err

    from hf_longdoc.cli import main as hf_longdoc

    assert hf_longdoc(["train", "--model", "contextualizer", "--dataset", floats, "--output-dir", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.strip().splitlines()[-1].startswith("hf-longdoc train: error: The labels are numbers")


@pytest.mark.parametrize("argv, message", [
    (["--output_dir", "o"], "Pass at least one of --do_train"),
    (["--model_type", "slstm", "--do_train", "--output_dir", "o", "--not_a_flag", "1"], "not used by the"),
    (["--model_type", "slstm", "--do_train", "--train_split_name", "x", "--output_dir", "o"], "--dataset_name"),
    (["--model_type", "slstm", "--text_column_names", "a", "--text_column_name", "b", "--output_dir", "o"],
     "name different columns"),
])
def test_user_errors_are_one_line_and_exit_code_2(argv, message, capsys):
    """UX-20: as `hf-longdoc` prints them."""
    import run_classification

    assert run_classification.cli(argv) == 2
    err = capsys.readouterr().err
    assert message in err and err.startswith("run_classification.py: error: ") and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1


def test_help_lists_the_upstream_flags(capsys):
    import run_classification

    with pytest.raises(SystemExit) as stop:
        run_classification.cli(["--help"])
    out = capsys.readouterr().out
    assert stop.value.code == 0 and "--text_column_names" in out and "--overwrite_output_dir" in out
    assert "10% of train" in out


def test_dataset_name_offline_is_refused_in_one_line(tmp_path, capsys):
    """--dataset_name with the Hub offline (HF_HUB_OFFLINE, set for the tests) and nothing in the cache: one line
    naming the flag and the files to pass instead."""
    import run_classification

    code = run_classification.cli(["--model_type", "contextualizer", "--dataset_name", "nobody/no-such-dataset",
                                   "--dataset_config_name", "default", "--do_train", "--output_dir",
                                   str(tmp_path / "o"), "--report_to", "none"])
    err = capsys.readouterr().err
    assert code == 2 and "--dataset_name 'nobody/no-such-dataset'" in err and "--train_file" in err
    assert len(err.strip().splitlines()) == 1
