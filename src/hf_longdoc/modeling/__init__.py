"""The model families, one self-contained folder each, and the registry that describes them to the package."""

from .registry import FAMILIES, Family, family_of_config, get_family, register_families, resolve

__all__ = ["FAMILIES", "Family", "family_of_config", "get_family", "register_families", "resolve"]
