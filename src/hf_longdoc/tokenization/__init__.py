"""Tokenizers: the byte-level elementwise tokenizer."""

from .tokenization_elementwise import ElementwiseTokenizer

__all__ = ["ElementwiseTokenizer"]
