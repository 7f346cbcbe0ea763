"""Collapsed runs: a trained model that ends predicting one class (or one label set) for every document.

Fine-tuning a pretrained encoder sometimes fails this way (Mosbach et al., "On the Stability of Fine-tuning BERT",
ICLR 2021, https://arxiv.org/abs/2006.04884): the run scores the majority-class rate, which is a failure of that
run, not a measurement of the method. `compare` checks every run on its validation split and reports a collapsed
run as such, apart from the healthy ones, instead of averaging it into a mean.

A run is *collapsed* when, on the validation documents,

- one predicted class (multi-label: one predicted label set) takes at least `COLLAPSE_SHARE` (98%) of them: a
  single class, up to a stray document in fifty; or
- one predicted class takes at least `NEAR_CONSTANT_SHARE` (90%) of them and the accuracy is no more than
  `MAJORITY_MARGIN` (5 points) above the majority-class rate (the accuracy of always answering the most frequent true
  class): a nearly constant answer that scores about what the constant answer scores (5 points: one document of a
  validation split of 20 moves the accuracy by 5).

A model at chance with varied answers (half of each class on balanced data) is not collapsed by this rule; it is a
poor result, and shows as one.
"""

from collections import Counter

import numpy as np

COLLAPSE_SHARE = 0.98
NEAR_CONSTANT_SHARE = 0.9
MAJORITY_MARGIN = 0.05
# the columns of a `compare` row that measure what a run costs, not how well it classifies: a collapse does not change
# them, so they are averaged over every seed; every other number is a score, averaged over the healthy seeds only
COST_COLUMNS = ("epochs", "planned_epochs", "steps", "batch_per_process", "processes", "gradient_accumulation",
                "batch_per_step", "parameters", "train_seconds", "inference_docs_per_s", "train_peak_mib",
                "inference_peak_mib", "max_tokens")


def collapse_check(predictions, references):
    """What `compare` records of a run's validation predictions: `validation_accuracy`, `validation_majority_rate`,
    `validation_top_share` (the share of the most frequent predicted class or label set) and `collapsed` (see the
    module's rule). `predictions` and `references`: class ids (n,), or 0/1 label sets (n, labels) for multi-label."""
    predictions, references = np.asarray(predictions), np.asarray(references)
    if len(predictions) == 0 or predictions.shape != references.shape:
        raise ValueError(f"`predictions` {predictions.shape} and `references` {references.shape} must be the same "
                         "non-empty shape: one prediction per validation document.")
    as_keys = (lambda array: [tuple(row) for row in array.astype(int)]) if predictions.ndim == 2 else \
        (lambda array: array.tolist())
    predicted, true = as_keys(predictions), as_keys(references)
    n = len(predicted)
    top_share = Counter(predicted).most_common(1)[0][1] / n
    majority_rate = Counter(true).most_common(1)[0][1] / n
    accuracy = sum(p == t for p, t in zip(predicted, true)) / n  # multi-label: exact match of the label set
    collapsed = top_share >= COLLAPSE_SHARE or (top_share >= NEAR_CONSTANT_SHARE
                                                and accuracy <= majority_rate + MAJORITY_MARGIN)
    return {"validation_accuracy": accuracy, "validation_majority_rate": majority_rate,
            "validation_top_share": top_share, "collapsed": bool(collapsed)}


__all__ = ["COLLAPSE_SHARE", "COST_COLUMNS", "MAJORITY_MARGIN", "NEAR_CONSTANT_SHARE", "collapse_check"]
