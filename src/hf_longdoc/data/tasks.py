"""Tasks: a labelled dataset (or the built-in task) as splits, tokenized with a count of what truncation cut."""

import logging

import numpy as np

from .loading import load_text_classification_dataset
from .synthetic import make_long_document_task

logger = logging.getLogger(__name__)

BUILTIN_TASK = "builtin"


def load_task(dataset=None, text_column="text", label_column="label", seed=42, evidence="end", task_size=None):
    """(DatasetDict, label names, multi_label, name): a real dataset, or the built-in task when `dataset` is None."""
    if dataset in (None, BUILTIN_TASK):
        kwargs = {"evidence": evidence, "seed": seed}
        if task_size:
            kwargs.update(train_size=task_size, validation_size=max(task_size // 5, 20),
                          test_size=max(task_size // 2, 40))
        data = make_long_document_task(**kwargs)
        return data, data["train"].features["label"].names, False, f"built-in long-document task (evidence={evidence})"
    data, names, multi_label = load_text_classification_dataset(dataset, text_column, label_column, seed=seed)
    return data, names, multi_label, dataset


def tokenize(data, tokenizer, max_length):
    """Tokenize every split with explicit truncation at `max_length`, and log how many documents were cut."""
    def encode(batch):
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
            logger.warning("%s: %d of %d documents are longer than max_length=%d tokens and were truncated.",
                           split, cut, len(part), max_length)
    return data.remove_columns("truncated")
