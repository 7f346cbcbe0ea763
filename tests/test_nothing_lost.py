"""Nothing lost, nothing leaked, nothing silently wrong: the paths around the models, run as a user hits them.

A rerun replaces an earlier run only when it has succeeded (a killed rerun leaves it byte for byte), files the
package did not write survive, a live run's folder is locked, a diverging run saves nothing, every number is checked
before any work, what the data decides cannot be overridden, `push` uploads an allow-list, and no command writes over
a file it did not write.
"""

import hashlib
import json
import os
import signal
import subprocess
import sys
import time

import pytest
import torch
from transformers import AutoModelForSequenceClassification, AutoTokenizer, BertConfig, BertModel

from hf_longdoc.cli import main
from hf_longdoc.saving.run_folder import MANIFEST, RunFolder, check_files_free, read_manifest, record_outputs

TINY = ["--model", "contextualizer", "--task-size", "20", "--epochs", "1", "--max-length", "256", "--vocab-size",
        "500", "--config", "hidden_size=16", "rank=8", "num_hidden_layers=1"]


def digests(folder):
    """sha256 of every file under `folder`, by relative path."""
    found = {}
    for root, _, names in os.walk(folder):
        for name in names:
            path = os.path.join(root, name)
            with open(path, "rb") as f:
                found[os.path.relpath(path, folder)] = hashlib.sha256(f.read()).hexdigest()
    return found


