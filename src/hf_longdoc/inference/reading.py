"""How a saved model is read, decided once: its reading length, its special-token frame, its chunk plan, its
multi-label threshold and the decision rule from scores to labels.

Every path that reads a model asks this module — `train`, `evaluate`, `compare`, the long-document pipeline,
`predict`, `--explain`, `export`, the model card and `attention-map` — so that a document is read to the same length,
cut into the same chunks and given the same labels whichever way it is classified.

- **Reading length** (`reading_length`): the most input ids a model reads, from its config (an hf_longdoc family
  says, `Family.reading_length`; any other checkpoint reads its positions), the length asked for, else the length
  the saved model was trained to read (`trained_length`: its config's `max_input_length`, to which its forward cuts
  a longer input, and its tokenizer's `model_max_length`, `saved_tokenizer_limit`; above `UNBOUNDED` it is unset). A
  run sets both from the answer, once, right before tokenizing; nothing reads them back as the source of truth.
- **Special-token frame** (`special_frame`): the ids a tokenizer puts around a text.
- **Chunk plan** (`chunk_plan`, `ChunkPlan`): how a document longer than the model reads is cut into chunks, as the
  pipeline and `predict --long chunks` read it, and where it is cut when it is truncated.
- **Scores** are the softmax of the logits over the classes, or a sigmoid per class for a multi-label model (and for
  a one-logit model), in float32 as the model's logits are (`scores_from_logits`).
- **Decision** (`decide`): single-label, the best class; multi-label, every class whose score is *at least* the
  threshold (`score >= threshold`), compared in double precision on the float32 score, so a score exactly at the
  threshold is labelled on every path (a float32 comparison would round the threshold first).
- **Threshold** (`decision_threshold`): the one saved with the model (the config's `multi_label_threshold`, which
  `train --threshold` writes), else `DEFAULT_THRESHOLD`; `evaluate --threshold` and the pipeline's `threshold`
  override it. Every hf_longdoc config declares `multi_label_threshold` with the default None, "not set": a model
  saved without one (older, or not multi-label, or a Transformers checkpoint) is decided at `DEFAULT_THRESHOLD`.
"""

import json
import logging
import os
from dataclasses import dataclass

import numpy as np
import torch

from ..modeling.backbones import backbone_positions
from ..modeling.registry import family_of_config
from ..utils.rules import DEFAULT_THRESHOLD, THRESHOLD

logger = logging.getLogger(__name__)

UNBOUNDED = 10**6  # a tokenizer's model_max_length above this means "not set" (Transformers uses 1e30)


# -- reading length ---------------------------------------------------------------------------------------------------
def ids_for_tokens(config, tokens):
    """The input ids that hold `tokens` of a document in a model with `config` (`Family.ids_to_read`; a Transformers
    checkpoint: the same number)."""
    try:
        family = family_of_config(config)
    except ValueError:
        return tokens
    return family.ids_to_read(config, tokens)


def model_limit(config):
    """(the most input ids a model with `config` reads or None for no limit, input ids per position): an hf_longdoc
    family says (`Family.reading_length`, `Family.ids_per_position`: elementwise reads v bytes a position); any other
    checkpoint reads its positions (less the rows RoBERTa-numbered encoders reserve), one id each."""
    try:
        family = family_of_config(config)
    except ValueError:  # not one of our families: a Transformers checkpoint
        return backbone_positions(config), 1
    return family.reading_length(config), family.ids_per_position(config)


def ids_per_position(config):
    """Input ids one position of a model with `config` covers (elementwise: v bytes per material; else 1): chunks, the
    stride and reading lengths are cut at multiples of it."""
    return model_limit(config)[1]


def saved_tokenizer_limit(tokenizer):
    """A saved tokenizer's `model_max_length` (the length its training run read), or None: no tokenizer, or one whose
    limit is unset (above `UNBOUNDED`)."""
    limit = getattr(tokenizer, "model_max_length", None) if tokenizer is not None else None
    return _limit(limit)


def _limit(limit):
    return int(limit) if not isinstance(limit, bool) and isinstance(limit, (int, float)) and 0 < limit < UNBOUNDED \
        else None


