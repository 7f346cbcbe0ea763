"""The segment-LM family (Liu et al., 2020): a pretrained LM over m segments of a document, combined by Base / Cat /
RNN / ATT / ablated-ATT heads (Eq. 1-7)."""

from .configuration_segment import SegmentLMConfig
from .modeling_segment import (
    SegmentHead,
    SegmentLMForSequenceClassification,
    SegmentLMModel,
    SegmentLMPreTrainedModel,
    cut_into_segments,
)

__all__ = ["SegmentLMConfig", "SegmentLMModel", "SegmentLMForSequenceClassification", "SegmentLMPreTrainedModel",
           "SegmentHead", "cut_into_segments"]
