"""The FastAPI app behind `hf-longdoc serve`: the endpoints, the limits, the API key and the metrics.

`/predict` follows text embeddings inference (TEI, huggingface/text-embeddings-inference: `docs/openapi.json` and
`router/src/http/`) wherever TEI defines the behaviour, so its clients (`huggingface_hub.InferenceClient`, SageMaker,
probes, dashboards) work unchanged: its routes (`POST /`, `/invocations`; `GET /health`, `/ping`), its request
fields (others ignored), its `/info` fields, metric names, `x-*` headers and error types. The choices where TEI and
this package differ are in docs/models.md ("serve").

FastAPI and pydantic parse and validate the requests, `prometheus-client` keeps the metrics, and every error is JSON
with a message naming the field or the limit (TEI's `{"error", "error_type"}`), never a traceback.
"""

import asyncio
import functools
import hmac
import importlib.metadata
import ipaddress
import logging
import os
import re
import time
from contextlib import asynccontextmanager
from dataclasses import replace
from typing import Annotated

import torch
from fastapi import APIRouter, Depends, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import Metric
from starlette.datastructures import Headers
from starlette.exceptions import HTTPException

from ..inference.reader import load_reader, no_text_reason
from ..inference.reading import best_first
from ..publishing.hub import card_model_id
from .batching import TOKENIZING_THREADS, Batcher, Overloaded, Reading, Unavailable, ids_read
from .schemas import Classification, ClassifyRequest, ErrorResponse, Info, Prediction, PredictRequest
from .settings import PAGE_PATH, ServeSettings

logger = logging.getLogger(__name__)
VERSION = importlib.metadata.version("hf_longdoc")
PAGE = os.path.join(os.path.dirname(__file__), "page.html")
OPEN_PATHS = ("/", "/health", "/ping", "/metrics", "/info", PAGE_PATH)  # GET: probes, scraping, the page need no key
PREDICT_PATHS = ("/predict", "/", "/invocations")  # TEI's routes to predict, for a classifier
HEALTH_PATHS = ("/health", "/ping", "/")  # TEI's health probes
BODY_SLACK = 64 * 1024  # bytes of JSON around the documents themselves
# a character as JSON may send it: `\\uXXXX`, as Python's json.dumps and JavaScript's escapes write a character of the
# BMP (one outside it, an emoji, is two such escapes: 12 bytes)
ESCAPED_CHARACTER_BYTES = 6
SURROGATE = re.compile("[\ud800-\udfff]")
JSON_TYPE = re.compile(r"^application/(?:[\w.+-]+\+)?json\s*(?:;|$)", re.I)


class Metrics:
    """The server's Prometheus metrics, in a registry of its own (one per app): this package's (`hf_longdoc_*`, as
    documented) and TEI's series under TEI's names (`te_*`: `router/src/http/server.rs`, `router/src/lib.rs`,
    `core/src/queue.rs`), so a TEI dashboard finds them."""

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
        self.tei = TeiCounters()
        self.registry.register(self.tei)
        durations = tuple(0.00001 * 1.5 ** power for power in range(1, 36))  # TEI's buckets: 35, geometric
        self.tei_durations = {part: Histogram(f"te_request{part}_duration", f"TEI's te_request{part}_duration",
                                              registry=self.registry, buckets=durations)
                              for part in ("", "_tokenization", "_queue", "_inference")}
        self.tei_input_length = Histogram("te_request_input_length", "TEI's te_request_input_length: ids an input "
                                          "is read in", registry=self.registry,
                                          buckets=tuple(2.0 ** power for power in range(21)))
        self.tei_batch_size = Histogram("te_batch_next_size", "TEI's te_batch_next_size: inputs read together",
                                        registry=self.registry, buckets=tuple(2.0 ** power for power in range(13)))
        self.tei_batch_tokens = Histogram("te_batch_next_tokens", "TEI's te_batch_next_tokens: ids read together",
                                          registry=self.registry, buckets=tuple(2.0 ** power for power in range(21)))
        self.tei_queue_size = Gauge("te_queue_size", "TEI's te_queue_size: requests waiting to be read",
                                    registry=self.registry)

    def batch_read(self, documents, ids):
        self.batch_documents.observe(documents)
        self.input_ids.inc(ids)
        self.tei_batch_size.observe(documents)
        self.tei_batch_tokens.observe(ids)

    def request_done(self, started, timing, lengths):
        """A request answered: TEI's durations and input lengths."""
        self.tei_durations[""].observe(time.perf_counter() - started)
        self.tei_durations["_tokenization"].observe(timing.tokenization)
        self.tei_durations["_queue"].observe(timing.queue)
        self.tei_durations["_inference"].observe(timing.inference)
        for length in lengths:
            self.tei_input_length.observe(length)


