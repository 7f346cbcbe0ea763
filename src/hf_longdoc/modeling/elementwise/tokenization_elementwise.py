"""Byte-level elementwise tokenizer (Kim & Kim, "Elementwise Language Representation", Section 4.2 and Fig. 2).

A text becomes u materials of v elements each. An element is one UTF-8 byte b, with id b + 4; ids 0-3 are
PAD, CLS, SEP and MASK. Output is FLAT: `input_ids` of length u·v, so `tokenizer.pad`, `DataCollatorWithPadding`,
pipelines and `Trainer` work unchanged; the model reshapes it to (u, v). Padding and truncation always move whole
materials.

Modes:
- `whitespace` (paper default): a material is a word (split on ASCII whitespace), right-padded with PAD; a word longer
  than v bytes is truncated (`long_word="truncate"`, the paper) or split into several materials (`"split"`: no byte
  lost; `decode` glues a full material to the next one, so a word of exactly a multiple of v bytes is glued to the
  word after it, the one ambiguity of the fixed 260-id vocabulary).
- `bytes` (tokenisation-free, Section 6.2): the raw UTF-8 stream cut every v bytes.
- `vgram` (Section 6.2, "gradient" tokenisation): bytes as above; the model pools v-grams.
Special tokens are materials of their own: [CLS, PAD, ..., PAD] first, [SEP, PAD, ...] after each segment.

`attention_mask` is per element: 1 for bytes and special elements, 0 for PAD elements (inside a material or in
padding materials); the model treats a material as real when any of its elements is.

Encoding is vectorised with numpy (no Python loop per byte). Self-contained: imports only numpy and transformers, so
the file ships next to a saved tokenizer for `trust_remote_code`.
"""

import numpy as np
from transformers import BatchEncoding, PreTrainedTokenizer
from transformers.utils import PaddingStrategy, logging

logger = logging.get_logger(__name__)

PAD_ID, CLS_ID, SEP_ID, MASK_ID = 0, 1, 2, 3
OFFSET = 4  # byte b has id b + OFFSET
MODES = ("whitespace", "bytes", "vgram")
LONG_WORDS = ("truncate", "split")
ASCII_WHITESPACE = np.array([9, 10, 11, 12, 13, 32], dtype=np.uint8)
SPECIAL_TOKENS = {PAD_ID: "[PAD]", CLS_ID: "[CLS]", SEP_ID: "[SEP]", MASK_ID: "[MASK]"}
RIGHT_PADDING_ONLY = ("ElementwiseTokenizer pads on the right only: the model reads a document from its first "
                      "material; use `padding_side='right'`.")


def utf8_bytes(text):
    """The UTF-8 bytes of `text` as uint8; lone surrogates pass through so that every str encodes."""
    return np.frombuffer(text.encode("utf-8", errors="surrogatepass"), dtype=np.uint8)


def word_spans(data):
    """(starts, ends) of the maximal runs of non-whitespace bytes in `data`."""
    is_word = ~np.isin(data, ASCII_WHITESPACE)
    edges = np.diff(np.concatenate(([False], is_word, [False])).astype(np.int8))
    return np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)


def gather_materials(data, starts, lengths, v):
    """A (k, v) matrix of element ids: row r holds bytes data[starts[r] : starts[r] + lengths[r]] (≤ v), PAD after."""
    columns = np.arange(v)
    valid = columns[None, :] < lengths[:, None]  # (k, v)
    index = np.minimum(starts[:, None] + columns[None, :], max(len(data) - 1, 0))
    ids = data[index].astype(np.int64) + OFFSET if len(data) else np.zeros(valid.shape, dtype=np.int64)
    return np.where(valid, ids, PAD_ID)


def text_to_materials(text, v, mode="whitespace", long_word="truncate"):
    """The content materials of one text, (k, v) int64, no special materials."""
    return materials_and_cut_words(text, v, mode, long_word)[0]


