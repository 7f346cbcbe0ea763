"""The family registry: everything code outside `modeling/` needs to know about a method, so it never names one.

Each `Family` holds its classes (one table of Auto classes, from which the Auto registration, `register_for_auto_class`,
the saved `auto_map` and the tests derive), its paper, how to size it (`Config.from_size`), its variants, the special
tokens it takes from a tokenizer, its own tokenizer if it has one, the statistics it fits before training, and its
benchmark hooks. A new family or backbone is one folder plus one entry here.
"""

import functools
import inspect
import logging
from dataclasses import dataclass, field
from typing import Callable

import torch
from transformers import AutoConfig, AutoModel, AutoModelForMaskedLM, AutoModelForSequenceClassification, AutoTokenizer

from ..tokenization import ElementwiseTokenizer
from .contextualizer import ContextualizerConfig, ContextualizerForSequenceClassification, ContextualizerModel
from .elementwise import ElementwiseConfig, ElementwiseForSequenceClassification, ElementwiseModel
from .elementwise.modeling_elementwise import backbone_materials
from .segment import SegmentLMConfig, SegmentLMForSequenceClassification, SegmentLMModel
from .segment.configuration_segment import VARIANTS as SEGMENT_VARIANTS
from .slstm import SLSTMConfig, SLSTMForMaskedLM, SLSTMForSequenceClassification, SLSTMModel
from .slstm.modeling_slstm import chunk_sizes
from .sparse_longformer import (
    SparseBigBirdConfig,
    SparseBigBirdForSequenceClassification,
    SparseBigBirdModel,
    SparseLongformerConfig,
    SparseLongformerForSequenceClassification,
    SparseLongformerModel,
)
from .sparse_longformer.configuration_sparse_bigbird import ATTENTION_TYPES as BIGBIRD_ATTENTION_TYPES
from .sparse_longformer.configuration_sparse_longformer import ATTENTION_BACKENDS, GLOBAL_SELECTORS

AUTO_CLASSES = {
    "AutoConfig": AutoConfig,
    "AutoModel": AutoModel,
    "AutoModelForSequenceClassification": AutoModelForSequenceClassification,
    "AutoModelForMaskedLM": AutoModelForMaskedLM,
}
SIZE_ARGUMENTS = ("hidden_size", "num_layers", "num_heads", "max_length")  # what every `from_size` takes
logger = logging.getLogger(__name__)

# the sparse-map families' paper (Longformer and Big Bird are its two backbones)
THESIS_TITLE = "Transformers Using Local Attention Mappings for Long Text Document Classification"
THESIS_CITATION = (
    "@mastersthesis{haman2023local,\n"
    f"  title={{{THESIS_TITLE}}},\n"
    "  author={Haman, Bekir Ufuk},\n"
    "  school={{\\.I}zmir Institute of Technology},\n  year={2023},\n"
    "  note={Refined Patents data: https://huggingface.co/datasets/ufukhaman/uspto_balanced_200k_ipc_classification}\n}"
)
SPARSE_LONGFORMER_TOKENS = {"bos_token_id": "start", "eos_token_id": "end", "sep_token_id": "end"}  # Longformer's names
# `train` and `compare` fine-tune the sparse Longformer without dropout on the attention probabilities: with it,
# PyTorch's CPU attention cannot use its fused kernel and a training step at window 512 is 3-4x slower (hidden-state
# dropout stays on); `--config attention_probs_dropout_prob=0.1` restores Longformer's value
SPARSE_LONGFORMER_TRAIN_DEFAULTS = {"attention_probs_dropout_prob": 0.0}


