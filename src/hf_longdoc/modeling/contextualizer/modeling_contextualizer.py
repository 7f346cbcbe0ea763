"""Contextualizer: a linear-time document encoder that refines one context vector with second-order attention.

Paper: D. Maupomé and M.-J. Meurs, "Contextualizer: Connecting the Dots of Context with Second-Order Attention",
Information 13(6):290, 2022 (https://doi.org/10.3390/info13060290, Section 2). The equations of Section 2 are
numbered here in the order they appear:

    Eq. 1  p(i)_j = exp(i·s_j) / Σ_i' exp(i'·s_j)          positional encoding, a softmax over the document's positions
    Eq. 2  x_i = e(w_i) ⊙ p(i)                              token vector
    Eq. 3/4 contextualization c(k-1), x_i -> α_i(k) ⊙ x_i   (scalar vs vector attention, prose)
    Eq. 5  α_i(k) = W(k) (U(k) x_i ⊙ V(k) c(k-1)) + b(k)    rank-u second-order attention, per step k
    Eq. 6  z̃(k) = Σ_i α_i(k) ⊙ x_i
    Eq. 7  z(k) = LayerNorm(z̃(k))
    Eq. 8  c(k) = c(k-1) + z(k)

Choices the paper leaves open (the paper's behaviour is the default):
- Eq. 1 is a masked softmax over the real positions (pads never count), in fp32; positions count real tokens only,
  so left and right padding give the same encoding. s starts at 0 (every position weighted alike) because i·s_j
  with i in the thousands saturates the softmax for any sizeable random s.
- Eq. 6 sums in fp32, and the sum is computed as x_i = x̂_i / n with x̂_i = e(w_i) ⊙ n·p(i): Σ_i p(i) = 1, so the raw
  x_i are O(1/n) and would underflow in fp16 for long documents. Mathematically identical; see `ContextualizerStep`.
- α is un-normalised as in the paper; `config.alpha_normalizer` offers sigmoid or a per-feature softmax over tokens.
- c(0) is `constant` (ones), `learned`, or `random` U(-1, 1) per document in training with a fixed seeded draw in
  evaluation (Table 3).
Outputs: pooled = c(K); token outputs (`last_hidden_state`) = α(K) ⊙ x; `hidden_states` = (c(0), ..., c(K)).

Shapes: b batch · n tokens · m hidden size (embedding dim) · u rank.

Self-contained (Hub rule): imports only torch, transformers and sibling files.
"""

import torch
from torch import nn
from torch.nn import functional as F
from transformers import PreTrainedModel
from transformers import initialization as init
from transformers.modeling_layers import GradientCheckpointingLayer
from transformers.modeling_outputs import BaseModelOutputWithPooling, SequenceClassifierOutput
from transformers.utils import can_return_tuple, logging

from .configuration_contextualizer import ContextualizerConfig

logger = logging.get_logger(__name__)


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


def check_token_type_ids(token_type_ids, input_shape):
    """`token_type_ids` (a BERT-style tokenizer returns them) must match the input's (batch, length) shape."""
    if token_type_ids is not None and tuple(token_type_ids.shape) != tuple(input_shape):
        raise ValueError(f"`token_type_ids` has shape {tuple(token_type_ids.shape)}, expected {tuple(input_shape)} "
                         "like `input_ids`.")


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


def positional_encoding(mask, s):
    """Eq. 1 as a masked softmax over the real positions, in fp32. Returns n·p of shape (b, n, m) (see module doc).

    The position i of a token is its rank among the real tokens, so padding on either side changes nothing.
    """
    position = mask.cumsum(dim=1).float()  # (b, n): i = 1..n_real at real tokens
    logits = position[:, :, None] * s.float()[None, None, :]  # (b, n, m): i·s_j
    logits = logits.masked_fill(~mask[:, :, None], float("-inf"))
    p = logits.softmax(dim=1)  # (b, n, m), Σ_i p(i)_j = 1
    n_real = mask.sum(dim=1, keepdim=True).float()[:, :, None]  # (b, 1, 1)
    np_i = p * n_real  # mean 1 over the real positions, at least 1 at the peak
    # Once s is learned, i·s_j spans hundreds and the softmax tail is full of subnormal floats, on which CPU matmuls
    # run ~20x slower (measured: 6.5 s -> 0.33 s per training step of 8 × 3000 tokens). Their share of any sum is
    # below 1e-20 of the peak's, far under fp32 resolution, so they are flushed to zero.
    return np_i.masked_fill(np_i < 1e-20, 0.0)


