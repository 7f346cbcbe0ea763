"""Metrics as `evaluate` modules shipped with the package (loaded by local path: no Hub access needed).

`load_metric("classification")` and `load_metric("multilabel")` return `evaluate` metrics that work with
`evaluate.combine`; `compute_metrics_fn` builds the `compute_metrics` callable `Trainer` expects.
"""

import os
from types import SimpleNamespace

import numpy as np

from ..inference.reading import DEFAULT_THRESHOLD, decide, scores_from_logits

METRICS_DIR = os.path.dirname(os.path.abspath(__file__))
METRIC_NAMES = ("classification", "multilabel")
MULTI_LABEL = SimpleNamespace(problem_type="multi_label_classification")
SINGLE_LABEL = SimpleNamespace(problem_type="single_label_classification")


def load_metric(name):
    """The shipped `evaluate` metric `name` (one of METRIC_NAMES)."""
    if name not in METRIC_NAMES:
        raise ValueError(f"Unknown metric {name!r}; choose one of {METRIC_NAMES}.")
    import evaluate

    return evaluate.load(os.path.join(METRICS_DIR, name))


def score_name(multi_label):
    """The validation score a run keeps its best model by: accuracy, or micro-F1 for multi-label data."""
    return "micro_f1" if multi_label else "accuracy"


def correct_decisions(logits, labels, multi_label=False, threshold=DEFAULT_THRESHOLD):
    """Which decisions the scores `logits` make right, as `compute_metrics_fn` decides them: one boolean a document
    (its one class), or, for multi-label data, one a document and label (whether the label is decided as it is)."""
    logits, labels = np.asarray(logits, dtype=np.float32), np.asarray(labels)
    if multi_label:
        return decide(scores_from_logits(logits, MULTI_LABEL), threshold) == (labels > 0.5)
    return decide(scores_from_logits(logits, SINGLE_LABEL)).argmax(axis=-1) == labels


def prediction_logits(predictions):
    """The logits of Trainer's `predictions` (an `EvalPrediction`'s or `PredictionOutput`'s): the first of the
    model's outputs when it returned several (a tuple), else the array itself."""
    return predictions[0] if isinstance(predictions, tuple) else predictions


def compute_metrics_fn(multi_label=False, threshold=DEFAULT_THRESHOLD):
    """A `compute_metrics(eval_prediction)` for Trainer: accuracy/macro-F1/micro-F1, or micro P/R/F1 of the labels
    `predict` and the pipelines give at `threshold` (`hf_longdoc.inference.reading.decide`: the metrics are handed those
    decisions, not scores they would compare again in float32)."""
    metric = load_metric("multilabel" if multi_label else "classification")

    def compute_metrics(eval_prediction):
        logits, labels = prediction_logits(eval_prediction.predictions), eval_prediction.label_ids
        if multi_label:
            decided = decide(scores_from_logits(logits, MULTI_LABEL), threshold).astype(np.float32)
            return metric.compute(predictions=decided, references=labels, threshold=1.0)  # the decided 1s
        decided = decide(scores_from_logits(logits, SINGLE_LABEL))  # one class a row: the one `predict` names
        return metric.compute(predictions=decided.argmax(axis=-1), references=labels)  # each row's one True

    return compute_metrics