def cli(*argv, timeout=300):
    """`hf-longdoc ARGV` in a new process, as a user runs it."""
    env = dict(os.environ, HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    return subprocess.run([sys.executable, "-m", "hf_longdoc.cli", *map(str, argv)], capture_output=True, text=True,
                          timeout=timeout, env=env)


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """A finished tiny run, never modified by the tests (they copy it)."""
    output = tmp_path_factory.mktemp("runs") / "model"
    assert main(["train", *TINY, "--output-dir", str(output)]) == 0
    return output


def copy_of(run, tmp_path, name="model"):
    import shutil

    target = tmp_path / name
    shutil.copytree(run, target)
    return target


def test_a_run_records_its_files_and_split_seed(run):
    manifest = read_manifest(run)
    assert {"config.json", "model.safetensors", "README.md", "metrics.json"} <= set(manifest["run"])
    assert json.loads((run / "metrics.json").read_text())["split_seed"] == 42
    assert json.loads((run / "training_args.json").read_text())["output_dir"] == str(run)  # not the staging folder
    assert not any(name.startswith(".model.") for name in os.listdir(run.parent))  # no staging, lock or backup left


def complete_checkpoints(staging):
    """Checkpoint folders whose trainer_state.json (Trainer writes it last) reads as JSON."""
    def complete(folder):
        try:
            return bool(json.loads((folder / "trainer_state.json").read_text()))
        except (OSError, ValueError):
            return False
    folders = staging.iterdir() if staging.is_dir() else []
    return [folder for folder in folders if folder.name.startswith("checkpoint-") and complete(folder)]


@pytest.mark.slow
def test_a_killed_rerun_leaves_the_earlier_model_intact_and_resume_checks_the_checkpoint(run, tmp_path, capsys):
    target = copy_of(run, tmp_path)
    before = digests(target)
    long_run = ["train", "--model", "contextualizer", "--task-size", "40", "--epochs", "30", "--max-length", "256",
                "--vocab-size", "500", "--config", "hidden_size=16", "rank=8", "num_hidden_layers=1"]
    env = dict(os.environ, HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    process = subprocess.Popen([sys.executable, "-m", "hf_longdoc.cli", *long_run, "--output-dir", str(target)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    staging = tmp_path / ".model.partial"
    deadline = time.time() + 240
    while not complete_checkpoints(staging):  # written in full: a kill 0.3 s after the folder appears can cut it
        assert process.poll() is None and time.time() < deadline, "the rerun ended before its first checkpoint"
        time.sleep(0.2)
    time.sleep(0.3)  # mid-training, past a checkpoint
    process.send_signal(signal.SIGKILL)
    process.wait()
    assert digests(target) == before  # byte for byte, manifest included
    assert AutoModelForSequenceClassification.from_pretrained(target).config.model_type == "contextualizer"
    # --resume checks the interrupted run against this one before training: another family, another width, another
    # schedule (in this process: a refusal needs no fresh one, and each would start Python and torch again, 7 s)
    capsys.readouterr()
    assert main(["train", "--model", "slstm", "--task-size", "40", "--max-length", "256", "--vocab-size", "500",
                 "--output-dir", str(target), "--resume"]) == 2
    assert "'contextualizer'" in capsys.readouterr().err
    wider = [arg if arg != "hidden_size=16" else "hidden_size=24" for arg in long_run]
    assert main([*wider, "--output-dir", str(target), "--resume"]) == 2
    err = capsys.readouterr().err
    assert "config_overrides" in err and "'hidden_size': 24" in err
    assert main([*long_run, "--learning-rate", "0.05", "--output-dir", str(target), "--resume"]) == 2
    err = capsys.readouterr().err
    assert "learning_rate: 0.002 there, 0.05 here" in err, err[-2000:]
    assert digests(target) == before
    # the same command with --resume continues the interrupted run from its last complete checkpoint
    partial = max(complete_checkpoints(staging), key=lambda p: int(p.name[11:]))
    for step, files in ((1, {"optimizer.pt": b"cut"}), (2, {"optimizer.pt": b"", "trainer_state.json": b'{"glo'})):
        torn = staging / f"checkpoint-{int(partial.name[11:]) + step}"  # cut while it was written: skipped
        torn.mkdir(exist_ok=True)
        for name, content in files.items():
            (torn / name).write_bytes(content)
    interrupted_vocabulary = AutoTokenizer.from_pretrained(partial).get_vocab()
    resumed = cli(*long_run, "--output-dir", target, "--resume", timeout=600)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert f"from {partial}" in resumed.stderr and not staging.exists()
    assert f"tokenizer of the interrupted run ({partial})" in resumed.stderr  # its weights read those ids
    assert AutoTokenizer.from_pretrained(target).get_vocab() == interrupted_vocabulary
    assert json.loads((target / "metrics.json").read_text())["sizes"]["train"] == 40
    # a new run without --resume discards an interrupted one and replaces the earlier model when it succeeds
    assert main(["train", *TINY, "--output-dir", str(target), "--seed", "7"]) == 0
    assert json.loads((target / "metrics.json").read_text())["split_seed"] == 7 and not staging.exists()


def test_user_files_survive_reruns_and_a_users_run_file_needs_overwrite(run, tmp_path, capsys):
    folder = copy_of(run, tmp_path)
    (folder / "notes.txt").write_text("my notes")
    (folder / "analysis.py").write_text("print('my script')\n")  # a script is not a family source file
    (folder / "eval").mkdir()
    (folder / "eval" / "scores.csv").write_text("a,b\n1,2\n")
    nested = copy_of(run, folder, "nested-run")  # a complete run inside the folder
    nested_before = digests(nested)
    assert main(["train", "--model", "slstm", "--task-size", "20", "--epochs", "1", "--max-length", "256",
                 "--vocab-size", "500", "--config", "hidden_size=16", "--output-dir", str(folder)]) == 0
    files = os.listdir(folder)
    assert "modeling_slstm.py" in files and not any("contextualizer" in name for name in files)  # the run replaced
    assert (folder / "notes.txt").read_text() == "my notes" and (folder / "eval" / "scores.csv").exists()
    assert digests(nested) == nested_before and (folder / "analysis.py").exists()
    # the user's own card: refused before any work, named, unless --overwrite (which touches nothing else)
    (folder / "README.md").write_text("# my edited card")
    before = digests(folder)
    assert main(["train", *TINY, "--output-dir", str(folder)]) == 2
    err = capsys.readouterr().err
    assert "README.md" in err and "--overwrite" in err and "Traceback" not in err
    assert digests(folder) == before
    assert main(["train", *TINY, "--output-dir", str(folder), "--overwrite"]) == 0
    assert "my edited card" not in (folder / "README.md").read_text()
    assert (folder / "notes.txt").read_text() == "my notes" and digests(nested) == nested_before
    # a folder that is not a run: a user file named like a run file is refused, other files are kept
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "config.json").write_text("{}")
    assert main(["train", *TINY, "--output-dir", str(mine)]) == 2
    assert "config.json" in capsys.readouterr().err and (mine / "config.json").read_text() == "{}"


def test_a_live_run_locks_its_folder(tmp_path, capsys):
    target = tmp_path / "model"
    with RunFolder(target):  # what a live `train` holds
        assert main(["train", *TINY, "--output-dir", str(target)]) == 2
        err = capsys.readouterr().err
        assert "Another hf-longdoc run is writing" in err and "Traceback" not in err
    assert not target.exists()


def test_an_interrupted_commit_is_finished_on_the_next_run(run, tmp_path):
    """Cut between the two renames of a commit: the next run restores the earlier run (or the user's files)."""
    previous = copy_of(run, tmp_path, ".model.previous")
    (previous / "notes.txt").write_text("mine")
    before = digests(previous)
    with RunFolder(tmp_path / "model"):
        pass
    assert digests(tmp_path / "model") == before and not previous.exists()


def test_a_failed_run_leaves_no_staging_and_a_folder_that_cannot_be_written_is_refused_first(tmp_path, capsys):
    a_file = tmp_path / "file.txt"
    a_file.write_text("x")
    for output in (a_file, a_file / "model"):
        # the output folder is checked before the (missing) dataset is read
        assert main(["train", *TINY, "--dataset", str(tmp_path / "missing.jsonl"), "--output-dir", str(output)]) == 2
        err = capsys.readouterr().err
        assert "output_dir" in err and "missing.jsonl" not in err and "Traceback" not in err
    assert a_file.read_text() == "x"
    assert main(["train", *TINY, "--dataset", str(tmp_path / "missing.jsonl"), "--output-dir",
                 str(tmp_path / "m")]) == 2
    assert sorted(os.listdir(tmp_path)) == ["file.txt"]  # no folder, staging or lock left behind


def test_a_diverging_run_is_an_error_and_nothing_is_saved(tmp_path, capsys):
    output = tmp_path / "model"
    assert main(["train", "--model", "contextualizer", "--task-size", "40", "--epochs", "3", "--max-length", "256",
                 "--vocab-size", "500", "--config", "hidden_size=16", "rank=8", "num_hidden_layers=1",
                 "--learning-rate", "1e4", "--output-dir", str(output)]) == 2
    err = capsys.readouterr().err
    assert "diverged" in err and "learning_rate=10000" in err and "Traceback" not in err
    assert not output.exists() and os.listdir(tmp_path) == []


@pytest.mark.parametrize("argv,flag", [
    (["train", "--epochs", "inf"], "--epochs"),
    (["train", "--epochs", "nan"], "--epochs"),
    (["train", "--threshold", "1.5"], "--threshold"),
    (["train", "--threshold", "0"], "--threshold"),
    (["train", "--max-length", "2"], "--max-length"),
    (["train", "--seed", "-1"], "--seed"),
    (["train", "--learning-rate", "nan"], "--learning-rate"),
    (["train", "--vocab-size", "0"], "--vocab-size"),
    (["evaluate", "m", "--batch-size", "0"], "--batch-size"),
    (["attention-map", "m", "--text", "a", "--top", "-3"], "--top"),
    (["bench", "--attention-dropout", "1.5"], "--attention-dropout"),
    (["bench", "--warmup", "-1"], "--warmup"),
    (["compare", "--epochs", "inf"], "--epochs"),
    (["compare", "--seeds", "0"], "--seeds"),
])
def test_every_number_is_checked_with_its_flag_named(argv, flag, tmp_path, capsys):
    if argv[0] == "train":
        argv = [*argv, "--output-dir", str(tmp_path / "out")]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert flag in err and "Traceback" not in err and not (tmp_path / "out").exists()


def test_python_callers_get_the_same_checks(tmp_path):
    from hf_longdoc.experiments.compare import compare
    from hf_longdoc.experiments.settings import CompareSettings
    from hf_longdoc.training.evaluation import evaluate_model
    from hf_longdoc.training.run import train

    with pytest.raises(ValueError, match="epochs"):
        train(output_dir=str(tmp_path / "out"), epochs=float("inf"))
    with pytest.raises(ValueError, match="threshold"):
        evaluate_model(str(tmp_path), threshold=2)
    with pytest.raises(ValueError, match="max_length"):
        compare(settings=CompareSettings(max_length=2), output_dir=str(tmp_path / "cmp"))
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("override", ['id2label={"0": "topic_1", "1": "topic_0"}', 'label2id={"a": 0}', "num_labels=7",
                                      "problem_type=multi_label_classification"])
def test_what_the_data_decides_cannot_be_overridden(override, tmp_path, capsys):
    assert main(["train", "--config", override, "--output-dir", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert override.split("=")[0] in err and "dataset decides" in err and not (tmp_path / "out").exists()
    assert main(["compare", "--config", f"slstm.{override}", "--models", "slstm", "--baselines", "",
                 "--output-dir", str(tmp_path / "cmp")]) == 2
    assert "dataset decides" in capsys.readouterr().err


def test_a_folder_without_a_tokenizer_is_refused(tmp_path, capsys):
    backbone = tmp_path / "bert-without-tokenizer"
    BertModel(BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                         intermediate_size=37)).save_pretrained(backbone)
    for argv in (["--model", "segment_lm", "--backbone", str(backbone)],
                 ["--model", "sparse_longformer", "--backbone", str(backbone)],
                 ["--model", "contextualizer", "--tokenizer", str(backbone)]):
        assert main(["train", *argv, "--output-dir", str(tmp_path / "out")]) == 2
        err = capsys.readouterr().err
        assert "no usable tokenizer" in err and str(backbone) in err and "Traceback" not in err
        assert not (tmp_path / "out").exists()


def write_jsonl(path, rows):
    path.write_text("\n".join(json.dumps(row) for row in rows) + "\n")


def test_labels_that_differ_only_by_case_are_an_error_and_by_whitespace_are_merged(tmp_path, capsys, caplog):
    from hf_longdoc.data import load_text_classification_dataset

    words = ["match goal team season", "market shares profit bank", "film actor award music"]
    rows = [{"text": f"{words[i % 3]} report number {i}.", "label": ["sport", "Sport", "film"][i % 3]}
            for i in range(30)]
    write_jsonl(tmp_path / "case.jsonl", rows)
    assert main(["train", *TINY, "--dataset", str(tmp_path / "case.jsonl"), "--output-dir", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "'Sport', 'sport'" in err and "only by case" in err
    rows = [{**row, "label": ["sport", " sport ", "film"][i % 3]} for i, row in enumerate(rows)]
    write_jsonl(tmp_path / "space.jsonl", rows)
    _, names, _ = load_text_classification_dataset(str(tmp_path / "space.jsonl"))
    assert names == ["film", "sport"] and "' sport ' -> 'sport'" in caplog.text


def test_evaluate_split_uses_the_seed_the_model_was_trained_with(run, capsys):
    assert main(["evaluate", str(run), "--split", "test", "--seed", "7"]) == 2
    err = capsys.readouterr().err
    assert "--seed" in err and "42" in err and "trained on" in err
    recorded = json.loads((run / "metrics.json").read_text())["test"]
    for argv in (["--split", "test"], []):  # the built-in task's test split as `train` drew it: the same documents
        assert main(["evaluate", str(run), *argv]) == 0
        scored = json.loads(capsys.readouterr().out)
        assert scored["accuracy"] == pytest.approx(recorded["accuracy"]) and scored["documents"] == 40


def test_push_uploads_an_allow_list_and_keeps_an_edited_card(run, tmp_path, capsys, monkeypatch):
    folder = copy_of(run, tmp_path)
    (folder / ".env").write_text("HF_TOKEN=hf_secret")
    (folder / "train.jsonl").write_text('{"text": "private", "label": "a"}\n')
    (folder / "notes.txt").write_text("notes")
    (folder / "checkpoint-3").mkdir()
    (folder / "checkpoint-3" / "model.safetensors").write_text("x")
    staging = tmp_path / "preview"
    assert main(["push", str(folder), "--repo-id", "someone/m", "--dry-run", "--dry-run-dir", str(staging)]) == 0
    out = capsys.readouterr().out
    listed = [line.strip() for line in out.splitlines() if line.startswith("  ")]
    assert sorted(listed) == sorted(os.listdir(staging))
    assert set(listed) == {"README.md", "config.json", "configuration_contextualizer.py", "metrics.json",
                           "model.safetensors", "modeling_contextualizer.py", "tokenizer.json",
                           "tokenizer_config.json"}
    assert "(private)" in out and "someone/m" in (staging / "README.md").read_text()
    # a card the user edited is uploaded as it is, unless --replace-card
    (folder / "README.md").write_text("# My hand-written card")
    for extra, kept in (([], True), (["--replace-card"], False)):
        preview = tmp_path / f"preview-{kept}"
        assert main(["push", str(folder), "--repo-id", "someone/m", "--dry-run", "--dry-run-dir", str(preview),
                     *extra]) == 0
        assert ((preview / "README.md").read_text() == "# My hand-written card") == kept
    capsys.readouterr()

    def no_upload(*args, **kwargs):
        raise AssertionError("push tried to reach the Hub")

    monkeypatch.setattr("huggingface_hub.HfApi.create_repo", no_upload)
    monkeypatch.setattr("huggingface_hub.HfApi.upload_folder", no_upload)
    # --dry-run-dir alone is not a dry run: an error, and nothing is uploaded or written
    assert main(["push", str(folder), "--repo-id", "someone/m", "--dry-run-dir", str(tmp_path / "d")]) == 2
    assert "--dry-run" in capsys.readouterr().err and not (tmp_path / "d").exists()
    # no Hub: a clear error before anything is staged (offline switch, then an unreachable endpoint)
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_OFFLINE", True)
    assert main(["push", str(folder), "--repo-id", "someone/m"]) == 2
    assert "HF_HUB_OFFLINE" in capsys.readouterr().err
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_OFFLINE", False)
    monkeypatch.setattr("huggingface_hub.constants.ENDPOINT", "http://127.0.0.1:9")
    monkeypatch.setenv("HF_TOKEN", "hf_not_a_real_token")
    assert main(["push", str(folder), "--repo-id", "someone/m"]) == 2
    err = capsys.readouterr().err
    assert "cannot reach the Hub" in err and "Traceback" not in err


def test_outputs_are_never_written_over_a_users_file(tmp_path, capsys):
    prefix = tmp_path / "bench"
    (tmp_path / "bench.csv").write_text("my table")
    bench = ["bench", "--models", "contextualizer", "--lengths", "16", "--hidden-size", "16", "--num-layers", "1",
             "--num-heads", "2", "--repeats", "1", "--output", str(prefix)]
    assert main(bench) == 2
    err = capsys.readouterr().err
    assert "bench.csv" in err and "--overwrite" in err and (tmp_path / "bench.csv").read_text() == "my table"
    assert main([*bench, "--overwrite"]) == 0
    assert main(bench) == 0  # its own earlier output is the package's to replace
    (tmp_path / "bench.png").write_bytes(b"edited")  # ... until someone changes it
    assert main(bench) == 2 and (tmp_path / "bench.png").read_bytes() == b"edited"
    capsys.readouterr()
    report = tmp_path / "compare" / "report.md"
    report.parent.mkdir()
    report.write_text("my report")
    assert main(["compare", "--models", "slstm", "--baselines", "", "--output-dir", str(report.parent)]) == 2
    assert "report.md" in capsys.readouterr().err and report.read_text() == "my report"


def test_check_files_free_and_record_outputs(tmp_path):
    path = tmp_path / "figure.png"
    check_files_free([path], False, "--overwrite")  # new: fine
    path.write_bytes(b"ours")
    with pytest.raises(ValueError, match="--overwrite"):
        check_files_free([path], False, "--overwrite")
    record_outputs([path])
    check_files_free([path], False, "--overwrite")
    assert json.loads((tmp_path / MANIFEST).read_text())["outputs"]["figure.png"]
    with pytest.raises(ValueError, match="is a folder"):
        check_files_free([tmp_path], True, "--overwrite")


def test_attention_map_never_overwrites_a_users_file(tmp_path, capsys):
    model_dir = tmp_path / "sparse"
    assert main(["train", "--model", "sparse_longformer", "--task-size", "20", "--epochs", "1", "--max-length", "256",
                 "--vocab-size", "500", "--config", "hidden_size=32", "num_hidden_layers=1", "num_attention_heads=2",
                 "intermediate_size=37", "attention_window=32", "--output-dir", str(model_dir)]) == 0
    picture = tmp_path / "map.png"
    picture.write_bytes(b"my picture")
    argv = ["attention-map", str(model_dir), "--text", "markets rallied as the central bank held rates " * 20,
            "--output", str(picture)]
    assert main(argv) == 2
    assert "--overwrite" in capsys.readouterr().err and picture.read_bytes() == b"my picture"
    assert main([*argv, "--overwrite"]) == 0 and picture.read_bytes()[:4] == b"\x89PNG"
    assert main(argv) == 0  # its own output


def test_non_finite_weights_after_training_are_an_error(tmp_path):
    """The last optimizer step can make weights non-finite after the last finite loss: `check_finite_weights`."""
    from hf_longdoc.saving.run_folder import RunDiverged
    from hf_longdoc.training.recipe import HeadRateTrainer, training_arguments

    model = torch.nn.Linear(2, 2)
    trainer = HeadRateTrainer(model=model, args=training_arguments(str(tmp_path), learning_rate=0.5))
    trainer.check_finite_weights()
    with torch.no_grad():
        model.weight[0, 0] = float("nan")
    with pytest.raises(RunDiverged, match="learning_rate=0.5"):
        trainer.check_finite_weights()


def test_resume_compares_whole_configs_and_names_what_differs(tmp_path):
    """The checkpoint's config.json leaves defaults out; both sides are compared with their defaults, so the same
    model passes and another width is named."""
    from hf_longdoc import ContextualizerConfig
    from hf_longdoc.training.run import check_resume_matches

    labels = dict(num_labels=2, id2label={0: "a", 1: "b"}, label2id={"a": 0, "b": 1})
    ContextualizerConfig(hidden_size=16, rank=8, **labels).save_pretrained(tmp_path)
    check_resume_matches(str(tmp_path), ContextualizerConfig(hidden_size=16, rank=8, **labels))
    with pytest.raises(ValueError, match="hidden_size: 16 there, 24 here"):
        check_resume_matches(str(tmp_path), ContextualizerConfig(hidden_size=24, rank=8, **labels))
    with pytest.raises(ValueError, match=r"labels \['a', 'b'\]"):
        check_resume_matches(str(tmp_path), ContextualizerConfig(hidden_size=16, rank=8, num_labels=2,
                                                                 id2label={0: "b", 1: "a"}))


def test_overwrite_replaces_only_what_the_run_writes_and_a_symlinked_folder_is_followed(run, tmp_path, capsys):
    folder = copy_of(run, tmp_path)
    (folder / "README.md").write_text("# mine")  # the run writes a card: replaced with --overwrite
    (folder / "vocab.txt").write_text("mine")  # named like a tokenizer file, but this run does not write it
    (folder / "checkpoint-5").mkdir()
    (folder / "checkpoint-5" / "keep.txt").write_text("mine")
    link = tmp_path / "link"
    link.symlink_to(folder)
    assert main(["train", *TINY, "--output-dir", str(link), "--overwrite"]) == 0
    assert link.is_symlink() and (folder / "vocab.txt").read_text() == "mine"
    assert (folder / "checkpoint-5" / "keep.txt").read_text() == "mine"
    assert "# mine" not in (folder / "README.md").read_text()
    assert sorted(name for name in os.listdir(tmp_path) if name.startswith(".")) == []


@pytest.mark.parametrize("argv,message", [
    (["bench", "--models", "contextualizer", "--output", "FOLDER/"], "file prefix"),
    (["attention-map", "MODEL", "--text", "a b", "--output", "FOLDER/map"], ".png"),
    (["push", "MODEL", "--repo-id", "a/b", "--dry-run", "--dry-run-dir", "FILE/preview"], "--dry-run-dir"),
    (["train", "--model", "segment_lm", "--backbone", "FOLDER/missing", "--output-dir", "FOLDER/o"], "does not exist"),
])
def test_unusable_output_and_input_names_are_clear_errors(run, argv, message, tmp_path, capsys):
    (tmp_path / "file").write_text("x")
    argv = [arg.replace("FOLDER", str(tmp_path)).replace("FILE", str(tmp_path / "file"))
            .replace("MODEL", str(run)) for arg in argv]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
    assert sorted(os.listdir(tmp_path)) == ["file"]


def test_train_names_an_unknown_argument_before_any_work(tmp_path):
    from hf_longdoc.training.run import train

    with pytest.raises(TypeError, match=r"unknown arguments \['epoch'\].*epochs"):
        train(output_dir=str(tmp_path / "out"), epoch=3)
    assert not (tmp_path / "out").exists()


def test_a_time_budget_stops_fine_tuning_early_and_keeps_a_whole_model(tmp_path, caplog):
    """`--time-budget` counts from the start of the run: a budget spent before fine-tuning starts stops it after its
    first step; that partial epoch is evaluated and saved, and the run is recorded as stopped."""
    import json
    import logging

    output = tmp_path / "out"
    with caplog.at_level(logging.WARNING):
        assert main(["train", *TINY, "--epochs", "3", "--time-budget", "1e-6", "--output-dir", str(output)]) == 0
    metrics = json.loads((output / "metrics.json").read_text())
    assert metrics["time_budget"] == {"minutes": 1e-6, "stopped_at_step": 1}
    assert "time budget" in caplog.text and (output / "model.safetensors").exists()
    assert 0.0 <= metrics["test"]["accuracy"] <= 1.0
    assert main(["train", *TINY, "--time-budget", "0", "--output-dir", str(tmp_path / "zero")]) == 2
    assert not (tmp_path / "zero").exists()


def test_push_uploads_the_tokenizer_source_that_its_auto_map_names(tmp_path, capsys):
    """The elementwise tokenizer lives outside the family's folder (hf_longdoc/tokenization/), but its
    tokenizer_config.json's `auto_map` names `tokenization_elementwise.py`: push uploads it, so the staged folder's
    tokenizer loads with `trust_remote_code=True` where hf_longdoc is not installed (it was left out)."""
    from hf_longdoc import FAMILIES
    from hf_longdoc.cli import main

    family = FAMILIES["elementwise"]
    config = family.config_class(backbone_config={"model_type": "bert", "vocab_size": 99, "hidden_size": 32,
                                                  "num_hidden_layers": 1, "num_attention_heads": 4,
                                                  "intermediate_size": 37},
                                 elements_per_material=4, max_materials=64, num_labels=2)
    folder, staging = tmp_path / "model", tmp_path / "staged"
    family.classification_class(config).save_pretrained(folder)
    family.own_tokenizer(config).save_pretrained(folder)
    assert main(["push", str(folder), "--repo-id", "someone/ew", "--dry-run", "--dry-run-dir", str(staging)]) == 0
    assert (staging / "tokenization_elementwise.py").is_file()
    loads = ("import sys; sys.modules['hf_longdoc'] = None\n"
             "from transformers import AutoTokenizer\n"
             f"tokenizer = AutoTokenizer.from_pretrained({str(staging)!r}, trust_remote_code=True)\n"
             "print(type(tokenizer).__name__, len(tokenizer('a text')['input_ids']))")
    result = subprocess.run([sys.executable, "-c", loads], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0 and result.stdout.startswith("ElementwiseTokenizer"), result.stderr[-2000:]
