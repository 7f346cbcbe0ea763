"""The FastAPI app behind `hf-longdoc serve`: the endpoints, the limits, the API key and the metrics.

FastAPI and pydantic parse and validate the requests, `prometheus-client` keeps the metrics, and every error is JSON
with a message naming the field or the limit (TEI's `{"error", "error_type"}`), never a traceback.
"""

import asyncio
import hmac
import importlib.metadata
import ipaddress
import logging
import os
import re
import time
from contextlib import asynccontextmanager
from dataclasses import replace

from fastapi import FastAPI
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from starlette.datastructures import Headers
from starlette.exceptions import HTTPException

from ..explaining import check_explainable
from ..hub import card_model_id
from ..predicting import PredictSettings
from ..predicting.model import Reader, choose_device, load_model, no_text_reason
from ..reading import decision_threshold, is_multi_label, saved_reading_length
from ..saved_models import saved_config
from ..threads import reading_workers
from .batching import Batcher, Overloaded, Unavailable
from .schemas import ClassifyRequest, PredictRequest
from .settings import ServeSettings

logger = logging.getLogger(__name__)
VERSION = importlib.metadata.version("hf_longdoc")
PAGE = os.path.join(os.path.dirname(__file__), "page.html")
OPEN_PATHS = ("/", "/health", "/metrics", "/info")  # probes, scraping and the page need no key
BODY_SLACK = 64 * 1024  # bytes of JSON around the documents themselves
# a character as JSON may send it: `\\uXXXX`, as Python's json.dumps and JavaScript's escapes write a character of the
# BMP (one outside it, an emoji, is two such escapes: 12 bytes)
ESCAPED_CHARACTER_BYTES = 6
SURROGATE = re.compile("[\ud800-\udfff]")
JSON_TYPE = re.compile(r"^application/(?:[\w.+-]+\+)?json\s*(?:;|$)", re.I)


class Metrics:
    """The server's Prometheus metrics, in a registry of its own (one per app)."""

    def __init__(self):
        self.registry = CollectorRegistry()
        self.requests = Counter("hf_longdoc_requests", "Requests answered, by endpoint and status",
                                ["endpoint", "status"], registry=self.registry)
        self.latency = Histogram("hf_longdoc_request_duration_seconds", "Time to answer a request, by endpoint",
                                 ["endpoint"], registry=self.registry,
                                 buckets=(.01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60))
        self.queue_depth = Gauge("hf_longdoc_queue_depth", "Requests queued or being read", registry=self.registry)
        self.batch_documents = Histogram("hf_longdoc_batch_documents", "Documents read together across clients",
                                         registry=self.registry, buckets=(1, 2, 4, 8, 16, 32, 64, 128, 256))
        self.input_ids = Counter("hf_longdoc_input_ids", "Input ids read by the model", registry=self.registry)


def error(status, message, kind, headers=None):
    return JSONResponse({"error": message, "error_type": kind}, status_code=status, headers=headers)


