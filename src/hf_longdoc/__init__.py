"""hf_longdoc: Hugging Face Transformers models for classifying long documents.

Importing the package registers every family with the Auto classes, so saved models load with
`AutoModelForSequenceClassification.from_pretrained(path)` and no `trust_remote_code`.
"""

from transformers import AutoConfig, AutoModel, AutoModelForMaskedLM, AutoModelForSequenceClassification, AutoTokenizer

from .modeling import FAMILIES, get_family
from .modeling.contextualizer import (
    ContextualizerConfig,
    ContextualizerForSequenceClassification,
    ContextualizerModel,
)
from .modeling.elementwise import ElementwiseConfig, ElementwiseForSequenceClassification, ElementwiseModel
from .modeling.segment import SegmentLMConfig, SegmentLMForSequenceClassification, SegmentLMModel
from .modeling.slstm import SLSTMConfig, SLSTMForMaskedLM, SLSTMForSequenceClassification, SLSTMModel
from .modeling.sparse_longformer import (
    SparseLongformerConfig,
    SparseLongformerForSequenceClassification,
    SparseLongformerModel,
)
from .tokenization import ElementwiseTokenizer

__version__ = "0.1.0"

_AUTO_CLASSES = {
    "AutoModelForSequenceClassification": AutoModelForSequenceClassification,
    "AutoModelForMaskedLM": AutoModelForMaskedLM,
}


def _register(family):
    AutoConfig.register(family.config_class.model_type, family.config_class, exist_ok=True)
    AutoModel.register(family.config_class, family.model_class, exist_ok=True)
    for auto_name, head in family.heads.items():
        _AUTO_CLASSES[auto_name].register(family.config_class, head, exist_ok=True)


for _family in FAMILIES.values():
    _register(_family)
AutoTokenizer.register(ElementwiseConfig, slow_tokenizer_class=ElementwiseTokenizer, exist_ok=True)

__all__ = [
    "FAMILIES",
    "get_family",
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
    "SegmentLMConfig",
    "SegmentLMModel",
    "SegmentLMForSequenceClassification",
]
