"""The family registry: what code outside `modeling/` needs to know about a method, so it never names one. Each
family registers itself from its own folder (`modeling/<family>/family.py` subclasses `Family` and calls
`register_family`, as peft's methods call `register_peft_method`); this module holds the contract (`Family`, its
attributes and the methods a family may override, each with its default) and the lookups, and imports no family."""

import functools
import inspect
from collections.abc import Mapping
from types import MappingProxyType

import torch
from transformers import (
    AutoConfig,
    AutoModel,
    AutoModelForMaskedLM,
    AutoModelForSequenceClassification,
    AutoTokenizer,
    PretrainedConfig,
    PreTrainedModel,
    PreTrainedTokenizerBase,
    PreTrainedTokenizerFast,
)

from .backbones import backbone_positions  # what a checkpoint of no family reads (the pipeline asks here)

AUTO_CLASSES = {auto.__name__: auto for auto in (AutoConfig, AutoModel, AutoModelForSequenceClassification,
                                                  AutoModelForMaskedLM)}
SIZE_ARGUMENTS = ("hidden_size", "num_layers", "num_heads", "max_length")  # what every `from_size` takes
FAMILIES = {}  # name -> Family, in registration order
# the attributes a family must set (the others have defaults below)
REQUIRED = ("name", "config_class", "model_class", "heads", "paper_title", "paper_citation", "summary")


