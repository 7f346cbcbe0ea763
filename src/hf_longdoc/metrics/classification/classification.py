"""Single-label classification metrics: accuracy, macro-F1 and micro-F1, computed with scikit-learn.

An `evaluate` module shipped inside hf_longdoc and loaded by local path, so it works offline.
"""

import datasets
import evaluate
from sklearn.metrics import accuracy_score, f1_score

_DESCRIPTION = "Accuracy, macro-averaged F1 and micro-averaged F1 of predicted class ids against reference ids."
_KWARGS_DESCRIPTION = """
Args:
    predictions (`list` of `int`): predicted class ids.
    references (`list` of `int`): true class ids.
Returns:
    accuracy, macro_f1, micro_f1 (`float` in [0, 1]).
"""


class Classification(evaluate.Metric):
    def _info(self):
        return evaluate.MetricInfo(
            description=_DESCRIPTION,
            citation="",
            inputs_description=_KWARGS_DESCRIPTION,
            features=datasets.Features({"predictions": datasets.Value("int64"), "references": datasets.Value("int64")}),
        )

    def _compute(self, predictions, references):
        return {
            "accuracy": float(accuracy_score(references, predictions)),
            "macro_f1": float(f1_score(references, predictions, average="macro", zero_division=0)),
            "micro_f1": float(f1_score(references, predictions, average="micro", zero_division=0)),
        }
