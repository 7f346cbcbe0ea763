"""Datasets: the built-in long-document task, loading of real data, and tokenizer fitting."""

from .inversion import invert_sentences
from .loading import DatasetError, load_text_classification_dataset
from .synthetic import EVIDENCE_WINDOWS, make_long_document_task
from .tokenizer import fit_wordpiece_tokenizer

__all__ = [
    "DatasetError",
    "EVIDENCE_WINDOWS",
    "fit_wordpiece_tokenizer",
    "invert_sentences",
    "load_text_classification_dataset",
    "make_long_document_task",
]
