"""One small queue that batches documents across clients: what arrives while the model reads waits, and is then read
together, grouped by length, up to `max_batch_tokens` input ids.

A request's documents are tokenized (off the event loop) as `predict` tokenizes them, `Reader.documents`. Each reading
thread (on the CPU one per core, each on one intra-op thread, as `predict` reads; one on a GPU) takes, as soon as it
is free, the queued requests in arrival order while their documents fit one batch (`batch_size` documents and
`max_batch_tokens` ids; a request alone may exceed both), and reads them with `Reader.batches` and `Reader.predict`.
So while one thread reads, the requests it answered are sent again and queue for the next free thread: the model is
never idle while requests wait. Requests read another way (evidence, `explain`; a document's end,
`truncation_direction: "left"`) are read with a reader of their own, never in a batch with others. There is no
timer: a lone request is read at once, a busy server batches more. Each answer says how long its request spent being
tokenized, queued and read (TEI's `x-*-time` headers).
"""

import asyncio
import contextlib
import itertools
import logging
import time
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import torch

from ..utils.threads import one_thread_each

logger = logging.getLogger(__name__)
TOKENIZING_THREADS = 4


class Overloaded(Exception):
    """The queue holds `max_concurrent_requests` requests already (429)."""


class Unavailable(Exception):
    """The server is stopping: nothing more is read (503)."""


@dataclass(frozen=True)
class Reading:
    """How a request's documents are read: with `explain` passages of evidence (None: none), and the `side` a cut
    document is read from (`PredictSettings.truncation_side`). Requests read the same way are batched together."""

    explain: int | None = None
    side: str = "right"


@dataclass(frozen=True)
class Timing:
    """Seconds a request spent being tokenized, waiting for a reading thread, and being read (with the requests it
    was batched with)."""

    tokenization: float
    queue: float
    inference: float


@dataclass(eq=False)
class Job:
    """One request's documents, read together with others read the same way."""

    documents: list
    reading: Reading
    future: asyncio.Future
    ids: int = field(init=False)
    queued: float = field(default_factory=time.perf_counter)

    def __post_init__(self):
        self.ids = sum(ids_read(document) for document in self.documents)


def ids_read(document):
    """The ids a prepared document (`Reader.documents`'s) is read in: its chunks', special tokens included (none for
    a document without text)."""
    return sum(len(chunk) for chunk in document.get("chunks", ()))


