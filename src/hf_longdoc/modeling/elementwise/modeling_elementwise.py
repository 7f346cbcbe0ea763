"""Elementwise embedding over any Transformers encoder (BERT, ALBERT, CANINE).

Paper: D. Kim and J. Kim, "Elementwise Language Representation" 2023 (https://arxiv.org/abs/2302.13475).
- Section 4.2 (the reshape): e(i) <- Reshape_(1,w)[{e(i)[j] ⊕ g(p)}_{j=1..v}] ⊕ f(i), then dropout and LayerNorm, then
  the unchanged backbone with h = v heads reads the u materials through `inputs_embeds`.
  g is the global focus embedding (c-dim, indexed by the element's position in the whole sequence); f the local one
  (indexed by the element's position inside its material: a (v, c) table, i.e. one w-dim vector per material slot).
- Section 6.2 (v-gram "gradient" tokenisation): e_t <- Σ_{j<v} softmax_j(e_{t+j}·s) e_{t+j}, no focus embeddings.
- The element table (260 × c: PAD, CLS, SEP, MASK and 256 bytes) is the only token embedding: the backbone's own token
  embedding table is removed, so it is neither allocated nor saved (Table 1: BERT_EWE has ~12k embedding parameters).
Choices the paper leaves open: PAD elements and padding materials are excluded from the v-gram windows (so a padded
batch equals each document alone); a material is real when any of its elements is; without an `attention_mask`,
elements are real where their id is not PAD.

Shapes: b batch · u materials · v elements per material · c element size · w = v·c material size · L = u·v elements.

Self-contained (Hub rule): imports only torch, transformers and sibling files.
"""

import inspect
import math

import torch
from torch import nn
from transformers import AutoConfig, AutoModel, PreTrainedModel
from transformers import initialization as init
from transformers.modeling_outputs import BaseModelOutputWithPooling, SequenceClassifierOutput
from transformers.models.auto.modeling_auto import (
    MODEL_FOR_CAUSAL_LM_MAPPING,
    MODEL_FOR_MASKED_LM_MAPPING,
    MODEL_MAPPING,
)
from transformers.utils import can_return_tuple, logging

from .configuration_elementwise import ElementwiseConfig, backbone_positions

PAD_ID = 0
logger = logging.get_logger(__name__)


def remove_token_embeddings(backbone):
    """Delete the backbone's token-id embedding tables (its `get_input_embeddings()`: BERT's `word_embeddings`,
    ModernBERT's `tok_embeddings`, EuroBERT's `embed_tokens`; CANINE's hash embedders): with `inputs_embeds` they are
    never read, and keeping them would allocate and save millions of parameters."""
    try:
        table = backbone.get_input_embeddings()
    except (NotImplementedError, AttributeError):  # CANINE hashes codepoints: no single table
        table = None
    removed = []
    for name, module in list(backbone.named_modules()):
        leaf = name.rsplit(".", 1)[-1]
        if isinstance(module, nn.Embedding) and (module is table or leaf == "word_embeddings"
                                                 or leaf.startswith("HashBucketCodepoint")):
            parent = backbone.get_submodule(name.rsplit(".", 1)[0]) if "." in name else backbone
            setattr(parent, leaf, None)
            removed.append(name)
    return removed


def in_removed_table(backbone, name):
    """Whether the checkpoint parameter `name` belongs to a table `remove_token_embeddings` deleted from `backbone`."""
    module = backbone
    for part in name.split(".")[:-1]:
        if part not in module._modules:
            return False
        module = module._modules[part]
        if module is None:
            return True
    return False


def backbone_model_class(backbone_config):
    """The Transformers model class `AutoModel` builds for `backbone_config` (None when it has none)."""
    return MODEL_MAPPING.get(type(backbone_config), None)


def backbone_has_pooler(backbone_config):
    """Whether the backbone's model can add a pooler (BERT, ALBERT, CANINE, ...; DistilBERT cannot)."""
    model_class = backbone_model_class(backbone_config)
    return model_class is not None and "add_pooling_layer" in inspect.signature(model_class.__init__).parameters


def backbone_materials(backbone_config):
    """The most materials u the backbone can read: its positions (`backbone_positions`; CANINE: no more than its
    hash buckets), at most 512."""
    positions = backbone_positions(backbone_config) or 512
    if backbone_config.model_type == "canine":
        positions = min(positions, backbone_config.num_hash_buckets)
    return min(positions, 512)


