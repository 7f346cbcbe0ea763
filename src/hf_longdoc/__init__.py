"""hf_longdoc: Hugging Face Transformers models for classifying long documents.

Importing the package registers every family with the Auto classes, so saved models load with
`AutoModelForSequenceClassification.from_pretrained(path)` and no `trust_remote_code`, and registers the
`pipeline("long-document-classification", model=...)` task for any sequence classifier.
"""

from .modeling import FAMILIES, get_family
from .modeling.contextualizer import (
    ContextualizerConfig,
    ContextualizerForSequenceClassification,
    ContextualizerModel,
)
from .modeling.elementwise import ElementwiseConfig, ElementwiseForSequenceClassification, ElementwiseModel
from .modeling.segment_lm import (
    SegmentLMConfig,
    SegmentLMForSequenceClassification,
    SegmentLMModel,
    SegmentLMTokenizer,
)
from .modeling.slstm import SLSTMConfig, SLSTMForMaskedLM, SLSTMForSequenceClassification, SLSTMModel
from .modeling.sparse_longformer import (
    SparseBigBirdConfig,
    SparseBigBirdForSequenceClassification,
    SparseBigBirdModel,
    SparseLongformerConfig,
    SparseLongformerForSequenceClassification,
    SparseLongformerModel,
)
from .pipelines import LongDocumentClassificationPipeline, register_pipeline
from .predicting import predict
from .tokenization import ElementwiseTokenizer

register_pipeline()  # pipeline("long-document-classification", model=...)

__version__ = "0.2.0"


__all__ = [
    "FAMILIES",
    "get_family",
    "LongDocumentClassificationPipeline",
    "predict",
    "ContextualizerConfig",
    "ContextualizerModel",
    "ContextualizerForSequenceClassification",
    "ElementwiseConfig",
    "ElementwiseModel",
    "ElementwiseForSequenceClassification",
    "ElementwiseTokenizer",
    "SLSTMConfig",
    "SLSTMModel",
    "SLSTMForMaskedLM",
    "SLSTMForSequenceClassification",
    "SparseLongformerConfig",
    "SparseLongformerModel",
    "SparseLongformerForSequenceClassification",
    "SparseBigBirdConfig",
    "SparseBigBirdModel",
    "SparseBigBirdForSequenceClassification",
    "SegmentLMConfig",
    "SegmentLMModel",
    "SegmentLMForSequenceClassification",
    "SegmentLMTokenizer",
]
