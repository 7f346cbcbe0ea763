"""The models of a bench run: each a family (`family:variant`) or a Transformers baseline, resolved once and built at
the run's size (`BenchModel`), and all of them checked before any timing (`check_models`).

`experiments.bench` times them, `compare` checks its time/memory plot's models here, and `BenchSettings.check` (in
`experiments.settings`, which imports nothing heavy so that `hf-longdoc bench --help` answers at once) imports this
module when it runs: with the models in a module of their own, the settings and the timing code do not import each
other.
"""

from dataclasses import dataclass, field

from ..modeling import FAMILIES, Family, resolve
from .baselines import BASELINES, baseline_config, parse_baseline, too_few_tokens


@dataclass
class BenchModel:
    """One model of a bench run, resolved once: a family (with its variant settings) or a Transformers baseline."""

    name: str
    family: Family | None = None
    variant: dict = field(default_factory=dict)
    baseline: str | None = None  # a key of BASELINES: bert | longformer | modernbert | eurobert ...

    @classmethod
    def parse(cls, name):
        """The model called `name`, or a ValueError naming the known ones."""
        parsed = parse_baseline(name)
        if parsed is None and too_few_tokens(name) is not None:  # `bert-2`: the documented form, but not a bench name
            parsed = (name.partition("-")[0], 2)
        if parsed is not None:
            if parsed[1] is not None:
                raise ValueError(f"Bench times every model at every length; use `bert`, not {name!r}.")
            return cls(name, baseline=parsed[0])
        if name.partition(":")[0].lower().replace("-", "_") not in FAMILIES:
            known = ", ".join(sorted(FAMILIES) + list(BASELINES))
            raise ValueError(f"Unknown model {name!r} for bench; choose from {known}.")
        family, variant = resolve(name)
        return cls(name, family, variant)

    def build(self, hidden_size, num_layers, num_heads, max_length, vocab_size=8000, window=512,
              attention_dropout=None, segment_length=256, gradient_mode="paper", attention=None, **overrides):
        """A randomly initialised classification model of the given width and depth. `attention_dropout` (Transformer
        models only) overrides their attention-probability dropout; `attention` is a baseline's attention
        implementation (see `baseline_attention`; None: Transformers' default); `overrides` are config settings of a
        family."""
        if self.family is None:
            return BASELINES[self.baseline].model_class(self.baseline_config(
                hidden_size, num_layers, num_heads, max_length, vocab_size, window, attention_dropout, attention))
        return self.family.classification_class(self.config(
            hidden_size, num_layers, num_heads, max_length, window, attention_dropout, segment_length, gradient_mode,
            vocab_size=vocab_size, pad_token_id=0, **overrides))

    def baseline_config(self, hidden_size, num_layers, num_heads, max_length, vocab_size=8000, window=512,
                        attention_dropout=None, attention=None):
        """The baseline model's config (`baselines.baseline_config`) with the bench's vocabulary and labels."""
        chosen = {} if attention is None else {"attn_implementation": attention}
        return baseline_config(self.baseline, hidden_size, num_layers, num_heads, max_length, attention_window=window,
                               attention_dropout=attention_dropout, vocab_size=vocab_size, num_labels=2,
                               pad_token_id=0, **chosen)

    def config(self, hidden_size, num_layers, num_heads, max_length, window=None, attention_dropout=None,
               segment_length=None, gradient_mode=None, **settings):
        """The family model's config (the bench's options under `from_size`'s names; each family takes the ones that
        apply to it)."""
        size = dict(hidden_size=hidden_size, num_layers=num_layers, num_heads=num_heads, max_length=max_length,
                    attention_window=window, segment_length=segment_length, attention_dropout=attention_dropout,
                    gradient_mode=gradient_mode)
        return self.family.build_config(size, num_labels=2, **self.variant, **settings)

    def reference(self):
        """("speedup" | "time", with a memory ratio) when the other models are measured against this one: a baseline,
        or a family's reference variant (its registry `bench_reference`); else None."""
        if self.family is None:
            baseline = BASELINES[self.baseline]
            return "speedup", baseline.sparse or baseline.memory_reference
        reference = self.family.bench_reference
        if reference and self.name.partition(":")[2] == reference[0]:
            return reference[1], True
        return None

    def ids_per_position(self, config):
        """Input ids one encoder position reads (v bytes per material for elementwise models)."""
        return 1 if self.family is None else self.family.ids_per_position(config)


def check_models(models, lengths, config_overrides=None, **sizes):
    """The models of a run, resolved and their configs built, before any timing: unknown models, bad sizes and
    invalid overrides fail here."""
    if not models:
        raise ValueError("Give at least one model to `models` (`--models`).")
    if not lengths or any(length < 8 for length in lengths):
        raise ValueError(f"`lengths` must all be at least 8 tokens, got {list(lengths)}.")
    window = sizes.get("window")
    if window is not None and (isinstance(window, bool) or not isinstance(window, int) or window <= 0 or window % 2):
        raise ValueError(f"`window` (--window) must be a positive even integer, got {window!r}.")
    entries = [BenchModel.parse(name) for name in models]
    config_overrides = config_overrides or {}
    families = {entry.name for entry in entries if entry.family is not None}
    if unknown := sorted(name for name, overrides in config_overrides.items() if overrides and name not in families):
        raise ValueError(f"`config_overrides` (--config) names {', '.join(unknown)}, which is not a family model of "
                         f"this run (models: {', '.join(sorted(families)) or 'none'}; baselines take no overrides).")
    for entry in entries:
        if entry.family is not None:
            overrides = config_overrides.get(entry.name, {})
            entry.config(max_length=min(lengths), **sizes, **overrides)
    return entries


__all__ = ["BenchModel", "check_models"]
