"""`hf-longdoc predict` / `hf_longdoc.predict`: rows in order with their ids, agreement with Transformers' pipeline,
folders of .txt files, output formats, resuming, refusals before any work, and 2 processes under torchrun. A tiny random
BERT classifier saved with `save_pretrained` stands in for a trained model; nothing is downloaded."""

import csv
import json
import os
import subprocess
import sys

import pytest
import torch
from datasets import Dataset
from transformers import BertConfig, BertForSequenceClassification, pipeline

import hf_longdoc
from hf_longdoc.cli import main
from hf_longdoc.data import fit_wordpiece_tokenizer, load_text_classification_dataset, make_long_document_task
from hf_longdoc.data.loading import DatasetError
from hf_longdoc.inference import reader as reading_models
from hf_longdoc.predicting import settings as predict_settings

TEXTS = list(make_long_document_task(train_size=16, validation_size=4, test_size=8, min_words=5, max_words=60,
                                     seed=3)["train"]["text"])
READS = 40  # positions the tiny model reads: most documents above are longer


def save_classifier(folder, seed=0, **config):
    """A 3-label BERT classifier reading READS positions, with its WordPiece tokenizer, saved to `folder`."""
    tokenizer = fit_wordpiece_tokenizer(TEXTS, vocab_size=300, model_max_length=READS)
    torch.manual_seed(seed)
    settings = dict(vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=1, num_attention_heads=4,
                    intermediate_size=37, max_position_embeddings=READS, pad_token_id=tokenizer.pad_token_id,
                    num_labels=3, id2label={0: "a", 1: "b", 2: "c"}, label2id={"a": 0, "b": 1, "c": 2})
    BertForSequenceClassification(BertConfig(**{**settings, **config})).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return str(folder)


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return save_classifier(tmp_path_factory.mktemp("classifier"))


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """A JSONL file: ids in no sorted order, an extra column, the documents above and one with no text."""
    path = tmp_path_factory.mktemp("corpus") / "docs.jsonl"
    rows = [{"doc": f"d{(7 * i) % 17}", "source": f"s{i}", "body": text} for i, text in enumerate(TEXTS)]
    rows.insert(5, {"doc": "blank", "source": "none", "body": "  "})
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return str(path), rows


@pytest.fixture
def small_windows(monkeypatch):
    """Windows of 2 batches, so that a small corpus has several (sorted, resumed and shared separately)."""
    monkeypatch.setattr(predict_settings, "WINDOW_BATCHES", 2)


