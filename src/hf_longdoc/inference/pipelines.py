"""`pipeline("long-document-classification", model=...)`: classify documents longer than a model reads, with any
sequence classifier (a Transformers checkpoint folder or one of our families).

The document is tokenized once, without truncation; its ids are cut into chunks of what the model reads (less its
special tokens), consecutive chunks sharing `stride` ids; the chunks run in batches of `batch_size`; their logits
are aggregated (`mean`, the literature's simplest long baseline, or `max`) and turned into scores as the
text-classification pipeline does. A model that aggregates by itself reads one chunk of its own length: the segment
LM's attention over segments is its learned aggregation, and a document within its m·(L − 2) tokens is one chunk.
Transformers' issues #4501 and #15177 ask for this pipeline.
"""

import warnings

import torch
from transformers import AutoModelForSequenceClassification
from transformers.pipelines import PIPELINE_REGISTRY
from transformers.pipelines.base import ChunkPipeline

from .reading import ReadingRules, best_first, has_visible_text
from .settings import AGGREGATIONS

TASK = "long-document-classification"


class LongDocumentClassificationPipeline(ChunkPipeline):
    """Classify a document of any length with a sequence classifier that reads fewer ids than the document has.

    Call arguments (also accepted by `pipeline(...)`):
        chunk_length (`int`, *optional*): ids per chunk, special tokens included; default and maximum: what the
            model reads (`hf_longdoc.inference.reading.saved_reading_length`).
        stride (`int`, defaults to 0): ids consecutive chunks share (0: chunks side by side).
        aggregation (`"mean"` or `"max"`, defaults to `"mean"`): how the chunks' logits become the document's.

        top_k (`int` or `None`, *optional*): as in the text-classification pipeline: the `top_k` best classes as a
            list of `{"label", "score"}`, best first (`None`: every class), in place of the result below.
        threshold (`float` in (0, 1), *optional*): multi-label models: the score from which a label is predicted;
            default: the threshold saved with the model (`config.multi_label_threshold`), else 0.3
            (`hf_longdoc.inference.reading.DEFAULT_THRESHOLD`).

    Returns, per document, `{"label", "score", "scores": {label: score}, "chunks": how many chunks were read}`: the
    best class and its score. For a multi-label model, `label` and `score` are lists: every label whose score is at
    least the threshold, best first, and their scores, as `predict` writes them (`"labels"` repeats that list, as
    earlier versions returned it; deprecated, with a FutureWarning). Scores are the softmax of the aggregated logits
    (sigmoid for multi-label or one-label models); the chunks and the decision are `hf_longdoc.inference.reading`'s
    (`ReadingRules`), shared with `predict`, the server and `evaluate`.

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

    def preprocess(self, document, chunk_length=None, stride=0):
        if not isinstance(document, str):
            raise TypeError(f"The long-document pipeline classifies strings, got {type(document).__name__}.")
        plan = self.rules().plan(chunk_length, stride)
        chunks = plan.chunks(self.tokenizer(document, add_special_tokens=False, verbose=False)["input_ids"])
        for number, chunk in enumerate(chunks):
            yield {"input_ids": torch.tensor([chunk]), "attention_mask": torch.ones(1, len(chunk), dtype=torch.long),
                   "is_last": number == len(chunks) - 1}

    def _forward(self, inputs):
        is_last = inputs.pop("is_last")
        logits = self.model(input_ids=inputs["input_ids"], attention_mask=inputs["attention_mask"]).logits
        return {"logits": logits, "is_last": is_last}

    def rules(self, threshold=None):
        """The model's `ReadingRules` (its labels, threshold and reading length), as `predict` and the server read
        it; made once, or for a call's own `threshold`."""
        if threshold is not None:
            return ReadingRules(self.model.config, self.tokenizer, threshold, log=False)
        if getattr(self, "_rules", None) is None:
            self._rules = ReadingRules(self.model.config, self.tokenizer, log=False)
        return self._rules

    def postprocess(self, model_outputs, aggregation="mean", top_k="", threshold=None):
        logits = torch.cat([output["logits"].float() for output in model_outputs])  # (chunks, labels)
        document = logits.mean(dim=0) if aggregation == "mean" else logits.max(dim=0).values
        rules = self.rules(threshold)
        scores = rules.scores(document).tolist()
        if top_k != "":
            return [{"label": rules.labels[index], "score": scores[index]} for index in best_first(scores, top_k)]
        result = rules.prediction(scores)
        result["chunks"] = len(model_outputs)
        if rules.multi_label:  # deprecated: `label` holds the list since 0.2
            warnings.warn("The long-document pipeline's `labels` repeats `label` and will be removed in 0.4; read "
                          "`label`.", FutureWarning, stacklevel=2)
            result["labels"] = result["label"]
        return {key: result[key] for key in ("label", "score", "scores", "chunks", "labels") if key in result}


def register_pipeline():
    """Register the task with Transformers' pipeline registry (importing hf_longdoc does)."""
    if TASK not in PIPELINE_REGISTRY.supported_tasks:
        PIPELINE_REGISTRY.register_pipeline(TASK, pipeline_class=LongDocumentClassificationPipeline,
                                            pt_model=AutoModelForSequenceClassification)


__all__ = ["LongDocumentClassificationPipeline", "TASK", "register_pipeline"]
