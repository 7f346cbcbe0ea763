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
"""

import contextlib
import copy
import csv
import hashlib
import json
import logging
import os
import shutil
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field

import datasets
import torch
from datasets import Features, List, Value

from . import distributed
from .data.folders import load_text_folder
from .data.inversion import join_parts
from .data.loading import DatasetError, _load_raw
from .export import PRECISIONS
from .modeling.registry import family_of_model_type
from .numbers import NON_NEGATIVE_INTEGER, POSITIVE_INTEGER
from .onnx_runtime import BACKENDS
from .outputs import acquire_or_refuse, file_digest, lock_beside, release_lock, require_writable_folder
from .pipelines import family_of, has_visible_text
from .reading import (
    chosen_classes,
    chunk_plan,
    decision_threshold,
    is_multi_label,
    saved_reading_length,
    scores_from_logits,
)
from .saved_models import load_saved_model, load_saved_tokenizer, model_digest, saved_config
from .threads import one_thread_each, per_thread, reading_workers

logger = logging.getLogger(__name__)
MODEL_ARGUMENT = "`model_dir` (MODEL_DIR)"

FORMATS = (".jsonl", ".csv", ".parquet")
LONG = ("truncate", "chunks")
AGGREGATIONS = ("mean", "max")
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
WINDOW_BATCHES = 32  # batches sorted by length together: larger groups pad less, smaller ones resume finer
OUTPUT_COLUMNS = ("label", "score", "scores", "chunks", "evidence", "error")
FINGERPRINT = "fingerprint.json"


@dataclass(frozen=True)
class PredictSettings:
    """What `predict` does with each row, checked once before any data is read (the arguments of `predict`). The
    fields that change the rows are part of the run's fingerprint."""

    text_column: str = "text"
    id_column: str | None = None
    keep_columns: tuple = ()
    batch_size: int = 8
    dtype: str | None = None
    long: str = "truncate"
    stride: int = 0
    aggregation: str = "mean"
    top_k: int | None = None
    explain: int | None = None
    backend: str = "torch"
    raw_scores: bool = False  # each prediction also holds its `logits` (what `hf-longdoc serve` returns raw)
    window_batches: int | None = field(default=None, repr=False)  # None: WINDOW_BATCHES

    def __post_init__(self):
        for name in ("text_column", "id_column"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, str) or not value):
                raise TypeError(f"`{name}` (--{name.replace('_', '-')}) must be a column name, got {value!r}.")
        if self.text_column is None:
            raise TypeError("`text_column` (--text-column) must be a column name, got None.")
        keep = self.keep_columns
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
        choices = {"long": LONG, "aggregation": AGGREGATIONS, "dtype": (*DTYPES, None), "backend": BACKENDS}
        for name, allowed in choices.items():
            if getattr(self, name) not in allowed:
                shown = ", ".join(choice for choice in allowed if choice is not None)
                raise ValueError(f"`{name}` (--{name}) must be one of {shown}, got {getattr(self, name)!r}.")
        if self.explain is not None and self.long == "chunks":
            raise ValueError("`explain` (--explain) shows what the model weighed in what it reads at once; it cannot "
                             "be combined with `long='chunks'` (--long chunks), which reads several chunks: drop one.")
        if self.backend != "torch":
            self._check_graph_backend()
        if self.long == "truncate" and self.stride:
            logger.warning("`stride` (--stride %d) is ignored: it applies to --long chunks only.", self.stride)
        if self.long == "truncate" and self.aggregation != "mean":
            logger.warning("`aggregation` (--aggregation %s) is ignored: it applies to --long chunks only.",
                           self.aggregation)

    def _check_graph_backend(self):
        """ValueErrors, before any work, for what an exported graph cannot do."""
        from .export import require_onnxruntime

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


# -- checks before any work -------------------------------------------------------------------------------------------
def output_paths(output, overwrite):
    """(OUT, its `.partial` work folder), with a ValueError before any work for an unknown extension, a folder that
    cannot be written, or an existing OUT without `overwrite`."""
    if not isinstance(output, (str, os.PathLike)):
        raise TypeError(f"`output` (--output) must be a file path, got {type(output).__name__}.")
    output = os.path.abspath(os.path.expanduser(os.fspath(output)))
    extension = os.path.splitext(output)[1].lower()
    if extension not in FORMATS:
        raise ValueError(f"`output` (--output) {output!r}: the format follows the extension, which must be one of "
                         f"{', '.join(FORMATS)}; got {extension or 'none'}.")
    if os.path.isdir(output):
        raise ValueError(f"`output` (--output) {output!r} is a folder; pass a file name ending in {extension}.")
    require_writable_folder(os.path.dirname(output), "The folder of `output` (--output)")
    if os.path.exists(output) and not overwrite:
        raise ValueError(f"`output` (--output) {output!r} already exists and is kept; choose another name, or pass "
                         "--overwrite (overwrite=True) to replace it.")
    return output, output + ".partial"


