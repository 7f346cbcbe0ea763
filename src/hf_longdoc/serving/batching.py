"""One small queue that batches documents across clients: what arrives while the model reads waits, and is then read
together, grouped by length, up to `max_batch_tokens` input ids.

A request's documents are tokenized (off the event loop) as `predict` tokenizes them, `Reader.documents`; the
worker takes queued requests in arrival order while their ids fit the budget (a request alone may exceed it), and reads
them with `Reader.batches` and `Reader.predict`, several batches at once on the CPU, each on one thread, as `predict`
reads them. Requests that ask for evidence (`explain`) are read with a reader that explains, never in a batch with
others. There is no wait for more requests: the worker reads whatever is queued as soon as it is free, so a lone
request is read at once and a busy server batches more.
"""

import asyncio
import itertools
import logging
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import torch

from ..threads import one_thread_each

logger = logging.getLogger(__name__)


class Overloaded(Exception):
    """The queue holds `max_concurrent_requests` requests already (429)."""


@dataclass(eq=False)
class Job:
    """One request's documents, read together with others of the same `explain`."""

    documents: list
    explain: int | None
    future: asyncio.Future
    ids: int = field(init=False)

    def __post_init__(self):
        self.ids = sum(len(chunk) for document in self.documents for chunk in document["chunks"])


class Batcher:
    """Queues requests and reads them in batches across clients (see the module docstring). `reader_for(explain)`
    gives the `predicting.Reader` for an `explain` (None: none); `metrics` records the queue and the batches."""

    def __init__(self, reader_for, max_batch_tokens, max_requests, workers, metrics):
        self.reader_for, self.max_batch_tokens, self.max_requests = reader_for, max_batch_tokens, max_requests
        self.workers, self.metrics = workers, metrics
        self.waiting = deque()
        self.in_flight = 0  # requests accepted and not yet answered
        self.ready = asyncio.Event()
        self.rows = itertools.count()
        self.tokenizing = ThreadPoolExecutor(max_workers=1, thread_name_prefix="tokenize")
        self.reading = ThreadPoolExecutor(max_workers=1, thread_name_prefix="read")
        self.batches = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="batch")
        self.task = None

    def start(self):
        self.task = asyncio.get_running_loop().create_task(self.run())

    async def stop(self):
        """Cancel the worker (after the server has answered every request in flight) and free its threads."""
        if self.task is not None:
            self.task.cancel()
            try:
                await self.task
            except asyncio.CancelledError:
                pass
        for pool in (self.tokenizing, self.reading, self.batches):
            pool.shutdown(wait=True)

    async def submit(self, texts, explain=None):
        """The predictions of `texts` (`Reader.predict`'s, in order) and their prepared documents; `Overloaded`
        when the queue is full."""
        if self.in_flight >= self.max_requests:
            raise Overloaded(f"{self.in_flight} requests are queued or being read, the most this server takes "
                             "(--max-concurrent-requests); retry shortly.")
        self.in_flight += 1
        self.metrics.queue_depth.set(self.in_flight)
        try:
            loop = asyncio.get_running_loop()
            reader = self.reader_for(explain)
            start = next(self.rows)
            for _ in range(len(texts) - 1):
                next(self.rows)
            documents = await loop.run_in_executor(self.tokenizing, reader.documents, start, texts)
            job = Job(documents, explain, loop.create_future())
            self.waiting.append(job)
            self.ready.set()
            predictions = await job.future
            return [predictions[document["row"]] for document in documents], documents
        finally:
            self.in_flight -= 1
            self.metrics.queue_depth.set(self.in_flight)

    def take(self):
        """The next jobs to read together: the oldest, and the later ones of the same `explain` while their ids fit
        `max_batch_tokens`."""
        first = self.waiting[0]
        chosen, ids = [], 0
        for job in self.waiting:
            if job.explain != first.explain:
                continue
            if chosen and ids + job.ids > self.max_batch_tokens:
                break
            chosen.append(job)
            ids += job.ids
        for job in chosen:
            self.waiting.remove(job)
        return chosen

    async def run(self):
        loop = asyncio.get_running_loop()
        while True:
            await self.ready.wait()
            if not self.waiting:
                self.ready.clear()
                continue
            jobs = self.take()
            try:
                predictions = await loop.run_in_executor(self.reading, self.read, jobs)
            except Exception as error:  # the model failed: every request of the batch gets a 500 naming the error
                logger.exception("Reading a batch of %d requests failed.", len(jobs))
                for job in jobs:
                    if not job.future.done():
                        job.future.set_exception(error)
                continue
            for job in jobs:
                if not job.future.done():  # a client that hung up cancelled its future
                    job.future.set_result(predictions)

    def read(self, jobs):
        """`{row: prediction}` of every document of `jobs`, read as `predict` reads a window of rows."""
        reader = self.reader_for(jobs[0].explain)
        documents = [document for job in jobs for document in job.documents]
        batches = reader.batches(documents)
        self.metrics.batch_documents.observe(len(documents))
        self.metrics.input_ids.inc(sum(job.ids for job in jobs))

        def predict(batch):
            with torch.inference_mode():
                return reader.predict(batch)

        with one_thread_each(self.workers):
            results = list(self.batches.map(predict, batches))
        return {row: prediction for rows in results for row, prediction in rows}


__all__ = ["Batcher", "Overloaded"]
