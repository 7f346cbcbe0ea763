"""`predict(..., engine="ray" | "spark")` (`hf-longdoc predict --engine`): the rows `--engine local` writes, in the same
order, read by Ray Data's or Spark's workers.

What stays `predict`'s: the checks before any work (the model folder, the output, the columns, the ids), the input
(every kind `predict` reads, through `datasets`), the output's columns and its file, written whole or not at all.
What is the engine's: the workers, each loading the model once (`DocumentClassifier`), and their retries. The
documents go to the engine as Parquet files of the columns it needs (row number, text, id, kept columns) in a
scratch folder beside the output (on Ray a file is a row, read by the worker that classifies it: one Ray Data
operator, no read tasks beside the workers), come back in order (`__row__` checks it), and stream to the output:
memory holds a batch, not the corpus. A run killed halfway starts again (the engine keeps no progress; `--engine
local` does).
"""

import contextlib
import logging
import os
import shutil
import sys
import tempfile
import uuid
from types import SimpleNamespace

import datasets

from ..data.errors import DatasetError
from ..predicting.inputs import load_documents, prepare_columns, refuse_output_over_inputs
from ..predicting.writing import OUTPUT_COLUMNS, output_features, output_paths, write_output
from ..utils import distributed
from .classifier import DocumentClassifier

logger = logging.getLogger(__name__)
ROW = "__row__"  # the input's row number, carried through the engine
ENGINE_ROWS = 16  # rows of an input file, a Ray worker's call: a call of long documents takes seconds, and the calls
# left at the end are the run's imbalance (Ray queues a second call on each worker): on 2 cores and 1,000 long
# documents Ray read 0.87 of `predict`'s documents a second with 64, 0.92 with 16 (docs/results.md)
SPARK_ROWS = 64  # rows of a Spark partition, a job each under `toLocalIterator`: with 16, Spark fell from 0.93 to 0.86


def predict_on_engine(model_dir, dataset, output, settings):
    """`predict` on `settings.engine`; returns the rows as a `datasets.Dataset` and writes them to `output`."""
    if distributed.state() is not None:
        raise ValueError(f"`engine` (--engine) {settings.engine} runs its own workers; under torchrun or accelerate "
                         "launch pass --engine local (the launcher's processes share the rows).")
    require_engine(settings.engine)
    output = output_paths(output, settings.overwrite)[0] if output is not None else None
    refuse_output_over_inputs(output, dataset)
    reading = {name: getattr(settings, name) for name in READING_SETTINGS}
    classifier = DocumentClassifier(model_dir, **reading)  # the model folder and the settings, before the data
    if settings.backend != "torch":  # exported once here, not by each worker
        from ..inference.onnx_runtime import graph_for

        graph_for(model_dir, settings.backend, settings.graph_dir, overwrite=settings.overwrite)
    documents, _ = load_documents(dataset)
    if len(documents) == 0:
        raise DatasetError(f"`dataset` (--dataset) {dataset!r} has no rows to classify.")
    documents, text_column, id_column, keep = prepare_columns(documents, settings, classifier.labels)
    scratch = tempfile.mkdtemp(prefix="hf-longdoc-engine-", dir=os.path.dirname(output) if output else None)
    try:
        inputs = write_inputs(documents, [text_column, id_column, *keep], os.path.join(scratch, "inputs"))
        classifier = DocumentClassifier(model_dir, **{**reading, "text_column": text_column})
        rows = ENGINE_RUNS[settings.engine](inputs, len(documents), model_dir, classifier, settings)
        features = output_features(documents, id_column, keep, reader_facts(classifier, settings))
        result = written_rows(output_rows(rows, id_column, keep, features), features)
        errors = sum(error is not None for error in result["error"])
        logger.info("Classified %d of %d documents on %s; %d have no text (their `error` says why).",
                    len(result) - errors, len(result), settings.engine, errors)
        if output is not None:
            staged = os.path.join(scratch, "result" + os.path.splitext(output)[1])
            write_output(result, staged, classifier.labels, ranked=settings.top_k is not None)
            os.replace(staged, output)
            logger.info("Wrote %d rows to %s.", len(result), output)
        return result
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


READING_SETTINGS = ("text_column", "batch_size", "device", "dtype", "long", "truncation_side", "stride",
                    "aggregation", "config_overrides", "top_k", "explain", "backend", "graph_dir")


INPUT_ROWS = 10_000  # rows of a Parquet file of the engine's input, at most


MAX_INPUT_FILES = 2000  # a file is a read task's unit and one block: small ones balance the workers to the end


