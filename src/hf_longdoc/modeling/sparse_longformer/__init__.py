"""The sparse-map Longformer family (Haman, 2023): Longformer with TF-IDF / PMI / random / first-n global tokens."""

from .configuration_sparse_longformer import SparseLongformerConfig
from .modeling_sparse_longformer import (
    SparseLongformerForSequenceClassification,
    SparseLongformerModel,
    SparseLongformerPreTrainedModel,
    excluded_token_ids,
)
from .selection import GlobalTokenSelector

__all__ = [
    "SparseLongformerConfig",
    "SparseLongformerModel",
    "SparseLongformerForSequenceClassification",
    "SparseLongformerPreTrainedModel",
    "GlobalTokenSelector",
    "excluded_token_ids",
]
