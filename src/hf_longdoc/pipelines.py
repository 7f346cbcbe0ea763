"""`pipeline("long-document-classification", model=...)`: classify documents longer than a model reads, with any
sequence classifier (a Transformers checkpoint folder or one of our families).

The document is tokenized once, without truncation; its ids are cut into chunks of what the model reads (less its
special tokens), consecutive chunks sharing `stride` ids; the chunks run in batches of `batch_size`; their logits
are aggregated (`mean`, the literature's simplest long baseline, or `max`) and turned into scores as the
text-classification pipeline does. A model that aggregates by itself reads one chunk of its own length: the segment
LM's attention over segments is its learned aggregation, and a document within its m·(L − 2) tokens is one chunk.
Transformers' issues #4501 and #15177 ask for this pipeline.
"""

import torch
from transformers import AutoModelForSequenceClassification
from transformers.pipelines import PIPELINE_REGISTRY
from transformers.pipelines.base import ChunkPipeline

from .decisions import (
    DEFAULT_THRESHOLD,
    best_class,
    chosen_classes,
    is_multi_label,
    saved_threshold,
    scores_from_logits,
)
from .modeling.registry import family_of_config
from .reading_length import reading_length

TASK = "long-document-classification"
AGGREGATIONS = ("mean", "max")


def special_frame(tokenizer):
    """(prefix, suffix): the ids the tokenizer puts around a text ([CLS] .. [SEP]; <s> .. </s>; the elementwise
    tokenizer's special materials), found by tokenizing one word with and without special tokens."""
    bare = tokenizer("document", add_special_tokens=False)["input_ids"]
    full = tokenizer("document")["input_ids"]
    for start in range(len(full) - len(bare) + 1):
        if full[start: start + len(bare)] == bare:
            return full[:start], full[start + len(bare):]
    raise ValueError(f"The tokenizer {type(tokenizer).__name__} changes a text's ids when it adds special tokens; "
                     "the long-document pipeline cannot cut its documents into chunks.")


def family_of(model):
    """The hf_longdoc family of `model`, or None for any other Transformers model."""
    try:
        return family_of_config(model.config)
    except ValueError:
        return None


def model_reading_length(model, tokenizer):
    """The most input ids the model reads (`reading_length.reading_length`): one of our families says; any other
    checkpoint reads its positions; the tokenizer's `model_max_length` (if any tokenizer: the length a saved model was
    trained to read) caps either. None when nothing bounds it (the contextualizer and the S-LSTM read any length)."""
    return reading_length(model.config, tokenizer_limit=tokenizer.model_max_length if tokenizer is not None else None)


def multi_label_threshold(config):
    """The score from which a multi-label model predicts a label: the threshold saved with it, else 0.3 (the
    training default; `hf_longdoc.decisions`)."""
    saved = saved_threshold(config)
    return DEFAULT_THRESHOLD if saved is None else saved


def ids_per_position(model):
    """Input ids one position of the model covers (elementwise: v bytes per material; else 1): chunks and the stride
    are cut at multiples of it."""
    family = family_of(model)
    return family.ids_per_position(model.config) if family is not None else 1


def has_visible_text(text):
    """Whether `text` holds a character one can see (not only blanks, zero-width or control characters): a text
    without one would be labelled from the model's special tokens alone."""
    return any(c.isprintable() and not c.isspace() for c in text)


