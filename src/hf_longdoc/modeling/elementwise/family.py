"""The elementwise family's registry entry: its byte tokenizer, how it wraps a pretrained encoder body, its
paper and training defaults.

Not part of a saved model's remote code (only the configuration and modeling files are): the package reads it, the
Hub never does.
"""

from transformers import AutoConfig

from ..registry import Family, register_family
from .configuration_elementwise import ElementwiseConfig
from .modeling_elementwise import (
    ElementwiseForSequenceClassification,
    ElementwiseModel,
    backbone_materials,
    backbone_refusal,
)
from .tokenization_elementwise import ElementwiseTokenizer

# `train` keeps every byte of a long word (the paper truncates it to v bytes), from scratch and around a backbone
ELEMENTWISE_TRAIN_DEFAULTS = {"long_word": "split"}


class ElementwiseFamily(Family):
    """Elementwise embeddings: its own byte tokenizer, v input ids per position, and pretrained encoder bodies."""

    name = "elementwise"
    config_class = ElementwiseConfig
    model_class = ElementwiseModel
    heads = {"AutoModelForSequenceClassification": ElementwiseForSequenceClassification}
    paper_title = "Elementwise Language Representation"
    paper_citation = (
        "@article{kim2023elementwise,\n"
        "  title={Elementwise Language Representation},\n"
        "  author={Kim, Dunam and Kim, Jeeeun},\n"
        "  journal={arXiv preprint arXiv:2302.13475},\n  year={2023}\n}"
    )
    summary = (
        "Elementwise embedding: a 260 × c table of byte (element) embeddings replaces the token embeddings of a "
        "Transformers encoder; v elements are concatenated into one w = v·c material (a word, or v raw bytes), "
        "and the encoder, with h = v attention heads, reads u materials, i.e. u·v bytes at the cost of u tokens."
    )
    defaults = ELEMENTWISE_TRAIN_DEFAULTS
    learning_rate = 1e-4  # a Transformer trained from scratch: higher rates collapse to the label prior
    tokenizer_class = ElementwiseTokenizer
    position_width = "elements_per_material"
    new_with_backbone = ("elementwise.embeddings.",)
    card_settings = ("hidden_size", "num_hidden_layers", "num_attention_heads", "vocab_size")

    def reading_length(self, config):
        """u materials of v bytes."""
        return config.max_materials * config.elements_per_material

    def own_tokenizer(self, config, max_length=None):
        """The byte-level tokenizer matching the config's v, u and mode (`vgram` reads bytes), at most `max_length`
        ids."""
        v = config.elements_per_material
        materials = config.max_materials if max_length is None else min(config.max_materials, max_length // v)
        return ElementwiseTokenizer(elements_per_material=v, max_materials=materials,
                                    mode="whitespace" if config.mode == "whitespace" else "bytes",
                                    long_word=config.long_word)

    def from_backbone(self, path, tokenizer, max_length, **settings):
        """Elementwise embeddings in front of a pretrained encoder body, reading `max_length` bytes (u·v ≤ max_length;
        None: u = the body's positions, at most 512) with its own byte tokenizer: the backbone's subword tokenizer is
        what the method replaces."""
        backbone = AutoConfig.from_pretrained(path)
        settings = {**ELEMENTWISE_TRAIN_DEFAULTS, **settings}  # as `train` from scratch: every byte of a word is read
        v = settings.get("elements_per_material", backbone.num_attention_heads)
        if "max_materials" not in settings and max_length is not None:
            settings["max_materials"] = max(1, min(backbone_materials(backbone), max_length // v))
        model = ElementwiseForSequenceClassification.from_backbone_pretrained(path, **settings)
        return model, tokenizer if tokenizer is not None else self.own_tokenizer(model.config, max_length)

    def backbone_refusal(self, backbone_config):
        """New element and focus embeddings replace the token table: see `modeling_elementwise.backbone_refusal`."""
        return backbone_refusal(backbone_config)


register_family(ElementwiseFamily())
