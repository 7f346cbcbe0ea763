"""The segment LM's registry entry: how it wraps a pretrained LM, what its frozen backbone gives the head, its
paper and training defaults.

Not part of a saved model's remote code (only the configuration and modeling files are): the package reads it, the
Hub never does.
"""

from transformers import AutoTokenizer

from ..registry import Family, register_family
from .configuration_segment import VARIANTS as SEGMENT_VARIANTS
from .configuration_segment import SegmentLMConfig
from .modeling_segment import SegmentLMForSequenceClassification, SegmentLMModel


def _segment_lm_from_backbone(path, tokenizer, max_length, **settings):
    """The segment LM around a pretrained encoder or decoder and its tokenizer: segments of L = `segment_length`
    tokens (default: a sentence's for a sentence-embedding checkpoint, else the paper's 256, at most the backbone's
    positions; see `from_backbone_pretrained`) and as many as `max_length` tokens need."""
    tokenizer = tokenizer if tokenizer is not None else AutoTokenizer.from_pretrained(path)
    model = SegmentLMForSequenceClassification.from_backbone_pretrained(path, tokenizer=tokenizer,
                                                                        max_length=max_length, **settings)
    return model, tokenizer  # a decoder's tokenizer has gained a classification token


def _segment_lm_refusal(backbone_config):
    if getattr(backbone_config, "is_encoder_decoder", False):
        return (f"holds an encoder-decoder ({backbone_config.model_type!r}); the segment LM reads segments with an "
                "encoder or a decoder alone")
    return None


def _segment_vectors(model, input_ids, attention_mask):
    """z (b, m, d) and the present-segment mask (b, m): all the segment LM's head reads (Eq. 3-7)."""
    z, present, _ = model.segment_lm.encode_document(input_ids, attention_mask, gradient_mode="none")
    return z, present


def _segment_head_logits(model, z, present):
    return model.head(z, present)[0]


register_family(Family(
    name="segment_lm",
    config_class=SegmentLMConfig,
    model_class=SegmentLMModel,
    heads={"AutoModelForSequenceClassification": SegmentLMForSequenceClassification},
    paper_title="Adapting Pretrained Language Models for Long Document Classification",
    paper_citation=(
        "@misc{olson2019adapting,\n"
        "  title={Adapting Pretrained Language Models for Long Document Classification},\n"
        "  author={Olson, Matthew Lyle and Zhang, Lisa and Yu, Chun-Nam},\n  year={2019},\n"
        "  howpublished={ICLR 2020 submission},\n  url={https://openreview.net/forum?id=ryxW804FPH}\n}"
    ),
    summary=(
        "A pretrained language model reads the document as m segments; the segment vectors are combined by "
        "concatenation, a biLSTM, or attention over segments (which also picks the segment the LM learns "
        "from), with gradient through the first and the attended segment only."
    ),
    learning_rate=1e-4,
    special_tokens={"cls_token_id": "start", "sep_token_id": "end"},  # every segment is wrapped as [CLS] .. [SEP]
    variants={"variant": SEGMENT_VARIANTS},
    bench_reference=("base", "time"),  # the paper's Table 3 reports time as a multiple of Base
    # m segments of L - 2 document tokens, plus the [CLS] and [SEP] a tokenizer adds (dropped before cutting)
    reading_length=lambda config: config.num_segments * (config.segment_length - 2) + 2,
    from_backbone=_segment_lm_from_backbone,
    backbone_refusal=_segment_lm_refusal,
    frozen_features=_segment_vectors,
    head_logits=_segment_head_logits,
    card_settings=("hidden_size", "num_hidden_layers", "vocab_size", "variant", "num_segments", "segment_length",
                   "segment_pooling", "gradient_mode"),
))
