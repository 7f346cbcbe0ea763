"""The family registry: what code outside `modeling/` needs to know about a method, so it never names one. Each
family registers itself from its own folder (`modeling/<family>/family.py` calls `register_family`, as peft's methods
call `register_peft_method`); this module holds the schema and the lookups, and imports no family.

The contract of a `Family` (what a new family provides; each hook receives and returns exactly what is written):

Required: `name` (`--model NAME`; `NAME:variant` picks a variant); `config_class` (a `PretrainedConfig` whose
`from_size(hidden_size, num_layers, num_heads, max_length, ...)` is the one source of a model of a given size) and
`model_class` (its base `PreTrainedModel`); `heads` (Auto class name -> head class, with
"AutoModelForSequenceClassification"); `paper_title`, `paper_citation` (BibTeX) and `summary` for the model card.

Optional:
- `train_size`: the `from_size` arguments of `train`'s model (None: the config's defaults); `defaults`: settings
  `train` applies unless the user sets them (training policy, not sizes); `learning_rate`: `train`'s rate;
  `backbone_learning_rate`, `backbone_epochs`: from pretrained weights (None: `learning_rate`, 4 epochs).
- `own_tokenizer(config, max_length or None) -> tokenizer` (else WordPiece is fitted on the training split), and
  `tokenizer_class`, what `AutoTokenizer` loads for the config; `special_tokens`: config key -> "start" | "end", the
  ids a tokenizer supplies ([CLS] or bos, [SEP] or eos).
- `variants`: config key -> its choices (`family:choice` sets the key); `bench_reference`: (variant, "speedup" |
  "time"), what `bench` measures the variants against; `profile(model, batch_size, length) -> {"name", "flops",
  "run", "matmuls"}`, the hot kernel and plain matmuls of its shapes for `bench`'s roofline line.
- `fit_statistics(model, training input_ids, tokenizer) -> report (with "documents") or None`: fitted first.
- `reading_length(config) -> int`: the most input ids the model reads (None: no limit); `position_width`: the config
  key of the input ids one encoder position reads (elementwise: v; None: 1).
- `from_backbone(path, tokenizer or None, max_length, **settings) -> (model, tokenizer)`: the family around a
  pretrained checkpoint and the tokenizer it reads; `new_with_backbone`: parameter-name prefixes inside the base model
  that a checkpoint does not supply (they learn at `--head-learning-rate`, as the head does);
  `backbone_refusal(checkpoint config) -> str or None`: why it cannot start from that checkpoint (None: it can).
- `frozen_features(model, input_ids, attention_mask) -> tensors, batch first`: what the new head reads from a frozen
  backbone, computed once per document; `head_logits(model, *those tensors) -> logits`.
- `card_settings`: config keys the model card lists; `card_limits`: a sentence for its "limits" section.
- `evidence(model, outputs, input_ids, attention_mask) -> per document, a list of (first, stop, weight)`: the passages
  whose weights in the model decided its label (`explaining.explain`, `predict --explain`), read from `outputs` of a
  forward with `output_attentions=True` on (b, n) `input_ids`: half-open spans [first, stop) of positions in
  `input_ids` (the caller maps them to characters) and a float weight, larger meaning it weighed more (None: the family
  has no such weights, and explaining it is refused); `evidence_refusal(config) -> str or None`: why a model with
  these settings has none (a variant without them; None: it has)."""

import functools
import inspect
from dataclasses import dataclass, field
from typing import Callable

from transformers import AutoConfig, AutoModel, AutoModelForMaskedLM, AutoModelForSequenceClassification, AutoTokenizer

AUTO_CLASSES = {auto.__name__: auto for auto in (AutoConfig, AutoModel, AutoModelForSequenceClassification,
                                                  AutoModelForMaskedLM)}
SIZE_ARGUMENTS = ("hidden_size", "num_layers", "num_heads", "max_length")  # what every `from_size` takes
FAMILIES = {}  # name -> Family, in registration order


