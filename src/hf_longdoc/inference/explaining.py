"""Why a label: the K passages of each document that weighed most in the model's decision (`predict --explain K`).

The weights are the model's own, from one forward pass with `output_attentions=True`: the segment LM's attention over
segments (α of Eq. 4), and wherever else a family's registry entry has an `evidence` hook (see
`modeling/registry.py`). The hook gives token spans; this module turns them into character offsets of the document
as given, through the fast tokenizer's `offset_mapping`, so that `passage["text"] == document[start:end]`; a family
whose passages are runs of tokens (`Family.evidence_in_sentences`: the segment LM's segments) has each widened or
trimmed to the whole sentences it holds (`utils.sentences.whole_sentences`), so that it reads as sentences.
"""

import logging

import torch

from ..modeling.registry import FAMILIES, family_of_config
from ..utils.sentences import sentence_spans, whole_sentences
from .reading import saved_reading_length

logger = logging.getLogger(__name__)
_logged_cuts = []  # [True] once a cut has been logged at INFO in this process


def explainable_families():
    """Names of the families whose weights say which passages decided a label."""
    return sorted(name for name, family in FAMILIES.items() if family.has_evidence)


def _explaining_family(model):
    """The registry entry of `model`, or a ValueError saying why `model` cannot be explained."""
    supported = ", ".join(explainable_families())
    config = getattr(model, "config", None)
    try:
        family = family_of_config(config)
    except (AttributeError, ValueError):
        kind = getattr(config, "model_type", type(model).__name__)
        raise ValueError(f"Cannot explain a {kind!r} model: it is not an hf_longdoc family. Explanations come from "
                         f"the weights of the families {supported}.") from None
    if not family.has_evidence:
        raise ValueError(f"The {family.name} family has no weights that say which passages decided a label, so it "
                         f"cannot be explained; the families that can: {supported}.")
    if reason := family.evidence_refusal(config):
        raise ValueError(f"Cannot explain this {family.name} model: {reason}.")
    return family


def explain_refusal(model):
    """Why `model` cannot be explained, naming its family and the families that can (None when it can): the one
    reason `predict --explain`, the server's `explain` and `explain()` give."""
    try:
        check_explainable(model)
    except ValueError as refusal:
        return str(refusal)
    return None


def check_explainable(model):
    """Raise `explain_refusal`'s ValueError unless `model` has weights that say which passages decided its label
    (call it before any long work)."""
    _explaining_family(model)


def _check_arguments(tokenizer, texts, k):
    if not isinstance(texts, (list, tuple)) or not texts:
        raise TypeError(f"`texts` must be a non-empty list of strings, got {type(texts).__name__}.")
    for i, text in enumerate(texts):
        if not isinstance(text, str):
            raise TypeError(f"`texts[{i}]` must be a string, got {type(text).__name__}.")
        if not text.strip():
            raise ValueError(f"`texts[{i}]` is empty or whitespace only: there is nothing to explain; leave such "
                             "documents out (predict gives them a row with an error).")
    if isinstance(k, bool) or not isinstance(k, int):
        raise TypeError(f"`k` (--explain) must be an integer number of passages, got {k!r}.")
    if k < 1:
        raise ValueError(f"`k` (--explain) must be at least 1 passage, got {k}.")
    if not getattr(tokenizer, "is_fast", False):
        raise ValueError(f"Explaining needs a fast tokenizer (its offset_mapping maps passages back to characters); "
                         f"{type(tokenizer).__name__} is a slow one. Load the model's tokenizer with "
                         "`AutoTokenizer.from_pretrained(model_dir, use_fast=True)`.")


def _character_span(offsets, first, stop):
    """(start, end) characters of tokens [first, stop), over the tokens that cover text (special tokens cover
    none), or None when none does."""
    covered = [(start, end) for start, end in offsets[first:stop] if end > start]
    if not covered:
        return None
    return min(start for start, _ in covered), max(end for _, end in covered)