def refuse_output_over_inputs(output, dataset):
    """A ValueError before any work when `output` is the dataset itself or lies in its folder of texts: --overwrite
    replaces an earlier output, never what the run reads."""
    if output is None or not isinstance(dataset, (str, os.PathLike)) or not os.path.exists(dataset):
        return
    source, target = os.path.realpath(os.fspath(dataset)), os.path.realpath(output)
    if target == source or (os.path.isdir(source) and os.path.commonpath([source, target]) == source):
        what = "is" if target == source else "lies in"
        raise ValueError(f"`output` (--output) {output!r} {what} the `dataset` (--dataset) the run reads; write the "
                         "predictions elsewhere (--overwrite replaces an earlier output, never an input).")


@contextlib.contextmanager
def output_lock(output):
    """Hold `.OUT.lock` beside `output` while a run writes it (on the main process, when several predict), so that a
    second run of the same `output` is refused at once instead of writing into the first one's .partial folder."""
    if output is None:
        yield
        return
    lock = lock_beside(output)
    distributed.on_main_then_share(lambda: acquire_or_refuse(
        lock, f"Another hf-longdoc predict is writing {output!r} (it holds {lock.lock_file!r}); wait for it to finish, "
              "or choose another --output."))
    try:
        yield
    finally:
        if lock.is_locked:  # the main process's
            release_lock(lock)


def load_documents(source):
    """The input rows and a digest of the input: a `datasets.Dataset` as given; a folder of `.txt` files (digest:
    its files' names and bytes, the fingerprint `load_text_folder` gave the rows, so the files are hashed once); a
    csv/jsonl/parquet file (digest: its bytes); a Hub dataset (digest: its id and `datasets`' fingerprint), every
    split in order."""
    if isinstance(source, datasets.Dataset):
        if source._indices is not None:  # a split or a selection: rows read through an index table, which `datasets`
            source = source.flatten_indices()  # cannot gather once no column is left (IndexError in `fast_gather`)
        return source, f"dataset:{source._fingerprint}"
    if not isinstance(source, (str, os.PathLike)):
        raise TypeError(f"`dataset` (--dataset) must be a path, a Hub id or a datasets.Dataset, got "
                        f"{type(source).__name__}.")
    source = os.fspath(source)
    path = os.path.expanduser(source)
    if os.path.isdir(path):
        documents = load_text_folder(path)
        return documents, f"folder:{documents._fingerprint}"
    raw = _load_raw(source)
    if len(raw) > 1:
        logger.info("Reading every split of %s, in this order: %s.", source, ", ".join(raw))
    documents = datasets.concatenate_datasets(list(raw.values())) if len(raw) > 1 else next(iter(raw.values()))
    if os.path.isfile(path):
        return documents, f"file:{file_digest(path)}"
    return documents, f"hub:{source}:{documents._fingerprint}"


JOINED_TEXT = "__document__"  # the documents joined from several --text-column columns


def reserved_columns(labels):
    """`{name: what it is}` for the columns the output writes itself: the prediction's, and in a CSV one
    `score_<label>` per class. An input column of one of these names would stand twice in the output (pandas reads
    them as `score_x` and `score_x.1`), so the id column may not have one, and a kept column is renamed `input_<name>`;
    the same names in every format, so that a CSV, a JSONL and a Parquet output have the same columns."""
    reserved = {name: f"the output column {name!r}" for name in OUTPUT_COLUMNS}
    reserved.update((f"score_{label}", f"the output column 'score_{label}' (class {label!r}'s score in a CSV)")
                    for label in labels)
    return reserved


