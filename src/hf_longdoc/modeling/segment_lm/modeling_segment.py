"""Segment LMs: a pretrained LM reads a long document as m segments; a head combines the segment vectors z_i.

Paper: M. L. Olson, L. Zhang, C.-N. Yu, "Adapting Pretrained Language Models for Long Document Classification",
ICLR 2020 submission (https://openreview.net/forum?id=ryxW804FPH, Section 3, Appendix A).

    z_i = LM(x_i) ∈ R^d                                  the segment's representation (CLS / last token / mean)
    Eq. 1  base        p = C(z_1)
    Eq. 2  cat         p = C(z_1 ⊕ z_2 ⊕ ... ⊕ z_m)
    Eq. 3  rnn         (h_1..h_m) = biLSTM(z_1..z_m), h_i ∈ R^q;  p = C(z_1 ⊕ h_2 ⊕ h_m)
    Eq. 4  attention   u_i = tanh(W_s h_i + b_s),  α_i = σ(u_iᵀ u_s) with σ the softmax over the segments,
                       a = Σ_i α_i h_i,  M(α) = argmax_i α_i
    Eq. 5  att         p = C(z_1 ⊕ h_2 ⊕ h_m ⊕ a ⊕ α ⊕ z_M(α))
    Eq. 7  att_ablated p = C(a ⊕ α ⊕ z_M(α))

Segments that hold no token (a short document) are masked everywhere: the biLSTM runs over the document's segments
only (packed), h_m is the last present segment's state, α is 0 for absent segments (and excluded from the softmax),
M(α) is chosen among present segments, and Cat's absent z are zeros. A document of one segment has h_2 = 0.

Which paths carry the LM's gradient (`gradient_mode="paper"`, Section 3.1 and Appendix A: the LM is trained through
the segments the classifier relies on, at the memory cost of two segments, not m):
- z_1 is encoded with gradient and enters everywhere it is used: directly (Eq. 1, 3, 5) and through the biLSTM, so
  through h_2, h_m, a and α too. It is the segment every variant reads, so it is trained by every path.
- z_M(α) is encoded a second time with gradient for its own place in Eq. 5 / 7 (M is known only after α). The biLSTM
  and α read the stop-gradient copy of z_M (from the no-gradient batch): α decides which segment is M, and sending
  gradient through that choice as well would make M's vector train the attention that selects it, a path the paper
  does not describe.
- Every other z_i is a stop-gradient feature: it trains the head (biLSTM, attention, classifier), never the LM.
`gradient_mode="full"` sends gradient through every path (the exact gradient, with activation checkpointing).

x_1 as the head + tail window (`first_segment="head_tail"`): Eq. 1 sizes x_1 to the LM's input limit, and Eq. 3 and 5
give z_1 the classifier's direct path; with segments of a sentence's length, segment 1 is one sentence. The window is
the first H and the last W - 2 - H document tokens the segments read (`head_tail_window`; 128 and 382 of W = 512, what
`bert-512-headtail` reads), encoded in one more pass with full attention; its vector replaces z_1 everywhere z_1
enters, with the LM's gradient where the paper's z_1 has it (`paper` and `full`; not in `selected` and `none`).

One default departs from the paper's setting (Section 4 reads segments of 256 tokens, its LMs' input size):
`from_backbone_pretrained` gives a sentence-embedding checkpoint (a sentence-transformers folder that declares its
pooling) segments of a sentence's length (`SENTENCE_SEGMENT_LENGTH`), pooled as it declares, because such a checkpoint
was trained to embed sentences (measured beside the constant); `segment_length=256` restores the paper's.

Shapes: b batch · n tokens · m segments · L segment length · d hidden (the backbone's) · q biLSTM size · k segments
in one backbone call.

Self-contained (Hub rule): imports only torch, transformers and sibling files.
"""

import json
from contextlib import contextmanager
from dataclasses import dataclass

import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence
from torch.utils.checkpoint import checkpoint
from transformers import AutoModel, PreTrainedModel
from transformers import initialization as init
from transformers.utils import ModelOutput, cached_file, logging

from .configuration_segment import SegmentLMConfig, backbone_positions, segments_to_read

logger = logging.get_logger(__name__)


# Copied from hf_longdoc.modeling.contextualizer.modeling_contextualizer.check_token_type_ids
def check_token_type_ids(token_type_ids, input_shape):
    """`token_type_ids` (a BERT-style tokenizer returns them) must match the input's (batch, length) shape."""
    if token_type_ids is not None and tuple(token_type_ids.shape) != tuple(input_shape):
        raise ValueError(f"`token_type_ids` has shape {tuple(token_type_ids.shape)}, expected {tuple(input_shape)} "
                         "like `input_ids`.")


# Copied from hf_longdoc.modeling.contextualizer.modeling_contextualizer.check_labels
def check_labels(labels, logits, config):
    """Raise a clear error when `labels` do not fit the head, before the loss turns it into a shape error."""
    b, num_labels = logits.shape
    problem_type = config.problem_type
    if problem_type is None:  # the rule Transformers' loss uses to infer it
        if num_labels == 1:
            problem_type = "regression"
        elif labels.dtype in (torch.long, torch.int):
            problem_type = "single_label_classification"
        else:
            problem_type = "multi_label_classification"
    if problem_type == "single_label_classification":
        if labels.dtype not in (torch.long, torch.int) or labels.numel() != b:
            raise ValueError(
                f"Single-label `labels` must be integer class ids of shape ({b},), got {labels.dtype} of shape "
                f"{tuple(labels.shape)}."
            )
        if labels.numel() and (labels.min() < 0 or labels.max() >= num_labels):
            raise ValueError(f"`labels` must lie in [0, {num_labels}) (`config.num_labels`), got {labels.tolist()}.")
    elif problem_type == "multi_label_classification":
        if tuple(labels.shape) != (b, num_labels):
            raise ValueError(
                f"Multi-label `labels` must be a float multi-hot tensor of shape ({b}, {num_labels}), got "
                f"{tuple(labels.shape)}."
            )
    elif labels.numel() != b * num_labels:
        raise ValueError(f"Regression `labels` must have {b}×{num_labels} values, got shape {tuple(labels.shape)}.")


