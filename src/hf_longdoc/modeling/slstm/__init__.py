"""The S-LSTM family (Wang et al., 2022): a graph recurrent encoder with token nodes and a sentence node."""

from .configuration_slstm import SLSTMConfig
from .modeling_slstm import SLSTMForMaskedLM, SLSTMForSequenceClassification, SLSTMModel, SLSTMPreTrainedModel

__all__ = ["SLSTMConfig", "SLSTMModel", "SLSTMForMaskedLM", "SLSTMForSequenceClassification", "SLSTMPreTrainedModel"]
