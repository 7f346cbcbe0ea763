"""Configuration of elementwise models (Kim & Kim, "Elementwise Language Representation", Sections 4.2, 5.2, Table 1).

Self-contained (Hub rule): imports only transformers and the standard library.
"""

import copy

from transformers import AutoConfig, PretrainedConfig

MODES = ("whitespace", "bytes", "vgram")
ELEMENT_VOCAB_SIZE = 260  # PAD, CLS, SEP, MASK and the 256 byte values

# Table 1 (EWE rows): u = 128 materials of v = 16 elements; w = v·c; h = v heads; BERT-base sized backbones.
PAPER_BACKBONES = {
    "bert": {"model_type": "bert", "hidden_size": 768, "num_hidden_layers": 12, "num_attention_heads": 16,
             "intermediate_size": 3072, "max_position_embeddings": 512},
    "albert": {"model_type": "albert", "embedding_size": 128, "hidden_size": 768, "num_hidden_layers": 12,
               "num_attention_heads": 16, "intermediate_size": 3072, "max_position_embeddings": 512},
    "canine": {"model_type": "canine", "hidden_size": 768, "num_hidden_layers": 12, "num_attention_heads": 16,
               "intermediate_size": 3072},
}


def input_embedding_size(backbone_config):
    """What the backbone's `inputs_embeds` must be wide: ALBERT's factorised `embedding_size`, else `hidden_size`."""
    return getattr(backbone_config, "embedding_size", None) or backbone_config.hidden_size


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


