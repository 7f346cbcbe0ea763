"""Datasets: the built-in long-document task, loading of real data, tasks and tokenizing, and tokenizer fitting."""

from .errors import DatasetError
from .inversion import document_parts, invert_parts, invert_sentences, join_parts
from .loading import load_for_evaluation, load_splits, load_text_classification_dataset
from .synthetic import EVIDENCE_WINDOWS, TASK_KINDS, make_long_document_task
from .tasks import BUILTIN_TASK, load_task, tokenize
from .tokenizer import fit_wordpiece_tokenizer, has_tokenizer_files, load_tokenizer, save_tokenizer

__all__ = [
    "BUILTIN_TASK",
    "DatasetError",
    "EVIDENCE_WINDOWS",
    "TASK_KINDS",
    "fit_wordpiece_tokenizer",
    "has_tokenizer_files",
    "invert_sentences",
    "invert_parts",
    "document_parts",
    "join_parts",
    "load_for_evaluation",
    "load_splits",
    "load_tokenizer",
    "load_task",
    "load_text_classification_dataset",
    "make_long_document_task",
    "save_tokenizer",
    "tokenize",
]