def read_jsonl(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def test_rows_keep_input_order_and_ids_and_agree_with_the_pipeline(model_dir, corpus, tmp_path, small_windows):
    path, rows = corpus
    output = tmp_path / "out.jsonl"
    result = hf_longdoc.predict(model_dir, path, output, text_column="body", id_column="doc", keep_columns="source",
                                batch_size=3)
    written = read_jsonl(output)
    assert [row["doc"] for row in written] == [row["doc"] for row in rows] == result["doc"]
    assert [row["source"] for row in written] == [row["source"] for row in rows]
    assert set(written[0]) == {"doc", "source", "label", "score", "scores", "error"}
    classify = pipeline("text-classification", model=model_dir, truncation=True, top_k=None)
    for row, given in zip(written, rows):
        if not given["body"].strip():
            assert row["label"] is None and row["score"] is None and row["error"] == "the text is only whitespace"
            continue
        expected = {entry["label"]: entry["score"] for entry in classify([given["body"]])[0]}
        assert row["error"] is None and row["label"] == max(expected, key=expected.get)
        assert row["scores"] == pytest.approx(expected, abs=1e-5)
        assert row["score"] == pytest.approx(expected[row["label"]], abs=1e-5)
    assert not os.path.exists(f"{output}.partial")


def test_csv_and_parquet_hold_the_same_rows(model_dir, corpus, tmp_path):
    path, rows = corpus
    as_json = hf_longdoc.predict(model_dir, path, tmp_path / "out.jsonl", text_column="body", top_k=2)
    hf_longdoc.predict(model_dir, path, tmp_path / "out.csv", text_column="body", top_k=2)
    hf_longdoc.predict(model_dir, path, tmp_path / "out.parquet", text_column="body", top_k=2)
    with open(tmp_path / "out.csv", newline="", encoding="utf-8") as f:
        table = list(csv.DictReader(f))
    assert list(table[0]) == ["id", "label", "score", "score_a", "score_b", "score_c", "error"]
    assert [int(row["id"]) for row in table] == list(range(len(rows)))  # no id column: row numbers
    for row, expected in zip(table, as_json):
        assert row["label"] == (expected["label"] or "")
        shown = {label: float(row[f"score_{label}"]) for label in "abc" if row[f"score_{label}"]}
        assert shown == {label: score for label, score in (expected["scores"] or {}).items() if score is not None}
        assert len(shown) in (0, 2)  # the 2 best, or none for the blank row
    assert Dataset.from_parquet(str(tmp_path / "out.parquet")).to_list() == as_json.to_list()
    top = read_jsonl(tmp_path / "out.jsonl")[0]["scores"]
    assert len(top) == 2 and min(top.values()) >= max(as_json[0]["scores"][k] or 0 for k in "abc" if k not in top)
    for row in read_jsonl(tmp_path / "out.jsonl"):  # the K best, best first, as the pipeline's top_k lists them
        assert list((row["scores"] or {}).values()) == sorted((row["scores"] or {}).values(), reverse=True)
    hf_longdoc.predict(model_dir, path, tmp_path / "all.jsonl", text_column="body", top_k=3)  # K = every class
    for row in read_jsonl(tmp_path / "all.jsonl"):
        assert list((row["scores"] or {}).values()) == sorted((row["scores"] or {}).values(), reverse=True)


def test_a_folder_of_text_files_gives_one_row_per_file(model_dir, tmp_path, caplog):
    folder = tmp_path / "docs"
    (folder / "2021").mkdir(parents=True)
    (folder / "a.txt").write_text(TEXTS[0], encoding="utf-8")
    (folder / "2021" / "b.txt").write_text(TEXTS[1], encoding="utf-8")
    (folder / "empty.txt").write_text("", encoding="utf-8")
    (folder / "latin.txt").write_bytes("Caf\xe9 cr\xe8me, r\xe9sum\xe9 of the reactor".encode("latin-1"))
    (folder / "notes.md").write_text("not a document")
    with caplog.at_level("INFO"):
        result = hf_longdoc.predict(model_dir, str(folder), tmp_path / "out.jsonl")
    rows = {row["id"]: row for row in read_jsonl(tmp_path / "out.jsonl")}
    assert list(rows) == ["2021/b.txt", "a.txt", "empty.txt", "latin.txt"] == result["id"]
    assert rows["empty.txt"]["label"] is None and rows["empty.txt"]["error"] == "empty text"
    assert rows["latin.txt"]["label"] in "abc" and rows["a.txt"]["label"] in "abc"
    assert "1 of 4 files are not valid UTF-8" in caplog.text
    assert "3 of 4 documents" in caplog.text and "1 have no text" in caplog.text


def test_an_existing_output_is_kept_without_overwrite(model_dir, corpus, tmp_path):
    output = tmp_path / "out.jsonl"
    output.write_text("the user's file\n")
    with pytest.raises(ValueError, match="already exists.*--overwrite"):
        hf_longdoc.predict(model_dir, corpus[0], output, text_column="body")
    assert output.read_text() == "the user's file\n"
    hf_longdoc.predict(model_dir, corpus[0], output, text_column="body", overwrite=True)
    assert len(read_jsonl(output)) == len(corpus[1])


def test_a_text_of_invisible_characters_gets_no_label(model_dir, tmp_path):
    """Zero-width spaces alone tokenize to [CLS][SEP]: no label from no words (as the long-document pipeline
    refuses it), while a visible word beside them is classified."""
    dataset = tmp_path / "texts.jsonl"
    dataset.write_text(json.dumps({"text": "\u200b\u200b"}) + "\n" + json.dumps({"text": "goal\u200b"}) + "\n")
    hf_longdoc.predict(model_dir, dataset, tmp_path / "out.jsonl")
    invisible, visible = read_jsonl(tmp_path / "out.jsonl")
    assert invisible["label"] is None and "no visible character" in invisible["error"]
    assert visible["label"] is not None and visible["error"] is None


def test_several_text_columns_are_joined_as_training_joins_them(model_dir, tmp_path):
    """`--text-column title,body` (as `train` takes it): each row's columns joined into one document, as the
    training data loader joins them, and the same scores as that joined text given whole."""
    from hf_longdoc.data.inversion import join_parts

    rows = [{"title": "Match report", "body": TEXTS[0]}, {"title": "Budget", "body": TEXTS[1]},
            {"title": "Only a title", "body": None}]
    two = tmp_path / "two.jsonl"
    two.write_text("".join(json.dumps(row) + "\n" for row in rows))
    one = tmp_path / "one.jsonl"
    one.write_text("".join(json.dumps({"text": join_parts([row["title"], row["body"]])}) + "\n" for row in rows))
    hf_longdoc.predict(model_dir, two, tmp_path / "two_out.jsonl", text_column="title, body")
    hf_longdoc.predict(model_dir, one, tmp_path / "one_out.jsonl")
    assert read_jsonl(tmp_path / "two_out.jsonl") == read_jsonl(tmp_path / "one_out.jsonl")
    with pytest.raises(ValueError, match="'summary' is not a column"):
        hf_longdoc.predict(model_dir, two, tmp_path / "bad.jsonl", text_column="title,summary")


def test_overwrite_never_replaces_what_the_run_reads(model_dir, corpus, tmp_path):
    """--overwrite replaces an earlier output, never the dataset (its file, or a file in its folder of texts):
    refused before any work, the input unchanged."""
    dataset = tmp_path / "texts.jsonl"
    dataset.write_bytes(open(corpus[0], "rb").read())
    before = dataset.read_bytes()
    with pytest.raises(ValueError, match="is the `dataset`"):
        hf_longdoc.predict(model_dir, dataset, dataset, text_column="body", overwrite=True)
    assert dataset.read_bytes() == before
    folder = tmp_path / "folder"
    folder.mkdir()
    (folder / "a.txt").write_text("a short text")
    with pytest.raises(ValueError, match="lies in the `dataset`"):
        hf_longdoc.predict(model_dir, folder, folder / "out.jsonl", overwrite=True)


class Interrupted(Exception):
    pass


def interrupt_after(monkeypatch, batches):
    """Make the run stop (as a kill would) after `batches` batches were read."""
    original, calls = reading_models.Reader.predict, []

    def stopping(self, batch):
        if len(calls) == batches:
            raise Interrupted
        calls.append(1)
        return original(self, batch)

    monkeypatch.setattr(reading_models.Reader, "predict", stopping)


def count_batches(monkeypatch):
    """A list that grows by one for each batch the model reads."""
    original, read = reading_models.Reader.predict, []
    monkeypatch.setattr(reading_models.Reader, "predict", lambda self, batch: read.append(1) or original(self, batch))
    return read


def test_an_interrupted_run_continues_to_the_same_bytes(model_dir, corpus, tmp_path, monkeypatch, small_windows):
    path = corpus[0]
    reference = tmp_path / "reference.csv"
    with monkeypatch.context() as patch:
        batches = count_batches(patch)
        hf_longdoc.predict(model_dir, path, reference, text_column="body", batch_size=2)
    output = tmp_path / "out.csv"
    with monkeypatch.context() as patch:
        interrupt_after(patch, 5)  # two whole windows and one batch of the third
        with pytest.raises(Interrupted):
            hf_longdoc.predict(model_dir, path, output, text_column="body", batch_size=2)
    assert not output.exists()
    partial = sorted(os.listdir(f"{output}.partial"))
    assert len([name for name in partial if name.endswith(".jsonl")]) == 5
    assert len([name for name in partial if name.endswith(".done")]) == 2
    resumed = count_batches(monkeypatch)
    hf_longdoc.predict(model_dir, path, output, text_column="body", batch_size=2)
    assert output.read_bytes() == reference.read_bytes()
    assert len(resumed) == len(batches) - 5  # only what was left
    assert not os.path.exists(f"{output}.partial")


def test_another_model_or_setting_cannot_continue_an_interrupted_run(model_dir, corpus, tmp_path, monkeypatch):
    output = tmp_path / "out.jsonl"
    with monkeypatch.context() as patch:
        interrupt_after(patch, 1)
        with pytest.raises(Interrupted):
            hf_longdoc.predict(model_dir, corpus[0], output, text_column="body", batch_size=2)
    other = save_classifier(tmp_path / "other", seed=1)
    with pytest.raises(ValueError, match=r"differs from this one \(model \(files that differ: model.safetensors"):
        hf_longdoc.predict(other, corpus[0], output, text_column="body", batch_size=2)
    with pytest.raises(ValueError, match="top_k None there, 2 here"):
        hf_longdoc.predict(model_dir, corpus[0], output, text_column="body", batch_size=2, top_k=2)
    hf_longdoc.predict(other, corpus[0], output, text_column="body", batch_size=2, overwrite=True)  # starts over
    assert len(read_jsonl(output)) == len(corpus[1])


def test_a_run_continues_at_another_batch_size(model_dir, corpus, tmp_path, monkeypatch, small_windows, caplog):
    """After running out of memory a user reruns with a smaller --batch-size: the finished windows are kept, the
    others are read at the new size, and the rows are those of an uninterrupted run (scores to rounding)."""
    path = corpus[0]
    hf_longdoc.predict(model_dir, path, tmp_path / "reference.jsonl", text_column="body", batch_size=2)
    reference = read_jsonl(tmp_path / "reference.jsonl")
    output = tmp_path / "out.jsonl"
    with monkeypatch.context() as patch:
        interrupt_after(patch, 5)  # two whole windows of 4 rows, and one batch of the third
        with pytest.raises(Interrupted):
            hf_longdoc.predict(model_dir, path, output, text_column="body", batch_size=2)
    resumed = count_batches(monkeypatch)
    with caplog.at_level("WARNING", logger="hf_longdoc.predicting"):
        hf_longdoc.predict(model_dir, path, output, text_column="body", batch_size=1)
    assert "Continuing at --batch-size 1 a run that started at 2" in caplog.text
    assert len(resumed) == len(corpus[1]) - 8  # the 8 rows of the finished windows are not read again, the rest 1 by 1
    rows = read_jsonl(output)
    assert [row["id"] for row in rows] == [row["id"] for row in reference]
    assert [row["label"] for row in rows] == [row["label"] for row in reference]
    for row, expected in zip(rows, reference):
        if expected["scores"] is not None:
            assert row["scores"] == pytest.approx(expected["scores"], abs=1e-5)


def test_out_of_memory_says_how_to_continue(model_dir, corpus, tmp_path, monkeypatch, capsys, small_windows):
    output = tmp_path / "out.jsonl"
    original, calls = reading_models.Reader.predict, []

    def running_out(self, batch):
        if len(batch) > 1 and calls:  # the second batch of two documents does not fit
            raise torch.OutOfMemoryError("CUDA out of memory.")
        calls.append(1)
        return original(self, batch)

    with monkeypatch.context() as patch:
        patch.setattr(reading_models.Reader, "predict", running_out)
        with pytest.raises(torch.OutOfMemoryError):
            main(["predict", model_dir, "--dataset", corpus[0], "--output", str(output), "--text-column", "body",
                  "--batch-size", "2"])
    assert "rerun the command with --batch-size 1 to continue" in capsys.readouterr().err
    assert main(["predict", model_dir, "--dataset", corpus[0], "--output", str(output), "--text-column", "body",
                 "--batch-size", "1"]) == 0
    assert len(read_jsonl(output)) == len(corpus[1])


def test_bad_input_is_refused_before_any_work(model_dir, corpus, tmp_path):
    path, rows = corpus
    output = tmp_path / "out.jsonl"
    with pytest.raises(ValueError, match=r"'doc' has duplicate values, e.g. 'd\d+'"):
        hf_longdoc.predict(model_dir, duplicated(tmp_path, rows), output, text_column="body", id_column="doc")
    with pytest.raises(ValueError, match="'text' is not a column of the input; its columns are doc, source, body"):
        hf_longdoc.predict(model_dir, path, output)
    with pytest.raises(ValueError, match=r"must be one of \.jsonl, \.csv, \.parquet; got \.txt"):
        hf_longdoc.predict(model_dir, path, tmp_path / "out.txt", text_column="body")
    with pytest.raises(ValueError, match="is not a saved model folder"):
        hf_longdoc.predict(str(tmp_path), path, output, text_column="body")
    with pytest.raises(ValueError, match="float16 needs a GPU"):
        hf_longdoc.predict(model_dir, path, output, text_column="body", dtype="float16", device="cpu")
    with pytest.raises(ValueError, match="'label' has the name of the output column 'label', and 'input_label'"):
        hf_longdoc.predict(model_dir, Dataset.from_dict({"text": ["x"], "label": ["a"], "input_label": ["b"]}),
                           output, keep_columns=["label"])
    mixed = tmp_path / "mixed.jsonl"  # one document written as a number: `datasets` reads the column as JSON values
    mixed.write_text("\n".join(json.dumps({"text": text}) for text in ["a report", "another one", 12345]))
    with pytest.raises(ValueError, match=r"'text' mixes text with other JSON values \(row 2, counting from 0, holds "
                                         r"int '12345'\)"):
        hf_longdoc.predict(model_dir, str(mixed), output)
    assert sorted(os.listdir(tmp_path)) == ["dup.jsonl", "mixed.jsonl"]  # nothing was started


def duplicated(folder, rows):
    path = folder / "dup.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in [*rows, rows[0]]))
    return str(path)


def test_the_cli_prints_where_it_wrote(model_dir, corpus, tmp_path, capsys):
    output = tmp_path / "out.parquet"
    assert main(["predict", model_dir, "--dataset", corpus[0], "--output", str(output), "--text-column", "body",
                 "--long", "chunks", "--stride", "4"]) == 0
    out = capsys.readouterr().out
    assert f"Wrote {len(corpus[1])} rows to {output}" in out and "1 without text" in out
    result = Dataset.from_parquet(str(output))
    classify = pipeline("long-document-classification", model=model_dir)
    for row, given in zip(result, corpus[1]):
        if given["body"].strip():
            expected = classify(given["body"], stride=4)
            assert row["chunks"] == expected["chunks"] and row["label"] == expected["label"]
            assert row["scores"] == pytest.approx(expected["scores"], abs=1e-5)
    assert main(["predict", model_dir, "--dataset", corpus[0], "--output", str(tmp_path / "x.xlsx")]) == 2
    assert "must be one of .jsonl" in capsys.readouterr().err


def test_multi_label_rows_list_the_labels_over_the_saved_threshold(tmp_path, corpus):
    folder = save_classifier(tmp_path / "multi", problem_type="multi_label_classification",
                             multi_label_threshold=0.5)
    result = hf_longdoc.predict(folder, corpus[0], text_column="body")
    for row in result:
        if row["error"] is None:
            assert row["label"] == [k for k, v in sorted(row["scores"].items(), key=lambda kv: -kv[1]) if v >= 0.5]
            assert row["score"] == [row["scores"][label] for label in row["label"]]


def test_explain_adds_the_evidence_column(model_dir, corpus, tmp_path, monkeypatch):
    from hf_longdoc.inference import explaining

    monkeypatch.setattr(explaining, "check_explainable", lambda model: None)
    seen = []

    def explain(model, tokenizer, texts, k, max_length):
        seen.append(max_length)
        evidence = [[{"text": text[:4], "start": 0, "end": 4, "weight": 1.0}][:k] for text in texts]
        return model(**tokenizer(texts, truncation=True, padding=True, return_tensors="pt")).logits, evidence

    monkeypatch.setattr(explaining, "explain", explain)
    result = hf_longdoc.predict(model_dir, corpus[0], tmp_path / "out.csv", text_column="body", explain=1)
    assert seen and set(seen) == {READS}
    with open(tmp_path / "out.csv", newline="", encoding="utf-8") as f:
        table = list(csv.DictReader(f))
    for row, given, returned in zip(table, corpus[1], result):
        if given["body"].strip():
            assert json.loads(row["evidence"]) == [{"text": given["body"][:4], "start": 0, "end": 4, "weight": 1.0}]
            assert returned["evidence"][0]["text"] == given["body"][:4]
        else:
            assert row["evidence"] == ""


def test_train_reads_a_labelled_folder(tmp_path):
    folder = tmp_path / "docs"
    for label in ("sport", "tech"):
        (folder / label).mkdir(parents=True)
        for i in range(10):
            (folder / label / f"{i}.txt").write_text(f"{label} document number {i}", encoding="utf-8")
    dataset, names, multi_label = load_text_classification_dataset(str(folder))
    assert names == ["sport", "tech"] and not multi_label
    assert sum(len(part) for part in dataset.values()) == 20
    row = dataset["train"][0]
    assert row["text"].startswith(names[row["label"]])
    flat = tmp_path / "flat"
    flat.mkdir()
    (flat / "a.txt").write_text("a document")
    with pytest.raises(DatasetError, match="one subfolder per class"):
        load_text_classification_dataset(str(flat))


def run_to_the_end(command, env):
    """Run `command`; past 300 s kill it and every process it started (torchrun gives each rank a session of its
    own, so killing the launcher alone leaves them running)."""
    import psutil

    process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        stdout, stderr = process.communicate(timeout=300)
    except subprocess.TimeoutExpired:
        launcher = psutil.Process(process.pid)
        for stuck in launcher.children(recursive=True) + [launcher]:
            try:
                stuck.kill()
            except psutil.NoSuchProcess:
                pass
        process.communicate()
        raise
    assert process.returncode == 0, stdout[-2000:] + stderr[-4000:]


@pytest.mark.slow
def test_two_processes_under_torchrun_write_what_one_process_writes(model_dir, tmp_path):
    """`torchrun --nproc_per_node 2 -m hf_longdoc.cli predict` (gloo on CPU) against one process, both with one
    thread each so that the numbers are computed alike. 80 documents in batches of 1 are 3 windows of 32: the first
    process reads two, the second one."""
    from ddp_train import free_port

    path = tmp_path / "docs.csv"
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(["id", "text"])
        writer.writerows([f"doc-{i}", text] for i, text in enumerate(TEXTS * 5))
    env = dict(os.environ, OMP_NUM_THREADS="1", HF_HUB_OFFLINE="1", GLOO_SOCKET_IFNAME="lo")
    arguments = ["predict", model_dir, "--dataset", str(path), "--batch-size", "1", "--top-k", "2"]
    run_to_the_end([sys.executable, "-m", "hf_longdoc.cli", *arguments, "--output", str(tmp_path / "one.jsonl")], env)
    run_to_the_end([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_addr",
                    "127.0.0.1", "--master_port", free_port(), "-m", "hf_longdoc.cli", *arguments,
                    "--output", str(tmp_path / "two.jsonl")], env)
    assert (tmp_path / "two.jsonl").read_bytes() == (tmp_path / "one.jsonl").read_bytes()
    assert [row["id"] for row in read_jsonl(tmp_path / "two.jsonl")] == [f"doc-{i}" for i in range(80)]


def test_an_unknown_model_type_is_refused_without_a_prompt(corpus, tmp_path, capsys):
    folder = tmp_path / "mystery"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"model_type": "mystery_model"}))
    assert main(["predict", str(folder), "--dataset", str(corpus[0]), "--output", str(tmp_path / "o.jsonl"),
                 "--text-column", "body"]) == 2
    err = capsys.readouterr().err
    assert "mystery_model" in err and "trust_remote_code" not in err and "[y/N]" not in err
    assert not (tmp_path / "o.jsonl").exists()