@dataclass(frozen=True, eq=False)  # one instance per family: hashed and compared by identity
class Family:
    """What the package knows about one method: see the module docstring for each field."""

    name: str
    config_class: type
    model_class: type
    heads: dict
    paper_title: str
    paper_citation: str
    summary: str
    train_size: dict | None = None
    defaults: dict = field(default_factory=dict)
    learning_rate: float = 2e-3
    backbone_learning_rate: float | None = None
    backbone_epochs: float | None = None
    own_tokenizer: Callable | None = None
    tokenizer_class: type | None = None
    special_tokens: dict = field(default_factory=dict)
    variants: dict = field(default_factory=dict)
    bench_reference: tuple = ()
    fit_statistics: Callable | None = None
    profile: Callable | None = None
    reading_length: Callable | None = None
    from_backbone: Callable | None = None
    position_width: str | None = None
    new_with_backbone: tuple = ()
    backbone_refusal: Callable | None = None
    frozen_features: Callable | None = None
    head_logits: Callable | None = None
    card_settings: tuple = ("hidden_size", "num_hidden_layers", "vocab_size")
    card_limits: str = ""
    evidence: Callable | None = None
    evidence_refusal: Callable | None = None

    classification_class = property(lambda self: self.heads["AutoModelForSequenceClassification"])
    fine_tuning_rate = property(lambda self: self.backbone_learning_rate or self.learning_rate,
                                doc="the rate the whole model fine-tunes at from pretrained weights")
    auto_classes = property(lambda self: {"AutoConfig": self.config_class, "AutoModel": self.model_class,
                                          **self.heads}, doc="Auto class name -> class")

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
        if self.tokenizer_class is not None:
            AutoTokenizer.register(self.config_class, slow_tokenizer_class=self.tokenizer_class, exist_ok=True)

    def reads(self, config):
        """The most input ids a model with `config` reads (None: no limit)."""
        return self.reading_length(config) if self.reading_length is not None else None

    def ids_per_position(self, config):
        """Input ids one encoder position covers (elementwise: v bytes)."""
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
        """The config's special-token ids taken from `tokenizer` (see `special_token_ids`)."""
        return special_token_ids(tokenizer, self.special_tokens)

    def size_arguments(self, size):
        """The `from_size` arguments in `size`: the four every family takes, plus the knobs its `from_size` names."""
        accepted = inspect.signature(self.config_class.from_size).parameters
        if missing := [name for name in SIZE_ARGUMENTS if name not in size]:
            raise ValueError(f"A model size needs {', '.join(SIZE_ARGUMENTS)}; missing {', '.join(missing)}.")
        return {key: value for key, value in size.items() if key in accepted and value is not None}

    def build_config(self, size=None, **settings):
        """The config sized by `size` (see `size_arguments`), else `train`'s model: `train_size` with `defaults` (the
        config's own defaults without a `train_size`); `settings` override either."""
        self.check_settings(settings)
        if size is None and self.train_size is None:
            return self.config_class(**{**self.defaults, **settings})
        defaults = self.defaults if size is None else {}
        return self.config_class.from_size(**{**self.size_arguments(size or self.train_size), **defaults, **settings})

    def has_setting(self, key):
        """Whether the family's config has the setting `key` (its default config, built once, has it)."""
        return hasattr(_default_config(self.config_class), key)

    def check_settings(self, settings):
        """A ValueError naming any key the config lacks (a config stores a misspelled key silently)."""
        if unknown := sorted(key for key in settings if not self.has_setting(key)):
            raise ValueError(f"{self.config_class.__name__} has no setting {', '.join(map(repr, unknown))}; check the "
                             "spelling against its docstring.")

    def tokenizer_for(self, config, train_texts, vocab_size=8000, max_length=None):
        """The tokenizer used when none is given: the family's own, or WordPiece fitted on `train_texts`."""
        if self.own_tokenizer is not None:
            return self.own_tokenizer(config, max_length)
        from ..data import fit_wordpiece_tokenizer

        return fit_wordpiece_tokenizer(train_texts, vocab_size=vocab_size, model_max_length=max_length or 4096)


def special_token_ids(tokenizer, roles):
    """`{config key: id}` for `roles` (config key -> "start" | "end"): [CLS] / [SEP], else bos / eos."""
    ids = {"start": tokenizer.cls_token_id if tokenizer.cls_token_id is not None else tokenizer.bos_token_id,
           "end": tokenizer.sep_token_id if tokenizer.sep_token_id is not None else tokenizer.eos_token_id}
    return {key: ids[role] for key, role in roles.items()}


_default_config = functools.cache(lambda config_class: config_class())  # read by `has_setting`, never changed


def register_family(family):
    """Add `family` to the registry (a family's `family.py` calls this) and register it with the Auto classes."""
    if family.name in FAMILIES and FAMILIES[family.name] is not family:
        raise ValueError(f"A family named {family.name!r} is registered already.")
    FAMILIES[family.name] = family
    family.register()
    return family


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


__all__ = ["FAMILIES", "Family", "family_of_config", "get_family", "register_family", "resolve"]
