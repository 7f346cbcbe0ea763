"""Sentences of a text as character spans, and a passage widened or trimmed to the sentences it holds.

`predict --explain`, the server's `explain` and `hf-longdoc demo` show the passages that weighed most in a label; the
model's passages are runs of tokens (a segment of 30 ids, a window), which start and end wherever the ids do. Shown as
they are, a passage reads as "the tail of one sentence. The next one": `whole_sentences` turns it into the sentences
it holds, with offsets into the text as given.
"""

SENTENCE_LANGUAGE = "en"  # sentencex's rules for English; others: any ISO 639-1 code it knows (falls back by family)


def sentence_spans(text, language=SENTENCE_LANGUAGE):
    """The (start, end) characters of `text`'s sentences, in order, covering the text (sentencex gives the text back
    in pieces that join to it exactly, whitespace included)."""
    from sentencex import segment

    spans, start = [], 0
    for sentence in segment(language, text):
        spans.append((start, start + len(sentence)))
        start += len(sentence)
    return spans


def _stripped(text, start, end):
    """(start, end) without the whitespace at either end of `text[start:end]`."""
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return start, end


def whole_sentences(text, start, end, sentences):
    """The characters `[start, end)` of `text` as whole sentences: the sentences at least half inside the span (by
    their characters, whitespace aside), or, when none is, the one it overlaps most (a span inside one sentence
    widens to it). `sentences`: `sentence_spans(text)`. Returns (start, end) with `text[start:end]` stripped of
    surrounding whitespace; the span itself when it overlaps no sentence (an empty text)."""
    held, best, best_overlap = [], None, 0
    for first, stop in sentences:
        first, stop = _stripped(text, first, stop)
        if stop <= first:
            continue
        overlap = max(0, min(stop, end) - max(first, start))
        if overlap * 2 >= stop - first:
            held.append((first, stop))
        if overlap > best_overlap:
            best, best_overlap = (first, stop), overlap
    if held:
        return held[0][0], held[-1][1]
    return best if best is not None else (start, end)


__all__ = ["SENTENCE_LANGUAGE", "sentence_spans", "whole_sentences"]
