"""The contextualizer's registry entry: its classes, paper and training defaults.

Not part of a saved model's remote code (only the configuration and modeling files are): the package reads it, the
Hub never does.
"""

from ..registry import Family, register_family
from .configuration_contextualizer import ContextualizerConfig
from .modeling_contextualizer import ContextualizerForSequenceClassification, ContextualizerModel

register_family(Family(
    name="contextualizer",
    config_class=ContextualizerConfig,
    model_class=ContextualizerModel,
    heads={"AutoModelForSequenceClassification": ContextualizerForSequenceClassification},
    paper_title="Contextualizer: Connecting the Dots of Context with Second-Order Attention",
    paper_citation=(
        "@article{maupome2022contextualizer,\n"
        "  title={Contextualizer: Connecting the Dots of Context with Second-Order Attention},\n"
        "  author={Maupom{\\'e}, Diego and Meurs, Marie-Jean},\n"
        "  journal={Information},\n  volume={13},\n  number={6},\n  pages={290},\n  year={2022},\n"
        "  doi={10.3390/info13060290}\n}"
    ),
    summary=(
        "A linear-time encoder: tokens are embedded with a softmax-over-positions encoding, then K steps of "
        "rank-u second-order (vector) attention refine a single context vector c; the final c(K) is the "
        "document representation. No maximum length."
    ),
    train_size={"hidden_size": 128, "num_layers": 3, "num_heads": 1, "max_length": 4096},  # rank u = 2m = 256
    card_settings=("hidden_size", "rank", "num_hidden_layers", "vocab_size", "default_context"),
    card_limits=("The model has no maximum length, but the saved tokenizer truncates at `model_max_length` when "
                 "called with `truncation=True`."),
))