class Service:
    """The model, its readers and the limits: what the endpoints share."""

    def __init__(self, model_dir, settings):
        self.settings = settings.check()
        self.key = settings.api_key()  # read once; never logged
        self.model_dir = model_dir
        config = saved_config(model_dir, "`model_dir` (MODEL_DIR)")  # no saved model: a ValueError naming it
        device = choose_device(settings.device, settings.dtype, None)
        self.model, self.tokenizer = load_model(model_dir, device, settings.dtype)
        self.config = self.model.config
        self.threshold = decision_threshold(self.config, None, is_multi_label(self.config), log=False)
        self.reading = PredictSettings(batch_size=settings.batch_size, dtype=settings.dtype, long=settings.long,
                                       stride=settings.stride, aggregation=settings.aggregation, raw_scores=True)
        from ..modeling.registry import family_of_model_type

        family = family_of_model_type(config.get("model_type"))
        self.explain_refusal = explain_refusal(self.model, settings)
        workers = reading_workers(device, family.concurrent_inference if family is not None else True)
        self.readers = {}
        self.metrics = Metrics()
        self.batcher = Batcher(self.reader_for, settings.max_batch_tokens, settings.max_concurrent_requests, workers,
                               self.metrics, settings.batch_size)
        self.labels = [self.config.id2label[index] for index in range(self.config.num_labels)]
        self.max_body = (settings.max_client_batch_size * (settings.max_input_chars * ESCAPED_CHARACTER_BYTES + 2)
                         + BODY_SLACK)
        self.model_name = settings.served_model_name or card_model_id(model_dir) or folder_name(model_dir)
        self.host_names = None if settings.allowed_hosts is None else settings.host_names()

    def reader_for(self, explain):
        if explain not in self.readers:
            settings = self.reading if explain is None else replace(self.reading, explain=explain)
            self.readers[explain] = Reader(self.model, self.tokenizer, settings, self.threshold)
        return self.readers[explain]

    def info(self):
        settings = self.settings
        return {
            "model_id": self.model_name, "model_type": self.config.model_type,
            "model_dtype": str(self.model.dtype).replace("torch.", ""), "labels": self.labels,
            "multi_label": is_multi_label(self.config), "threshold": self.threshold,
            "reading_length": saved_reading_length(self.config, self.tokenizer), "long": settings.long,
            "stride": settings.stride, "aggregation": settings.aggregation,
            "explainable": self.explain_refusal is None, "explain_refusal": self.explain_refusal,
            "max_batch_tokens": settings.max_batch_tokens, "max_client_batch_size": settings.max_client_batch_size,
            "max_concurrent_requests": settings.max_concurrent_requests, "max_input_chars": settings.max_input_chars,
            "max_explain": settings.max_explain, "api_key_required": self.key is not None, "version": VERSION,
        }

    def check_documents(self, texts):
        """A 413 or 422 response for documents this server will not read (too many, too long, without text), else
        None."""
        limit = self.settings.max_client_batch_size
        if len(texts) > limit:
            return error(413, f"`inputs` holds {len(texts)} documents; this server takes at most {limit} a request "
                              "(--max-client-batch-size): send them in several requests.", "payload_too_large")
        if not texts:
            return error(422, "`inputs` is an empty list; send at least one document.", "validation")
        for index, text in enumerate(texts):
            if surrogate := SURROGATE.search(text):
                return error(422, f"`inputs[{index}]` holds an unpaired surrogate (U+{ord(surrogate.group()):04X}) at "
                                  f"character {surrogate.start()}, which is not Unicode text; send valid Unicode (a "
                                  "character outside the BMP as its pair of escapes, or as UTF-8).", "validation")
            if len(text) > self.settings.max_input_chars:
                return error(413, f"`inputs[{index}]` has {len(text)} characters; this server reads at most "
                                  f"{self.settings.max_input_chars} a document (--max-input-chars).",
                             "payload_too_large")
            if reason := no_text_reason(text):
                return error(422, f"`inputs[{index}]` {reason}: there is nothing to classify.", "validation")
        return None

    def serves_host(self, headers):
        """Whether the request's `Host` is one this server answers (`ServeSettings.host_names`; always, when the app
        leaves hosts to the app it is mounted in)."""
        if self.host_names is None:
            return True
        name = host_name(headers.get("host", ""))
        if name in self.host_names:
            return True
        try:
            ipaddress.ip_address(name)
        except ValueError:
            return False
        return self.settings.on_every_interface  # an address, never a name: DNS rebinding cannot send it

    def body_limit_message(self, size):
        settings = self.settings
        return (f"The request body {size} more than {self.max_body} bytes, the most this server reads: "
                f"--max-client-batch-size {settings.max_client_batch_size} documents of --max-input-chars "
                f"{settings.max_input_chars} characters at {ESCAPED_CHARACTER_BYTES} bytes a character (a JSON "
                "\\u escape). Send fewer documents a request; a text of many characters outside the BMP (emoji) "
                "takes 12 bytes each as escapes: send the body as UTF-8 (json.dumps(..., ensure_ascii=False)).")

    def authorized(self, path, headers):
        if self.key is None or path in OPEN_PATHS:
            return True
        sent = headers.get("x-api-key") or ""
        bearer = headers.get("authorization", "")
        if bearer.lower().startswith("bearer "):
            sent = sent or bearer[7:].strip()
        return hmac.compare_digest(sent.encode("utf-8"), self.key.encode("utf-8"))


