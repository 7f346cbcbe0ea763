"""Classify a corpus with a saved model: `hf-longdoc predict` and `hf_longdoc.predict(...)`.

`settings` holds what it takes (`PredictSettings`, torch-free, so the CLI builds its flags at once); `run` the run
itself; the parts that read on their own are modules beside it: `inputs` (the rows and columns read), `resuming` (the
`.partial` folder and its fingerprint) and `writing` (the output's columns and file). The model is opened as the
server opens it, by `inference.reader`.
"""

from .settings import PredictSettings


def predict(model_dir, dataset, output=None, settings=None, **keywords):
    """`predicting.run.predict` (imported when called: `hf-longdoc predict --help` needs no torch)."""
    from .run import predict as run_predict

    return run_predict(model_dir, dataset, output, settings, **keywords)


__all__ = ["PredictSettings", "predict"]
