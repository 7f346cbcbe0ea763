"""How a classifier's logits become scores and labels: one rule, which every path calls (`predict`, the
long-document pipeline, `evaluate` and `train`'s validation, `compare`), so that a document gets the same labels
whichever way it is classified.

- **Scores** are the softmax of the logits over the classes, or a sigmoid per class for a multi-label model (and for
  a one-logit model), computed in float32 as the model's logits are (`scores_from_logits`).
- **Single-label**: the best class.
- **Multi-label**: every class whose score is *at least* the threshold (`score >= threshold`), best first
  (`chosen_classes`). The threshold is the one saved with the model (`multi_label_threshold` in config.json, which
  `train --threshold` writes), else 0.3 (`DEFAULT_THRESHOLD`); `evaluate --threshold` and the pipeline's `threshold`
  override it. The comparison is made in double precision on the float32 score, so a score exactly at the
  threshold is labelled on every path (a float32 comparison would round the threshold first).
"""

import logging

import numpy as np
import torch

from .numbers import THRESHOLD

logger = logging.getLogger(__name__)
DEFAULT_THRESHOLD = 0.3  # the multi-label threshold of a model saved without one (`train`'s --threshold default)


def is_multi_label(config):
    return getattr(config, "problem_type", None) == "multi_label_classification"


def uses_sigmoid(config):
    """Whether the scores are per-class sigmoids (multi-label, or one logit) rather than a softmax over classes."""
    return is_multi_label(config) or getattr(config, "num_labels", 2) == 1


def scores_from_logits(logits, config):
    """(..., labels) probabilities, float32, from (..., labels) logits (a tensor or an array)."""
    logits = torch.as_tensor(np.asarray(logits) if not isinstance(logits, torch.Tensor) else logits).float()
    return logits.sigmoid() if uses_sigmoid(config) else logits.softmax(dim=-1)


def at_threshold(scores, threshold):
    """A boolean array of the shape of `scores`: which classes a multi-label model predicts (`score >= threshold`,
    compared in float64)."""
    if isinstance(scores, torch.Tensor):
        scores = scores.detach().cpu().float().numpy()
    return np.asarray(scores, dtype=np.float64) >= float(threshold)


def chosen_classes(scores, threshold):
    """The indices of the classes a multi-label model predicts for one document's `scores`, best first (ties in
    class order)."""
    scores = np.asarray(scores.detach().cpu().float().numpy() if isinstance(scores, torch.Tensor) else scores,
                        dtype=np.float64)
    chosen = np.flatnonzero(at_threshold(scores, threshold))
    return sorted(chosen.tolist(), key=lambda index: (-scores[index], index))


def best_class(scores):
    """The index of the best class of one document's `scores` (the first of equal ones)."""
    scores = scores.detach().cpu().float().numpy() if isinstance(scores, torch.Tensor) else np.asarray(scores)
    return int(np.argmax(scores))


def saved_threshold(config, where="the model"):
    """The multi-label threshold saved with a model (`multi_label_threshold`), checked, or None."""
    saved = getattr(config, "multi_label_threshold", None)
    if saved is not None:
        THRESHOLD.check(saved, f"multi_label_threshold in {where}'s config.json")
    return saved


def decision_threshold(config, threshold=None, multi_label=True, where="the model"):
    """The multi-label threshold to decide at: `threshold` when given (logged when it overrides the one saved with
    the model), else the one saved with the model, else `DEFAULT_THRESHOLD`. A model trained with --threshold 0.5 is
    then labelled at 0.5, not at a default it never saw. Single-label: None."""
    saved = saved_threshold(config, where)
    if not multi_label:
        if threshold is not None:
            logger.warning("--threshold %g is ignored: %s is single-label (one class per document, no threshold).",
                           threshold, where)
        return None
    if threshold is None:
        threshold = DEFAULT_THRESHOLD if saved is None else saved
        logger.info("Deciding at the multi-label threshold %g (%s).", threshold,
                    "saved with the model" if saved is not None else "the default: the model saved none")
    elif saved is not None and threshold != saved:
        logger.warning("--threshold %g overrides the threshold %g saved with %s.", threshold, saved, where)
    return threshold


__all__ = ["DEFAULT_THRESHOLD", "at_threshold", "best_class", "chosen_classes", "decision_threshold",
           "is_multi_label", "saved_threshold", "scores_from_logits", "uses_sigmoid"]
