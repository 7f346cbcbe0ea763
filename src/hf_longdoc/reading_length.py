"""How many input ids a model reads, decided once: from the model, the length asked for and the tokenizer's limit.

`train`, `compare`, `evaluate`, the long-document pipeline and `predict` all ask `reading_length`. A run then sets its
tokenizer's `model_max_length` from the answer, once, right before tokenizing, so the saved tokenizer truncates where
the model stops reading; nothing reads `model_max_length` back as the source of truth (a saved tokenizer's limit is
only an input here, `tokenizer_limit`, the length its training run read).
"""

import logging

from .modeling.backbones import backbone_positions
from .modeling.registry import family_of_config

logger = logging.getLogger(__name__)

UNBOUNDED = 10**6  # a tokenizer's model_max_length above this means "not set" (Transformers uses 1e30)


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


def reading_length(config, requested=None, tokenizer_limit=None):
    """The most input ids a model with `config` reads: those that hold `requested` document tokens (the user's
    `max_length`; `ids_for_tokens`), else `tokenizer_limit` (a saved tokenizer's `model_max_length`, in ids; above
    UNBOUNDED it is unset), cut to what the model reads
    (`model_limit`) and to whole positions (elementwise: a multiple of v bytes). None when nothing bounds it (the
    contextualizer and the S-LSTM read any length). A request the model cannot read is cut, with a warning."""
    limit, width = model_limit(config)
    if requested is not None:
        wanted = ids_for_tokens(config, requested)
    elif tokenizer_limit is not None and tokenizer_limit < UNBOUNDED:
        wanted = tokenizer_limit
    else:
        wanted = None
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


__all__ = ["UNBOUNDED", "ids_for_tokens", "model_limit", "reading_length"]
