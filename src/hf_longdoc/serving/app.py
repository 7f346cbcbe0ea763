"""The FastAPI app behind `hf-longdoc serve`: the endpoints, the limits, the API key and the metrics.

FastAPI and pydantic parse and validate the requests, `prometheus-client` keeps the metrics, and every error is JSON
with a message naming the field or the limit (TEI's `{"error", "error_type"}`), never a traceback.
"""

import hmac
import importlib.metadata
import logging
import os
import time
from contextlib import asynccontextmanager
from dataclasses import replace

from fastapi import FastAPI
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from starlette.datastructures import Headers

from ..catalog import EVIDENCE_WEIGHTS
from ..predicting import PredictSettings
from ..predicting.model import Reader, choose_device, load_model, no_text_reason
from ..reading import decision_threshold, is_multi_label, saved_reading_length
from ..saved_models import saved_config
from ..threads import reading_workers
from .batching import Batcher, Overloaded
from .schemas import ClassifyRequest, PredictRequest
from .settings import ServeSettings

logger = logging.getLogger(__name__)
VERSION = importlib.metadata.version("hf_longdoc")
PAGE = os.path.join(os.path.dirname(__file__), "page.html")
OPEN_PATHS = ("/", "/health", "/metrics", "/info")  # probes, scraping and the page need no key
BODY_SLACK = 64 * 1024  # bytes of JSON around the documents themselves


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


