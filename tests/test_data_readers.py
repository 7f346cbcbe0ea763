"""The data readers: a CSV/TSV row whose field count differs from the header's is refused naming its line
(pandas would have read every column one place off); a folder of .txt files is cached by its files' bytes (an edit
that keeps a file's size and modification time was read stale); an empty file, a header with no rows and a text file
that is not UTF-8 are named with the fix. Each refusal is also run as a user hits it, through `hf_longdoc.cli.main`."""

import json
import os

import pytest

from hf_longdoc.cli import main
from hf_longdoc.data import DatasetError, fit_wordpiece_tokenizer, load_text_classification_dataset
from hf_longdoc.data.folders import listing_digest, load_labelled_folder, load_text_folder, text_files
from tiny_bert import save_tiny_bert_classifier

TINY = ["--model", "contextualizer", "--epochs", "1", "--max-length", "64", "--vocab-size", "200", "--config",
        "hidden_size=16", "rank=8", "num_hidden_layers=1"]
WORDS = ["match goal team season", "market shares profit bank", "film actor award music"]
LABELS = ["sport", "business", "arts"]


def write_rows(path, rows, delimiter=","):
    """`rows` (lists of already quoted fields) under the header text,label, one line each, as written by hand."""
    path.write_text("".join(delimiter.join(row) + "\n" for row in [["text", "label"], *rows]), encoding="utf-8")
    return str(path)


def good_rows(n=12):
    return [[f"{WORDS[i % 3]} report {i}", LABELS[i % 3]] for i in range(n)]


@pytest.fixture(scope="module")
def classifier(tmp_path_factory):
    """A tiny random BERT classifier with its WordPiece tokenizer: what `predict` reads."""
    folder = tmp_path_factory.mktemp("issue61_model")
    tokenizer = fit_wordpiece_tokenizer(WORDS * 4, vocab_size=120, model_max_length=32)
    return save_tiny_bert_classifier(folder, tokenizer, LABELS, max_positions=32)


def refused(capsys, *needles):
    err = capsys.readouterr().err
    assert "Traceback" not in err, err
    for needle in needles:
        assert needle in err, err
    return err


# -- 1. a row with more or fewer fields than the header -----------------------------------------------------------
@pytest.mark.parametrize("extension,delimiter", [(".csv", ","), (".tsv", "\t")])
@pytest.mark.parametrize("bad,found", [(["hello world", "sport", "extra"], 3), (["only one field"], 1),
                                       (["a", "b", "c", "d"], 4)])
def test_a_row_with_another_field_count_is_refused_naming_its_line(tmp_path, extension, delimiter, bad, found):
    rows = good_rows()
    rows.insert(4, bad)  # line 6 of the file: the header is line 1
    path = write_rows(tmp_path / f"data{extension}", rows, delimiter)
    with pytest.raises(DatasetError) as error:
        load_text_classification_dataset(path)
    message = str(error.value)
    assert f"line 6: {found} field{'s' if found > 1 else ''} where the header (line 1: text, label) has 2" in message
    assert ("quotes" if found > 2 else "missing") in message and os.path.basename(path) in message


def test_the_line_is_the_files_line_not_the_record_number(tmp_path):
    """Quoted fields that hold line breaks (and commas) are fine; the bad row after them is named by the line an
    editor shows, which is not its record number."""
    rows = [['"first, with a comma\nand a second line\nand a third"', "sport"], ['"plain"', "business"],
            ['"x\ny"', "arts", "extra"]]
    path = write_rows(tmp_path / "multi.csv", rows)
    with pytest.raises(DatasetError, match=r"multi.csv', lines 6-7 \(one row: a quoted field holds line breaks"):
        load_text_classification_dataset(path)


def test_quoted_fields_with_delimiters_quotes_and_line_breaks_are_read_as_written(tmp_path):
    rows = [[f'"{WORDS[i % 3]}, part {i}\nsecond ""line"", {i}"', LABELS[i % 3]] for i in range(12)]
    path = tmp_path / "quoted.csv"
    path.write_bytes(("\ufefftext,label\n\n" + "".join(",".join(row) + "\r\n" for row in rows)).encode("utf-8"))
    dataset, names, _ = load_text_classification_dataset(str(path))
    texts = {text for part in dataset.values() for text in part["text"]}
    assert 'match goal team season, part 0\nsecond "line", 0' in texts and len(texts) == 12
    assert names == sorted(LABELS)


def test_a_long_quoted_document_is_not_refused_by_pythons_field_limit(tmp_path):
    rows = [[f'"{" ".join([WORDS[i % 3]] * 20_000)}, end"', LABELS[i % 3]] for i in range(12)]  # ~450 KB a field
    dataset, _, _ = load_text_classification_dataset(write_rows(tmp_path / "long.csv", rows))
    assert max(len(text) for text in dataset["train"]["text"]) > 400_000


def test_train_and_predict_refuse_the_shifted_row_through_the_cli(tmp_path, classifier, capsys):
    rows = good_rows()
    rows.insert(2, ["hello world", "sport", "extra"])
    data = write_rows(tmp_path / "shifted.csv", rows)
    assert main(["train", *TINY, "--dataset", data, "--output-dir", str(tmp_path / "out")]) == 2
    refused(capsys, "shifted.csv', line 4: 3 fields where the header (line 1: text, label) has 2", "double quotes")
    assert not (tmp_path / "out").exists()
    assert main(["predict", classifier, "--dataset", data, "--output", str(tmp_path / "p.jsonl")]) == 2
    refused(capsys, "shifted.csv', line 4: 3 fields where the header (line 1: text, label) has 2", "double quotes")
    assert not (tmp_path / "p.jsonl").exists()
    tsv = write_rows(tmp_path / "short.tsv", good_rows()[:3] + [["no label here"]] + good_rows()[3:], "\t")
    assert main(["predict", classifier, "--dataset", tsv, "--output", str(tmp_path / "p.jsonl")]) == 2
    refused(capsys, "short.tsv', line 5: 1 field where the header (line 1: text, label) has 2", "missing")
    assert main(["evaluate", classifier, "--dataset", data]) == 2
    refused(capsys, "line 4: 3 fields")