def fp32_layer_norm(layer_norm, z):
    """LayerNorm in fp32 whatever the parameter dtype or autocast (Eq. 7 normalises a sum over thousands of tokens)."""
    weight = layer_norm.weight.float()
    bias = layer_norm.bias.float()
    with torch.autocast(device_type=z.device.type, enabled=False):
        return F.layer_norm(z.float(), layer_norm.normalized_shape, weight, bias, layer_norm.eps)


class ContextualizerEmbeddings(nn.Module):
    """Eq. 1-2: the symbol embedding e(w) times the positional encoding p(i), returned as x̂ = n·x (see module doc)."""

    def __init__(self, config):
        super().__init__()
        self.word_embeddings = nn.Embedding(config.vocab_size, config.hidden_size, padding_idx=config.pad_token_id)
        self.position_scale = nn.Parameter(torch.zeros(config.hidden_size))  # s in Eq. 1
        self.dropout = nn.Dropout(config.hidden_dropout_prob)

    def forward(self, input_ids, inputs_embeds, mask):
        e = self.word_embeddings(input_ids) if inputs_embeds is None else inputs_embeds  # (b, n, m)
        e = self.dropout(e)
        np_i = positional_encoding(mask, self.position_scale)  # (b, n, m) = n·p(i)
        x_hat = e.float() * np_i  # Eq. 2, scaled by n; zero at pads because p is
        return x_hat.to(e.dtype)


class ContextualizerStep(GradientCheckpointingLayer):
    """One contextualization step k (Eq. 5-8) with its own U, V, W, b and LayerNorm.

    With x_i = x̂_i / n, Eq. 5 becomes α_i = W(U x̂_i ⊙ V c)/n + b (U, V, W are linear) and Eq. 6 z̃ = Σ_i α_i ⊙ x̂_i / n.
    """

    def __init__(self, config):
        super().__init__()
        self.U = nn.Linear(config.hidden_size, config.rank, bias=False)
        self.V = nn.Linear(config.hidden_size, config.rank, bias=False)
        self.W = nn.Linear(config.rank, config.hidden_size, bias=True)  # W.bias is b(k)
        self.layer_norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.alpha_normalizer = config.alpha_normalizer

    def attention(self, x_hat, c, mask, n_real):
        """Eq. 5: the vector attention α_i(k) of every token, (b, n, m), in fp32."""
        weight_dtype = self.V.weight.dtype
        Vc = self.V(c.to(weight_dtype))  # (b, u)
        a = F.linear(self.U(x_hat) * Vc[:, None, :], self.W.weight)  # (b, n, m) = W(U x̂_i ⊙ V c)
        alpha = a.float() / n_real + self.W.bias.float()  # x = x̂ / n on the linear part, then + b
        if self.alpha_normalizer == "sigmoid":
            alpha = alpha.sigmoid()
        elif self.alpha_normalizer == "softmax":
            alpha = alpha.masked_fill(~mask[:, :, None], float("-inf")).softmax(dim=1)
        return alpha

    def factored_update(self, x_hat, c, n_real):
        """Eq. 5-6 without materialising α: z̃ = Σ_i (W(U x̂_i ⊙ V c)/n + b) ⊙ x̂_i/n, reordered as

        z̃_j = Σ_r W_jr (V c)_r M_rj / n² + b_j Σ_i x̂_ij / n,   with M = Σ_i (U x̂_i) x̂_iᵀ (u×m),

        two matmuls per step instead of two matmuls plus several (b, n, m) passes. Used when α is un-normalised and
        the token outputs are not needed; `tests/test_contextualizer.py` proves it equals the direct form.
        """
        Ux = self.U(x_hat)  # (b, n, u)
        with torch.autocast(device_type=x_hat.device.type, enabled=False):
            M = torch.bmm(Ux.float().transpose(1, 2), x_hat.float())  # (b, u, m), sum over tokens in fp32
            Vc = F.linear(c.float(), self.V.weight.float())  # (b, u)
            W_t = self.W.weight.float().t()  # (u, m)
            linear_part = (W_t[None] * Vc[:, :, None] * M).sum(dim=1)  # (b, m)
            n = n_real[:, :, 0]  # (b, 1)
            return linear_part / n**2 + self.W.bias.float() * x_hat.float().sum(dim=1) / n

    def forward(self, x_hat, c, mask, output_contributions=False, output_attentions=False):
        """Returns c(k), the token contributions α_i ⊙ x_i (b, n, m) when asked (or when α is normalised; else None)
        and, when `output_attentions`, α(k) itself (b, n, m) (else None)."""
        n_real = mask.sum(dim=1).float()[:, None, None]  # (b, 1, 1)
        contributions = alpha = None
        if self.alpha_normalizer == "none" and not output_contributions and not output_attentions:
            z_tilde = self.factored_update(x_hat, c, n_real)  # Eq. 5-6, (b, m)
        else:
            alpha = self.attention(x_hat, c, mask, n_real)  # Eq. 5, (b, n, m)
            # Eq. 6 in fp32; pads add nothing because x̂ is zero there (and are masked for safety).
            contributions = (alpha * x_hat.float()).masked_fill(~mask[:, :, None], 0.0) / n_real  # α_i ⊙ x_i
            z_tilde = contributions.sum(dim=1)  # (b, m)
        z = fp32_layer_norm(self.layer_norm, z_tilde)  # Eq. 7
        if not output_attentions:
            return c + z, contributions  # Eq. 8
        return c + z, contributions, alpha


