"""hf_longdoc: Hugging Face Transformers models for classifying long documents.

Importing the package registers every family with the Auto classes, so saved models load with
`AutoModelForSequenceClassification.from_pretrained(path)` and no `trust_remote_code`, and registers the
`pipeline("long-document-classification", model=...)` task for any sequence classifier.

The import itself is light, as Transformers' own lazy module is: the public classes load when first used
(`hf_longdoc.ContextualizerConfig`), and the registration runs when Transformers is imported (at once, if it already
is). So `hf-longdoc --help` answers without importing torch, Transformers or the model code.
"""

import importlib
import importlib.abc
import importlib.util
import sys

__version__ = "0.2.0"

# public name -> the module that defines it
_EXPORTS = {
    "FAMILIES": ".modeling",
    "get_family": ".modeling",
    "LongDocumentClassificationPipeline": ".inference.pipelines",
    "register_pipeline": ".inference.pipelines",
    "predict": ".engines",
    "PredictSettings": ".predicting",
    "DocumentClassifier": ".engines",
    "ContextualizerConfig": ".modeling.contextualizer",
    "ContextualizerModel": ".modeling.contextualizer",
    "ContextualizerForSequenceClassification": ".modeling.contextualizer",
    "ElementwiseConfig": ".modeling.elementwise",
    "ElementwiseModel": ".modeling.elementwise",
    "ElementwiseForSequenceClassification": ".modeling.elementwise",
    "ElementwiseTokenizer": ".modeling.elementwise.tokenization_elementwise",
    "SLSTMConfig": ".modeling.slstm",
    "SLSTMModel": ".modeling.slstm",
    "SLSTMForMaskedLM": ".modeling.slstm",
    "SLSTMForSequenceClassification": ".modeling.slstm",
    "SparseLongformerConfig": ".modeling.sparse_longformer",
    "SparseLongformerModel": ".modeling.sparse_longformer",
    "SparseLongformerForSequenceClassification": ".modeling.sparse_longformer",
    "SparseBigBirdConfig": ".modeling.sparse_longformer",
    "SparseBigBirdModel": ".modeling.sparse_longformer",
    "SparseBigBirdForSequenceClassification": ".modeling.sparse_longformer",
    "SegmentLMConfig": ".modeling.segment_lm",
    "SegmentLMModel": ".modeling.segment_lm",
    "SegmentLMForSequenceClassification": ".modeling.segment_lm",
    "SegmentLMTokenizer": ".modeling.segment_lm",
}
__all__ = [name for name in _EXPORTS if name != "register_pipeline"]


def __getattr__(name):
    """A public class or function, imported on first use (PEP 562)."""
    if name not in _EXPORTS:
        raise AttributeError(f"module 'hf_longdoc' has no attribute {name!r}")
    value = getattr(importlib.import_module(_EXPORTS[name], __name__), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(list(globals()) + list(_EXPORTS))


def register():
    """Register every family with the Auto classes and the long-document task with `pipeline` (idempotent)."""
    importlib.import_module(".modeling", __name__)  # each family registers its classes as it is imported
    importlib.import_module(".inference.pipelines", __name__).register_pipeline()


def _initializing(but=None):
    """Whether one of this package's modules (other than `but`) is being imported right now: registering then would
    import a half-built module."""
    return any(getattr(getattr(module, "__spec__", None), "_initializing", False)
               for name, module in list(sys.modules.items()) if name.startswith(__name__ + ".") and name != but)


class _RegisterWithTransformers(importlib.abc.MetaPathFinder):
    """Runs `register` once Transformers is imported. When this package's own code imports Transformers, the
    registration waits until the outermost of its modules being imported has finished."""

    pending = False

    def find_spec(self, name, path=None, target=None):
        if name != "transformers" and not name.startswith(__name__ + "."):
            return None
        sys.meta_path.remove(self)  # the spec as the other finders give it
        try:
            spec = importlib.util.find_spec(name)
        finally:
            sys.meta_path.insert(0, self)
        if spec is None or spec.loader is None:
            return spec
        load = spec.loader.exec_module

        def exec_module(module):
            load(module)
            self.pending = self.pending or name == "transformers"
            if self.pending and not _initializing(but=name):
                self.finish()

        spec.loader.exec_module = exec_module
        return spec

    def finish(self):
        self.pending = False
        if self in sys.meta_path:
            sys.meta_path.remove(self)
        register()


if "transformers" in sys.modules:
    register()
else:
    sys.meta_path.insert(0, _RegisterWithTransformers())
