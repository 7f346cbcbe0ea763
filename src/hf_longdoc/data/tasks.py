"""Tasks: a labelled dataset (or the built-in task) as splits, tokenized with a count of what truncation cut."""

import logging

import numpy as np

from .loading import load_text_classification_dataset
from .synthetic import make_long_document_task

logger = logging.getLogger(__name__)

BUILTIN_TASK = "builtin"


def load_task(dataset=None, text_column="text", label_column="label", seed=42, evidence="end", task_size=None,
              task_words=None, task_kind="keywords"):
    """(DatasetDict, label names, multi_label, name): a real dataset, or the built-in task of `task_kind` when
    `dataset` is None (of `task_size` training documents of `task_words` = (min, max) words, when given)."""
    if dataset in (None, BUILTIN_TASK):
        kwargs = {"evidence": evidence, "seed": seed, "kind": task_kind}
        if task_size:
            kwargs.update(train_size=task_size, validation_size=max(task_size // 5, 20),
                          test_size=max(task_size // 2, 40))
        if task_words:
            kwargs.update(min_words=task_words[0], max_words=task_words[1])
        data = make_long_document_task(**kwargs)
        name = f"built-in long-document task (evidence={evidence}" + (")" if task_kind == "keywords" else
                                                                       f", {task_kind})")
        return data, data["train"].features["label"].names, False, name
    data, names, multi_label = load_text_classification_dataset(dataset, text_column, label_column, seed=seed)
    return data, names, multi_label, dataset


def tokenize(data, tokenizer, max_length, head=None):
    """Tokenize every split with explicit truncation at `max_length`, and log how many documents were cut. With
    `head`, a longer document keeps its first `head` and its last `max_length - head - specials` content tokens
    instead of the first ones (head + tail truncation)."""
    def encode(batch):
        if head is not None:
            return head_and_tail(tokenizer, batch["text"], max_length, head)
        if not tokenizer.is_fast:  # count what truncation cuts with a second, untruncated pass
            encoded = tokenizer(batch["text"], truncation=True, max_length=max_length)
            lengths = tokenizer(batch["text"], truncation=False, return_length=True)["length"]
            encoded["truncated"] = [length > max_length for length in lengths]
            return encoded
        encoded = tokenizer(batch["text"], truncation=True, max_length=max_length, return_overflowing_tokens=True)
        sample = encoded.pop("overflow_to_sample_mapping")  # one row per window: keep the first of each text
        first = [i for i, s in enumerate(sample) if i == 0 or sample[i - 1] != s]
        counts = np.bincount(sample, minlength=len(batch["text"]))
        encoded = {key: [values[i] for i in first] for key, values in encoded.items()}
        encoded["truncated"] = (counts > 1).tolist()
        return encoded

    data = data.map(encode, batched=True, remove_columns=["text"], desc="Tokenizing")
    for split, part in data.items():
        cut = int(np.sum(part["truncated"]))
        if cut:
            logger.warning("%s: %d of %d documents are longer than max_length=%d input ids (the tokenizer's units: "
                           "subword tokens, or bytes for a byte-level tokenizer) and were truncated.",
                           split, cut, len(part), max_length)
    return data.remove_columns("truncated")


def head_and_tail(tokenizer, texts, max_length, head):
    """Encode `texts` whole, then cut each one longer than `max_length` ids to its leading special tokens, its first
    `head` content tokens, and as many of its last ids (content, then the closing special tokens) as fit."""
    encoded = tokenizer(texts, truncation=False, return_special_tokens_mask=True)
    masks = encoded.pop("special_tokens_mask")
    columns = {key: [] for key in encoded}
    columns["truncated"] = []
    for i, mask in enumerate(masks):
        n = len(mask)
        leading = next((j for j, special in enumerate(mask) if not special), n)
        tail = max_length - leading - head
        if n > max_length and tail < 1:
            raise ValueError(f"`max_length` {max_length} leaves no room for a tail after {head} head tokens.")
        keep = list(range(n)) if n <= max_length else [*range(leading + head), *range(n - tail, n)]
        for key in encoded:
            columns[key].append([encoded[key][i][j] for j in keep])
        columns["truncated"].append(n > max_length)
    return columns