class ContextualizerPreTrainedModel(PreTrainedModel):
    config_class = ContextualizerConfig
    base_model_prefix = "contextualizer"
    main_input_name = "input_ids"
    supports_gradient_checkpointing = True
    _no_split_modules = ["ContextualizerStep"]

    @torch.no_grad()
    def _init_weights(self, module):
        super()._init_weights(module)
        if isinstance(module, ContextualizerEmbeddings):
            init.zeros_(module.position_scale)
        elif isinstance(module, ContextualizerModel):
            if module.learned_context is not None:
                init.ones_(module.learned_context)
            if module.random_context is not None:
                generator = torch.Generator().manual_seed(self.config.random_context_seed)
                draw = torch.rand(self.config.hidden_size, generator=generator) * 2 - 1
                init.copy_(module.random_context, draw)


class ContextualizerModel(ContextualizerPreTrainedModel):
    """The Contextualizer encoder: pooled output c(K), token outputs α(K) ⊙ x, hidden states c(0..K)."""

    def __init__(self, config):
        super().__init__(config)
        self.embeddings = ContextualizerEmbeddings(config)
        self.steps = nn.ModuleList([ContextualizerStep(config) for _ in range(config.num_hidden_layers)])
        m = config.hidden_size
        self.learned_context = nn.Parameter(torch.ones(m)) if config.default_context == "learned" else None  # c_d
        if config.default_context == "random":
            self.register_buffer("random_context", torch.zeros(m), persistent=True)  # the evaluation draw
        else:
            self.random_context = None
        self.gradient_checkpointing = False
        self.post_init()

    def get_input_embeddings(self):
        return self.embeddings.word_embeddings

    def set_input_embeddings(self, value):
        self.embeddings.word_embeddings = value

    def default_context(self, b, device):
        """c(0) of Table 3 for a batch of b documents, (b, m) in fp32."""
        m = self.config.hidden_size
        if self.config.default_context == "learned":
            return self.learned_context.float()[None, :].expand(b, m)
        if self.config.default_context == "random":
            if self.training:
                return torch.rand(b, m, device=device) * 2 - 1  # redrawn for every document
            return self.random_context.float()[None, :].expand(b, m)
        return torch.ones(b, m, device=device)

    @can_return_tuple
    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.LongTensor | None = None,
        inputs_embeds: torch.Tensor | None = None,
        output_hidden_states: bool | None = None,
        output_attentions: bool | None = None,
        output_token_states: bool = True,
        return_dict: bool | None = None,
    ) -> BaseModelOutputWithPooling:
        r"""
        output_attentions (`bool`, *optional*):
            Return each step's vector attention α(k) of Eq. 5, `(batch_size, sequence_length, hidden_size)`: one
            weight per token and dimension (the context is the only query, and there are no heads), not the
            `(batch, heads, query, key)` maps of a Transformer.
        token_type_ids (`torch.LongTensor` of shape `(batch_size, sequence_length)`, *optional*):
            Accepted so that `model(**tokenizer(...))` works with BERT-style tokenizers; the Contextualizer has no
            segment embeddings (the paper reads one text), so they are checked for shape and otherwise ignored.
        output_token_states (`bool`, defaults to `True`):
            Whether to compute `last_hidden_state` = α(K) ⊙ x. Heads that read only c(K) pass `False`, which lets the
            last step skip materialising α (it is then `None`).
        """
        attention_mask, input_ids, inputs_embeds, token_type_ids = keep_what_the_model_reads(
            None, self.config.max_input_length, "tokens", attention_mask, input_ids, inputs_embeds, token_type_ids)
        mask = real_token_mask(input_ids, inputs_embeds, attention_mask)
        check_token_type_ids(token_type_ids, mask.shape)
        if input_ids is not None:
            check_vocabulary_range(input_ids, self.config.vocab_size)
        if output_hidden_states is None:
            output_hidden_states = self.config.output_hidden_states
        if output_attentions is None:
            output_attentions = self.config.output_attentions

        x_hat = self.embeddings(input_ids, inputs_embeds, mask)  # (b, n, m)
        c = self.default_context(mask.shape[0], mask.device)  # (b, m), fp32
        hidden_states = [c] if output_hidden_states else None
        attentions = [] if output_attentions else None
        for k, step in enumerate(self.steps, start=1):
            wants_tokens = output_token_states and k == len(self.steps)
            if output_attentions:
                c, contributions, alpha = step(x_hat, c, mask, wants_tokens, output_attentions=True)  # Eq. 5-8
                attentions.append(alpha.to(x_hat.dtype))
            else:
                c, contributions = step(x_hat, c, mask, wants_tokens)  # Eq. 5-8
            if output_hidden_states:
                hidden_states.append(c)

        dtype = x_hat.dtype
        return BaseModelOutputWithPooling(
            last_hidden_state=contributions.to(dtype) if output_token_states else None,  # α(K) ⊙ x
            pooler_output=c.to(dtype),  # c(K)
            hidden_states=tuple(h.to(dtype) for h in hidden_states) if output_hidden_states else None,
            attentions=tuple(attentions) if output_attentions else None,
        )