def resolve_columns(documents, settings, labels=()):
    """(documents, text column, id column or None for row numbers, kept columns), with a ValueError naming what is
    missing, clashing or duplicated; `labels` are the model's classes (their CSV score columns are output names).
    `settings.text_column` may name several columns (`title,text`, as `train` reads them): their texts are joined into
    one document per row the way training joined them (`join_parts`)."""
    columns = documents.column_names
    shown = ", ".join(columns)
    names = [name.strip() for name in settings.text_column.split(",") if name.strip()] or [settings.text_column]
    for name in names:
        check_text_column(documents, name, shown)
    id_column = settings.id_column
    if id_column is not None and id_column not in columns:
        raise ValueError(f"`id_column` (--id-column) {id_column!r} is not a column of the input; its columns are "
                         f"{shown}.")
    if id_column is None and "id" in columns:
        id_column = "id"
    missing = [name for name in settings.keep_columns if name not in columns]
    if missing:
        raise ValueError(f"`keep_columns` (--keep-columns) {', '.join(map(repr, missing))}: not a column of the "
                         f"input; its columns are {shown}.")
    keep = [name for name in settings.keep_columns if name != id_column]
    reserved = reserved_columns(labels)
    if (id_column or "id") in reserved:
        name = id_column or "id"
        raise ValueError(f"Input column {name!r}, the id column, has the name of {reserved[name]}; the output would "
                         "hold two columns of that name. Rename it in the input, or pass another --id-column.")
    for name in keep:  # a kept `label` (the gold one, beside the prediction) is written as `input_label`
        if name in reserved and (f"input_{name}" in columns or f"input_{name}" in reserved):
            raise ValueError(f"`keep_columns` (--keep-columns) {name!r} has the name of {reserved[name]}, and "
                             f"'input_{name}', where it would be kept, is a column of the input too; leave one out.")
    if id_column is not None:
        seen = set()
        for row, value in enumerate(documents[id_column]):
            if value is None or (isinstance(value, float) and value != value):
                raise ValueError(f"`id_column` (--id-column) {id_column!r} has no value in row {row} (counting from "
                                 "0); ids must name every row: fill it in, or pass a column with a value in each row"
                                 + (", or --id-column with another one (without it, the input's `id` column is "
                                    "used)" if settings.id_column is None else "") + ".")
            if value in seen:
                message = (f"`id_column` (--id-column) {id_column!r} has duplicate values, e.g. {value!r} (again in "
                           f"row {row}, counting from 0); ids must name one row each: pass a column with unique "
                           "values")
                if settings.id_column is None:
                    message += ", or --id-column with another one (without it, the input's `id` column is used)"
                raise ValueError(message + ".")
            seen.add(value)
    if len(names) == 1:
        return documents, names[0], id_column, keep
    documents = documents.map(lambda row: {JOINED_TEXT: join_parts([row[name] for name in names])},
                              desc="Joining the text columns")
    return documents, JOINED_TEXT, id_column, keep


def check_text_column(documents, name, shown):
    """A ValueError unless `name` is a column of `documents` that holds text."""
    if name not in documents.column_names:
        raise ValueError(f"`text_column` (--text-column) {name!r} is not a column of the input; its columns are "
                         f"{shown}.")
    feature = documents.features[name]
    if isinstance(feature, datasets.Json):  # JSON values of several types: name the first that is not text
        row, value = next(((i, value) for i, value in enumerate(documents[name])
                           if value is not None and not isinstance(value, str)), (None, None))
        raise ValueError(f"`text_column` (--text-column) {name!r} mixes text with other JSON values (row {row}, "
                         f"counting from 0, holds {type(value).__name__} {str(value)[:40]!r}), which `datasets` reads "
                         "as JSON, not text; write every document as a JSON string.")
    text_type = getattr(feature, "dtype", None)
    if text_type not in ("string", "large_string", "null"):
        raise ValueError(f"`text_column` (--text-column) {name!r} holds {text_type or 'lists'}, not text; pass the "
                         f"column with the documents (columns: {shown}).")


def choose_device(device, dtype, shared, backend="torch"):
    """The torch device to run on (under a launcher: this process's), with a ValueError for a device that is not
    there and a dtype it cannot run; an exported graph (`backend`) runs on the CPU."""
    if backend != "torch":
        if device is not None and torch.device(device).type != "cpu":
            raise ValueError(f"`device` (--device) {device!r}: --backend {backend} runs the exported graph on the "
                             "CPU (onnxruntime's CPU provider); drop --device, or pass --backend torch.")
        return torch.device("cpu")
    if device is None:
        chosen = shared.device if shared is not None else torch.device("cuda" if torch.cuda.is_available() else "cpu")
    else:
        try:
            chosen = torch.device(device)
        except (RuntimeError, TypeError):
            raise ValueError(f"`device` (--device) {device!r} is not a torch device; pass cpu, cuda, cuda:1, mps, ..."
                             ) from None
        if chosen.type == "cuda" and not torch.cuda.is_available():
            raise ValueError(f"`device` (--device) {device!r}: no CUDA GPU is available here; pass --device cpu.")
        if chosen.type == "cuda" and chosen.index is None and shared is not None:
            chosen = shared.device  # each process its own GPU
    if dtype == "float16" and chosen.type == "cpu":
        raise ValueError("`dtype` (--dtype) float16 needs a GPU: CPUs compute half precision slowly or not at all; "
                         "pass --dtype bfloat16 or float32 on a CPU.")
    if dtype == "bfloat16" and chosen.type == "cuda" and not torch.cuda.is_bf16_supported():
        raise ValueError(f"`dtype` (--dtype) bfloat16 is not supported by {torch.cuda.get_device_name(chosen)}; "
                         "pass --dtype float16 or float32.")
    return chosen


