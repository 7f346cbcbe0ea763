"""Label a corpus in the engine it lives in: `DocumentClassifier` (a batch of rows in, the same rows as `predict`'s
out), Ray Data (`engines.ray_data`) and Spark (`engines.spark`). No scheduler of our own:
the engines' workers, retries and files."""

from .classifier import DocumentClassifier


def predict(model_dir, dataset, output=None, settings=None, **keywords):
    """`hf_longdoc.predict`: `predicting.predict` on this machine (`engine="local"`, the default), or the same rows
    read by Ray Data's or Spark's workers (`engine="ray"`, `"spark"`; `engines.corpus`). Arguments: `predicting`'s."""
    from ..predicting import PredictSettings
    from ..predicting import predict as predict_locally

    settings = PredictSettings.of(settings, **keywords)
    if settings.engine == "local":
        return predict_locally(model_dir, dataset, output, settings)
    from .corpus import predict_on_engine

    return predict_on_engine(model_dir, dataset, output, settings)


__all__ = ["DocumentClassifier", "predict"]