class LongDocumentClassificationPipeline(ChunkPipeline):
    """Classify a document of any length with a sequence classifier that reads fewer ids than the document has.

    Call arguments (also accepted by `pipeline(...)`):
        chunk_length (`int`, *optional*): ids per chunk, special tokens included; default and maximum: what the
            model reads (see `model_reading_length`).
        stride (`int`, defaults to 0): ids consecutive chunks share (0: chunks side by side).
        aggregation (`"mean"` or `"max"`, defaults to `"mean"`): how the chunks' logits become the document's.

        top_k (`int` or `None`, *optional*): as in the text-classification pipeline: the `top_k` best classes as a
            list of `{"label", "score"}`, best first (`None`: every class), in place of the result below.
        threshold (`float` in (0, 1), *optional*): multi-label models: the score from which a label is predicted;
            default: the threshold saved with the model (`config.multi_label_threshold`), else 0.3.

    Returns, per document, `{"label", "score", "scores": {label: score}, "chunks": how many chunks were read}`: the
    best class and its score. For a multi-label model, `label` and `score` are lists: every label whose score is at
    least the threshold, best first, and their scores, as `predict` writes them (`"labels"` repeats that list, as
    earlier versions returned it). Scores are the softmax of the aggregated logits (sigmoid for multi-label or
    one-label models); the decision is `hf_longdoc.decisions`', shared with `predict` and `evaluate`.

    A document without text (empty, or only blank or invisible characters) is a ValueError naming its index in the
    call: a model would give it a confident label from its special tokens alone."""

    def __call__(self, inputs, *args, **kwargs):
        documents = [inputs] if isinstance(inputs, str) else inputs if isinstance(inputs, (list, tuple)) else []
        for index, document in enumerate(documents):
            if isinstance(document, str) and not has_visible_text(document):
                raise ValueError(f"Document {index} has no text ({len(document)} blank or invisible characters); "
                                 "the model would label it from no words. Leave it out, or give it a text.")
        return super().__call__(inputs, *args, **kwargs)

    def _sanitize_parameters(self, chunk_length=None, stride=None, aggregation=None, top_k="", threshold=None,
                             **kwargs):
        preprocess, postprocess = {}, {}
        if top_k != "":  # "" means not given: None asks for every class, as in the text-classification pipeline
            if top_k is not None and (isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 1):
                raise ValueError(f"`top_k` must be a positive integer or None (every class), got {top_k!r}.")
            postprocess["top_k"] = top_k
        if threshold is not None:
            if isinstance(threshold, bool) or not isinstance(threshold, (int, float)) or not 0 < threshold < 1:
                raise ValueError(f"`threshold` must be a number in (0, 1), got {threshold!r}.")
            postprocess["threshold"] = threshold
        if chunk_length is not None:
            preprocess["chunk_length"] = chunk_length
        if stride is not None:
            preprocess["stride"] = stride
        if aggregation is not None:
            if aggregation not in AGGREGATIONS:
                raise ValueError(f"`aggregation` must be one of {AGGREGATIONS}, got {aggregation!r}.")
            postprocess["aggregation"] = aggregation
        return preprocess, {}, postprocess

    def chunk_plan(self, chunk_length, stride, frame):
        """(content ids per chunk, step between chunk starts), checked, at multiples of the model's position width."""
        limit = model_reading_length(self.model, self.tokenizer)
        if chunk_length is None:
            chunk_length = limit
        elif isinstance(chunk_length, bool) or not isinstance(chunk_length, int) or chunk_length < 1:
            raise ValueError(f"`chunk_length` must be a positive integer (ids per chunk), got {chunk_length!r}.")
        elif limit is not None and chunk_length > limit:
            raise ValueError(f"`chunk_length` ({chunk_length}) exceeds the {limit} ids the model reads; lower it.")
        unit = ids_per_position(self.model)
        special = len(frame[0]) + len(frame[1])
        content = None if chunk_length is None else (chunk_length - special) // unit * unit
        if content is not None and content < unit:
            raise ValueError(f"`chunk_length` ({chunk_length}) leaves no room for text after the {special} special "
                             "ids; raise it.")
        if isinstance(stride, bool) or not isinstance(stride, int) or stride < 0:
            raise ValueError(f"`stride` must be a non-negative integer (ids chunks share), got {stride!r}.")
        stride = stride // unit * unit
        if content is not None and stride >= content:
            raise ValueError(f"`stride` ({stride}) must be smaller than a chunk's {content} text ids; lower it.")
        return content, (content - stride if content is not None else None)

    def preprocess(self, document, chunk_length=None, stride=0):
        if not isinstance(document, str):
            raise TypeError(f"The long-document pipeline classifies strings, got {type(document).__name__}.")
        frame = special_frame(self.tokenizer)
        content, step = self.chunk_plan(chunk_length, stride, frame)
        ids = self.tokenizer(document, add_special_tokens=False, verbose=False)["input_ids"]
        if content is None or len(ids) <= content:
            starts = [0]
        else:  # the last chunk ends at the document's end
            starts = list(range(0, len(ids) - content, step)) + [len(ids) - content]
        for number, start in enumerate(starts):
            chunk = frame[0] + ids[start: start + (content or len(ids))] + frame[1]
            yield {"input_ids": torch.tensor([chunk]), "attention_mask": torch.ones(1, len(chunk), dtype=torch.long),
                   "is_last": number == len(starts) - 1}

    def _forward(self, inputs):
        is_last = inputs.pop("is_last")
        logits = self.model(input_ids=inputs["input_ids"], attention_mask=inputs["attention_mask"]).logits
        return {"logits": logits, "is_last": is_last}

    def postprocess(self, model_outputs, aggregation="mean", top_k="", threshold=None):
        logits = torch.cat([output["logits"].float() for output in model_outputs])  # (chunks, labels)
        document = logits.mean(dim=0) if aggregation == "mean" else logits.max(dim=0).values
        config = self.model.config
        scores = scores_from_logits(document, config)
        labels = [config.id2label[index] for index in range(len(scores))]
        if top_k != "":
            ranked = sorted(zip(labels, scores.tolist()), key=lambda pair: pair[1], reverse=True)
            return [{"label": label, "score": score} for label, score in ranked[:top_k]]
        result = {"scores": dict(zip(labels, scores.tolist())), "chunks": len(model_outputs)}
        if is_multi_label(config):
            threshold = threshold if threshold is not None else multi_label_threshold(config)
            chosen = chosen_classes(scores, threshold)
            result.update(label=[labels[i] for i in chosen], score=[float(scores[i]) for i in chosen])
            result["labels"] = result["label"]
        else:
            best = best_class(scores)
            result.update(label=labels[best], score=float(scores[best]))
        return {key: result[key] for key in ("label", "score", "scores", "chunks", "labels") if key in result}


def register_pipeline():
    """Register the task with Transformers' pipeline registry (importing hf_longdoc does)."""
    if TASK not in PIPELINE_REGISTRY.supported_tasks:
        PIPELINE_REGISTRY.register_pipeline(TASK, pipeline_class=LongDocumentClassificationPipeline,
                                            pt_model=AutoModelForSequenceClassification)


__all__ = ["LongDocumentClassificationPipeline", "TASK", "model_reading_length", "multi_label_threshold",
           "register_pipeline"]