class TeiCounters:
    """TEI's counters under TEI's names: `te_request_count` and `te_request_success` by `method` (single, batch),
    `te_request_failure` by `err` (validation, batch_size, overloaded, tokenization, inference). prometheus-client
    writes a `Counter` as `NAME_total`; these keep TEI's names, exposed untyped (PromQL's `rate()` reads them as it
    reads a counter)."""

    NAMES = {"te_request_count": "method", "te_request_success": "method", "te_request_failure": "err"}

    def __init__(self):
        self.counts = {name: {} for name in self.NAMES}

    def inc(self, name, label):
        self.counts[name][label] = self.counts[name].get(label, 0) + 1

    def collect(self):
        for name, label_name in self.NAMES.items():
            metric = Metric(name, f"TEI's {name}", "unknown")
            for label, count in sorted(self.counts[name].items()):
                metric.add_sample(name, {label_name: label}, count)
            yield metric


def error(status, message, kind="Validation", headers=None):
    """An error in TEI's shape; `kind`: TEI's `ErrorType` (`schemas.ErrorType`), spelled as TEI sends it."""
    return JSONResponse({"error": message, "error_type": kind}, status_code=status, headers=headers)


class Refused(Exception):
    """A request refused once its documents are tokenized: `response`, and TEI's failure label (`err`)."""

    def __init__(self, response, failure="validation"):
        super().__init__(failure)
        self.response, self.failure = response, failure