class Family:
    """What the package knows about one method. A family subclasses this in its own folder, sets the attributes below
    and overrides the methods it has; every method's default says the family has no such thing (or refuses), and the
    `has_*` / `supports_*` properties tell callers which ones a family overrides. One instance per family is
    registered (`register_family`); instances are compared and hashed by identity.

    Required attributes:
        name (`str`): `--model NAME`; `NAME:variant` picks a variant.
        config_class (`type`): a `PretrainedConfig` whose `from_size(hidden_size, num_layers, num_heads, max_length,
            ...)` is the one source of a model of a given size.
        model_class (`type`): its base `PreTrainedModel`.
        heads (`dict`): Auto class name -> head class, with "AutoModelForSequenceClassification".
        paper_title, paper_citation (BibTeX), summary (`str`): for the model card.

    Optional attributes (read only; the defaults below):
        train_size (`dict`): the `from_size` arguments of `train`'s model (None: the config's defaults).
        defaults (`dict`): settings `train` applies unless the user sets them (training policy, not sizes).
        learning_rate (`float`): `train`'s rate from scratch.
        backbone_learning_rate, backbone_epochs: from pretrained weights (None: `learning_rate`, 4 epochs).
        tokenizer_class (`type`): what `AutoTokenizer` loads for the config (None: the saved tokenizer's own class).
        special_tokens (`dict`): config key -> "start" | "end", the ids a tokenizer supplies ([CLS] or bos, [SEP] or
            eos).
        variants (`dict`): config key -> its choices (`family:choice` sets the key).
        bench_reference (`tuple`): (variant, "speedup" | "time"), what `bench` measures the variants against.
        position_width (`str`): the config key of the input ids one encoder position reads (elementwise: v; None: 1).
        new_with_backbone (`tuple`): parameter-name prefixes inside the base model that a checkpoint does not supply
            (they learn at `--head-learning-rate`, as the head does).
        card_settings (`tuple`): config keys the model card lists; card_limits (`str`): a sentence for its "limits".
        evidence_weight (`str`): with `evidence`: what a passage's weight means (for `predict --help` and the docs).
        evidence_in_sentences (`bool`): with `evidence`: whether its passages are shown as the whole sentences they
            hold (a run of tokens that starts and ends wherever ids do: segments, windows), not as the tokens
            themselves (single words a selector picked).
        runtime_settings (`tuple`): config keys that change how a saved model runs (speed, memory), never its outputs
            beyond rounding: what `predict --config` may set on it.
        concurrent_inference (`bool`): whether several threads may call one model's forward at once (`predict` reads
            batches in parallel on the CPU); False where a forward runs compiled code.
    """

    name: str
    config_class: type
    model_class: type
    heads: dict
    paper_title: str
    paper_citation: str
    summary: str

    # the defaults are read-only mappings and tuples: they are shared by every family that does not set its own
    train_size: dict | None = None
    defaults: Mapping = MappingProxyType({})
    learning_rate: float = 2e-3
    backbone_learning_rate: float | None = None
    backbone_epochs: float | None = None
    tokenizer_class: type | None = None
    special_tokens: Mapping = MappingProxyType({})
    variants: Mapping = MappingProxyType({})
    bench_reference: tuple = ()
    position_width: str | None = None
    new_with_backbone: tuple = ()
    card_settings: tuple = ("hidden_size", "num_hidden_layers", "vocab_size")
    card_limits: str = ""
    runtime_settings: tuple = ()
    concurrent_inference: bool = True
    evidence_weight: str = ""
    evidence_in_sentences: bool = False

    def __repr__(self):
        return f"<Family {getattr(self, 'name', '?')}>"

    # -- the methods a family may override ----------------------------------------------------------------------------

    def reading_length(self, config: PretrainedConfig) -> int | None:
        """The most input ids a model with `config` reads (its positions, its segments), or None: no limit."""
        return None

    def ids_to_read(self, config: PretrainedConfig, tokens: int) -> int:
        """The input ids it takes a model with `config` to read `tokens` of a document (a user's `max_length`): the
        same number, unless its tokenizer adds ids that are not the document's (the segment LM's padding between
        packed sentences)."""
        return tokens

    def own_tokenizer(self, config: PretrainedConfig, max_length: int | None = None) -> PreTrainedTokenizerBase | None:
        """The family's own tokenizer for `config`, reading at most `max_length` ids (None: the config's length), or
        None: the family reads a WordPiece tokenizer fitted on the training split (or its backbone's).
        `has_own_tokenizer` says which."""
        return None

    def fit_statistics(self, model: PreTrainedModel, input_ids: list, tokenizer: PreTrainedTokenizerBase | None
                       ) -> dict | None:
        """Fit what the model computes from the training documents (`input_ids`: a list of token-id lists) before
        training, in place, and report it (a dict with "documents"), or None: nothing to fit (or fitted already).
        `has_statistics` says whether a family ever fits any."""
        return None

    def profile(self, model: PreTrainedModel, batch_size: int, length: int) -> dict | None:
        """The family's hot kernel at these shapes for `bench`'s roofline line: `{"name", "flops", "run",
        "matmuls"}` (`run` and `matmuls` are callables: the kernel, and plain matmuls of its FLOPs), or None: no
        kernel of its own. `has_profile` says which."""
        return None

    def from_backbone(self, path: str, tokenizer: PreTrainedTokenizerBase | None, max_length: int | None,
                      **settings) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
        """The family around the pretrained checkpoint at `path` and the tokenizer it reads (`tokenizer`, or the
        checkpoint's / the family's own when None), reading up to `max_length` ids; `settings` are config settings.
        The default refuses: `supports_backbones` says which families override it."""
        raise ValueError(f"{self.name} does not start from a pretrained backbone.")

    def backbone_refusal(self, backbone_config: PretrainedConfig) -> str | None:
        """Why the family cannot start from a checkpoint with `backbone_config` (a phrase that follows "it"), or None:
        it can."""
        return None

    def square_bytes(self, config: PretrainedConfig, batch_size: int, element_bytes: int) -> tuple | None:
        """The (length x length) tensors a forward pass of a model with `config` builds, for the memory check before
        any work (`feasibility.SquareTensors`): (bytes per length² made once per pass, bytes per length² per layer,
        what they are in words), or None: none (the family is linear in the length)."""
        return None

    def frozen_features(self, model: PreTrainedModel, input_ids: torch.Tensor, attention_mask: torch.Tensor
                        ) -> tuple[torch.Tensor, ...] | None:
        """What the new classification head reads from a frozen backbone, computed once per document so the head can
        train for many epochs on a cache: tensors, batch first, or None: the family caches nothing (its head stage
        trains through the model). `has_frozen_features` says which."""
        return None

    def head_logits(self, model: PreTrainedModel, *features: torch.Tensor) -> torch.Tensor:
        """The classification head's logits on `frozen_features`' tensors (a slice of the batch of each). Only for
        families with `frozen_features`; the default refuses."""
        raise NotImplementedError(f"{self.name} caches no frozen features, so its head has nothing to read.")

    def readout_choices(self, config: PretrainedConfig) -> list[dict]:
        """Other heads the head stage may fit on the same `frozen_features` and keep instead of the configured one
        when validation prefers them (`head_fitting.HeadStage`): each a dict of config settings. The default: none."""
        return []

    def set_readout(self, model: PreTrainedModel, changes: dict, head: torch.nn.Module | None = None
                    ) -> torch.nn.Module:
        """Set `changes` (one of `readout_choices`) in the model's config and put `head` in the model, or a freshly
        initialised head for them; returns the head it replaced. Only for families with `readout_choices`."""
        raise NotImplementedError(f"{self.name} has no other heads to choose from.")

    def evidence(self, model: PreTrainedModel, outputs, input_ids: torch.Tensor, attention_mask: torch.Tensor
                 ) -> list[list[tuple[int, int, float]]] | None:
        """The passages whose weights in the model decided its label (`explaining.explain`, `predict --explain`),
        read from the `outputs` of a forward with `output_attentions=True` on (b, n) `input_ids`: per document, a
        list of (first, stop, weight), half-open spans of positions in `input_ids` (the caller maps them to
        characters) and a float weight, larger meaning it weighed more. Or None: the family has no such weights
        (explaining it is refused). `has_evidence` says which."""
        return None

    def evidence_refusal(self, config: PretrainedConfig) -> str | None:
        """Why a model with `config` has no evidence although its family has (a variant without the weights), or
        None: it has."""
        return None

    def padding_length(self, config: PretrainedConfig) -> int | None:
        """The multiple of ids a model with `config` pads every input to inside its forward (Longformer's attention
        window), or None: none. An ONNX trace must be longer than one such multiple, or the exported graph keeps the
        trace's single window as a constant (`export_onnx`)."""
        return None

    # -- which of those a family overrides ----------------------------------------------------------------------------

    def _overrides(self, method):
        return getattr(type(self), method) is not getattr(Family, method)

    @property
    def has_own_tokenizer(self):
        """Whether the family brings its own tokenizer (`own_tokenizer`)."""
        return self._overrides("own_tokenizer")

    @property
    def has_statistics(self):
        """Whether the family fits statistics on the training documents (`fit_statistics`)."""
        return self._overrides("fit_statistics")

    @property
    def has_profile(self):
        """Whether `bench` can profile the family's hot kernel (`profile`)."""
        return self._overrides("profile")

    @property
    def supports_backbones(self):
        """Whether the family starts from a pretrained checkpoint (`from_backbone`)."""
        return self._overrides("from_backbone")

    @property
    def has_frozen_features(self):
        """Whether a head stage can cache what the frozen backbone gives the head (`frozen_features`)."""
        return self._overrides("frozen_features")

    @property
    def has_evidence(self):
        """Whether the family's weights say which passages decided a label (`evidence`)."""
        return self._overrides("evidence")

    # -- what follows from the attributes ------------------------------------------------------------------------------

    @property
    def classification_class(self):
        """The sequence-classification head."""
        return self.heads["AutoModelForSequenceClassification"]

    @property
    def fine_tuning_rate(self):
        """The rate the whole model fine-tunes at from pretrained weights."""
        return self.backbone_learning_rate or self.learning_rate

    @property
    def auto_classes(self):
        """Auto class name -> class."""
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
        if self.tokenizer_class is not None:  # a fast tokenizer class in its slot, a slow one in the other
            slot = "fast_tokenizer_class" if issubclass(self.tokenizer_class, PreTrainedTokenizerFast) else \
                "slow_tokenizer_class"
            AutoTokenizer.register(self.config_class, **{slot: self.tokenizer_class}, exist_ok=True)

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
        if self.has_own_tokenizer:
            return self.own_tokenizer(config, max_length)
        from ..data import fit_wordpiece_tokenizer

        return fit_wordpiece_tokenizer(train_texts, vocab_size=vocab_size, model_max_length=max_length or 4096)