def _whole_words(word_ids, first, stop):
    """[first, stop) widened to whole words: a span that starts or ends inside a word (`class`, `##ro`, `##om` of
    "classroom") takes the word's other pieces, as the tokenizer's pre-tokenizer split the words (`word_ids`: None for
    special tokens), so that no passage is a fragment of a word."""
    while first > 0 and word_ids[first] is not None and word_ids[first - 1] == word_ids[first]:
        first -= 1
    while stop < len(word_ids) and word_ids[stop - 1] is not None and word_ids[stop] == word_ids[stop - 1]:
        stop += 1
    return first, stop


def weight_meanings():
    """`{family: what a passage's weight means}` for the families that can be explained."""
    return {name: FAMILIES[name].evidence_weight for name in explainable_families()}


def explain(model, tokenizer, texts, k, max_length):
    """Logits (b, num_labels) and, per document, the `k` passages that weighed most, best first, as dicts
    `{"text", "start", "end", "weight"}` with `text == document[start:end]` (fewer when the model read fewer).
    Passages are whole words (`_whole_words`), and whole sentences for a family whose passages are runs of tokens
    (`Family.evidence_in_sentences`: each span widened or trimmed to the sentences it holds, `whole_sentences`: those
    at least half inside it, else the one it overlaps most); two spans that come to the same text are one passage, at
    the larger weight. What the weight means depends on the family (`weight_meanings`).

    `texts` are tokenized as `pipeline("text-classification", truncation=True)` tokenizes them (cut at `max_length`,
    else where `predict` cuts them, `reading.saved_reading_length`) and read in one forward pass with
    `output_attentions=True`; the weights are the numbers that pass returned. Raises ValueError for a model
    `check_explainable` refuses."""
    family = _explaining_family(model)
    _check_arguments(tokenizer, texts, k)
    if model.training:
        logger.warning("Explaining a model in training mode: dropout is active, so logits and weights vary between "
                       "runs; call `model.eval()` first.")
    texts = list(texts)
    max_length = max_length or saved_reading_length(model.config, tokenizer)  # None: the model reads any length
    encoding = tokenizer(texts, truncation=max_length is not None, max_length=max_length, padding=True,
                         padding_side="right", return_offsets_mapping=True, return_tensors="pt")
    pieces = encoding.encodings or [None] * len(texts)  # a tokenizer that lays documents out itself has none
    if cut := sum(bool(piece is not None and piece.overflowing) for piece in pieces):  # what truncation dropped
        # at INFO the first time only: predict calls this once a batch and counts the cut documents itself
        log = logger.debug if _logged_cuts else logger.info
        log(f"{cut} of {len(texts)} documents are longer than the {max_length} tokens "
            "read and were cut; their passages come from the part read.")
        _logged_cuts[:] = [True]
    offsets = encoding.pop("offset_mapping").tolist()  # (b, n, 2): characters of each token
    inputs = {name: tensor.to(model.device) for name, tensor in encoding.items()}
    with torch.inference_mode():
        outputs = model(**inputs, output_attentions=True, return_dict=True)
        spans = family.evidence(model, outputs, inputs["input_ids"], inputs["attention_mask"])
    evidence = []
    for text, document_offsets, document_spans, piece in zip(texts, offsets, spans, pieces):
        passages, sentences = {}, sentence_spans(text) if family.evidence_in_sentences else None
        for first, stop, weight in document_spans:
            if piece is not None:  # without the tokenizer's words (a sentence layout), the span is whole sentences
                first, stop = _whole_words(piece.word_ids, first, stop)
            span = _character_span(document_offsets, first, stop)
            if span is None:  # special tokens alone: no text
                continue
            if sentences is not None:
                span = whole_sentences(text, *span, sentences)
            if weight > passages.get(span, -float("inf")):
                passages[span] = weight
        ranked = sorted(passages.items(), key=lambda item: (-item[1], item[0][0]))
        evidence.append([{"text": text[start:end], "start": start, "end": end, "weight": weight}
                         for (start, end), weight in ranked[:k]])
    return outputs.logits, evidence


__all__ = ["check_explainable", "explain", "explain_refusal", "explainable_families", "weight_meanings"]
