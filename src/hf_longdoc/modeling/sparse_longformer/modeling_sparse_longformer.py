"""The sparse-map Longformer: Transformers' Longformer with its global tokens chosen per document by a selector.

Thesis: B. U. Haman, "Transformers Using Local Attention Mappings for Long Text Document Classification", İzmir
Institute of Technology, M.Sc. thesis, 2023 (Chapters 4.3-4.4, 5.4-5.5, 6; its Refined Patents data:
https://huggingface.co/datasets/ufukhaman/uspto_balanced_200k_ipc_classification).

Every parameter keeps Longformer's name and shape (`embeddings.*`, `encoder.layer.N.attention.self.query_global`,
..., the classifier's `longformer.*` and `classifier.*`), so `from_pretrained` of any Longformer checkpoint loads
every weight unchanged. What changes:

- `global_attention_mask`, when not given, is chosen inside `forward` from `input_ids` by `config.global_selector`
  (selection.py): [CLS] always, pads never, and at most `num_global_tokens` more.
- The attention of each layer runs on one of three backends with the same parameters (`config.attention_backend`;
  `auto`: `AUTO_BACKEND`: `blocked`, except a training pass on a GPU, which runs `flex`):
  `longformer`: Transformers' `LongformerSelfAttention`, unchanged (the exact reference);
  `blocked`: the same sparse attention of Beltagy et al. computed as dense blocks. With c = window / 2 and the length
  padded to a multiple of the window, query block i (c queries) attends to key blocks i-1, i, i+1 masked to the exact
  band |i - j| ≤ c, with the global keys gathered in front as a prefix, in one `scaled_dot_product_attention` call
  (the window part excludes global and pad keys, as Longformer's does, so no key counts twice). Global queries then
  attend to every real key with the `*_global` projections and overwrite their rows, as in Longformer. Cost and
  memory are linear in the length: a (b·n/c, c, G + 3c) boolean mask, never a dense (b, n, n) one.
  `flex`: the same pattern as ONE block-sparse FlexAttention call (`flex_window_attention`): the global keys gathered
  in front as a prefix of G' slots (G rounded up to whole kernel blocks), then every key; a query attends to every
  real key within |i - j| ≤ c and to the global keys outside that window (each global key once, as in Longformer).
  The kernel skips the blocks the mask rules out, and `mask_mod` in blocks wholly inside the window, so on a
  GPU the work is the band and the prefix, in one kernel, with no gathered copy of each window's keys. The global
  rows are the blocked backend's, unchanged.
- On a GPU, a pass that needs gradients recomputes each layer's attention in its backward pass
  (`config.attention_checkpointing`, `RECOMPUTES_ATTENTION`), so a training step keeps about what dense BERT keeps.
- The model never builds the (b, 1, n, n) additive mask that Transformers 5.x's `LongformerModel.forward` does
  (128 MiB at b = 2, n = 4096); the 2-D mask the layers read is built directly, with the same values.
- `SparseLongformerForSequenceClassification.from_bert_like_pretrained` builds a long model from a short BERT or
  RoBERTa checkpoint the way Beltagy et al. (2020, "Longformer: The Long-Document Transformer", arXiv:2004.05150,
  Sec. 5) did: encoder weights copied, `*_global` projections initialised from the local ones, learned positions
  copied repeatedly.

Shapes: b batch · n tokens (padded to a multiple of the window) · d hidden · heads attention heads of head_dim =
d / heads · c one-sided window (window / 2) · blocks = n / c query blocks of c tokens · g query blocks in one attention
call · G global slots (the most global tokens in a document of the batch).

Self-contained (Hub rule): imports only torch, transformers and sibling files.
"""

import functools
import importlib.util
import os
import re
import threading
import warnings

import torch
from torch import nn
from torch.nn import functional as F
from torch.utils.checkpoint import checkpoint
from transformers import AutoConfig, AutoModel
from transformers import initialization as init
from transformers.models.longformer.modeling_longformer import (
    LongformerBaseModelOutputWithPooling,
    LongformerClassificationHead,
    LongformerModel,
    LongformerPreTrainedModel,
    LongformerSelfAttention,
    LongformerSequenceClassifierOutput,
)
from transformers.utils import can_return_tuple, logging

from .configuration_sparse_longformer import ATTENTION_BACKENDS, SparseLongformerConfig
from .selection import GlobalTokenSelector, SelectsGlobalTokens, init_selector_buffers, stable_sort

try:  # PyTorch ≥ 2.5
    from torch.nn.attention.flex_attention import BlockMask, flex_attention
except ImportError:  # older PyTorch: the `flex` backend is refused, `auto` picks `blocked`
    BlockMask = flex_attention = None

logger = logging.get_logger(__name__)

FLEX_BLOCK = 128  # FlexAttention's block size: the global prefix fills whole blocks, so the band stays aligned

# model_type of a checkpoint with BERT's layers (the same modules under the same names) -> the row of its position
# table that holds a document's first token: BERT and ELECTRA number positions from 0, RoBERTa and its multilingual
# and French copies (like Longformer) from pad_token_id + 1, their rows 0..pad_token_id reserved
BERT_LIKE_FIRST_POSITION = {
    "bert": lambda config: 0,
    "electra": lambda config: 0,
    **dict.fromkeys(("roberta", "xlm-roberta", "camembert"), lambda config: config.pad_token_id + 1),
}
# settings of a converted model that the source checkpoint fixes (its weights have these sizes)
BERT_LIKE_ARCHITECTURE = ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size",
                          "hidden_act", "type_vocab_size", "layer_norm_eps", "pad_token_id")


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


# Copied from hf_longdoc.modeling.contextualizer.modeling_contextualizer.real_token_mask
def real_token_mask(input_ids, inputs_embeds, attention_mask):
    """Validate the inputs once and return the (b, n) bool mask of real tokens."""
    if (input_ids is None) == (inputs_embeds is None):
        raise ValueError("Pass exactly one of `input_ids` or `inputs_embeds`.")
    shape = tuple(input_ids.shape if input_ids is not None else inputs_embeds.shape[:2])
    if len(shape) != 2 or (inputs_embeds is not None and inputs_embeds.dim() != 3):
        got = tuple((input_ids if input_ids is not None else inputs_embeds).shape)
        raise ValueError(f"`input_ids` must have shape (batch, length) (`inputs_embeds` one more dim), got {got}.")
    if shape[0] == 0 or shape[1] == 0:
        raise ValueError(f"Got an empty batch of shape {shape}: pass at least one document with at least one token.")
    if attention_mask is None:
        device = (input_ids if input_ids is not None else inputs_embeds).device
        return torch.ones(shape, dtype=torch.bool, device=device)
    if tuple(attention_mask.shape) != shape:
        raise ValueError(f"`attention_mask` has shape {tuple(attention_mask.shape)}, expected {shape} like the input.")
    mask = attention_mask.bool()
    if torch.compiler.is_compiling():  # a traced graph (ONNX export) cannot branch on values
        return mask
    empty = (~mask.any(dim=1)).nonzero().flatten().tolist()
    if empty:
        raise ValueError(
            f"Rows {empty} of `attention_mask` have no real token (all padding); drop empty documents from the batch."
        )
    return mask


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


