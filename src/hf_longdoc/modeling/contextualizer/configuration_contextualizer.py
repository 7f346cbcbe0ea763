"""Configuration of the Contextualizer (Maupomé & Meurs, "Contextualizer: Connecting the Dots of Context with
Second-Order Attention", Information 13(6):290, 2022).

Self-contained (Hub rule): imports only transformers and the standard library, so a saved model loads with
`trust_remote_code=True` where hf_longdoc is not installed.
"""

from transformers import PretrainedConfig

DEFAULT_CONTEXTS = ("constant", "learned", "random")
ALPHA_NORMALIZERS = ("none", "sigmoid", "softmax")

# Section 4.1: m = 128, K = 5, and the rank u grown to reach 0.5M / 1M / 1.5M / 2M parameters (word-piece embeddings
# excluded). Per step U, V, W and b, plus a LayerNorm, hold 3·u·m + 3·m parameters, so u = 260 gives
# 5 · (3·260·128 + 3·128) ≈ 0.5M, and the other sizes scale u linearly.
PAPER_SIZES = {"0.5M": 260, "1M": 520, "1.5M": 780, "2M": 1040}


class ContextualizerConfig(PretrainedConfig):
    r"""
    Configuration of a [`ContextualizerModel`]. The defaults build the small model of the paper's exploratory
    experiments (m = 128, K = 5) with a rank that trains on two CPU cores in minutes. The model has no maximum length:
    the positional encoding (Eq. 1) is a softmax over however many positions a document has (a saved model reads the
    length it was trained at, `max_input_length`).

    Args:
        vocab_size (`int`, defaults to 8000):
            Number of token ids the symbol embedding e(w) knows.
        hidden_size (`int`, defaults to 128):
            Embedding dimension m of the tokens, the positional encoding and the context vector (paper: 128).
        rank (`int`, defaults to 256):
            Rank u of the third-order attention tensor, factored as U, V (u×m) and W (m×u) in Eq. (5). The paper grows
            u to set the parameter count (Table 2); see `from_paper`.
        num_hidden_layers (`int`, defaults to 5):
            Number K of contextualization steps, each with its own U, V, W, b and LayerNorm (paper: 5).
        default_context (`str`, defaults to `"constant"`):
            How the first context c(0) is set (Table 3): `"constant"` (c(0) = 1), `"learned"` (a parameter c_d) or
            `"random"` (U(-1, 1), redrawn for every document in training; in evaluation a fixed draw seeded by
            `random_context_seed`, so predictions are deterministic).
        alpha_normalizer (`str`, defaults to `"none"`):
            The paper leaves α of Eq. (5) un-normalised (`"none"`). `"sigmoid"` squashes each component to (0, 1);
            `"softmax"` normalises each feature over the document's tokens. A deviation, off by default.
        hidden_dropout_prob (`float`, defaults to 0.1):
            Dropout on the symbol embeddings e(w).
        classifier_dropout (`float`, *optional*):
            Dropout before the classification head; `hidden_dropout_prob` when unset.
        layer_norm_eps (`float`, defaults to 1e-5):
            Epsilon of the LayerNorm of Eq. (7).
        initializer_range (`float`, defaults to 0.02):
            Standard deviation of the normal initialisation of embeddings and linear weights.
        random_context_seed (`int`, defaults to 0):
            Seed of the fixed evaluation draw of c(0) when `default_context="random"`.
        pad_token_id (`int`, defaults to 0):
            Id of the padding token (its embedding row is kept at zero).
        multi_label_threshold (`float` in (0, 1), *optional*):
            A multi-label model's decision threshold: a label is predicted when its sigmoid score is at least this.
            `hf-longdoc train --threshold` sets it; `predict`, `evaluate` and the long-document pipeline decide at it.
            None (not set: a single-label model, or one saved before the setting existed): hf_longdoc's default,
            `hf_longdoc.inference.reading.DEFAULT_THRESHOLD`.
        max_input_length (`int`, *optional*):
            The most input ids the model reads of one input: a longer one is cut inside `forward` as the tokenizer's
            `truncation=True` cuts it (its first ids and its closing special token), so that a `pipeline` called without
            truncation reads what training read. `hf-longdoc train` sets it to the length it trained at (the saved
            tokenizer's `model_max_length`). None (not set, or saved before the setting existed): any length.
    """

    model_type = "contextualizer"
    # Auto class -> `module.Class` of every class that loads this family; hf_longdoc's registry fills it in from its one
    # list (a copy of this file loaded from the Hub reads `auto_map` from config.json instead)
    default_auto_map = None

    def __init__(
        self,
        vocab_size=8000,
        hidden_size=128,
        rank=256,
        num_hidden_layers=5,
        default_context="constant",
        alpha_normalizer="none",
        hidden_dropout_prob=0.1,
        classifier_dropout=None,
        layer_norm_eps=1e-5,
        initializer_range=0.02,
        random_context_seed=0,
        pad_token_id=0,
        multi_label_threshold=None,
        max_input_length=None,
        **kwargs,
    ):
        for name, value in (
            ("vocab_size", vocab_size),
            ("hidden_size", hidden_size),
            ("rank", rank),
            ("num_hidden_layers", num_hidden_layers),
        ):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"`{name}` must be a positive integer, got {value!r}.")
        if default_context not in DEFAULT_CONTEXTS:
            raise ValueError(f"`default_context` must be one of {DEFAULT_CONTEXTS}, got {default_context!r}.")
        if alpha_normalizer not in ALPHA_NORMALIZERS:
            raise ValueError(f"`alpha_normalizer` must be one of {ALPHA_NORMALIZERS}, got {alpha_normalizer!r}.")
        for name, value in (("hidden_dropout_prob", hidden_dropout_prob), ("classifier_dropout", classifier_dropout)):
            if value is not None and not 0.0 <= value < 1.0:
                raise ValueError(f"`{name}` must be in [0, 1), got {value!r}.")
        if pad_token_id is not None and not 0 <= pad_token_id < vocab_size:
            raise ValueError(
                f"`pad_token_id` ({pad_token_id}) must be a valid id below `vocab_size` ({vocab_size}); "
                "set it to the tokenizer's pad id."
            )
        self.vocab_size = vocab_size
        self.hidden_size = hidden_size
        self.rank = rank
        self.num_hidden_layers = num_hidden_layers
        self.default_context = default_context
        self.alpha_normalizer = alpha_normalizer
        self.hidden_dropout_prob = hidden_dropout_prob
        self.classifier_dropout = classifier_dropout
        self.layer_norm_eps = layer_norm_eps
        self.initializer_range = initializer_range
        self.random_context_seed = random_context_seed
        kwargs["pad_token_id"] = pad_token_id
        self._finish_init(multi_label_threshold, kwargs, max_input_length)

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
    def from_paper(cls, size="0.5M", **kwargs):
        """The paper's Table 2 models: m = 128, K = 5, rank u set for `size` in {"0.5M", "1M", "1.5M", "2M"}."""
        if size not in PAPER_SIZES:
            raise ValueError(f"`size` must be one of {tuple(PAPER_SIZES)} (Table 2 of the paper), got {size!r}.")
        settings = {"hidden_size": 128, "num_hidden_layers": 5, "rank": PAPER_SIZES[size]}
        settings.update(kwargs)
        return cls(**settings)

    @classmethod
    def from_size(cls, hidden_size, num_layers, num_heads, max_length, **kwargs):
        """A model of a given budget (what `hf-longdoc compare` and `bench` give every family): width m = `hidden_size`,
        K = `num_layers` steps and rank u = 2m (Table 2's 0.5M model: u = 260 at m = 128); no heads and no length limit,
        so `num_heads` and `max_length` do not apply. Any keyword overrides."""
        settings = {"hidden_size": hidden_size, "rank": 2 * hidden_size, "num_hidden_layers": num_layers}
        settings.update(kwargs)
        return cls(**settings)


__all__ = ["ContextualizerConfig"]
