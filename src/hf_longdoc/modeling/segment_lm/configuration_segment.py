"""Configuration of the segment LMs (Olson et al., "Adapting Pretrained Language Models for Long Document
Classification", https://openreview.net/forum?id=ryxW804FPH): a pretrained Transformers LM reads a document as m
segments, and a head combines the segment representations (Base / Cat / RNN / ATT / ablated ATT, Eq. 1-7).

Self-contained (Hub rule): imports only transformers and the standard library.
"""

import copy
import math

from transformers import AutoConfig, PretrainedConfig

VARIANTS = ("base", "cat", "rnn", "att", "att_ablated")
SEGMENT_POOLINGS = ("cls", "last", "mean")
ATTENTION_ACTIVATIONS = ("sigmoid", "softmax")
GRADIENT_MODES = ("paper", "full", "none", "selected")
FIRST_SEGMENTS = ("segment", "head_tail")
# The head + tail window's length and head (Sun et al., 2019's best truncation for BERT: the first 128 and the last 382
# tokens of 512, what `bert-512-headtail` reads)
HEAD_TAIL_LENGTH = 512
HEAD_TAIL_HEAD = 128


def candidate_readout(name, first_segment):
    """{"variant", "first_segment"} of a `variant_candidates` entry, `variant` or `variant:first_segment` (the
    config's `first_segment` when it names none); None when it names an unknown variant or first segment."""
    variant, colon, first = name.partition(":")
    first = first if colon else first_segment
    if variant not in VARIANTS or first not in FIRST_SEGMENTS:
        return None
    return {"variant": variant, "first_segment": first}


# Copied from hf_longdoc.modeling.backbones.backbone_positions
def backbone_positions(backbone_config):
    """How many positions the backbone reads (None: no table): its `max_position_embeddings` (GPT-2:
    `n_positions`), less the pad id + 1 rows a RoBERTa-numbered encoder (RoBERTa, XLM-R, CamemBERT, MPNet) reserves;
    reading more would index past its table."""
    # encoders that number a token's position after the pad id (RoBERTa's `create_position_ids_from_input_ids`)
    pad_numbered = ("roberta", "xlm-roberta", "xlm-roberta-xl", "camembert", "mpnet", "longformer",
                    "roberta-prelayernorm", "data2vec-text", "xmod")
    positions = getattr(backbone_config, "max_position_embeddings", None) or getattr(backbone_config, "n_positions",
                                                                                      None)
    if positions is not None and backbone_config.model_type in pad_numbered:
        pad = 1 if backbone_config.model_type == "mpnet" else backbone_config.pad_token_id or 0  # MPNet fixes it at 1
        positions -= pad + 1
    return positions


# Copied from hf_longdoc.modeling.elementwise.configuration_elementwise.backbone_config_from
def backbone_config_from(value):
    """The backbone's config from a `PretrainedConfig` or a dict naming its `model_type` (the other keys its sizes)."""
    if isinstance(value, dict):
        settings = dict(value)
        if "model_type" not in settings:
            raise ValueError("`backbone_config` as a dict needs a `model_type` (for example 'bert').")
        value = AutoConfig.for_model(settings.pop("model_type"), **settings)
    if not isinstance(value, PretrainedConfig):
        raise TypeError(f"`backbone_config` must be a dict or a PretrainedConfig, got {type(value)}.")
    return value


# Copied from hf_longdoc.modeling.elementwise.configuration_elementwise.backbone_with_sizes
def backbone_with_sizes(backbone_config, kwargs, names):
    """`backbone_config` with the sizes in `kwargs` under the standard `names` (popped from it) set on a copy: a
    config's `hidden_size` is its backbone's, so it must be set before anything is derived from it."""
    sizes = {name: kwargs.pop(name) for name in names if name in kwargs}
    if not sizes:
        return backbone_config
    backbone_config = copy.deepcopy(backbone_config)
    for name, value in sizes.items():
        setattr(backbone_config, name, value)
    return backbone_config


