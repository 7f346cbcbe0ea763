"""Elementwise language representation (Kim & Kim): a 260 × c element table and a reshape in front of any encoder."""

from .configuration_elementwise import ElementwiseConfig
from .modeling_elementwise import ElementwiseForSequenceClassification, ElementwiseModel, ElementwisePreTrainedModel

__all__ = ["ElementwiseConfig", "ElementwiseModel", "ElementwiseForSequenceClassification",
           "ElementwisePreTrainedModel"]