def backbone_refusal(backbone_config):
    """Why elementwise embeddings cannot replace the token embeddings of a model with `backbone_config` (None: they
    can): it must be an encoder whose model takes `inputs_embeds`."""
    model_class = backbone_model_class(backbone_config)
    name = model_class.__name__ if model_class is not None else type(backbone_config).__name__
    causal_only = (type(backbone_config) in MODEL_FOR_CAUSAL_LM_MAPPING
                   and type(backbone_config) not in MODEL_FOR_MASKED_LM_MAPPING)  # GPT-2, Llama: decoders
    if (model_class is None or causal_only or getattr(backbone_config, "is_decoder", False)
            or getattr(backbone_config, "is_encoder_decoder", False)
            or "inputs_embeds" not in inspect.signature(model_class.forward).parameters):
        return (f"is {name}; elementwise embeddings replace the token embeddings of an encoder that takes "
                "`inputs_embeds` (BERT, RoBERTa, ALBERT, DistilBERT, ModernBERT, CANINE, ...)")
    return None


def build_backbone(config):
    """The encoder body of `config.backbone_config` with its token embedding tables removed: any encoder whose model
    takes `inputs_embeds` and has a token table (`get_input_embeddings()`) or CANINE's hash embedders. Anything else
    is a ValueError naming the class, before any weights are made."""
    backbone_config = config.backbone_config
    model_class = backbone_model_class(backbone_config)
    name = model_class.__name__ if model_class is not None else type(backbone_config).__name__
    if refusal := backbone_refusal(backbone_config):
        raise ValueError(f"Elementwise embeddings cannot replace the token embeddings of the backbone: it {refusal}.")
    settings = {}
    if backbone_has_pooler(backbone_config):
        settings["add_pooling_layer"] = config.pooling == "pooler"
    elif config.pooling == "pooler":
        raise ValueError(f"{name} has no pooler; set `pooling='first_material'` so the head reads the first material.")
    backbone = AutoModel.from_config(backbone_config, **settings)
    if not remove_token_embeddings(backbone):
        raise ValueError(f"Elementwise embeddings cannot replace the token embeddings of {name}: it holds no "
                         "token embedding table (`get_input_embeddings()`).")
    return backbone


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


def vgram_pool(e, element_mask, s, v):
    """Section 6.2: each element becomes Σ_{j<v} α_j e_{t+j} with α = softmax_j(e_{t+j}·s) over its window.

    Windows stop at the end of the sequence and skip PAD elements; an element whose window holds no real element
    (a PAD at the end) becomes zero. e: (b, L, c), element_mask: (b, L) bool, s: (c,).
    """
    b, L, c = e.shape
    padded = torch.cat([e, e.new_zeros(b, v - 1, c)], dim=1)  # (b, L + v - 1, c)
    padded_mask = torch.cat([element_mask, element_mask.new_zeros(b, v - 1)], dim=1)
    windows = padded.unfold(1, v, 1).transpose(2, 3)  # (b, L, v, c): windows[:, t, j] = e_{t+j}
    window_mask = padded_mask.unfold(1, v, 1)  # (b, L, v)
    scores = (windows.float() @ s.float()).masked_fill(~window_mask, float("-inf"))  # (b, L, v)
    alpha = torch.nan_to_num(scores.softmax(dim=-1), nan=0.0)  # all-masked windows -> 0
    return (alpha[..., None] * windows.float()).sum(dim=2).to(e.dtype)  # (b, L, c)


def pad_for_downsampling(materials, material_mask, backbone_config):
    """Zero the padding materials and, for a backbone that pools every `downsampling_rate` positions (CANINE), pad
    the materials to a multiple of that rate, so a document's last molecule is the same alone or in a padded batch."""
    materials = materials * material_mask[:, :, None].to(materials.dtype)
    rate = getattr(backbone_config, "downsampling_rate", 1) or 1
    extra = -materials.shape[1] % rate
    if extra:
        materials = torch.cat([materials, materials.new_zeros(materials.shape[0], extra, materials.shape[2])], dim=1)
        material_mask = torch.cat([material_mask, material_mask.new_zeros(material_mask.shape[0], extra)], dim=1)
    return materials, material_mask


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