class Service:
    """The model, its readers and the limits: what the endpoints share."""

    def __init__(self, model_dir, settings):
        self.settings = settings.check()
        self.key = settings.api_key()  # read once; never logged
        self.reader = load_reader(model_dir, replace(settings, raw_scores=True), log=False)  # predict's reader
        settings.note_ignored()
        self.model, self.rules, self.labels = self.reader.model, self.reader.rules, self.reader.labels
        self.readers = {Reading(side=settings.truncation_side): self.reader}
        self.metrics = Metrics()
        self.batcher = Batcher(self.reader_for, settings.max_batch_tokens, settings.max_concurrent_requests,
                               self.reader.workers, self.metrics, settings.batch_size)
        self.max_body = (settings.max_client_batch_size * (settings.max_input_chars * ESCAPED_CHARACTER_BYTES + 2)
                         + BODY_SLACK)
        self.model_name = settings.served_model_name or card_model_id(model_dir) or folder_name(model_dir)
        self.host_names = None if settings.allowed_hosts is None else settings.host_names()
        self.compute_type = "cpu" if self.model.device.type == "cpu" else "gpu"
        self.ignored = set()

    def reader_for(self, reading):
        """The `Reader` of a `batching.Reading`: the server's, read another way (made once)."""
        if reading not in self.readers:
            self.readers[reading] = self.reader.variant(explain=reading.explain, truncation_side=reading.side)
        return self.readers[reading]

    def reading(self, direction=None, explain=None):
        """The `Reading` of a request: its `truncation_direction` (None: the server's `--truncation-side`)."""
        return Reading(explain, direction.lower() if direction else self.settings.truncation_side)

    def info(self):
        """TEI's `Info` (`router/src/lib.rs`), then this package's own fields (`schemas.Info`)."""
        settings, refusal = self.settings, self.reader.explain_refusal
        tei = {
            "model_id": self.model_name, "model_sha": None,
            "model_dtype": str(self.model.dtype).replace("torch.", ""), "served_model_name": self.model_name,
            "model_type": {"classifier": {"id2label": {str(index): label for index, label in enumerate(self.labels)},
                                          "label2id": {label: index for index, label in enumerate(self.labels)}}},
            "max_concurrent_requests": settings.max_concurrent_requests, "max_input_length": self.reader.length,
            "max_batch_tokens": settings.max_batch_tokens, "max_batch_requests": settings.batch_size,
            "max_client_batch_size": settings.max_client_batch_size, "auto_truncate": True,
            "tokenization_workers": TOKENIZING_THREADS, "version": VERSION, "sha": None, "docker_label": None,
        }
        return tei | {
            "family": self.model.config.model_type, "labels": self.labels, "multi_label": self.rules.multi_label,
            "threshold": self.rules.threshold, "reading_length": self.reader.length, "long": settings.long,
            "stride": settings.stride, "aggregation": settings.aggregation,
            "explainable": refusal is None, "explain_refusal": refusal,
            "max_input_chars": settings.max_input_chars, "max_explain": settings.max_explain,
            "api_key_required": self.key is not None, "page": PAGE_PATH,
        }

    def check_documents(self, texts):
        """(a 400 or 422 response, TEI's failure label) for documents this server will not read (too many, too long,
        without text), else None. TEI's statuses, types and wording: a batch over the limit and a document over
        `--max-input-chars` are 422 Validation, an empty document 400 Empty."""
        limit = self.settings.max_client_batch_size
        if len(texts) > limit:
            return error(422, f"batch size {len(texts)} > maximum allowed batch size {limit} (--max-client-batch-size):"
                              " send the documents in several requests."), "batch_size"
        if not texts:
            return error(422, "`inputs` is an empty list; send at least one document."), "validation"
        for index, text in enumerate(texts):
            if surrogate := SURROGATE.search(text):
                return error(422, f"`inputs[{index}]` holds an unpaired surrogate (U+{ord(surrogate.group()):04X}) at "
                                  f"character {surrogate.start()}, which is not Unicode text; send valid Unicode (a "
                                  "character outside the BMP as its pair of escapes, or as UTF-8)."), "validation"
            if len(text) > self.settings.max_input_chars:
                return error(422, f"`inputs[{index}]` must have less than {self.settings.max_input_chars} characters "
                                  f"(--max-input-chars). Given: {len(text)}"), "validation"
            if not text:
                return error(400, f"`inputs[{index}]` cannot be empty", "Empty"), "validation"
            if reason := no_text_reason(text):
                return error(400, f"`inputs[{index}]` {reason}: there is nothing to classify.", "Empty"), "validation"
        return None

    def refuse_cut(self, reader, documents):
        """TEI's 422 for a document longer than the server reads, when the request says `truncate: false` and the
        server would cut it (`--long truncate`)."""
        if not reader.truncates:
            return
        for index, document in enumerate(documents):
            if document.get("cut"):
                given = document["tokens"] + len(reader.plan.prefix) + len(reader.plan.suffix)
                raise Refused(error(422, f"`inputs[{index}]` must have less than {reader.length} tokens. "
                                         f"Given: {given} (`truncate: false`, and this server reads a document's first "
                                         "or last ids: send `truncate: true`, or serve with --long chunks to read all "
                                         "of it)."), "tokenization")

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

    def note_ignored(self, request):
        """Log, once per name, a `/predict` field (or `parameters` entry) this server ignores, as TEI ignores it."""
        fields = [f"`{name}`" for name in request.model_extra or {}]
        if request.parameters is not None:
            fields += [f"`parameters.{name}`" for name in request.parameters.model_extra or {}]
        for name in fields:
            if name not in self.ignored:
                self.ignored.add(name)
                logger.info("/predict ignores the field %s, as text embeddings inference does (logged once).", name)

    def compute_headers(self, started, texts, documents, timing):
        """TEI's response headers (`router/src/lib.rs`, `ResponseMetadata`): characters and ids read, and the
        milliseconds spent in all, tokenizing, queued and reading."""
        total = str(int((time.perf_counter() - started) * 1000))
        return {"x-compute-type": self.compute_type, "x-compute-time": total, "x-total-time": total,
                "x-compute-characters": str(sum(len(text) for text in texts)),
                "x-compute-tokens": str(sum(ids_read(document) for document in documents)),
                "x-tokenization-time": str(int(timing.tokenization * 1000)),
                "x-queue-time": str(int(timing.queue * 1000)), "x-inference-time": str(int(timing.inference * 1000))}

    def body_limit_message(self, size):
        settings = self.settings
        return (f"The request body {size} more than {self.max_body} bytes, the most this server reads: "
                f"--max-client-batch-size {settings.max_client_batch_size} documents of --max-input-chars "
                f"{settings.max_input_chars} characters at {ESCAPED_CHARACTER_BYTES} bytes a character (a JSON "
                "\\u escape). Send fewer documents a request; a text of many characters outside the BMP (emoji) "
                "takes 12 bytes each as escapes: send the body as UTF-8 (json.dumps(..., ensure_ascii=False)).")

    def authorized(self, method, path, headers):
        if self.key is None or (method in ("GET", "HEAD") and path in OPEN_PATHS):
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
                                 "answered; send it again (to another replica).", "Unhealthy")(scope, receive, recorded)
            except Exception:  # a bug, not the client's: logged here, a message without the traceback there
                logger.exception("%s %s failed.", scope.get("method"), path)
                if not status:
                    await error(500, "The server failed to read this request; its log says why.",
                                "Backend")(scope, receive, recorded)
        route = scope.get("route")  # the route FastAPI matched; a request refused here is labelled by its path
        endpoint = route.path if route is not None else path if path in route_paths() else "other"
        service.metrics.requests.labels(endpoint, str(status[0] if status else 500)).inc()
        service.metrics.latency.labels(endpoint).observe(time.perf_counter() - started)

    def refusal(self, scope, path, headers):
        """(status, message, error type) for a request refused before its body is read, else None."""
        service = self.service
        if not service.serves_host(headers):
            return (400, f"The Host {headers.get('host', '')!r} is not one this server answers (it answers "
                         f"{', '.join(sorted(service.host_names))}), so a web page cannot reach it by DNS rebinding; "
                         "start it with --allowed-hosts NAME to add a name ('*': any, behind a proxy that checks "
                         "hosts).", "Validation")
        if not service.authorized(scope["method"], path, headers):
            return (401, "A missing or wrong API key: send it as `Authorization: Bearer KEY` or `X-API-Key: KEY`.",
                    "Validation")
        if scope["method"] != "POST" or path not in route_paths(("POST",)):
            return None
        length = headers.get("content-length")
        if length is not None and length.isdigit() and int(length) > service.max_body:
            return 413, service.body_limit_message(f"has {length} bytes,"), "Validation"
        if not JSON_TYPE.match(headers.get("content-type", "")):
            sent = f"as {headers['content-type']!r}" if headers.get("content-type") else "without a content type"
            return (415, f"The body is sent {sent}; send it as JSON with `Content-Type: application/json` (curl: -H "
                         "'Content-Type: application/json').", "Validation")
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
                return None, (413, self.service.body_limit_message("passed"), "Validation")
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


