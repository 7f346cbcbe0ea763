"""Inverted documents: the same text with its sentences in reverse order, so evidence that sat at the start (a title,
an abstract, a news lead) moves to the end — the "inverted" test of the segment-LM paper (Section 4)."""

import re

SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")


def invert_sentences(text):
    """`text` with its sentences (split after . ! ? and at line breaks) in reverse order, joined by spaces."""
    return " ".join(reversed([part for part in SENTENCE_END.split(text) if part.strip()]))
