"""Fit a WordPiece tokenizer on a training split with the `tokenizers` library (seconds, not minutes), and save a
tokenizer so that Transformers 4 and 5 both load it."""

import json
import os

from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers
from transformers import PreTrainedTokenizerFast

from ..utils.parsing import is_hub_id

SPECIAL_TOKENS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def fit_wordpiece_tokenizer(texts, vocab_size=8000, model_max_length=4096, lowercase=True):
    """A BERT-style WordPiece tokenizer fitted on `texts`; PAD is id 0, and it returns no token_type_ids.

    `model_max_length` is what the model will read; encoding longer text with `truncation=True` cuts there.

    The same texts give the same tokenizer in every process. The trainer creates a `##` token for each character the
    first time it meets it inside a word, in hash-map order (different in every process), and breaks ties between
    equally frequent merges by those ids (tokenizers issue #1794, fix proposed in PR #2066): on 100 BBC articles six
    fits gave six vocabularies, so the same run trained different models. So every `##` character token is made
    beforehand, in sorted order (`continuation_tokens`, given to the trainer with the special tokens, whose ids come
    first); the vocabulary is then renumbered with the special tokens first and the rest sorted.
    """
    normalizer, pre_tokenizer = normalizers.BertNormalizer(lowercase=lowercase), pre_tokenizers.BertPreTokenizer()
    texts = texts if isinstance(texts, list) else list(texts)
    continuation = continuation_tokens(texts, normalizer, pre_tokenizer)
    trainer = trainers.WordPieceTrainer(vocab_size=vocab_size, special_tokens=SPECIAL_TOKENS + continuation,
                                        show_progress=False)
    fitting = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    fitting.normalizer, fitting.pre_tokenizer = normalizer, pre_tokenizer
    fitting.train_from_iterator(texts, trainer=trainer)
    # a fresh tokenizer holds the vocabulary, so that the `##` tokens are ordinary tokens there, not special ones
    learned = sorted(token for token in fitting.get_vocab() if token not in SPECIAL_TOKENS)
    tokenizer = Tokenizer(models.WordPiece({token: i for i, token in enumerate(SPECIAL_TOKENS + learned)},
                                           unk_token="[UNK]"))
    tokenizer.normalizer, tokenizer.pre_tokenizer = normalizer, pre_tokenizer
    tokenizer.decoder = decoders.WordPiece()
    tokenizer.add_special_tokens(SPECIAL_TOKENS)
    cls_id, sep_id = tokenizer.token_to_id("[CLS]"), tokenizer.token_to_id("[SEP]")
    tokenizer.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B [SEP]", special_tokens=[("[CLS]", cls_id), ("[SEP]", sep_id)]
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        unk_token="[UNK]",
        pad_token="[PAD]",
        cls_token="[CLS]",
        sep_token="[SEP]",
        mask_token="[MASK]",
        model_max_length=model_max_length,
        model_input_names=["input_ids", "attention_mask"],
    )


def continuation_tokens(texts, normalizer, pre_tokenizer):
    """`##c` for every character c found inside a word of `texts` (after the first character), sorted: the `##`
    tokens the WordPiece trainer would create as it meets them."""
    inside = set()
    for text in texts:
        if text:
            words = pre_tokenizer.pre_tokenize_str(normalizer.normalize_str(text))
            inside.update("".join(word[1:] for word, _ in words))
    return [f"##{character}" for character in sorted(inside)]


# Transformers 5 writes `"tokenizer_class": "TokenizersBackend"` for a fast tokenizer without a class of its own (the
# fitted WordPiece, and checkpoints such as ModernBERT's that name `PreTrainedTokenizerFast`), a class Transformers 4
# lacks: its AutoTokenizer (4.57, what Optimum installs) refuses the folder. `PreTrainedTokenizerFast` is that class in
# 4 and an alias of TokenizersBackend in 5, and either reads the same tokenizer.json, so the same ids.
PORTABLE_TOKENIZER_CLASSES = {"TokenizersBackend": "PreTrainedTokenizerFast"}