def service_of(request: Request) -> Service:
    """The app's `Service` (what every handler reads with)."""
    return request.app.state.service


Served = Annotated[Service, Depends(service_of)]
router = APIRouter()  # the one route table: the Guard and the 404 read their paths from it
ERRORS = {status: {"model": ErrorResponse} for status in (400, 401, 413, 415, 422, 429, 503)}


async def predict(request: PredictRequest, service: Served):
    """Text embeddings inference's `/predict` (also `POST /` and `/invocations`, as TEI routes them for a
    classifier): per document, every class with its score, best first; `parameters` (InferenceClient's) read for
    `top_k` and `function_to_apply`."""
    started, single = time.perf_counter(), isinstance(request.inputs, str)
    service.metrics.tei.inc("te_request_count", "single" if single else "batch")
    service.note_ignored(request)
    texts, function, top_k = predict_arguments(request)
    if (refusal := service.check_documents(texts)) is not None:
        raise Refused(*refusal)
    check = service.refuse_cut if request.truncate is False else None
    reading = service.reading(request.truncation_direction)
    predictions, documents, timing = await service.batcher.submit(texts, reading, check)
    answers = []
    for prediction in predictions:
        scores = apply_function(prediction, function)
        answers.append([{"label": service.labels[index], "score": scores[index]}
                        for index in best_first(scores, top_k)])
    service.metrics.tei.inc("te_request_success", "single" if single else "batch")
    service.metrics.request_done(started, timing, [ids_read(document) for document in documents])
    return JSONResponse(answers[0] if single else answers,
                        headers=service.compute_headers(started, texts, documents, timing))