def error(status, message, kind):
    return JSONResponse({"error": message, "error_type": kind}, status_code=status)


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
        self.explainable = family is not None and family.name in EVIDENCE_WEIGHTS
        workers = reading_workers(device, family.concurrent_inference if family is not None else True)
        self.readers = {}
        self.metrics = Metrics()
        self.batcher = Batcher(self.reader_for, settings.max_batch_tokens, settings.max_concurrent_requests, workers,
                               self.metrics, settings.batch_size)
        self.labels = [self.config.id2label[index] for index in range(self.config.num_labels)]
        self.max_body = settings.max_client_batch_size * (settings.max_input_chars * 4 + 2) + BODY_SLACK

    def reader_for(self, explain):
        if explain not in self.readers:
            settings = self.reading if explain is None else replace(self.reading, explain=explain)
            self.readers[explain] = Reader(self.model, self.tokenizer, settings, self.threshold)
        return self.readers[explain]

    def info(self):
        settings = self.settings
        return {
            "model_id": os.path.abspath(self.model_dir), "model_type": self.config.model_type,
            "model_dtype": str(self.model.dtype).replace("torch.", ""), "labels": self.labels,
            "multi_label": is_multi_label(self.config), "threshold": self.threshold,
            "reading_length": saved_reading_length(self.config, self.tokenizer), "long": settings.long,
            "stride": settings.stride, "aggregation": settings.aggregation, "explainable": self.explainable,
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
            if len(text) > self.settings.max_input_chars:
                return error(413, f"`inputs[{index}]` has {len(text)} characters; this server reads at most "
                                  f"{self.settings.max_input_chars} a document (--max-input-chars).",
                             "payload_too_large")
            if reason := no_text_reason(text):
                return error(422, f"`inputs[{index}]` {reason}: there is nothing to classify.", "validation")
        return None

    def authorized(self, path, headers):
        if self.key is None or path in OPEN_PATHS:
            return True
        sent = headers.get("x-api-key") or ""
        bearer = headers.get("authorization", "")
        if bearer.lower().startswith("bearer "):
            sent = sent or bearer[7:].strip()
        return hmac.compare_digest(sent.encode("utf-8"), self.key.encode("utf-8"))


class Guard:
    """The API key, the body's size and the metrics, checked and recorded around every request before FastAPI parses
    it (a plain ASGI middleware: Starlette's `BaseHTTPMiddleware` costs a task per request)."""

    ENDPOINTS = ("/", "/health", "/info", "/metrics", "/predict", "/classify")

    def __init__(self, app, service):
        self.app, self.service = app, service

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        started, service, path = time.perf_counter(), self.service, scope["path"]
        headers = Headers(scope=scope)
        status = []

        async def recorded(message):
            if message["type"] == "http.response.start":
                status.append(message["status"])
            await send(message)

        settings = service.settings
        if not service.authorized(path, headers):
            await error(401, "A missing or wrong API key: send it as `Authorization: Bearer KEY` or `X-API-Key: KEY`.",
                        "unauthorized")(scope, receive, recorded)
        elif int(headers.get("content-length") or 0) > service.max_body:
            await error(413, f"The request body has {headers['content-length']} bytes, more than "
                             f"--max-client-batch-size {settings.max_client_batch_size} documents of "
                             f"--max-input-chars {settings.max_input_chars} characters can take.",
                        "payload_too_large")(scope, receive, recorded)
        else:
            try:
                await self.app(scope, receive, recorded)
            except Exception:  # a bug, not the client's: logged here, a message without the traceback there
                logger.exception("%s %s failed.", scope.get("method"), path)
                if not status:
                    await error(500, "The server failed to read this request; its log says why.",
                                "backend")(scope, receive, recorded)
        endpoint = path if path in self.ENDPOINTS else "other"
        service.metrics.requests.labels(endpoint, str(status[0] if status else 500)).inc()
        service.metrics.latency.labels(endpoint).observe(time.perf_counter() - started)


def coverage(document, plan, long):
    """How much of a prepared document the model read (`schemas.Coverage`)."""
    tokens = document["tokens"]
    cut = long == "truncate" and document["cut"]
    return {"document_ids": tokens, "ids_read": plan.content if cut else tokens, "cut": cut,
            "chunks": len(document["chunks"])}


def build_app(model_dir, settings=None, **keywords):
    """`serving.create_app`."""
    if settings is None:
        settings = ServeSettings(**keywords)
    elif keywords:
        settings = replace(settings, **keywords)
    service = Service(model_dir, settings)

    @asynccontextmanager
    async def lifespan(app):
        service.batcher.start()
        logger.info("Serving %s (%s, %d labels) with %d reading thread(s).", model_dir, service.config.model_type,
                    len(service.labels), service.batcher.workers)
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

    @app.exception_handler(Overloaded)
    async def overloaded(request, exc):
        return error(429, str(exc), "overloaded")

    @app.post("/predict")
    async def predict(request: PredictRequest):
        """Text embeddings inference's `/predict`: per document, every class with its score, best first."""
        single = isinstance(request.inputs, str)
        texts = [request.inputs] if single else []
        for item in [] if single else request.inputs:
            if isinstance(item, list) and len(item) != 1:
                return error(422, "`inputs` holds a sequence pair; these models read one document each: send "
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
            if not service.explainable:
                return error(422, f"`explain`: a {service.config.model_type} model's weights do not say which "
                                  "passages decided; leave it out.", "validation")
            if settings.long == "chunks":
                return error(422, "`explain`: this server reads documents in chunks (--long chunks), which cannot "
                                  "be weighed against each other; leave it out, or serve with --long truncate.",
                             "validation")
            if request.explain > settings.max_explain:
                return error(422, f"`explain` {request.explain} is more passages than this server returns "
                                  f"(--max-explain {settings.max_explain}).", "validation")
        predictions, documents = await service.batcher.submit(texts, request.explain)
        plan = service.reader_for(request.explain).plan
        answers = []
        for prediction, document in zip(predictions, documents):
            scores = prediction["scores"]
            if request.top_k:
                scores = dict(sorted(scores.items(), key=lambda item: -item[1])[: request.top_k])
            answer = {"label": prediction["label"], "score": prediction["score"], "scores": scores,
                      "coverage": coverage(document, plan, settings.long)}
            if request.explain is not None:
                answer["evidence"] = prediction["evidence"]
            answers.append(answer)
        return JSONResponse(answers)

    @app.get("/health")
    async def health():
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
