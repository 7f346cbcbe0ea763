"""The data side: columns checked against each other, labels that keep the identity they have in the file,
classes emptied by blank documents, our messages instead of a library's, and `--resume` that fingerprints the data.
Each case is run as a user hits it, through `hf_longdoc.cli.main`, on tiny data and a tiny model."""

import csv
import json

import pytest

from hf_longdoc.cli import main
from hf_longdoc.data import DatasetError, load_for_evaluation, load_text_classification_dataset
from hf_longdoc.data.loading import dataset_fingerprint

TINY = ["--model", "contextualizer", "--epochs", "1", "--max-length", "64", "--vocab-size", "200", "--config",
        "hidden_size=16", "rank=8", "num_hidden_layers=1"]
WORDS = ["match goal team season", "market shares profit bank", "film actor award music"]


def write_jsonl(path, rows):
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return str(path)


def write_csv(path, labels):
    with open(path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["text", "label"])
        for i, label in enumerate(labels):
            writer.writerow([f"{WORDS[i % 3]} report {i}", label])
    return str(path)


def rows(n=30, labels=("a", "b")):
    return [{"text": f"{WORDS[i % len(labels)]} report {i}", "title": f"title {i}", "label": labels[i % len(labels)]}
            for i in range(n)]


def train(tmp_path, dataset, *argv):
    return main(["train", *TINY, "--dataset", str(dataset), "--output-dir", str(tmp_path / "out"), *argv])


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    """A tiny model trained through the CLI on a CSV whose labels are "01" and "1": two classes."""
    folder = tmp_path_factory.mktemp("issue51")
    data = write_csv(folder / "numbered.csv", ["01", "1"] * 15)
    assert main(["train", *TINY, "--dataset", data, "--output-dir", str(folder / "model")]) == 0
    return folder / "model", data


# -- 1. columns --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("argv", [["--label-column", "text"], ["--text-column", "label"],
                                  ["--text-column", "label,text"], ["--text-column", "title, label"],
                                  ["--text-column", "text,text"], ["--text-column", "title,text,title"]])
def test_train_refuses_overlapping_or_repeated_columns_naming_both_flags(argv, tmp_path, capsys):
    assert train(tmp_path, write_jsonl(tmp_path / "d.jsonl", rows()), *argv) == 2
    err = capsys.readouterr().err
    assert "--text-column" in err and "--label-column" in err and "Traceback" not in err
    assert not (tmp_path / "out").exists()


def test_evaluate_and_compare_refuse_a_text_column_that_is_the_label_column(model, tmp_path, capsys):
    folder, data = model
    assert main(["evaluate", str(folder), "--dataset", data, "--label-column", "text"]) == 2
    err = capsys.readouterr().err
    assert "--text-column 'text' and --label-column 'text'" in err and "Traceback" not in err
    assert main(["evaluate", str(folder), "--dataset", data, "--text-column", "label,text"]) == 2
    assert "would read the answer" in capsys.readouterr().err
    assert main(["compare", "--dataset", data, "--text-column", "label,text", "--models", "contextualizer",
                 "--baselines", "", "--bench-lengths", "none", "--output-dir", str(tmp_path / "cmp")]) == 2
    err = capsys.readouterr().err
    assert "--label-column 'label'" in err and "would read the answer" in err and "Traceback" not in err


def test_evaluation_reads_several_text_columns_as_training_does(tmp_path):
    data = write_jsonl(tmp_path / "d.jsonl", rows())
    part = load_for_evaluation(data, ["a", "b"], False, text_column="title,text")
    assert part[0]["text"] == "title 0\n\nmatch goal team season report 0" and part[0]["label"] == 0


# -- 2. label identity -------------------------------------------------------------------------------------------
def test_number_like_csv_labels_keep_their_identity(model, capsys):
    folder, data = model
    config = json.loads((folder / "config.json").read_text())
    assert config["id2label"] == {"0": "01", "1": "1"}
    assert main(["evaluate", str(folder), "--dataset", data]) == 0  # the same file scores: the same two classes
    assert json.loads(capsys.readouterr().out)["documents"] == 30


@pytest.mark.parametrize("labels,names", [
    (["1", "1.0", "2"], ["1", "1.0", "2"]),  # a decimal point: text, "1.0" is not "1"
    (["7", "007"], ["007", "7"]),
    (["0", "2"], ["0", "1", "2"]),  # integers written as integers keep their values as ids
    (["-1", "3"], ["-1", "3"]),
])
def test_csv_labels_are_text_unless_every_one_is_an_integer(labels, names, tmp_path):
    _, found, _ = load_text_classification_dataset(write_csv(tmp_path / "d.csv", labels * 10))
    assert found == names


# -- 3. classes emptied by blank documents -----------------------------------------------------------------------
def test_a_class_whose_documents_are_all_blank_is_named(tmp_path, capsys):
    data = [{**row, "text": "   " if row["label"] == "c" else row["text"]} for row in rows(30, ("a", "b", "c"))]
    assert train(tmp_path, write_jsonl(tmp_path / "d.jsonl", data)) == 2
    err = capsys.readouterr().err
    assert "'c': all 10 of its documents" in err and "empty or whitespace" in err and "Traceback" not in err
    assert not (tmp_path / "out").exists()


