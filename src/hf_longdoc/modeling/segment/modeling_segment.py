"""Segment LMs: a pretrained LM reads a long document as m segments; a head combines the segment vectors z_i.

Paper: X. Liu et al., "Adapting Pretrained Language Models for Long Document Classification", 2020
(`shared/papers/004_a595ad5ed53c6bd8.txt`, Section 3, Appendix A).

    z_i = LM(x_i) ∈ R^d                                  the segment's representation (CLS / last token / mean)
    Eq. 1  base        p = C(z_1)
    Eq. 2  cat         p = C(z_1 ⊕ z_2 ⊕ ... ⊕ z_m)
    Eq. 3  rnn         (h_1..h_m) = biLSTM(z_1..z_m), h_i ∈ R^q;  p = C(z_1 ⊕ h_2 ⊕ h_m)
    Eq. 4  attention   u_i = tanh(W_s h_i + b_s),  α_i = σ(u_iᵀ u_s),  a = Σ_i α_i h_i,  M(α) = argmax_i α_i
    Eq. 5  att         p = C(z_1 ⊕ h_2 ⊕ h_m ⊕ a ⊕ α ⊕ z_M(α))
    Eq. 7  att_ablated p = C(a ⊕ α ⊕ z_M(α))

Segments that hold no token (a short document) are masked everywhere: the biLSTM runs over the document's segments
only (packed), h_m is the last present segment's state, α is 0 for absent segments (and excluded from the softmax
option), M(α) is chosen among present segments, and Cat's absent z are zeros. A document of one segment has h_2 = 0.

Self-contained (Hub rule): imports only torch, transformers and sibling files.
"""

import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from .configuration_segment import SegmentLMConfig


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
        lengths = present.sum(dim=1).cpu()
        packed = pack_padded_sequence(z.float(), lengths, batch_first=True, enforce_sorted=False)
        with torch.autocast(z.device.type, enabled=False):  # nn.LSTM has no fp16 CPU kernel
            states, _ = self.lstm(packed)
        states, _ = pad_packed_sequence(states, batch_first=True, total_length=z.shape[1])
        return states

    def attention_weights(self, h, present):
        """α of Eq. 4 (0 for absent segments)."""
        scores = torch.tanh(self.attention(h)) @ self.context  # u_iᵀ u_s, (b, m)
        if self.config.attention_activation == "softmax":
            return torch.softmax(scores.masked_fill(~present, float("-inf")), dim=1)
        return torch.sigmoid(scores) * present

    def forward(self, z, present, encode_selected=None):
        """Logits and α (None for base/cat/rnn) and M(α). `encode_selected(M)` returns z_M with the LM's gradient
        ((b, d)); without it z_M is read from z."""
        variant = self.config.variant
        b, m, _ = z.shape
        rows = torch.arange(b, device=z.device)
        last = present.sum(dim=1) - 1
        alpha = selected = None
        if variant == "base":
            features = [z[:, 0]]
        elif variant == "cat":
            features = [(z * present[..., None]).flatten(1)]
        else:
            h = self.segment_states(z, present)
            second = h[:, 1] if m > 1 else torch.zeros_like(h[:, 0])
            features = [z[:, 0], second, h[rows, last]]
            if variant in ("att", "att_ablated"):
                alpha = self.attention_weights(h, present)
                a = (alpha[..., None] * h).sum(dim=1)
                selected = alpha.masked_fill(~present, -1.0).argmax(dim=1)  # M(α) among present segments
                z_selected = encode_selected(selected) if encode_selected is not None else z[rows, selected]
                tail = [a, alpha.to(a.dtype), z_selected.to(a.dtype)]
                features = features + tail if variant == "att" else tail
        features = torch.cat([f.to(features[0].dtype) for f in features], dim=-1)
        return self.classifier(self.dropout(features)), alpha, selected


__all__ = ["SegmentHead"]


# --- the LM over segments (work in progress) ------------------------------------------------------------------------


def cut_into_segments(input_ids, attention_mask, num_segments, segment_length, cls_id, sep_id, pad_id):
    """Flat documents (b, n) -> segments (b, m, L) with [CLS] x [SEP] each, their masks, and which are present.

    A leading `cls_id` and the trailing `sep_id` a tokenizer added are dropped first; then the document's tokens fill
    m segments of L - 2 tokens in order (the rest is cut), each wrapped as [CLS] tokens [SEP] and padded."""
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
    keep = content & (slot < num_segments * width)
    grid = torch.full((b, num_segments * width), pad_id, dtype=input_ids.dtype, device=input_ids.device)
    grid_mask = torch.zeros((b, num_segments * width), dtype=torch.bool, device=input_ids.device)
    grid[rows[:, None].expand(b, n)[keep], slot[keep]] = input_ids[keep]
    grid_mask[rows[:, None].expand(b, n)[keep], slot[keep]] = True
    grid, grid_mask = grid.view(b, num_segments, width), grid_mask.view(b, num_segments, width)
    counts = grid_mask.sum(dim=2)  # tokens per segment
    segments = torch.full((b, num_segments, segment_length), pad_id, dtype=input_ids.dtype, device=input_ids.device)
    segments[..., 0] = cls_id
    segments[..., 1:-1] = grid
    segments.scatter_(2, (counts + 1)[..., None], sep_id)  # [SEP] right after the segment's last token
    mask = torch.arange(segment_length, device=input_ids.device) < (counts + 2)[..., None]
    present = counts > 0
    segments = segments.masked_fill(~present[..., None], pad_id)
    return segments, mask & present[..., None], present