@dataclass(frozen=True, eq=False)  # one instance per family: hashed and compared by identity
class Family:
    """What the package knows about one method."""

    name: str
    config_class: type
    model_class: type
    heads: dict  # Auto class name -> head class
    paper_title: str
    paper_citation: str
    summary: str
    defaults: dict = field(default_factory=dict)  # config overrides for `hf-longdoc train` (small, trains on CPU)
    learning_rate: float = 2e-3  # `hf-longdoc train`'s default for this family
    # (config, max_length or None) -> the family's own tokenizer; None: a WordPiece tokenizer fitted on the train split
    own_tokenizer: Callable | None = None
    special_tokens: dict = field(default_factory=dict)  # config key -> "start" | "end" (see `token_settings`)
    variants: dict = field(default_factory=dict)  # config key -> its choices; `family:choice` sets that key
    bench_reference: tuple = ()  # (variant, "speedup" | "time"): what `bench` measures the family's variants against
    # (model, training input_ids, tokenizer) -> report or None: statistics fitted on the training documents
    fit_statistics: Callable | None = None
    # (model, batch_size, length) -> the family's hot kernel and plain matmuls of its shapes (see `profiling`)
    profile: Callable | None = None
    # config -> the most input ids the model reads (None: no limit); a tokenizer saved with it truncates there
    reading_length: Callable | None = None
    # (pretrained folder or id, tokenizer or None, max_length, config settings) -> (a model around the pretrained
    # weights, the tokenizer it reads: the one given, else the backbone's own or the family's); see `training`
    from_backbone: Callable | None = None
    position_width: str | None = None  # config key: input ids one encoder position reads (elementwise: v), else 1
    # parameter-name prefixes inside the base model that a pretrained backbone does not supply (the head outside the
    # base model is new anyway); `training.new_parameter_names` reads them for `--head-learning-rate`
    new_with_backbone: tuple = ()
    # a frozen backbone (see `head_fitting`): (model, input_ids, attention_mask) -> the tensors the new head reads,
    # batch first, computed once per document; (model, *those tensors) -> logits. None: the frozen backbone runs again
    # in every epoch
    frozen_features: Callable | None = None
    head_logits: Callable | None = None
    card_settings: tuple = ("hidden_size", "num_hidden_layers", "vocab_size")  # config keys the model card lists
    card_limits: str = ""  # a sentence for the model card's "limits" section

    @property
    def classification_class(self):
        return self.heads["AutoModelForSequenceClassification"]

    @property
    def auto_classes(self):
        """Auto class name -> class, for the config, the base model and every head."""
        return {"AutoConfig": self.config_class, "AutoModel": self.model_class, **self.heads}

    @property
    def auto_map(self):
        """The `auto_map` a saved model carries: Auto class name -> `module.Class` in the saved folder."""
        return {auto: f"{cls.__module__.rsplit('.', 1)[-1]}.{cls.__name__}" for auto, cls in self.auto_classes.items()}

    def register(self):
        """Register with the Auto classes (loading without `trust_remote_code`) and for saving with remote code."""
        for auto, cls in self.auto_classes.items():
            if auto == "AutoConfig":
                AutoConfig.register(cls.model_type, cls, exist_ok=True)
            else:
                AUTO_CLASSES[auto].register(self.config_class, cls, exist_ok=True)
            cls.register_for_auto_class(auto)
        self.config_class.default_auto_map = self.auto_map

    def reads(self, config):
        """The most input ids a model with `config` reads, or None when it has no limit."""
        return self.reading_length(config) if self.reading_length is not None else None

    def ids_per_position(self, config):
        """How many input ids one position of the encoder covers (v bytes per material for elementwise models)."""
        return getattr(config, self.position_width) if self.position_width else 1

    def variant_setting(self, variant):
        """`{config key: variant}` for a `family:variant` name, or a ValueError listing the family's variants."""
        for key, choices in self.variants.items():
            if variant in choices:
                return {key: variant}
        known = ", ".join(f"{self.name}:{choice}" for choices in self.variants.values() for choice in choices)
        raise ValueError(f"Unknown variant {self.name}:{variant}; "
                         + (f"the variants are {known}." if known else f"{self.name} has no variants."))

    def token_settings(self, tokenizer):
        """The config's special-token ids taken from `tokenizer` ([CLS] as start, [SEP] as end; bos/eos otherwise)."""
        return special_token_ids(tokenizer, self.special_tokens)

    def size_arguments(self, size):
        """The `from_size` arguments in `size`: the four every family takes, plus the optional knobs (attention
        window, segment length, attention dropout, ...) that this family's `from_size` names; the rest do not apply."""
        accepted = inspect.signature(self.config_class.from_size).parameters
        missing = [name for name in SIZE_ARGUMENTS if name not in size]
        if missing:
            raise ValueError(f"A model size needs {', '.join(SIZE_ARGUMENTS)}; missing {', '.join(missing)}.")
        return {key: value for key, value in size.items() if key in accepted and value is not None}

    def build_config(self, size=None, **settings):
        """The family's config: sized by `size` (`from_size` arguments, see `size_arguments`) or, without one, from its
        `hf-longdoc train` defaults; `settings` override either."""
        self.check_settings(settings)
        if size is None:
            return self.config_class(**{**self.defaults, **settings})
        return self.config_class.from_size(**{**self.size_arguments(size), **settings})

    def has_setting(self, key):
        """Whether the family's config has the setting `key` (a config would also store an unknown key silently)."""
        return hasattr(_default_config(self.config_class), key)

    def check_settings(self, settings):
        """A ValueError naming any key the family's config does not have: a config stores unknown keys silently, so a
        misspelled `--config hidden_sise=64` would otherwise change nothing without a word."""
        unknown = sorted(key for key in settings if not self.has_setting(key))
        if unknown:
            names = ", ".join(f"`{key}`" for key in unknown)
            raise ValueError(f"{self.config_class.__name__} has no setting {names}; check the spelling against its "
                             "docstring.")

    def tokenizer_for(self, config, train_texts, vocab_size=8000, max_length=None):
        """The tokenizer `train` and `compare` use when none is given: the family's own (cut to `max_length` ids), or
        WordPiece fitted on `train_texts` with `model_max_length=max_length`."""
        if self.own_tokenizer is not None:
            return self.own_tokenizer(config, max_length)
        from ..data import fit_wordpiece_tokenizer

        return fit_wordpiece_tokenizer(train_texts, vocab_size=vocab_size, model_max_length=max_length or 4096)


