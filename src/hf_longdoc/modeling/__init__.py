"""The registry of model families: one entry per paper, used by registration, the CLI, model cards and tests."""

from dataclasses import dataclass, field

from .contextualizer import ContextualizerConfig, ContextualizerForSequenceClassification, ContextualizerModel
from .elementwise import ElementwiseConfig, ElementwiseForSequenceClassification, ElementwiseModel
from .segment import SegmentLMConfig, SegmentLMForSequenceClassification, SegmentLMModel
from .slstm import SLSTMConfig, SLSTMForMaskedLM, SLSTMForSequenceClassification, SLSTMModel
from .sparse_longformer import SparseLongformerConfig, SparseLongformerForSequenceClassification, SparseLongformerModel


@dataclass(frozen=True)
class Family:
    """What the package knows about one method: its classes, the Auto class of each, and its paper."""

    name: str
    config_class: type
    model_class: type
    heads: dict  # Auto class name -> head class
    paper_title: str
    paper_citation: str
    summary: str
    defaults: dict = field(default_factory=dict)  # config overrides for `hf-longdoc train` (small, trains on CPU)
    tokenizer: str = "wordpiece"  # what `hf-longdoc train` uses when no --tokenizer is given
    learning_rate: float = 2e-3  # `hf-longdoc train`'s default for this family

    @property
    def classification_class(self):
        return self.heads["AutoModelForSequenceClassification"]


FAMILIES = {
    "contextualizer": Family(
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
        defaults={"hidden_size": 128, "rank": 256, "num_hidden_layers": 3},
    ),
    "elementwise": Family(
        name="elementwise",
        config_class=ElementwiseConfig,
        model_class=ElementwiseModel,
        heads={"AutoModelForSequenceClassification": ElementwiseForSequenceClassification},
        paper_title="Elementwise Language Representation",
        paper_citation=(
            "@article{kim2023elementwise,\n"
            "  title={Elementwise Language Representation},\n"
            "  author={Kim, Dunam and Kim, Jeeeun},\n"
            "  journal={arXiv preprint arXiv:2302.13475},\n  year={2023}\n}"
        ),
        summary=(
            "Elementwise embedding: a 260 × c table of byte (element) embeddings replaces the token embeddings of a "
            "Transformers encoder; v elements are concatenated into one w = v·c material (a word, or v raw bytes), "
            "and the encoder, with h = v attention heads, reads u materials, i.e. u·v bytes at the cost of u tokens."
        ),
        defaults={},
        tokenizer="elementwise",
        learning_rate=1e-4,  # a Transformer trained from scratch: higher rates collapse to the label prior
    ),
    "slstm": Family(
        name="slstm",
        config_class=SLSTMConfig,
        model_class=SLSTMModel,
        heads={"AutoModelForSequenceClassification": SLSTMForSequenceClassification,
               "AutoModelForMaskedLM": SLSTMForMaskedLM},
        paper_title="Pre-Training a Graph Recurrent Network for Language Representation",
        paper_citation=(
            "@article{wang2022slstm,\n"
            "  title={Pre-Training a Graph Recurrent Network for Language Representation},\n"
            "  author={Wang, Yile and Yang, Linyi and Teng, Zhiyang and Zhou, Ming and Zhang, Yue},\n"
            "  journal={arXiv preprint arXiv:2209.03834},\n  year={2022}\n}"
        ),
        summary=(
            "A graph recurrent encoder (S-LSTM): every token is a node linked to its neighbours and to one sentence "
            "node; L synchronous LSTM-style updates with shared parameters exchange information locally and through "
            "the sentence node, in time linear in the length. The final sentence node is the document vector."
        ),
        defaults={"hidden_size": 128, "num_hidden_layers": 4},
        learning_rate=1e-3,
    ),
    "sparse_longformer": Family(
        name="sparse_longformer",
        config_class=SparseLongformerConfig,
        model_class=SparseLongformerModel,
        heads={"AutoModelForSequenceClassification": SparseLongformerForSequenceClassification},
        paper_title="Transformers Using Local Attention Mappings for Long Text Document Classification",
        paper_citation=(
            "@mastersthesis{haman2023local,\n"
            "  title={Transformers Using Local Attention Mappings for Long Text Document Classification},\n"
            "  author={Haman, Bekir Ufuk},\n"
            "  school={{\\.I}zmir Institute of Technology},\n  year={2023}\n}"
        ),
        summary=(
            "A Longformer (sliding-window attention plus global tokens; Longformer checkpoints load unchanged) whose "
            "global tokens are chosen per document by TF-IDF or PMI statistics fitted on the training documents "
            "(or randomly, or the first n), instead of [CLS] alone."
        ),
        defaults={"num_global_tokens": 64},
        learning_rate=1e-4,
    ),
    "segment_lm": Family(
        name="segment_lm",
        config_class=SegmentLMConfig,
        model_class=SegmentLMModel,
        heads={"AutoModelForSequenceClassification": SegmentLMForSequenceClassification},
        paper_title="Adapting Pretrained Language Models for Long Document Classification",
        paper_citation=(
            "@misc{liu2020adapting,\n"
            "  title={Adapting Pretrained Language Models for Long Document Classification},\n"
            "  author={Liu, Xiaoming and others},\n  year={2020},\n"
            "  note={OpenReview, ICLR 2020 submission}\n}"
        ),
        summary=(
            "A pretrained language model reads the document as m segments; the segment vectors are combined by "
            "concatenation, a biLSTM, or attention over segments (which also picks the segment the LM learns "
            "from), with gradient through the first and the attended segment only."
        ),
        defaults={},
        learning_rate=1e-4,
    ),
}


def get_family(name):
    """The family called `name`, or a ValueError listing the known ones."""
    key = name.lower().replace("-", "_")
    if key not in FAMILIES:
        raise ValueError(f"Unknown model family {name!r}; choose one of: {', '.join(sorted(FAMILIES))}.")
    return FAMILIES[key]


def family_of_config(config):
    """The family whose config class built `config`."""
    for family in FAMILIES.values():
        if family.config_class.model_type == config.model_type:
            return family
    raise ValueError(f"Model type {config.model_type!r} is not an hf_longdoc family ({', '.join(FAMILIES)}).")


__all__ = ["FAMILIES", "Family", "get_family", "family_of_config"]
