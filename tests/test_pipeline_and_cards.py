"""The serving side, as a user hits it: export without a tokenizer, the long-document pipeline's empty
documents, `top_k` and multi-label threshold, no interactive prompt and no silently random weights when the CLI loads
a model folder, and model cards that escape label names and name no local path. Tiny models, nothing downloaded."""

import json

import pytest
import torch
from transformers import BertConfig, BertForSequenceClassification, pipeline

from hf_longdoc.cli import main
from hf_longdoc.data import fit_wordpiece_tokenizer
from hf_longdoc.publishing.hub import make_model_card, public_name
from hf_longdoc.saving.saved_models import load_saved_model, load_saved_tokenizer
from test_conformance import CORPUS, _tokenizer_and_model

LABELS = ["a|b", "two\nlines", "<script>alert(1)</script> & co"]


def save_tiny(family, folder, tokenizer=True, **config):
    """The family's tiny classifier saved in `folder` (with its tokenizer unless `tokenizer=False`)."""
    saved_tokenizer, model = _tokenizer_and_model(family, max_length=min(family.max_length, 64))
    for key, value in config.items():
        setattr(model.config, key, value)
    model.save_pretrained(folder)
    if tokenizer:
        saved_tokenizer.save_pretrained(folder)
    return saved_tokenizer, model


@pytest.fixture
def bert_classifier(tmp_path):
    """A 3-label BERT classifier reading 48 positions, saved with its tokenizer (any Transformers checkpoint)."""
    folder = tmp_path / "bert"
    tokenizer = fit_wordpiece_tokenizer(CORPUS, vocab_size=120, model_max_length=48)
    config = BertConfig(vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=1, num_attention_heads=4,
                        intermediate_size=37, max_position_embeddings=48, num_labels=3,
                        id2label=dict(enumerate("xyz")), label2id={c: i for i, c in enumerate("xyz")})
    BertForSequenceClassification(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


# 3. no interactive prompt, no random layers, our message for a folder without tokenizer files

def test_every_family_saved_normally_loads_through_the_cli_loader(family, tmp_path):
    tokenizer, model = save_tiny(family, tmp_path / "model")
    loaded = load_saved_model(str(tmp_path / "model"), "`model_dir`")
    assert not loaded.training
    inputs = tokenizer(CORPUS[:2], padding=True, truncation=True, return_tensors="pt")
    with torch.no_grad():
        torch.testing.assert_close(loaded(**inputs).logits, model(**inputs).logits)
    assert load_saved_tokenizer(str(tmp_path / "model"), "`model_dir`")("a b c")["input_ids"]


@pytest.mark.parametrize("verb", [["evaluate"], ["export", "--output-dir", "{tmp}/onnx"],
                                  ["push", "--repo-id", "a/b", "--dry-run"], ["attention-map", "--text", "a b",
                                                                              "--output", "{tmp}/map.png"]])
def test_an_unknown_model_type_is_an_error_naming_it_and_never_a_prompt(verb, tmp_path, capsys, monkeypatch):
    folder = tmp_path / "custom"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"model_type": "mystery_net", "auto_map": {
        "AutoConfig": "configuration_mystery.MysteryConfig",
        "AutoModelForSequenceClassification": "modeling_mystery.MysteryForSequenceClassification"}}))
    (folder / "configuration_mystery.py").write_text("raise SystemExit('the folder code ran')\n")
    monkeypatch.setattr("builtins.input", lambda *a: pytest.fail("the CLI asked a question"))
    argv = [verb[0], str(folder)] + [part.format(tmp=tmp_path) for part in verb[1:]]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "'mystery_net'" in err and "contextualizer" in err and "sparse_longformer" in err
    assert "trust_remote_code" not in err and "Traceback" not in err


def test_a_config_edited_to_more_layers_is_refused_by_evaluate(tmp_path, capsys):
    folder = tmp_path / "model"
    tokenizer, model = save_tiny(next_family("contextualizer"), folder)
    config = json.loads((folder / "config.json").read_text())
    config["num_hidden_layers"] += 2
    (folder / "config.json").write_text(json.dumps(config))
    assert main(["evaluate", str(folder)]) == 2
    err = capsys.readouterr().err
    assert "contextualizer.steps.3." in err and "not in the file" in err and "config.json" in err


