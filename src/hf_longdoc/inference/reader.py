"""The one way to open a saved model for reading: `SavedModel` checks a folder and the reading settings before anything
loads (its config, the runtime settings it may be given, the device), and `load_reader` (or `SavedModel.reader`)
loads it into a `Reader`, which tokenizes documents, groups them by length into batches and turns batches into
predictions. `predict`, `hf-longdoc serve` and `evaluate` all open models here."""

import copy
import logging
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace

import torch

from ..modeling.registry import family_of_model_type
from ..saving.saved_models import load_saved_model, load_saved_tokenizer, saved_config
from ..utils.threads import per_thread, reading_workers
from .explaining import explain_refusal
from .reading import ReadingRules, has_visible_text
from .settings import DTYPE_NAMES

logger = logging.getLogger(__name__)
MODEL_ARGUMENT = "`model_dir` (MODEL_DIR)"
DTYPES = dict(zip(DTYPE_NAMES, (torch.float32, torch.bfloat16, torch.float16)))


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


def runtime_overrides(saved, overrides, family):
    """`overrides` (`config_overrides`, --config) checked against the saved config (`saved`, a dict) of `family` (None:
    a Transformers checkpoint, nothing of ours to set): only its `runtime_settings`, with values its config class
    accepts; a ValueError or TypeError names the flag."""
    if not overrides:
        return {}
    if not isinstance(overrides, dict):
        raise TypeError(f"`config_overrides` (--config) must be a dict of config settings, got "
                        f"{type(overrides).__name__}.")
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


class SavedModel:
    """A saved model folder checked for reading with `settings` (a `ReadSettings`) before anything loads: its saved
    config (`config`, a dict; a folder of no model type we know is refused), the runtime settings it may be given,
    the device (under a launcher, `shared`: this process's) and its family (None: a Transformers checkpoint)."""

    def __init__(self, model_dir, settings, shared=None):
        if not isinstance(model_dir, (str, os.PathLike)):
            raise ValueError(f"`model_dir` must be a saved model folder, got {type(model_dir).__name__}.")
        self.model_dir, self.settings = model_dir, settings
        self.config = saved_config(model_dir, MODEL_ARGUMENT)
        self.family = family_of_model_type(self.config.get("model_type"))
        self.overrides = runtime_overrides(self.config, settings.config_overrides, self.family)
        self.device = choose_device(settings.device, settings.dtype, shared, settings.backend)

    @property
    def labels(self):
        """The class names in label order, from the saved config (before the model loads)."""
        return saved_labels(self.config)

    def load(self):
        """The sequence classifier in eval mode on the device, and its tokenizer."""
        return load_model(self.model_dir, self.device, self.settings.dtype, self.overrides)

    def reader(self, runner=None, log=True):
        """A ready `Reader`: the model loaded, its threshold and reading length decided, its `explain` checked
        (a ValueError naming the reason when the settings ask for what the model cannot give); `runner` reads the
        batches instead of the model (an exported graph's `GraphRunner`)."""
        model, tokenizer = self.load()
        rules = ReadingRules(model.config, tokenizer, where=repr(os.fspath(self.model_dir)), log=log)
        reader = Reader(model, tokenizer, self.settings, rules, runner, self.workers)
        if self.settings.explain is not None and reader.explain_refusal is not None:
            raise ValueError(f"`explain` (--explain): {reader.explain_refusal}")
        return reader

    @property
    def workers(self):
        """Batches read at once (`threads.reading_workers`): a family says whether its forward may run in threads."""
        return reading_workers(self.device, self.family is None or self.family.concurrent_inference)


def saved_labels(config):
    """The class names in label order of a saved config (a dict, as `saved_config` reads it)."""
    id2label = config.get("id2label") or {}
    return [str(label) for _, label in sorted((int(index), label) for index, label in id2label.items())]


def load_reader(model_dir, settings, shared=None, log=True):
    """The `Reader` of the model saved in `model_dir`, reading as `settings` (a `ReadSettings`) say."""
    return SavedModel(model_dir, settings, shared).reader(log=log)


