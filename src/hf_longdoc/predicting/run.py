"""Classify a corpus with a saved model: `hf-longdoc predict` and `hf_longdoc.predict(...)`.

Rows in, rows out, in input order: each input row gets its id, `label`, `score`, `scores` (every class's probability,
or the `top_k` best), `error` (why a row has no label: its text is missing or blank), with `--long chunks` the number
of `chunks` read, and with `--explain K` the `evidence` passages. The output's format follows its extension (JSONL,
CSV with one `score_<label>` column per class, Parquet).

How the work is done, and why:
- **Windows.** The rows are cut into windows of `WINDOW_BATCHES` batches. Inside a window the documents are sorted
  by token count before they are batched (padding a 200-token document to 8,000 wastes 40x), and the window is
  tokenized in a background thread while the model reads the previous one. Only one window's ids are held: memory is
  bounded by the window, not the corpus.
- **Shards and resuming.** Every finished batch is written as a shard (JSON lines of `[row, prediction]`) into
  `OUT.partial/`, next to a fingerprint of the model's files, the input and the settings that change rows; a window's
  `.done` file records that all its batches are there. A rerun with the same fingerprint skips what is done; another
  fingerprint is refused, naming what differs. Batches are the same in every run, so the final file is the same
  bytes as an uninterrupted run's. The batch size may change between runs (a smaller one after running out of
  memory): the windows keep the rows they had when the run started, finished ones are kept, and the rest are read
  at the new size (logged: padding with other documents can move a score in its last digits).
- **Several processes** (torchrun, accelerate launch): the windows are split with Accelerate's
  `split_between_processes`; each process writes its own shards; after a barrier the main process merges them in
  input order. Windows are cut the same way for any number of processes, so the output equals one process's.
- **Threads.** On the CPU the batches of a window are read several at once, each on one intra-op thread
  (`threads.reading_workers`; as many as the process has threads): an operation split over every core waits for the
  slowest, and on a shared machine one core is always slow. `--backend onnxruntime` runs the exported graph in the
  same way (`onnx_runtime.GraphRunner`).
- **The final file** is written under a temporary name inside `OUT.partial/` and moved to OUT with `os.replace`
  (one step on one file system): nothing stands at OUT until every row is written.

This module holds `predict` and the run over the windows; the model is opened by `inference.reader.SavedModel`.
"""

import contextlib
import functools
import hashlib
import json
import logging
import os
import shutil
import tempfile
from concurrent.futures import ThreadPoolExecutor

import datasets
import torch

from ..data.errors import DatasetError
from ..inference.reader import SavedModel
from ..saving.saved_models import model_digest
from ..utils import distributed
from .inputs import load_documents, prepare_columns, refuse_output_over_inputs
from .resuming import done_path, open_partial, output_lock, run_fingerprint, shard_path, summary, write_atomically
from .settings import PredictSettings
from .writing import merged_rows, output_features, output_paths, write_output

logger = logging.getLogger(__name__)


def predict(model_dir, dataset, output=None, settings=None, **keywords):
    """Classify every row of `dataset` with the model saved in `model_dir`; returns the rows as a `datasets.Dataset`
    (on the main process; the other processes of a launcher get None) and, with `output`, writes them there.

    Args:
        model_dir: a folder saved by `hf-longdoc train` or `save_pretrained` (a sequence classifier and tokenizer).
        dataset: what `train` reads (a .csv/.jsonl/.parquet file or a Hub id), a folder of `.txt` files (one
            document each, id: the path relative to the folder), or a `datasets.Dataset`.
        output: a `.jsonl`, `.csv` or `.parquet` file, written only when complete; `OUT.partial/` holds the work in
            progress, and the same call continues it after an interruption. None: nothing is written.
        settings: a `PredictSettings` (None: the defaults); keyword arguments set its fields instead, or change
            them (`predict(model_dir, "docs.jsonl", "labels.jsonl", batch_size=4, long="chunks")`).
    """
    settings = PredictSettings.of(settings, **keywords)
    if settings.engine != "local":
        raise ValueError(f"`engine` {settings.engine!r}: this is the local run; `hf_longdoc.predict` (and `hf-longdoc "
                         "predict --engine`) runs the others.")
    shared = distributed.state()
    if output is None and shared is not None:
        raise ValueError("`output` (--output) is needed when several processes predict: they meet in its "
                         ".partial folder.")
    output, partial = output_paths(output, settings.overwrite) if output is not None else (None, None)
    refuse_output_over_inputs(output, dataset)
    with output_lock(output):  # one run at a time writes `output` (and its .partial folder)
        saved = SavedModel(model_dir, settings, shared)  # a model folder we can read, before the data is read
        settings.note_ignored()
        digest = model_digest(model_dir)
        if settings.backend != "torch":  # the graph checked against the model before the documents are read
            from ..inference.onnx_runtime import plan_graph

            plan_graph(model_dir, settings.backend, settings.graph_dir, digest, settings.overwrite)
        with shared.main_process_first() if shared is not None else contextlib.nullcontext():
            documents, input_digest = load_documents(dataset)
        if len(documents) == 0:
            raise DatasetError(f"`dataset` (--dataset) {dataset!r} has no rows to classify.")
        documents, text_column, id_column, keep = prepare_columns(documents, settings, saved.labels)
        runner, graph = None, None
        if settings.backend != "torch":  # the graph, exported once by the main process when it is missing
            from ..inference.onnx_runtime import GraphRunner, graph_for

            with shared.main_process_first() if shared is not None else contextlib.nullcontext():
                graph = graph_for(model_dir, settings.backend, settings.graph_dir, digest, settings.overwrite)
            runner = GraphRunner(graph, threads=1 if saved.workers > 1 else torch.get_num_threads())
        reader = saved.reader(runner)
        threshold = reader.threshold
        fingerprint = run_fingerprint(settings, digest, input_digest, id_column, saved.device.type, threshold, graph)
        scratch, window_rows = None, settings.window_rows
        if partial is None:
            partial = scratch = tempfile.mkdtemp(prefix="hf-longdoc-predict-")
        else:
            window_rows = open_partial(partial, fingerprint, settings.overwrite, shared)
        try:
            windows = list(range(0, len(documents), window_rows))
            mine = windows
            if shared is not None:
                with shared.split_between_processes(windows) as share:
                    mine = list(share)
            run_windows(reader, documents, text_column, mine, window_rows, partial, shared)
            distributed.wait_for_everyone()
            result = None
            if shared is None or shared.is_main_process:
                result = _finish(documents, id_column, keep, reader, partial, output, fingerprint, windows, window_rows)
            distributed.wait_for_everyone()
            if output is not None and (shared is None or shared.is_main_process):
                shutil.rmtree(partial)
            return result
        finally:
            if scratch is not None:
                shutil.rmtree(scratch, ignore_errors=True)