class Guard:
    """What is checked and recorded around every request before FastAPI parses it (a plain ASGI middleware:
    Starlette's `BaseHTTPMiddleware` costs a task per request): the `Host`, the API key, the body's size counted on the
    bytes received (with or without `Content-Length`; the body is read here, never past the limit, and handed on),
    its content type, and the metrics. A request cut by `--shutdown-timeout` is answered 503."""

    ENDPOINTS = ("/", "/health", "/info", "/metrics", "/predict", "/classify")
    BODIES = ("/predict", "/classify")

    def __init__(self, app, service):
        self.app, self.service = app, service

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        started, service, path = time.perf_counter(), self.service, endpoint_path(scope)
        headers = Headers(scope=scope)
        status = []

        async def recorded(message):
            if message["type"] == "http.response.start":
                status.append(message["status"])
            await send(message)

        refusal = self.refusal(scope, path, headers)
        if refusal is None and scope["method"] == "POST":
            body, refusal = await self.read_body(receive)
            if body is None and refusal is None:  # the client hung up while sending
                return
            receive = replayed(body, receive)
        if refusal is not None:
            await error(*refusal)(scope, receive, recorded)
        else:
            try:
                await self.app(scope, receive, recorded)
            except asyncio.CancelledError:  # uvicorn's --shutdown-timeout passed with this request unanswered
                if status:
                    raise
                logger.warning("%s %s was cut by the shutdown (--shutdown-timeout): answered 503.",
                               scope.get("method"), path)
                await error(503, "The server is shutting down and --shutdown-timeout passed before this request was "
                                 "answered; send it again (to another replica).", "unhealthy")(scope, receive, recorded)
            except Exception:  # a bug, not the client's: logged here, a message without the traceback there
                logger.exception("%s %s failed.", scope.get("method"), path)
                if not status:
                    await error(500, "The server failed to read this request; its log says why.",
                                "backend")(scope, receive, recorded)
        endpoint = path if path in self.ENDPOINTS else "other"
        service.metrics.requests.labels(endpoint, str(status[0] if status else 500)).inc()
        service.metrics.latency.labels(endpoint).observe(time.perf_counter() - started)

    def refusal(self, scope, path, headers):
        """(status, message, error type) for a request refused before its body is read, else None."""
        service = self.service
        if not service.serves_host(headers):
            return (400, f"The Host {headers.get('host', '')!r} is not one this server answers (it answers "
                         f"{', '.join(sorted(service.host_names))}), so a web page cannot reach it by DNS rebinding; "
                         "start it with --allowed-hosts NAME to add a name ('*': any, behind a proxy that checks "
                         "hosts).", "validation")
        if not service.authorized(path, headers):
            return (401, "A missing or wrong API key: send it as `Authorization: Bearer KEY` or `X-API-Key: KEY`.",
                    "unauthorized")
        if scope["method"] != "POST" or path not in self.BODIES:
            return None
        length = headers.get("content-length")
        if length is not None and length.isdigit() and int(length) > service.max_body:
            return 413, service.body_limit_message(f"has {length} bytes,"), "payload_too_large"
        if not JSON_TYPE.match(headers.get("content-type", "")):
            sent = f"as {headers['content-type']!r}" if headers.get("content-type") else "without a content type"
            return (415, f"The body is sent {sent}; send it as JSON with `Content-Type: application/json` (curl: -H "
                         "'Content-Type: application/json').", "validation")
        return None

    async def read_body(self, receive):
        """(the body, None), or (None, a 413) once more than `max_body` bytes have come, or (None, None) when the
        client hung up."""
        chunks, size = [], 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return None, None
            chunks.append(message.get("body", b""))
            size += len(chunks[-1])
            if size > self.service.max_body:
                return None, (413, self.service.body_limit_message("passed"), "payload_too_large")
            if not message.get("more_body", False):
                return b"".join(chunks), None


