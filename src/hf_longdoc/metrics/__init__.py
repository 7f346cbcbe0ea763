"""Metrics as `evaluate` modules shipped with the package (loaded by local path: no Hub access needed).

`load_metric("classification")` and `load_metric("multilabel")` return `evaluate` metrics that work with
`evaluate.combine`; `compute_metrics_fn` builds the `compute_metrics` callable `Trainer` expects.
"""

import os

import numpy as np

METRICS_DIR = os.path.dirname(os.path.abspath(__file__))
METRIC_NAMES = ("classification", "multilabel")


def load_metric(name):
    """The shipped `evaluate` metric `name` (one of METRIC_NAMES)."""
    if name not in METRIC_NAMES:
        raise ValueError(f"Unknown metric {name!r}; choose one of {METRIC_NAMES}.")
    import evaluate

    return evaluate.load(os.path.join(METRICS_DIR, name))


def sigmoid(logits):
    return 1.0 / (1.0 + np.exp(-np.asarray(logits, dtype=np.float64)))


def score_name(multi_label):
    """The validation score a run keeps its best model by: accuracy, or micro-F1 for multi-label data."""
    return "micro_f1" if multi_label else "accuracy"


def compute_metrics_fn(multi_label=False, threshold=0.3):
    """A `compute_metrics(eval_prediction)` for Trainer: accuracy/macro-F1/micro-F1, or micro P/R/F1 at `threshold`."""
    metric = load_metric("multilabel" if multi_label else "classification")

    def compute_metrics(eval_prediction):
        logits, labels = eval_prediction.predictions, eval_prediction.label_ids
        if isinstance(logits, tuple):
            logits = logits[0]
        if multi_label:
            return metric.compute(predictions=sigmoid(logits), references=labels, threshold=threshold)
        return metric.compute(predictions=np.argmax(logits, axis=-1), references=labels)

    return compute_metrics