def test_the_same_command_with_overwrite_continues_its_interrupted_run(model_dir, corpus, tmp_path, monkeypatch,
                                                                       small_windows):
    """--overwrite replaces the finished file; an interrupted run of the same command still continues (it used to
    start over, so a user replacing an earlier output could never resume)."""
    output = tmp_path / "out.jsonl"
    output.write_text("an earlier output\n")
    with monkeypatch.context() as patch:
        interrupt_after(patch, 2)
        with pytest.raises(Interrupted):
            hf_longdoc.predict(model_dir, corpus[0], output, text_column="body", batch_size=2, overwrite=True)
    assert output.read_text() == "an earlier output\n"  # kept until the new run is complete
    read = count_batches(monkeypatch)
    hf_longdoc.predict(model_dir, corpus[0], output, text_column="body", batch_size=2, overwrite=True)
    assert len(read_jsonl(output)) == len(corpus[1])
    assert 0 < len(read) < -(-len(corpus[1]) // 2)  # only what was left


def test_a_kept_label_column_is_written_beside_the_prediction(model_dir, corpus, tmp_path):
    path, rows = corpus
    labelled = tmp_path / "labelled.jsonl"
    labelled.write_text("".join(json.dumps({**row, "label": f"gold-{i}"}) + "\n" for i, row in enumerate(rows)))
    result = hf_longdoc.predict(model_dir, labelled, tmp_path / "out.jsonl", text_column="body",
                                keep_columns="label")
    assert result["input_label"] == [f"gold-{i}" for i in range(len(rows))]
    assert "label" in result.column_names


def test_a_second_run_of_the_same_output_is_refused_while_the_first_runs(model_dir, corpus, tmp_path):
    """Two runs writing one --output would share its .partial folder (the second crashed after all its work, on the
    first's files): while a run holds `.OUT.lock`, another is refused before any work, and a finished run leaves no
    lock behind."""
    from filelock import FileLock

    output = tmp_path / "out.jsonl"
    with FileLock(tmp_path / ".out.jsonl.lock", timeout=0):  # what a running predict holds
        with pytest.raises(ValueError, match="Another hf-longdoc predict is writing .*out.jsonl"):
            hf_longdoc.predict(model_dir, corpus[0], output, text_column="body")
    assert not output.exists() and not (tmp_path / "out.jsonl.partial").exists()
    hf_longdoc.predict(model_dir, corpus[0], output, text_column="body")
    assert sorted(os.listdir(tmp_path)) == ["out.jsonl"]


def test_runtime_settings_change_how_a_saved_model_runs_not_its_rows(corpus, tmp_path, monkeypatch, capsys):
    """`config_overrides` (--config) sets a family's runtime settings on the saved model (the S-LSTM's compiled step
    and runs here): the same rows; any other key, a model without such settings or a bad value is refused first."""
    from hf_longdoc.modeling.slstm import SLSTMConfig, SLSTMForSequenceClassification

    tokenizer = fit_wordpiece_tokenizer(TEXTS, vocab_size=300, model_max_length=READS)
    torch.manual_seed(0)
    config = SLSTMConfig(vocab_size=len(tokenizer), hidden_size=16, num_recurrent_steps=2,
                         max_position_embeddings=READS, pad_token_id=tokenizer.pad_token_id, num_labels=3,
                         id2label={0: "a", 1: "b", 2: "c"}, label2id={"a": 0, "b": 1, "c": 2})
    folder = tmp_path / "slstm"
    SLSTMForSequenceClassification(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    loaded = []
    load_model = reading_models.load_model
    monkeypatch.setattr(reading_models, "load_model", lambda *args: loaded.append(load_model(*args)) or loaded[-1])
    path = corpus[0]
    plain = hf_longdoc.predict(str(folder), path, text_column="body")
    tuned = hf_longdoc.predict(str(folder), path, text_column="body",
                               config_overrides={"compile_gates": False, "chunk_size": 3})
    assert loaded[1][0].config.chunk_size == 3 and loaded[1][0].config.compile_gates is False
    assert tuned["label"] == plain["label"]
    for a, b in zip(tuned["scores"], plain["scores"]):
        assert (a is None) == (b is None) and (a is None or a == pytest.approx(b, abs=1e-6))
    with pytest.raises(ValueError, match=r"for this slstm model is compile_gates, chunk_size; got hidden_size"):
        hf_longdoc.predict(str(folder), path, text_column="body", config_overrides={"hidden_size": 8})
    with pytest.raises(TypeError, match=r"`config_overrides` \(--config\): `compile_gates` must be True, False"):
        hf_longdoc.predict(str(folder), path, text_column="body", config_overrides={"compile_gates": "yes"})
    bert = save_classifier(tmp_path / "bert")
    with pytest.raises(ValueError, match="for this bert model is nothing"):
        hf_longdoc.predict(bert, path, text_column="body", config_overrides={"compile_gates": False})
    output = tmp_path / "out.jsonl"
    assert main(["predict", str(folder), "--dataset", path, "--text-column", "body", "--output", str(output),
                 "--config", "compile_gates=false"]) == 0
    assert loaded[-1][0].config.compile_gates is False and len(read_jsonl(output)) == len(plain)