class Reader:
    """Tokenizes windows of documents, groups them by length into batches, and turns batches into predictions."""

    def __init__(self, model, tokenizer, settings, rules, runner=None, workers=1):
        """`rules`: the model's `ReadingRules` (labels, threshold, reading length); `runner`: what reads a padded
        batch instead of the model (an exported graph); `workers`: batches read at once, each thread with its own
        tokenizer."""
        self.model, self.settings, self.rules = model, settings, rules
        self.runner, self.workers = runner, workers
        self.tokenizers = per_thread(lambda: copy.deepcopy(tokenizer))
        self.labels, self.multi_label = rules.labels, rules.multi_label
        self.threshold, self.length = rules.threshold, rules.length
        self.plan = self._chunk_plan()
        self.token_types = "token_type_ids" in tokenizer.model_input_names

    def variant(self, **changes):
        """This reader with `changes` to its settings (a server's request reads `explain`, or a document's end),
        sharing its model, tokenizer and rules."""
        reader = copy.copy(self)
        reader.settings = replace(self.settings, **changes)
        reader.plan = reader._chunk_plan()
        return reader

    def _chunk_plan(self):
        """The long-document pipeline's chunk plan for these settings: text ids per chunk and the step between chunk
        starts."""
        return self.rules.plan(stride=self.settings.stride if self.settings.long == "chunks" else 0)

    @property
    def explain_refusal(self):
        """Why these settings cannot give `explain` (None when they can): the family's own refusal, or reading in
        chunks."""
        if (refusal := explain_refusal(self.model)) is not None:
            return refusal
        if self.settings.long == "chunks":
            return ("documents are read in chunks (--long chunks), which cannot be weighed against each other; read "
                    "them with --long truncate to explain")
        return None

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
                read = self.plan.kept(tokens, self.settings.truncation_side) if self.truncates else tokens
                document["text_ids"], document["text_ids_read"] = self._text_ids(tokens), self._text_ids(read)
        return documents + empty

    def _text_ids(self, ids):
        """How many of `ids` are the document's text: a tokenizer that lays a document out (the segment LM's sentence
        packing) fills with [PAD] ids, which hold no text."""
        pad = self.tokenizer.pad_token_id
        return len(ids) - (ids.count(pad) if pad is not None else 0)

    @property
    def truncates(self):
        """Whether a document longer than the model reads is cut (`long="truncate"`), not read in chunks."""
        return self.settings.long == "truncate"

    def coverage(self, document):
        """How much of a prepared document (`documents`'s) the model read: its text's ids (special tokens and a
        layout's [PAD] fill excluded), how many of them were read, whether it was cut, which part was read (`all`, or
        a cut document's `start` or `end`), and the chunks it was read in (1 unless `long="chunks"`)."""
        cut = document["cut"] and self.truncates
        part = "all"
        if cut and self.settings.truncation_side == "left":
            part = "end"
        elif cut:  # a tokenizer that keeps a cut document's end too (the head + tail window's) reads both ends
            part = "start and end" if self.plan.kept_positions is not None else "start"
        return {"document_ids": document["text_ids"], "ids_read": document["text_ids_read"], "cut": cut,
                "part_read": part, "chunks": len(document["chunks"])}

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
        `long="truncate"`: the document cut at the reading length, as `truncation=True` cuts it, on the settings'
        `truncation_side`)."""
        if self.truncates:
            return self.plan.truncated(tokens, self.settings.truncation_side)
        return self.plan.chunks(tokens)

    def read_batches(self, batches, read=None):
        """`(batch, rows)` for each of `batches`, in order: `self.workers` of them read at once, each on one CPU
        thread (`threads.reading_workers`), under `torch.inference_mode`. `read(number, batch)` replaces
        `predict(batch)` where a caller keeps what it read (`predict`'s shards)."""
        from ..utils.threads import one_thread_each

        def read_one(number, batch):
            with torch.inference_mode():  # per thread
                return read(number, batch) if read is not None else self.predict(batch)

        with ThreadPoolExecutor(max_workers=self.workers) as pool, one_thread_each(self.workers):
            yield from zip(batches, pool.map(read_one, range(len(batches)), batches))

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
        scores = self.rules.scores(logits).tolist()
        results = []
        for number, (document, row_scores) in enumerate(zip(batch, scores)):
            prediction = self._prediction(row_scores)
            if self.settings.raw_scores:  # the logits too, in label order (a server's `raw_scores`)
                prediction["logits"] = logits[number].float().tolist()
            prediction["cut"] = document["cut"] and self.truncates
            if self.settings.long == "chunks":
                prediction["chunks"] = len(document["chunks"])
            if self.settings.explain is not None:
                prediction["evidence"] = evidence[number]
            results.append([document["row"], prediction])
        return results

    @property
    def one_document_a_forward(self):
        """Whether each document is read in a forward pass of its own (its chunks together): on the CPU, where
        batching long documents saves nothing (docs/results.md, "Serving") and a document's numbers then depend on it
        alone, so `predict` at any `batch_size` and the server, which batches across clients, give the same bytes. On a
        GPU, batches are read whole."""
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
        return self.rules.prediction(scores, self.settings.top_k)


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


__all__ = ["DTYPES", "MODEL_ARGUMENT", "Reader", "SavedModel", "choose_device", "load_model", "load_reader",
           "no_text_reason", "runtime_overrides", "saved_labels"]