class ContextualizerForSequenceClassification(ContextualizerPreTrainedModel):
    """A linear head on the final context c(K): single-label, multi-label (BCE) or regression, by `problem_type`."""

    accepts_loss_kwargs = False  # the loss is a mean over the batch; it does not use num_items_in_batch

    def __init__(self, config):
        super().__init__(config)
        self.num_labels = config.num_labels
        self.contextualizer = ContextualizerModel(config)
        dropout = config.classifier_dropout if config.classifier_dropout is not None else config.hidden_dropout_prob
        self.dropout = nn.Dropout(dropout)
        self.classifier = nn.Linear(config.hidden_size, config.num_labels)
        self.post_init()

    @can_return_tuple
    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.LongTensor | None = None,
        inputs_embeds: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
        output_hidden_states: bool | None = None,
        output_attentions: bool | None = None,
        return_dict: bool | None = None,
    ) -> SequenceClassifierOutput:
        r"""output_attentions: each step's vector attention α(k), (b, n, m) (see `ContextualizerModel.forward`)."""
        outputs = self.contextualizer(
            input_ids,
            attention_mask=attention_mask,
            token_type_ids=token_type_ids,
            inputs_embeds=inputs_embeds,
            output_hidden_states=output_hidden_states,
            output_attentions=output_attentions,
            output_token_states=False,
            return_dict=True,
        )
        logits = self.classifier(self.dropout(outputs.pooler_output))  # (b, num_labels)
        loss = None
        if labels is not None:
            check_labels(labels, logits, self.config)
            loss = self.loss_function(labels=labels, pooled_logits=logits, config=self.config)
        return SequenceClassifierOutput(loss=loss, logits=logits, hidden_states=outputs.hidden_states,
                                        attentions=outputs.attentions)


__all__ = [
    "ContextualizerModel",
    "ContextualizerForSequenceClassification",
    "ContextualizerPreTrainedModel",
]
