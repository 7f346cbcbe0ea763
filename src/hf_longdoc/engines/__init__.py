"""Label a corpus in the engine it lives in: `DocumentClassifier` (a batch of rows in, the same rows as `predict`'s
out), Ray Data (`engines.ray_data`) and Spark (`engines.spark`, also `hf_longdoc.spark`). No scheduler of our own:
the engines' workers, retries and files."""

from .classifier import DocumentClassifier

__all__ = ["DocumentClassifier"]
