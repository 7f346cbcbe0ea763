"""The segment LM's tokenizer: the backbone's fast tokenizer, which lays a document out in segments of whole sentences.

The segment LM cuts a document's ids into m segments of L - 2 ids (`cut_into_segments`). With fixed windows a segment
starts wherever the previous one ended, in the middle of a sentence. This tokenizer reads the text, finds its
sentences (Wikimedia's `sentencex` splitter: offline, fast, robust on abbreviations and lists) and packs whole
sentences into each segment of L - 2 ids, filling the rest of the segment with [PAD] ids, so that the next segment
starts with the next sentence:

    [CLS] s1 s1 s1 s2 s2 [PAD] [PAD] | s3 s3 s3 s3 s3 s3 [PAD] [PAD] | s4 ... [SEP]

- A sentence is never cut between two segments when it fits in one; only a sentence longer than one segment is split
  (its pieces fill whole segments, and the sentences after it may join its last piece).
- The layout is in the ids themselves, so it travels with every batch, through `pipeline(...)`, `predict`, ONNX
  and the Hub copy unchanged: the model reads a [PAD] id inside a document as a place that holds no token (its
  attention mask is 1 there, so that padding added on the right, and a mask rebuilt from ids alone, stay as they
  are).
- `sentence_packing=False` gives the backbone tokenizer's ids exactly (fixed windows).
- With `kept_tail` T (the model's head + tail window reads the last T document ids, `first_segment="head_tail"`), a
  document longer than `max_length` keeps its first segments and its last ones, the last holding at least its last T
  ids, and the segments between are left out whole (`kept_ids`): the window's tail is then the document's own end,
  where cutting the end would give it the end of what was read. Without, truncation cuts the end, as ever.
- Pairs of texts, pre-split words and slow tokenizers are not laid out (the backbone's ids).

Self-contained (Hub rule): imports only transformers and the standard library; `sentencex` is imported when a
document is laid out (`pip install sentencex`).
"""

import bisect

from transformers import BatchEncoding, PreTrainedTokenizerFast

SENTENCE_LANGUAGE = "en"  # sentencex's rules for English; others: any ISO 639-1 code it knows (falls back by family)


# Copied from hf_longdoc.utils.sentences.sentence_spans
def sentence_spans(text, language=SENTENCE_LANGUAGE):
    """The (start, end) characters of `text`'s sentences, in order, covering the text (sentencex gives the text back
    in pieces that join to it exactly, whitespace included)."""
    from sentencex import segment

    spans, start = [], 0
    for sentence in segment(language, text):
        spans.append((start, start + len(sentence)))
        start += len(sentence)
    return spans


def pack_sentences(offsets, spans, width):
    """Groups of token positions, one per segment of at most `width` ids: whole sentences packed in order, a sentence
    longer than `width` split into pieces of `width` (the sentences after it may join its last piece). `offsets`: each
    token's (start, end) characters; `spans`: the sentences' (start, end) characters."""
    starts = [start for start, _ in spans]
    sentences = []
    for position, (start, _) in enumerate(offsets):
        sentence = max(bisect.bisect_right(starts, start) - 1, 0)  # the sentence the token starts in
        if sentences and sentences[-1][0] == sentence:
            sentences[-1][1].append(position)
        else:
            sentences.append((sentence, [position]))
    segments, current = [], []
    for _, positions in sentences:
        if len(positions) > width:  # longer than a segment: split, and let the next sentences follow its last piece
            if current:
                segments.append(current)
            pieces = [positions[i: i + width] for i in range(0, len(positions), width)]
            segments += pieces[:-1]
            current = pieces[-1]
        elif len(current) + len(positions) <= width:
            current = current + positions
        else:
            segments.append(current)
            current = positions
    if current:
        segments.append(current)
    return segments


