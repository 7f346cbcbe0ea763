"""The sparse-map families of Haman (2023): Longformer and Big Bird with TF-IDF / PMI / random / first-n tokens."""

from .configuration_sparse_bigbird import SparseBigBirdConfig
from .configuration_sparse_longformer import SparseLongformerConfig
from .modeling_sparse_bigbird import (
    SparseBigBirdForSequenceClassification,
    SparseBigBirdModel,
    SparseBigBirdPreTrainedModel,
)
from .modeling_sparse_longformer import (
    SparseLongformerForSequenceClassification,
    SparseLongformerModel,
    SparseLongformerPreTrainedModel,
)
from .selection import GlobalTokenSelector, excluded_token_ids

__all__ = [
    "SparseBigBirdConfig",
    "SparseBigBirdModel",
    "SparseBigBirdForSequenceClassification",
    "SparseBigBirdPreTrainedModel",
    "SparseLongformerConfig",
    "SparseLongformerModel",
    "SparseLongformerForSequenceClassification",
    "SparseLongformerPreTrainedModel",
    "GlobalTokenSelector",
    "excluded_token_ids",
]
