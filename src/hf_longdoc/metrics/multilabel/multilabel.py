"""Multi-label metrics at a threshold: micro-averaged precision, recall and F1, computed with scikit-learn.

The predicted label set is every label whose score (sigmoid of the logit) is at least `threshold`; the default 0.3 is
the one of the elementwise-language-representation paper (Section 5.4, Training Details). An `evaluate` module
shipped inside hf_longdoc and loaded by local path, so it works offline.
"""

import datasets
import evaluate
import numpy as np
from sklearn.metrics import precision_recall_fscore_support

_DESCRIPTION = "Micro precision, recall and F1 of multi-label predictions made by thresholding per-label scores."
_KWARGS_DESCRIPTION = """
Args:
    predictions (`list` of `list` of `float`): per-label scores in [0, 1] (sigmoid of the logits).
    references (`list` of `list` of `float`): multi-hot true labels.
    threshold (`float`, defaults to 0.3): a label is predicted when its score is at least this.
Returns:
    micro_precision, micro_recall, micro_f1 (`float` in [0, 1]), and subset accuracy `exact_match`.
"""


class Multilabel(evaluate.Metric):
    def _info(self):
        return evaluate.MetricInfo(
            description=_DESCRIPTION,
            citation="",
            inputs_description=_KWARGS_DESCRIPTION,
            features=datasets.Features({
                "predictions": datasets.Sequence(datasets.Value("float32")),
                "references": datasets.Sequence(datasets.Value("float32")),
            }),
        )

    def _compute(self, predictions, references, threshold=0.3):
        predicted = (np.asarray(predictions) >= threshold).astype(int)
        true = (np.asarray(references) >= 0.5).astype(int)
        precision, recall, f1, _ = precision_recall_fscore_support(true, predicted, average="micro", zero_division=0)
        return {
            "micro_precision": float(precision),
            "micro_recall": float(recall),
            "micro_f1": float(f1),
            "exact_match": float((predicted == true).all(axis=1).mean()),
        }
