"""`--dataset` reads the folders `datasets` writes and reads beside class folders. A
`save_to_disk` folder (DatasetDict or Dataset) and a Hub-layout folder of data files
(`data/train-00000-of-00001.parquet`, `train.csv`, ...) are read as `datasets` reads them, their splits used as given;
the folder's files decide the layout, and a folder in none names the layouts. Run through `hf_longdoc.cli.main` where
that is cheap."""

import json
import os

import pytest
from datasets import ClassLabel, Dataset, DatasetDict
from datasets.data_files import DataFilesDict, get_data_patterns

from hf_longdoc.cli import main
from hf_longdoc.data import DatasetError, fit_wordpiece_tokenizer, load_text_classification_dataset
from hf_longdoc.data.layouts import DATA_FILES, SAVED_DATASET, SAVED_DATASET_DICT, TEXT_FILES, folder_layout
from hf_longdoc.data.loading import dataset_fingerprint, load_for_evaluation
from tiny_bert import save_tiny_bert_classifier

WORDS = {"sport": "match goal team season", "business": "market shares profit bank", "arts": "film actor award music"}
LABELS = sorted(WORDS)  # arts, business, sport: the order string labels get ids in
TINY = ["--model", "contextualizer", "--epochs", "1", "--max-length", "32", "--vocab-size", "200", "--config",
        "hidden_size=16", "rank=8", "num_hidden_layers=1"]


def rows(n, start=0):
    labels = [LABELS[i % 3] for i in range(start, start + n)]
    return {"text": [f"{WORDS[label]} report {i}" for i, label in enumerate(labels, start)], "label": labels}


def splits(sizes=(12, 3, 6), class_label=False):
    parts, start = {}, 0
    for name, n in zip(("train", "validation", "test"), sizes):
        part = Dataset.from_dict(rows(n, start))
        if class_label:
            part = part.cast_column("label", ClassLabel(names=LABELS))
        parts[name], start = part, start + n
    return DatasetDict(parts)


def listing(folder):
    return sorted(os.path.relpath(os.path.join(root, name), folder) for root, _, names in os.walk(folder)
                  for name in names)


@pytest.fixture(scope="module")
def classifier(tmp_path_factory):
    """A tiny random BERT classifier of LABELS with its WordPiece tokenizer: what `evaluate` and `predict` read."""
    folder = tmp_path_factory.mktemp("issue72_model")
    tokenizer = fit_wordpiece_tokenizer(list(WORDS.values()) * 4, vocab_size=120, model_max_length=32)
    return save_tiny_bert_classifier(folder, tokenizer, LABELS, max_positions=32)


@pytest.fixture
def saved_dict(tmp_path):
    folder = tmp_path / "dd"
    splits().save_to_disk(str(folder))
    return str(folder)


@pytest.fixture
def hub_layout(tmp_path):
    """What `push_to_hub` leaves and `load_dataset(folder)` reads: data/{split}-00000-of-00001.parquet."""
    folder = tmp_path / "hub"
    (folder / "data").mkdir(parents=True)
    for name, part in splits(class_label=True).items():
        part.to_parquet(str(folder / "data" / f"{name}-00000-of-00001.parquet"))
    return str(folder)


def test_a_saved_dataset_dict_keeps_its_splits_and_its_folder_is_not_written_to(saved_dict):
    before = listing(saved_dict)
    fingerprint = dataset_fingerprint(saved_dict)
    assert folder_layout(saved_dict).kind == SAVED_DATASET_DICT
    data, names, multi_label = load_text_classification_dataset(saved_dict)
    assert names == LABELS and not multi_label
    assert {name: len(part) for name, part in data.items()} == {"train": 12, "validation": 3, "test": 6}
    assert data["test"]["text"] == splits()["test"]["text"]  # as saved, not carved
    # `load_from_disk` maps the folder's files; a map or filter on them would write its cache file beside them
    assert listing(saved_dict) == before and dataset_fingerprint(saved_dict) == fingerprint


def test_class_label_names_become_the_labels_and_a_saved_dataset_is_one_split(tmp_path):
    folder = str(tmp_path / "dd_classes")
    splits(class_label=True).save_to_disk(folder)
    assert load_text_classification_dataset(folder)[1] == LABELS
    single = str(tmp_path / "ds")
    Dataset.from_dict(rows(20)).save_to_disk(single)
    assert folder_layout(single).kind == SAVED_DATASET and not folder_layout(single).named_splits
    data, names, _ = load_text_classification_dataset(single)
    assert names == LABELS and sum(len(part) for part in data.values()) == 20  # carved as a file's rows are
    before = dataset_fingerprint(single)
    Dataset.from_dict({**rows(20), "label": rows(20)["label"][::-1]}).save_to_disk(str(tmp_path / "again"))
    os.replace(tmp_path / "again" / "data-00000-of-00001.arrow", tmp_path / "ds" / "data-00000-of-00001.arrow")
    assert dataset_fingerprint(single) != before  # labels swapped: a --resume is refused


def datasets_own_files(folder):
    """The files of each split as `datasets.load_dataset(folder)` finds them, globbing the folder itself."""
    patterns = get_data_patterns(os.path.abspath(folder))
    return {str(split): sorted(found) for split, found in DataFilesDict.from_patterns(
        patterns, base_path=os.path.abspath(folder)).items()}