def special_token_ids(tokenizer, roles):
    """`{config key: id}` for `roles` (config key -> "start" | "end"): [CLS] / [SEP], else bos / eos."""
    ids = {"start": tokenizer.cls_token_id if tokenizer.cls_token_id is not None else tokenizer.bos_token_id,
           "end": tokenizer.sep_token_id if tokenizer.sep_token_id is not None else tokenizer.eos_token_id}
    return {key: ids[role] for key, role in roles.items()}


@functools.cache
def _default_config(config_class):
    """The config class's default config, built once (read by `Family.has_setting`, never changed)."""
    return config_class()


def register_family(family):
    """Add `family` (an instance of a `Family` subclass; a family's `family.py` calls this) to the registry and
    register it with the Auto classes; a ValueError names a required attribute it lacks or a name taken already."""
    if missing := [attribute for attribute in REQUIRED if not hasattr(family, attribute)]:
        raise ValueError(f"{type(family).__name__} lacks {', '.join(missing)}: every family sets {', '.join(REQUIRED)} "
                         "(see `Family`).")
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


def family_of_model_type(model_type):
    """The family whose config class has `model_type` (a saved config.json's), or None for a model of no family (a
    Transformers checkpoint)."""
    return next((family for family in FAMILIES.values() if family.config_class.model_type == model_type), None)


def family_of_config(config):
    """The family whose config class built `config`."""
    family = family_of_model_type(config.model_type)
    if family is None:
        raise ValueError(f"Model type {config.model_type!r} is not an hf_longdoc family ({', '.join(FAMILIES)}).")
    return family


__all__ = ["FAMILIES", "Family", "backbone_positions", "family_of_config", "family_of_model_type", "get_family",
           "register_family", "resolve"]
