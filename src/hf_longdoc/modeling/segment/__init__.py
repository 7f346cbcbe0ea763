"""The segment-LM family (Liu et al., 2020): work in progress for issue 6 — the config and the heads of Eq. 1-5 and 7
exist; the backbone wrapping, the gradient modes and registration with the Auto classes follow."""

from .configuration_segment import SegmentLMConfig
from .modeling_segment import SegmentHead

__all__ = ["SegmentLMConfig", "SegmentHead"]
