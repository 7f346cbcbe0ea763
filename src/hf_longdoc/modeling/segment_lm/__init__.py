"""The segment-LM family (Olson et al., 2019, https://openreview.net/forum?id=ryxW804FPH): a pretrained LM over m
segments of a document, combined by Base / Cat / RNN / ATT / ablated-ATT heads (Eq. 1-7)."""

from .configuration_segment import SegmentLMConfig
from .modeling_segment import (
    SegmentHead,
    SegmentLMForSequenceClassification,
    SegmentLMModel,
    SegmentLMPreTrainedModel,
    cut_into_segments,
)
from .tokenization_segment import SegmentLMTokenizer

__all__ = ["SegmentLMConfig", "SegmentLMModel", "SegmentLMForSequenceClassification", "SegmentLMPreTrainedModel",
           "SegmentHead", "SegmentLMTokenizer", "cut_into_segments"]
