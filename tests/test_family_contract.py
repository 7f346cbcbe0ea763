"""The `Family` contract: typed methods with defaults that say "none" (or refuse), overridden by each family in its own
folder, and the `has_*` / `supports_*` properties callers ask instead of testing a hook for None."""

import ast
import inspect
import pathlib

import pytest

import hf_longdoc
from hf_longdoc.modeling import FAMILIES, Family, register_family
from hf_longdoc.modeling.registry import REQUIRED

SRC = pathlib.Path(hf_longdoc.__file__).parent
HOOKS = ("reading_length", "own_tokenizer", "fit_statistics", "profile", "from_backbone", "backbone_refusal",
         "frozen_features", "head_logits", "evidence", "evidence_refusal", "padding_length")
# which optional hooks each family has: the registry's entries before the base class, one for one
HAS = {
    "contextualizer": {"has_evidence"},
    "elementwise": {"has_own_tokenizer", "supports_backbones"},
    "slstm": {"has_profile"},
    "sparse_longformer": {"has_statistics", "supports_backbones", "has_frozen_features", "has_evidence"},
    "sparse_bigbird": {"has_statistics", "supports_backbones", "has_frozen_features"},
    "segment_lm": {"supports_backbones", "has_frozen_features", "has_evidence"},
}
CAPABILITIES = ("has_own_tokenizer", "has_statistics", "has_profile", "supports_backbones", "has_frozen_features",
                "has_evidence")


class Bare(Family):
    """A family that sets only what it must: every hook keeps its default."""

    name = "bare"
    config_class = object
    model_class = object
    heads = {}
    paper_title = paper_citation = summary = ""


def test_each_hook_is_a_documented_method_of_the_base_class():
    for hook in HOOKS:
        method = getattr(Family, hook)
        assert inspect.isfunction(method), f"Family.{hook} is not a method"
        assert method.__doc__ and method.__doc__.strip(), f"Family.{hook} has no docstring"
    for capability in CAPABILITIES:
        assert isinstance(getattr(Family, capability), property) and getattr(Family, capability).__doc__


def test_the_defaults_say_none_or_refuse():
    family = Bare()
    assert family.reading_length(None) is None
    assert family.own_tokenizer(None, 10) is None
    assert family.fit_statistics(None, [[1, 2]], None) is None
    assert family.profile(None, 1, 8) is None
    assert family.backbone_refusal(None) is None
    assert family.frozen_features(None, None, None) is None
    assert family.evidence(None, None, None, None) is None
    assert family.evidence_refusal(None) is None
    assert family.padding_length(None) is None
    with pytest.raises(ValueError, match="bare does not start from a pretrained backbone"):
        family.from_backbone("some/checkpoint", None, 512)
    with pytest.raises(NotImplementedError, match="bare caches no frozen features"):
        family.head_logits(None)
    assert not any(getattr(family, capability) for capability in CAPABILITIES)


def test_the_shared_defaults_cannot_be_changed_through_one_family():
    family = Bare()
    for attribute in ("defaults", "special_tokens", "variants"):
        with pytest.raises(TypeError):
            getattr(family, attribute)["key"] = "value"
        assert dict(getattr(Family, attribute)) == {}


@pytest.mark.parametrize("family", FAMILIES.values(), ids=lambda family: family.name)
def test_each_family_has_exactly_the_hooks_it_overrides(family):
    assert {capability for capability in CAPABILITIES if getattr(family, capability)} == HAS[family.name]
    assert type(family).__module__.endswith(".family"), "a family's class lives in its folder's family.py"


def test_a_family_without_a_required_attribute_is_refused():
    class Nameless(Family):
        config_class = model_class = object

    with pytest.raises(ValueError, match="lacks name, heads, paper_title"):
        register_family(Nameless())
    assert set(REQUIRED) >= {"name", "config_class", "model_class", "heads"}


def test_the_registry_has_no_squeezed_definitions():
    """The contract reads as plain methods and properties, not lambdas squeezed into `property(...)` or
    `functools.cache(...)`."""
    tree = ast.parse((SRC / "modeling/registry.py").read_text())
    squeezed = [node.lineno for node in ast.walk(tree) if isinstance(node, ast.Call)
                and any(isinstance(argument, ast.Lambda) for argument in node.args)]
    assert not squeezed, f"registry.py wraps a lambda on lines {squeezed}"