def runtime_overrides(saved, overrides):
    """`overrides` (`config_overrides`, --config) checked against the saved config (`saved`, a dict): only its
    family's `runtime_settings`, with values its config class accepts; a ValueError or TypeError names the flag."""
    if not overrides:
        return {}
    if not isinstance(overrides, dict):
        raise TypeError(f"`config_overrides` (--config) must be a dict of config settings, got "
                        f"{type(overrides).__name__}.")
    family = family_of_model_type(saved.get("model_type"))  # None: a Transformers checkpoint, nothing of ours to set
    allowed = family.runtime_settings if family is not None else ()
    if unknown := sorted(set(overrides) - set(allowed)):
        raise ValueError(f"`config_overrides` (--config) sets how a saved model runs, which for this "
                         f"{saved.get('model_type')} model is {', '.join(allowed) or 'nothing'}; got "
                         f"{', '.join(unknown)}. A setting that changes the model needs training (`hf-longdoc train "
                         "--config`).")
    try:
        family.config_class(**{**{k: v for k, v in saved.items() if k != "model_type"}, **overrides})
    except (TypeError, ValueError) as error:
        raise type(error)(f"`config_overrides` (--config): {error}") from None
    logger.info("Running the saved model with %s (--config).", ", ".join(f"{k}={v!r}" for k, v in overrides.items()))
    return overrides


def load_model(model_dir, device, dtype, overrides=None):
    """The sequence classifier in `model_dir` in eval mode on `device` (its config with `overrides`), and its
    tokenizer."""
    tokenizer = load_saved_tokenizer(model_dir, MODEL_ARGUMENT)  # an unknown model type or no tokenizer: our message
    try:
        model = load_saved_model(model_dir, MODEL_ARGUMENT, dtype=DTYPES.get(dtype, "auto"), **(overrides or {}))
    except (OSError, KeyError) as error:
        raise ValueError(f"`model_dir` {model_dir!r} cannot be loaded as a sequence classifier with its tokenizer "
                         f"({type(error).__name__}: {error}).") from None
    if dtype is None:
        model = model.float()  # the weights as saved may be half precision; float32 unless --dtype asks otherwise
    return model.to(device).eval(), tokenizer


def open_partial(partial, fingerprint, overwrite, shared):
    """Prepare the `.partial` work folder: continue one with the same fingerprint, refuse another (naming what
    differs) unless `overwrite`, which starts over. Returns the rows per window: the run's own when it continues
    (they do not change with the batch size), else `fingerprint["window_rows"]`."""
    path = os.path.join(partial, FINGERPRINT)
    start_over, recorded = False, None
    if os.path.isdir(partial):
        try:
            with open(path) as f:
                recorded = json.load(f)
        except (OSError, ValueError):
            recorded = None
        differ = _differences(recorded, fingerprint) if recorded is not None else None
        if recorded is None and not overwrite:
            raise ValueError(f"{partial!r} exists but records no run of predict; move it away, or pass --overwrite "
                             "to start over.")
        if differ and not overwrite:
            raise ValueError(f"{partial!r} holds an interrupted run that differs from this one ({'; '.join(differ)}); "
                             "rerun the same command to continue it, or pass --overwrite (overwrite=True) to start "
                             "over.")
        # the same command continues, --overwrite or not (it replaces the finished file); another run starts over
        start_over = recorded is None or bool(differ)
        if not start_over and recorded["batch_size"] != fingerprint["batch_size"]:
            logger.warning("Continuing at --batch-size %d a run that started at %d: its finished windows are kept and "
                           "the rest are read %d at a time (a document padded beside others can get scores that "
                           "differ in their last digits).", fingerprint["batch_size"], recorded["batch_size"],
                           fingerprint["batch_size"])
    distributed.wait_for_everyone()  # every process has compared before the main one changes anything
    if shared is None or shared.is_main_process:
        if start_over:
            logger.warning("Starting over: removing the interrupted run of other settings in %s (--overwrite).",
                           partial)
            shutil.rmtree(partial)
        os.makedirs(partial, exist_ok=True)
        if not os.path.exists(path):
            _write_atomically(path, json.dumps(fingerprint, indent=2, sort_keys=True))
        else:
            logger.info("Continuing the interrupted run in %s.", partial)
    distributed.wait_for_everyone()
    return fingerprint["window_rows"] if start_over or recorded is None else recorded["window_rows"]


def _differences(recorded, given):
    """What differs between two fingerprints, in words."""
    if not isinstance(recorded.get("window_rows"), int) or not isinstance(recorded.get("batch_size"), int):
        return ["layout (the folder was written by an earlier version of hf_longdoc)"]
    differ = []
    if recorded.get("model") != given["model"]:
        files = sorted(name for name in set(recorded.get("model") or {}) | set(given["model"])
                       if (recorded.get("model") or {}).get(name) != given["model"].get(name))
        differ.append(f"model (files that differ: {', '.join(files)})")
    if recorded.get("input") != given["input"]:
        differ.append("input (--dataset: another file, or the file changed since)")
    settings = recorded.get("settings") or {}
    changed = [f"{key} {settings.get(key)!r} there, {value!r} here" for key, value in given["settings"].items()
               if settings.get(key) != value]
    if changed:
        differ.append(f"settings ({'; '.join(changed)})")
    return differ


