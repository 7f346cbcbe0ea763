"""The model families, one self-contained folder each; each registers itself from its `family.py`."""

from .registry import FAMILIES, Family, family_of_config, get_family, register_family, resolve

# each import registers a family (the order is the registry's, and the CLI's listing)
from .contextualizer import family as _contextualizer  # noqa: E402,F401  isort: skip
from .elementwise import family as _elementwise  # noqa: E402,F401  isort: skip
from .slstm import family as _slstm  # noqa: E402,F401  isort: skip
from .sparse_longformer import family as _sparse  # noqa: E402,F401  isort: skip
from .segment_lm import family as _segment_lm  # noqa: E402,F401  isort: skip

__all__ = ["FAMILIES", "Family", "family_of_config", "get_family", "register_family", "resolve"]
