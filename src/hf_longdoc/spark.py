"""`hf_longdoc.spark.classify(df, model_dir)`: label a Spark DataFrame (`engines.spark`)."""

from .engines.spark import classify

__all__ = ["classify"]
