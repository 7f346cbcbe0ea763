"""The built-in long-document task, real-data loading, tokenizer fitting and metrics."""

import json
import random
import re

import numpy as np
import pytest

from hf_longdoc.data import (
    DatasetError,
    fit_wordpiece_tokenizer,
    load_text_classification_dataset,
    make_long_document_task,
)
from hf_longdoc.experiments.baselines import truncating_baseline
from hf_longdoc.metrics import compute_metrics_fn, load_metric


def _small_task(evidence, seed=0):
    return make_long_document_task(num_labels=4, train_size=240, validation_size=20, test_size=160,
                                   evidence=evidence, seed=seed)


def test_task_is_seeded_and_shaped():
    a = make_long_document_task(train_size=5, validation_size=2, test_size=3, seed=3)
    b = make_long_document_task(train_size=5, validation_size=2, test_size=3, seed=3)
    assert a["train"]["text"] == b["train"]["text"] and a["test"]["label"] == b["test"]["label"]
    assert {name: len(split) for name, split in a.items()} == {"train": 5, "validation": 2, "test": 3}
    words = [len(text.split()) for text in a["train"]["text"]]
    assert min(words) >= 800 and max(words) <= 3000
    assert a["train"].features["label"].names == ["topic_0", "topic_1", "topic_2", "topic_3"]


def _evidence_positions(data):
    """Relative word positions of the class-specific words (words that occur in only one class)."""
    by_class = {}
    for text, label in zip(data["train"]["text"], data["train"]["label"]):
        for word in set(re.findall(r"\w+", text.lower())):
            by_class.setdefault(word, set()).add(label)
    positions = []
    for text in data["train"]["text"]:
        words = re.findall(r"\w+", text.lower())
        positions += [i / len(words) for i, w in enumerate(words) if len(by_class[w]) == 1 and len(words) > 0]
    return np.array(positions), words


@pytest.mark.parametrize("evidence,window", [("start", (0.0, 0.2)), ("middle", (0.4, 0.6)), ("end", (0.8, 1.0))])
def test_evidence_sits_at_the_requested_depth(evidence, window):
    data = make_long_document_task(train_size=60, validation_size=2, test_size=2, evidence=evidence,
                                   vocabulary_size=800, seed=1)
    positions, _ = _evidence_positions(data)
    assert len(positions) > 60
    assert np.all(positions >= window[0] - 0.01) and np.all(positions <= window[1] + 0.01)


def test_end_evidence_defeats_a_512_token_reader_but_not_the_full_text():
    scores = truncating_baseline(_small_task("end"))
    assert scores["first_512"] < 0.40, scores  # chance is 0.25
    assert scores["full_text"] > 0.95, scores


def test_start_evidence_is_visible_in_the_first_512_tokens():
    assert truncating_baseline(_small_task("start"))["first_512"] > 0.95


def test_invalid_task_arguments():
    with pytest.raises(ValueError, match="evidence"):
        make_long_document_task(evidence="late")
    with pytest.raises(ValueError, match="min_words"):
        make_long_document_task(min_words=900, max_words=800)


def _write_jsonl(path, rows):
    path.write_text("\n".join(json.dumps(row) for row in rows))
    return str(path)


def test_load_local_jsonl_creates_stratified_splits(tmp_path):
    rows = [{"body": f"document number {i} " * 5, "topic": ["sport", "tech"][i % 2]} for i in range(100)]
    data, names, multi_label = load_text_classification_dataset(
        _write_jsonl(tmp_path / "d.jsonl", rows), text_column="body", label_column="topic")
    assert names == ["sport", "tech"] and not multi_label
    assert set(data) == {"train", "validation", "test"}
    assert sum(len(split) for split in data.values()) == 100
    assert data["train"].column_names == ["text", "label"]
    assert sorted(set(data["test"]["label"])) == [0, 1]
    assert abs(np.mean(data["test"]["label"]) - 0.5) < 0.1  # stratified


def test_load_csv_and_multilabel_lists(tmp_path):
    csv_path = tmp_path / "d.csv"
    csv_path.write_text("text,label\n" + "\n".join(f"words {i},{'a' if i % 3 else 'b'}" for i in range(60)))
    data, names, multi_label = load_text_classification_dataset(str(csv_path))
    assert names == ["a", "b"] and not multi_label
    rows = [{"text": f"claim {i}", "label": [["A01B"], ["G06Q", "A01B"], ["H04L"]][i % 3]} for i in range(60)]
    data, names, multi_label = load_text_classification_dataset(_write_jsonl(tmp_path / "m.jsonl", rows))
    assert multi_label and names == ["A01B", "G06Q", "H04L"]
    assert all(len(vector) == 3 and set(vector) <= {0.0, 1.0} for vector in data["train"]["label"])


