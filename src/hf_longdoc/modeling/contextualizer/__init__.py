"""The Contextualizer family (Maupomé & Meurs, 2022): linear-time second-order attention over a context vector."""

from .configuration_contextualizer import ContextualizerConfig
from .modeling_contextualizer import (
    ContextualizerForSequenceClassification,
    ContextualizerModel,
    ContextualizerPreTrainedModel,
)

__all__ = [
    "ContextualizerConfig",
    "ContextualizerModel",
    "ContextualizerForSequenceClassification",
    "ContextualizerPreTrainedModel",
]