# -- 2. a folder of .txt files, edited keeping size and modification time -----------------------------------------
def edit_keeping_size_and_time(path, text):
    before = os.stat(path)
    assert len(text.encode()) == before.st_size
    path.write_text(text)
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = os.stat(path)
    assert (after.st_size, after.st_mtime_ns) == (before.st_size, before.st_mtime_ns)


def test_an_edit_that_keeps_size_and_mtime_is_read_not_taken_from_the_cache(tmp_path):
    folder = tmp_path / "docs"
    (folder / "sub").mkdir(parents=True)
    (folder / "a.txt").write_text("the old text of a")
    (folder / "sub" / "b.txt").write_text("the text of b")
    paths = text_files(folder)[0]
    before = listing_digest(str(folder), paths)
    assert load_text_folder(str(folder))["text"] == ["the old text of a", "the text of b"]
    edit_keeping_size_and_time(folder / "a.txt", "the new text of a")
    assert load_text_folder(str(folder))["text"] == ["the new text of a", "the text of b"]
    assert listing_digest(str(folder), paths) != before  # predict's resume fingerprint sees the edit too
    edit_keeping_size_and_time(folder / "a.txt", "the old text of a")  # back to the old bytes: the old digest
    assert listing_digest(str(folder), paths) == before


def test_a_labelled_folder_edited_keeping_size_and_mtime_is_read_again(tmp_path):
    folder = tmp_path / "labelled"
    for label in ("sport", "arts"):
        (folder / label).mkdir(parents=True)
        (folder / label / "one.txt").write_text(f"{label} document version 1")
    assert load_labelled_folder(str(folder))["text"] == ["arts document version 1", "sport document version 1"]
    edit_keeping_size_and_time(folder / "sport" / "one.txt", "sport document version 2")
    assert load_labelled_folder(str(folder))["text"] == ["arts document version 1", "sport document version 2"]


def test_the_digest_tells_names_and_contents_apart(tmp_path):
    (tmp_path / "a.txt").write_text("xy")
    (tmp_path / "b.txt").write_text("")
    first = listing_digest(str(tmp_path), ["a.txt", "b.txt"])
    (tmp_path / "a.txt").write_text("x")
    (tmp_path / "b.txt").write_text("y")  # the same bytes in all, split differently
    assert listing_digest(str(tmp_path), ["a.txt", "b.txt"]) != first


# -- 3. messages --------------------------------------------------------------------------------------------------
def test_an_empty_jsonl_file_says_it_is_empty(tmp_path, classifier, capsys):
    for content in ("", "\n  \n"):
        path = tmp_path / "empty.jsonl"
        path.write_text(content)
        assert main(["train", *TINY, "--dataset", str(path), "--output-dir", str(tmp_path / "out")]) == 2
        refused(capsys, "empty.jsonl' is empty", "one JSON object per line")
        assert main(["predict", classifier, "--dataset", str(path), "--output", str(tmp_path / "p.csv")]) == 2
        refused(capsys, "empty.jsonl' is empty")
    (tmp_path / "rows.json").write_text("[]")
    assert main(["train", *TINY, "--dataset", str(tmp_path / "rows.json"), "--output-dir", str(tmp_path / "o")]) == 2
    refused(capsys, "rows.json' holds no rows")


@pytest.mark.parametrize("content", ["text,label\n", "text,label\n\n\n", "\ufefftext,label\r\n"])
def test_a_csv_with_a_header_and_no_rows_says_so(tmp_path, classifier, capsys, content):
    path = tmp_path / "header.csv"
    path.write_text(content, encoding="utf-8")
    assert main(["train", *TINY, "--dataset", str(path), "--output-dir", str(tmp_path / "out")]) == 2
    refused(capsys, "header.csv' has a header (line 1: text, label) and no rows")
    assert main(["predict", classifier, "--dataset", str(path), "--output", str(tmp_path / "p.csv")]) == 2
    refused(capsys, "has a header (line 1: text, label) and no rows")
    path.write_text("")
    assert main(["predict", classifier, "--dataset", str(path), "--output", str(tmp_path / "p.csv")]) == 2
    refused(capsys, "header.csv' is empty", "header line")


def test_attention_map_names_a_latin1_file_its_line_and_the_fix(tmp_path, capsys):
    """The text is read before the model is loaded: a folder with a config.json is enough to reach it."""
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({"model_type": "sparse_longformer"}))
    document = tmp_path / "doc latin1.txt"
    document.write_bytes("first line\nun caf\u00e9 cr\u00e8me\n".encode("latin-1"))
    argv = ["attention-map", str(model), "--text-file", str(document), "--output", str(tmp_path / "map.png")]
    assert main(argv) == 2
    err = refused(capsys, f"--text-file {str(document)!r}, line 2: byte 0xe9 at column 7 is not UTF-8",
                  "byte 17 of the file", "iconv -f latin1 -t utf-8")
    assert "doc latin1.utf8.txt" in err and not (tmp_path / "map.png").exists()
    document.write_text("   \n")
    assert main(argv) == 2
    refused(capsys, "is empty")
