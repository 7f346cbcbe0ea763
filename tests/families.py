"""The registry the conformance suite is parametrised over: one entry per family, tiny awkward sizes."""

from dataclasses import dataclass, field

import hf_longdoc


@dataclass
class FamilyCase:
    name: str
    config_class: type
    base_class: type
    classification_class: type
    tiny: dict  # config kwargs of a tiny model (odd sizes so a hard-coded dimension fails)
    invalid: list = field(default_factory=list)  # (kwargs, fragment of the error message)

    def config(self, **overrides):
        return self.config_class(**{**self.tiny, **overrides})


FAMILY_CASES = [
    FamilyCase(
        name="contextualizer",
        config_class=hf_longdoc.ContextualizerConfig,
        base_class=hf_longdoc.ContextualizerModel,
        classification_class=hf_longdoc.ContextualizerForSequenceClassification,
        tiny=dict(vocab_size=99, hidden_size=32, rank=37, num_hidden_layers=3, num_labels=3,
                  default_context="learned", hidden_dropout_prob=0.0),
        invalid=[
            (dict(hidden_size=0), "hidden_size"),
            (dict(rank=-3), "rank"),
            (dict(default_context="zeros"), "default_context"),
            (dict(alpha_normalizer="relu"), "alpha_normalizer"),
            (dict(hidden_dropout_prob=1.5), "hidden_dropout_prob"),
            (dict(pad_token_id=500), "pad_token_id"),
        ],
    ),
]

assert {case.name for case in FAMILY_CASES} == set(hf_longdoc.FAMILIES), "every family needs a conformance entry"
