"""`hf-longdoc serve MODEL_DIR`: the model behind HTTP, reading whole documents and returning their evidence.

Its flags are `ServeSettings`' fields; nothing heavy is imported until the command runs. The model loads before the
port opens, so a folder that cannot be served is refused with the reason and no server starts.
"""

import logging
from dataclasses import replace

from ..serving.settings import PAGE_PATH, WILDCARD_ADDRESSES, ServeSettings
from .options import Formatter, add_settings_arguments, require_model_folder

logger = logging.getLogger(__name__)


def add_parser(subparsers):
    parser = subparsers.add_parser("serve", formatter_class=Formatter, allow_abbrev=False,
                                   help="serve a saved model over HTTP (TEI's /predict, /classify with coverage and "
                                        "evidence, a page to paste a document into)",
                                   description="Serve a saved model over HTTP with FastAPI on uvicorn: POST /predict "
                                               "(text embeddings inference's API: also POST / and /invocations), "
                                               "POST /classify, GET /health (and TEI's /ping and /), /info, /metrics "
                                               "(Prometheus) and /ui (a page). Requests that arrive "
                                               "together are batched across clients. SIGTERM stops accepting, "
                                               "answers the requests in flight, then exits.")
    parser.add_argument("model_dir", help="a model folder `train` saved (or any saved sequence classifier with its "
                                          "tokenizer)")
    add_settings_arguments(parser, ServeSettings)
    parser.set_defaults(run=run)


def run(args):
    from ..serving import create_app
    from .options import settings_from

    try:
        import uvicorn
    except ImportError:
        raise ValueError('`hf-longdoc serve` needs the server packages: pip install "hf_longdoc[serve]".') from None
    require_model_folder(args.model_dir)
    settings = settings_from(args, ServeSettings)
    if settings.allowed_hosts is None:  # a server of its own checks `Host`: the loopback names and --host
        settings = replace(settings, allowed_hosts=())
    app = create_app(args.model_dir, settings)  # the model loads here, before the port opens
    host = f"[{settings.host}]" if ":" in settings.host else settings.host
    logger.info("POST /predict (and /, as text embeddings inference routes it); the page: http://%s:%d%s",
                "127.0.0.1" if settings.host in WILDCARD_ADDRESSES else host, settings.port, PAGE_PATH)
    uvicorn.run(app, host=settings.host, port=settings.port, log_level="info",
                timeout_graceful_shutdown=settings.shutdown_timeout)

