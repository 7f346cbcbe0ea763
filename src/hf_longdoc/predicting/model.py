"""The model side of `predict`: the device it runs on (`choose_device`), the saved model with the runtime settings it
may be given (`runtime_overrides`, `load_model`), and the `Reader`, which tokenizes documents, groups them by length
into batches and turns batches into predictions (`hf-longdoc serve` reads with it too)."""

import copy
import logging

import torch

from ..modeling.registry import family_of_model_type
from ..pipelines import has_visible_text
from ..reading import chosen_classes, chunk_plan, is_multi_label, saved_reading_length, scores_from_logits
from ..saved_models import load_saved_model, load_saved_tokenizer
from ..threads import per_thread

logger = logging.getLogger(__name__)
MODEL_ARGUMENT = "`model_dir` (MODEL_DIR)"
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


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
        part = ("start" if self.settings.truncation_side == "right" else "end") if cut else "all"
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
            prediction["cut"] = document["cut"] and self.truncates
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
        from ..explaining import explain

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


__all__ = ["DTYPES", "MODEL_ARGUMENT", "Reader", "choose_device", "load_model", "no_text_reason", "runtime_overrides"]