def kept_positions(ids, limit, width, kept_tail, pad_id):
    """The positions of `ids` (a document's ids in segments of `width`, no special ids) that a reading of `limit` ids
    keeps: all when they fit; with `kept_tail` T, its first segments and its last ones, as many whole segments as fit,
    the last ones from the latest segment start after which T document ids (ids other than `pad_id`, a layout's
    fill) follow, so that every kept segment is one of the document's own and its last T ids are read (the segments
    between are left out); a tail that fills the reading alone: the last whole segments that fit. T = 0: the first
    `limit` ids, as truncation keeps them."""
    if len(ids) <= limit:
        return list(range(len(ids)))
    if not kept_tail:
        return list(range(limit))
    tail, held = len(ids), 0  # the latest segment start with T document ids after it
    for start in range((len(ids) - 1) // width * width, -1, -width):
        held += sum(1 for token in ids[start: tail] if token != pad_id)
        tail = start
        if held >= kept_tail:
            break
    head = max(limit - (len(ids) - tail), 0) // width * width
    if head == 0:
        return list(range(-(-(len(ids) - limit) // width) * width, len(ids)))
    return list(range(head)) + list(range(tail, len(ids)))  # head < tail: the document is longer than `limit`


class SegmentLMTokenizer(PreTrainedTokenizerFast):
    """A backbone's fast tokenizer that lays documents out in segments of whole sentences (see the module docstring).

    Args:
        segment_length (`int`): L, the ids of a segment with its [CLS] and [SEP]: L - 2 ids of text each.
        sentence_packing (`bool`, defaults to `False`): lay documents out by sentence; False: the backbone's ids
            (`from_backbone` sets it as the model's config says).
        sentence_language (`str`, defaults to `"en"`): the language whose sentence rules sentencex applies.
        kept_tail (`int`, defaults to 0): T, the document ids at its end that a document cut by `truncation` keeps
            (`kept_ids`); 0: truncation keeps the document's start.
    Every other argument is `PreTrainedTokenizerFast`'s (`from_backbone` copies the backbone tokenizer's)."""

    # No `__init__` of its own: Transformers then loads the class from its tokenizer.json as it is (a subclass with
    # one is rebuilt from the vocabulary, as a model type it guesses). The settings live in `init_kwargs`, which
    # `save_pretrained` writes to tokenizer_config.json.
    @property
    def segment_length(self):
        return int(self.init_kwargs.get("segment_length", 256))

    @property
    def sentence_packing(self):
        return bool(self.init_kwargs.get("sentence_packing", False))

    @property
    def sentence_language(self):
        return self.init_kwargs.get("sentence_language", SENTENCE_LANGUAGE)

    @property
    def kept_tail(self):
        return int(self.init_kwargs.get("kept_tail", 0))

    @classmethod
    def from_backbone(cls, tokenizer, segment_length, sentence_packing=True, sentence_language=SENTENCE_LANGUAGE,
                      kept_tail=0):
        """This tokenizer around the fast tokenizer `tokenizer` (its vocabulary, special tokens, input names and
        maximum length)."""
        if isinstance(segment_length, bool) or not isinstance(segment_length, int) or segment_length < 3:
            raise ValueError(f"`segment_length` must be an integer of at least 3 ([CLS], one id, [SEP]), got "
                             f"{segment_length!r}.")
        if isinstance(kept_tail, bool) or not isinstance(kept_tail, int) or kept_tail < 0:
            raise ValueError(f"`kept_tail` must be a non-negative integer (document ids), got {kept_tail!r}.")
        if not getattr(tokenizer, "is_fast", False):
            raise ValueError(f"Laying documents out in segments needs a fast tokenizer (its offsets say which sentence "
                             f"a token belongs to and where a cut document's parts are); {type(tokenizer).__name__} is "
                             "a slow one.")
        specials = {name: getattr(tokenizer, name) for name in ("bos_token", "eos_token", "unk_token", "sep_token",
                                                                 "pad_token", "cls_token", "mask_token")
                    if getattr(tokenizer, name, None) is not None}
        packed = cls(tokenizer_object=tokenizer.backend_tokenizer, model_max_length=tokenizer.model_max_length,
                     segment_length=segment_length, sentence_packing=sentence_packing,
                     sentence_language=sentence_language, kept_tail=kept_tail, padding_side="right",
                     model_input_names=list(tokenizer.model_input_names), **specials)  # saved: BERT's token_type_ids
        return packed

    def _frame(self):
        """(prefix, suffix): the special ids the backbone puts around a text (found once)."""
        if getattr(self, "_special_frame", None) is not None:
            return self._special_frame
        bare = super().__call__("document", add_special_tokens=False)["input_ids"]
        full = super().__call__("document")["input_ids"]
        start = next(i for i in range(len(full) - len(bare) + 1) if full[i: i + len(bare)] == bare)
        self._special_frame = (full[:start], full[start + len(bare):])
        return self._special_frame

    def lay_out(self, text, ids, offsets):
        """(ids, offsets) of one text laid out in segments of whole sentences (module docstring), without special
        ids; a segment's padding has offsets (0, 0). Without sentence packing, the ids as they are."""
        if not self.sentence_packing:
            return list(ids), [tuple(place) for place in offsets]
        width = self.segment_length - 2
        segments = pack_sentences(offsets, sentence_spans(text, self.sentence_language), width)
        laid, places = [], []
        for number, positions in enumerate(segments):
            padding = width - len(positions) if number < len(segments) - 1 else 0  # the last segment: no padding
            laid += [ids[p] for p in positions] + [self.pad_token_id] * padding
            places += [tuple(offsets[p]) for p in positions] + [(0, 0)] * padding
        return laid, places

    def kept_ids(self, ids, limit):
        """The positions of a document's laid-out ids (`lay_out`'s, no special ids) that a reading of `limit` ids
        keeps (`kept_positions` with this tokenizer's `kept_tail`; without one, the first `limit`). `predict`,
        `serve` and the pipelines cut documents through this, as `truncation=True` does."""
        return kept_positions(ids, limit, self.segment_length - 2, self.kept_tail, self.pad_token_id)

    def __call__(self, text=None, text_pair=None, *args, add_special_tokens=True, padding=False, truncation=None,
                 max_length=None, return_tensors=None, return_offsets_mapping=False, return_overflowing_tokens=False,
                 return_special_tokens_mask=False, return_length=False, return_attention_mask=None,
                 return_token_type_ids=None, pad_to_multiple_of=None, padding_side=None, **kwargs):
        passed = dict(add_special_tokens=add_special_tokens, padding=padding, truncation=truncation,
                      max_length=max_length, return_tensors=return_tensors,
                      return_offsets_mapping=return_offsets_mapping,
                      return_overflowing_tokens=return_overflowing_tokens,
                      return_special_tokens_mask=return_special_tokens_mask, return_length=return_length,
                      return_attention_mask=return_attention_mask, return_token_type_ids=return_token_type_ids,
                      pad_to_multiple_of=pad_to_multiple_of, padding_side=padding_side)
        single = isinstance(text, str)
        texts = [text] if single else text
        cuts_ends = self.kept_tail and truncation not in (None, False, "do_not_truncate")
        if ((not self.sentence_packing and not cuts_ends) or text_pair is not None or args
                or kwargs.get("is_split_into_words")
                or kwargs.get("text_target") is not None or not isinstance(texts, (list, tuple))
                or not all(isinstance(t, str) for t in texts)):
            return super().__call__(text, text_pair, *args, **passed, **kwargs)
        kwargs.pop("verbose", None)
        plain = super().__call__(list(texts), add_special_tokens=False, return_offsets_mapping=True,
                                 return_attention_mask=False, return_token_type_ids=False, verbose=False)
        prefix, suffix = self._frame() if add_special_tokens else ([], [])
        limit = None
        if truncation not in (None, False, "do_not_truncate"):
            limit = max_length if max_length is not None else self.model_max_length
            limit = max(limit - len(prefix) - len(suffix), 0)
        rows = {"input_ids": [], "offset_mapping": [], "special_tokens_mask": []}
        sample = []  # `overflow_to_sample_mapping`: the text each row comes from
        for index, (document, ids, offsets) in enumerate(zip(texts, plain["input_ids"], plain["offset_mapping"])):
            laid, places = self.lay_out(document, ids, offsets)
            windows = [(laid, places)]
            if limit is not None and len(laid) > limit:
                kept = self.kept_ids(laid, limit)
                windows = [([laid[p] for p in kept], [places[p] for p in kept])]
                if return_overflowing_tokens:  # what was cut, as one more row (the length counts say it was cut)
                    cut = sorted(set(range(len(laid))) - set(kept))
                    windows.append(([laid[p] for p in cut], [places[p] for p in cut]))
            for window_ids, window_places in windows:
                while window_ids and window_ids[-1] == self.pad_token_id and window_places[-1] == (0, 0):
                    window_ids, window_places = window_ids[:-1], window_places[:-1]  # no padding before [SEP]
                rows["input_ids"].append(prefix + window_ids + suffix)
                rows["offset_mapping"].append([(0, 0)] * len(prefix) + window_places + [(0, 0)] * len(suffix))
                rows["special_tokens_mask"].append([1] * len(prefix) + [int(p == (0, 0)) for p in window_places]
                                                   + [1] * len(suffix))
                sample.append(index)
        encoded = {"input_ids": rows["input_ids"]}
        if return_attention_mask is not False and "attention_mask" in self.model_input_names:
            encoded["attention_mask"] = [[1] * len(ids) for ids in rows["input_ids"]]  # padding inside: see above
        if return_token_type_ids or (return_token_type_ids is None and "token_type_ids" in self.model_input_names):
            encoded["token_type_ids"] = [[0] * len(ids) for ids in rows["input_ids"]]
        extras = {}
        if return_offsets_mapping:
            extras["offset_mapping"] = rows["offset_mapping"]
        if return_special_tokens_mask:
            extras["special_tokens_mask"] = rows["special_tokens_mask"]
        if return_length:
            extras["length"] = [len(ids) for ids in rows["input_ids"]]
        if return_overflowing_tokens:
            extras["overflow_to_sample_mapping"] = sample
        if padding not in (False, None, "do_not_pad"):
            to_length = max_length if str(getattr(padding, "value", padding)) == "max_length" else None
            padded = self.pad(encoded, padding=padding, max_length=to_length, pad_to_multiple_of=pad_to_multiple_of,
                              padding_side="right", return_attention_mask=return_attention_mask)
            encoded = dict(padded)
            width = len(encoded["input_ids"][0]) if encoded["input_ids"] else 0
            for name, filler in (("offset_mapping", (0, 0)), ("special_tokens_mask", 1)):
                if name in extras:
                    extras[name] = [row + [filler] * (width - len(row)) for row in extras[name]]
        encoded.update(extras)
        if single and return_tensors is None and not return_overflowing_tokens:
            encoded = {name: value[0] for name, value in encoded.items()}
        return BatchEncoding(encoded, tensor_type=return_tensors, prepend_batch_axis=False)


SegmentLMTokenizer.register_for_auto_class("AutoTokenizer")

__all__ = ["SegmentLMTokenizer", "kept_positions", "pack_sentences", "sentence_spans"]