def test_a_config_whose_shapes_differ_from_the_weights_is_refused(tmp_path):
    folder = tmp_path / "model"
    save_tiny(next_family("contextualizer"), folder)
    config = json.loads((folder / "config.json").read_text())
    config["rank"] += 1
    (folder / "config.json").write_text(json.dumps(config))
    with pytest.raises(ValueError, match=r"`model_dir` .* the weight 'contextualizer\.steps\.0\..*' has shape"):
        load_saved_model(str(folder), "`model_dir`")


def test_a_folder_without_tokenizer_files_says_so(tmp_path, capsys):
    save_tiny(next_family("contextualizer"), tmp_path / "model", tokenizer=False)
    with pytest.raises(ValueError, match="holds no tokenizer files") as error:
        load_saved_tokenizer(str(tmp_path / "model"), "`model_dir`")
    assert "sentencepiece" not in str(error.value).split("(none of")[0]
    (tmp_path / "empty").mkdir()
    assert main(["train", "--model", "contextualizer", "--tokenizer", str(tmp_path / "empty"),
                 "--output-dir", str(tmp_path / "out")]) == 2
    assert "holds no tokenizer files" in capsys.readouterr().err


def next_family(name):
    from families import FAMILY_CASES

    return next(case for case in FAMILY_CASES if case.name == name)


# 1. export

def test_export_errors_name_the_flag_not_an_errno(tmp_path, capsys):
    save_tiny(next_family("contextualizer"), tmp_path / "model")
    (tmp_path / "a-file").write_text("x")
    assert main(["export", str(tmp_path / "model"), "--output-dir", str(tmp_path / "a-file" / "onnx")]) == 2
    err = capsys.readouterr().err
    assert "`output_dir` (--output-dir)" in err and "cannot be written" in err and "[Errno" not in err
    assert main(["export", str(tmp_path / "missing"), "--output-dir", str(tmp_path / "onnx")]) == 2
    err = capsys.readouterr().err
    assert "does not exist" in err and "[Errno" not in err


@pytest.mark.slow
def test_a_model_folder_without_a_tokenizer_exports_with_ids_from_its_vocabulary(tmp_path, capsys, caplog):
    onnxruntime = pytest.importorskip("onnxruntime")
    _, model = save_tiny(next_family("contextualizer"), tmp_path / "model", tokenizer=False)
    with caplog.at_level("INFO"):
        assert main(["export", str(tmp_path / "model"), "--output-dir", str(tmp_path / "onnx")]) == 0, \
            capsys.readouterr().err
    assert "holds no tokenizer" in caplog.text and "vocabulary" in caplog.text
    session = onnxruntime.InferenceSession(str(tmp_path / "onnx" / "model.onnx"), providers=["CPUExecutionProvider"])
    input_ids, attention_mask = torch.randint(1, model.config.vocab_size, (2, 12)), torch.ones(2, 12, dtype=torch.long)
    attention_mask[1, 7:] = 0
    with torch.no_grad():
        expected = model(input_ids=input_ids, attention_mask=attention_mask).logits
    (got,) = session.run(["logits"], {"input_ids": input_ids.numpy(), "attention_mask": attention_mask.numpy()})
    torch.testing.assert_close(torch.from_numpy(got), expected, rtol=0, atol=1e-4)


@pytest.mark.slow
def test_a_sparse_longformer_with_window_8_exports_and_runs_at_lengths_off_the_window(tmp_path, capsys):
    """Traced at 64 ids (a multiple of the window), the graph recorded no padding and failed in onnxruntime at 26."""
    case = next_family("sparse_longformer")
    case = type(case)(**{**case.__dict__, "tiny": {**case.tiny, "attention_window": 8}})
    save_tiny(case, tmp_path / "model")
    assert main(["export", str(tmp_path / "model"), "--output-dir", str(tmp_path / "onnx")]) == 0, \
        capsys.readouterr().err
    assert "onnxruntime agrees with PyTorch" in capsys.readouterr().out


# 2. pipelines