for path in PREDICT_PATHS:  # one handler; the OpenAPI page shows it once, at /predict
    router.add_api_route(path, predict, methods=["POST"], include_in_schema=path == "/predict", summary="Predict",
                         response_model=list[Prediction] | list[list[Prediction]], responses=ERRORS)


@router.post("/classify", response_model=list[Classification], responses=ERRORS)
async def classify(request: ClassifyRequest, service: Served):
    """Per document: its label(s) and score(s), every class's score (with `top_k`: the K best, best first), how much
    of it was read (and which part), and with `explain` the passages that weighed most (character offsets into the
    text as sent)."""
    started = time.perf_counter()
    texts = [request.inputs] if isinstance(request.inputs, str) else list(request.inputs)
    if (refusal := service.check_documents(texts)) is not None:
        raise Refused(*refusal)
    reading = service.reading(request.truncation_direction, request.explain)
    if request.explain is not None:
        limit = service.settings.max_explain
        if (refusal := service.reader.explain_refusal) is not None:
            return error(422, f"`explain`: {refusal}; leave it out.")
        if request.explain > limit:
            return error(422, f"`explain` {request.explain} is more passages than this server returns "
                              f"(--max-explain {limit}).")
        if reading.side != "right":
            return error(422, "`explain` weighs the passages of a document's start; it cannot be combined with "
                              "`truncation_direction: left`: drop one.")
    check = service.refuse_cut if request.truncate is False else None
    predictions, documents, timing = await service.batcher.submit(texts, reading, check)
    reader = service.reader_for(reading)
    answers = []
    for prediction, document in zip(predictions, documents):
        scores = prediction["scores"]
        if request.top_k:
            scores = service.rules.top(list(scores.values()), request.top_k)
        answer = {"label": prediction["label"], "score": prediction["score"], "scores": scores,
                  "coverage": reader.coverage(document)}
        if request.explain is not None:
            answer["evidence"] = prediction["evidence"]
        answers.append(answer)
    return JSONResponse(answers, headers=service.compute_headers(started, texts, documents, timing))


async def health(service: Served):
    """TEI's health probe (`GET /health`, `/ping` and `/`): 200 with an empty body once the model is loaded and a
    request can be answered; 503 in TEI's error shape when not (shutting down)."""
    service.batcher.start()  # mounted in another app: not started by a lifespan
    return Response(status_code=200)


for path in HEALTH_PATHS:
    router.add_api_route(path, health, methods=["GET"], include_in_schema=path == "/health", summary="Health",
                         responses={503: {"model": ErrorResponse}})


@router.get("/info", response_model=Info)
async def info(service: Served):
    return service.info()


@router.get("/metrics")
async def metrics(service: Served):
    return Response(generate_latest(service.metrics.registry), media_type=CONTENT_TYPE_LATEST)


with open(PAGE, encoding="utf-8") as f:
    PAGE_HTML = f.read()


@router.get(PAGE_PATH, response_class=HTMLResponse)
async def page():
    """A page to paste a document into: its label, scores, coverage and evidence."""
    return PAGE_HTML


@functools.cache  # the routes are fixed once this module is imported; the Guard asks on every request
def route_paths(methods=("GET", "POST")):
    """The paths of `router`'s routes that take one of `methods`."""
    return tuple(dict.fromkeys(route.path for route in router.routes if set(route.methods) & set(methods)))


async def invalid(request, exc):
    """A request pydantic refuses: 422, naming each field and what is wrong with it."""
    problems = []
    for problem in exc.errors():
        if problem.get("type") == "json_invalid":
            position = problem.get("loc", ("body", "?"))[-1]
            problems.append(f"the body is not valid JSON ({problem.get('ctx', {}).get('error', 'invalid')} at "
                            f"character {position})")
            continue
        where = ".".join(str(part) for part in problem.get("loc", ()) if part != "body") or "the body"
        problems.append(f"`{where}`: {problem.get('msg', 'invalid')}")
    count_failure(request, "validation")
    return error(422, "; ".join(problems) or "The request is not valid JSON.")