class Batcher:
    """Queues requests and reads them in batches across clients (see the module docstring). `reader_for(reading)`
    gives the `inference.reader.Reader` of a `Reading`; `metrics` records the queue and the batches."""

    def __init__(self, reader_for, max_batch_tokens, max_requests, workers, metrics, batch_size):
        self.reader_for, self.max_batch_tokens, self.max_requests = reader_for, max_batch_tokens, max_requests
        self.workers, self.metrics, self.batch_size = workers, metrics, batch_size
        self.waiting = deque()
        self.in_flight = 0  # requests accepted and not yet answered
        self.rows = itertools.count()
        # several tokenizing threads (the fast tokenizer leaves Python's lock while it works), so that a request of
        # long documents does not hold a small one back behind it
        self.tokenizing = ThreadPoolExecutor(max_workers=TOKENIZING_THREADS, thread_name_prefix="tokenize")
        self.reading = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="read")
        self.threads = contextlib.ExitStack()
        self.task = self.loop = None
        self.stopped = False

    def start(self):
        """Read what is queued from now on, on the running event loop: from the app's lifespan, or from the first
        request of an app whose lifespan does not run (mounted in another). Nothing happens when it reads already; an
        `Unavailable` once it has stopped."""
        if self.stopped:
            raise Unavailable("The server is shutting down; send the request again (to another replica).")
        loop = asyncio.get_running_loop()
        if self.task is not None and self.loop is loop and not self.task.done():
            return
        if self.loop is None:
            self.threads.enter_context(one_thread_each(self.workers))  # each reading thread on one intra-op thread
        elif self.loop is not loop:  # a new event loop (a test client's): what waited on the old one cannot be answered
            self.waiting.clear()
        self.loop, self.ready, self.free = loop, asyncio.Event(), asyncio.Semaphore(self.workers)
        self.task = loop.create_task(self.run())
        if self.waiting:
            self.ready.set()

    async def stop(self):
        """Cancel the worker (after the server has answered every request in flight) and free its threads."""
        self.stopped = True
        if self.task is not None:
            self.task.cancel()
            try:
                await self.task
            except asyncio.CancelledError:
                pass
        for pool in (self.tokenizing, self.reading):
            pool.shutdown(wait=True)
        self.threads.close()

    async def submit(self, texts, reading=Reading(), check=None):
        """The predictions of `texts` (`Reader.predict`'s, in order), their prepared documents and the request's
        `Timing`; `Overloaded` when the queue is full. `check(reader, documents)`, once they are tokenized, may raise to
        refuse them before they queue."""
        self.start()
        if self.in_flight >= self.max_requests:
            raise Overloaded(f"{self.in_flight} requests are queued or being read, the most this server takes "
                             "(--max-concurrent-requests); retry shortly.")
        self.in_flight += 1
        self.metrics.queue_depth.set(self.in_flight)
        try:
            loop = asyncio.get_running_loop()
            reader = self.reader_for(reading)
            start = next(self.rows)
            for _ in range(len(texts) - 1):
                next(self.rows)
            tokenizing = time.perf_counter()
            documents = await loop.run_in_executor(self.tokenizing, reader.documents, start, texts)
            if check is not None:
                check(reader, documents)
            job = Job(documents, reading, loop.create_future())
            self.waiting.append(job)
            self.metrics.tei_queue_size.set(len(self.waiting))
            self.ready.set()
            predictions, started, ended = await job.future
            timing = Timing(job.queued - tokenizing, started - job.queued, ended - started)
            return [predictions[document["row"]] for document in documents], documents, timing
        finally:
            self.in_flight -= 1
            self.metrics.queue_depth.set(self.in_flight)

    def take(self):
        """The next jobs to read together: the oldest, and the later ones read the same way while their documents
        fit one batch (`batch_size` documents, `max_batch_tokens` ids)."""
        first = self.waiting[0]
        chosen, ids, documents = [], 0, 0
        for job in self.waiting:
            if job.reading != first.reading:
                continue
            if chosen and (ids + job.ids > self.max_batch_tokens or documents + len(job.documents) > self.batch_size):
                break
            chosen.append(job)
            ids += job.ids
            documents += len(job.documents)
        for job in chosen:
            self.waiting.remove(job)
        self.metrics.tei_queue_size.set(len(self.waiting))
        return chosen

    async def run(self):
        """Whenever a reading thread is free and requests wait: read the next batch of them on it."""
        while True:
            await self.ready.wait()
            if not self.waiting:
                self.ready.clear()
                continue
            await self.free.acquire()
            if not self.waiting:  # taken while this one waited for a thread
                self.free.release()
                continue
            asyncio.get_running_loop().create_task(self.answer(self.take()))

    async def answer(self, jobs):
        started = time.perf_counter()
        try:
            predictions = await asyncio.get_running_loop().run_in_executor(self.reading, self.read, jobs)
        except Exception as error:  # the model failed: every request of the batch gets a 500 naming the error
            logger.exception("Reading a batch of %d requests failed.", len(jobs))
            for job in jobs:
                if not job.future.done():
                    job.future.set_exception(error)
            return
        finally:
            self.free.release()
        for job in jobs:
            if not job.future.done():  # a client that hung up cancelled its future
                job.future.set_result((predictions, started, time.perf_counter()))

    def read(self, jobs):
        """`{row: prediction}` of every document of `jobs`, read as `predict` reads a window of rows."""
        reader = self.reader_for(jobs[0].reading)
        documents = [document for job in jobs for document in job.documents]
        self.metrics.batch_read(len(documents), sum(job.ids for job in jobs))
        with torch.inference_mode():
            return {row: prediction for batch in reader.batches(documents) for row, prediction in reader.predict(batch)}


__all__ = ["Batcher", "Overloaded", "Reading", "Timing", "Unavailable", "ids_read"]
