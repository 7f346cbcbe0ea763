"""Configuration of the sparse-map Longformer (B. U. Haman, "Transformers Using Local Attention Mappings for Long Text
Document Classification", MSc thesis, İzmir Institute of Technology, 2023): a Longformer whose global tokens are
chosen per document by TF-IDF, PMI, random or first-n selection.

Self-contained (Hub rule): imports only transformers and the standard library, so a saved model loads with
`trust_remote_code=True` where hf_longdoc is not installed.
"""

from transformers import LongformerConfig

GLOBAL_SELECTORS = ("cls", "first_n", "random", "tfidf", "pmi")
PMI_SELECTIONS = ("pairs", "sum")
ATTENTION_BACKENDS = ("auto", "blocked", "flex", "longformer")
CLASSIFIER_POOLINGS = ("cls", "mean", "gated")  # the first two: ModernBERT's names for the same two readings

# The small model `SparseLongformerConfig()` builds (trains on two CPU cores in minutes); anything a Longformer
# checkpoint's config.json holds overrides these.
SMALL_MODEL = dict(vocab_size=8000, hidden_size=256, num_hidden_layers=4, num_attention_heads=4, intermediate_size=1024,
                   attention_window=256, max_position_embeddings=4098)


class GlobalSelectorSettings:
    """The selector settings both of the thesis' backbones (Longformer, Big Bird) take; documented in
    [`SparseLongformerConfig`]."""

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

    def set_selector_settings(self, global_selector, num_global_tokens, pmi_window, pmi_min_count, pmi_max_pairs,
                              pmi_num_pairs, unique_global_tokens, excluded_token_ids, pmi_selection, stop_words):
        if global_selector not in GLOBAL_SELECTORS:
            raise ValueError(f"`global_selector` must be one of {GLOBAL_SELECTORS}, got {global_selector!r}.")
        if pmi_selection not in PMI_SELECTIONS:
            raise ValueError(f"`pmi_selection` must be one of {PMI_SELECTIONS}, got {pmi_selection!r}.")
        if stop_words is not None and stop_words != "english" and (
                isinstance(stop_words, str) or not all(isinstance(word, str) for word in stop_words)):
            raise ValueError(f"`stop_words` must be None, 'english' or a list of words, got {stop_words!r}.")
        for name, value, least in (
            ("num_global_tokens", num_global_tokens, 0),
            ("pmi_window", pmi_window, 2),
            ("pmi_min_count", pmi_min_count, 1),
            ("pmi_max_pairs", pmi_max_pairs, 1),
            ("pmi_num_pairs", pmi_num_pairs, 0),
        ):
            if isinstance(value, bool) or not isinstance(value, int) or value < least:
                raise ValueError(f"`{name}` must be an integer ≥ {least}, got {value!r}.")
        if excluded_token_ids is not None and not all(isinstance(i, int) and i >= 0 for i in excluded_token_ids):
            raise ValueError("`excluded_token_ids` must be a list of non-negative token ids.")
        self.global_selector = global_selector
        self.num_global_tokens = num_global_tokens
        self.pmi_window = pmi_window
        self.pmi_min_count = pmi_min_count
        self.pmi_max_pairs = pmi_max_pairs
        self.pmi_num_pairs = pmi_num_pairs
        self.unique_global_tokens = unique_global_tokens
        self.excluded_token_ids = list(excluded_token_ids) if excluded_token_ids is not None else None
        self.pmi_selection = pmi_selection
        self.stop_words = stop_words if stop_words is None or stop_words == "english" else list(stop_words)


