"""`pipeline("long-document-classification")` around any sequence classifier: a tiny random BERT classifier saved with
`save_pretrained` (a user's Transformers checkpoint), checked against a reference written from the definition (every
chunk read alone as [CLS] chunk [SEP], the logits averaged or maxed). Every family runs it in test_conformance.py; the
pretrained MiniLM classifier in test_pretrained_minilm.py. Nothing is downloaded."""

import pytest
import torch
from transformers import (
    AutoModelForSequenceClassification,
    AutoTokenizer,
    BertConfig,
    BertForSequenceClassification,
    pipeline,
)

import hf_longdoc  # noqa: F401  (registers the task)
from hf_longdoc.data import fit_wordpiece_tokenizer, make_long_document_task

TEXTS = list(make_long_document_task(train_size=16, validation_size=4, test_size=8, min_words=40, max_words=80,
                                     seed=1)["train"]["text"])
DOCUMENT = " ".join(TEXTS * 3)


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    """A 3-label BERT classifier reading 48 positions, with its WordPiece tokenizer."""
    folder = tmp_path_factory.mktemp("bert-classifier")
    tokenizer = fit_wordpiece_tokenizer(TEXTS, vocab_size=300, model_max_length=48)
    torch.manual_seed(0)
    config = BertConfig(vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=1, num_attention_heads=4,
                        intermediate_size=37, max_position_embeddings=48, pad_token_id=tokenizer.pad_token_id,
                        num_labels=3, id2label={0: "a", 1: "b", 2: "c"}, label2id={"a": 0, "b": 1, "c": 2})
    BertForSequenceClassification(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return str(folder)


def reference(folder, text, chunk_length, stride, aggregation):
    """The definition: the text's ids cut into windows of chunk_length - 2 that overlap by `stride`, the last one
    ending at the document's end; each read alone with [CLS] and [SEP]; logits aggregated; softmax."""
    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForSequenceClassification.from_pretrained(folder).eval()
    ids = tokenizer(text, add_special_tokens=False, verbose=False)["input_ids"]
    content = chunk_length - 2
    starts = list(range(0, max(len(ids) - content, 0), content - stride)) + [max(len(ids) - content, 0)]
    with torch.no_grad():
        logits = torch.stack([
            model(torch.tensor([[tokenizer.cls_token_id, *ids[s: s + content], tokenizer.sep_token_id]])).logits[0]
            for s in starts])
    aggregated = logits.mean(0) if aggregation == "mean" else logits.max(0).values
    return aggregated.softmax(-1), len(starts)


@pytest.mark.parametrize("chunk_length, stride, aggregation, batch_size", [
    (None, 0, "mean", 1), (None, 10, "max", 4), (20, 5, "mean", 3)])
def test_the_chunks_and_their_aggregate_match_the_definition(checkpoint, chunk_length, stride, aggregation,
                                                             batch_size):
    classify = pipeline("long-document-classification", model=checkpoint, batch_size=batch_size)
    result = classify(DOCUMENT, chunk_length=chunk_length, stride=stride, aggregation=aggregation)
    expected, chunks = reference(checkpoint, DOCUMENT, chunk_length or 48, stride, aggregation)
    assert result["chunks"] == chunks > 3
    torch.testing.assert_close(torch.tensor([result["scores"][label] for label in "abc"]), expected, rtol=1e-4,
                               atol=1e-5)
    assert result["label"] == "abc"[int(expected.argmax())] and result["score"] == max(result["scores"].values())


def test_short_documents_are_one_chunk_and_batches_keep_their_order(checkpoint):
    # (an empty document is an error: tests/test_pipeline_and_cards.py)
    classify = pipeline("long-document-classification", model=checkpoint, batch_size=4)
    results = classify([TEXTS[0][:30], TEXTS[1][:5], DOCUMENT])
    assert [result["chunks"] for result in results] == [1, 1, reference(checkpoint, DOCUMENT, 48, 0, "mean")[1]]


def test_half_precision_and_the_device_argument_work_as_in_any_pipeline(checkpoint):
    full = pipeline("long-document-classification", model=checkpoint, device="cpu")(DOCUMENT)
    half = pipeline("long-document-classification", model=checkpoint, device="cpu", dtype=torch.bfloat16)(DOCUMENT)
    assert half["chunks"] == full["chunks"] and half["label"] == full["label"]
    assert all(abs(half["scores"][label] - full["scores"][label]) < 0.02 for label in "abc")


@pytest.mark.parametrize("arguments, message", [
    (dict(chunk_length=49), r"`chunk_length` \(49\) exceeds the 48 ids the model reads"),
    (dict(chunk_length=2), r"`chunk_length` \(2\) leaves no room"),
    (dict(chunk_length=2.5), r"`chunk_length` must be a positive integer"),
    (dict(stride=46), r"`stride` \(46\) must be smaller than a chunk's 46 text ids"),
    (dict(stride=-1), r"`stride` must be a non-negative integer"),
    (dict(aggregation="median"), r"`aggregation` must be one of \('mean', 'max'\)"),
])
def test_bad_arguments_name_the_argument_and_the_fix(checkpoint, arguments, message):
    classify = pipeline("long-document-classification", model=checkpoint)
    with pytest.raises(ValueError, match=message):
        classify(DOCUMENT, **arguments)


def test_a_non_string_document_is_a_type_error(checkpoint):
    with pytest.raises(TypeError, match="classifies strings"):
        pipeline("long-document-classification", model=checkpoint)([[1, 2, 3]])
