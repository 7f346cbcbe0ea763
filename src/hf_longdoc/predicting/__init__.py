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

This module holds the settings (`PredictSettings`), `predict` and the run over the windows; the parts that read on
their own are modules beside it: `inputs` (the rows and columns read), `model` (the device, the saved model and the
`Reader`), `resuming` (the `.partial` folder and its fingerprint) and `writing` (the output's columns and file).
"""

import contextlib
import hashlib
import json
import logging
import os
import shutil
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, fields

import datasets
import torch

from .. import distributed
from ..data.errors import DatasetError
from ..export import PRECISIONS
from ..numbers import NON_NEGATIVE_INTEGER, POSITIVE_INTEGER
from ..onnx_runtime import BACKENDS
from ..pipelines import family_of
from ..reading import decision_threshold, is_multi_label
from ..run_settings import settings_of
from ..saved_models import model_digest, saved_config
from ..threads import one_thread_each, reading_workers
from .inputs import load_documents, refuse_output_over_inputs, resolve_columns
from .model import DTYPES, MODEL_ARGUMENT, Reader, choose_device, load_model, runtime_overrides
from .model import no_text_reason as no_text_reason  # re-exported: `hf_longdoc.serving` imports it from here
from .resuming import done_path, open_partial, output_lock, run_fingerprint, shard_path, summary, write_atomically
from .writing import merged_rows, output_features, output_paths, reserved_columns, write_output

logger = logging.getLogger(__name__)
LONG = ("truncate", "chunks")
TRUNCATION_SIDES = ("right", "left")
AGGREGATIONS = ("mean", "max")
WINDOW_BATCHES = 32  # batches sorted by length together: larger groups pad less, smaller ones resume finer


@dataclass(frozen=True)
class PredictSettings:
    """How `predict` reads a corpus: what `predict`'s keyword arguments (and `hf-longdoc predict`'s flags) set, with
    their defaults written here once, and checked once before any data is read. The settings that change the rows are
    part of the run's fingerprint (`row_settings`); the others may change between a run and its continuation.

    Args:
        text_column: the column with the documents, or several comma-separated (`title,text`), joined as `train`
            joins them.
        id_column: the column naming the rows (unique values); None: the input's `id` column, else row numbers.
        keep_columns: input columns copied to the output (a list, or comma-separated names; None: none).
        batch_size: documents (with `long="chunks"`: chunks) per forward pass.
        device: a torch device (`cpu`, `cuda`, `cuda:1`); None: this process's GPU if there is one, else the CPU.
        dtype: `float32`, `bfloat16` or `float16` (a GPU's); None: float32.
        long: `truncate` cuts a document at what the model reads (the count is logged); `chunks` reads all of it
            as the long-document pipeline does, in chunks whose logits are aggregated.
        truncation_side: with `long="truncate"`: `right` reads a cut document's start, `left` its end (the
            tokenizer's `truncation_side`; a TEI request's `truncation_direction`).
        stride, aggregation: with `long="chunks"`: ids consecutive chunks share; `mean` or `max` of their logits.
        top_k: keep the K best classes in `scores` (None: every class).
        explain: with K, the K passages that weighed most in each decision, in an `evidence` column (families whose
            weights say so; see `hf_longdoc.explaining`).
        overwrite: replace an existing `output`, and start over instead of continuing an interrupted run of other
            settings; with a graph backend, also replace another model's graphs in `graph_dir`.
        config_overrides: config settings that change how the saved model runs, not what it computes (its family's
            `runtime_settings`, e.g. `{"compile_gates": False}` for the S-LSTM); they do not change the rows, so a
            run may continue with others.
        backend: `torch` runs the model; `onnxruntime` the float32 graph `hf-longdoc export` writes (on the CPU;
            exported once into `graph_dir` when missing or older than this model's weights); `onnxruntime-int8` its
            dynamic int8 quantization (made once the same way). Checked against the model before any data is read;
            see `hf_longdoc.onnx_runtime` for the rule.
        graph_dir: where the graphs are; None: `MODEL_DIR/onnx`, the export's default. Another model's graphs there
            (its export.json names another model folder) are refused, unless `overwrite`.
        raw_scores: each prediction also holds its `logits` (what `hf-longdoc serve` returns raw).
        window_batches: batches per window (None: `WINDOW_BATCHES`).
    """

    text_column: str = "text"
    id_column: str | None = None
    keep_columns: tuple = ()
    batch_size: int = 8
    device: str | None = None
    dtype: str | None = None
    long: str = "truncate"
    truncation_side: str = "right"
    stride: int = 0
    aggregation: str = "mean"
    top_k: int | None = None
    explain: int | None = None
    overwrite: bool = False
    config_overrides: dict | None = None
    backend: str = "torch"
    graph_dir: str | None = None
    raw_scores: bool = False
    window_batches: int | None = field(default=None, repr=False)

    # how a run goes, not what its rows hold: a run may continue with other values (at a smaller batch size after
    # running out of memory; its windows keep their rows, `open_partial`); the fingerprint records the device's type
    RUN_ONLY = ("batch_size", "device", "overwrite", "config_overrides", "graph_dir", "window_batches")

    @classmethod
    def of(cls, settings=None, **changes):
        """`settings` (None: the defaults) with `changes` to its fields (`predict`'s keyword arguments), and a
        TypeError naming any unknown one."""
        return settings_of(cls, settings, changes, "predict()", "`predict(model_dir, dataset, output, batch_size=4)`")

    def __post_init__(self):
        for name in ("text_column", "id_column"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, str) or not value):
                raise TypeError(f"`{name}` (--{name.replace('_', '-')}) must be a column name, got {value!r}.")
        if self.text_column is None:
            raise TypeError("`text_column` (--text-column) must be a column name, got None.")
        keep = self.keep_columns or ()
        if isinstance(keep, str):
            keep = [part.strip() for part in keep.split(",") if part.strip()]
        if not all(isinstance(name, str) and name for name in keep):
            raise TypeError(f"`keep_columns` (--keep-columns) must be column names, got {self.keep_columns!r}.")
        object.__setattr__(self, "keep_columns", tuple(dict.fromkeys(keep)))
        POSITIVE_INTEGER.check(self.batch_size, "batch_size", "batch-size")
        NON_NEGATIVE_INTEGER.check(self.stride, "stride", "stride")
        if self.window_batches is None:
            object.__setattr__(self, "window_batches", WINDOW_BATCHES)
        POSITIVE_INTEGER.check(self.window_batches, "window_batches")
        for name in ("top_k", "explain"):
            if getattr(self, name) is not None:
                POSITIVE_INTEGER.check(getattr(self, name), name, name.replace("_", "-"))
        choices = {"long": LONG, "truncation_side": TRUNCATION_SIDES, "aggregation": AGGREGATIONS,
                   "dtype": (*DTYPES, None), "backend": BACKENDS}
        for name, allowed in choices.items():
            if getattr(self, name) not in allowed:
                shown = ", ".join(choice for choice in allowed if choice is not None)
                raise ValueError(f"`{name}` (--{name}) must be one of {shown}, got {getattr(self, name)!r}.")
        if self.explain is not None and self.long == "chunks":
            raise ValueError("`explain` (--explain) shows what the model weighed in what it reads at once; it cannot "
                             "be combined with `long='chunks'` (--long chunks), which reads several chunks: drop one.")
        if self.backend != "torch":
            self._check_graph_backend()
        if self.long == "chunks" and self.truncation_side != "right":
            logger.warning("`truncation_side` (--truncation-side %s) is ignored: --long chunks reads all of a "
                           "document.", self.truncation_side)
        if self.explain is not None and self.truncation_side != "right":
            raise ValueError("`explain` (--explain) weighs the passages of a document's start; it cannot be combined "
                             "with `truncation_side='left'` (--truncation-side left): drop one.")
        if self.long == "truncate" and self.stride:
            logger.warning("`stride` (--stride %d) is ignored: it applies to --long chunks only.", self.stride)
        if self.long == "truncate" and self.aggregation != "mean":
            logger.warning("`aggregation` (--aggregation %s) is ignored: it applies to --long chunks only.",
                           self.aggregation)
        if not isinstance(self.overwrite, bool):
            raise TypeError(f"`overwrite` (--overwrite) must be True or False, got {self.overwrite!r}.")

    def _check_graph_backend(self):
        """ValueErrors, before any work, for what an exported graph cannot do."""
        from ..export import require_onnxruntime

        require_onnxruntime(f"`backend` (--backend) {self.backend}")
        if self.explain is not None:
            raise ValueError(f"`explain` (--explain) reads the model's attention weights, and the exported graph "
                             f"that --backend {self.backend} runs returns only the logits: drop --explain, or pass "
                             "--backend torch.")
        if self.dtype not in (None, "float32"):
            raise ValueError(f"`dtype` (--dtype) {self.dtype} sets the PyTorch weights' precision; --backend "
                             f"{self.backend} runs the exported graph ({PRECISIONS[self.backend]}): drop --dtype, or "
                             "pass --backend torch.")

    @property
    def window_rows(self):
        return self.batch_size * self.window_batches

    def row_settings(self):
        """`{name: value}` of the settings that change the rows (all but `RUN_ONLY`), for the run's fingerprint; a
        default `truncation_side` is left out, so a run begun before it existed continues."""
        settings = {f.name: getattr(self, f.name) for f in fields(self) if f.name not in self.RUN_ONLY}
        if settings["truncation_side"] == "right":
            del settings["truncation_side"]
        return settings


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
    shared = distributed.state()
    if output is None and shared is not None:
        raise ValueError("`output` (--output) is needed when several processes predict: they meet in its "
                         ".partial folder.")
    output, partial = output_paths(output, settings.overwrite) if output is not None else (None, None)
    refuse_output_over_inputs(output, dataset)
    with output_lock(output):  # one run at a time writes `output` (and its .partial folder)
        if not isinstance(model_dir, (str, os.PathLike)):
            raise ValueError(f"`model_dir` must be a saved model folder, got {type(model_dir).__name__}.")
        saved = saved_config(model_dir, MODEL_ARGUMENT)  # a folder with a model type we know, before the data is read
        overrides = runtime_overrides(saved, settings.config_overrides)
        chosen = choose_device(settings.device, settings.dtype, shared, settings.backend)
        digest = model_digest(model_dir)
        if settings.backend != "torch":  # the graph checked against the model before the documents are read
            from ..onnx_runtime import plan_graph

            plan_graph(model_dir, settings.backend, settings.graph_dir, digest, settings.overwrite)
        with shared.main_process_first() if shared is not None else contextlib.nullcontext():
            documents, input_digest = load_documents(dataset)
        if len(documents) == 0:
            raise DatasetError(f"`dataset` (--dataset) {dataset!r} has no rows to classify.")
        labels = [str(label) for _, label in sorted(((int(k), v) for k, v in (saved.get("id2label") or {}).items()))]
        documents, text_column, id_column, keep = resolve_columns(documents, settings, labels)
        reserved = reserved_columns(labels)
        if renamed := {name: f"input_{name}" for name in keep if name in reserved}:
            logger.warning("Kept input columns with the names of output columns are written under other names, so "
                           "that no name stands twice: %s.",
                           ", ".join(f"{name} -> {new}" for name, new in renamed.items()))
            documents = documents.rename_columns(renamed)
            keep = [renamed.get(name, name) for name in keep]
        model, tokenizer = load_model(model_dir, chosen, settings.dtype, overrides)
        if settings.explain is not None:
            from ..explaining import check_explainable

            check_explainable(model)
        threshold = decision_threshold(model.config, None, is_multi_label(model.config),
                                       where=repr(os.fspath(model_dir)))
        family = family_of(model)  # None: a Transformers checkpoint, whose forward is plain eager code
        workers = reading_workers(chosen, family is None or family.concurrent_inference)
        runner, graph = None, None
        if settings.backend != "torch":  # the graph, exported once by the main process when it is missing
            from ..onnx_runtime import GraphRunner, graph_for

            with shared.main_process_first() if shared is not None else contextlib.nullcontext():
                graph = graph_for(model_dir, settings.backend, settings.graph_dir, digest, settings.overwrite)
            runner = GraphRunner(graph, threads=1 if workers > 1 else torch.get_num_threads())
        reader = Reader(model, tokenizer, settings, threshold, runner, workers)
        fingerprint = run_fingerprint(settings, digest, input_digest, id_column, chosen.type, threshold, graph)
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
        with torch.inference_mode():  # per thread
            rows = reader.predict(batch)
        write_atomically(path, "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows))
        return rows

    # the next window is tokenized in a thread while the model reads this one (fast tokenizers release the GIL), and
    # on the CPU `reader.workers` batches are read at once, each on one thread (`threads.reading_workers`)
    with (ThreadPoolExecutor(max_workers=1) as pool, ThreadPoolExecutor(max_workers=reader.workers) as readers,
          one_thread_each(reader.workers)):
        upcoming = pool.submit(prepare, todo[0]) if todo else None
        for position, start in enumerate(todo):
            batches = upcoming.result()
            upcoming = pool.submit(prepare, todo[position + 1]) if position + 1 < len(todo) else None
            stats = {"rows": end_of[start] - start, "errors": 0, "cut": 0}
            for batch, rows in zip(batches, readers.map(read, [start] * len(batches), range(len(batches)), batches)):
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
        write_output(result, scratch, reader.labels, best_first=reader.settings.top_k is not None)
        os.replace(scratch, output)
        logger.info("Wrote %d rows to %s.", len(result), output)
    return result


__all__ = ["PredictSettings", "predict"]