# Copied from hf_longdoc.modeling.contextualizer.modeling_contextualizer.check_vocabulary_range
def check_vocabulary_range(input_ids, vocab_size):
    """Raise a clear error for an id outside the embedding table, before the lookup turns it into an index error."""
    if torch.compiler.is_compiling():  # a traced graph (ONNX export) cannot branch on values
        return
    out_of_range = (input_ids < 0) | (input_ids >= vocab_size)
    if out_of_range.any():
        bad = input_ids[out_of_range][0].item()
        raise ValueError(
            f"`input_ids` holds id {bad}, outside the vocabulary [0, {vocab_size}); "
            "use the tokenizer saved with this model or raise `config.vocab_size`."
        )


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


def check_selection_inputs(input_ids, global_attention_mask, real, vocab_size):
    """The ids fit the embedding table and a given `global_attention_mask` has the input's (b, n) shape."""
    if input_ids is not None:
        check_vocabulary_range(input_ids, vocab_size)
    if global_attention_mask is not None and tuple(global_attention_mask.shape) != tuple(real.shape):
        raise ValueError(f"`global_attention_mask` has shape {tuple(global_attention_mask.shape)}, expected "
                         f"{tuple(real.shape)} like the input.")


def repeat_positions(positions, max_length):
    """Longformer paper, Sec. 5: the (L, d) learned position rows copied repeatedly to fill (max_length, d); row i is
    row i mod L (the last copy cut short)."""
    return positions[torch.arange(max_length, device=positions.device) % positions.shape[0]]  # (max_length, d)


def bert_like_refusal(config):
    """Why a checkpoint with `config` cannot be converted (None: it can): it must have BERT's layers and learned
    absolute positions, embed tokens at the hidden size and name its pad id (which numbers the positions)."""
    if config.model_type not in BERT_LIKE_FIRST_POSITION:
        return (f"holds a {config.model_type!r} checkpoint, whose layers are not BERT's (checkpoints of model_type "
                f"{', '.join(map(repr, BERT_LIKE_FIRST_POSITION))} convert; a Longformer checkpoint loads as it is)")
    if getattr(config, "position_embedding_type", None) not in (None, "absolute"):
        return (f"uses position_embedding_type={config.position_embedding_type!r}; only learned absolute positions "
                "can be repeated")
    if getattr(config, "embedding_size", config.hidden_size) != config.hidden_size:  # ELECTRA-small
        return (f"embeds tokens in {config.embedding_size} dimensions and projects them to {config.hidden_size}; "
                "Longformer's embeddings have no projection, so only embedding_size = hidden_size converts")
    if config.pad_token_id is None:
        return "has no pad_token_id in its config.json; add the tokenizer's pad id there (it numbers the positions)"
    return None


def bert_like_config(pretrained_model_name_or_path):
    """The config of a checkpoint with BERT's layers, or a ValueError that says what to pass instead."""
    path = pretrained_model_name_or_path
    if os.path.isdir(path) and not os.path.isfile(os.path.join(path, "config.json")):
        raise ValueError(f"`pretrained_model_name_or_path` ({path!r}) has no config.json; pass a folder saved with "
                         "`save_pretrained`.")
    try:
        config = AutoConfig.from_pretrained(path)
    except (OSError, ValueError) as error:  # missing folder offline, unknown model_type
        raise ValueError(f"`pretrained_model_name_or_path` ({path!r}) could not be read as a checkpoint "
                         f"({error}).") from error
    refusal = bert_like_refusal(config)
    if refusal is not None:
        raise ValueError(f"`pretrained_model_name_or_path` ({path!r}) {refusal}.")
    return config


def neighbour_blocks(x, first, last, c, prefix=None):
    """For query blocks `first`..`last`-1 of `x` (rows, n, ...), n a multiple of the block size `c`: what each block
    attends to in the window, blocks i-1, i and i+1 side by side (zeros beyond the document's ends), after `prefix`
    (rows, G, ...) when given. Returns (rows, last - first, [G +] 3c, ...)."""
    n, rows, rest, lo, hi = x.shape[1], x.shape[0], x.shape[2:], (first - 1) * c, (last + 1) * c
    span = x[:, max(lo, 0): min(hi, n)]  # (rows, ≤ (g + 2)·c, ...)
    if lo < 0 or hi > n:
        span = torch.cat([span.new_zeros(rows, max(-lo, 0), *rest), span,
                          span.new_zeros(rows, max(hi - n, 0), *rest)], dim=1)  # (rows, (g + 2)·c, ...)
    span = span.view(rows, last - first + 2, c, *rest)  # (rows, g + 2, c, ...)
    parts = [span[:, :-2], span[:, 1:-1], span[:, 2:]]  # blocks i-1, i, i+1: (rows, g, c, ...) each
    if prefix is not None:
        parts.insert(0, prefix[:, None].expand(rows, last - first, *prefix.shape[1:]))  # (rows, g, G, ...)
    return torch.cat(parts, dim=2)


def window_mask(is_pad, is_global, c):
    """(b, blocks, c, 3c) bool: which of its `neighbour_blocks` keys each query may attend to in the window, the band
    |i - j| ≤ c over real, non-global keys (global keys come in front, once; Longformer's rule). A pad query, whose
    output row is zeroed, also sees itself, so no softmax row is empty."""
    b, n = is_pad.shape
    blocks = n // c
    positions = torch.arange(n, device=is_pad.device)
    query_pos = positions.view(blocks, c)  # (blocks, c)
    key_pos = neighbour_blocks(positions[None, :] + 1, 0, blocks, c)[0] - 1  # (blocks, 3c); -1: beyond the ends
    band = (key_pos[:, None, :] - query_pos[:, :, None]).abs() <= c  # (blocks, c, 3c)
    key_ok = neighbour_blocks(~(is_pad | is_global), 0, blocks, c)  # (b, blocks, 3c); beyond the ends: False
    allowed = band & key_ok[:, :, None, :]
    return allowed | ((key_pos[:, None, :] == query_pos[:, :, None]) & is_pad.view(b, blocks, c, 1))