def replayed(body, receive):
    """An ASGI `receive` that gives `body` (already read) once, then what `receive` gives (a disconnect)."""
    given = []

    async def receive_again():
        if not given:
            given.append(True)
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return receive_again


def endpoint_path(scope):
    """The request's path within this app: without the prefix of an app it is mounted in (`root_path`)."""
    path, root = scope["path"], scope.get("root_path", "")
    if root and path.startswith(root):
        path = path[len(root):]
    return path or "/"


def host_name(host):
    """The name in a `Host` header, without its port, in lower case: `[::1]:8080` -> `::1`."""
    host = host.strip().lower()
    if host.startswith("["):
        return host[1: host.find("]")] if "]" in host else host
    name, colon, port = host.rpartition(":")
    return name.rstrip(".") if colon and port.isdigit() and ":" not in name else host.rstrip(".")


def folder_name(model_dir):
    """The model folder's own name, never its path on this disk."""
    return os.path.basename(os.path.normpath(os.path.abspath(model_dir)))


def explain_refusal(model, settings):
    """Why this server cannot give `explain` (None when it can): the family's own refusal, as `predict --explain`
    asks it, or the server's `--long chunks`."""
    try:
        check_explainable(model)
    except ValueError as refusal:
        return str(refusal).replace(" (drop --explain)", "")
    if settings.long == "chunks":
        return ("this server reads documents in chunks (--long chunks), which cannot be weighed against each other; "
                "serve with --long truncate to explain")
    return None


