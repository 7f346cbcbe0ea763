"""Configuration of the S-LSTM graph recurrent encoder (Wang et al., "Pre-Training a Graph Recurrent Network for
Language Representation", 2022).

Self-contained (Hub rule): imports only transformers and the standard library, so a saved model loads with
`trust_remote_code=True` where hf_longdoc is not installed.
"""

from transformers import PretrainedConfig

WINDOW_COMBINES = ("sum", "concat")
MLM_HEADS = ("eq5", "transform")
POSITION_EMBEDDING_TYPES = ("absolute", "none")

# Section 5.1-5.2 and Table 5: (recurrent steps L, hidden size). "base" is the pre-trained model of Section 5.2
# (10 steps, 1792 hidden, 186M parameters with a 30k SentencePiece vocabulary and 512 positions).
PAPER_SIZES = {
    "base": (10, 1792),
    "6x1280": (6, 1280),
    "12x1280": (12, 1280),
    "6x2048": (6, 2048),
    "12x2048": (12, 2048),
}


class SLSTMConfig(PretrainedConfig):
    r"""
    Configuration of an [`SLSTMModel`]. The defaults build a small model that trains on two CPU cores in minutes;
    `SLSTMConfig.from_paper(...)` gives the paper's sizes.

    Args:
        vocab_size (`int`, defaults to 8000):
            Number of token ids the embedding table E of Eq. 2 knows.
        hidden_size (`int`, defaults to 256):
            Size H of the token embeddings and of every node state h, c, g, c_g (paper: 1792).
        num_recurrent_steps (`int`, defaults to 4):
            Number L of synchronous state updates; one set of parameters is shared by all steps (Section 4, paper:
            10). Also readable as `num_hidden_layers`.
        window_size (`int`, defaults to 1):
            Neighbours k on each side that a token node reads (Eq. 1 uses k = 1).
        window_combine (`str`, defaults to `"sum"`):
            How the k neighbours on a side enter ξ of Eq. 3: `"sum"` adds them (the released code; ξ stays 3H wide)
            or `"concat"` concatenates all 2k+1 states (ξ is (2k+1)H wide). Identical for k = 1. In both, the left and
            right forget gates multiply the sum of the k cells on their side, as the released code does.
        gate_layer_norm (`bool`, defaults to `True`):
            LayerNorm on every gate pre-activation of Eq. 3 and 4 (Section 3.2; the ablation of Fig. 3c turns it off).
        position_embedding_type (`str`, defaults to `"absolute"`):
            `"absolute"`: x = E(w) + P(pos) (Eq. 2) with a learned table of `max_position_embeddings` rows; `"none"`:
            x = E(w) and no length limit (Fig. 3c ablation).
        max_position_embeddings (`int`, defaults to 4096):
            Longest document the position table covers.
        type_vocab_size (`int`, defaults to 0):
            Rows of an optional token-type table added to x for sentence pairs. The paper feeds a pair as one
            concatenated sequence with no segment embedding (0: `token_type_ids` are accepted and ignored).
        hidden_dropout_prob (`float`, defaults to 0.1):
            Dropout on the input x.
        step_dropout_prob (`float`, defaults to 0.0):
            Dropout on h and g after every step (Fig. 3c: no gain, so off).
        classifier_dropout (`float`, *optional*):
            Dropout before the classification head; `hidden_dropout_prob` when unset.
        layer_norm_eps (`float`, defaults to 1e-5):
            Epsilon of the gate LayerNorms and of the masked-LM head's LayerNorm.
        chunk_size (`int`, defaults to 512):
            Tokens a recurrent step updates at a time (with their neighbours), so its gate tensors stay in cache. Only
            speed and memory depend on it, never the result.
        compile_gates (`bool`, *optional*):
            Run each recurrent step through `torch.compile`: the element-wise gate work (Eq. 3's LayerNorms, sigmoids,
            softmax and cell update, and Eq. 4's per-token forget gates) is fused into a few loops, with the copies
            around the matrix products, which stay as they are. Same states (tests check it against the float64
            reference). `None` (the default): compiled where it pays, i.e. where a compiler for the device is present
            (Triton on a GPU, a C++ compiler on the CPU), the input has at least `COMPILE_MIN_TOKENS` (2,048)
            positions, long enough to amortise the compilation, and, on the CPU, the pass needs no gradients (a
            compiled training step was slower there); `True` / `False`: always / never. On a GPU the whole step is
            compiled; on the CPU one run of `chunk_size` tokens, so that every document length shares its graphs. The
            first pass pays the compilation (a few seconds on 2 CPU cores; once more for the first other length and
            for training), which the log reports once per process.
        initializer_range (`float`, defaults to 0.02):
            Standard deviation of the normal initialisation of embeddings and linear weights.
        pad_token_id (`int`, defaults to 0):
            Id of the padding token.
        tie_word_embeddings (`bool`, defaults to `True`):
            Whether the masked-LM decoder is the input embedding E (Eq. 5).
        mlm_head (`str`, defaults to `"eq5"`):
            The masked-LM head: `"eq5"`, P(w | h̃) ∝ exp(E(w)ᵀ W h̃) as Eq. 5 writes it (one linear map W, then the
            tied embeddings); `"transform"`, dense → GELU → LayerNorm → tied decoder with a bias (BERT's head, which the
            released code uses).
        multi_label_threshold (`float` in (0, 1), *optional*):
            A multi-label model's decision threshold: a label is predicted when its sigmoid score is at least this.
            `hf-longdoc train --threshold` sets it; `predict`, `evaluate` and the long-document pipeline decide at it.
            None (not set: a single-label model, or one saved before the setting existed): hf_longdoc's default,
            `hf_longdoc.inference.reading.DEFAULT_THRESHOLD`.
        max_input_length (`int`, *optional*):
            The most input ids the model reads of one input: a longer one is cut inside `forward` as the tokenizer's
            `truncation=True` cuts it (its first ids and its closing special token), so that a `pipeline` called without
            truncation reads what training read. `hf-longdoc train` sets it to the length it trained at (the saved
            tokenizer's `model_max_length`). None (not set, or saved before the setting existed):
            `max_position_embeddings` with absolute positions, any length with relative ones.
    """

    model_type = "slstm"
    # Auto class -> `module.Class` of every class that loads this family; hf_longdoc's registry fills it in from its one
    # list (a copy of this file loaded from the Hub reads `auto_map` from config.json instead)
    default_auto_map = None
    attribute_map = {"num_hidden_layers": "num_recurrent_steps"}

    def __init__(
        self,
        vocab_size=8000,
        hidden_size=256,
        num_recurrent_steps=4,
        window_size=1,
        window_combine="sum",
        gate_layer_norm=True,
        position_embedding_type="absolute",
        max_position_embeddings=4096,
        type_vocab_size=0,
        hidden_dropout_prob=0.1,
        step_dropout_prob=0.0,
        classifier_dropout=None,
        layer_norm_eps=1e-5,
        chunk_size=512,
        compile_gates=None,
        initializer_range=0.02,
        pad_token_id=0,
        tie_word_embeddings=True,
        mlm_head="eq5",
        multi_label_threshold=None,
        max_input_length=None,
        **kwargs,
    ):
        num_recurrent_steps = kwargs.pop("num_hidden_layers", num_recurrent_steps)  # the standard name, mapped
        for name, value, least in (
            ("vocab_size", vocab_size, 1),
            ("hidden_size", hidden_size, 1),
            ("num_recurrent_steps", num_recurrent_steps, 1),
            ("window_size", window_size, 1),
            ("max_position_embeddings", max_position_embeddings, 1),
            ("type_vocab_size", type_vocab_size, 0),
            ("chunk_size", chunk_size, 1),
        ):
            if isinstance(value, bool) or not isinstance(value, int) or value < least:
                raise ValueError(f"`{name}` must be an integer ≥ {least}, got {value!r}.")
        if compile_gates is not None and not isinstance(compile_gates, bool):
            raise TypeError(f"`compile_gates` must be True, False or None (compiled where it pays), got "
                            f"{compile_gates!r}.")
        if window_combine not in WINDOW_COMBINES:
            raise ValueError(f"`window_combine` must be one of {WINDOW_COMBINES}, got {window_combine!r}.")
        if position_embedding_type not in POSITION_EMBEDDING_TYPES:
            raise ValueError(
                f"`position_embedding_type` must be one of {POSITION_EMBEDDING_TYPES}, got {position_embedding_type!r}."
            )
        for name, value in (
            ("hidden_dropout_prob", hidden_dropout_prob),
            ("step_dropout_prob", step_dropout_prob),
            ("classifier_dropout", classifier_dropout),
        ):
            if value is not None and not 0.0 <= value < 1.0:
                raise ValueError(f"`{name}` must lie in [0, 1), got {value!r}.")
        self.vocab_size = vocab_size
        self.hidden_size = hidden_size
        self.num_recurrent_steps = num_recurrent_steps
        self.window_size = window_size
        self.window_combine = window_combine
        self.gate_layer_norm = gate_layer_norm
        self.position_embedding_type = position_embedding_type
        self.max_position_embeddings = max_position_embeddings
        self.type_vocab_size = type_vocab_size
        if mlm_head not in MLM_HEADS:
            raise ValueError(f"`mlm_head` must be one of {MLM_HEADS}, got {mlm_head!r}.")
        self.mlm_head = mlm_head
        self.hidden_dropout_prob = hidden_dropout_prob
        self.step_dropout_prob = step_dropout_prob
        self.classifier_dropout = classifier_dropout
        self.layer_norm_eps = layer_norm_eps
        self.chunk_size = chunk_size
        self.compile_gates = compile_gates
        self.initializer_range = initializer_range
        self.pad_token_id = pad_token_id
        self.tie_word_embeddings = tie_word_embeddings
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

    @classmethod
    def from_paper(cls, size="base", **kwargs):
        """The paper's settings: `"base"` (Section 5.2: 10 steps, hidden 1792, ≈186M parameters) or a Table 5 row
        `"6x1280"`, `"12x1280"`, `"6x2048"`, `"12x2048"`. A 30k vocabulary, 512 positions (the pre-training length),
        window 1 and no dropout (Fig. 3c: dropout gave no gain, so the paper trains without), as in the paper; any
        keyword overrides."""
        if size not in PAPER_SIZES:
            raise ValueError(f"Unknown paper size {size!r}; choose one of {', '.join(PAPER_SIZES)}.")
        steps, hidden = PAPER_SIZES[size]
        settings = {"vocab_size": 30000, "hidden_size": hidden, "num_recurrent_steps": steps, "window_size": 1,
                    "max_position_embeddings": 512, "hidden_dropout_prob": 0.0}
        settings.update(kwargs)
        return cls(**settings)

    @classmethod
    def from_size(cls, hidden_size, num_layers, num_heads, max_length, **kwargs):
        """A model of a given budget (what `hf-longdoc compare` and `bench` give every family): state size
        `hidden_size`, L = `num_layers` recurrent steps, positions for `max_length` tokens; no heads. Any keyword
        overrides."""
        steps = kwargs.pop("num_hidden_layers", kwargs.pop("num_recurrent_steps", num_layers))  # either name
        settings = {"hidden_size": hidden_size, "num_recurrent_steps": steps, "max_position_embeddings": max_length}
        settings.update(kwargs)
        return cls(**settings)


__all__ = ["SLSTMConfig"]