class ElementwiseConfig(PretrainedConfig):
    r"""
    Configuration of an [`ElementwiseModel`]: an element embedding table of 260 × c replaces the backbone's token
    embeddings; v elements are concatenated into one w = v·c material, which the backbone reads through
    `inputs_embeds` with h = v attention heads. The defaults build a small BERT backbone that trains on CPU.

    Args:
        backbone_config (`dict` or `PretrainedConfig`, *optional*):
            Config of any Transformers encoder whose model accepts `inputs_embeds` (BERT, ALBERT and CANINE are
            tested). A dict needs a `model_type`. Default: a 4-layer BERT of width 256 with 8 heads.
        elements_per_material (`int`, defaults to 8):
            v, elements (bytes) per material. Must equal the backbone's heads (Section 4.1) unless
            `allow_head_mismatch`.
        element_size (`int`, *optional*):
            c, the size of one element embedding; derived as w / v when unset, and checked against w when set.
        max_materials (`int`, defaults to 512):
            u, the most materials a document may have; the global focus table holds u·v positions.
        mode (`str`, defaults to `"whitespace"`):
            Must match the tokenizer's: `whitespace` or `bytes` feed elements as they are; `vgram` replaces every
            element by the softmax-weighted sum of the v elements starting at it (Section 6.2).
        long_word (`str`, defaults to `"truncate"`):
            What the family's tokenizer (the one `hf-longdoc train` and `compare` build from this config) does in
            `whitespace` mode with a word longer than v bytes: `"truncate"` keeps its first v bytes (Fig. 2: "longer
            ones are truncated"), `"split"` makes every v bytes of it a material, so no byte is lost. The model is
            the same either way. `hf-longdoc train` uses `"split"`.
        use_focus_embeddings (`bool`, *optional*):
            Add the global (per element position) and local (per position inside a material) focus embeddings of
            Section 4.2. Default: on, except in `vgram` mode where the paper leaves them out.
        embedding_dropout (`float`, defaults to 0.0):
            Dropout on the materials before the backbone's own embedding block (Section 4.2: "dropout and
            normalization can be applied to embeddings" before the parent model). Off by default: the elementwise
            table replaces the parent's token table and nothing else, so the parent's embedding block (material
            positions, token types, its LayerNorm and dropout) normalises and drops out the materials once.
        use_embedding_layer_norm (`bool`, defaults to `False`):
            LayerNorm on the materials before the backbone's own embedding block (Section 4.2's optional
            normalisation; with it the materials are normalised twice, here and in the parent's block).
        allow_head_mismatch (`bool`, defaults to `False`):
            Permit a backbone whose heads differ from v (the ablation of Section 6.2's footnote).
        hidden_size / num_hidden_layers / num_attention_heads (`int`, *optional*):
            Set the backbone's sizes of those names (before w = v·c is split), as `--config hidden_size=...` does.
        layer_norm_eps (`float`, defaults to 1e-12), initializer_range (`float`, defaults to 0.02):
            As in BERT.
        classifier_dropout (`float`, *optional*):
            Dropout before the classification head; the backbone's `hidden_dropout_prob` when unset (as Transformers'
            BERT classifier).
        pooling (`str`, *optional*):
            What the classification head reads: `"pooler"` (default: the backbone's pooled output, as Transformers'
            BERT, ALBERT and CANINE classifiers do) or `"first_material"` (the final state of the first material; the
            backbone is then built without its pooler). With CANINE, `"pooler"` reads the molecules, so the
            upsampling layers get no gradient (DDP then needs `ddp_find_unused_parameters=True`), while
            `"first_material"` uses every layer but is not padding-invariant (CANINE's upsampling sees the padding).
        multi_label_threshold (`float` in (0, 1), *optional*):
            A multi-label model's decision threshold: a label is predicted when its sigmoid score is at least this.
            `hf-longdoc train --threshold` sets it; `predict`, `evaluate` and the long-document pipeline decide at it.
            None (not set: a single-label model, or one saved before the setting existed): hf_longdoc's default,
            `hf_longdoc.inference.reading.DEFAULT_THRESHOLD`.
        max_input_length (`int`, *optional*):
            The most element ids the model reads of one input: a longer one is cut inside `forward` as the tokenizer's
            `truncation=True` cuts it (its first materials and its closing one), so that a `pipeline` called without
            truncation reads what training read. `hf-longdoc train` sets it to the length it trained at (the saved
            tokenizer's `model_max_length`). None (not set, or saved before the setting existed): `max_materials` ×
            `elements_per_material`.
    """

    model_type = "elementwise"
    # Auto class -> `module.Class` of every class that loads this family; hf_longdoc's registry fills it in from its one
    # list (a copy of this file loaded from the Hub reads `auto_map` from config.json instead)
    default_auto_map = None
    sub_configs = {"backbone_config": AutoConfig}

    def __init__(
        self,
        backbone_config=None,
        elements_per_material=8,
        element_size=None,
        max_materials=512,
        mode="whitespace",
        long_word="truncate",
        use_focus_embeddings=None,
        embedding_dropout=0.0,
        use_embedding_layer_norm=False,
        allow_head_mismatch=False,
        layer_norm_eps=1e-12,
        initializer_range=0.02,
        classifier_dropout=None,
        pooling=None,
        pad_token_id=0,
        multi_label_threshold=None,
        max_input_length=None,
        **kwargs,
    ):
        if backbone_config is None:
            backbone_config = {"model_type": "bert", "hidden_size": 256, "num_hidden_layers": 4,
                               "num_attention_heads": 8, "intermediate_size": 1024, "max_position_embeddings": 512}
        backbone_config = backbone_with_sizes(backbone_config_from(backbone_config), kwargs,
                                              ("hidden_size", "num_hidden_layers", "num_attention_heads"))
        v = elements_per_material
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"`elements_per_material` must be a positive integer, got {v!r}.")
        w = input_embedding_size(backbone_config)
        if w % v:
            raise ValueError(
                f"The backbone's input embedding size w ({w}) must be a multiple of `elements_per_material` v ({v}) "
                f"so that w = v × c; change v or the backbone's {_width_name(backbone_config)}."
            )
        if element_size is None:
            element_size = w // v
        elif element_size * v != w:
            raise ValueError(
                f"`elements_per_material` × `element_size` ({v}×{element_size}={v * element_size}) must equal the "
                f"backbone's input embedding size w ({w}); change one of them."
            )
        heads = backbone_config.num_attention_heads
        if heads != v and not allow_head_mismatch:
            raise ValueError(
                f"The backbone has {heads} attention heads but `elements_per_material` is {v}; elementwise embedding "
                f"aligns the n-th elements in the n-th head (h = v). Set the backbone's `num_attention_heads` to {v}, "
                "or `allow_head_mismatch=True` for the ablation."
            )
        positions = backbone_positions(backbone_config)
        if backbone_config.model_type == "canine":  # CANINE sizes its position table by `num_hash_buckets`
            positions = min(positions, backbone_config.num_hash_buckets)
        if isinstance(max_materials, bool) or not isinstance(max_materials, int) or max_materials < 1:
            raise ValueError(f"`max_materials` must be a positive integer, got {max_materials!r}.")
        if positions is not None and max_materials > positions:
            raise ValueError(
                f"`max_materials` ({max_materials}) exceeds the {positions} positions the backbone reads "
                "(`max_position_embeddings`, less the pad id + 1 for RoBERTa-numbered encoders, and "
                "`num_hash_buckets` for CANINE); lower it or raise the backbone's."
            )
        if mode not in MODES:
            raise ValueError(f"`mode` must be one of {MODES}, got {mode!r}.")
        if long_word not in ("truncate", "split"):
            raise ValueError(f"`long_word` must be 'truncate' (the paper) or 'split' (every byte kept), got "
                             f"{long_word!r}.")
        if pooling is None:
            pooling = "pooler"
        if pooling not in ("pooler", "first_material"):
            raise ValueError(f"`pooling` must be 'pooler' or 'first_material', got {pooling!r}.")
        if use_focus_embeddings is None:
            use_focus_embeddings = mode != "vgram"
        for name, value in (("embedding_dropout", embedding_dropout), ("classifier_dropout", classifier_dropout)):
            if value is not None and not 0.0 <= value < 1.0:
                raise ValueError(f"`{name}` must be in [0, 1), got {value!r}.")
        self.backbone_config = backbone_config
        self.elements_per_material = v
        self.element_size = element_size
        self.max_materials = max_materials
        self.mode = mode
        self.long_word = long_word
        self.use_focus_embeddings = use_focus_embeddings
        self.embedding_dropout = embedding_dropout
        self.use_embedding_layer_norm = use_embedding_layer_norm
        self.allow_head_mismatch = allow_head_mismatch
        self.layer_norm_eps = layer_norm_eps
        self.initializer_range = initializer_range
        self.classifier_dropout = classifier_dropout
        self.pooling = pooling
        self.vocab_size = ELEMENT_VOCAB_SIZE
        kwargs.pop("vocab_size", None)
        kwargs["pad_token_id"] = pad_token_id
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

    # The backbone's sizes, under the standard names, so generic tooling reads (and sets) them here.
    @property
    def hidden_size(self):
        return self.backbone_config.hidden_size

    @hidden_size.setter
    def hidden_size(self, value):
        self.backbone_config.hidden_size = value

    @property
    def num_hidden_layers(self):
        return self.backbone_config.num_hidden_layers

    @num_hidden_layers.setter
    def num_hidden_layers(self, value):
        self.backbone_config.num_hidden_layers = value

    @property
    def num_attention_heads(self):
        return self.backbone_config.num_attention_heads

    @num_attention_heads.setter
    def num_attention_heads(self, value):
        self.backbone_config.num_attention_heads = value

    @classmethod
    def from_paper(cls, backbone="bert", tokenization="whitespace", **kwargs):
        """The paper's settings. `tokenization="whitespace"`: Table 1's EWE, u = 128, v = 16, h = 16, w = 768 (BERT,
        CANINE) or 128 (ALBERT), c = w / v. `"bytes"`: Table 5's tokenization-free BERT_EWE on raw UTF-8 bytes, the
        same sizes. `"gradient"`: Table 5's v-gram model (Section 6.2): every element replaced by the softmax-weighted
        sum of the v-gram starting at it, n = v = 8 heads, no focus embeddings; Section 6.2 does not give its u, so
        u = 256 keeps the 2,048 bytes of the other two rows."""
        if backbone not in PAPER_BACKBONES:
            raise ValueError(f"`backbone` must be one of {tuple(PAPER_BACKBONES)} (Table 1), got {backbone!r}.")
        presets = {"whitespace": dict(elements_per_material=16, max_materials=128),
                   "bytes": dict(elements_per_material=16, max_materials=128, mode="bytes"),
                   "gradient": dict(elements_per_material=8, max_materials=256, mode="vgram")}
        if tokenization not in presets:
            raise ValueError(f"`tokenization` must be one of {tuple(presets)} (Section 6.2), got {tokenization!r}.")
        backbone_config = dict(PAPER_BACKBONES[backbone])
        backbone_config["num_attention_heads"] = presets[tokenization]["elements_per_material"]  # h = v
        settings = {"backbone_config": backbone_config, **presets[tokenization]}
        settings.update(kwargs)
        return cls(**settings)

    @classmethod
    def from_size(cls, hidden_size, num_layers, num_heads, max_length, attention_dropout=None, **kwargs):
        """A model of a given budget (what `hf-longdoc compare` and `bench` give every family): a BERT backbone of that
        width and depth (intermediate 4·h) reading up to `max_length` materials, one per word as a subword model reads
        `max_length` tokens. Section 4.1 aligns the n-th element with the n-th head (h = v), so the heads fix v:
        v = max(`num_heads`, 8), at least the 8 bytes that hold a typical English word (whitespace mode cuts longer
        words). `elements_per_material` sets v (and the heads) directly; `attention_dropout` overrides the
        backbone's attention-probability dropout; any other keyword overrides."""
        v = kwargs.pop("elements_per_material", max(num_heads, 8))
        backbone = {"model_type": "bert", "hidden_size": hidden_size, "num_hidden_layers": num_layers,
                    "num_attention_heads": v, "intermediate_size": 4 * hidden_size,
                    "max_position_embeddings": max_length}
        if attention_dropout is not None:
            backbone["attention_probs_dropout_prob"] = attention_dropout
        settings = {"backbone_config": backbone, "elements_per_material": v, "max_materials": max_length}
        settings.update(kwargs)
        return cls(**settings)


def _width_name(backbone_config):
    return "embedding_size" if getattr(backbone_config, "embedding_size", None) else "hidden_size"


__all__ = ["ElementwiseConfig"]