def trained_length(config, tokenizer_limit=None):
    """The input ids a saved model with `config` was trained to read, or None (not recorded): the fewer of its
    config's `max_input_length` (to which its forward cuts a longer input) and `tokenizer_limit` (its tokenizer's
    `model_max_length`; above UNBOUNDED it is unset), of those set. `train` sets both to the same length."""
    limits = [_limit(limit) for limit in (getattr(config, "max_input_length", None), tokenizer_limit)]
    return min([limit for limit in limits if limit is not None], default=None)


def reading_length(config, requested=None, tokenizer_limit=None):
    """The most input ids a model with `config` reads: those that hold `requested` document tokens (the user's
    `max_length`; `ids_for_tokens`), else what it was trained to read (`trained_length`, with `tokenizer_limit` a
    saved tokenizer's `model_max_length`), cut to what the model reads (`model_limit`) and to whole positions
    (elementwise: a multiple of v bytes). None when nothing bounds it (the contextualizer, and the S-LSTM with
    relative positions, read any length). A request the model cannot read is cut, with a warning."""
    limit, width = model_limit(config)
    if requested is not None:
        wanted = ids_for_tokens(config, requested)
    else:
        wanted = trained_length(config, tokenizer_limit)
    length = wanted if limit is None or (wanted is not None and wanted <= limit) else limit
    if requested is not None and length < wanted:
        held = "" if wanted == requested else f" (the {wanted} input ids that hold {requested} document tokens)"
        logger.warning("This %s model reads at most %d tokens, fewer than max_length=%d%s: documents are cut at %d, "
                       "and the saved tokenizer truncates there.", config.model_type, length, requested, held, length)
    if length is not None and length % width:
        whole = max(width, length // width * width)
        logger.info("Reading %d input ids, not %d: a position of this %s model reads %d of them.", whole, length,
                    config.model_type, width)
        length = whole
    return length


def saved_reading_length(config, tokenizer=None):
    """The most input ids a saved model reads: `reading_length` capped by what it was trained to read (its config's
    `max_input_length` and its saved tokenizer's limit; neither: the model's own limit). None when nothing bounds
    it."""
    return reading_length(config, tokenizer_limit=saved_tokenizer_limit(tokenizer))


def folder_reading_length(config, model_dir):
    """`saved_reading_length` of the model saved in `model_dir`, its tokenizer's limit read from
    `tokenizer_config.json` without loading the tokenizer (the model card's sentence)."""
    limit = None
    path = os.path.join(model_dir, "tokenizer_config.json")
    if os.path.isfile(path):
        with open(path) as f:
            limit = json.load(f).get("model_max_length")
    return reading_length(config, tokenizer_limit=_limit(limit))


# -- the special-token frame and the chunk plan -----------------------------------------------------------------------
def special_frame(tokenizer):
    """(prefix, suffix): the ids the tokenizer puts around a text ([CLS] .. [SEP]; <s> .. </s>; the elementwise
    tokenizer's special materials), found by tokenizing one word with and without special tokens."""
    bare = tokenizer("document", add_special_tokens=False)["input_ids"]
    full = tokenizer("document")["input_ids"]
    for start in range(len(full) - len(bare) + 1):
        if full[start: start + len(bare)] == bare:
            return full[:start], full[start + len(bare):]
    raise ValueError(f"The tokenizer {type(tokenizer).__name__} changes a text's ids when it adds special tokens; "
                     "its documents cannot be cut into chunks.")


@dataclass(frozen=True)
class ChunkPlan:
    """How a document's ids (tokenized without special tokens) become what the model reads: `content` text ids per
    chunk (None: no limit, one chunk), `step` ids between chunk starts, each chunk framed by `prefix` and `suffix`."""

    prefix: list
    suffix: list
    content: int | None
    step: int | None
    unit: int = 1
    kept_positions: object = None  # the tokenizer's own rule for what a cut document keeps, `kept_ids(ids, limit)`

    def chunks(self, ids):
        """The id sequences that read all of `ids`: chunks of `content` ids, `step` apart, the last ending at the
        document's end."""
        content = self.content or len(ids)
        if len(ids) <= content:
            return [self.prefix + list(ids) + self.suffix]
        starts = list(range(0, len(ids) - content, self.step)) + [len(ids) - content]
        return [self.prefix + list(ids[start: start + content]) + self.suffix for start in starts]

    def truncated(self, ids, side="right"):
        """The one id sequence that reads `ids` cut where the model stops reading, as `truncation=True` cuts it:
        its start (`side="right"`, the tokenizer's default `truncation_side`), or its end (`"left"`)."""
        return [self.prefix + list(self.kept(ids, side)) + self.suffix]

    def kept(self, ids, side="right"):
        """The part of `ids` that `truncated` reads. Its end starts at a multiple of `unit` ids (elementwise: v bytes
        a material), so its positions group the ids as the whole document's do. A tokenizer that cuts documents its
        own way (`kept_positions`: the segment LM's head + tail window keeps a document's first and last segments)
        decides the `"right"` side, as its `truncation=True` does."""
        if not self.is_cut(ids):
            return ids
        if side == "right" and self.kept_positions is not None:
            return [ids[position] for position in self.kept_positions(ids, self.content)]
        if side == "right":
            return ids[: self.content]
        return ids[-(-(len(ids) - self.content) // self.unit) * self.unit:]

    def is_cut(self, ids):
        """Whether `truncated` leaves some of `ids` unread."""
        return self.content is not None and len(ids) > self.content


def chunk_plan(config, tokenizer, chunk_length=None, stride=0):
    """The `ChunkPlan` of a saved model with `config` and its `tokenizer`: chunks of `chunk_length` ids, special
    tokens included (None: what the model reads, `saved_reading_length`), consecutive chunks sharing `stride` ids, both
    cut to whole positions. A ValueError names an argument that does not fit the model, and the fix."""
    limit = saved_reading_length(config, tokenizer)
    if chunk_length is None:
        chunk_length = limit
    elif isinstance(chunk_length, bool) or not isinstance(chunk_length, int) or chunk_length < 1:
        raise ValueError(f"`chunk_length` must be a positive integer (ids per chunk), got {chunk_length!r}.")
    elif limit is not None and chunk_length > limit:
        raise ValueError(f"`chunk_length` ({chunk_length}) exceeds the {limit} ids the model reads; lower it.")
    prefix, suffix = special_frame(tokenizer)
    unit = ids_per_position(config)
    special = len(prefix) + len(suffix)
    content = None if chunk_length is None else (chunk_length - special) // unit * unit
    if content is not None and content < unit:
        raise ValueError(f"`chunk_length` ({chunk_length}) leaves no room for text after the {special} special "
                         "ids; raise it.")
    if isinstance(stride, bool) or not isinstance(stride, int) or stride < 0:
        raise ValueError(f"`stride` must be a non-negative integer (ids chunks share), got {stride!r}.")
    stride = stride // unit * unit
    if content is not None and stride >= content:
        raise ValueError(f"`stride` ({stride}) must be smaller than a chunk's {content} text ids; lower it.")
    kept_positions = tokenizer.kept_ids if getattr(tokenizer, "kept_tail", 0) else None
    return ChunkPlan(prefix, suffix, content, content - stride if content is not None else None, unit, kept_positions)


# -- scores and decisions ---------------------------------------------------------------------------------------------
def is_multi_label(config):
    return getattr(config, "problem_type", None) == "multi_label_classification"


def uses_sigmoid(config):
    """Whether the scores are per-class sigmoids (multi-label, or one logit) rather than a softmax over classes."""
    return is_multi_label(config) or getattr(config, "num_labels", 2) == 1


def scores_from_logits(logits, config):
    """(..., labels) probabilities, float32, from (..., labels) logits (a tensor or an array)."""
    logits = torch.as_tensor(np.asarray(logits) if not isinstance(logits, torch.Tensor) else logits).float()
    return logits.sigmoid() if uses_sigmoid(config) else logits.softmax(dim=-1)


def _as_float64(scores):
    if isinstance(scores, torch.Tensor):
        scores = scores.detach().cpu().float().numpy()
    return np.asarray(scores, dtype=np.float64)


def decide(scores, threshold=None):
    """Which classes documents are given: a boolean array of the shape of `scores` (..., classes). `threshold` None
    (single-label): the best class only, the first of equal ones; a number (multi-label): every class whose score is
    at least it, compared in float64 on the float32 score."""
    scores = _as_float64(scores)
    if threshold is not None:
        return scores >= float(threshold)
    best = scores.argmax(axis=-1)
    return np.arange(scores.shape[-1]) == best[..., None]


def chosen_classes(scores, threshold=None):
    """The indices of the classes `decide` gives one document with `scores`, best first (ties in class order):
    single-label (`threshold` None), the best one."""
    scores = _as_float64(scores)
    chosen = np.flatnonzero(decide(scores, threshold))
    return sorted(chosen.tolist(), key=lambda index: (-scores[index], index))


def saved_threshold(config, where="the model"):
    """The multi-label threshold saved with a model (`multi_label_threshold`), checked, or None."""
    saved = getattr(config, "multi_label_threshold", None)
    if saved is not None:
        THRESHOLD.check(saved, f"multi_label_threshold in {where}'s config.json")
    return saved


def decision_threshold(config, threshold=None, multi_label=True, where="the model", log=True):
    """The multi-label threshold to decide at: `threshold` when given (logged when it overrides the one saved with
    the model), else the one saved with the model, else `DEFAULT_THRESHOLD`. A model trained with --threshold 0.5 is
    then labelled at 0.5, not at a default it never saw. Single-label (`multi_label` False: the data's or the
    config's problem type, `is_multi_label`): None. `log=False` for a caller that asks once a document."""
    saved = saved_threshold(config, where)
    if not multi_label:
        if threshold is not None and log:
            logger.warning("--threshold %g is ignored: %s is single-label (one class per document, no threshold).",
                           threshold, where)
        return None
    if threshold is None:
        threshold = DEFAULT_THRESHOLD if saved is None else saved
        if log:
            logger.info("Deciding at the multi-label threshold %g (%s).", threshold,
                        "saved with the model" if saved is not None else "the default: the model saved none")
    elif log and saved is not None and threshold != saved:
        logger.warning("--threshold %g overrides the threshold %g saved with %s.", threshold, saved, where)
    return threshold


def best_first(scores, top_k=None):
    """The indices of `scores` (one document's, in label order) best first, ties in label order, the first `top_k`
    (None: all): the order every answer lists classes in."""
    return sorted(range(len(scores)), key=lambda index: (-scores[index], index))[:top_k]


def has_visible_text(text):
    """Whether `text` holds a character one can see (not only blanks, zero-width or control characters): a text
    without one would be labelled from the model's special tokens alone."""
    return any(c.isprintable() and not c.isspace() for c in text)


class ReadingRules:
    """What a loaded model's config and tokenizer fix about reading it, decided once for every reader of it: its
    `labels`, whether it is `multi_label`, the `threshold` it decides at, the `length` it reads, its chunk plan and
    how its scores become a prediction."""

    def __init__(self, config, tokenizer, threshold=None, where="the model", log=True):
        self.config, self.tokenizer = config, tokenizer
        self.labels = [config.id2label[index] for index in range(config.num_labels)]
        self.multi_label = is_multi_label(config)
        self.threshold = decision_threshold(config, threshold, self.multi_label, where=where, log=log)
        self.length = saved_reading_length(config, tokenizer)

    def plan(self, chunk_length=None, stride=0):
        """The `ChunkPlan` of this model (`chunk_plan`)."""
        return chunk_plan(self.config, self.tokenizer, chunk_length, stride)

    def scores(self, logits):
        return scores_from_logits(logits, self.config)

    def top(self, scores, top_k=None):
        """`{label: score}` of one document's `scores` (in label order): every class in label order, or with `top_k`
        the K best, best first."""
        shown = range(len(scores)) if top_k is None else best_first(scores, top_k)
        return {self.labels[index]: scores[index] for index in shown}

    def prediction(self, scores, top_k=None):
        """`{"scores", "label", "score"}` of one document's `scores` (floats in label order): `top`'s scores and the
        classes `decide` gives it (a multi-label model's as lists, best first)."""
        prediction = {"scores": self.top(scores, top_k)}
        chosen = chosen_classes(scores, self.threshold)
        if self.multi_label:
            prediction.update(label=[self.labels[i] for i in chosen], score=[float(scores[i]) for i in chosen])
        else:
            prediction.update(label=self.labels[chosen[0]], score=float(scores[chosen[0]]))
        return prediction


__all__ = ["DEFAULT_THRESHOLD", "UNBOUNDED", "ChunkPlan", "ReadingRules", "best_first", "chosen_classes", "chunk_plan",
           "decide", "decision_threshold", "folder_reading_length", "has_visible_text", "ids_for_tokens",
           "ids_per_position", "is_multi_label", "model_limit", "reading_length", "saved_reading_length",
           "saved_threshold", "scores_from_logits", "saved_tokenizer_limit", "special_frame", "trained_length",
           "uses_sigmoid"]