def test_loading_errors_are_clear(tmp_path):
    with pytest.raises(DatasetError, match="does not exist"):
        load_text_classification_dataset(str(tmp_path / "missing.jsonl"))
    bad = tmp_path / "data.txt"
    bad.write_text("hello")
    with pytest.raises(DatasetError, match="extension"):
        load_text_classification_dataset(str(bad))
    rows = [{"text": "x", "label": "a"}] * 10
    with pytest.raises(DatasetError, match="--label-column"):
        load_text_classification_dataset(_write_jsonl(tmp_path / "d.jsonl", rows), label_column="topic")
    broken = tmp_path / "broken.jsonl"
    broken.write_text("{not json")
    with pytest.raises(DatasetError, match="Could not read"):
        load_text_classification_dataset(str(broken))


def test_wordpiece_tokenizer_fits_fast_and_round_trips(tmp_path):
    texts = make_long_document_task(train_size=30, validation_size=1, test_size=1)["train"]["text"]
    tokenizer = fit_wordpiece_tokenizer(texts, vocab_size=2000, model_max_length=1024)
    assert tokenizer.pad_token_id == 0 and tokenizer.model_input_names == ["input_ids", "attention_mask"]
    encoded = tokenizer(texts[0])
    assert len(encoded["input_ids"]) > 1024 and "token_type_ids" not in encoded
    assert tokenizer.decode(encoded["input_ids"], skip_special_tokens=True).split()[:5] == texts[0].lower().split()[:5]
    tokenizer.save_pretrained(tmp_path)
    from transformers import AutoTokenizer

    loaded = AutoTokenizer.from_pretrained(tmp_path)
    assert loaded(texts[1])["input_ids"] == tokenizer(texts[1])["input_ids"] and loaded.model_max_length == 1024


def test_wordpiece_tokenizer_ids_follow_the_tokens_not_the_trainers_hash_order():
    texts = make_long_document_task(train_size=30, validation_size=1, test_size=1)["train"]["text"]
    vocabulary = fit_wordpiece_tokenizer(texts, vocab_size=500).get_vocab()
    by_id = sorted(vocabulary, key=vocabulary.get)
    assert by_id[:5] == ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] and by_id[5:] == sorted(by_id[5:])