class ElementwiseEmbeddings(nn.Module):
    """Element table, optional v-gram pooling and focus embeddings, and the (b, L, c) -> (b, u, w) reshape."""

    def __init__(self, config):
        super().__init__()
        v, c = config.elements_per_material, config.element_size
        self.v, self.c = v, c
        self.element_embeddings = nn.Embedding(config.vocab_size, c, padding_idx=config.pad_token_id)
        if config.use_focus_embeddings:
            self.global_focus = nn.Embedding(config.max_materials * v, c)  # g(p)
            self.local_focus = nn.Parameter(torch.zeros(v, c))  # f: one c-vector per slot of a material
        else:
            self.global_focus, self.local_focus = None, None
        self.vgram_scorer = nn.Parameter(torch.zeros(c)) if config.mode == "vgram" else None  # s of Section 6.2
        self.layer_norm = (nn.LayerNorm(v * c, eps=config.layer_norm_eps) if config.use_embedding_layer_norm
                           else nn.Identity())
        self.dropout = nn.Dropout(config.embedding_dropout)

    def forward(self, input_ids, element_mask):
        b, L = input_ids.shape
        u = L // self.v
        e = self.element_embeddings(input_ids)  # (b, L, c)
        if self.vgram_scorer is not None:
            e = vgram_pool(e, element_mask, self.vgram_scorer, self.v)
        if self.global_focus is not None:
            e = e + self.global_focus.weight[:L][None]  # ⊕ g(p), p = element position in the sequence
        x = e.reshape(b, u, self.v * self.c)  # (b, u, w): the reshape of Section 4.2
        if self.local_focus is not None:
            x = x + self.local_focus.reshape(1, 1, -1)  # ⊕ f, the j-th element of every material gets f[j]
        return self.dropout(self.layer_norm(x))


class ElementwisePreTrainedModel(PreTrainedModel):
    config_class = ElementwiseConfig
    base_model_prefix = "elementwise"
    main_input_name = "input_ids"
    supports_gradient_checkpointing = True
    _supports_sdpa = True

    @torch.no_grad()
    def _init_weights(self, module):
        backbone = self.get_backbone()
        if backbone is not None and any(module is m for m in backbone.modules()):
            backbone._init_weights(module)  # the backbone's own rules (buffers such as BERT's position_ids)
            return
        super()._init_weights(module)
        if isinstance(module, ElementwiseEmbeddings):
            # Elements start at unit scale (nn.Embedding's own default), focus embeddings at `initializer_range`: the
            # LayerNorm after the reshape fixes the overall scale, so only their ratio matters, and at 0.02 / 0.02 the
            # position signal g(p) is as loud as the bytes (pure noise on a short word's padding slots). Measured on
            # BBC from scratch (3 epochs, 128 materials): 0.45 test accuracy at 0.02, 0.72 at 1.0.
            elements = module.element_embeddings.weight
            init.normal_(elements, mean=0.0, std=1.0)
            if not getattr(elements, "_is_hf_initialized", False):  # a slice loses the flag, so check it here
                init.zeros_(elements[self.config.pad_token_id])
            if module.local_focus is not None:
                init.normal_(module.local_focus, mean=0.0, std=self.config.initializer_range)
            if module.vgram_scorer is not None:
                init.zeros_(module.vgram_scorer)  # uniform v-gram weights at the start

    def get_backbone(self):
        model = getattr(self, self.base_model_prefix, self)
        return getattr(model, "backbone", None)


def word_start_spacing(mask):
    """The spacing of the positions where a real element follows padding (a new word's material, in whitespace mode):
    the v the input was tokenized with, or None when no word follows padding."""
    starts = ((mask[:, 1:] & ~mask[:, :-1]).nonzero()[:, 1] + 1).tolist()  # (k,) positions
    return math.gcd(*starts) if starts else None


