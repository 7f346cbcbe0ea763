"""The baselines a user with a pretrained checkpoint already has: the checkpoint through its own classifier at all its
positions (`native`; ModernBERT reads 8,192 tokens) and over every 512-token chunk with the logits averaged
(`bert-chunks`). Tiny random ModernBERT and BERT folders; nothing is downloaded."""

import csv

import pytest
import torch
from transformers import AutoModelForSequenceClassification, BertConfig, BertModel, ModernBertConfig, ModernBertModel

from hf_longdoc.cli import main
from hf_longdoc.data import fit_wordpiece_tokenizer, make_long_document_task
from hf_longdoc.experiments.baselines import ChunkMeanClassifier


def save_tiny(folder, model_class, config_class, **sizes):
    texts = make_long_document_task(train_size=16, validation_size=4, test_size=8, min_words=40, max_words=80,
                                    seed=1)["train"]["text"]
    tokenizer = fit_wordpiece_tokenizer(texts, vocab_size=300, model_max_length=sizes["max_position_embeddings"])
    ids = dict(pad_token_id=tokenizer.pad_token_id, cls_token_id=tokenizer.cls_token_id,
               sep_token_id=tokenizer.sep_token_id)
    torch.manual_seed(0)
    model_class(config_class(vocab_size=len(tokenizer), hidden_size=32, num_attention_heads=4, intermediate_size=37,
                             **ids, **sizes)).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def modernbert(tmp_path_factory):
    """ModernBERT's long settings at a tiny size: 2,048 positions, a 16-token local window, global every third layer."""
    return save_tiny(tmp_path_factory.mktemp("tiny-modernbert"), ModernBertModel, ModernBertConfig,
                     num_hidden_layers=3, max_position_embeddings=2048, local_attention=16)


def test_chunk_mean_averages_the_checkpoints_logits_over_the_chunks_a_document_has(tmp_path):
    """Against a reference written from the definition: each chunk read alone as [CLS] chunk [SEP]."""
    folder = save_tiny(tmp_path / "bert", BertModel, BertConfig, num_hidden_layers=1, max_position_embeddings=64)
    classifier = AutoModelForSequenceClassification.from_pretrained(folder, num_labels=3).eval()
    cls, sep, pad = classifier.config.cls_token_id, classifier.config.sep_token_id, classifier.config.pad_token_id
    model = ChunkMeanClassifier(classifier, num_chunks=4, chunk_length=10, cls_token_id=cls, sep_token_id=sep,
                                pad_token_id=pad).eval()
    generator = torch.Generator().manual_seed(0)
    documents = [torch.randint(10, 200, (n,), generator=generator) for n in (19, 8, 30)]  # 3, 1 and 4 chunks
    n = max(len(d) for d in documents) + 2
    input_ids = torch.full((3, n), pad)
    attention_mask = torch.zeros(3, n, dtype=torch.long)
    for row, document in enumerate(documents):
        input_ids[row, : len(document) + 2] = torch.cat([torch.tensor([cls]), document, torch.tensor([sep])])
        attention_mask[row, : len(document) + 2] = 1
    with torch.no_grad():
        got = model(input_ids, attention_mask).logits
        for row, document in enumerate(documents):
            pieces = [document[i: i + 8] for i in range(0, len(document), 8)][:4]
            expected = torch.stack([classifier(torch.cat([torch.tensor([cls]), p, torch.tensor([sep])])[None]).logits[0]
                                    for p in pieces]).mean(0)
            torch.testing.assert_close(got[row], expected, rtol=1e-5, atol=1e-5)
    labels = torch.tensor([0, 1, 2])
    model.train()
    loss = model(input_ids, attention_mask, labels=labels).loss
    loss.backward()  # every chunk is trained through
    assert classifier.classifier.weight.grad is not None and torch.isfinite(loss)


def test_compare_runs_native_chunks_and_tfidf_around_a_modernbert_checkpoint(modernbert, tmp_path, capsys):
    """The issue's check: every baseline a ModernBERT user has, beside our segment LM, from one checkpoint."""
    output = tmp_path / "compare"
    assert main(["compare", "--backbone", str(modernbert), "--models", "segment_lm:att", "--baselines",
                 "native,bert-chunks,tfidf", "--task-size", "24", "--task-words", "60,200", "--epochs", "1",
                 "--max-length", "600", "--evidence", "none", "--head-epochs", "2", "--output-dir", str(output)]) == 0
    rows = {row["model"]: row for row in csv.DictReader((output / "summary.csv").open())}
    assert set(rows) == {"segment_lm:att", "native", "bert-chunks", "tfidf"}
    assert int(float(rows["native"]["max_tokens"])) == 2048  # the checkpoint's own positions
    assert int(float(rows["bert-chunks"]["max_tokens"])) == 600
    report = (output / "report.md").read_text()
    assert all(f"| {name} |" in report for name in rows)


def test_checkpoint_baselines_need_a_backbone(tmp_path, capsys):
    assert main(["compare", "--models", "", "--baselines", "native", "--output-dir", str(tmp_path / "c")]) == 2
    assert "--backbone" in capsys.readouterr().err


def test_a_bfloat16_checkpoint_fine_tunes_with_float32_weights(tmp_path, caplog):
    """Transformers loads a checkpoint in the dtype it was saved in; `fit_model` (what `train` and `compare` run)
    trains it with float32 weights, and says so."""
    import logging

    folder = save_tiny(tmp_path / "bf16", BertModel, BertConfig, num_hidden_layers=1, max_position_embeddings=128)
    BertModel.from_pretrained(folder).to(torch.bfloat16).save_pretrained(folder)
    with caplog.at_level(logging.WARNING, logger="hf_longdoc.training.run"):
        assert main(["compare", "--backbone", str(folder), "--models", "", "--baselines", "native", "--task-size",
                     "24", "--task-words", "40,80", "--epochs", "1", "--max-length", "128", "--evidence", "none",
                     "--bench-lengths", "none", "--output-dir", str(tmp_path / "c")]) == 0
    assert "weights are bfloat16; training casts them to float32" in caplog.text