def _write_atomically(path, text):
    """Write `text` to `path` through a temporary file in the same folder, so a kill leaves the old file or the new
    one, never half of one."""
    handle, scratch = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".tmp-")
    with os.fdopen(handle, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(scratch, path)


# -- reading documents ------------------------------------------------------------------------------------------------
class Reader:
    """Tokenizes windows of documents, groups them by length into batches, and turns batches into predictions."""

    def __init__(self, model, tokenizer, settings, threshold, runner=None, workers=1):
        """`runner`: what reads a padded batch instead of the model (an exported graph, `GraphRunner`); `workers`:
        how many batches are read at once (`threads.reading_workers`), each thread with its own tokenizer."""
        self.model, self.settings, self.threshold = model, settings, threshold
        self.runner, self.workers = runner, workers
        self.tokenizers = per_thread(lambda: copy.deepcopy(tokenizer))
        config = model.config
        self.labels = [config.id2label[index] for index in range(config.num_labels)]
        self.multi_label = is_multi_label(config)
        self.length = saved_reading_length(config, tokenizer)
        # the long-document pipeline's chunk plan: text ids per chunk and the step between chunk starts
        self.plan = chunk_plan(config, tokenizer, stride=settings.stride if settings.long == "chunks" else 0)
        self.token_types = "token_type_ids" in tokenizer.model_input_names

    @property
    def tokenizer(self):
        """This thread's copy of the tokenizer (a fast tokenizer that pads or cuts for two threads at once can fail,
        "Already borrowed")."""
        return self.tokenizers()

    def prepare(self, start, texts):
        """The batches of the window starting at row `start`: lists of documents `{"row", "text", "chunks",
        "tokens", "cut"}`, longest first; documents without text come last, in a batch of their own, with `error`."""
        return self.batches(self.documents(start, texts))

    def documents(self, start, texts):
        """`texts` (rows `start`, `start` + 1, ...) tokenized as the model reads them: documents `{"row", "text",
        "tokens" (ids without special tokens), "chunks" (the id sequences read), "cut"}`, or `{"row", "error"}` for a
        text there is nothing to classify in (`no_text_reason`)."""
        documents, empty = [], []
        for offset, text in enumerate(texts):
            reason = no_text_reason(text)
            if reason:
                empty.append({"row": start + offset, "error": reason})
            else:
                documents.append({"row": start + offset, "text": text})
        for first in range(0, len(documents), self.settings.batch_size):  # tokenized a batch at a time
            group = documents[first: first + self.settings.batch_size]
            texts = [document["text"] for document in group]
            ids = self.tokenizer(texts, add_special_tokens=False, verbose=False)["input_ids"]
            for document, tokens in zip(group, ids):
                document["tokens"] = len(tokens)
                document["chunks"] = self._chunks(tokens)
                document["cut"] = self.plan.is_cut(tokens)
        return documents + empty

    def batches(self, documents):
        """`documents` (`documents`'s, of one window or of several requests) grouped by length into batches of
        `batch_size`, longest first; those without text last, in a batch of their own."""
        empty = [document for document in documents if "error" in document]
        documents = sorted((d for d in documents if "error" not in d), key=lambda d: (-d["tokens"], d["row"]))
        size = self.settings.batch_size
        batches = [documents[first: first + size] for first in range(0, len(documents), size)]
        return batches + ([empty] if empty else [])

    def _chunks(self, tokens):
        """The id sequences the model reads for one document (the long-document pipeline's chunks; one with
        `long="truncate"`: the document cut at the reading length, as `truncation=True` cuts it)."""
        return self.plan.truncated(tokens) if self.settings.long == "truncate" else self.plan.chunks(tokens)

    def predict(self, batch):
        """`[row, prediction]` for each document of `batch`."""
        if "error" in batch[0]:
            return [[d["row"], {"error": d["error"]}] for d in batch]
        logits, evidence = [], []
        for group in ([[document] for document in batch] if self.one_document_a_forward else [batch]):
            group_logits, group_evidence = self._read(group)
            logits.append(group_logits)
            evidence.extend(group_evidence or [])
        logits = torch.cat(logits)
        scores = scores_from_logits(logits, self.model.config).tolist()
        results = []
        for number, (document, row_scores) in enumerate(zip(batch, scores)):
            prediction = self._prediction(row_scores)
            if self.settings.raw_scores:  # the logits too, in label order (a server's `raw_scores`)
                prediction["logits"] = logits[number].float().tolist()
            prediction["cut"] = document["cut"] and self.settings.long == "truncate"
            if self.settings.long == "chunks":
                prediction["chunks"] = len(document["chunks"])
            if self.settings.explain is not None:
                prediction["evidence"] = evidence[number]
            results.append([document["row"], prediction])
        return results

    @property
    def one_document_a_forward(self):
        """Whether each document is read in a forward pass of its own (its chunks together): on the CPU. Batching
        saves nothing there on long documents (the demo's segment LM on 96 real documents: 3.99 and 4.22 documents a
        second at `batch_size` 8, 4.01 and 3.86 at 1; the Contextualizer 95.3 and 85.6 against 95.7 and 83.5), and a
        document's numbers then depend on it alone, not on what it is read with: `predict` at any `batch_size` and
        `hf-longdoc serve`, which batches across clients, give the same bytes. On a GPU, batches are read whole."""
        return self.runner is not None or self.model.device.type == "cpu"

    def _read(self, batch):
        """(logits (documents, labels), the evidence of each document or None) of the documents of `batch`."""
        if self.settings.explain is None:
            return self._logits(batch), None
        from .explaining import explain

        return explain(self.model, self.tokenizer, [d["text"] for d in batch], self.settings.explain, self.length)

    def _logits(self, batch):
        """(documents, labels): each document's chunks read in batches of `batch_size`, their logits aggregated."""
        chunks = [chunk for document in batch for chunk in document["chunks"]]
        size = self.settings.batch_size
        logits = torch.cat([self._forward(chunks[first: first + size]) for first in range(0, len(chunks), size)])
        per_document, first = [], 0
        for document in batch:
            mine = logits[first: first + len(document["chunks"])]  # (chunks, labels)
            first += len(document["chunks"])
            per_document.append(mine.mean(0) if self.settings.aggregation == "mean" else mine.max(0).values)
        return torch.stack(per_document)

    def _forward(self, sequences):
        features = {"input_ids": sequences}
        if self.token_types:
            features["token_type_ids"] = [[0] * len(sequence) for sequence in sequences]
        inputs = self.tokenizer.pad(features, padding=True, return_tensors="pt")
        if self.runner is not None:  # the graph's inputs: ids and mask (token types are all 0, the default)
            return self.runner(inputs["input_ids"], inputs["attention_mask"])
        inputs = {name: tensor.to(self.model.device) for name, tensor in inputs.items()}
        return self.model(**inputs).logits.float()

    def _prediction(self, scores):
        ranked = sorted(range(len(scores)), key=lambda index: -scores[index])
        shown = ranked[: self.settings.top_k] if self.settings.top_k else range(len(scores))
        prediction = {"scores": {self.labels[index]: scores[index] for index in sorted(shown)}}
        chosen = chosen_classes(scores, self.threshold)  # `reading.decide`: the best class, or those at the threshold
        if self.multi_label:
            prediction.update(label=[self.labels[i] for i in chosen], score=[scores[i] for i in chosen])
        else:
            prediction.update(label=self.labels[chosen[0]], score=scores[chosen[0]])
        return prediction


def no_text_reason(text):
    """Why `text` cannot be classified (None when it can)."""
    if text is None:
        return "missing text"
    if not isinstance(text, str):
        return f"the text is a {type(text).__name__}, not a string"
    if not text.strip():
        return "empty text" if not text else "the text is only whitespace"
    if not has_visible_text(text):
        return f"the text has no visible character ({len(text)} invisible or control characters)"
    return None


# -- shards -----------------------------------------------------------------------------------------------------------
def _window_name(start):
    return f"{start:012d}"


def _shard_path(partial, start, batch_size, number):
    """Batch `number` of a window read `batch_size` at a time (a window resumed at another size does not read the
    shards of the first)."""
    return os.path.join(partial, f"{_window_name(start)}-{batch_size}-{number:05d}.jsonl")


def _done_path(partial, start):
    return os.path.join(partial, f"{_window_name(start)}.done")


def run_windows(reader, documents, text_column, windows, window_rows, partial, shared):
    """Predict the rows of `windows` (their first rows, `window_rows` apart) into shards, skipping finished windows
    and batches."""
    texts = documents.select_columns([text_column])
    size = reader.settings.batch_size
    end_of = {start: min(start + window_rows, len(documents)) for start in windows}
    todo = [start for start in windows if not os.path.exists(_done_path(partial, start))]
    done_rows = sum(end_of[start] - start for start in windows if start not in todo)
    from tqdm.auto import tqdm

    progress = tqdm(total=sum(end_of[start] - start for start in windows), initial=done_rows, unit="doc",
                    desc="predict", disable=shared is not None and not shared.is_main_process, smoothing=0.1)

    def prepare(start):
        return reader.prepare(start, texts[start: end_of[start]][text_column])

    def read(start, number, batch):
        path = _shard_path(partial, start, size, number)
        if os.path.exists(path):  # written before an interruption
            with open(path, encoding="utf-8") as f:
                return [json.loads(line) for line in f]
        with torch.inference_mode():  # per thread
            rows = reader.predict(batch)
        _write_atomically(path, "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows))
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
            _write_atomically(_done_path(partial, start),
                              json.dumps({**stats, "batches": len(batches), "batch_size": size}))
    progress.close()


def _window_predictions(partial, start):
    """`{row: prediction}` of one finished window."""
    with open(_done_path(partial, start)) as f:
        done = json.load(f)
    predictions = {}
    for number in range(done["batches"]):
        with open(_shard_path(partial, start, done["batch_size"], number), encoding="utf-8") as f:
            predictions.update((row, prediction) for row, prediction in map(json.loads, f))
    return predictions


# -- the output -------------------------------------------------------------------------------------------------------
def output_features(documents, id_column, keep, reader):
    """The output's columns and types: the id (the input's, or row numbers), the kept columns, the predictions."""
    features = {id_column or "id": documents.features[id_column] if id_column else Value("int64")}
    features.update((name, documents.features[name]) for name in keep)
    if reader.multi_label:
        features.update(label=List(Value("string")), score=List(Value("float64")))
    else:
        features.update(label=Value("string"), score=Value("float64"))
    features["scores"] = {label: Value("float64") for label in reader.labels}
    if reader.settings.long == "chunks":
        features["chunks"] = Value("int64")
    if reader.settings.explain is not None:
        features["evidence"] = List({"text": Value("string"), "start": Value("int64"), "end": Value("int64"),
                                     "weight": Value("float64")})
    features["error"] = Value("string")
    return Features(features)


def merged_rows(documents, id_column, keep, features, partial, window_rows):
    """The output rows in input order, read from the finished windows' shards and the input's id/kept columns."""
    carried = documents.select_columns([id_column, *keep] if id_column else keep)
    predicted = [name for name in features if name in OUTPUT_COLUMNS]
    for start in range(0, len(documents), window_rows):
        stop = min(start + window_rows, len(documents))
        predictions = _window_predictions(partial, start)
        columns = carried[start:stop]
        for row in range(start, stop):
            out = {id_column or "id": columns[id_column][row - start] if id_column else row}
            out.update((name, columns[name][row - start]) for name in keep)
            prediction = predictions[row]
            for name in predicted:
                value = prediction.get(name)
                if name == "scores" and value is not None:
                    value = {label: value.get(label) for label in features["scores"]}  # top_k: the others null
                out[name] = value
            yield out


def _json_default(value):
    return value.isoformat() if hasattr(value, "isoformat") else str(value)


def _cell(value):
    """A CSV cell: empty for null, JSON for lists and dicts."""
    if value is None:
        return ""
    if isinstance(value, (list, dict)):
        return json.dumps(value, ensure_ascii=False, default=_json_default)
    return value


def _csv_cells(row, labels):
    """A row's CSV cells: `scores` as one cell per class (empty when not among the top K)."""
    cells = []
    for name, value in row.items():
        if name == "scores":
            cells += [_cell((value or {}).get(label)) for label in labels]
        else:
            cells.append(_cell(value))
    return cells


def write_output(result, path, labels, best_first=False):
    """Write the rows of `result` to `path` in the format its extension names; JSONL scores `best_first` (with
    `top_k`: the classes in the order of their scores, the pipeline's), else in label order."""
    extension = os.path.splitext(path)[1].lower()
    if extension == ".parquet":
        result.to_parquet(path)
        return
    with open(path, "w", encoding="utf-8", newline="") as f:
        writer = csv.writer(f) if extension == ".csv" else None
        if writer is not None:
            writer.writerow([column for name in result.column_names
                             for column in ([f"score_{label}" for label in labels] if name == "scores" else [name])])
        for columns in result.iter(batch_size=1000):
            for values in zip(*columns.values()):
                row = dict(zip(columns, values))
                if writer is not None:
                    writer.writerow(_csv_cells(row, labels))
                    continue
                if row["scores"] is not None:  # top_k: the K best (the others are null), best first
                    shown = [(label, score) for label, score in row["scores"].items() if score is not None]
                    row["scores"] = dict(sorted(shown, key=lambda item: -item[1]) if best_first else shown)
                f.write(json.dumps(row, ensure_ascii=False, default=_json_default) + "\n")


def _summary(partial, windows):
    """The windows' counts added up, and the batch sizes they were read at."""
    totals = {"rows": 0, "errors": 0, "cut": 0}
    batch_sizes = set()
    for start in windows:
        with open(_done_path(partial, start)) as f:
            stats = json.load(f)
        for key in totals:
            totals[key] += stats[key]
        batch_sizes.add(stats["batch_size"])
    return totals, sorted(batch_sizes)


# -- the function -----------------------------------------------------------------------------------------------------
def predict(model_dir, dataset, output=None, *, text_column="text", id_column=None, keep_columns=None, batch_size=8,
            device=None, dtype=None, long="truncate", stride=0, aggregation="mean", top_k=None, explain=None,
            overwrite=False, config_overrides=None, backend="torch", graph_dir=None):
    """Classify every row of `dataset` with the model saved in `model_dir`; returns the rows as a `datasets.Dataset`
    (on the main process; the other processes of a launcher get None) and, with `output`, writes them there.

    Args:
        model_dir: a folder saved by `hf-longdoc train` or `save_pretrained` (a sequence classifier and tokenizer).
        dataset: what `train` reads (a .csv/.jsonl/.parquet file or a Hub id), a folder of `.txt` files (one
            document each, id: the path relative to the folder), or a `datasets.Dataset`.
        output: a `.jsonl`, `.csv` or `.parquet` file, written only when complete; `OUT.partial/` holds the work in
            progress, and the same call continues it after an interruption. None: nothing is written.
        text_column: the column with the documents, or several comma-separated (`title,text`), joined as `train`
            joins them.
        id_column: the column naming the rows (unique values); None: the input's `id` column, else row numbers.
        keep_columns: input columns copied to the output (a list, or comma-separated names).
        batch_size: documents (with `long="chunks"`: chunks) per forward pass.
        device: a torch device (`cpu`, `cuda`, `cuda:1`); None: this process's GPU if there is one, else the CPU.
        dtype: `float32`, `bfloat16` or `float16` (a GPU's); None: float32.
        long: `truncate` cuts a document at what the model reads (the count is logged); `chunks` reads all of it
            as the long-document pipeline does, in chunks whose logits are aggregated.
        stride, aggregation: with `long="chunks"`: ids consecutive chunks share; `mean` or `max` of their logits.
        top_k: keep the K best classes in `scores` (None: every class).
        explain: with K, the K passages that weighed most in each decision, in an `evidence` column (families whose
            weights say so; see `hf_longdoc.explaining`).
        overwrite: replace an existing `output`, and start over instead of continuing an interrupted run.
        config_overrides: config settings that change how the saved model runs, not what it computes (its family's
            `runtime_settings`, e.g. `{"compile_gates": False}` for the S-LSTM); they do not change the rows, so a
            run may continue with others.
        backend: `torch` runs the model; `onnxruntime` the float32 graph `hf-longdoc export` writes (on the CPU;
            exported once into `graph_dir` when missing or older than the weights); `onnxruntime-int8` its dynamic
            int8 quantization (made once the same way). See `hf_longdoc.onnx_runtime`.
        graph_dir: where the graphs are; None: `MODEL_DIR/onnx`, the export's default.
    """
    settings = PredictSettings(text_column=text_column, id_column=id_column, keep_columns=keep_columns or (),
                               batch_size=batch_size, dtype=dtype, long=long, stride=stride, aggregation=aggregation,
                               top_k=top_k, explain=explain, backend=backend)
    if not isinstance(overwrite, bool):
        raise TypeError(f"`overwrite` (--overwrite) must be True or False, got {overwrite!r}.")
    shared = distributed.state()
    if output is None and shared is not None:
        raise ValueError("`output` (--output) is needed when several processes predict: they meet in its "
                         ".partial folder.")
    output, partial = output_paths(output, overwrite) if output is not None else (None, None)
    refuse_output_over_inputs(output, dataset)
    with output_lock(output):  # one run at a time writes `output` (and its .partial folder)
        if not isinstance(model_dir, (str, os.PathLike)):
            raise ValueError(f"`model_dir` must be a saved model folder, got {type(model_dir).__name__}.")
        saved = saved_config(model_dir, MODEL_ARGUMENT)  # a folder with a model type we know, before the data is read
        overrides = runtime_overrides(saved, config_overrides)
        chosen = choose_device(device, settings.dtype, shared, settings.backend)
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
            from .explaining import check_explainable

            check_explainable(model)
        threshold = decision_threshold(model.config, None, is_multi_label(model.config),
                                       where=repr(os.fspath(model_dir)))
        family = family_of(model)  # None: a Transformers checkpoint, whose forward is plain eager code
        workers = reading_workers(chosen, family is None or family.concurrent_inference)
        digest = model_digest(model_dir)
        runner, graph = None, None
        if settings.backend != "torch":  # the graph, exported once by the main process when it is missing
            from .onnx_runtime import GraphRunner, graph_for

            with shared.main_process_first() if shared is not None else contextlib.nullcontext():
                graph = graph_for(model_dir, settings.backend, graph_dir, digest)
            runner = GraphRunner(graph, threads=1 if workers > 1 else torch.get_num_threads())
        reader = Reader(model, tokenizer, settings, threshold, runner, workers)

        # the batch size and the window's rows are not settings that change rows: a run may continue at another batch
        # size (its windows keep their rows: `open_partial`)
        row_settings = {name: value for name, value in asdict(settings).items()
                        if name not in ("batch_size", "window_batches")}
        fingerprint = {"model": digest, "input": input_digest, "batch_size": settings.batch_size,
                       **({"graph": file_digest(graph)} if graph is not None else {}),
                       "window_rows": settings.window_rows,
                       "settings": {**row_settings, "keep_columns": list(settings.keep_columns),
                                    "id_column": id_column, "device": chosen.type, "threshold": threshold}}
        scratch, window_rows = None, settings.window_rows
        if partial is None:
            partial = scratch = tempfile.mkdtemp(prefix="hf-longdoc-predict-")
        else:
            window_rows = open_partial(partial, fingerprint, overwrite, shared)
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


def _finish(documents, id_column, keep, reader, partial, output, fingerprint, windows, window_rows):
    """Merge the shards into the returned Dataset and the output file; log the counts."""
    features = output_features(documents, id_column, keep, reader)
    totals, batch_sizes = _summary(partial, windows)
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