def build_app(model_dir, settings=None, **keywords):
    """`serving.create_app`."""
    if settings is None:
        settings = ServeSettings(**keywords)
    elif keywords:
        settings = replace(settings, **keywords)
    service = Service(model_dir, settings)

    @asynccontextmanager
    async def lifespan(app):
        # mounted in another app, this does not run (Starlette runs the outermost app's lifespan only): the first
        # request then starts the batcher, and it stops with the process
        service.batcher.start()
        logger.info("Serving %s (%s, %d labels) with %d reading thread(s).", service.model_name,
                    service.config.model_type, len(service.labels), service.batcher.workers)
        yield
        await service.batcher.stop()  # uvicorn has answered every request in flight by now

    app = FastAPI(title="hf_longdoc", version=VERSION, lifespan=lifespan,
                  description="Long-document classification: the whole document read, its evidence returned.")
    app.state.service = service

    app.add_middleware(Guard, service=service)

    @app.exception_handler(RequestValidationError)
    async def invalid(request, exc):
        problems = []
        for problem in exc.errors():
            if problem.get("type") == "json_invalid":
                position = problem.get("loc", ("body", "?"))[-1]
                problems.append(f"the body is not valid JSON ({problem.get('ctx', {}).get('error', 'invalid')} at "
                                f"character {position})")
                continue
            where = ".".join(str(part) for part in problem.get("loc", ()) if part != "body") or "the body"
            problems.append(f"`{where}`: {problem.get('msg', 'invalid')}")
        return error(422, "; ".join(problems) or "The request is not valid JSON.", "validation")

    @app.exception_handler(HTTPException)
    async def routing(request, exc):
        """FastAPI's and Starlette's own errors in the JSON shape: a body that cannot be decoded (FastAPI's 400 for
        what is not UTF-8 JSON or nests too deep) is the 422 of any other malformed JSON; 404, 405."""
        if exc.status_code == 400 and exc.__cause__ is not None:
            cause = exc.__cause__
            why = "it nests too deeply" if isinstance(cause, RecursionError) else f"{type(cause).__name__}: {cause}"
            return error(422, f"The body is not valid UTF-8 JSON ({why}).", "validation")
        if exc.status_code == 404:
            return error(404, f"There is no endpoint {endpoint_path(request.scope)}; the endpoints are "
                              f"{', '.join(Guard.ENDPOINTS)}.", "validation", exc.headers)
        if exc.status_code == 405:
            allowed = Headers(exc.headers or {}).get("allow", "another method")
            return error(405, f"{endpoint_path(request.scope)} does not take {request.method}; it takes {allowed}.",
                         "validation", exc.headers)
        return error(exc.status_code, str(exc.detail), "validation", exc.headers)

    @app.exception_handler(Overloaded)
    async def overloaded(request, exc):
        return error(429, str(exc), "overloaded")

    @app.exception_handler(Unavailable)
    async def unavailable(request, exc):
        return error(503, str(exc), "unhealthy")

    @app.post("/predict")
    async def predict(request: PredictRequest):
        """Text embeddings inference's `/predict`: per document, every class with its score, best first."""
        single = isinstance(request.inputs, str)
        texts = [request.inputs] if single else []
        for index, item in enumerate([] if single else request.inputs):
            if isinstance(item, list) and not item:
                return error(422, f"`inputs[{index}]` is an empty list; send [\"document\"] or the document itself.",
                             "validation")
            if isinstance(item, list) and len(item) != 1:
                return error(422, f"`inputs[{index}]` is a sequence pair; these models read one document each: send "
                                  "[[\"document\"], ...] or a list of documents.", "validation")
            texts.append(item[0] if isinstance(item, list) else item)
        if (refused := service.check_documents(texts)) is not None:
            return refused
        predictions, _ = await service.batcher.submit(texts)
        answers = []
        for prediction in predictions:
            if request.raw_scores:
                scores = dict(zip(service.labels, prediction["logits"]))
            else:
                scores = prediction["scores"]
            answers.append([{"label": label, "score": score}
                            for label, score in sorted(scores.items(), key=lambda item: -item[1])])
        return JSONResponse(answers[0] if single else answers)

    @app.post("/classify")
    async def classify(request: ClassifyRequest):
        """Per document: its label(s) and score(s), every class's score, how much of it was read, and with
        `explain` the passages that weighed most (character offsets into the text as sent)."""
        texts = [request.inputs] if isinstance(request.inputs, str) else list(request.inputs)
        if (refused := service.check_documents(texts)) is not None:
            return refused
        if request.explain is not None:
            if service.explain_refusal is not None:
                return error(422, f"`explain`: {service.explain_refusal}; leave it out.", "validation")
            if request.explain > settings.max_explain:
                return error(422, f"`explain` {request.explain} is more passages than this server returns "
                                  f"(--max-explain {settings.max_explain}).", "validation")
        predictions, documents = await service.batcher.submit(texts, request.explain)
        reader = service.reader_for(request.explain)
        answers = []
        for prediction, document in zip(predictions, documents):
            scores = prediction["scores"]
            if request.top_k:
                scores = dict(sorted(scores.items(), key=lambda item: -item[1])[: request.top_k])
            answer = {"label": prediction["label"], "score": prediction["score"], "scores": scores,
                      "coverage": reader.coverage(document)}
            if request.explain is not None:
                answer["evidence"] = prediction["evidence"]
            answers.append(answer)
        return JSONResponse(answers)

    @app.get("/health")
    async def health():
        """ok once the model is loaded and a request can be answered; 503 in TEI's shape when not (shutting down)."""
        service.batcher.start()  # mounted in another app: not started by a lifespan
        return {"status": "ok"}

    @app.get("/info")
    async def info():
        return service.info()

    @app.get("/metrics")
    async def metrics():
        return Response(generate_latest(service.metrics.registry), media_type=CONTENT_TYPE_LATEST)

    with open(PAGE, encoding="utf-8") as f:
        page_html = f.read()

    @app.get("/", response_class=HTMLResponse)
    async def page():
        return page_html

    return app


__all__ = ["build_app"]