def save_tokenizer(tokenizer, folder):
    """`tokenizer.save_pretrained(folder)` (the files it wrote), naming in tokenizer_config.json a class that
    Transformers 4 and 5 both load (`PORTABLE_TOKENIZER_CLASSES`). Transformers 4 then reads tokenizer_config.json
    before config.json, so the tokenizer loads there without the remote-code question the model's `auto_map` asks.
    A tokenizer with a class of its own (BertTokenizer, the elementwise or sentence-packing tokenizer, whose
    `auto_map` names its remote code) is saved as it is."""
    files = tokenizer.save_pretrained(folder)
    path = os.path.join(folder, "tokenizer_config.json")
    with open(path, encoding="utf-8") as f:
        saved = json.load(f)
    portable = PORTABLE_TOKENIZER_CLASSES.get(saved.get("tokenizer_class"))
    if portable is not None:
        saved["tokenizer_class"] = portable
        with open(path, "w", encoding="utf-8") as f:  # as `save_pretrained` writes it
            f.write(json.dumps(saved, indent=2, sort_keys=True, ensure_ascii=False) + "\n")
    return files


# What a tokenizer's `save_pretrained` writes: a folder with none of these holds no tokenizer (Transformers then asks
# to install sentencepiece, or builds one without a vocabulary)
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "vocab.txt", "vocab.json", "spiece.model",
                   "sentencepiece.bpe.model", "tokenizer.model")


def has_tokenizer_files(folder):
    """Whether `folder` holds what a tokenizer's `save_pretrained` writes."""
    return any(os.path.isfile(os.path.join(folder, name)) for name in TOKENIZER_FILES)


def load_tokenizer(source, argument, fix="save the tokenizer there with `tokenizer.save_pretrained`"):
    """`AutoTokenizer.from_pretrained(source)`, refusing (a ValueError naming `argument`, and the `fix`) a tokenizer
    without a vocabulary: Transformers builds one from a folder that holds a model config but no tokenizer files, and
    it maps every word to [UNK], so a run would train and save as usual on nothing."""
    from transformers import AutoTokenizer

    local = os.path.expanduser(source)
    if not is_hub_id(source) and not os.path.exists(local):
        raise ValueError(f"{argument} {source!r} does not exist; pass a folder saved with `save_pretrained` or a Hub "
                         "id.")
    if os.path.isdir(local) and not has_tokenizer_files(source):
        raise ValueError(f"{argument} {source!r} holds no usable tokenizer: the folder holds no tokenizer files "
                         f"(none of {', '.join(TOKENIZER_FILES)}); {fix}.")
    try:
        tokenizer = AutoTokenizer.from_pretrained(source)
    except (OSError, ValueError) as error:
        raise ValueError(f"{argument} {source!r}: no tokenizer could be loaded ({error}); {fix}.") from None
    # A tokenizer config without its vocabulary file (vocab.txt, tokenizer.json, spiece.model, ...) makes Transformers
    # build a tokenizer whose vocabulary holds only the special tokens (and, for SentencePiece classes, the word-start
    # piece "▁"). That is the fault to refuse; a vocabulary fitted on another script (Greek, Arabic, protein letters)
    # maps English text to [UNK] and is still the model's own, so no English probe decides it.
    learned = vocabulary_entries(tokenizer)
    if learned == 0:
        present = sorted(name for name in TOKENIZER_FILES if os.path.isfile(os.path.join(local, name)))
        where = (f" (the folder holds {', '.join(present) or 'no tokenizer file'} but no vocabulary file: none of "
                 f"{', '.join(VOCABULARY_FILES)})" if os.path.isdir(local) else "")
        special = len(set(tokenizer.all_special_ids))
        raise ValueError(f"{argument} {source!r} holds no usable tokenizer: its vocabulary has no entries besides the "
                         f"{special} special token{'s' if special != 1 else ''}{where}, so every word would be read "
                         f"as the unknown token; {fix}.")
    return tokenizer


# Files that hold a vocabulary (a tokenizer's `save_pretrained` writes one of them, unless its class builds its
# vocabulary itself, as byte-level tokenizers do)
VOCABULARY_FILES = ("tokenizer.json", "vocab.txt", "vocab.json", "spiece.model", "sentencepiece.bpe.model",
                    "tokenizer.model")
WORD_BOUNDARY_PIECES = ("▁", "Ġ", "##", "Ċ", "")  # what a SentencePiece/BPE fallback holds without a vocabulary


def vocabulary_entries(tokenizer):
    """How many entries of `tokenizer`'s vocabulary are neither special tokens nor a bare word-boundary piece."""
    special = set(tokenizer.all_special_tokens)
    return sum(token not in special and token not in WORD_BOUNDARY_PIECES for token in tokenizer.get_vocab())
