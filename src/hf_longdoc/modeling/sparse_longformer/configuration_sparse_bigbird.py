"""Configuration of the thesis' second backbone (Haman, 2023, Chapters 5-6): Transformers' Big Bird whose block-sparse
attention gives each document the blocks holding its selected tokens (TF-IDF, PMI, random, first-n) in place of
random blocks.

Self-contained (Hub rule): imports only transformers, the standard library and sibling files.
"""

from transformers import BigBirdConfig

from .configuration_sparse_longformer import GlobalSelectorSettings

# The small model `SparseBigBirdConfig()` builds; anything a Big Bird checkpoint's config.json holds overrides these.
SMALL_BIGBIRD = dict(vocab_size=8000, hidden_size=256, num_hidden_layers=4, num_attention_heads=4,
                     intermediate_size=1024, max_position_embeddings=4096, block_size=64, num_random_blocks=3)
ATTENTION_TYPES = ("block_sparse", "original_full")


class SparseBigBirdConfig(GlobalSelectorSettings, BigBirdConfig):
    r"""
    Configuration of a [`SparseBigBirdModel`]: every [`BigBirdConfig`] setting (so a Big Bird checkpoint's config.json
    loads into it and its weights load unchanged), plus how a document's tokens are selected. The selector settings
    (`global_selector`, `num_global_tokens`, `pmi_window`, `pmi_min_count`, `pmi_max_pairs`, `pmi_num_pairs`,
    `pmi_selection`, `unique_global_tokens`, `excluded_token_ids`, `stop_words`) mean what they mean in
    [`SparseLongformerConfig`], with one difference: `global_selector="cls"` is vanilla Big Bird (its own global,
    sliding and random blocks, exactly Transformers' computation). As there, `multi_label_threshold` is a
    multi-label model's decision threshold (None: hf_longdoc's default), and `max_input_length` the most input ids
    the model reads of one input, a longer one cut inside `forward` as the tokenizer's `truncation=True` cuts it (None:
    `max_position_embeddings`; `hf-longdoc train` sets it to the length it trained at).
    """

    model_type = "sparse_bigbird"
    default_auto_map = None  # filled in by hf_longdoc's registry, as for the sparse Longformer

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
        pmi_selection="pairs",
        stop_words=None,
        multi_label_threshold=None,
        max_input_length=None,
        **kwargs,
    ):
        self.set_selector_settings(global_selector, num_global_tokens, pmi_window, pmi_min_count, pmi_max_pairs,
                                   pmi_num_pairs, unique_global_tokens, excluded_token_ids, pmi_selection, stop_words)
        for key, value in SMALL_BIGBIRD.items():
            kwargs.setdefault(key, value)
        if kwargs.get("attention_type", "block_sparse") not in ATTENTION_TYPES:
            raise ValueError(f"`attention_type` must be one of {ATTENTION_TYPES}, got {kwargs['attention_type']!r}.")
        for name in ("block_size", "num_random_blocks", "hidden_size", "num_attention_heads", "vocab_size",
                     "max_position_embeddings"):
            value = kwargs[name]
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"`{name}` must be a positive integer, got {value!r}.")
        if kwargs["hidden_size"] % kwargs["num_attention_heads"]:
            raise ValueError(f"`hidden_size` ({kwargs['hidden_size']}) must be a multiple of `num_attention_heads` "
                             f"({kwargs['num_attention_heads']}).")
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

    @classmethod
    def from_paper(cls, **kwargs):
        """The thesis' Big Bird (Chapter 6): bigbird-roberta-base's sizes (vocabulary of 50,358, width 768, 12 layers
        and heads, blocks of 64, 3 random blocks, 4,096 tokens), 128 TF-IDF tokens, 8 IPC sections. Load the
        pre-trained weights with `SparseBigBirdForSequenceClassification.from_pretrained(<folder>, ...)`."""
        settings = dict(vocab_size=50358, hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
                        intermediate_size=3072, max_position_embeddings=4096, block_size=64, num_random_blocks=3,
                        attention_type="block_sparse", pad_token_id=0, bos_token_id=1, eos_token_id=2,
                        sep_token_id=66, global_selector="tfidf", num_global_tokens=128, num_labels=8)
        settings.update(kwargs)
        return cls(**settings)

    @classmethod
    def from_size(cls, hidden_size, num_layers, num_heads, max_length, block_size=64, **kwargs):
        """A model of a given budget (what `compare` and `bench` give every family): a Big Bird of that width, depth
        and heads (intermediate 4·h) with positions for `max_length` tokens and the thesis' share of selected tokens,
        128 per 4,096 (1/32). Any keyword overrides."""
        settings = dict(hidden_size=hidden_size, num_hidden_layers=num_layers, num_attention_heads=num_heads,
                        intermediate_size=4 * hidden_size, max_position_embeddings=max_length, block_size=block_size,
                        num_global_tokens=max(1, max_length // 32))
        settings.update(kwargs)
        return cls(**settings)


__all__ = ["SparseBigBirdConfig"]