async def routing(request, exc):
    """FastAPI's and Starlette's own errors in the JSON shape: a body that cannot be decoded (FastAPI's 400 for what
    is not UTF-8 JSON or nests too deep) is the 422 of any other malformed JSON; 404, 405."""
    if exc.status_code == 400 and exc.__cause__ is not None:
        cause = exc.__cause__
        why = "it nests too deeply" if isinstance(cause, RecursionError) else f"{type(cause).__name__}: {cause}"
        return error(422, f"The body is not valid UTF-8 JSON ({why}).")
    if exc.status_code == 404:
        return error(404, f"There is no endpoint {endpoint_path(request.scope)}; the endpoints are "
                          f"{', '.join(route_paths())}.", headers=exc.headers)
    if exc.status_code == 405:
        allowed = Headers(exc.headers or {}).get("allow", "another method")
        return error(405, f"{endpoint_path(request.scope)} does not take {request.method}; it takes {allowed}.",
                     headers=exc.headers)
    return error(exc.status_code, str(exc.detail), headers=exc.headers)


async def overloaded(request, exc):
    count_failure(request, "overloaded")
    return error(429, str(exc), "Overloaded")


async def unavailable(request, exc):
    return error(503, str(exc), "Unhealthy")


async def refused(request, exc):
    count_failure(request, exc.failure)
    return exc.response


def count_failure(request, failure):
    """TEI's `te_request_failure` for a refused request to one of TEI's routes."""
    if endpoint_path(request.scope) in PREDICT_PATHS:
        request.app.state.service.metrics.tei.inc("te_request_failure", failure)


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
                    service.model.config.model_type, len(service.labels), service.batcher.workers)
        yield
        await service.batcher.stop()  # uvicorn has answered every request in flight by now

    app = FastAPI(title="hf_longdoc", version=VERSION, lifespan=lifespan,
                  description="Long-document classification: the whole document read, its evidence returned.")
    app.state.service = service
    app.include_router(router)
    app.add_middleware(Guard, service=service)
    for kind, handler in ((RequestValidationError, invalid), (HTTPException, routing), (Overloaded, overloaded),
                          (Unavailable, unavailable), (Refused, refused)):
        app.add_exception_handler(kind, handler)
    return app


def predict_arguments(request):
    """(the documents, the function that turns logits into scores (None: the model's own), how many classes to
    return (None: all)) of a `/predict` request; a `Refused` 422 for what these models cannot read."""
    single = isinstance(request.inputs, str)
    texts = [request.inputs] if single else []
    for index, item in enumerate([] if single else request.inputs):
        if isinstance(item, list) and not item:
            raise Refused(error(422, f"`inputs[{index}]` is an empty list; send [\"document\"] or the document "
                                     "itself."))
        if isinstance(item, list) and len(item) != 1:
            raise Refused(error(422, f"`inputs[{index}]` is a sequence pair; these models read one document each: "
                                     "send [[\"document\"], ...] or a list of documents."))
        texts.append(item[0] if isinstance(item, list) else item)
    parameters = request.parameters
    function = parameters.function_to_apply.lower() if parameters and parameters.function_to_apply else None
    if request.raw_scores:
        if function not in (None, "none"):
            raise Refused(error(422, f"`raw_scores: true` asks for the logits and `parameters.function_to_apply` "
                                     f"for {function}: drop one."))
        function = "none"
    return texts, function, parameters.top_k if parameters else None


def apply_function(prediction, function):
    """A prediction's scores in label order: the model's own (softmax, or sigmoid for a multi-label model), or
    `function` (`softmax`, `sigmoid`, `none`: the logits) applied to its logits."""
    if function is None:
        return list(prediction["scores"].values())
    if function == "none":
        return prediction["logits"]
    logits = torch.tensor(prediction["logits"])
    return (logits.softmax(-1) if function == "softmax" else logits.sigmoid()).tolist()


__all__ = ["build_app"]