class SegmentLMConfig(PretrainedConfig):
    r"""
    Configuration of a segment LM. The defaults build a small BERT backbone that trains on CPU.

    Args:
        backbone_config (`dict` or `PretrainedConfig`, *optional*):
            The language model LM that encodes each segment (any Transformers encoder or decoder: BERT, RoBERTa,
            GPT-2, ...). A dict needs a `model_type`.
        variant (`str`, defaults to `"att"`):
            `"base"` (Eq. 1: LM(x_1)), `"cat"` (Eq. 2: all m segment vectors), `"rnn"` (Eq. 3: LM(x_1) ⊕ h_2 ⊕ h_m of
            a biLSTM over them), `"att"` (Eq. 4-5: adds the attention pooling a, the weights α and the
            highest-weighted segment LM(x_M(α))) or `"att_ablated"` (Eq. 7: a ⊕ α ⊕ LM(x_M(α))).
        num_segments (`int`, defaults to 8):
            m, the segments a document is cut into (the paper: 8 for patents, 16 for arXiv).
        segment_length (`int`, defaults to 256):
            L, tokens per segment including the two the model adds ([CLS] and [SEP], or the decoder's classification
            token), so each segment holds L - 2 document tokens.
        segment_pooling (`str`, *optional*):
            z_i from the segment's states: `"cls"` (the first token, encoders), `"last"` (the last real token,
            decoders; GPT-2 gets an appended classification token, as in the paper) or `"mean"`. Unset: `"cls"` for
            encoders, `"last"` for decoders (`from_backbone_pretrained`: a sentence-transformers checkpoint's own).
        lstm_hidden_size (`int`, *optional*):
            q, the size of each biLSTM output h_i (q / 2 per direction: Eq. 3 and 5 give the classifier d + 2q and
            2d + 3q + m inputs). Unset: the backbone's hidden size.
        attention_activation (`str`, defaults to `"softmax"`):
            σ of Eq. 4: `"softmax"` of u_iᵀ u_s over the document's present segments (the paper's σ, "followed by the
            softmax function" after Yang et al., as the released code computes it; α sums to 1), or `"sigmoid"` per
            segment (a literal reading of the symbol; α then sums to about m / 2, which rescales a and the α
            features).
        gradient_mode (`str`, defaults to `"paper"`):
            `"paper"`: the LM gets gradient only through segment 1 and (att variants) the argmax segment (Section
            3.1, Appendix A); `"full"`: through every segment, with activation checkpointing (the exact gradient of
            Eq. 8); `"none"`: the LM is frozen; `"selected"`: no gradient through x_1, only through the argmax segment
            of the att variants (Table 4's "No x_1 gradients" row; the other variants then train no LM weight).
        stopped_segment_dropout (`bool`, defaults to `False`):
            Whether the LM's dropout is active while it encodes the segments it gets no gradient through (in training;
            `paper` and `none` modes). Off by default: those segment vectors are features the step does not train,
            so they are computed as at evaluation, which also halves their cost on CPU (dropout forces the slow
            attention path). `True` reproduces the released code, which encoded them in training mode.
        segments_per_pass (`int`, defaults to 16):
            The most segments one backbone pass encodes without gradient or under checkpointing (`full` mode), so
            peak training memory does not grow with m or the batch's segments; larger is faster on a GPU.
        checkpoint_segment_passes (`bool`, defaults to `True`):
            In `full` mode, whether each pass of segments with gradient runs under activation checkpointing: peak
            memory then does not grow with m, at the cost of encoding every segment twice per training step (about
            a third more time). `False` keeps the passes' activations, as any Transformers model does unless
            `gradient_checkpointing_enable()` (the Trainer's `gradient_checkpointing`) is called.
        sentence_packing (`bool`, defaults to `False`):
            Whether segments hold whole sentences: the model's tokenizer (`SegmentLMTokenizer`) packs a document's
            sentences into segments of L - 2 ids and pads each segment's rest with [PAD] ids, which the model then
            reads as places that hold no token. Built for `max_length` tokens with packing, the model has a third
            more segments than fixed windows need, which hold `max_length` document tokens at 3/4 full
            (`segments_to_read`). `False`: fixed windows of L - 2 tokens (the paper's), where a segment may start in
            the middle of a sentence.
        first_segment (`str`, defaults to `"segment"`):
            What x_1, the segment that Eq. 1, 3 and 5 read directly as z_1 = LM(x_1) (the paper's "direct path for
            gradient updates to the language model", Section 3), holds. `"segment"`: the document's first segment (the
            paper's). `"head_tail"`: one more pass of the LM over the head + tail window, the first
            `first_segment_head` and the last `first_segment_length` − 2 − `first_segment_head` document tokens read,
            wrapped in [CLS] .. [SEP] and read with full attention; its vector is z_1 everywhere z_1 enters (directly,
            the biLSTM, α, and z_M(α) when M(α) = 1), with the LM's gradient as the paper's z_1. The paper sizes x_1 to
            the LM's input limit (Eq. 1: "the segment length of x_1 equals the input size limit"), which segments of a
            sentence's length no longer are: this window restores that size, and reads the document's end, where the
            first window would read only its start. Segments 2..m are unchanged; segment 1's own tokens are inside the
            window.
        first_segment_length (`int`, *optional*):
            W, the head + tail window's ids with its [CLS] and [SEP]. Unset: 512, at most the backbone's positions.
        first_segment_head (`int`, *optional*):
            H, the window's ids from the document's start (the rest, W − 2 − H, from its end). Unset: 128 of 512
            (head + tail's), in that proportion of a shorter W.
        variant_candidates (`list[str]`, *optional*):
            Heads that training's head stage fits on the same cached frozen features besides `variant` with
            `first_segment` (a list, or one comma-separated string: `"att,base"`), each scored over 5 folds of the
            training and validation documents together; the head of fewest parameters whose mean score is within one
            standard error of the best is kept (the one-standard-error rule; then the configured one, then the order
            given), and `variant` (and `first_segment`) set to it. Each is a
            variant, read with `first_segment`, or `variant:first_segment` to read z_1 otherwise: `"att,base:head_tail"`
            weighs `att` over the segments (Eq. 3-5) against `base` on the head + tail window (Eq. 1 with x_1 the
            window: head + tail read with full attention); the head stage then caches segment 1's vector and the
            window's, and the folds say which the documents need. Not read at inference. None: `variant` alone.
        keep_document_end (`bool`, *optional*):
            Whether a document longer than the model reads is cut to its first segments and its last ones, which hold
            its last `first_segment_length` − 2 − `first_segment_head` document ids (what the head + tail window reads
            from its end), instead of its first ids (`SegmentLMTokenizer`'s `kept_tail`; `forward` cuts a longer input
            the same way). Unset: `True` when `first_segment` or a `variant_candidates` entry is `"head_tail"`, so that
            every head the stage weighs reads the document as the window does.
        first_segment_dropout (`bool`, defaults to `False`):
            Whether the head + tail window's pass keeps the backbone's dropout in training. `False`: it runs in
            evaluation mode (no dropout; its gradient unchanged otherwise), because with dropout on the attention
            probabilities PyTorch's CPU attention leaves its fused kernel: all-MiniLM-L6-v2, 8 windows of 512,
            forward and backward, 5.7 s with the backbone's dropout against 2.0 s without (2 CPU cores).
        hidden_size / num_hidden_layers / vocab_size (`int`, *optional*):
            Set the backbone's sizes of those names (before q defaults to d), as `--config hidden_size=...` does.
        classifier_dropout (`float`, defaults to 0.1):
            Dropout before the final linear layer (Section 4).
        cls_token_id / sep_token_id (`int`, *optional*):
            The ids that wrap each segment (the tokenizer's [CLS]/[SEP]; a decoder's classification token as
            `sep_token_id`). Unset: the backbone config's, else BERT's 101/102.
        multi_label_threshold (`float` in (0, 1), *optional*):
            A multi-label model's decision threshold: a label is predicted when its sigmoid score is at least this.
            `hf-longdoc train --threshold` sets it; `predict`, `evaluate` and the long-document pipeline decide at it.
            None (not set: a single-label model, or one saved before the setting existed): hf_longdoc's default,
            `hf_longdoc.inference.reading.DEFAULT_THRESHOLD`.
        max_input_length (`int`, *optional*):
            The most input ids the model reads of one input: a longer one is cut inside `forward` as the tokenizer's
            `truncation=True` cuts it (its first ids and its closing [SEP], before it is cut into segments), so that a
            `pipeline` called without truncation reads what training read. `hf-longdoc train` sets it to the length it
            trained at (the saved tokenizer's `model_max_length`). None (not set, or saved before the setting existed):
            what its segments hold, `num_segments` × (`segment_length` − 2) document ids and the [CLS] and [SEP] around
            them.
    """

    model_type = "segment_lm"
    # What the classifier returns beside the logits (`SegmentLMClassifierOutput`): `Trainer.predict` leaves them out
    # of `predictions`, as it leaves out GPT-2's `past_key_values`, so `predictions` is the logits array that
    # Transformers' run_classification.py hands to `np.argmax` (with them it was a tuple, and `np.argmax` failed)
    keys_to_ignore_at_inference = ["alpha", "selected_segment", "segment_mask"]
    # Auto class -> `module.Class` of every class that loads this family; hf_longdoc's registry fills it in from its one
    # list (a copy of this file loaded from the Hub reads `auto_map` from config.json instead)
    default_auto_map = None
    sub_configs = {"backbone_config": AutoConfig}

    def __init__(
        self,
        backbone_config=None,
        variant="att",
        num_segments=8,
        segment_length=256,
        segment_pooling=None,
        lstm_hidden_size=None,
        attention_activation="softmax",
        gradient_mode="paper",
        stopped_segment_dropout=False,
        segments_per_pass=16,
        checkpoint_segment_passes=True,
        sentence_packing=False,
        first_segment="segment",
        first_segment_length=None,
        first_segment_head=None,
        first_segment_dropout=False,
        variant_candidates=None,
        keep_document_end=None,
        classifier_dropout=0.1,
        cls_token_id=None,
        sep_token_id=None,
        multi_label_threshold=None,
        max_input_length=None,
        **kwargs,
    ):
        if backbone_config is None:
            backbone_config = {"model_type": "bert", "hidden_size": 256, "num_hidden_layers": 4,
                               "num_attention_heads": 4, "intermediate_size": 1024, "max_position_embeddings": 512}
        backbone_config = backbone_with_sizes(backbone_config_from(backbone_config), kwargs,
                                              ("hidden_size", "num_hidden_layers", "vocab_size"))
        for name, value, choices in (("variant", variant, VARIANTS),
                                     ("attention_activation", attention_activation, ATTENTION_ACTIVATIONS),
                                     ("gradient_mode", gradient_mode, GRADIENT_MODES),
                                     ("first_segment", first_segment, FIRST_SEGMENTS)):
            if value not in choices:
                raise ValueError(f"`{name}` must be one of {choices}, got {value!r}.")
        if segment_pooling is None:
            segment_pooling = "last" if is_decoder(backbone_config) else "cls"
        if segment_pooling not in SEGMENT_POOLINGS:
            raise ValueError(f"`segment_pooling` must be one of {SEGMENT_POOLINGS}, got {segment_pooling!r}.")
        for name, value, least in (("num_segments", num_segments, 1), ("segment_length", segment_length, 3),
                                   ("segments_per_pass", segments_per_pass, 1)):
            if isinstance(value, bool) or not isinstance(value, int) or value < least:
                raise ValueError(f"`{name}` must be an integer ≥ {least}, got {value!r}.")
        positions = backbone_positions(backbone_config)
        if positions is not None and segment_length > positions:
            raise ValueError(f"`segment_length` ({segment_length}) exceeds the {positions} positions the backbone "
                             "reads; lower it.")
        if first_segment_length is None:
            first_segment_length = min(HEAD_TAIL_LENGTH, positions or HEAD_TAIL_LENGTH)
        if first_segment_head is None and isinstance(first_segment_length, int):
            first_segment_head = HEAD_TAIL_HEAD * first_segment_length // HEAD_TAIL_LENGTH
        for name, value, least in (("first_segment_length", first_segment_length, 3),
                                   ("first_segment_head", first_segment_head, 0)):
            if isinstance(value, bool) or not isinstance(value, int) or value < least:
                raise ValueError(f"`{name}` must be an integer ≥ {least}, got {value!r}.")
        if positions is not None and first_segment_length > positions:
            raise ValueError(f"`first_segment_length` ({first_segment_length}) exceeds the {positions} positions the "
                             "backbone reads; lower it.")
        if first_segment_head > first_segment_length - 2:
            raise ValueError(f"`first_segment_head` ({first_segment_head}) exceeds the {first_segment_length - 2} "
                             f"document ids of the head + tail window (`first_segment_length` − 2); lower it.")
        if isinstance(variant_candidates, str):
            variant_candidates = [name.strip() for name in variant_candidates.split(",") if name.strip()]
        if variant_candidates is not None:
            variant_candidates = list(variant_candidates)
            unknown = [name for name in variant_candidates if not isinstance(name, str)
                       or candidate_readout(name, first_segment) is None]
            if unknown:
                raise ValueError(f"`variant_candidates` must hold variants of {VARIANTS}, each alone or as "
                                 f"variant:first_segment with a first segment of {FIRST_SEGMENTS} (e.g. "
                                 f"'att,base:head_tail'), got {unknown!r}.")
        if keep_document_end is None:
            firsts = {candidate_readout(name, first_segment)["first_segment"] for name in variant_candidates or ()}
            keep_document_end = "head_tail" in firsts | {first_segment}
        if not isinstance(keep_document_end, bool):
            raise ValueError(f"`keep_document_end` must be True, False or None (None: True with a head + tail "
                             f"window), got {keep_document_end!r}.")
        hidden = backbone_config.hidden_size
        lstm_hidden_size = hidden if lstm_hidden_size is None else lstm_hidden_size
        if isinstance(lstm_hidden_size, bool) or not isinstance(lstm_hidden_size, int) or lstm_hidden_size < 2 \
                or lstm_hidden_size % 2:
            raise ValueError(f"`lstm_hidden_size` (q) must be an even integer ≥ 2 (q / 2 per direction), got "
                             f"{lstm_hidden_size!r}.")
        if classifier_dropout is not None and not 0.0 <= classifier_dropout < 1.0:
            raise ValueError(f"`classifier_dropout` must lie in [0, 1), got {classifier_dropout!r}.")
        self.backbone_config = backbone_config
        self.variant = variant
        self.num_segments = num_segments
        self.segment_length = segment_length
        self.segment_pooling = segment_pooling
        self.lstm_hidden_size = lstm_hidden_size
        self.attention_activation = attention_activation
        self.gradient_mode = gradient_mode
        self.stopped_segment_dropout = bool(stopped_segment_dropout)
        self.segments_per_pass = segments_per_pass
        self.checkpoint_segment_passes = bool(checkpoint_segment_passes)
        if not isinstance(sentence_packing, bool):
            raise ValueError(f"`sentence_packing` must be True or False, got {sentence_packing!r}.")
        self.sentence_packing = sentence_packing
        self.first_segment = first_segment
        self.first_segment_length = first_segment_length
        self.first_segment_head = first_segment_head
        self.first_segment_dropout = bool(first_segment_dropout)
        self.variant_candidates = variant_candidates
        self.keep_document_end = keep_document_end
        self.classifier_dropout = classifier_dropout
        self.cls_token_id = _first_set(cls_token_id, getattr(backbone_config, "cls_token_id", None),
                                       getattr(backbone_config, "bos_token_id", None), 101)
        self.sep_token_id = _first_set(sep_token_id, getattr(backbone_config, "sep_token_id", None),
                                       getattr(backbone_config, "eos_token_id", None), 102)
        kwargs.setdefault("pad_token_id", getattr(backbone_config, "pad_token_id", None) or 0)
        self._finish_init(multi_label_threshold, kwargs, max_input_length)

    # Copied from hf_longdoc.modeling.contextualizer.configuration_contextualizer.ContextualizerConfig._finish_init
    def _finish_init(self, multi_label_threshold, kwargs, max_input_length=None):
        """The end of `__init__` every hf_longdoc config shares: the multi-label threshold and `max_input_length`
        checked and kept, the Auto classes' `auto_map` (a saved model then loads with any Auto class, without
        hf_longdoc), Transformers' own settings (`kwargs`), and `num_labels` checked."""
        if multi_label_threshold is not None and (
                isinstance(multi_label_threshold, bool) or not isinstance(multi_label_threshold, (int, float))
                or not 0 < multi_label_threshold < 1):
            raise ValueError(f"`multi_label_threshold` must be a number in (0, 1), or None to decide at hf_longdoc's "
                             f"default; got {multi_label_threshold!r}.")
        self.multi_label_threshold = multi_label_threshold
        if max_input_length is not None and (isinstance(max_input_length, bool) or not isinstance(max_input_length, int)
                                             or max_input_length < 1):
            raise ValueError(f"`max_input_length` must be a positive integer (the input ids the model reads of one "
                             f"input), or None to read all that its positions hold; got {max_input_length!r}.")
        self.max_input_length = max_input_length
        if self.default_auto_map:
            kwargs.setdefault("auto_map", dict(self.default_auto_map))
        super().__init__(**kwargs)
        if self.num_labels < 1:
            raise ValueError(f"`num_labels` must be at least 1 (1: regression), got {self.num_labels}.")

    # Copied from hf_longdoc.modeling.contextualizer.configuration_contextualizer.ContextualizerConfig.from_dict
    @classmethod
    def from_dict(cls, config_dict, **kwargs):
        """Also what `from_pretrained(path, key=value)` builds: Transformers sets each such `key` with `setattr` after
        `__init__`, past its checks, so they run again on the values as set (a bad value is refused when loading, not
        saved to fail at the next load)."""
        loaded = super().from_dict(config_dict, **kwargs)
        config = loaded[0] if isinstance(loaded, tuple) else loaded
        cls(**config.to_dict())
        return loaded

    # the backbone's sizes, under the standard names generic tooling reads (and resize_token_embeddings writes)
    @property
    def hidden_size(self):
        return self.backbone_config.hidden_size

    @hidden_size.setter
    def hidden_size(self, value):
        self.backbone_config.hidden_size = value

    @property
    def vocab_size(self):
        return self.backbone_config.vocab_size

    @vocab_size.setter
    def vocab_size(self, value):
        self.backbone_config.vocab_size = value

    @property
    def num_hidden_layers(self):
        return self.backbone_config.num_hidden_layers

    @num_hidden_layers.setter
    def num_hidden_layers(self, value):
        self.backbone_config.num_hidden_layers = value

    def classifier_input_size(self):
        """The classifier's input width per variant (Eq. 1, 2, 3, 5, 7)."""
        d, q, m = self.hidden_size, self.lstm_hidden_size, self.num_segments
        return {"base": d, "cat": m * d, "rnn": d + 2 * q, "att": 2 * d + 3 * q + m, "att_ablated": q + m + d}[
            self.variant]

    @classmethod
    def from_size(cls, hidden_size, num_layers, num_heads, max_length, segment_length=128, attention_dropout=None,
                  gradient_mode="paper", **kwargs):
        """A model of a given budget (what `hf-longdoc compare` and `bench` give every family): a BERT backbone of that
        width, depth and heads (intermediate 4·h) over segments of `segment_length` tokens, with as many segments m as
        it takes to read `max_length` tokens (each segment holds L - 2 of them). `attention_dropout` overrides the
        backbone's attention-probability dropout; any other keyword overrides."""
        backbone = {"model_type": "bert", "hidden_size": hidden_size, "num_hidden_layers": num_layers,
                    "num_attention_heads": num_heads, "intermediate_size": 4 * hidden_size,
                    "max_position_embeddings": segment_length}
        if attention_dropout is not None:
            backbone["attention_probs_dropout_prob"] = attention_dropout
        settings = {"backbone_config": backbone, "segment_length": segment_length,
                    "num_segments": segments_to_read(max_length, segment_length, kwargs.get("sentence_packing", False)),
                    "gradient_mode": gradient_mode}
        settings.update(kwargs)
        return cls(**settings)