def special_token_ids(tokenizer, roles):
    """`{config key: id}` for `roles` (config key -> "start" | "end"): [CLS] as start and [SEP] as end, else the
    tokenizer's bos and eos."""
    if not roles:
        return {}
    start = tokenizer.cls_token_id if tokenizer.cls_token_id is not None else tokenizer.bos_token_id
    end = tokenizer.sep_token_id if tokenizer.sep_token_id is not None else tokenizer.eos_token_id
    ids = {"start": start, "end": end}
    return {key: ids[role] for key, role in roles.items()}


@functools.cache
def _default_config(config_class):
    """A family's default config, built once: what `check_settings` reads its setting names from (never changed)."""
    return config_class()


def _elementwise_tokenizer(config, max_length=None):
    """The byte-level tokenizer matching the config's v, u and mode (`vgram` reads bytes), at most `max_length` ids."""
    v = config.elements_per_material
    materials = config.max_materials if max_length is None else min(config.max_materials, max_length // v)
    return ElementwiseTokenizer(elements_per_material=v, max_materials=materials,
                                mode="whitespace" if config.mode == "whitespace" else "bytes",
                                long_word=config.long_word)


def _fit_selector_statistics(model, input_ids, tokenizer):
    """Fit TF-IDF and PMI on the training documents when the selector needs them, unless the model holds them already
    (one started from a fitted model)."""
    if model.config.global_selector not in ("tfidf", "pmi"):
        return None
    selector = model.base_model.selector
    if int(selector.idf_num_documents) and int(selector.pmi_num_documents):
        return None
    return model.fit_global_selector(input_ids, tokenizer=tokenizer)


def _segment_lm_from_backbone(path, tokenizer, max_length, **settings):
    """The segment LM around a pretrained encoder or decoder and its tokenizer: segments of L = `segment_length`
    tokens (default: a sentence's for a sentence-embedding checkpoint, else the paper's 256, at most the backbone's
    positions; see `from_backbone_pretrained`) and as many as `max_length` tokens need."""
    tokenizer = tokenizer if tokenizer is not None else AutoTokenizer.from_pretrained(path)
    model = SegmentLMForSequenceClassification.from_backbone_pretrained(path, tokenizer=tokenizer,
                                                                        max_length=max_length, **settings)
    return model, tokenizer  # a decoder's tokenizer has gained a classification token


def _sparse_longformer_from_backbone(path, tokenizer, max_length, **settings):
    """A Longformer checkpoint as it is, or a BERT/RoBERTa checkpoint converted to `max_length` tokens; the special
    token ids come from its tokenizer (a BERT config holds none)."""
    tokenizer = tokenizer if tokenizer is not None else AutoTokenizer.from_pretrained(path)
    settings = {**SPARSE_LONGFORMER_TRAIN_DEFAULTS, **special_token_ids(tokenizer, SPARSE_LONGFORMER_TOKENS),
                **settings}
    if settings["attention_probs_dropout_prob"] == 0.0:
        logger.info("Fine-tuning without attention-probability dropout (the fused CPU attention kernel has none; "
                    "--config attention_probs_dropout_prob=0.1 restores the checkpoint's, at 3-4x the step time).")
    if AutoConfig.from_pretrained(path).model_type in ("longformer", "sparse_longformer"):
        return SparseLongformerForSequenceClassification.from_pretrained(path, **settings), tokenizer
    model = SparseLongformerForSequenceClassification.from_bert_like_pretrained(path, max_length=max_length,
                                                                                **settings)
    return model, tokenizer


def _sparse_bigbird_from_backbone(path, tokenizer, max_length, **settings):
    """A Big Bird checkpoint as it is (any other model type: a ValueError saying what loads)."""
    model_type = AutoConfig.from_pretrained(path).model_type
    if model_type not in ("big_bird", "sparse_bigbird"):
        raise ValueError(f"--backbone {path} is a {model_type!r} model; sparse_bigbird loads Big Bird checkpoints "
                         "(model_type 'big_bird'). For a BERT or RoBERTa checkpoint use --model sparse_longformer, "
                         "which converts it to a long model.")
    tokenizer = tokenizer if tokenizer is not None else AutoTokenizer.from_pretrained(path)
    settings = {**SPARSE_LONGFORMER_TRAIN_DEFAULTS, **settings}
    return SparseBigBirdForSequenceClassification.from_pretrained(path, **settings), tokenizer


def _segment_vectors(model, input_ids, attention_mask):
    """z (b, m, d) and the present-segment mask (b, m): all the segment LM's head reads (Eq. 3-7)."""
    z, present, _ = model.segment_lm.encode_document(input_ids, attention_mask, gradient_mode="none")
    return z, present


def _segment_head_logits(model, z, present):
    return model.head(z, present)[0]


def _first_state(encoder_name):
    """The final [CLS] state (b, 1, d) of the encoder at `model.<encoder_name>`: what a Longformer or Big Bird
    classification head reads."""
    def features(model, input_ids, attention_mask):
        encoder = getattr(model, encoder_name)
        return (encoder(input_ids, attention_mask=attention_mask, return_dict=True).last_hidden_state[:, :1],)

    return features


def _classifier_logits(model, first_state):
    return model.classifier(first_state)


# `train` keeps every byte of a long word (the paper truncates it to v bytes), from scratch and around a backbone
ELEMENTWISE_TRAIN_DEFAULTS = {"long_word": "split"}


def _elementwise_from_backbone(path, tokenizer, max_length, **settings):
    """Elementwise embeddings in front of a pretrained encoder body, reading `max_length` bytes (u·v ≤ max_length;
    None: u = the body's positions, at most 512) with its own byte tokenizer: the backbone's subword tokenizer is
    what the method replaces."""
    backbone = AutoConfig.from_pretrained(path)
    settings = {**ELEMENTWISE_TRAIN_DEFAULTS, **settings}  # as `train` from scratch: every byte of a word is read
    v = settings.get("elements_per_material", backbone.num_attention_heads)
    if "max_materials" not in settings and max_length is not None:
        settings["max_materials"] = max(1, min(backbone_materials(backbone), max_length // v))
    model = ElementwiseForSequenceClassification.from_backbone_pretrained(path, **settings)
    return model, tokenizer if tokenizer is not None else _elementwise_tokenizer(model.config, max_length)


def _slstm_step_profile(model, batch_size, length):
    """One S-LSTM recurrent step on random states, and `torch.matmul`s of the shapes its FLOPs are counted as: ξ
    (b·n, 3H) @ (3H, 7H) for the token gates and h (b·n, H) @ (H, H) for the sentence node's token forget gate, i.e.
    2 · 22·H² per token for window 1. Everything else a step does (gate LayerNorms, sigmoids, softmaxes, cell updates,
    the sentence node) is overhead."""
    device, config = model.device, model.config
    H, tokens = config.hidden_size, batch_size * length
    h = torch.randn(batch_size, length, H, device=device)
    c, g, c_g = torch.randn_like(h), h.mean(dim=1), h.mean(dim=1)
    mask = torch.ones(batch_size, length, dtype=torch.bool, device=device)
    x_term = torch.randn(batch_size, length, 7 * H, device=device)
    sizes = chunk_sizes(length, config.chunk_size, config.window_size)
    xi, w_gates = torch.randn(tokens, 3 * H, device=device), torch.randn(3 * H, 7 * H, device=device)
    h_flat, w_forget = torch.randn(tokens, H, device=device), torch.randn(H, H, device=device)
    return {"name": "recurrent step", "flops": 2 * 22 * H * H * tokens,
            "run": lambda: model.step(h, c, g, c_g, x_term, mask, sizes),
            "matmuls": lambda: (torch.matmul(xi, w_gates), torch.matmul(h_flat, w_forget))}


FAMILIES = {
    "contextualizer": Family(
        name="contextualizer",
        config_class=ContextualizerConfig,
        model_class=ContextualizerModel,
        heads={"AutoModelForSequenceClassification": ContextualizerForSequenceClassification},
        paper_title="Contextualizer: Connecting the Dots of Context with Second-Order Attention",
        paper_citation=(
            "@article{maupome2022contextualizer,\n"
            "  title={Contextualizer: Connecting the Dots of Context with Second-Order Attention},\n"
            "  author={Maupom{\\'e}, Diego and Meurs, Marie-Jean},\n"
            "  journal={Information},\n  volume={13},\n  number={6},\n  pages={290},\n  year={2022},\n"
            "  doi={10.3390/info13060290}\n}"
        ),
        summary=(
            "A linear-time encoder: tokens are embedded with a softmax-over-positions encoding, then K steps of "
            "rank-u second-order (vector) attention refine a single context vector c; the final c(K) is the "
            "document representation. No maximum length."
        ),
        defaults={"hidden_size": 128, "rank": 256, "num_hidden_layers": 3},
        card_settings=("hidden_size", "rank", "num_hidden_layers", "vocab_size", "default_context"),
        card_limits=("The model has no maximum length, but the saved tokenizer truncates at `model_max_length` when "
                     "called with `truncation=True`."),
    ),
    "elementwise": Family(
        name="elementwise",
        config_class=ElementwiseConfig,
        model_class=ElementwiseModel,
        heads={"AutoModelForSequenceClassification": ElementwiseForSequenceClassification},
        paper_title="Elementwise Language Representation",
        paper_citation=(
            "@article{kim2023elementwise,\n"
            "  title={Elementwise Language Representation},\n"
            "  author={Kim, Dunam and Kim, Jeeeun},\n"
            "  journal={arXiv preprint arXiv:2302.13475},\n  year={2023}\n}"
        ),
        summary=(
            "Elementwise embedding: a 260 × c table of byte (element) embeddings replaces the token embeddings of a "
            "Transformers encoder; v elements are concatenated into one w = v·c material (a word, or v raw bytes), "
            "and the encoder, with h = v attention heads, reads u materials, i.e. u·v bytes at the cost of u tokens."
        ),
        defaults=ELEMENTWISE_TRAIN_DEFAULTS,
        learning_rate=1e-4,  # a Transformer trained from scratch: higher rates collapse to the label prior
        own_tokenizer=_elementwise_tokenizer,
        position_width="elements_per_material",
        reading_length=lambda config: config.max_materials * config.elements_per_material,
        from_backbone=_elementwise_from_backbone,
        new_with_backbone=("elementwise.embeddings.",),  # new element and focus embeddings replace the token table
        card_settings=("hidden_size", "num_hidden_layers", "num_attention_heads", "vocab_size"),
    ),
    "slstm": Family(
        name="slstm",
        config_class=SLSTMConfig,
        model_class=SLSTMModel,
        heads={"AutoModelForSequenceClassification": SLSTMForSequenceClassification,
               "AutoModelForMaskedLM": SLSTMForMaskedLM},
        paper_title="Pre-Training a Graph Recurrent Network for Language Representation",
        paper_citation=(
            "@article{wang2022slstm,\n"
            "  title={Pre-Training a Graph Recurrent Network for Language Representation},\n"
            "  author={Wang, Yile and Yang, Linyi and Teng, Zhiyang and Zhou, Ming and Zhang, Yue},\n"
            "  journal={arXiv preprint arXiv:2209.03834},\n  year={2022}\n}"
        ),
        summary=(
            "A graph recurrent encoder (S-LSTM): every token is a node linked to its neighbours and to one sentence "
            "node; L synchronous LSTM-style updates with shared parameters exchange information locally and through "
            "the sentence node, in time linear in the length. The final sentence node is the document vector."
        ),
        # the family's own name: the standard `num_hidden_layers` here would overrule a user's `num_recurrent_steps`
        defaults={"hidden_size": 128, "num_recurrent_steps": 4},
        learning_rate=1e-3,
        profile=_slstm_step_profile,
        reading_length=lambda config: config.max_position_embeddings,
        card_settings=("hidden_size", "num_hidden_layers", "vocab_size", "max_position_embeddings"),
    ),
    "sparse_longformer": Family(
        name="sparse_longformer",
        config_class=SparseLongformerConfig,
        model_class=SparseLongformerModel,
        heads={"AutoModelForSequenceClassification": SparseLongformerForSequenceClassification},
        paper_title=THESIS_TITLE,
        paper_citation=THESIS_CITATION,
        summary=(
            "A Longformer (sliding-window attention plus global tokens; Longformer checkpoints load unchanged) whose "
            "global tokens are chosen per document by TF-IDF or PMI statistics fitted on the training documents "
            "(or randomly, or the first n), instead of [CLS] alone."
        ),
        defaults={"num_global_tokens": 64, **SPARSE_LONGFORMER_TRAIN_DEFAULTS},
        learning_rate=1e-4,
        special_tokens=SPARSE_LONGFORMER_TOKENS,
        variants={"global_selector": GLOBAL_SELECTORS, "attention_backend": ATTENTION_BACKENDS},
        bench_reference=("longformer", "speedup"),  # our model on Transformers' own attention
        fit_statistics=_fit_selector_statistics,
        # RoBERTa-style positions start after the pad id
        reading_length=lambda config: config.max_position_embeddings - config.pad_token_id - 1,
        from_backbone=_sparse_longformer_from_backbone,
        frozen_features=_first_state("longformer"),
        head_logits=_classifier_logits,
        card_settings=("hidden_size", "num_hidden_layers", "num_attention_heads", "vocab_size", "attention_window",
                       "global_selector", "num_global_tokens", "max_position_embeddings",
                       "attention_probs_dropout_prob"),
    ),
    "sparse_bigbird": Family(
        name="sparse_bigbird",
        config_class=SparseBigBirdConfig,
        model_class=SparseBigBirdModel,
        heads={"AutoModelForSequenceClassification": SparseBigBirdForSequenceClassification},
        paper_title=THESIS_TITLE,
        paper_citation=THESIS_CITATION,
        summary=(
            "Big Bird (global, sliding and random blocks; Big Bird checkpoints load unchanged) whose random blocks "
            "are replaced, per document, by the blocks holding the tokens TF-IDF or PMI statistics (or random, or "
            "first-n selection) pick: the thesis' second backbone. `cls` is vanilla Big Bird."
        ),
        defaults={**SPARSE_LONGFORMER_TRAIN_DEFAULTS},
        learning_rate=1e-4,
        special_tokens=SPARSE_LONGFORMER_TOKENS,
        variants={"global_selector": GLOBAL_SELECTORS, "attention_type": BIGBIRD_ATTENTION_TYPES},
        fit_statistics=_fit_selector_statistics,
        reading_length=lambda config: config.max_position_embeddings,
        from_backbone=_sparse_bigbird_from_backbone,
        frozen_features=_first_state("bert"),
        head_logits=_classifier_logits,
        card_settings=("hidden_size", "num_hidden_layers", "num_attention_heads", "vocab_size", "attention_type",
                       "block_size", "num_random_blocks", "global_selector", "num_global_tokens",
                       "max_position_embeddings", "attention_probs_dropout_prob"),
    ),
    "segment_lm": Family(
        name="segment_lm",
        config_class=SegmentLMConfig,
        model_class=SegmentLMModel,
        heads={"AutoModelForSequenceClassification": SegmentLMForSequenceClassification},
        paper_title="Adapting Pretrained Language Models for Long Document Classification",
        paper_citation=(
            "@misc{olson2019adapting,\n"
            "  title={Adapting Pretrained Language Models for Long Document Classification},\n"
            "  author={Olson, Matthew Lyle and Zhang, Lisa and Yu, Chun-Nam},\n  year={2019},\n"
            "  howpublished={ICLR 2020 submission},\n  url={https://openreview.net/forum?id=ryxW804FPH}\n}"
        ),
        summary=(
            "A pretrained language model reads the document as m segments; the segment vectors are combined by "
            "concatenation, a biLSTM, or attention over segments (which also picks the segment the LM learns "
            "from), with gradient through the first and the attended segment only."
        ),
        learning_rate=1e-4,
        special_tokens={"cls_token_id": "start", "sep_token_id": "end"},  # every segment is wrapped as [CLS] .. [SEP]
        variants={"variant": SEGMENT_VARIANTS},
        bench_reference=("base", "time"),  # the paper's Table 3 reports time as a multiple of Base
        # m segments of L - 2 document tokens, plus the [CLS] and [SEP] a tokenizer adds (dropped before cutting)
        reading_length=lambda config: config.num_segments * (config.segment_length - 2) + 2,
        from_backbone=_segment_lm_from_backbone,
        frozen_features=_segment_vectors,
        head_logits=_segment_head_logits,
        card_settings=("hidden_size", "num_hidden_layers", "vocab_size", "variant", "num_segments", "segment_length",
                       "segment_pooling", "gradient_mode"),
    ),
}


def get_family(name):
    """The family called `name`, or a ValueError listing the known ones."""
    key = name.lower().replace("-", "_")
    if key not in FAMILIES:
        raise ValueError(f"Unknown model family {name!r}; choose one of: {', '.join(sorted(FAMILIES))}.")
    return FAMILIES[key]


def resolve(name):
    """`"family"` or `"family:variant"` -> (the Family, the variant's config settings)."""
    family_name, _, variant = name.partition(":")
    family = get_family(family_name)
    return family, family.variant_setting(variant) if variant else {}


def family_of_config(config):
    """The family whose config class built `config`."""
    for family in FAMILIES.values():
        if family.config_class.model_type == config.model_type:
            return family
    raise ValueError(f"Model type {config.model_type!r} is not an hf_longdoc family ({', '.join(FAMILIES)}).")


def register_families():
    """Register every family with the Auto classes, and the elementwise tokenizer with AutoTokenizer."""
    for family in FAMILIES.values():
        family.register()
    AutoTokenizer.register(ElementwiseConfig, slow_tokenizer_class=ElementwiseTokenizer, exist_ok=True)


__all__ = ["FAMILIES", "Family", "family_of_config", "get_family", "register_families", "resolve"]
