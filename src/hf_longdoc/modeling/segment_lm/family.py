"""The segment LM's registry entry: how it wraps a pretrained LM, what its frozen backbone gives the head, its
paper and training defaults.

Not part of a saved model's remote code (only the configuration and modeling files are): the package reads it, the
Hub never does.
"""

import torch
from transformers import AutoTokenizer

from ...utils.catalog import EVIDENCE_WEIGHTS
from ..registry import Family, register_family
from .configuration_segment import VARIANTS as SEGMENT_VARIANTS
from .configuration_segment import SegmentLMConfig, candidate_readout, segments_to_read
from .modeling_segment import SegmentHead, SegmentLMForSequenceClassification, SegmentLMModel, window_tail_length
from .tokenization_segment import SegmentLMTokenizer


def segment_of_positions(input_ids, attention_mask, num_segments, segment_length, cls_id, sep_id, pad_id=None,
                         packed=False):
    """(b, n): the segment each position of flat documents (b, n) is read in, -1 where none is (padding, the leading
    [CLS] and trailing [SEP] a tokenizer added, tokens past the m·(L - 2) the model reads). The rule of
    `cut_into_segments`, which `tests/test_explaining.py` holds it to."""
    b, _ = input_ids.shape
    real = attention_mask.bool()
    content = real.clone()
    content[:, 0] &= input_ids[:, 0] != cls_id
    rows = torch.arange(b, device=input_ids.device)
    last = real.sum(dim=1) - 1  # right padding: the last real position
    content[rows, last] &= input_ids[rows, last] != sep_id
    width = segment_length - 2
    slot = content.long().cumsum(dim=1) - 1  # the k-th content id goes to slot k of the (m, L - 2) grid
    token = content & (input_ids != pad_id) if packed else content  # packed: a pad inside holds a slot, no token
    keep = token & (slot < num_segments * width)
    return torch.where(keep, slot // width, -1)


def head_tail_parts(segment, length, head):
    """(b, n) bool each: the positions of flat documents that the head + tail window reads (`first_segment=
    "head_tail"`) from its head and from its tail, from `segment_of_positions`' (b, n) map: the first `head` and the
    last `length` - 2 - `head` document ids the segments read (a short document: all of it, in the head and tail
    alike as far as it reaches). The rule of `head_tail_window`, which `tests/test_head_tail_window.py` holds it to."""
    read = segment >= 0
    rank = read.long().cumsum(dim=1) - 1
    total = read.sum(dim=1, keepdim=True)
    in_head = read & (rank < head)
    return in_head, read & ~in_head & (rank >= total - (length - 2 - head))


class SegmentLMFamily(Family):
    """The segment LM: a pretrained LM over m segments; its frozen segment vectors feed the head stage, and its α
    over segments is its evidence."""

    name = "segment_lm"
    config_class = SegmentLMConfig
    model_class = SegmentLMModel
    heads = {"AutoModelForSequenceClassification": SegmentLMForSequenceClassification}
    paper_title = "Adapting Pretrained Language Models for Long Document Classification"
    paper_citation = (
        "@misc{olson2019adapting,\n"
        "  title={Adapting Pretrained Language Models for Long Document Classification},\n"
        "  author={Olson, Matthew Lyle and Zhang, Lisa and Yu, Chun-Nam},\n  year={2019},\n"
        "  howpublished={ICLR 2020 submission},\n  url={https://openreview.net/forum?id=ryxW804FPH}\n}"
    )
    summary = (
        "A pretrained language model reads the document as m segments; the segment vectors are combined by "
        "concatenation, a biLSTM, or attention over segments (which also picks the segment the LM learns "
        "from); the paper lets the gradient through the first and the attended segment only, and `gradient_mode` "
        "(in the table below) says which segments this model took it through."
    )
    learning_rate = 1e-4
    tokenizer_class = SegmentLMTokenizer  # what a folder saved with sentence packing loads (without: the backbone's)
    special_tokens = {"cls_token_id": "start", "sep_token_id": "end"}  # every segment is wrapped as [CLS] .. [SEP]
    variants = {"variant": SEGMENT_VARIANTS}
    bench_reference = ("base", "time")  # the paper's Table 3 reports time as a multiple of Base
    card_settings = ("hidden_size", "num_hidden_layers", "vocab_size", "variant", "num_segments", "segment_length",
                     "segment_pooling", "gradient_mode", "sentence_packing", "first_segment", "keep_document_end")

    def reading_length(self, config):
        """m segments of L - 2 document tokens, plus the [CLS] and [SEP] a tokenizer adds (dropped before cutting)."""
        return config.num_segments * (config.segment_length - 2) + 2

    def ids_to_read(self, config, tokens):
        """With whole sentences packed into segments, the ids of the segments that hold `tokens` document tokens at
        3/4 full (a third more than fixed windows; `segments_to_read`), and the [CLS] and [SEP] around them."""
        if not config.sentence_packing:
            return tokens
        return segments_to_read(tokens, config.segment_length, packed=True) * (config.segment_length - 2) + 2

    def from_backbone(self, path, tokenizer, max_length, **settings):
        """The segment LM around a pretrained encoder or decoder and its tokenizer: segments of L = `segment_length`
        tokens (default: a sentence's for a sentence-embedding checkpoint, else the paper's 256, at most the
        backbone's positions; see `from_backbone_pretrained`) and as many as `max_length` tokens need."""
        tokenizer = tokenizer if tokenizer is not None else AutoTokenizer.from_pretrained(path)
        model = SegmentLMForSequenceClassification.from_backbone_pretrained(path, tokenizer=tokenizer,
                                                                            max_length=max_length, **settings)
        config = model.config
        # segments of whole sentences, or a head + tail window reading a cut document's true end: the tokenizer lays
        # the document out and cuts it (`SegmentLMTokenizer.kept_ids`)
        kept_tail = window_tail_length(config)
        if config.sentence_packing or kept_tail:
            tokenizer = SegmentLMTokenizer.from_backbone(tokenizer, config.segment_length, config.sentence_packing,
                                                         kept_tail=kept_tail)
        return model, tokenizer  # a decoder's tokenizer has gained a classification token

    def backbone_refusal(self, backbone_config):
        if getattr(backbone_config, "is_encoder_decoder", False):
            return (f"holds an encoder-decoder ({backbone_config.model_type!r}); the segment LM reads segments with an "
                    "encoder or a decoder alone")
        return None

    def frozen_features(self, model, input_ids, attention_mask):
        """z (b, m, d) and the present-segment mask (b, m): all the segment LM's head reads (Eq. 3-7); every segment
        when the head stage may fit another variant on them (`variant_candidates`). When the heads it weighs read
        x_1 both ways (segment 1 and the head + tail window), z_1 is segment 1's vector and the window's (b, d)
        comes third, for `head_logits` to put in z_1's place where the head reads the window."""
        config = model.config
        choices = self.readout_choices(config)
        encoder = model.segment_lm
        if all(choice.get("first_segment", config.first_segment) == config.first_segment for choice in choices):
            z, present, _ = encoder.encode_document(input_ids, attention_mask, gradient_mode="none",
                                                    every_segment=bool(choices))
            return z, present
        segments, mask, _ = encoder.segments(input_ids, attention_mask)  # cut once, read both ways
        z, present, _ = encoder.encode_document(segments, mask, gradient_mode="none", every_segment=True,
                                                first_segment="segment")
        return z, present, encoder.window_vectors(segments, mask).to(z.dtype)

    def head_logits(self, model, z, present, window=None):
        if window is not None and model.config.first_segment == "head_tail":  # z_1 = LM(the window), Eq. 1
            z = torch.cat([window[:, None], z[:, 1:]], dim=1)
        return model.head(z, present)[0]

    def readout_choices(self, config):
        """The heads of `variant_candidates` other than the configured one, each a head of Eq. 1-7 over the same z:
        {"variant"}, or, when any entry names what x_1 is (segment 1 or the head + tail window), {"variant",
        "first_segment"} for every head, so that setting one never keeps the x_1 of the head set before it."""
        names = config.variant_candidates or ()
        named = any(":" in name for name in names)
        choices = [{"variant": config.variant, "first_segment": config.first_segment}]  # the configured head
        for name in names:
            choice = candidate_readout(name, config.first_segment)
            if choice not in choices:
                choices.append(choice)
        return [choice if named else {"variant": choice["variant"]} for choice in choices[1:]]

    def set_readout(self, model, changes, head=None):
        replaced = model.head
        for key, value in changes.items():
            setattr(model.config, key, value)
        if head is None:  # a new head of that variant, drawn as a model built with it draws its head
            parameter = next(replaced.parameters())
            head = SegmentHead(model.config).to(parameter.device, parameter.dtype)
            head.apply(model._init_weights)
        model.head = head
        return replaced

    evidence_weight = EVIDENCE_WEIGHTS["segment_lm"]
    evidence_in_sentences = True  # a segment of 30 ids starts and ends inside sentences

    def evidence(self, model, outputs, input_ids, attention_mask):
        """Each present segment as a passage (its first to its last document token) weighed by its α of Eq. 4,
        exactly the α the forward returned (`outputs.attentions[0]`, (b, m)). With `first_segment="head_tail"`, α_1
        weighs the head + tail window: its head and its tail are two passages at α_1. The `base` variant's
        classifier reads z_1 alone (Eq. 1): segment 1 (or the window) is the whole document vector, weight 1, and
        no other segment is a passage."""
        config = model.config
        segment = segment_of_positions(input_ids, attention_mask, config.num_segments, config.segment_length,
                                       config.cls_token_id, config.sep_token_id, config.pad_token_id,
                                       config.sentence_packing).cpu()  # (b, n)
        if config.variant == "base":
            alpha = torch.ones(len(segment), 1)  # (b, 1): z_1's share of what the classifier reads
        else:
            alpha = outputs.attentions[0].float().cpu()
        window = (head_tail_parts(segment, config.first_segment_length, config.first_segment_head)
                  if config.first_segment == "head_tail" else None)
        passages = []
        for row in range(len(segment)):
            document = []
            for i in range(alpha.shape[1]):
                # x_1 as the window: its head and its tail, each a passage; else the segment's positions
                parts = [part[row] for part in window] if i == 0 and window is not None else [segment[row] == i]
                for part in parts:
                    positions = part.nonzero().flatten()
                    if len(positions):  # an empty text's one segment is [CLS] [SEP] alone: no passage
                        document.append((int(positions[0]), int(positions[-1]) + 1, float(alpha[row, i])))
            passages.append(document)
        return passages

    def evidence_refusal(self, config):
        if config.variant in ("att", "att_ablated", "base"):
            return None
        return (f"the segment LM variant {config.variant!r} has no weight per segment (α of Eq. 4 exists in the "
                "variants 'att' and 'att_ablated', and 'base' reads segment 1 alone); train `--model segment_lm:att` "
                "to explain its labels")


register_family(SegmentLMFamily())