def write_inputs(documents, columns, folder):
    """The columns the workers read (`columns`: text, id, kept; None left out) and the row number (`ROW`), as
    Parquet files in input order in `folder`, written a slice at a time: `ENGINE_ROWS` rows each (a worker's call),
    more for a corpus of more than `MAX_INPUT_FILES` of them, at most `INPUT_ROWS`."""
    os.makedirs(folder)
    columns = [name for name in dict.fromkeys(columns) if name is not None]
    rows = min(INPUT_ROWS, max(ENGINE_ROWS, -(-len(documents) // MAX_INPUT_FILES)))
    for number, start in enumerate(range(0, len(documents), rows)):
        part = documents.select(range(start, min(start + rows, len(documents)))).select_columns(columns)
        part = part.add_column(ROW, list(range(start, start + len(part))))
        part.to_parquet(os.path.join(folder, f"part-{number:06d}.parquet"))
    return folder


def written_rows(rows, features):
    """`rows` written as they come into an Arrow file of `features` (in `datasets`' cache: the returned Dataset reads
    it, memory-mapped), so that memory holds a batch, not the output."""
    from datasets.arrow_writer import ArrowWriter

    folder = os.path.join(datasets.config.HF_DATASETS_CACHE, "hf_longdoc_engine")
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, f"{uuid.uuid4().hex}.arrow")
    with ArrowWriter(features=features, path=path) as writer:
        for row in rows:
            writer.write(row)
        writer.finalize()
    return datasets.Dataset.from_file(path)


def reader_facts(classifier, settings):
    """What `output_features` reads of a reader, from the classifier (no model loaded on the driver)."""
    return SimpleNamespace(multi_label=classifier.multi_label, labels=classifier.labels, settings=settings)


def output_rows(rows, id_column, keep, features):
    """`predict`'s output rows from the engine's, checked to come in input order."""
    predicted = [name for name in features if name in OUTPUT_COLUMNS]
    for expected, row in enumerate(rows):
        if row[ROW] != expected:
            raise RuntimeError(f"The engine returned row {row[ROW]} where row {expected} was due; the output would "
                               "not follow the input. Please report this with the engine's version.")
        out = {id_column or "id": row[id_column] if id_column else expected}
        out.update((name, row[name]) for name in keep)
        out.update((name, row[name]) for name in predicted)
        yield out


def require_engine(engine):
    if engine == "ray":
        from .ray_data import require_ray

        require_ray("--engine ray")
    else:
        from .spark import require_spark

        require_spark("--engine spark")


def ray_rows(inputs, size, model_dir, classifier, settings):
    """The classified rows, in order, from Ray Data: the running cluster (`RAY_ADDRESS`), else a local one."""
    import ray

    from .ray_data import map_classifier

    if not ray.is_initialized():
        ray.init(**({"num_cpus": settings.workers} if settings.workers and not os.environ.get("RAY_ADDRESS") else {}),
                 include_dashboard=False, log_to_driver=False, logging_level=logging.WARNING)
    context = ray.data.DataContext.get_current()
    context.execution_options.preserve_order = True  # the output follows the input
    context.enable_progress_bars = False
    # a row a Parquet file of the input, read by the worker that classifies it: one Ray Data operator, no read tasks
    # beside the workers (Ray's parquet reader bundles small files into one block, which then feeds one worker)
    files = ray.data.from_items([{"path": os.path.join(inputs, name)} for name in sorted(os.listdir(inputs))],
                                override_num_blocks=len(os.listdir(inputs)))
    labelled = map_classifier(files, FileClassifier, model_dir, batch_size=1, concurrency=settings.workers,
                              num_gpus=1 if on_gpu(settings) else None, drop=unsent(classifier, settings),
                              **engine_settings(classifier, settings))
    for batch in labelled.iter_batches(batch_format="pyarrow", batch_size=None):
        yield from batch.to_pylist()


class FileClassifier(DocumentClassifier):
    """`DocumentClassifier` on the rows of the Parquet files a batch's `path`s name (the engine's input,
    `write_inputs`), read on the worker; the columns in `drop` (text the output does not keep) stay there."""

    def __init__(self, drop=(), **settings):
        super().__init__(**settings)
        self.drop = list(drop)

    def __call__(self, batch):
        import pyarrow as pa
        import pyarrow.parquet as pq

        rows = pa.concat_tables([pq.read_table(path) for path in batch["path"].to_pylist()])
        return super().__call__(rows).drop_columns(self.drop)


def spark_rows(inputs, size, model_dir, classifier, settings):
    """The classified rows, in order, from Spark: the active session, else `local[workers]` on this machine."""
    from pyspark.sql import SparkSession

    from .spark import classify

    spark = SparkSession.getActiveSession()
    if spark is None:
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # the executors run this Python, with hf_longdoc
        spark = (SparkSession.builder.master(f"local[{settings.workers or '*'}]").appName("hf-longdoc predict")
                 .config("spark.ui.enabled", "false").getOrCreate())
        spark.sparkContext.setLogLevel("ERROR")
    # partitions of consecutive rows, in row order, for the tasks to share (a folder's files come in no set order)
    parts = min(MAX_INPUT_FILES, -(-size // SPARK_ROWS))
    frame = spark.read.parquet(inputs).repartitionByRange(parts, ROW).sortWithinPartitions(ROW)
    values = engine_settings(classifier, settings)
    labelled = classify(frame, model_dir, values.pop("text_column"), batch_size=SPARK_ROWS, **values)
    labelled = labelled.drop(*unsent(classifier, settings))
    with contextlib.closing(iter(labelled.toLocalIterator(prefetchPartitions=True))) as rows:
        for row in rows:
            yield row.asDict(recursive=True)


def unsent(classifier, settings):
    """The text columns the output does not keep: left on the workers, not sent back to this process."""
    return [name for name in classifier.text_columns if name not in (settings.id_column, *settings.keep_columns)]


def on_gpu(settings):
    """Whether the workers read on GPUs (`--device cuda...`): one per GPU, reading batches whole."""
    return settings.device is not None and settings.device.startswith("cuda")


def engine_settings(classifier, settings):
    """The classifier's settings for an engine's helper: its reading settings, the forward batch as
    `reading_batch_size` (the helpers' own `batch_size` counts the rows of a call), one thread a CPU worker."""
    values = {name: getattr(settings, name) for name in READING_SETTINGS if name != "batch_size"}
    values.update(text_column=classifier.settings.text_column, reading_batch_size=settings.batch_size)
    if not on_gpu(settings):
        values["threads"] = 1
    return values


ENGINE_RUNS = {"ray": ray_rows, "spark": spark_rows}

__all__ = ["ENGINE_ROWS", "predict_on_engine"]