def _first_set(*values):
    return next(value for value in values if value is not None)


def segments_to_read(max_length, segment_length, packed=False):
    """m, the segments of L = `segment_length` tokens it takes to read `max_length` tokens: ⌈(n - 2) / (L - 2)⌉ (a
    tokenizer's [CLS] and [SEP] are dropped; each segment holds L - 2 document tokens), at least 1. With whole
    sentences `packed` into segments, padding ends each segment: then the segments that hold `max_length` tokens at
    `PACKED_FILL` of each, a third more."""
    windows = max(1, -(-(max_length - 2) // max(segment_length - 2, 1)))
    return math.ceil(windows / PACKED_FILL) if packed else windows


# The share of a segment of whole sentences that holds text, with MiniLM's tokenizer at L = 32 (30 ids of text): .775
# on BBC news after movie reviews, .787 on movie reviews (examples/readout_probe.py's `fill`). A model built for
# `max_length` tokens with packing has the segments for them at 3/4 full; a document whose sentences pack worse is cut
# a little earlier, and the run counts the documents it cut. (Packing closes a segment only when the next sentence
# does not fit, so any two consecutive segments hold more than L - 2 tokens: a bound of 1/2, too loose to size by:
# twice the segments gave the demo's Eq. 7 head 80 positions of α to weigh, and .890 against .940 at 54.)
PACKED_FILL = 0.75


def is_decoder(backbone_config):
    """Whether the backbone is a left-to-right decoder (its representation is the last token's state)."""
    return bool(getattr(backbone_config, "is_decoder", False)) or backbone_config.model_type in (
        "gpt2", "openai-gpt", "gpt_neo", "gptj", "llama", "mistral", "qwen2", "opt", "bloom", "falcon")


__all__ = ["SegmentLMConfig"]