def test_a_hub_layout_parquet_folder_is_read_as_load_dataset_reads_it(hub_layout):
    layout = folder_layout(hub_layout)
    assert layout.kind == DATA_FILES and layout.named_splits and sorted(layout.files) == ["test", "train",
                                                                                          "validation"]
    assert layout.files == datasets_own_files(hub_layout)  # its patterns, matched without globbing per pattern
    data, names, _ = load_text_classification_dataset(hub_layout)
    assert names == LABELS and {name: len(part) for name, part in data.items()} == {"train": 12, "validation": 3,
                                                                                   "test": 6}
    part = load_for_evaluation(hub_layout, LABELS, False)  # a folder that names its splits: its test split
    assert len(part) == 6 and part.features["label"].names == LABELS


def test_a_folder_of_split_named_csv_and_jsonl_files_is_checked_file_by_file(tmp_path):
    folder = tmp_path / "files"
    folder.mkdir()
    train, validation = rows(12), rows(3, 12)
    for name, part in (("train", train), ("dev", validation)):
        (folder / f"{name}.csv").write_text("text,label\n" + "".join(f"{t},{label}\n" for t, label in
                                                                       zip(part["text"], part["label"])))
    (folder / "test.jsonl").write_text("".join(json.dumps({"text": t, "label": label}) + "\n"
                                               for t, label in zip(*rows(6, 15).values())))
    assert folder_layout(str(folder)).files == datasets_own_files(folder)
    data, names, _ = load_text_classification_dataset(str(folder))
    assert names == LABELS and {name: len(part) for name, part in data.items()} == {"train": 12, "validation": 3,
                                                                                   "test": 6}
    with open(folder / "dev.csv", "a") as f:
        f.write("an unquoted, comma,sport\n")
    with pytest.raises(DatasetError, match=r"dev\.csv', line 5: 3 fields where the header"):
        load_text_classification_dataset(str(folder))


def test_a_folder_in_no_layout_names_the_layouts_and_a_class_folder_still_reads(tmp_path, capsys):
    folder = tmp_path / "odd"
    (folder / "empty_class").mkdir(parents=True)
    (folder / "notes.md").write_text("not data")
    Dataset.from_dict(rows(3)).save_to_disk(str(folder / "saved"))
    with pytest.raises(DatasetError) as refused:
        load_text_classification_dataset(str(folder))
    message = str(refused.value)
    for needle in ("none of the layouts", "1 file (notes.md) and 2 subfolders (empty_class, saved)", "save_to_disk",
                   "dataset_dict.json", "load_dataset(folder)", "train.csv", "one subfolder per class",
                   f"pass {str(folder / 'saved')!r}"):
        assert needle in message, message
    assert main(["train", *TINY, "--dataset", str(folder), "--output-dir", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert "none of the layouts" in err and "Traceback" not in err and not (tmp_path / "out").exists()
    with pytest.raises(DatasetError, match="or .txt files, one document each, at any depth"):  # what predict reads
        folder_layout(str(folder), labelled=False)
    classes = tmp_path / "classes"
    for label in LABELS:
        (classes / label).mkdir(parents=True)
        for i in range(4):
            (classes / label / f"{i}.txt").write_text(f"{WORDS[label]} {i}")
    (classes / "index.csv").write_text("text,label\nx,y\n")  # not named by split: the .txt documents decide
    assert folder_layout(str(classes)).kind == TEXT_FILES
    assert load_text_classification_dataset(str(classes))[1] == LABELS


@pytest.mark.slow
def test_evaluate_and_predict_read_the_folders_through_the_cli(saved_dict, hub_layout, classifier, tmp_path, capsys):
    assert main(["evaluate", classifier, "--dataset", saved_dict]) == 0
    assert json.loads(capsys.readouterr().out)["documents"] == 6  # the test split, as a Hub DatasetDict's
    assert main(["evaluate", classifier, "--dataset", hub_layout]) == 0
    assert json.loads(capsys.readouterr().out)["documents"] == 6
    unlabelled = tmp_path / "unlabelled"
    Dataset.from_dict({"text": rows(5)["text"]}).save_to_disk(str(unlabelled))
    for source, n in ((saved_dict, 21), (hub_layout, 21), (str(unlabelled), 5)):
        output = tmp_path / f"{os.path.basename(source)}.jsonl"
        assert main(["predict", classifier, "--dataset", source, "--output", str(output)]) == 0, capsys.readouterr()
        predicted = [json.loads(line) for line in output.read_text().splitlines()]
        assert len(predicted) == n and {row["label"] for row in predicted} <= set(LABELS)
    inner = folder_layout(os.path.join(hub_layout, "data"), labelled=False)  # the data folder itself
    assert inner.kind == DATA_FILES and inner.named_splits  # its files are named by split


@pytest.mark.slow
def test_train_reads_a_saved_dataset_dict_through_the_cli(saved_dict, tmp_path):
    assert main(["train", *TINY, "--dataset", saved_dict, "--output-dir", str(tmp_path / "out")]) == 0
    assert json.loads((tmp_path / "out" / "metrics.json").read_text())["sizes"] == {"train": 12, "validation": 3,
                                                                                   "test": 6}  # as saved
    id2label = json.loads((tmp_path / "out" / "config.json").read_text())["id2label"]
    assert [id2label[str(i)] for i in range(3)] == LABELS