class SparseLongformerConfig(GlobalSelectorSettings, LongformerConfig):
    r"""
    Configuration of a [`SparseLongformerModel`]: every [`LongformerConfig`] setting (so a Longformer checkpoint's
    config.json loads into it and its weights load unchanged), plus how the global tokens are chosen.

    Args:
        global_selector (`str`, defaults to `"tfidf"`):
            How a document's global tokens are picked when `forward` gets no `global_attention_mask` (Chapter 5):
            `"cls"` (only [CLS], Transformers' default), `"first_n"` (the first `num_global_tokens` real tokens),
            `"random"` (uniformly among the real tokens), `"tfidf"` (highest tf·idf, Eq. 4.3) or `"pmi"` (the tokens of
            the pairs with the highest PMI, Eq. 4.4; see `pmi_selection`). `tfidf` and `pmi` need statistics fitted on
            training documents first: `model.fit_global_selector(token_ids)`.
        num_global_tokens (`int`, defaults to 128):
            Global tokens chosen in addition to [CLS] (the thesis: 128).
        pmi_window (`int`, defaults to 10):
            Tokens i < j form a pair when j - i < `pmi_window` (the thesis' window of 10 words, NLTK's `window_size`).
        pmi_selection (`str`, defaults to `"pairs"`):
            `"pairs"`: the thesis' method (5.4.2): the document's pairs ranked by PMI, their tokens global pair by pair
            until `num_global_tokens` are chosen (64 pairs = 128 tokens; a token already chosen is counted once and
            its slot refilled from the next pairs). `"sum"`: each position scored by the sum of the PMI of its pairs,
            the top positions chosen.
        pmi_min_count (`int`, defaults to 3):
            Pairs seen fewer times in the training documents get no PMI (their estimate is noise).
        pmi_max_pairs (`int`, defaults to 2_000_000):
            At most this many pairs (the most frequent) are kept, 12 bytes each.
        pmi_num_pairs (`int`, defaults to 0):
            How many pairs the fitted statistics hold; set by fitting, it sizes the saved buffers.
        unique_global_tokens (`bool`, defaults to `True`):
            At most one position per distinct token id (the thesis' code lets a repeated token take many slots).
        excluded_token_ids (`list[int]`, *optional*):
            Token ids never chosen by `tfidf`/`pmi` and left out of their statistics: special tokens and punctuation.
            Unset: the config's pad/bos/eos/sep ids; `fit_global_selector(..., tokenizer=...)` fills it with the
            tokenizer's special and punctuation-only tokens (and `stop_words`).
        stop_words (`str` or `list[str]`, *optional*):
            Words left out of the TF-IDF / PMI statistics and never chosen, as the thesis tried (5.1, item 5: no
            change in accuracy, 8% faster): `"english"` (scikit-learn's list) or a list of words. Each word the
            tokenizer maps to one token (with or without a leading space, lower-case or capitalised) joins
            `excluded_token_ids` when `fit_global_selector(..., tokenizer=...)` runs. Off by default.
        attention_backend (`str`, defaults to `"auto"`):
            How each layer computes the same attention with the same parameters. `"longformer"`: Transformers'
            `LongformerSelfAttention`, unchanged; `"blocked"`: blocks of queries over their neighbouring key blocks plus
            the global keys, through `scaled_dot_product_attention` (equal within float rounding, faster, far less
            memory; the CPU's fastest); `"flex"`: the window and the global columns as one block-sparse FlexAttention
            kernel (`torch.nn.attention.flex_attention`, compiled on a GPU; eager and slow on the CPU, where it serves
            the equality tests); `"auto"`: the device's choice (`AUTO_BACKEND` in the modeling file): `blocked`,
            except a pass with gradients on a GPU with Triton, which runs `flex` (there its training step is faster
            than `blocked`'s and within dense BERT's memory; it compiles for each new input shape).
            Asking for `output_attentions` runs the `longformer` backend, which materialises the attention
            probabilities.
            FlexAttention has no dropout and no CPU backward, so a training pass with `attention_probs_dropout_prob` >
            0, or one that needs gradients on the CPU, runs `blocked` (logged once). Training with
            `attention_probs_dropout_prob` > 0 materialises the blocked probabilities (PyTorch's fused CPU kernel has no
            dropout): a step at window 512 takes 3-4x as long as without, so `hf-longdoc train` and `compare` set it to
            0.
        attention_checkpointing (`bool`, *optional*):
            Whether a pass that needs gradients recomputes each layer's attention in its backward pass instead of
            keeping what it gathered (the keys and values of every query block's window, ≈3.5 times the layer's keys and
            values, and the global keys and values of every token). The outputs and gradients are the same; a training
            step needs less memory (on a GPU, about dense BERT's) and takes longer. `None`: the device's choice
            (`RECOMPUTES_ATTENTION` in the modeling file: on a GPU, where memory binds; not on the CPU). Unlike
            `gradient_checkpointing_enable()`, which recomputes whole layers, it recomputes only the attention, not the
            projections or the feed-forward layers.
        classifier_pooling (`str`, defaults to `"cls"`):
            What the classification head reads (ModernBERT's setting, the same values): `"cls"`, the final [CLS]
            state (the thesis, 3.1, and Longformer), or `"mean"`, the mean of the final states of the real tokens
            (those `attention_mask` keeps). `"gated"`: a weighted mean, each real token weighted by a learned gate
            σ(w·LN(h_i) + b) on its final state h_i (w = 0, b = 0 at initialisation, so it starts as the mean), so
            the head can learn which tokens carry the label (in a document whose evidence sits after unrelated text,
            those of the evidence). `hf-longdoc train --backbone` sets `"gated"` for a sentence-embedding checkpoint
            trained to embed text by its mean (all-MiniLM-L6-v2), whose [CLS] state was never trained to summarise.
        multi_label_threshold (`float` in (0, 1), *optional*):
            A multi-label model's decision threshold: a label is predicted when its sigmoid score is at least this.
            `hf-longdoc train --threshold` sets it; `predict`, `evaluate` and the long-document pipeline decide at it.
            None (not set: a single-label model, or one saved before the setting existed): hf_longdoc's default,
            `hf_longdoc.inference.reading.DEFAULT_THRESHOLD`.
        max_input_length (`int`, *optional*):
            The most input ids the model reads of one input: a longer one is cut inside `forward` as the tokenizer's
            `truncation=True` cuts it (its first ids and its closing special token), so that a `pipeline` called without
            truncation reads what training read. `hf-longdoc train` sets it to the length it trained at (the saved
            tokenizer's `model_max_length`). None (not set, or saved before the setting existed): what its positions
            hold, `max_position_embeddings - pad_token_id - 1`.
    """

    model_type = "sparse_longformer"
    # Auto class -> `module.Class` of every class that loads this family; hf_longdoc's registry fills it in from its one
    # list (a copy of this file loaded from the Hub reads `auto_map` from config.json instead)
    default_auto_map = None

    def __init__(
        self,
        global_selector="tfidf",
        num_global_tokens=128,
        pmi_window=10,
        pmi_min_count=3,
        pmi_max_pairs=2_000_000,
        pmi_num_pairs=0,
        unique_global_tokens=True,
        excluded_token_ids=None,
        attention_backend="auto",
        attention_checkpointing=None,
        pmi_selection="pairs",
        stop_words=None,
        classifier_pooling="cls",
        multi_label_threshold=None,
        max_input_length=None,
        **kwargs,
    ):
        self.set_selector_settings(global_selector, num_global_tokens, pmi_window, pmi_min_count, pmi_max_pairs,
                                   pmi_num_pairs, unique_global_tokens, excluded_token_ids, pmi_selection, stop_words)
        if attention_backend not in ATTENTION_BACKENDS:
            raise ValueError(f"`attention_backend` must be one of {ATTENTION_BACKENDS}, got {attention_backend!r}.")
        if classifier_pooling not in CLASSIFIER_POOLINGS:
            raise ValueError(f"`classifier_pooling` must be one of {CLASSIFIER_POOLINGS}, got {classifier_pooling!r}.")
        for key, value in SMALL_MODEL.items():
            kwargs.setdefault(key, value)
        self._check_longformer_sizes(kwargs)
        if attention_checkpointing not in (None, True, False):
            raise ValueError("`attention_checkpointing` must be None (the device's choice), True or False, got "
                             f"{attention_checkpointing!r}.")
        self.attention_backend = attention_backend
        self.attention_checkpointing = attention_checkpointing
        self.classifier_pooling = classifier_pooling
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

    @staticmethod
    def _check_longformer_sizes(kwargs):
        """The errors Longformer would raise as bare asserts deep in the model, raised here with what to change."""
        for name in ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size",
                     "max_position_embeddings", "type_vocab_size"):
            value = kwargs.get(name, 1)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"`{name}` must be a positive integer, got {value!r}.")
        for name in ("hidden_dropout_prob", "attention_probs_dropout_prob"):
            value = kwargs.get(name, 0.0)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value < 1.0:
                raise ValueError(f"`{name}` must be a number in [0, 1), got {value!r}.")
        hidden, heads = kwargs["hidden_size"], kwargs["num_attention_heads"]
        if hidden % heads:
            raise ValueError(f"`hidden_size` ({hidden}) must be a multiple of `num_attention_heads` ({heads}).")
        windows = kwargs["attention_window"]
        windows = windows if isinstance(windows, (list, tuple)) else [windows]
        if any(isinstance(w, bool) or not isinstance(w, int) or w <= 0 or w % 2 for w in windows):
            raise ValueError(f"`attention_window` must be a positive even integer (or one per layer), got {windows}.")
        if len(windows) > 1 and len(windows) != kwargs["num_hidden_layers"]:
            raise ValueError(f"`attention_window` lists {len(windows)} windows for {kwargs['num_hidden_layers']} "
                             "layers; give one per layer or a single integer.")
        if len(set(windows)) > 1:
            raise ValueError("The `blocked` backend and the padding rule need one `attention_window` for every layer.")

    @classmethod
    def from_paper(cls, **kwargs):
        """The thesis' Longformer (Chapter 6): longformer-base-4096's sizes (RoBERTa vocabulary of 50,265, width 768,
        12 layers and heads, window 512, 4,096 tokens), 128 TF-IDF global tokens. Load the pre-trained weights with
        `SparseLongformerForSequenceClassification.from_pretrained(<longformer-base-4096 folder>, ...)`."""
        settings = dict(vocab_size=50265, hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
                        intermediate_size=3072, attention_window=512, max_position_embeddings=4098, type_vocab_size=1,
                        layer_norm_eps=1e-5, pad_token_id=1, bos_token_id=0, eos_token_id=2, sep_token_id=2,
                        global_selector="tfidf", num_global_tokens=128, num_labels=8)
        settings.update(kwargs)
        return cls(**settings)

    @classmethod
    def from_size(cls, hidden_size, num_layers, num_heads, max_length,
                  attention_window=512, attention_dropout=None, **kwargs):
        """A model of a given budget (what `hf-longdoc compare` and `bench` give every family): a Longformer of that
        width, depth and heads (intermediate 4·h) with positions for `max_length` tokens (+2: RoBERTa numbering) and the
        thesis' share of global tokens, 128 per 4,096 (1/32; the default 128 is an eighth of a 1,024-token document,
        where it stalls learning). `attention_dropout` overrides the attention-probability dropout. Any keyword
        overrides."""
        settings = dict(hidden_size=hidden_size, num_hidden_layers=num_layers, num_attention_heads=num_heads,
                        intermediate_size=4 * hidden_size, attention_window=attention_window,
                        max_position_embeddings=max_length + 2, num_global_tokens=max(1, max_length // 32))
        if attention_dropout is not None:
            settings["attention_probs_dropout_prob"] = attention_dropout
        settings.update(kwargs)
        return cls(**settings)


__all__ = ["GlobalSelectorSettings", "SparseLongformerConfig"]