def materials_and_cut_words(text, v, mode="whitespace", long_word="truncate"):
    """(materials, words cut): the content materials of one text, and how many of its words were longer than v bytes
    and lost their tail (`whitespace` mode with `long_word="truncate"`; 0 otherwise), from one pass over the bytes."""
    data = utf8_bytes(text)
    if mode in ("bytes", "vgram"):
        starts = np.arange(0, len(data), v)
        return gather_materials(data, starts, np.minimum(len(data) - starts, v), v), 0
    starts, ends = word_spans(data)
    lengths = ends - starts
    if long_word == "split":  # every chunk of v bytes of a long word is a material of its own
        chunks = np.maximum(-(-lengths // v), 1)  # ceil(length / v)
        first = np.repeat(np.cumsum(chunks) - chunks, chunks)
        offsets = (np.arange(chunks.sum()) - first) * v  # position of each chunk inside its word
        word_starts, word_lengths = np.repeat(starts, chunks), np.repeat(lengths, chunks)
        return gather_materials(data, word_starts + offsets, np.minimum(word_lengths - offsets, v), v), 0
    return gather_materials(data, starts, np.minimum(lengths, v), v), int(np.sum(lengths > v))


def special_material(token_id, v):
    row = np.zeros((1, v), dtype=np.int64)
    row[0, 0] = token_id
    return row


def truncated_lengths(first, second, budget):
    """Longest-first truncation of two segments of `first` and `second` materials to `budget` materials in all."""
    if second is None:
        return min(first, budget), None
    if first + second <= budget:
        return first, second
    shorter = min(first, second)
    if shorter <= budget // 2:
        return (first, budget - first) if first == shorter else (budget - second, second)
    return budget - budget // 2, budget // 2


class ElementwiseTokenizer(PreTrainedTokenizer):
    """Byte-level elementwise tokenizer: text -> flat ids of u materials × v elements (see the module docstring).

    Args:
        elements_per_material (`int`, defaults to 16): v, elements (bytes) per material; equals the backbone's heads.
        max_materials (`int`, defaults to 128): u, the materials the model reads; `model_max_length` = u·v.
        mode (`str`, defaults to `"whitespace"`): `whitespace`, `bytes` or `vgram`.
        long_word (`str`, defaults to `"truncate"`): what `whitespace` mode does with words longer than v bytes.
    """

    model_input_names = ["input_ids", "attention_mask"]

    def __init__(self, elements_per_material=16, max_materials=128, mode="whitespace", long_word="truncate",
                 **kwargs):
        if isinstance(elements_per_material, bool) or not isinstance(elements_per_material, int) \
                or elements_per_material < 1:
            raise ValueError(f"`elements_per_material` must be a positive integer, got {elements_per_material!r}.")
        if isinstance(max_materials, bool) or not isinstance(max_materials, int) or max_materials < 3:
            raise ValueError(f"`max_materials` must be an integer of at least 3 (CLS, text, SEP), got "
                             f"{max_materials!r}.")
        if mode not in MODES:
            raise ValueError(f"`mode` must be one of {MODES}, got {mode!r}.")
        if long_word not in LONG_WORDS:
            raise ValueError(f"`long_word` must be one of {LONG_WORDS}, got {long_word!r}.")
        if kwargs.get("padding_side", "right") != "right":
            raise ValueError(RIGHT_PADDING_ONLY)
        self.elements_per_material = elements_per_material
        self.max_materials = max_materials
        self.mode = mode
        self.long_word = long_word
        kwargs.setdefault("model_max_length", max_materials * elements_per_material)
        for name, token in (("pad_token", "[PAD]"), ("cls_token", "[CLS]"), ("sep_token", "[SEP]"),
                            ("mask_token", "[MASK]")):
            kwargs.setdefault(name, token)
        # passed on so that they land in init_kwargs and hence in tokenizer_config.json
        super().__init__(elements_per_material=elements_per_material, max_materials=max_materials, mode=mode,
                         long_word=long_word, **kwargs)

    # --- vocabulary: 4 special ids and 256 bytes -----------------------------------------------------------------

    @property
    def vocab_size(self):
        return OFFSET + 256

    def get_vocab(self):
        return {self._convert_id_to_token(i): i for i in range(self.vocab_size)}

    def _convert_id_to_token(self, index):
        if index in SPECIAL_TOKENS:
            return SPECIAL_TOKENS[index]
        return f"<0x{index - OFFSET:02X}>"

    def _convert_token_to_id(self, token):
        for index, name in SPECIAL_TOKENS.items():
            if token == name:
                return index
        if token.startswith("<0x") and token.endswith(">") and len(token) == 6:
            return int(token[3:5], 16) + OFFSET
        raise ValueError(f"{token!r} is not an elementwise token (special tokens and <0xNN> bytes only).")

    def _tokenize(self, text, **kwargs):
        """Tokens of the content elements (PAD inside materials included), for `tokenize()`."""
        ids = text_to_materials(text, self.elements_per_material, self.mode, self.long_word).ravel()
        return [self._convert_id_to_token(int(i)) for i in ids]

    def save_vocabulary(self, save_directory, filename_prefix=None):
        return ()  # the vocabulary is fixed: nothing to save

    # --- encoding ------------------------------------------------------------------------------------------------

    def encode_materials(self, text, text_pair=None, add_special_tokens=True, max_materials=None):
        """(k, v) element ids of one text (and optional pair) with special materials, truncated to `max_materials`."""
        for name, value in (("text", text), ("text_pair", text_pair)):
            if value is not None and not isinstance(value, str):
                raise TypeError(f"`{name}` must be a str (or a list of str for a batch), got {type(value).__name__}.")
        v = self.elements_per_material
        first, cut = materials_and_cut_words(text, v, self.mode, self.long_word)
        second = None
        if text_pair is not None:
            second, cut_in_pair = materials_and_cut_words(text_pair, v, self.mode, self.long_word)
            cut += cut_in_pair
        self.report_cut_words(cut)
        if max_materials is not None:
            specials = (1 + (1 if second is None else 2)) if add_special_tokens else 0
            budget = max_materials - specials
            if budget < (1 if second is None else 2):
                raise ValueError(f"`max_length` leaves no room for text: it must allow at least {specials + 1} "
                                 f"materials of {v} elements.")
            keep_first, keep_second = truncated_lengths(len(first), None if second is None else len(second), budget)
            first = first[:keep_first]
            second = None if second is None else second[:keep_second]
        if not add_special_tokens:
            return first if second is None else np.concatenate([first, second])
        parts = [special_material(CLS_ID, v), first, special_material(SEP_ID, v)]
        if second is not None:
            parts += [second, special_material(SEP_ID, v)]
        return np.concatenate(parts)

    def report_cut_words(self, count):
        """Add `count` words cut to v bytes to `words_cut` and log the running total: on the first cut, then each
        time the total doubles (a long corpus is not flooded with one line per document)."""
        if not count:
            return
        before = getattr(self, "words_cut", 0)
        self.words_cut = before + count
        if before == 0 or self.words_cut >= 2 * getattr(self, "_words_cut_logged", 1):
            self._words_cut_logged = self.words_cut
            logger.warning(f"{self.words_cut} words longer than {self.elements_per_material} bytes cut to their first "
                           f"{self.elements_per_material} bytes so far (long_word='truncate', the paper's choice); "
                           "long_word='split' (or mode='bytes') keeps every byte.")

    def _materials_limit(self, max_length, truncate):
        if not truncate:
            return None
        max_length = self.model_max_length if max_length is None else max_length
        if max_length % self.elements_per_material:
            raise ValueError(f"`max_length` ({max_length}) must be a multiple of `elements_per_material` "
                             f"({self.elements_per_material}): truncation keeps whole materials.")
        return max_length // self.elements_per_material

    def _encode_plus(self, text, text_pair=None, add_special_tokens=True,
                     padding_strategy=PaddingStrategy.DO_NOT_PAD, truncation_strategy=None, max_length=None,
                     stride=0, is_split_into_words=False, pad_to_multiple_of=None, padding_side=None,
                     return_tensors=None, return_token_type_ids=None, return_attention_mask=None,
                     return_overflowing_tokens=False, return_special_tokens_mask=False, return_length=False,
                     verbose=True, **kwargs):
        if is_split_into_words or return_overflowing_tokens or stride:
            raise ValueError("ElementwiseTokenizer takes raw text only: `is_split_into_words`, "
                             "`return_overflowing_tokens` and `stride` are not supported.")
        batched = isinstance(text, (list, tuple))
        texts = list(text) if batched else [text]
        pairs = list(text_pair) if isinstance(text_pair, (list, tuple)) else [text_pair] * len(texts)
        if len(pairs) != len(texts):
            raise ValueError(f"`text_pair` has {len(pairs)} items for {len(texts)} texts; pass one per text.")
        truncate = truncation_strategy is not None and getattr(truncation_strategy, "value", truncation_strategy) \
            not in ("do_not_truncate", False)
        limit = self._materials_limit(max_length, truncate)
        materials = [self.encode_materials(t, p, add_special_tokens, limit) for t, p in zip(texts, pairs)]
        encoded = {"input_ids": [m.ravel().tolist() for m in materials]}
        if return_attention_mask is not False:
            encoded["attention_mask"] = [(m.ravel() != PAD_ID).astype(np.int64).tolist() for m in materials]
        if return_special_tokens_mask:
            encoded["special_tokens_mask"] = [np.isin(m.ravel(), (CLS_ID, SEP_ID)).astype(int).tolist()
                                              for m in materials]
        if return_length:
            encoded["length"] = [m.size for m in materials]
        if padding_strategy != PaddingStrategy.DO_NOT_PAD:
            encoded = self.pad(encoded, padding=padding_strategy, max_length=max_length,
                               pad_to_multiple_of=pad_to_multiple_of, padding_side=padding_side,
                               return_attention_mask=return_attention_mask)
        if not batched:
            encoded = {key: value[0] for key, value in encoded.items()}
        return BatchEncoding(dict(encoded), tensor_type=return_tensors, prepend_batch_axis=not batched)

    def pad(self, encoded_inputs, padding=True, max_length=None, pad_to_multiple_of=None, **kwargs):
        """`PreTrainedTokenizer.pad`, always in whole materials (lengths rounded up to a multiple of v), and always on
        the right: the elementwise model reads a document from its first material and refuses left padding."""
        if (kwargs.get("padding_side") or self.padding_side) == "left":
            raise ValueError(RIGHT_PADDING_ONLY)
        v = self.elements_per_material
        if max_length is not None and max_length % v:
            raise ValueError(f"`max_length` ({max_length}) must be a multiple of `elements_per_material` ({v}).")
        multiple = v if pad_to_multiple_of is None else int(np.lcm(v, pad_to_multiple_of))
        return super().pad(encoded_inputs, padding=padding, max_length=max_length, pad_to_multiple_of=multiple,
                           **kwargs)

    def build_inputs_with_special_tokens(self, token_ids_0, token_ids_1=None):
        v = self.elements_per_material
        cls, sep = [CLS_ID] + [PAD_ID] * (v - 1), [SEP_ID] + [PAD_ID] * (v - 1)
        return cls + token_ids_0 + sep + ([] if token_ids_1 is None else token_ids_1 + sep)

    def num_special_tokens_to_add(self, pair=False):
        return self.elements_per_material * (3 if pair else 2)

    # --- decoding ------------------------------------------------------------------------------------------------

    def _decode(self, token_ids, skip_special_tokens=False, **kwargs):
        ids = np.asarray(token_ids, dtype=np.int64).ravel()
        v = self.elements_per_material
        if self.mode in ("bytes", "vgram"):
            if not skip_special_tokens:
                return self._join_with_specials(ids)
            return decode_bytes(ids[ids >= OFFSET] - OFFSET)
        usable = len(ids) - len(ids) % v
        materials = ids[:usable].reshape(-1, v)
        words = []
        glue = False  # `split` mode: a full material continues into the next one
        for row in materials:
            special = row[0] in SPECIAL_TOKENS and row[0] != PAD_ID
            if special:
                if not skip_special_tokens:
                    words.append(SPECIAL_TOKENS[int(row[0])])
                glue = False
                continue
            data = row[row >= OFFSET] - OFFSET
            if len(data) == 0:
                continue
            text = data.astype(np.uint8).tobytes()
            if glue and words and isinstance(words[-1], bytes):
                words[-1] += text
            else:
                words.append(text)
            glue = self.long_word == "split" and len(data) == v
        return " ".join(w.decode("utf-8", errors="replace") if isinstance(w, bytes) else w for w in words)

    def _join_with_specials(self, ids):
        """Bytes mode with special tokens kept: each run of bytes decoded, special tokens by name in between."""
        is_special = np.isin(ids, (CLS_ID, SEP_ID, MASK_ID))
        pieces = []
        for run in np.split(ids, np.flatnonzero(is_special)):
            if len(run) and run[0] in (CLS_ID, SEP_ID, MASK_ID):
                pieces.append(SPECIAL_TOKENS[int(run[0])])
                run = run[1:]
            pieces.append(decode_bytes(run[run >= OFFSET] - OFFSET))
        return "".join(pieces)


def decode_bytes(data):
    """Text of UTF-8 bytes: exact (lone surrogates included) when valid, U+FFFD for a cut character otherwise."""
    raw = data.astype(np.uint8).tobytes()
    try:
        return raw.decode("utf-8", errors="surrogatepass")
    except UnicodeDecodeError:
        return raw.decode("utf-8", errors="replace")


ElementwiseTokenizer.register_for_auto_class("AutoTokenizer")

__all__ = ["ElementwiseTokenizer"]