# -- 4. our messages ---------------------------------------------------------------------------------------------
def test_a_bad_jsonl_line_is_named_with_its_text(tmp_path, capsys):
    path = tmp_path / "bad.jsonl"
    lines = [json.dumps(row) for row in rows()]
    lines[6] = '{"text": "cut short", "label":'
    path.write_text("\n".join(lines) + "\n")
    assert train(tmp_path, path) == 2
    err = capsys.readouterr().err
    assert "bad.jsonl': line 7 is not valid JSON" in err and "cut short" in err and "Traceback" not in err
    lines[6] = "[1, 2]"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(DatasetError, match="line 7 is a JSON list, not an object"):
        load_text_classification_dataset(str(path))


def test_a_dataset_too_small_to_split_says_how_many_documents_it_needs(tmp_path, capsys):
    from hf_longdoc.data.loading import _check_enough_to_split

    assert train(tmp_path, write_jsonl(tmp_path / "d.jsonl", rows(2))) == 2
    err = capsys.readouterr().err
    assert "has 2 document(s) with text" in err and "needs at least 3" in err and "Traceback" not in err
    _, names, _ = load_text_classification_dataset(write_jsonl(tmp_path / "e.jsonl", rows(3)))
    assert names == ["a", "b"]  # the smallest that splits loads
    with pytest.raises(DatasetError, match=r"has 1 document\(s\).*validation split\(s\).*needs at least 2"):
        _check_enough_to_split("given-test", 1, True, False, 0.1, 0.2)  # a dataset with its own test split
    _check_enough_to_split("given-both", 1, False, False, 0.1, 0.2)  # nothing to carve: one document is enough


def test_an_empty_tokenizer_folder_is_named(tmp_path, capsys):
    (tmp_path / "tokenizer").mkdir()
    assert train(tmp_path, write_jsonl(tmp_path / "d.jsonl", rows()), "--tokenizer", str(tmp_path / "tokenizer")) == 2
    err = capsys.readouterr().err
    assert "holds no tokenizer files" in err and "sentencepiece" not in err.split("(none of")[0]
    assert "Traceback" not in err


def test_a_tokenizer_folder_without_a_vocabulary_or_missing_is_named(tmp_path):
    from hf_longdoc.data import fit_wordpiece_tokenizer, load_tokenizer

    (tmp_path / "t5").mkdir()  # names a tokenizer class, but its vocabulary file is missing
    (tmp_path / "t5" / "tokenizer_config.json").write_text('{"tokenizer_class": "T5Tokenizer"}')
    with pytest.raises(ValueError, match="'.*t5' holds no usable tokenizer"):
        load_tokenizer(str(tmp_path / "t5"), "`tokenizer` (--tokenizer)")
    with pytest.raises(ValueError, match="'.*missing' does not exist"):
        load_tokenizer(str(tmp_path / "missing"), "`tokenizer` (--tokenizer)")
    # a real vocabulary fitted on a small corpus (no digits in it) is kept
    fit_wordpiece_tokenizer([row["text"] for row in rows()] * 3, vocab_size=200).save_pretrained(tmp_path / "small")
    assert load_tokenizer(str(tmp_path / "small"), "`tokenizer` (--tokenizer)").vocab_size > 20


# -- 5. resume fingerprints the data -----------------------------------------------------------------------------
def test_resume_refuses_a_dataset_whose_contents_changed(tmp_path, capsys):
    """An interrupted run (a staging folder with a checkpoint and the recorded settings) over a file whose labels
    were swapped since: the path alone is the same, the contents are not."""
    from hf_longdoc.saving.run_folder import RunFolder
    from hf_longdoc.training.settings import RunSettings

    data = tmp_path / "d.jsonl"
    write_jsonl(data, rows())
    target = tmp_path / "out"
    settings = dict(model="contextualizer", output_dir=str(target), dataset=str(data), epochs=1, max_length=64,
                    vocab_size=200, config_overrides={"hidden_size": 16, "rank": 8, "num_hidden_layers": 1})
    recorded = RunSettings.of(**settings).resolve().recorded()
    assert recorded["dataset_contents"] == dataset_fingerprint(str(data)) and recorded["dataset_contents"]
    staging = tmp_path / ".out.partial"
    (staging / "checkpoint-1").mkdir(parents=True)
    (staging / "checkpoint-1" / "trainer_state.json").write_text('{"global_step": 1}')
    (staging / RunFolder.SETTINGS).write_text(json.dumps(recorded, default=str))
    write_jsonl(data, [{**row, "label": "b" if row["label"] == "a" else "a"} for row in rows()])
    assert train(tmp_path, data, "--resume") == 2
    err = capsys.readouterr().err
    assert "dataset_contents" in err and "Traceback" not in err
    assert (staging / "checkpoint-1").is_dir() and not target.exists()  # the interrupted run is kept for a real resume


def test_dataset_fingerprints(tmp_path):
    folder = tmp_path / "docs"
    for label, name in (("a", "x.txt"), ("b", "y.txt")):
        (folder / label).mkdir(parents=True)
        (folder / label / name).write_text(f"text of {name}")
    before = dataset_fingerprint(str(folder))
    (folder / "b" / "y.txt").rename(folder / "a" / "y.txt")  # the same bytes in another class
    assert before.startswith("sha256:") and dataset_fingerprint(str(folder)) != before
    assert dataset_fingerprint("someone/reviews") == "hub:someone/reviews" and dataset_fingerprint(None) is None