@pytest.mark.parametrize("documents, index", [("", 0), (["a fine text", "   \n\t"], 1), (["ok", "ok", "\u200b"], 2)])
def test_the_long_document_pipeline_refuses_a_document_without_text_by_its_index(bert_classifier, documents, index):
    classify = pipeline("long-document-classification", model=str(bert_classifier))
    with pytest.raises(ValueError, match=f"Document {index} has no text"):
        classify(documents)


def test_top_k_works_as_in_the_text_classification_pipeline(bert_classifier):
    classify = pipeline("long-document-classification", model=str(bert_classifier))
    document = " ".join(CORPUS) * 3
    full = classify(document)
    best = classify(document, top_k=1)
    every = classify(document, top_k=None)
    two = classify(document, top_k=2)
    assert best == [{"label": full["label"], "score": full["score"]}]
    assert [row["label"] for row in every] == sorted(full["scores"], key=full["scores"].get, reverse=True)
    assert two == every[:2] and len(every) == 3
    with pytest.raises(ValueError, match="`top_k` must be a positive integer or None"):
        classify(document, top_k=0)


def test_a_multi_label_model_uses_the_threshold_saved_with_it(tmp_path, bert_classifier):
    config = json.loads((bert_classifier / "config.json").read_text())
    config.update(problem_type="multi_label_classification", multi_label_threshold=0.0001)
    (bert_classifier / "config.json").write_text(json.dumps(config))
    classify = pipeline("long-document-classification", model=str(bert_classifier))
    result = classify(" ".join(CORPUS))
    ranked = sorted(result["scores"], key=result["scores"].get, reverse=True)
    assert result["labels"] == result["label"] == ranked  # every sigmoid score is above 0.0001, best first
    assert classify(" ".join(CORPUS), threshold=0.9999)["labels"] == []
    del config["multi_label_threshold"]
    (bert_classifier / "config.json").write_text(json.dumps(config))
    result = pipeline("long-document-classification", model=str(bert_classifier))(" ".join(CORPUS))
    ranked = sorted(result["scores"], key=result["scores"].get, reverse=True)
    assert result["labels"] == [label for label in ranked if result["scores"][label] >= 0.3]


# 4. cards and metrics

def test_the_card_escapes_label_names_and_names_no_local_path(tmp_path, capsys):
    folder = tmp_path / "model"
    save_tiny(next_family("contextualizer"), folder, id2label=dict(enumerate(LABELS)),
              label2id={label: i for i, label in enumerate(LABELS)})
    dataset = str(tmp_path / "private" / "reviews.jsonl")
    (folder / "metrics.json").write_text(json.dumps({"dataset": dataset, "backbone": str(tmp_path / "minilm"),
                                                     "test": {"accuracy": 0.5}, "sizes": {"test": 4}}))
    card = str(make_model_card(str(folder)))
    row = next(line for line in card.splitlines() if line.startswith("| labels |"))
    assert row.count(" | ") == 1 and row.endswith(" |")  # two cells: no label adds a column or ends the row
    assert "a\\|b" in row and "two lines" in row and "&lt;script&gt;" in row and "&amp; co" in row
    assert "<script>" not in card and str(tmp_path) not in card and "reviews.jsonl" in card
    assert main(["push", str(folder), "--repo-id", "me/model", "--dry-run", "--dry-run-dir",
                 str(tmp_path / "upload")]) == 0
    uploaded = (tmp_path / "upload" / "metrics.json").read_text()
    assert str(tmp_path) not in uploaded and json.loads(uploaded)["dataset"] == "reviews.jsonl"
    assert str(tmp_path) not in (tmp_path / "upload" / "README.md").read_text()
    assert not any(str(tmp_path) in path.read_text(errors="ignore")
                   for path in (tmp_path / "upload").iterdir() if path.suffix in (".json", ".md"))


@pytest.mark.parametrize("name, shown", [("/home/me/data/reviews.csv", "reviews.csv"),
                                         ("data/news.jsonl", "news.jsonl"),
                                         ("imdb", "imdb"), ("user/dataset", "user/dataset"), (None, None)])
def test_a_dataset_is_recorded_by_its_file_name(name, shown):
    assert public_name(name) == shown

