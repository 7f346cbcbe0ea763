"""Inverted documents: the same text with its parts (or sentences) in reverse order, so evidence that sat at the start
(a title, an abstract, a news lead) moves to the end: the "inverted wireless" test of the segment-LM paper (Section 4:
"a single patent starts with its last claim, up to the first claim in the reverse order, then the abstract, and
lastly the title")."""

import re

SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")
BLANK_LINE = re.compile(r"\n\s*\n")


def invert_sentences(text):
    """`text` with its sentences (split after . ! ? and at line breaks) in reverse order, joined by spaces."""
    return " ".join(reversed([part for part in SENTENCE_END.split(text) if part.strip()]))


def document_parts(text):
    """The parts of a plain-text document, in order: its paragraphs (split at blank lines; at line breaks when it has
    no blank line). A document of one paragraph is one part."""
    splitter = BLANK_LINE if BLANK_LINE.search(text) else re.compile(r"\n")
    return [part.strip() for part in splitter.split(text) if part.strip()]


def join_parts(parts):
    """One plain-text document from its parts in order (an item may be a list, such as a patent's claims): one
    paragraph per part, blank lines inside a part folded to line breaks, so `document_parts` gives the parts back."""
    flat = []
    for part in parts:
        flat.extend(part if isinstance(part, (list, tuple)) else [part])
    return "\n\n".join(BLANK_LINE.sub("\n", str(part).strip()) for part in flat if part is not None and
                       str(part).strip())


def invert_parts(parts):
    """The paper's structural inversion: a document given as its parts in order (a list: title, abstract, claim 1 ...
    claim k; an item may itself be a list, such as the claims, which is reversed too), or as plain text (its
    paragraphs, see `document_parts`), rebuilt with the parts in reverse order, one part per paragraph. The words
    inside each part keep their order."""
    if isinstance(parts, str):
        parts = document_parts(parts)
    flat = []
    for part in parts:
        flat.extend(part if isinstance(part, (list, tuple)) else [part])
    return "\n\n".join(str(part).strip() for part in reversed(flat) if str(part).strip())