class ElementwiseModel(ElementwisePreTrainedModel):
    """Elementwise embedding + backbone: (b, u·v) ids -> backbone outputs over u materials."""

    def __init__(self, config):
        super().__init__(config)
        self.embeddings = ElementwiseEmbeddings(config)
        self.backbone = build_backbone(config)
        # ALBERT's shared layers do not checkpoint; say so instead of failing inside gradient_checkpointing_enable
        self.supports_gradient_checkpointing = self.backbone.supports_gradient_checkpointing
        self.post_init()

    def get_input_embeddings(self):
        return self.embeddings.element_embeddings

    def set_input_embeddings(self, value):
        self.embeddings.element_embeddings = value

    def element_mask(self, input_ids, attention_mask):
        """Validate the inputs once; return the (b, L) bool mask of real elements."""
        if input_ids is None or input_ids.dim() != 2:
            shape = None if input_ids is None else tuple(input_ids.shape)
            raise ValueError(f"`input_ids` must be a (batch, materials × elements) tensor, got {shape}.")
        b, L = input_ids.shape
        v = self.config.elements_per_material
        if b == 0 or L == 0:
            raise ValueError(f"Got an empty batch of shape {(b, L)}: pass at least one document.")
        if L % v:
            width = word_start_spacing(input_ids != PAD_ID)
            made = f" (its words start every {width} elements: made with elements_per_material={width}?)" if width \
                else ""
            u = self.config.max_materials
            raise ValueError(f"`input_ids` has {L} elements per row, not a multiple of `elements_per_material` ({v})"
                             f"{made}; encode with the tokenizer saved with this model, or with "
                             f"ElementwiseTokenizer(elements_per_material={v}, max_materials={u}), which pads and "
                             "truncates in whole materials.")
        tracing = torch.compiler.is_compiling()  # a traced graph (ONNX export) cannot branch on values
        if not tracing and ((input_ids < 0).any() or (input_ids >= self.config.vocab_size).any()):
            raise ValueError(f"`input_ids` holds ids outside the element vocabulary [0, {self.config.vocab_size}); "
                             "encode with the ElementwiseTokenizer.")
        if attention_mask is None:
            mask = input_ids != PAD_ID
            self.check_material_width(mask)
            return mask
        if tuple(attention_mask.shape) != (b, L):
            raise ValueError(f"`attention_mask` has shape {tuple(attention_mask.shape)}, expected {(b, L)} (one "
                             "value per element).")
        mask = attention_mask.bool()
        if tracing:
            return mask
        empty = (~mask.any(dim=1)).nonzero().flatten().tolist()
        if empty:
            raise ValueError(f"Rows {empty} of `attention_mask` have no real element (all padding); drop empty "
                             "documents from the batch.")
        self.check_material_width(mask)
        check_right_padded(mask.view(b, L // v, v).any(dim=-1), unit="material")
        return mask

    def check_material_width(self, mask):
        """A ValueError when whitespace-mode input was made with another v than the config's: every word's material
        starts with a real element and only the end is padding, so a material that starts with padding, or an empty
        one before real ones, or a word starting after padding inside a material, means the materials are cut at the
        wrong width (an `ElementwiseTokenizer()` at its default v = 16 for a v = 8 model would turn each word into two
        materials, the second one empty)."""
        config = self.config
        if config.mode != "whitespace" or torch.compiler.is_compiling():  # bytes: any width is a valid byte stream
            return
        b, L = mask.shape
        v = config.elements_per_material
        materials = mask.view(b, L // v, v)
        real = materials.any(dim=-1)  # (b, u)
        rows = real[:, 0]  # a row that starts with an empty material is left-padded: `check_right_padded` says so
        starts_with_padding = (real & ~materials[..., 0])[rows]
        empty_before_real = (~real[:, :-1] & real[:, 1:])[rows]
        restarts_inside = (materials[..., 1:] & ~materials[..., :-1]).any(dim=-1)[rows]  # two words in one material
        if not (starts_with_padding.any() or empty_before_real.any() or restarts_inside.any()):
            return
        width = word_start_spacing(mask[rows])
        seen = f"its words start every {width} elements, as a tokenizer with elements_per_material={width} " \
               "writes them" if width and width != v else "its materials start with padding"
        raise ValueError(f"`input_ids` are not materials of `elements_per_material` ({v}) elements, the config's: "
                         f"{seen}. Encode with the tokenizer saved with this model, or with "
                         f"ElementwiseTokenizer(elements_per_material={v}, max_materials={config.max_materials}).")

    @can_return_tuple
    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.LongTensor | None = None,
        output_hidden_states: bool | None = None,
        output_attentions: bool | None = None,
        return_dict: bool | None = None,
    ) -> BaseModelOutputWithPooling:
        v = self.config.elements_per_material  # a material's ids: the model keeps or cuts whole ones
        attention_mask, input_ids, token_type_ids = keep_what_the_model_reads(
            self.config.max_materials * v, self.config.max_input_length, "elements", attention_mask, input_ids,
            token_type_ids, width=v)
        element_mask = self.element_mask(input_ids, attention_mask)  # (b, L)
        # one per element id when given: every material reads as one text, so the backbone gets type 0 throughout
        check_token_type_ids(token_type_ids, element_mask.shape)
        if output_hidden_states is None:  # the backbone reads its own config, so resolve ours here
            output_hidden_states = self.config.output_hidden_states
        if output_attentions is None:
            output_attentions = self.config.output_attentions
        b, L = input_ids.shape
        v = self.config.elements_per_material
        materials = self.embeddings(input_ids, element_mask)  # (b, u, w)
        material_mask = element_mask.reshape(b, L // v, v).any(dim=-1)  # (b, u): real if any element is
        materials, material_mask = pad_for_downsampling(materials, material_mask, self.config.backbone_config)
        outputs = self.backbone(
            inputs_embeds=materials,
            attention_mask=material_mask.long(),
            output_hidden_states=output_hidden_states,
            output_attentions=output_attentions,
            return_dict=True,
        )
        return BaseModelOutputWithPooling(
            last_hidden_state=outputs.last_hidden_state,
            pooler_output=getattr(outputs, "pooler_output", None),
            hidden_states=outputs.hidden_states,
            attentions=outputs.attentions,
        )


class ElementwiseForSequenceClassification(ElementwisePreTrainedModel):
    """A linear head on the backbone's pooled output or its first material (`config.pooling`): single-label,
    multi-label (BCE, the paper's patent setting) or regression, by `problem_type`."""

    accepts_loss_kwargs = False

    def __init__(self, config):
        super().__init__(config)
        self.num_labels = config.num_labels
        self.elementwise = ElementwiseModel(config)
        dropout = config.classifier_dropout if config.classifier_dropout is not None else \
            getattr(config.backbone_config, "hidden_dropout_prob", 0.1)
        self.dropout = nn.Dropout(dropout)
        self.classifier = nn.Linear(config.hidden_size, config.num_labels)
        self.supports_gradient_checkpointing = self.elementwise.supports_gradient_checkpointing
        self.post_init()

    @classmethod
    def from_backbone_pretrained(cls, path_or_id, elements_per_material=None, max_materials=None, **config_kwargs):
        """Elementwise embeddings in front of the pretrained encoder in `path_or_id` (a folder or Hub id of a BERT,
        RoBERTa, ALBERT, DistilBERT, ModernBERT, CANINE, ... checkpoint): the encoder's layers keep their weights (and
        its position and LayerNorm embeddings), while the element table, the focus embeddings and the classification
        head are new. The paper (Section 4.2) trains from scratch; this is the pretrained variant of the same model.

        v (`elements_per_material`) defaults to the encoder's heads, so the n-th element meets the n-th head as in
        Section 4.1 (h = v); another v is allowed and logged as the head-mismatch ablation. u (`max_materials`)
        defaults to the encoder's positions (at most 512). A backbone without a pooler (DistilBERT) reads the first
        material. `config_kwargs` (num_labels, mode, dropouts, ...) go to `ElementwiseConfig`."""
        backbone_config = AutoConfig.from_pretrained(path_or_id)
        heads = backbone_config.num_attention_heads
        v = heads if elements_per_material is None else elements_per_material
        if v != heads:
            config_kwargs.setdefault("allow_head_mismatch", True)
            logger.info("elements_per_material=%d differs from the backbone's %d heads (the h != v ablation).", v,
                        heads)
        if max_materials is None:
            max_materials = backbone_materials(backbone_config)
        config_kwargs.setdefault("pooling", "pooler" if backbone_has_pooler(backbone_config) else "first_material")
        config = ElementwiseConfig(backbone_config=backbone_config, elements_per_material=v,
                                   max_materials=max_materials, **config_kwargs)
        model = cls(config)  # a backbone the embeddings cannot replace fails here, before any weights are read
        source = AutoModel.from_pretrained(path_or_id).state_dict()
        missing, unexpected = model.elementwise.backbone.load_state_dict(source, strict=False)
        replaced = {name for name in unexpected if in_removed_table(model.elementwise.backbone, name)}
        missing = [name for name in missing if not name.startswith("pooler.")]
        unexpected = [name for name in unexpected if name not in replaced and not name.startswith("pooler.")]
        if missing or unexpected:
            raise ValueError(f"The backbone in {path_or_id} does not match its config: missing {missing}, "
                             f"unexpected {unexpected}.")
        return model

    @can_return_tuple
    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.LongTensor | None = None,
        labels: torch.Tensor | None = None,
        output_hidden_states: bool | None = None,
        output_attentions: bool | None = None,
        return_dict: bool | None = None,
    ) -> SequenceClassifierOutput:
        outputs = self.elementwise(input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids,
                                   output_hidden_states=output_hidden_states,
                                   output_attentions=output_attentions, return_dict=True)
        pooled = outputs.pooler_output if self.config.pooling == "pooler" else outputs.last_hidden_state[:, 0]
        logits = self.classifier(self.dropout(pooled))  # (b, num_labels)
        loss = None
        if labels is not None:
            check_labels(labels, logits, self.config)
            loss = self.loss_function(labels=labels, pooled_logits=logits, config=self.config)
        return SequenceClassifierOutput(loss=loss, logits=logits, hidden_states=outputs.hidden_states,
                                        attentions=outputs.attentions)


__all__ = ["ElementwiseModel", "ElementwiseForSequenceClassification", "ElementwisePreTrainedModel"]
