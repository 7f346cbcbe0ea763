"""Serve a saved model over HTTP: `hf-longdoc serve MODEL_DIR`, or `create_app(model_dir, ...)` to mount the same app
in an ASGI application of your own.

The app reads documents with `predict`'s own reader (`inference.reader.Reader`, opened by `load_reader`), so a
document sent to it gets the labels, scores and evidence `hf-longdoc predict` gives it offline with the same settings.
Endpoints: `POST /predict` (text embeddings inference's API, also at TEI's `POST /` and `/invocations`), `POST
/classify` (labels, scores, how much of the document was read, and with `explain` the deciding passages), `GET
/health` (and TEI's `/ping` and `/`), `GET /info`, `GET /metrics` (Prometheus) and `GET /ui`, a page to paste a
document into.
"""

from .settings import ServeSettings


def create_app(model_dir, settings=None, /, **keywords):
    """The FastAPI app serving the model saved in `model_dir`, with `settings` (a `ServeSettings`) or its fields as
    keywords. The model loads here: a folder that cannot be served is refused now, naming the problem."""
    from .app import build_app

    return build_app(model_dir, settings, **keywords)


__all__ = ["ServeSettings", "create_app"]