def test_the_same_texts_fit_the_same_wordpiece_tokenizer_every_time():
    """The trainer numbers its `##` tokens in hash-map order and breaks ties between merges by those numbers
    (tokenizers #1794): on this corpus of many equally rare words, six fits gave six vocabularies before the `##`
    tokens were made beforehand in sorted order."""
    rng = random.Random(0)
    words = ["".join(rng.choice("abcdefghijklmnopqrstuvwxyzéø") for _ in range(rng.randint(2, 9))) for _ in range(3000)]
    texts = [" ".join(rng.choice(words) for _ in range(80)) for _ in range(60)]
    vocabularies = {tuple(sorted(fit_wordpiece_tokenizer(texts, vocab_size=500).get_vocab().items()))
                    for _ in range(6)}
    assert len(vocabularies) == 1
    (vocabulary,) = vocabularies
    assert len(vocabulary) == 500 and all(token != "##" for token, _ in vocabulary)
    tokenizer = fit_wordpiece_tokenizer(texts, vocab_size=500)
    assert sorted(tokenizer.all_special_tokens) == sorted(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"])
    assert "[UNK]" not in tokenizer.tokenize(texts[0])  # every word of the corpus is spelled by the vocabulary


def test_metrics_modules_load_offline_and_compute():
    result = load_metric("classification").compute(predictions=[0, 1, 2, 2], references=[0, 1, 1, 2])
    assert result["accuracy"] == 0.75 and 0 < result["macro_f1"] < 1
    result = load_metric("multilabel").compute(predictions=[[0.9, 0.35, 0.1], [0.2, 0.8, 0.29]],
                                               references=[[1, 0, 0], [0, 1, 1]], threshold=0.3)
    assert result["micro_precision"] == pytest.approx(2 / 3) and result["micro_recall"] == pytest.approx(2 / 3)

    class Prediction:
        predictions = np.array([[2.0, -1.0], [-1.0, 3.0]])
        label_ids = np.array([[1.0, 0.0], [1.0, 1.0]])

    assert compute_metrics_fn(multi_label=True, threshold=0.3)(Prediction())["micro_recall"] == pytest.approx(2 / 3)
    with pytest.raises(ValueError, match="Unknown metric"):
        load_metric("bleu")


def test_empty_documents_are_dropped_with_a_warning(tmp_path, caplog):
    rows = [{"text": "" if i % 10 == 0 else "   " if i % 10 == 1 else f"words {i}", "label": i % 2} for i in range(80)]
    with caplog.at_level("WARNING"):
        data, _, _ = load_text_classification_dataset(_write_jsonl(tmp_path / "d.jsonl", rows))
    assert sum(len(split) for split in data.values()) == 64
    assert "empty or missing text" in caplog.text


@pytest.mark.parametrize("split", ["validation", "test"])
def test_a_given_split_left_empty_by_empty_texts_is_named_before_training(monkeypatch, split):
    """A Hub dataset whose validation (or test) split holds only empty texts: every row is dropped, and the run
    would fail later inside the head stage or the metrics with an error that does not name the cause."""
    from datasets import Dataset, DatasetDict

    from hf_longdoc.data import loading

    raw = DatasetDict(train=Dataset.from_dict({"text": [f"words {i}" for i in range(20)], "label": ["a", "b"] * 10}),
                      **{split: Dataset.from_dict({"text": ["", "   "], "label": ["a", "b"]})})
    monkeypatch.setattr(loading, "_load_raw", lambda source, label_column=None: raw)
    with pytest.raises(DatasetError, match=f"empty `{split}` split: none of its documents has text"):
        load_text_classification_dataset("someone/dataset")


@pytest.mark.parametrize("labels,message", [
    (["sport"] * 9 + [["sport", "tech"]], r"train, row 9 \(counting from 0\): the label is a list"),
    ([["a"]] * 9 + ["b"], r"train, row 9 \(counting from 0\): the label is a single label"),
    (["sport"] * 4 + [None] + ["tech"] * 5, r"train, row 4 \(counting from 0\): the label is missing"),
    ([["a"], ["a", None]] * 5, r"train, row 1 \(counting from 0\): the label is missing"),
])
def test_mixed_and_missing_labels_name_the_row(tmp_path, labels, message):
    """One list among strings must not turn the data multi-label (splitting "sport" into letters), and a null label
    must not become a class named "None"."""
    rows = [{"text": f"document {i}", "label": label} for i, label in enumerate(labels)]
    with pytest.raises(DatasetError, match=message):
        load_text_classification_dataset(_write_jsonl(tmp_path / "d.jsonl", rows))


def test_a_single_class_is_refused_before_training(tmp_path):
    rows = [{"text": f"document {i}", "label": "sport"} for i in range(20)]
    with pytest.raises(DatasetError, match="one class in `label`.*at least two"):
        load_text_classification_dataset(_write_jsonl(tmp_path / "d.jsonl", rows))


def test_integer_labels_keep_their_values_as_ids(tmp_path, caplog):
    rows = [{"text": f"document {i} " * 3, "label": i % 12} for i in range(240)]
    data, names, multi_label = load_text_classification_dataset(_write_jsonl(tmp_path / "d.jsonl", rows))
    assert names == [str(i) for i in range(12)] and not multi_label  # not "0", "1", "10", "11", "2", ...
    for row in data["train"]:
        assert row["label"] == int(row["text"].split()[1]) % 12
    csv_path = tmp_path / "gap.csv"  # integers written as integers keep their values as ids, gap included
    csv_path.write_text("text,label\n" + "\n".join(f"words {i},{[0, 2][i % 2]}" for i in range(40)))
    data, names, _ = load_text_classification_dataset(str(csv_path))
    assert names == ["0", "1", "2"] and "never occur" in caplog.text
    assert {row["label"] for row in data["train"]} == {0, 2}


def test_labels_seen_only_outside_train_are_reported(caplog):
    from datasets import Dataset

    from hf_longdoc.data.loading import _report_unseen_labels

    splits = {"train": Dataset.from_dict({"label": [0, 1, 0]}), "test": Dataset.from_dict({"label": [2, 0]})}
    _report_unseen_labels(splits, ["a", "b", "c"], multi_label=False)
    assert "test: labels ['c'] never occur in train" in caplog.text


def test_invalid_utf8_names_the_file_and_line(tmp_path):
    path = tmp_path / "latin1.jsonl"
    path.write_bytes(b'{"text": "fine", "label": "a"}\n{"text": "caf\xe9", "label": "b"}\n')
    with pytest.raises(DatasetError, match=r"latin1.jsonl, line 2: byte 0xe9 at column 14 is not UTF-8"):
        load_text_classification_dataset(str(path))


def test_an_unreachable_hub_is_reported_at_once(monkeypatch):
    """Offline, a Hub id fails in well under the libraries' ~40 s of retries, saying what to do instead."""
    import time

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("HF_DATASETS_OFFLINE", raising=False)
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # nothing listens there
    start = time.perf_counter()
    with pytest.raises(DatasetError, match="cannot be reached.*HF_HUB_OFFLINE=1"):
        load_text_classification_dataset("someone/no-such-dataset")
    assert time.perf_counter() - start < 10


def test_a_document_of_several_columns_and_its_structural_inversion(tmp_path):
    """`text_column="title,abstract,claims"`: the document is its parts, one paragraph each; the segment-LM paper's
    inversion puts the last claim first and the title last, the words of each part in order."""
    import json

    from hf_longdoc.data import invert_parts, load_text_classification_dataset

    path = tmp_path / "patents.jsonl"
    with open(path, "w") as f:
        for i in range(20):
            f.write(json.dumps({"title": f"Title {i}", "abstract": f"An abstract.\n\nIn two paragraphs {i}.",
                                "claims": [f"claim one {i}", f"claim two {i}"], "label": "AB"[i % 2]}) + "\n")
    data, names, _ = load_text_classification_dataset(str(path), text_column="title,abstract,claims")
    text = data["train"][0]["text"]
    i = text.split("\n\n")[0].split()[-1]
    assert text == f"Title {i}\n\nAn abstract.\nIn two paragraphs {i}.\n\nclaim one {i}\n\nclaim two {i}"
    assert invert_parts(text) == f"claim two {i}\n\nclaim one {i}\n\nAn abstract.\nIn two paragraphs {i}.\n\nTitle {i}"
    with pytest.raises(Exception, match="'summary'"):
        load_text_classification_dataset(str(path), text_column="title,summary")


def test_a_class_too_rare_to_stratify_is_logged(tmp_path, caplog):
    """One document of a class: the split cannot be stratified by label, and the random split says so."""
    rows = [{"text": f"document number {i} " * 5, "label": "common"} for i in range(40)]
    rows.append({"text": "the only rare document " * 5, "label": "rare"})
    with caplog.at_level("WARNING", logger="hf_longdoc.data.loading"):
        data, names, _ = load_text_classification_dataset(_write_jsonl(tmp_path / "d.jsonl", rows))
    assert names == ["common", "rare"] and sum(len(split) for split in data.values()) == 41
    assert "not stratified by label (documents of a class: 'rare' (1))" in caplog.text


@pytest.mark.parametrize("as_lines", [True, False])
def test_labels_written_as_numbers_and_as_text_are_logged(tmp_path, caplog, as_lines):
    """`datasets` reads a JSON label column of 1 and "1" as one class, and the log says so (JSON lines and a JSON
    array)."""
    rows = [{"text": f"document number {i} " * 5, "label": [1, "1", 0, "2"][i % 4]} for i in range(40)]
    path = tmp_path / "d.jsonl" if as_lines else tmp_path / "d.json"
    path.write_text("\n".join(json.dumps(row) for row in rows) if as_lines else json.dumps(rows, indent=1))
    with caplog.at_level("WARNING", logger="hf_longdoc.data.loading"):
        _, names, _ = load_text_classification_dataset(str(path))
    assert names == ["0", "1", "2"]
    assert "mix JSON types (numbers, text, true/false)" in caplog.text
    caplog.clear()
    with caplog.at_level("WARNING", logger="hf_longdoc.data.loading"):  # all text, or all numbers: nothing to say
        load_text_classification_dataset(_write_jsonl(tmp_path / "t.jsonl", [{**row, "label": str(row["label"])}
                                                                               for row in rows]))
    assert "mix JSON types" not in caplog.text