def global_slots(is_global, most=None):
    """The positions of each document's global tokens, in order, padded to the batch's most (G): (b, G) positions
    and (b, G) bool, True where the slot holds one of the document's own global tokens. `most`: G fixed to
    min(most, n) instead (a traced graph cannot size a tensor by a count)."""
    count = is_global.sum(dim=1)  # (b,)
    slots = int(count.max()) if most is None else min(most, is_global.shape[1])
    positions = stable_sort((~is_global).to(torch.int32)).indices[:, :slots]  # globals first, in order
    return positions, torch.arange(slots, device=is_global.device) < count[:, None]


def blocked_mask(is_pad, is_global, c, slot_ok=None):
    """(b, blocks, c, [G +] 3c) bool: what each query of the blocked backend attends to, the filled global slots
    (`slot_ok`, (b, G), when given) in front of its `window_mask`."""
    allowed = window_mask(is_pad, is_global, c)  # (b, blocks, c, 3c)
    if slot_ok is None:
        return allowed
    b, blocks = allowed.shape[:2]
    return torch.cat([slot_ok[:, None, None, :].expand(b, blocks, c, slot_ok.shape[1]), allowed], dim=3)


def additive_mask(allowed, dtype):
    """`allowed` (bool, keys last) as the additive mask SDPA would make of it on every call: 0 where allowed, -inf
    elsewhere, in `dtype`. Made once per forward for every layer; its rows lie a multiple of 16 elements apart in
    memory (padded, then sliced), the alignment the GPU's memory-efficient kernel would otherwise copy the mask to
    (not in a traced graph, where the number of keys is symbolic)."""
    if torch.compiler.is_compiling():
        return torch.zeros_like(allowed, dtype=dtype).masked_fill(~allowed, float("-inf"))
    keys = allowed.shape[-1]
    bias = allowed.new_zeros(*allowed.shape[:-1], -(-keys // 16) * 16, dtype=dtype)[..., :keys]
    return bias.masked_fill_(~allowed, float("-inf"))


# Whether a pass that needs gradients recomputes each layer's attention in its backward (the gathered window keys and
# values, ≈3.5x k and v, and the global keys and values of every token) instead of keeping it, by device: on a GPU,
# where memory binds, it brings a training step down to about dense BERT's memory for a little more time; on a CPU,
# where time binds, it stays off. `config.attention_checkpointing` True / False overrides it. Measured:
# https://github.com/hf-longdoc/hf_longdoc/blob/main/docs/results.md#sparse-attention-and-the-s-lstm-on-a-gpu-second-session-nvidia-h200-bf16-base-size-2026-11-27
RECOMPUTES_ATTENTION = {"cpu": False, "cuda": True}


def recomputes_attention(config, hidden_states):
    if not (torch.is_grad_enabled() and hidden_states.requires_grad) or torch.compiler.is_compiling():
        return False
    choice = config.attention_checkpointing
    return RECOMPUTES_ATTENTION.get(hidden_states.device.type, True) if choice is None else choice


def checkpointed(recompute, function, *args):
    """`function(*args)`, its intermediate tensors recomputed in the backward pass when `recompute` (the RNG state
    is restored, so dropout draws the same mask)."""
    return checkpoint(function, *args, use_reentrant=False) if recompute else function(*args)


# Elements of the gathered keys of one call of the `blocked` backend, by device: on a CPU ≈16 MiB in fp32, so a group
# stays in cache; on a GPU ≈512 MiB in bf16, so a document of 8,192 tokens at batch 4 is one call a layer, because
# hundreds of calls of a CPU's size leave a GPU launching kernels instead of computing. Measured:
# https://github.com/hf-longdoc/hf_longdoc/blob/main/docs/results.md#sparse-attention-and-the-s-lstm-on-a-gpu-second-session-nvidia-h200-bf16-base-size-2026-11-27
GROUP_ELEMENTS = {"cpu": 1 << 22, "cuda": 1 << 28}

# What `auto` runs, by device, for a pass without gradients (reading) and for one with them (training): a GPU reads
# through `blocked`, its faster forward there, which needs no compiler, and trains through `flex`, its faster and
# leaner training step, compiled once for each new input shape, where Triton is there to compile it (`compiles_flex`).
# Measured: https://github.com/hf-longdoc/hf_longdoc/blob/main/docs/results.md#sparse-attention-and-the-s-lstm-on-a-gpu-third-session-nvidia-h200-bf16-base-size-2026-11-27
AUTO_BACKEND = {"cpu": {"reading": "blocked", "training": "blocked"},
                "cuda": {"reading": "blocked", "training": "flex"}}


@functools.cache
def has_triton():
    """Whether Triton is installed, looked up once per process (`auto` asks in every layer of every pass)."""
    return importlib.util.find_spec("triton") is not None


def compiles_flex(device):
    """Whether FlexAttention can run compiled on `device`: a GPU with Triton (which CUDA builds of PyTorch bring)."""
    return flex_attention is not None and device.type == "cuda" and has_triton()


def attention_backend_for(config, device, training, needs_grad):
    """The backend a layer runs (`config.attention_backend` resolved): `auto` is `AUTO_BACKEND` of the device and of
    whether the pass needs gradients (`blocked` elsewhere, and where FlexAttention cannot be compiled); `flex` falls
    back to `blocked` where FlexAttention cannot compute the same thing: a training pass with attention dropout (it
    has none) or a pass that needs gradients on the CPU (it has no CPU backward)."""
    backend = config.attention_backend
    if backend not in ATTENTION_BACKENDS:  # set on the config after it was built (`model.config.attention_backend = `)
        raise ValueError(f"`attention_backend` must be one of {ATTENTION_BACKENDS}, got {backend!r}.")
    if backend == "auto":
        backend = AUTO_BACKEND.get(device.type, {}).get("training" if needs_grad else "reading", "blocked")
        if backend == "flex" and not compiles_flex(device):
            backend = "blocked"
    if backend != "flex":
        return backend
    if flex_attention is None:
        raise ValueError("`attention_backend='flex'` needs PyTorch ≥ 2.5 (torch.nn.attention.flex_attention); "
                         "use 'blocked' or upgrade torch.")
    if training and config.attention_probs_dropout_prob > 0:
        logger.warning_once("FlexAttention has no attention dropout: training with attention_probs_dropout_prob = "
                            f"{config.attention_probs_dropout_prob} runs the `blocked` backend (set it to 0 to train "
                            "through `flex`).")
        return "blocked"
    if needs_grad and device.type != "cuda":
        logger.warning_once(f"FlexAttention has no backward on {device.type}: this pass runs the `blocked` backend.")
        return "blocked"
    return backend


@functools.cache
def compiled_flex_attention():
    """`flex_attention` through `torch.compile`, built once per process: compiled, it is one fused block-sparse
    kernel; eager, it materialises every score (the CPU equality tests run it so)."""
    return torch.compile(flex_attention)


def flex_block_mask(is_pad, slot_pos, slot_ok, c):
    """FlexAttention's `BlockMask` of the window + global pattern over keys laid out as [G' global slots | n keys].
    Query i attends to every real key j with |i - j| ≤ c (global ones included), and to each filled slot
    (`slot_ok`, (b, G'), of position `slot_pos`) whose global token lies outside that window: every global key once, as
    in Longformer, where the window leaves global keys out and the prefix holds them all. A pad query, whose row is
    zeroed, also sees itself, so no row is empty. `is_pad`: (b, n) bool, right-padded (the model checks it).

    The blocks are known from the pattern (`window_kv_blocks`), so the mask is built from them directly, in
    O(n / 128) work (`create_block_mask` would evaluate `mask_mod` on all (b, n, G' + n) pairs to find them); a key
    block wholly inside the window of a query block and free of pads is full, where the kernel skips `mask_mod`.
    `mask_mod` reads one length and one count per document, not a flag per key, which makes the kernel several times
    faster on a GPU; measured: https://github.com/hf-longdoc/hf_longdoc/blob/main/docs/results.md#sparse-attention-and-the-s-lstm-on-a-gpu-second-session-nvidia-h200-bf16-base-size-2026-11-27"""
    b, n = is_pad.shape
    slots = slot_ok.shape[1]
    lengths = (~is_pad).sum(dim=1)  # (b,): real keys are 0..length-1 (right padding)
    counts = slot_ok.sum(dim=1)  # (b,): filled slots are 0..count-1 (`global_slots`)

    def mask_mod(batch, head, query, key):
        j = key - slots  # the key's position in the document (negative: a slot of the prefix)
        length = lengths[batch]
        allowed = ((j >= 0) & ((query - j).abs() <= c) & (j < length)) | ((j == query) & (query >= length))
        if slots:
            slot = key.clamp(0, slots - 1)
            far = (query - slot_pos[batch, slot]).abs() > c  # a global key inside the window comes through the window
            allowed = allowed | ((j < 0) & (slot < counts[batch]) & far)
        return allowed

    partial, full = window_kv_blocks(is_pad, slots, c)
    return BlockMask.from_kv_blocks(*as_kv_blocks(partial), *as_kv_blocks(full), BLOCK_SIZE=FLEX_BLOCK,
                                    mask_mod=mask_mod, seq_lengths=(n, slots + n))


def window_kv_blocks(is_pad, slots, c):
    """Which key blocks each query block of `FLEX_BLOCK` queries touches over [`slots` prefix | n keys]: (b, query
    blocks, key blocks) bool `partial` (the prefix's blocks, and the window's blocks where `mask_mod` must decide) and
    `full` (blocks wholly within c of every query of the block, with no pad key: every pair is allowed)."""
    b, n = is_pad.shape
    query_blocks, prefix_blocks = -(-n // FLEX_BLOCK), slots // FLEX_BLOCK
    blocks = torch.arange(query_blocks, device=is_pad.device)
    # (query blocks, key blocks): `near`, some key of the block within c of some query; `within`, every key of every one
    gap = (blocks[:, None] - blocks[None, :]).abs() * FLEX_BLOCK  # between the blocks' first positions
    near = gap - (FLEX_BLOCK - 1) <= c
    within = gap + FLEX_BLOCK - 1 <= c
    padded = F.pad(is_pad, (0, query_blocks * FLEX_BLOCK - n), value=True).view(b, query_blocks, FLEX_BLOCK)
    clean = ~padded.any(dim=2)  # (b, key blocks): no pad key (a short last block counts as padded)
    full = within[None] & clean[:, None, :]
    partial = near[None] & ~full
    prefix = partial.new_ones(b, query_blocks, prefix_blocks)
    return torch.cat([prefix, partial], dim=2), torch.cat([prefix & False, full], dim=2)


def as_kv_blocks(blocks):
    """`BlockMask.from_kv_blocks`' (b, 1, query blocks) counts and (b, 1, query blocks, key blocks) int32 indices of a
    (b, query blocks, key blocks) bool table: each row's key blocks first, in order."""
    counts = blocks.sum(dim=2, dtype=torch.int32)
    indices = torch.sort((~blocks).to(torch.int8), dim=2, stable=True).indices.to(torch.int32)
    return counts[:, None], indices[:, None]


class ForwardPatterns:
    """What every layer of one forward derives from the same (b, n) pad and global tensors (the blocked backend's
    window mask and global slots, the flex block mask), built by the first layer and reused by the others: the layers
    receive the same tensor objects, so the values are rebuilt only when those tensors are new objects.

    Kept per thread: `predict` and the head stage run several forwards of one model at once on the CPU
    (`concurrent_inference`), and one thread's new batch must neither replace nor clear another's masks."""

    def __init__(self):
        self.local = threading.local()

    def get(self, name, is_pad, is_global, build):
        if torch.compiler.is_compiling():  # a traced graph holds no state between layers
            return build()
        key = getattr(self.local, "key", None)
        if key is None or key[0] is not is_pad or key[1] is not is_global:
            self.local.key, self.local.values = (is_pad, is_global), {}  # (the tensors held: no object id is reused)
        values = self.local.values
        if name not in values:
            values[name] = build()
        return values[name]

    def clear(self):
        """Let go of this thread's last forward's values (the window mask is (b, n / c, c, G + 3c) booleans: 117 MB at
        batch 4 and 32,768 tokens), once every layer has run."""
        self.local.key, self.local.values = None, {}

    def __deepcopy__(self, memo):  # a copied model starts with nothing cached (a thread-local cannot be copied)
        return ForwardPatterns()

    def __reduce__(self):
        return ForwardPatterns, ()


class SparseLongformerSelfAttention(LongformerSelfAttention):
    """Longformer's self-attention (same parameters) with the `blocked` backend next to Transformers' own."""

    def __init__(self, config, layer_id, patterns=None):
        super().__init__(config, layer_id)
        self.patterns = patterns if patterns is not None else ForwardPatterns()  # shared by the model's layers

    def forward(self, hidden_states, attention_mask=None, is_index_masked=None, is_index_global_attn=None,
                is_global_attn=None, output_attentions=False):
        if torch.compiler.is_compiling() and not output_attentions:  # a traced graph (ONNX export): see below
            return (self.blocked_attention(hidden_states, is_index_masked, is_index_global_attn, None),)
        backend = attention_backend_for(self.config, hidden_states.device, self.training,
                                        torch.is_grad_enabled() and hidden_states.requires_grad)
        if backend == "longformer" or output_attentions:
            return super().forward(hidden_states, attention_mask=attention_mask, is_index_masked=is_index_masked,
                                   is_index_global_attn=is_index_global_attn, is_global_attn=is_global_attn,
                                   output_attentions=output_attentions)
        if backend == "flex":
            return (self.flex_window_attention(hidden_states, is_index_masked, is_index_global_attn, is_global_attn),)
        return (self.blocked_attention(hidden_states, is_index_masked, is_index_global_attn, is_global_attn),)

    def projections(self, hidden_states):
        """q, k and v of every token: three (b, n, heads, head_dim). Three products, not one over the concatenated
        weights, whose (3d, d) copy the backward pass would keep in every layer."""
        b, n, d = hidden_states.shape
        return (projection(hidden_states).view(b, n, self.num_heads, self.head_dim)
                for projection in (self.query, self.key, self.value))

    def flex_window_attention(self, hidden_states, is_pad, is_global, any_global):
        """Longformer's attention with the window and the global columns in one FlexAttention call over
        [global slots | every key] (`flex_block_mask`), then the global rows as the blocked backend computes them;
        hidden states (b, n, d), n a multiple of the window. No dropout: `attention_backend_for` sends training with
        attention dropout to `blocked`."""
        b, n, d = hidden_states.shape
        recompute = recomputes_attention(self.config, hidden_states)
        q, k, v = self.projections(hidden_states)  # (b, n, heads, head_dim) each
        global_pos = slot_ok = None
        if any_global:
            global_pos, slot_ok = self.patterns.get("slots", is_pad, is_global, lambda: global_slots(is_global))
            blocks_of_slots = -(-global_pos.shape[1] // FLEX_BLOCK) * FLEX_BLOCK - global_pos.shape[1]
            prefix_pos = F.pad(global_pos, (0, blocks_of_slots))  # (b, G'); the added slots are empty
            prefix_ok = F.pad(slot_ok, (0, blocks_of_slots), value=False)
        else:
            prefix_pos, prefix_ok = is_pad.new_zeros(b, 0, dtype=torch.long), is_pad.new_zeros(b, 0)
        block_mask = self.patterns.get("flex", is_pad, is_global, lambda: flex_block_mask(
            is_pad, prefix_pos, prefix_ok, self.one_sided_attn_window_size))
        out = checkpointed(recompute, self.flex_window, q, k, v, prefix_pos, block_mask, is_pad)
        del q, k, v  # freed before the global rows (at inference; a backward pass keeps what it needs)
        if not any_global:
            return out
        return self.global_rows(hidden_states, out, is_pad, global_pos, slot_ok, recompute)

    def flex_window(self, q, k, v, prefix_pos, block_mask, is_pad):
        """The window and global columns of every query, (b, n, d), zero rows for pads: FlexAttention over
        [the keys and values at `prefix_pos` | every key and value]."""
        b, n, heads, head_dim = q.shape
        # joined in the projections' layout, where both parts are contiguous (joining strided (b, heads, n, head_dim)
        # views is a strided copy, a tenth of a GPU forward), then viewed as FlexAttention reads them
        gather = prefix_pos[:, :, None, None].expand(b, prefix_pos.shape[1], heads, head_dim)
        k, v = (torch.cat([x.gather(1, gather), x], dim=1).transpose(1, 2) for x in (k, v))  # (b, heads, G'+n, ·)
        q = q.transpose(1, 2)  # (b, heads, n, head_dim)
        if q.device.type == "cuda":
            logger.info_once("Sparse attention through FlexAttention: compiling its kernel for this input shape (about "
                             "10 s on an H200 the first time; again for a new length or batch size).")
            out = compiled_flex_attention()(q, k, v, block_mask=block_mask)  # (b, heads, n, head_dim)
        else:  # eager: every score materialised (torch's warning says so; ours once)
            logger.warning_once("`attention_backend='flex'` off a GPU runs FlexAttention eagerly, which computes every "
                                "score; 'blocked' is the fast backend here.")
            with warnings.catch_warnings():
                warnings.filterwarnings("ignore", message="flex_attention called without torch.compile")
                out = flex_attention(q, k, v, block_mask=block_mask)
        return out.transpose(1, 2).reshape(b, n, heads * head_dim).masked_fill(is_pad[..., None], 0.0)

    def blocked_attention(self, hidden_states, is_pad, is_global, any_global):
        """Longformer's attention (window and global rows) as dense blocks: the index work is `window_mask`,
        `global_slots` and `neighbour_blocks`, done once per forward for every layer; hidden states (b, n, d), n a
        multiple of the window.

        `any_global` None (a traced graph, which cannot branch on whether a batch has global tokens): the global
        path always runs, with as many slots as the selector can choose ([CLS] and `num_global_tokens`), the empty
        ones masked; the result is the same."""
        static = any_global is None
        b, n, d = hidden_states.shape
        c = self.one_sided_attn_window_size
        recompute = recomputes_attention(self.config, hidden_states)
        q, k, v = self.projections(hidden_states)  # (b, n, heads, head_dim) each
        global_pos = slot_ok = None
        if static or any_global:
            most = self.config.num_global_tokens + 1 if static else None
            global_pos, slot_ok = self.patterns.get("slots", is_pad, is_global, lambda: global_slots(is_global, most))
        dtype = q.dtype  # the compute dtype (under autocast, not the weights')
        allowed = self.patterns.get(("window", dtype), is_pad, is_global, lambda: additive_mask(
            blocked_mask(is_pad, is_global, c, slot_ok), dtype))
        out = checkpointed(recompute, self.blocked_window, q, k, v, global_pos, allowed, is_pad, static)
        del q, k, v  # freed before the global rows (at inference; a backward pass keeps what it needs)
        if global_pos is None:
            return out
        return self.global_rows(hidden_states, out, is_pad, global_pos, slot_ok, recompute)

    def blocked_window(self, q, k, v, global_pos, allowed, is_pad, static):
        """The window and global columns of every query, (b, n, d), zero rows for pads: query block i over the global
        keys (at `global_pos`, (b, G), or none) and key blocks i-1, i, i+1, masked by `allowed` (`blocked_mask` as an
        `additive_mask`)."""
        b, n, heads, head_dim = q.shape
        d, c = heads * head_dim, self.one_sided_attn_window_size
        blocks, slots = n // c, 0 if global_pos is None else global_pos.shape[1]
        prefix = (None, None)
        if global_pos is not None:
            gather = global_pos[:, :, None, None].expand(b, slots, heads, head_dim)  # (b, G, heads, head_dim)
            prefix = (k.gather(1, gather), v.gather(1, gather))  # the global keys and values, (b, G, heads, head_dim)
        # query blocks in groups, so the gathered keys and values of a group stay within `GROUP_ELEMENTS`
        q_blocks = q.view(b, blocks, c, heads, head_dim)  # (b, blocks, c, heads, head_dim)
        per_call = max(1, GROUP_ELEMENTS.get(q.device.type, GROUP_ELEMENTS["cuda"]) // (b * (3 * c + slots) * d))
        groups = [(0, blocks)] if static else [(first, min(first + per_call, blocks))  # traced: one group, so the
                                               for first in range(0, blocks, per_call)]  # length stays symbolic
        dropout = self.dropout if self.training else 0.0
        out = q.new_empty(b, n, d)  # q's dtype: the compute dtype under autocast
        for first, last in groups:
            keys, values = (neighbour_blocks(x, first, last, c, p).flatten(0, 1).transpose(1, 2)
                            for x, p in zip((k, v), prefix))  # (b·g, heads, G + 3c, head_dim)
            group = F.scaled_dot_product_attention(  # (b·g, heads, c, head_dim), mask broadcast over heads
                q_blocks[:, first:last].flatten(0, 1).transpose(1, 2), keys, values,  # (b·g, heads, c, head_dim)
                attn_mask=allowed[:, first:last].flatten(0, 1)[:, None], dropout_p=dropout,  # (b·g, 1, c, G + 3c)
            )
            out[:, first * c: last * c] = group.transpose(1, 2).reshape(b, (last - first) * c, d)  # (b, g·c, d)
        return out.masked_fill_(is_pad[..., None], 0.0)

    def global_rows(self, hidden_states, out, is_pad, global_pos, slot_ok, recompute=False):
        """`out` (b, n, d) with the rows of the global tokens replaced by Longformer's global attention
        (`global_attention`). `global_pos`, `slot_ok`: (b, G) from `global_slots`."""
        b, n, d = hidden_states.shape
        global_out = checkpointed(recompute, self.global_attention, hidden_states, is_pad, global_pos)  # (b, G, d)
        index = global_pos[..., None].expand(b, global_pos.shape[1], d)
        if not (torch.is_grad_enabled() and (out.requires_grad or global_out.requires_grad)):
            # no backward pass: the G rows written in place (an empty slot writes back its row's own value)
            rows = torch.where(slot_ok[..., None], global_out.to(out.dtype), out.gather(1, index))
            return out.scatter_(1, index, rows)
        # the G global rows of each document written over its window rows in `out`, (b, n, d), where a slot is filled
        # (the slots' positions are distinct), so no shape depends on the count; `where` keeps only its (b, n) choice
        # for the backward pass, where gathering from `out` would keep all of `out`
        rows = torch.zeros_like(out).scatter_(1, index, global_out.to(out.dtype))
        written = slot_ok.new_zeros(b, n).scatter(1, global_pos, slot_ok)  # (b, n): the rows of filled slots
        return torch.where(written[..., None], rows, out)

    def global_attention(self, hidden_states, is_pad, global_pos):
        """(b, G, d): query_global of each global token (at `global_pos`, (b, G)) over key_global / value_global of
        every real token."""
        b, n, d = hidden_states.shape
        heads, head_dim, slots = self.num_heads, self.head_dim, global_pos.shape[1]
        global_hidden = hidden_states.gather(1, global_pos[..., None].expand(b, slots, d))  # (b, G, d)
        # queries (b, heads, G, head_dim) of the global tokens; keys and values (b, heads, n, head_dim) of all tokens
        q_global = self.query_global(global_hidden).view(b, slots, heads, head_dim).transpose(1, 2)
        k_global, v_global = (proj(hidden_states).view(b, n, heads, head_dim).transpose(1, 2)
                              for proj in (self.key_global, self.value_global))
        global_out = F.scaled_dot_product_attention(q_global, k_global, v_global, attn_mask=~is_pad[:, None, None, :],
                                                    dropout_p=self.dropout if self.training else 0.0)
        return global_out.transpose(1, 2).reshape(b, slots, d)


class TokenGate(nn.Module):
    """`classifier_pooling="gated"`: one gate per token, σ(w·LN(h_i) + b) on its final state h_i. The LayerNorm gives
    the score unit-scale inputs (a converted MiniLM's final states have a norm near 3.6, and without it the gate barely
    moved in 30 epochs of the head stage); w = 0 and b = 0 at initialisation (every gate 1/2), so the weighted mean
    it gives starts as the plain mean."""

    def __init__(self, hidden_size, eps):
        super().__init__()
        self.norm = nn.LayerNorm(hidden_size, eps=eps)
        self.weight = nn.Parameter(torch.zeros(hidden_size))  # w
        self.bias = nn.Parameter(torch.zeros(1))  # b

    def forward(self, hidden_states):
        score = self.norm(hidden_states) @ self.weight.to(hidden_states.dtype) + self.bias.to(hidden_states.dtype)
        return torch.sigmoid(score)[..., None]  # (b, n, 1)


class SparseLongformerPreTrainedModel(SelectsGlobalTokens, LongformerPreTrainedModel):
    config_class = SparseLongformerConfig
    _no_split_modules = ["SparseLongformerSelfAttention"]

    def attention_backend_for(self, training):
        """The backend the layers run on this model's device (`config.attention_backend` resolved) for a training
        pass (one that needs gradients) or an inference pass: what `bench` reports."""
        return attention_backend_for(self.config, next(self.parameters()).device, training, training)

    @torch.no_grad()
    def _init_weights(self, module):
        super()._init_weights(module)
        init_selector_buffers(module)
        if isinstance(module, TokenGate):  # every gate 1/2: the mean at the start
            init.zeros_(module.weight)
            init.zeros_(module.bias)


class SparseLongformerModel(SparseLongformerPreTrainedModel, LongformerModel):
    """Transformers' `LongformerModel` (same modules and weights) whose `forward` picks the global tokens itself and
    whose layers attend with `config.attention_backend`."""

    def __init__(self, config, add_pooling_layer=True):
        super().__init__(config, add_pooling_layer=add_pooling_layer)
        self.patterns = ForwardPatterns()  # one window mask (or block mask) per forward, for every layer
        for layer_id, layer in enumerate(self.encoder.layer):
            layer.attention.self = SparseLongformerSelfAttention(config, layer_id, self.patterns)
        self.selector = GlobalTokenSelector(config)
        self.post_init()

    def attention_pattern_of(self, global_tokens, real):
        """(b, n, n) bool of Longformer's attention: the band |i - j| ≤ window / 2, plus global rows and columns."""
        window = self.config.attention_window
        half = (window if isinstance(window, int) else max(window)) // 2
        positions = torch.arange(real.shape[1], device=real.device)
        band = (positions[:, None] - positions[None, :]).abs() <= half  # (n, n)
        return band[None] | global_tokens[:, :, None] | global_tokens[:, None, :]

    @can_return_tuple
    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        global_attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.LongTensor | None = None,
        position_ids: torch.LongTensor | None = None,
        inputs_embeds: torch.Tensor | None = None,
        output_attentions: bool | None = None,
        output_hidden_states: bool | None = None,
        return_dict: bool | None = None,
        global_selector_generator: torch.Generator | None = None,
    ) -> LongformerBaseModelOutputWithPooling:
        r"""
        global_attention_mask (`torch.Tensor` of shape `(batch_size, sequence_length)`, *optional*):
            1 for global tokens. When not given, `config.global_selector` chooses them from `input_ids` (with only
            `inputs_embeds`, [CLS] alone is global).
        global_selector_generator (`torch.Generator`, *optional*):
            The random source of `global_selector="random"`; fix it to repeat a selection.
        """
        limit = self.config.max_position_embeddings - self.config.pad_token_id - 1  # positions start after the pad id
        attention_mask, input_ids, global_attention_mask, token_type_ids, inputs_embeds = keep_what_the_model_reads(
            limit, self.config.max_input_length, "tokens", attention_mask, input_ids, global_attention_mask,
            token_type_ids, inputs_embeds)
        real = real_token_mask(input_ids, inputs_embeds, attention_mask)
        if position_ids is not None:  # a caller's numbering of a cut input: its first ones, as for the truncated input
            position_ids = position_ids[:, : real.shape[1]]
        check_right_padded(real)
        check_selection_inputs(input_ids, global_attention_mask, real, self.config.vocab_size)
        config = self.config
        output_attentions = config.output_attentions if output_attentions is None else output_attentions
        output_hidden_states = config.output_hidden_states if output_hidden_states is None else output_hidden_states

        if global_attention_mask is None:
            selector = config.global_selector if input_ids is not None else "cls"
            global_attention_mask = self.selector(input_ids if input_ids is not None else real.long(), real,
                                                  selector=selector, generator=global_selector_generator)
        # Longformer's merged mask: 0 pad, 1 local, 2 global
        merged = real.long() * (global_attention_mask.bool().long() + 1)
        if token_type_ids is None:
            token_type_ids = torch.zeros_like(merged)
        # n padded up to a multiple of the window: every (b, n) input gains `padding_len` pad columns
        padding_len, input_ids, merged, token_type_ids, position_ids, inputs_embeds = self._pad_to_window_size(
            input_ids=input_ids, attention_mask=merged, token_type_ids=token_type_ids, position_ids=position_ids,
            inputs_embeds=inputs_embeds, pad_token_id=config.pad_token_id,
        )
        embedding_output = self.embeddings(input_ids=input_ids, position_ids=position_ids,
                                           token_type_ids=token_type_ids, inputs_embeds=inputs_embeds)
        # the 2-D additive mask Longformer's layers read: min for pads, 0 for local, max for global tokens
        limits = torch.finfo(embedding_output.dtype)
        layer_mask = torch.zeros(merged.shape, dtype=embedding_output.dtype, device=merged.device)
        layer_mask = layer_mask.masked_fill(merged == 0, limits.min).masked_fill(merged == 2, limits.max)
        try:
            encoder_outputs = self.encoder(embedding_output, attention_mask=layer_mask, padding_len=padding_len,
                                           output_attentions=output_attentions,
                                           output_hidden_states=output_hidden_states, return_dict=True)
        finally:
            self.patterns.clear()
        sequence_output = encoder_outputs.last_hidden_state
        return LongformerBaseModelOutputWithPooling(
            last_hidden_state=sequence_output,
            pooler_output=self.pooler(sequence_output) if self.pooler is not None else None,
            hidden_states=encoder_outputs.hidden_states,
            attentions=encoder_outputs.attentions,
            global_attentions=encoder_outputs.global_attentions,
        )


    def _pad_to_window_size(self, input_ids, attention_mask, token_type_ids, position_ids, inputs_embeds,
                            pad_token_id):
        """Longformer's padding to a multiple of the window; in a traced graph (ONNX export) unconditional (by zero
        columns when the length is a multiple already), so that no branch fixes the length."""
        if not torch.compiler.is_compiling() or input_ids is None:
            return super()._pad_to_window_size(input_ids, attention_mask, token_type_ids, position_ids, inputs_embeds,
                                               pad_token_id)
        window = self.config.attention_window
        window = window if isinstance(window, int) else max(window)
        padding_len = (window - input_ids.shape[1] % window) % window

        def pad(tensor, value):
            return None if tensor is None else F.pad(tensor, (0, padding_len), value=value)

        return (padding_len, pad(input_ids, pad_token_id), pad(attention_mask, 0), pad(token_type_ids, 0),
                pad(position_ids, pad_token_id), inputs_embeds)


class SparseLongformerForSequenceClassification(SparseLongformerPreTrainedModel):
    """Longformer's classification head (dense → tanh → out_proj, same parameter names) on a `SparseLongformerModel`,
    reading the final [CLS] state, the mean of the real tokens' or their gated mean (`config.classifier_pooling`):
    single-label, multi-label (BCE) or regression, by `problem_type`."""

    accepts_loss_kwargs = False  # the loss is a mean over the batch; it does not use num_items_in_batch

    def __init__(self, config):
        super().__init__(config)
        self.num_labels = config.num_labels
        self.longformer = SparseLongformerModel(config, add_pooling_layer=False)
        self.classifier = LongformerClassificationHead(config)
        gated = config.classifier_pooling == "gated"
        self.token_gate = TokenGate(config.hidden_size, config.layer_norm_eps) if gated else None
        self.post_init()

    @classmethod
    def from_bert_like_pretrained(cls, pretrained_model_name_or_path, max_length=4096, attention_window=512,
                                  **config_kwargs):
        """A long model from a short checkpoint with BERT's layers (BERT, RoBERTa, XLM-RoBERTa, CamemBERT, ELECTRA),
        as Beltagy et al. (2020, Sec. 5) built longformer-base-4096 from roberta-base: the encoder's weights under
        Longformer's names, every layer's `*_global` projections initialised from the local ones, the checkpoint's
        learned positions copied repeatedly to `max_length` tokens, and a new classification head.

        `pretrained_model_name_or_path` is a checkpoint with model_type `bert` or `roberta` (any head; only its encoder
        is read). `config_kwargs` (`num_labels`, `global_selector`, `num_global_tokens`, `attention_backend`, dropouts,
        ...) go to `SparseLongformerConfig`; the sizes in `BERT_LIKE_ARCHITECTURE` come from the checkpoint. Positions
        count real tokens from `pad_token_id + 1`, as Longformer's do, so explicit `position_ids` must use that
        numbering. Returns the model in eval mode, like `from_pretrained`.

        What is copied, how the positions are numbered, and when the model equals its source:
        https://github.com/hf-longdoc/hf_longdoc/blob/main/docs/models.md#converting-a-bert-like-checkpoint-to-the-sparse-longformer
        """
        source_config = bert_like_config(pretrained_model_name_or_path)
        fixed = sorted(set(config_kwargs) & {*BERT_LIKE_ARCHITECTURE, "max_position_embeddings"})
        if fixed:
            raise ValueError(f"{fixed} come from the checkpoint and cannot be set when converting it; pass "
                             "`max_length` for the length and leave the sizes to the checkpoint.")
        if isinstance(max_length, bool) or not isinstance(max_length, int) or max_length < 1:
            raise ValueError(f"`max_length` must be a positive integer (tokens per document), got {max_length!r}.")
        pad = source_config.pad_token_id
        first = BERT_LIKE_FIRST_POSITION[source_config.model_type](source_config)
        bos = getattr(source_config, "bos_token_id", None)
        eos = getattr(source_config, "eos_token_id", None)
        settings = {name: getattr(source_config, name) for name in BERT_LIKE_ARCHITECTURE}
        settings.update(
            max_position_embeddings=max_length + pad + 1,  # rows 0..pad reserved: positions start at pad + 1
            attention_window=attention_window,
            bos_token_id=bos if bos is not None else getattr(source_config, "cls_token_id", None),
            eos_token_id=eos,
            sep_token_id=getattr(source_config, "sep_token_id", None) if eos is None else eos,
            hidden_dropout_prob=source_config.hidden_dropout_prob,
            attention_probs_dropout_prob=source_config.attention_probs_dropout_prob,
            initializer_range=source_config.initializer_range,
        )
        settings.update(config_kwargs)
        model = cls(SparseLongformerConfig(**settings))

        source = AutoModel.from_pretrained(pretrained_model_name_or_path).state_dict()
        target = model.longformer.state_dict()
        copied, unused = [], set(source) - {"embeddings.position_embeddings.weight"}
        with torch.no_grad():
            for name, tensor in target.items():
                if name.startswith("selector."):  # TF-IDF / PMI statistics: fitted later
                    continue
                if name == "embeddings.position_embeddings.weight":
                    table = source[name]  # (first + L, d)
                    # RoBERTa's reserved rows 0..pad kept; BERT has none: zeros (only pad tokens read them)
                    reserved = table[:first] if first else table.new_zeros(pad + 1, table.shape[1])  # (pad + 1, d)
                    tensor.copy_(torch.cat([reserved, repeat_positions(table[first:], max_length)]))
                    continue
                source_name = re.sub(r"\.(query|key|value)_global\.", r".\1.", name)  # Sec. 5: global from local
                if source_name not in source or source[source_name].shape != tensor.shape:
                    found = tuple(source[source_name].shape) if source_name in source else "nothing"
                    raise ValueError(f"`pretrained_model_name_or_path` ({pretrained_model_name_or_path!r}): "
                                     f"{source_name} should be {tuple(tensor.shape)} for {name}, found {found}.")
                tensor.copy_(source[source_name])
                copied.append(name)
                unused.discard(source_name)
        length = source_config.max_position_embeddings - first
        logger.info(
            "Converted the %s checkpoint %s: %d tensors copied (%d layers, *_global q/k/v from the local ones), "
            "%d learned positions repeated to %d (%.2f copies), a new %d-label classifier; not used: %s.",
            source_config.model_type, pretrained_model_name_or_path, len(copied), source_config.num_hidden_layers,
            length, max_length, max_length / length, model.config.num_labels, sorted(unused) or "nothing",
        )
        return model.eval()

    def pooled_state(self, last_hidden_state, attention_mask=None):
        """(b, 1, d): what the classification head reads (it takes position 0): the final [CLS] state; with
        `classifier_pooling="mean"` the mean of the final states of the tokens `attention_mask` keeps (all of them
        without one), as ModernBERT's `classifier_pooling` computes it; with `"gated"` their mean weighted by
        `token_gate`, Σ_i σ(w·LN(h_i) + b) h_i / Σ_i σ(w·LN(h_i) + b) over the same tokens."""
        if self.config.classifier_pooling == "cls":
            return last_hidden_state[:, :1]
        if attention_mask is None:
            keep = last_hidden_state.new_ones(last_hidden_state.shape[:2] + (1,), dtype=torch.float32)
        else:  # the encoder cut an over-long input to what it reads; any nonzero mask value is a real token
            keep = attention_mask[:, :last_hidden_state.shape[1], None].bool().float()  # (b, n, 1)
        if self.token_gate is not None:
            keep = keep * self.token_gate(last_hidden_state).float()
        weights = keep / keep.sum(dim=1, keepdim=True).clamp(min=torch.finfo(keep.dtype).tiny)  # no fp16 overflow
        return (last_hidden_state * weights.to(last_hidden_state.dtype)).sum(dim=1, keepdim=True)

    @can_return_tuple
    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        global_attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.LongTensor | None = None,
        position_ids: torch.LongTensor | None = None,
        inputs_embeds: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
        output_attentions: bool | None = None,
        output_hidden_states: bool | None = None,
        return_dict: bool | None = None,
        global_selector_generator: torch.Generator | None = None,
    ) -> LongformerSequenceClassifierOutput:
        outputs = self.longformer(input_ids, attention_mask=attention_mask,
                                  global_attention_mask=global_attention_mask, token_type_ids=token_type_ids,
                                  position_ids=position_ids, inputs_embeds=inputs_embeds,
                                  output_attentions=output_attentions, output_hidden_states=output_hidden_states,
                                  global_selector_generator=global_selector_generator, return_dict=True)
        logits = self.classifier(self.pooled_state(outputs.last_hidden_state, attention_mask))
        loss = None
        if labels is not None:
            check_labels(labels, logits, self.config)
            loss = self.loss_function(labels=labels, pooled_logits=logits, config=self.config)
        return LongformerSequenceClassifierOutput(loss=loss, logits=logits, hidden_states=outputs.hidden_states,
                                                  attentions=outputs.attentions,
                                                  global_attentions=outputs.global_attentions)


__all__ = [
    "SparseLongformerModel",
    "SparseLongformerForSequenceClassification",
    "SparseLongformerPreTrainedModel",
]