def run_windows(reader, documents, text_column, windows, window_rows, partial, shared):
    """Predict the rows of `windows` (their first rows, `window_rows` apart) into shards, skipping finished windows
    and batches."""
    texts = documents.select_columns([text_column])
    size = reader.settings.batch_size
    end_of = {start: min(start + window_rows, len(documents)) for start in windows}
    todo = [start for start in windows if not os.path.exists(done_path(partial, start))]
    done_rows = sum(end_of[start] - start for start in windows if start not in todo)
    from tqdm.auto import tqdm

    progress = tqdm(total=sum(end_of[start] - start for start in windows), initial=done_rows, unit="doc",
                    desc="predict", disable=shared is not None and not shared.is_main_process, smoothing=0.1)

    def prepare(start):
        return reader.prepare(start, texts[start: end_of[start]][text_column])

    def read(start, number, batch):
        path = shard_path(partial, start, size, number)
        if os.path.exists(path):  # written before an interruption
            with open(path, encoding="utf-8") as f:
                return [json.loads(line) for line in f]
        rows = reader.predict(batch)
        write_atomically(path, "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows))
        return rows

    # the next window is tokenized in a thread while the model reads this one (fast tokenizers release the GIL), and
    # on the CPU `reader.workers` batches are read at once, each on one thread (`Reader.read_batches`)
    with ThreadPoolExecutor(max_workers=1) as pool:
        upcoming = pool.submit(prepare, todo[0]) if todo else None
        for position, start in enumerate(todo):
            batches = upcoming.result()
            upcoming = pool.submit(prepare, todo[position + 1]) if position + 1 < len(todo) else None
            stats = {"rows": end_of[start] - start, "errors": 0, "cut": 0}
            for batch, rows in reader.read_batches(batches, functools.partial(read, start)):
                stats["errors"] += sum(1 for _, prediction in rows if "error" in prediction)
                stats["cut"] += sum(1 for _, prediction in rows if prediction.get("cut"))
                progress.update(len(batch))
            write_atomically(done_path(partial, start),
                             json.dumps({**stats, "batches": len(batches), "batch_size": size}))
    progress.close()


def _finish(documents, id_column, keep, reader, partial, output, fingerprint, windows, window_rows):
    """Merge the shards into the returned Dataset and the output file; log the counts."""
    features = output_features(documents, id_column, keep, reader)
    totals, batch_sizes = summary(partial, windows)
    # the rows are a function of the fingerprint, the windows and the batch sizes they were read at, so these name
    # them in `datasets`' cache
    named = {**fingerprint, "window_rows": window_rows, "batch_size": batch_sizes}
    key = hashlib.sha256(json.dumps(named, sort_keys=True).encode()).hexdigest()[:32]
    result = datasets.Dataset.from_generator(
        merged_rows, features=features, fingerprint=key,
        gen_kwargs={"documents": documents, "id_column": id_column, "keep": tuple(keep), "features": features,
                    "partial": partial, "window_rows": window_rows})
    labelled = totals["rows"] - totals["errors"]
    logger.info("Classified %d of %d documents; %d have no text (their row has `label` null and the reason in "
                "`error`).", labelled, totals["rows"], totals["errors"])
    if totals["cut"]:
        logger.warning("%d documents are longer than the %s ids the model reads and were cut there; pass --long "
                       "chunks to read all of each.", totals["cut"], reader.length)
    if output is not None:
        scratch = os.path.join(partial, "result" + os.path.splitext(output)[1])
        write_output(result, scratch, reader.labels, ranked=reader.settings.top_k is not None)
        os.replace(scratch, output)
        logger.info("Wrote %d rows to %s.", len(result), output)
    return result


__all__ = ["PredictSettings", "predict"]