# Copied from hf_longdoc.modeling.sparse_longformer.modeling_sparse_longformer.keep_what_the_model_reads
def keep_what_the_model_reads(limit, trained, unit, attention_mask, *tensors, width=1, log=None):
    """What the model reads of (b, n, ...) inputs, cut as the tokenizer's `truncation=True` cuts them: a row longer
    than it reads keeps its first ids and its last `width` (the closing [SEP] or </s> a tokenizer adds; elementwise:
    the closing material of `width` ids), `reads` in all, moved to the front of the row; the others are read whole.
    It reads `limit` ids (what its positions hold; None: any number) or `trained`, the config's `max_input_length`
    (the length it was trained to read; None: not recorded), whichever is fewer; a cut is logged once (on `log`,
    default this module's logger). A `pipeline`, or a call without `truncation=True`, passes the whole text.

    Returns (attention_mask, *tensors), each cut alike; None entries pass through, and so does everything when no
    row is cut, in a traced graph (it reads what its tokenizer cut) and for malformed input (the model's checks
    refuse it). `attention_mask` None: every id is real."""
    reads = min([length for length in (limit, trained) if length is not None], default=None)
    given = [tensor for tensor in (attention_mask, *tensors) if tensor is not None]
    if (reads is None or torch.compiler.is_compiling() or not given or given[0].dim() < 2
            or (attention_mask is not None and attention_mask.dim() != 2)
            or any(tuple(tensor.shape[:2]) != tuple(given[0].shape[:2]) for tensor in given)
            or given[0].shape[1] <= reads or given[0].shape[1] % width):
        return (attention_mask, *tensors)
    b, n = given[0].shape[:2]
    kept = max(reads // width, 1)  # positions read
    real = attention_mask.bool() if attention_mask is not None else given[0].new_ones((b, n), dtype=torch.bool)
    real = real.view(b, n // width, width).any(dim=2)  # (b, p): a position is real when any of its ids is
    rank = real.long().cumsum(dim=1)  # (b, p): the real positions up to each one
    last = rank[:, -1:]  # (b, 1): a row's real positions
    keep = real & ((rank < kept) | (rank == last))  # its first kept - 1 and its last, as truncation keeps them
    if int(last.max()) > kept:
        why = ("the length it was trained to read (`max_input_length` in its config)" if reads == trained
               else "what its positions hold")
        closing = "token" if width == 1 else "material"
        (log or logger).warning_once(f"The input has {n} {unit} but the model reads {kept * width}, {why}: reading "
                                     f"its first {(kept - 1) * width} and its last {width} (the closing special "
                                     f"{closing}), as the tokenizer's truncation=True cuts it, and ignoring the rest. "
                                     "Truncate with the tokenizer to silence this.")
    order = torch.sort((~keep).to(torch.uint8), dim=1, stable=True).indices[:, :kept]  # (b, kept): kept ones first
    index = (order[:, :, None] * width + torch.arange(width, device=order.device)).view(b, kept * width)
    rows = torch.arange(b, device=order.device)[:, None]
    return tuple(None if tensor is None else tensor[rows, index] for tensor in (attention_mask, *tensors))


# Copied from hf_longdoc.modeling.sparse_longformer.modeling_sparse_longformer.check_right_padded
def check_right_padded(mask, unit="token"):
    """A ValueError for padding before a real position (left padding, or a hole in the mask): this model reads a
    document from its first position, so a left-padded batch would otherwise change the logits without a word.
    `mask`: (rows, n) bool, True at real positions."""
    if torch.compiler.is_compiling():  # a traced graph (ONNX export) cannot branch on values
        return
    late = mask[:, 1:] & ~mask[:, :-1]  # a real position right after a pad
    rows = late.any(dim=1).nonzero().flatten().tolist()
    if rows:
        raise ValueError(f"Rows {rows} of `attention_mask` have padding before real {unit}s (left padding?): this "
                         f"model reads a document from its first {unit}; pad on the right "
                         "(`tokenizer.padding_side = \"right\"`).")


def cut_into_segments(input_ids, attention_mask, num_segments, segment_length, cls_id, sep_id, pad_id,
                      packed=False):
    """Flat documents (b, n) -> segments (b, m, L) with [CLS] x [SEP] each, their masks, and which are present.

    A leading `cls_id` and the trailing `sep_id` a tokenizer added are dropped first; then the document's ids fill
    m segments of L - 2 ids in order (the rest is cut), each wrapped as [CLS] tokens [SEP] and padded. With `packed`
    (`sentence_packing`), a `pad_id` inside the document (attention mask 1: `SegmentLMTokenizer`'s layout of whole
    sentences) holds its place in a segment but is no token, so a segment padded there ends with its last sentence
    and the next segment starts with the next one."""
    b, n = input_ids.shape
    real = attention_mask.bool()
    content = real.clone()
    content[:, 0] &= input_ids[:, 0] != cls_id
    last = real.sum(dim=1) - 1  # right padding: the last real position
    rows = torch.arange(b, device=input_ids.device)
    content[rows, last] &= input_ids[rows, last] != sep_id
    width = segment_length - 2
    # the k-th content token of a row goes to slot k of the flattened (m, L - 2) grid
    slot = content.long().cumsum(dim=1) - 1
    token = content & (input_ids != pad_id) if packed else content  # packed: a pad inside holds a slot, no token
    keep = token & (slot < num_segments * width)
    if not torch.compiler.is_compiling() and (token & ~keep).any():
        logger.warning_once(f"A document has more than the m·(L - 2) = {num_segments * width} content tokens the model "
                            "reads; the rest is ignored. Truncate with the tokenizer (truncation=True; its "
                            "model_max_length is what the model reads) to silence this.")
    # scattered into (b, m·(L - 2)); what is not kept goes to one extra column, dropped after (no data-dependent
    # shapes, so the graph exports)
    total = num_segments * width
    target = torch.where(keep, slot, total)  # (b, n)
    grid = torch.full((b, total + 1), pad_id, dtype=input_ids.dtype, device=input_ids.device)
    grid = grid.scatter(1, target, torch.where(keep, input_ids, pad_id))[:, :total]
    grid_mask = torch.zeros((b, total + 1), dtype=torch.bool, device=input_ids.device).scatter(1, target, keep)
    grid_mask = grid_mask[:, :total]
    grid, grid_mask = grid.view(b, num_segments, width), grid_mask.view(b, num_segments, width)  # (b, m, L - 2)
    counts = grid_mask.sum(dim=2)  # tokens per segment, (b, m)
    segments = torch.full((b, num_segments, segment_length), pad_id, dtype=input_ids.dtype, device=input_ids.device)
    segments[..., 0] = cls_id
    segments[..., 1:-1] = grid
    segments.scatter_(2, (counts + 1)[..., None], sep_id)  # [SEP] right after the segment's last token
    mask = torch.arange(segment_length, device=input_ids.device) < (counts + 2)[..., None]  # (b, m, L)
    present = counts > 0
    # an empty text ([CLS] [SEP] from a tokenizer) still reads as one segment [CLS] [SEP], as BERT reads "" (every row
    # has a real token: all-padding rows are refused before cutting)
    present[:, 0] |= real.any(dim=1)
    segments = segments.masked_fill(~present[..., None], pad_id)
    return segments, mask & present[..., None], present


# Copied from hf_longdoc.modeling.segment_lm.tokenization_segment.kept_positions
def kept_positions(ids, limit, width, kept_tail, pad_id):
    """The positions of `ids` (a document's ids in segments of `width`, no special ids) that a reading of `limit` ids
    keeps: all when they fit; with `kept_tail` T, its first segments and its last ones, as many whole segments as fit,
    the last ones from the latest segment start after which T document ids (ids other than `pad_id`, a layout's
    fill) follow, so that every kept segment is one of the document's own and its last T ids are read (the segments
    between are left out); a tail that fills the reading alone: the last whole segments that fit. T = 0: the first
    `limit` ids, as truncation keeps them."""
    if len(ids) <= limit:
        return list(range(len(ids)))
    if not kept_tail:
        return list(range(limit))
    tail, held = len(ids), 0  # the latest segment start with T document ids after it
    for start in range((len(ids) - 1) // width * width, -1, -width):
        held += sum(1 for token in ids[start: tail] if token != pad_id)
        tail = start
        if held >= kept_tail:
            break
    head = max(limit - (len(ids) - tail), 0) // width * width
    if head == 0:
        return list(range(-(-(len(ids) - limit) // width) * width, len(ids)))
    return list(range(head)) + list(range(tail, len(ids)))  # head < tail: the document is longer than `limit`


def window_tail_length(config):
    """T, the document ids the head + tail window reads from the document's end (W - 2 - H), which a cut document
    keeps (`keep_document_end`); 0 where it is cut to its first ids."""
    if not config.keep_document_end:
        return 0
    return config.first_segment_length - 2 - config.first_segment_head


def keep_first_and_last_segments(input_ids, attention_mask, config):
    """(input_ids, attention_mask) of flat, right-padded documents (b, n) with each one longer than the model reads
    cut as its tokenizer's `truncation=True` cuts it when z_1 is the head + tail window (`SegmentLMTokenizer.kept_ids`:
    its first segments and its last, which hold its last T ids): a `pipeline` without truncation, or a call with the
    whole text, reads the document's true end as training did. Without the window, or in a traced graph (it reads
    what its tokenizer cut), the inputs as they came. The reading is min(m·(L - 2), `max_input_length` less the
    row's [CLS] and [SEP]) document ids."""
    tail = window_tail_length(config)
    if not tail or torch.compiler.is_compiling() or input_ids.dim() != 2:
        return input_ids, attention_mask
    width = config.segment_length - 2
    capacity = config.num_segments * width
    rows, cut = [], False
    for ids, length in zip(input_ids.tolist(), attention_mask.bool().sum(dim=1).tolist()):
        ids = ids[:length]
        lead = int(bool(ids) and ids[0] == config.cls_token_id)
        trail = int(len(ids) > lead and ids[-1] == config.sep_token_id)
        reads = capacity
        if config.max_input_length is not None:
            reads = min(capacity, config.max_input_length - lead - trail)
        content = ids[lead: len(ids) - trail]
        kept = kept_positions(content, reads, width, tail, config.pad_token_id)
        cut |= len(kept) < len(content)
        rows.append(ids[:lead] + [content[p] for p in kept] + ids[len(ids) - trail:])
    if not cut:
        return input_ids, attention_mask
    logger.warning_once("A document is longer than the model reads: reading its first and last segments (the last "
                        f"ones hold its last {tail} ids, which the head + tail window reads), as its tokenizer's "
                        "truncation=True cuts it, and ignoring the segments between. Truncate with the tokenizer to "
                        "silence this.")
    n = max(len(row) for row in rows)
    ids = torch.full((len(rows), n), config.pad_token_id, dtype=input_ids.dtype, device=input_ids.device)
    mask = torch.zeros((len(rows), n), dtype=attention_mask.dtype, device=attention_mask.device)
    for row, kept in enumerate(rows):
        ids[row, :len(kept)] = torch.tensor(kept, dtype=input_ids.dtype)
        mask[row, :len(kept)] = 1
    return ids, mask


def head_tail_window(segments, mask, length, head, cls_id, sep_id, pad_id):
    """The head + tail window (`first_segment="head_tail"`) of documents read as segments (b, m, L) with their masks:
    [CLS], the first `head` document ids the segments hold, the last `length` - 2 - `head`, [SEP], padded to
    `length` ids (a document of at most `length` - 2 ids whole). Built from the segments, so that it reads exactly the
    document ids they read (the [CLS] and [SEP] around each segment, and a packed layout's padding, are no document
    ids). Returns (ids, mask), (b, `length`) each; no data-dependent shapes, so the graph exports."""
    b, m, segment_length = segments.shape
    position = torch.arange(segment_length, device=segments.device)
    ends = mask.sum(dim=2, keepdim=True) - 1  # (b, m, 1): each present segment's [SEP]
    inner = (mask & (position >= 1) & (position < ends)).view(b, m * segment_length)  # document ids, in order
    ids = segments.reshape(b, m * segment_length)
    width = length - 2
    rank = inner.long().cumsum(dim=1) - 1  # (b, m·L): the k-th document id
    total = inner.sum(dim=1, keepdim=True)  # (b, 1)
    skipped = (total - width).clamp(min=0)  # the middle ids left out
    keep = inner & ((rank < head) | (rank >= total - (width - head)))
    slot = torch.where(rank < head, rank, rank - skipped)
    target = torch.where(keep, slot, width)  # what is not kept goes to one extra column, dropped after
    grid = torch.full((b, width + 1), pad_id, dtype=ids.dtype, device=ids.device)
    grid = grid.scatter(1, target, torch.where(keep, ids, pad_id))[:, :width]
    window = torch.cat([torch.full_like(grid[:, :1], cls_id), grid, torch.full_like(grid[:, :1], pad_id)], dim=1)
    held = keep.sum(dim=1, keepdim=True)  # (b, 1)
    window = window.scatter(1, held + 1, sep_id)  # [SEP] right after the last id
    window_mask = torch.arange(length, device=ids.device) < held + 2  # (b, length)
    return window, window_mask


def backbone_without_pooler(backbone_config):
    """The backbone LM; encoders without their pooler (z_i is read from the token states, so a pooler would get no
    gradient, which breaks DDP)."""
    try:
        return AutoModel.from_config(backbone_config, add_pooling_layer=False)
    except TypeError:  # decoders and encoders without a pooler do not take the argument
        return AutoModel.from_config(backbone_config)


@dataclass
class SegmentLMModelOutput(ModelOutput):
    """z_i = LM(x_i) per segment (b, m, d) and which segments hold tokens (b, m; 1/0 like an attention mask)."""

    last_hidden_state: torch.Tensor | None = None
    hidden_states: tuple | None = None
    attentions: tuple | None = None  # always None: the backbone's maps inside each segment are not kept
    segment_mask: torch.Tensor | None = None


@dataclass
class SegmentLMClassifierOutput(ModelOutput):
    """Logits, loss, and what the head looked at: α of Eq. 4 (att variants), M(α), and the present segments."""

    loss: torch.Tensor | None = None
    logits: torch.Tensor | None = None
    hidden_states: tuple | None = None
    attentions: tuple | None = None
    alpha: torch.Tensor | None = None
    selected_segment: torch.Tensor | None = None
    segment_mask: torch.Tensor | None = None


class SegmentHead(nn.Module):
    """The classifier of Eq. 1-5 and 7 over the segment vectors z (b, m, d) and the mask of present segments."""

    def __init__(self, config: SegmentLMConfig):
        super().__init__()
        self.config = config
        d, q = config.hidden_size, config.lstm_hidden_size
        if config.variant in ("rnn", "att", "att_ablated"):
            self.lstm = nn.LSTM(d, q // 2, batch_first=True, bidirectional=True)
        if config.variant in ("att", "att_ablated"):
            self.attention = nn.Linear(q, q)  # W_s, b_s of Eq. 4
            self.context = nn.Parameter(torch.zeros(q))  # u_s
        self.dropout = nn.Dropout(config.classifier_dropout or 0.0)
        self.classifier = nn.Linear(config.classifier_input_size(), config.num_labels)

    def segment_states(self, z, present):
        """h_1..h_m of Eq. 3: the biLSTM over each document's present segments (zeros for absent ones)."""
        weights = dict(self.lstm.named_parameters())
        if any(w.dtype != torch.float32 for w in weights.values()):  # nn.LSTM has no half-precision CPU kernel
            weights = {name: w.float() for name, w in weights.items()}
        if torch.compiler.is_compiling():
            return self.segment_states_unpacked(z, present, weights)
        lengths = present.sum(dim=1).cpu()
        packed = pack_padded_sequence(z.float(), lengths, batch_first=True, enforce_sorted=False)  # present z only
        with torch.autocast(z.device.type, enabled=False):
            states, _ = torch.func.functional_call(self.lstm, weights, (packed,))
        states, _ = pad_packed_sequence(states, batch_first=True, total_length=z.shape[1])  # (b, m, q)
        return states.to(z.dtype)

    def segment_states_unpacked(self, z, present, weights):
        """`segment_states` without packed sequences, for a traced graph (ONNX export), whose lengths cannot be a
        Python list: the forward direction over the padded z (states before the padding are exact), the backward one
        as a forward pass with the reverse weights over each document's present segments reversed in place."""
        b, m, _ = z.shape
        half = self.lstm.hidden_size
        position = torch.arange(m, device=z.device)[None]  # (1, m)
        lengths = present.sum(dim=1, keepdim=True)  # (b, 1)
        reverse = torch.where(position < lengths, lengths - 1 - position, position)  # (b, m): t -> len - 1 - t
        flipped = z.float().gather(1, reverse[..., None].expand(b, m, z.shape[2]))
        swapped = {name: weights[name[:-len("_reverse")] if name.endswith("_reverse") else name + "_reverse"]
                   for name in weights}
        with torch.autocast(z.device.type, enabled=False):
            forward, _ = torch.func.functional_call(self.lstm, weights, (z.float(),))  # (b, m, q)
            backward, _ = torch.func.functional_call(self.lstm, swapped, (flipped,))
        backward = backward[..., :half].gather(1, reverse[..., None].expand(b, m, half))  # back in document order
        states = torch.cat([forward[..., :half], backward], dim=-1) * present[..., None]
        return states.to(z.dtype)

    def attention_weights(self, h, present):
        """α of Eq. 4 (0 for absent segments)."""
        scores = torch.tanh(self.attention(h)) @ self.context  # u_iᵀ u_s, (b, m)
        if self.config.attention_activation == "softmax":
            return torch.softmax(scores.masked_fill(~present, float("-inf")), dim=1)
        return torch.sigmoid(scores) * present

    def forward(self, z, present, encode_selected=None):
        """Logits, α and M(α) (None for base/cat/rnn), and the biLSTM states h (None for base/cat).
        `encode_selected(M)` returns z_M with the LM's gradient ((b, d)); without it z_M is read from z."""
        variant = self.config.variant
        b, m, _ = z.shape
        rows = torch.arange(b, device=z.device)
        last = present.sum(dim=1) - 1
        alpha = selected = h = None
        if variant == "base":
            features = [z[:, 0]]  # z_1, (b, d)
        elif variant == "cat":
            features = [(z * present[..., None]).flatten(1)]  # (b, m·d)
        else:
            h = self.segment_states(z, present)
            second = h[:, 1] if m > 1 else torch.zeros_like(h[:, 0])  # h_2, (b, q)
            features = [z[:, 0], second, h[rows, last]]  # z_1 (b, d), h_2 and h_m (b, q)
            if variant in ("att", "att_ablated"):
                alpha = self.attention_weights(h, present)
                a = (alpha[..., None] * h).sum(dim=1)  # (b, q)
                selected = alpha.masked_fill(~present, -1.0).argmax(dim=1)  # M(α) among present segments
                z_selected = encode_selected(selected) if encode_selected is not None else z[rows, selected]  # (b, d)
                tail = [a, alpha.to(a.dtype), z_selected.to(a.dtype)]
                features = features + tail if variant == "att" else tail
        features = torch.cat([f.to(features[0].dtype) for f in features], dim=-1)  # (b, classifier_input_size())
        return self.classifier(self.dropout(features)), alpha, selected, h


# --- the LM over segments -------------------------------------------------------------------------------------------


class SegmentLMPreTrainedModel(PreTrainedModel):
    config_class = SegmentLMConfig
    base_model_prefix = "segment_lm"
    main_input_name = "input_ids"
    supports_gradient_checkpointing = True

    @torch.no_grad()
    def _init_weights(self, module):
        super()._init_weights(module)
        if isinstance(module, SegmentHead) and hasattr(module, "context"):  # u_s of Eq. 4: random, not zero
            init.normal_(module.context, std=module.context.numel() ** -0.5)


class SegmentLMModel(SegmentLMPreTrainedModel):
    """The backbone LM as a segment encoder: z_i = LM(x_i) for every present segment (Section 3)."""

    def __init__(self, config):
        super().__init__(config)
        vocab = getattr(config.backbone_config, "vocab_size", None)
        for name in ("cls_token_id", "sep_token_id", "pad_token_id"):
            value = getattr(config, name)
            if vocab is not None and value is not None and not 0 <= value < vocab:
                raise ValueError(f"`{name}` ({value}) is outside the backbone's vocabulary of {vocab} ids; set the ids "
                                 "of the tokenizer the backbone uses (`cls_token_id=tokenizer.cls_token_id`, ...).")
        self.backbone = backbone_without_pooler(config.backbone_config)
        self.post_init()

    def get_input_embeddings(self):
        return self.backbone.get_input_embeddings()

    def set_input_embeddings(self, value):
        self.backbone.set_input_embeddings(value)

    def encode(self, segments, mask):
        """(k, L) segments -> (k, d) segment vectors, pooled by `config.segment_pooling`."""
        states = self.backbone(input_ids=segments, attention_mask=mask.long()).last_hidden_state  # (k, L, d)
        pooling = self.config.segment_pooling
        if pooling == "cls":
            return states[:, 0]  # (k, d)
        if pooling == "last":
            return states[torch.arange(len(states), device=states.device), mask.sum(dim=1) - 1]  # (k, d)
        weights = mask[..., None].to(states.dtype)  # (k, L, 1)
        return (states * weights).sum(dim=1) / weights.sum(dim=1).clamp(min=1)

    def encode_in_passes(self, segments, mask, checkpointed=False):
        """`encode` over passes of at most `config.segments_per_pass` segments (each under activation checkpointing
        if `checkpointed`)."""
        size = self.config.segments_per_pass
        vectors = []
        for start in range(0, len(segments), size):
            piece, piece_mask = segments[start:start + size], mask[start:start + size]
            vectors.append(checkpoint(self.encode, piece, piece_mask, use_reentrant=False) if checkpointed
                           else self.encode(piece, piece_mask))
        return torch.cat(vectors)  # (k, d)

    @contextmanager
    def stopped_segment_mode(self, dropout=None):
        """The backbone in evaluation mode (no dropout) unless `dropout` (default: `config.stopped_segment_dropout`);
        restored after."""
        was_training = self.backbone.training
        if was_training and not (self.config.stopped_segment_dropout if dropout is None else dropout):
            self.backbone.eval()
        try:
            yield
        finally:
            self.backbone.train(was_training)

    def check_inputs(self, input_ids, attention_mask):
        if not torch.is_tensor(input_ids) or input_ids.dim() not in (2, 3):
            got = tuple(input_ids.shape) if torch.is_tensor(input_ids) else type(input_ids).__name__
            raise ValueError(f"`input_ids` must have shape (batch, length) or (batch, segments, segment_length), got "
                             f"{got}.")
        if input_ids.numel() == 0:
            raise ValueError(f"Got an empty batch of shape {tuple(input_ids.shape)}: pass at least one document with "
                             "at least one token.")
        if attention_mask is not None and tuple(attention_mask.shape) != tuple(input_ids.shape):
            raise ValueError(f"`attention_mask` has shape {tuple(attention_mask.shape)}, expected "
                             f"{tuple(input_ids.shape)} like the input.")
        if input_ids.dim() == 3 and tuple(input_ids.shape[1:]) != (self.config.num_segments,
                                                                   self.config.segment_length):
            raise ValueError(f"Pre-segmented `input_ids` must be (batch, {self.config.num_segments}, "
                             f"{self.config.segment_length}) (num_segments, segment_length), got "
                             f"{tuple(input_ids.shape)}.")
        if torch.compiler.is_compiling():  # a traced graph (ONNX export) cannot branch on values
            return
        vocab = self.backbone.get_input_embeddings().num_embeddings
        if ((input_ids < 0) | (input_ids >= vocab)).any():
            raise ValueError(f"`input_ids` holds ids outside the backbone's vocabulary [0, {vocab}); use the "
                             "backbone's tokenizer.")
        if attention_mask is not None:
            empty = (~attention_mask.bool().flatten(1).any(dim=1)).nonzero().flatten().tolist()
            if empty:
                raise ValueError(f"Rows {empty} of `attention_mask` have no real token (all padding); drop empty "
                                 "documents from the batch.")
            check_right_padded(attention_mask.bool().flatten(0, -2))  # every document, or every given segment

    def segments(self, input_ids, attention_mask):
        """(segments, mask, present) from flat (b, n) documents or pre-segmented (b, m, L) input."""
        config = self.config
        self.check_inputs(input_ids, attention_mask)
        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids)
        if input_ids.dim() == 3:
            mask = attention_mask.bool()
            return input_ids, mask, mask.any(dim=2)  # (b, m, L), (b, m, L), (b, m)
        # the length it was trained to read first, as the tokenizer's truncation=True cuts it (its own m·(L - 2)
        # limit is the segmenting's: the tokens past the last segment find no place there); with the head + tail
        # window, a longer document's first and last segments, as its tokenizer keeps them
        input_ids, attention_mask = keep_first_and_last_segments(input_ids, attention_mask, config)
        attention_mask, input_ids = keep_what_the_model_reads(None, config.max_input_length, "ids", attention_mask,
                                                              input_ids)
        return cut_into_segments(input_ids, attention_mask, config.num_segments, config.segment_length,
                                 config.cls_token_id, config.sep_token_id, config.pad_token_id,
                                 config.sentence_packing)

    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.LongTensor | None = None,
        output_hidden_states: bool | None = None,
        output_attentions: bool | None = None,
        return_dict: bool | None = None,
    ) -> "SegmentLMModelOutput":
        """The segment vectors z (b, m, d) as `last_hidden_state` (zeros for absent segments) and the present-segment
        mask, computed with `config.gradient_mode`. `hidden_states` (on request) is (z,). `output_attentions` is
        accepted for the Transformers API; this encoder keeps no attention maps (the backbone reads each segment
        apart; the head's attention over segments is the classifier's `attentions`)."""
        z, present, _ = self.encode_document(input_ids, attention_mask)
        check_token_type_ids(token_type_ids, input_ids.shape)  # each segment is one sequence: type 0 throughout
        wanted = self.config.output_hidden_states if output_hidden_states is None else output_hidden_states
        output = SegmentLMModelOutput(last_hidden_state=z, hidden_states=(z,) if wanted else None,
                                      segment_mask=present.long())
        return_dict = self.config.return_dict if return_dict is None else return_dict
        return output if return_dict else output.to_tuple()

    def first_window(self, segments, mask, first_segment=None):
        """(ids, mask) of the head + tail window, (b, W) each, that z_1 reads with `first_segment="head_tail"`, or
        None with `"segment"` (x_1 is segment 1). `first_segment`: instead of the config's."""
        config = self.config
        if (first_segment or config.first_segment) != "head_tail":
            return None
        return head_tail_window(segments, mask, config.first_segment_length, config.first_segment_head,
                                config.cls_token_id, config.sep_token_id, config.pad_token_id)

    def window_vectors(self, segments, mask):
        """(b, d): the LM's vectors of the head + tail windows of documents read as segments (b, m, L) with their
        masks (`segments`), without gradient: z_1 of a head that reads x_1 as the window (`variant_candidates`
        entries `variant:head_tail`), cached beside segment 1's."""
        with torch.no_grad(), self.stopped_segment_mode():
            return self.encode_in_passes(*self.first_window(segments, mask, "head_tail"))

    def encode_document(self, input_ids, attention_mask=None, gradient_mode=None, every_segment=False,
                        first_segment=None):
        """z (b, m, d) with zeros for absent segments, the present mask (b, m), and a function that encodes the
        segments chosen per document with gradient (for z_M(α) of Eq. 5/7 in `paper` mode; None otherwise).

        `paper`: segment 1 with gradient, the other present segments batched without it; `full`: every present
        segment with gradient, in passes of `config.segments_per_pass` segments, each under activation
        checkpointing when `config.checkpoint_segment_passes` (the backward pass recomputes one pass at a time);
        `none`: no gradient; `selected`: every segment without gradient, and z_M re-encoded with it (Table 4's "No
        x_1 gradients"). Passes without gradient or under checkpointing take at most `segments_per_pass` segments,
        so peak memory does not grow with m. `every_segment`: encode every present segment even for `base`, which
        reads z_1 alone (a cache other variants are fitted on). `first_segment`: what x_1 is, instead of the
        config's."""
        segments, mask, present = self.segments(input_ids, attention_mask)
        b, m, length = segments.shape
        mode = gradient_mode or self.config.gradient_mode
        if not torch.is_grad_enabled():
            mode = "none"
        # (b·m, L), (b·m, L), (b·m,)
        flat, flat_mask, flat_present = segments.view(b * m, length), mask.view(b * m, length), present.view(-1)
        d = self.config.hidden_size
        first = torch.zeros(b * m, dtype=torch.bool, device=segments.device)
        first[::m] = True
        window = self.first_window(segments, mask, first_segment)  # x_1 as the window, or None: segment 1
        if torch.compiler.is_compiling():  # a traced graph (ONNX export): every segment, absent ones zeroed after
            read = flat_present & first if self.config.variant == "base" else flat_present
            z = torch.where(read[:, None], self.encode(flat, flat_mask), 0.0).view(b, m, d)
            if window is not None:
                z = torch.cat([self.encode(*window)[:, None].to(z.dtype), z[:, 1:]], dim=1)
            return z, present, None
        with_grad = {"paper": first & flat_present, "full": flat_present}.get(mode, torch.zeros_like(first))
        without_grad = flat_present & ~with_grad
        if self.config.variant == "base" and not every_segment:  # Eq. 1 reads segment 1 only: the rest not encoded
            with_grad, without_grad = with_grad & first, without_grad & first
        if window is not None:  # z_1 comes from the window: segment 1 is not encoded
            with_grad, without_grad = with_grad & ~first, without_grad & ~first
        z = None
        if without_grad.any():
            with torch.no_grad(), self.stopped_segment_mode():
                encoded = self.encode_in_passes(flat[without_grad], flat_mask[without_grad])  # (k, d)
            z = encoded.new_zeros(b * m, d).index_put((without_grad.nonzero().flatten(),), encoded)  # (b·m, d)
        if with_grad.any():
            if mode == "full":
                encoded = self.encode_in_passes(flat[with_grad], flat_mask[with_grad],
                                                checkpointed=self.config.checkpoint_segment_passes)
            else:
                encoded = self.encode(flat[with_grad], flat_mask[with_grad])
            base = z if z is not None else encoded.new_zeros(b * m, d)
            z = base.to(encoded.dtype).index_put((with_grad.nonzero().flatten(),), encoded)  # (b·m, d)
        if window is not None:  # z_1 = LM(head + tail window), with gradient where the paper's z_1 has it
            if mode in ("paper", "full"):
                # one pass of b windows, so not checkpointed without its dropout: a recomputation in the backward
                # pass would run outside the evaluation mode it ran in
                dropout = self.config.first_segment_dropout
                with self.stopped_segment_mode(dropout):
                    encoded = self.encode_in_passes(*window, checkpointed=mode == "full" and dropout
                                                    and self.config.checkpoint_segment_passes)
            else:
                with torch.no_grad(), self.stopped_segment_mode():
                    encoded = self.encode_in_passes(*window)
            base = z.to(encoded.dtype) if z is not None else encoded.new_zeros(b * m, d)
            z = base.index_put((first.nonzero().flatten(),), encoded)  # (b·m, d)
        z = z.view(b, m, d)  # (b, m, d)

        def encode_selected(selected):
            """z_M with gradient: z_1 where M = 1 in paper mode (it has gradient already), one batched forward for
            the others (x_1's window where M = 1 in selected mode)."""
            rows = torch.arange(b, device=segments.device)
            out = z[rows, selected]  # (b, d)
            other = selected != 0 if mode == "paper" else torch.ones_like(selected, dtype=torch.bool)
            if window is not None and mode != "paper" and (selected == 0).any():
                at_first = selected == 0
                with self.stopped_segment_mode(self.config.first_segment_dropout):
                    encoded = self.encode(window[0][at_first], window[1][at_first])
                out = out.index_put((at_first.nonzero().flatten(),), encoded.to(out.dtype))
                other = other & ~at_first
            if other.any():  # the selected segments (k, L) of the k documents where M ≠ 1 -> (k, d)
                encoded = self.encode(segments[rows[other], selected[other]], mask[rows[other], selected[other]])
                out = out.index_put((other.nonzero().flatten(),), encoded.to(out.dtype))
            return out

        return z, present, encode_selected if mode in ("paper", "selected") else None


# L for a sentence-embedding checkpoint: a sentence's worth of tokens (30 and the two the model adds), what such a
# checkpoint was trained to embed. Measured with all-MiniLM-L6-v2, frozen, its biLSTM + attention head trained on the
# cached segment vectors (movie reviews after 600+ tokens of news, 2,048 tokens, test accuracy over three head seeds):
# L = 256 (the paper's) .698, 128 .760, 64 .779, 32 .823; a mean over 254 tokens blurs what a sentence says.
SENTENCE_SEGMENT_LENGTH = 32

# a sentence-transformers Pooling module's modes -> the `segment_pooling` that computes the same vector
SENTENCE_TRANSFORMERS_POOLINGS = {"pooling_mode_cls_token": "cls", "pooling_mode_mean_tokens": "mean",
                                  "pooling_mode_lasttoken": "last"}


# Copied from hf_longdoc.modeling.backbones.sentence_transformers_file
def sentence_transformers_file(path_or_id, filename):
    """The JSON of `filename` in a checkpoint (a folder or Hub id), or None when it has none."""
    found = cached_file(path_or_id, filename, _raise_exceptions_for_missing_entries=False,
                        _raise_exceptions_for_connection_errors=False)
    if found is None:
        return None
    with open(found, encoding="utf-8") as file:
        return json.load(file)


# Copied from hf_longdoc.modeling.backbones.declared_pooling
def declared_pooling(path_or_id):
    """The `segment_pooling` a sentence-transformers checkpoint was trained to embed text with (the Pooling module
    named in its modules.json; the sparse Longformer's family reads it too), or None when it declares none, or one
    this model lacks (max, weighted mean, several modes at once: logged)."""
    modules = sentence_transformers_file(path_or_id, "modules.json") or []
    folders = [module.get("path", "") for module in modules if str(module.get("type", "")).endswith(".Pooling")]
    settings = sentence_transformers_file(path_or_id, f"{folders[0]}/config.json") if folders and folders[0] else None
    if not settings:
        return None
    modes = sorted(key for key, value in settings.items() if key.startswith("pooling_mode_") and value is True)
    if len(modes) == 1 and modes[0] in SENTENCE_TRANSFORMERS_POOLINGS:
        return SENTENCE_TRANSFORMERS_POOLINGS[modes[0]]
    logger.warning(f"{path_or_id} embeds text with {modes}, which hf_longdoc cannot compute; the model reads [CLS] "
                   "instead (the paper's). Set `segment_pooling` (segment LM) or `classifier_pooling` (sparse "
                   "Longformer) to choose.")
    return None


class SegmentLMForSequenceClassification(SegmentLMPreTrainedModel):
    """A segment LM classifier: Eq. 1, 2, 3, 5 or 7 by `config.variant` over `SegmentLMModel`'s segment vectors."""

    accepts_loss_kwargs = False

    def __init__(self, config):
        super().__init__(config)
        self.num_labels = config.num_labels
        self.segment_lm = SegmentLMModel(config)
        self.head = SegmentHead(config)
        self.post_init()

    @classmethod
    def from_backbone_pretrained(cls, path_or_id, tokenizer=None, max_length=None, **config_kwargs):
        """A segment LM around the pretrained backbone in `path_or_id` (a folder or Hub id): its weights load
        unchanged (the pooler aside), the segments are wrapped with the tokenizer's [CLS]/[SEP] (the tokenizer saved
        there, or `tokenizer`), and `config_kwargs` (variant, num_segments, num_labels, ...) set the rest; with
        `max_length` and no `num_segments`, m is as many segments as it takes to read `max_length` tokens. A tokenizer
        without [CLS] (GPT-2) gets an added classification token, appended to every segment as in the paper, and
        the backbone's embeddings grow by one row; save that tokenizer with the model.

        z_i is read as the checkpoint embeds text: a sentence-transformers checkpoint (all-MiniLM-L6-v2, ...) that
        declares mean pooling gets `segment_pooling="mean"` (its [CLS] state was never trained to summarise a
        segment: MiniLM on BBC articles past token 512, one epoch, .806 with the mean against .613 with [CLS]), and
        segments of a sentence's length (`SENTENCE_SEGMENT_LENGTH`, what it was trained to embed); any other gets the
        paper's [CLS] over segments of 256 tokens (at most its positions). Passing `segment_pooling` or
        `segment_length` overrides this.

        Segments of a sentence's length (at most `SENTENCE_SEGMENT_LENGTH` tokens) get `gradient_mode="full"`: the
        paper's gradient through segment 1 and the attended segment (Section 3.1) covers most of a document read as
        a few segments of 256, but only two sentences of 32-64, and fine-tuning then teaches the LM that the first
        sentence predicts the label (MiniLM on 800 plain reviews, three splits: test .760 ± .073 in `paper` mode,
        where fine-tuning never passed the head stage on validation; .854 ± .034 in `full` mode), without
        checkpointing the passes (`checkpoint_segment_passes=False`: a third faster; MiniLM trained at 8 × 2,048
        tokens in 5.5 GB at peak). Passing `gradient_mode` or `checkpoint_segment_passes` overrides this."""
        from transformers import AutoTokenizer

        pretrained = AutoModel.from_pretrained(path_or_id)
        if tokenizer is None:
            tokenizer = AutoTokenizer.from_pretrained(path_or_id)
        if tokenizer.cls_token_id is None:  # a decoder (GPT): the paper appends an added classification token
            tokenizer.add_special_tokens({"cls_token": "<|classify|>"})
            pretrained.resize_token_embeddings(len(tokenizer))
            start = tokenizer.bos_token_id if tokenizer.bos_token_id is not None else tokenizer.eos_token_id
            ids = {"cls_token_id": start, "sep_token_id": tokenizer.cls_token_id}
        else:
            ids = {"cls_token_id": tokenizer.cls_token_id,
                   "sep_token_id": tokenizer.sep_token_id if tokenizer.sep_token_id is not None
                   else tokenizer.eos_token_id}
        if tokenizer.pad_token_id is None:
            tokenizer.pad_token = tokenizer.eos_token
        ids["pad_token_id"] = tokenizer.pad_token_id
        pooling = declared_pooling(path_or_id) if "segment_pooling" not in config_kwargs else None
        if pooling is not None:
            config_kwargs["segment_pooling"] = pooling
            logger.info(f"Segment vectors are the {pooling} pooling of the segment's states, the sentence embedding "
                        f"{path_or_id} was trained to produce (its sentence-transformers Pooling module); the paper "
                        "reads [CLS]: set `segment_pooling=\"cls\"` for that.")
        if "segment_length" not in config_kwargs:
            paper_length = SegmentLMConfig().segment_length
            positions = backbone_positions(pretrained.config) or paper_length
            config_kwargs["segment_length"] = min(SENTENCE_SEGMENT_LENGTH if pooling is not None else paper_length,
                                                  positions)
            if pooling is not None:
                logger.info(f"Segments of {config_kwargs['segment_length']} tokens, a sentence's length, which "
                            f"{path_or_id} was trained to embed (the paper's are 256: set `segment_length` for that).")
            elif ("segment_pooling" not in config_kwargs
                  and sentence_transformers_file(path_or_id, "modules.json") is None):  # e.g. copied without them
                logger.info(f"{path_or_id} declares no sentence embedding (no sentence-transformers modules.json and "
                            f"Pooling folder): segments of {config_kwargs['segment_length']} tokens read at [CLS], "
                            "the paper's (set `segment_pooling` and `segment_length` to read it otherwise).")
        if config_kwargs["segment_length"] <= SENTENCE_SEGMENT_LENGTH and "gradient_mode" not in config_kwargs:
            config_kwargs["gradient_mode"] = "full"
            config_kwargs.setdefault("checkpoint_segment_passes", False)
            logger.info(f"The LM learns through every segment (`gradient_mode=\"full\"`): segments of "
                        f"{config_kwargs['segment_length']} tokens are sentences, and the paper's gradient through "
                        "segment 1 and the attended one would train it on two of them (set `gradient_mode=\"paper\"` "
                        "for that). Training keeps every segment's activations; if memory runs short, set "
                        "`checkpoint_segment_passes=True` (about a third slower) or lower the batch size.")
        if max_length is not None and "num_segments" not in config_kwargs:
            config_kwargs["num_segments"] = segments_to_read(max_length, config_kwargs["segment_length"],
                                                             config_kwargs.get("sentence_packing", False))
        config = SegmentLMConfig(backbone_config=pretrained.config, **{**ids, **config_kwargs})
        model = cls(config)
        missing, unexpected = model.segment_lm.backbone.load_state_dict(pretrained.state_dict(), strict=False)
        unexpected = [name for name in unexpected if not name.startswith("pooler.")]
        if missing or unexpected:
            raise ValueError(f"The backbone in {path_or_id} does not match its config: missing {missing}, "
                             f"unexpected {unexpected}.")
        return model

    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.LongTensor | None = None,
        labels: torch.Tensor | None = None,
        output_hidden_states: bool | None = None,
        output_attentions: bool | None = None,
        return_dict: bool | None = None,
    ) -> SegmentLMClassifierOutput:
        r"""hidden_states (on request): the segment vectors z (b, m, d) and, for rnn/att, the biLSTM states h.
        attentions (on request): (α,), the attention over segments of Eq. 4, (b, m), for the att variants (None for
        base, cat and rnn); the backbone's own attention maps inside each segment are not kept."""
        z, present, encode_selected = self.segment_lm.encode_document(input_ids, attention_mask)
        check_token_type_ids(token_type_ids, input_ids.shape)  # each segment is one sequence: type 0 throughout
        logits, alpha, selected, h = self.head(z, present, encode_selected)
        wanted = self.config.output_hidden_states if output_hidden_states is None else output_hidden_states
        loss = None
        if labels is not None:
            check_labels(labels, logits, self.config)
            loss = self.loss_function(labels=labels, pooled_logits=logits, config=self.config)
        hidden_states = ((z,) + ((h,) if h is not None else ())) if wanted else None
        attend = self.config.output_attentions if output_attentions is None else output_attentions
        attentions = (alpha,) if attend and alpha is not None else None
        output = SegmentLMClassifierOutput(loss=loss, logits=logits, hidden_states=hidden_states,
                                           attentions=attentions, alpha=alpha,
                                           selected_segment=selected, segment_mask=present.long())
        return_dict = self.config.return_dict if return_dict is None else return_dict
        return output if return_dict else output.to_tuple()


__all__ = ["SENTENCE_SEGMENT_LENGTH", "SegmentHead", "SegmentLMModel", "SegmentLMForSequenceClassification",
           "SegmentLMPreTrainedModel", "cut_into_segments", "head_tail_window"]
