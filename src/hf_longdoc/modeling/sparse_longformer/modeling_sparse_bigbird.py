"""The thesis' Big Bird backbone: Transformers' Big Bird whose random blocks are replaced, per document, by the blocks
that hold its selected tokens.

Thesis: B. U. Haman, "Transformers Using Local Attention Mappings for Long Text Document Classification", İzmir
Institute of Technology, M.Sc. thesis, 2023 (Chapters 5.4-5.5, 6: every selector on Big Bird as on Longformer; its
data: https://huggingface.co/datasets/ufukhaman/uspto_balanced_200k_ipc_classification).

Every parameter keeps Big Bird's name and shape (`bert.*`, `classifier.*`), so any Transformers `BigBirdModel` /
`BigBirdForSequenceClassification` checkpoint loads unchanged.

How selected tokens enter Big Bird. In block-sparse attention (Zaheer et al., 2020, arXiv:2007.14062) a query block
attends to the two global blocks (first and last), its three sliding blocks and `num_random_blocks` (r) random blocks;
the first and last query blocks attend to everything. Attention is computed block by block, so a single token cannot
be made global inside it without a dense mask. So the selection works at block granularity: each query block attends,
instead of r random blocks, to the r blocks holding the most selected tokens of its document (ties: the earlier
block), leaving out the blocks it attends to anyway (the global blocks and its own three). A document with fewer
selected blocks than r gets the earliest remaining blocks. Nothing is random: training and evaluation read the same
blocks. Selected tokens thereby become keys every query block reads (up to r blocks of them), which is the thesis'
"every token attends to them"; they do not gain full attention as queries (their query blocks read their neighbours,
the global blocks and the selected blocks).

- `global_selector="cls"` is vanilla Big Bird: its own random blocks, Transformers' computation unchanged.
- In `original_full` attention every token attends to every token already; selection changes nothing there. Like
  Transformers, a document too short for block-sparse attention (≤ (5 + 2r) blocks) is read with full attention, but
  only for that call (Transformers switches the model for good); the switch is logged at info level.

The replacement is a subclass of Transformers' `BigBirdBlockSparseAttention` that writes the chosen blocks into the
block index tensor Transformers builds for its random blocks (`rand_attn`, (b, heads, blocks - 2, r)) before that tensor
is used, so the sparse computation itself is Transformers' own.

Shapes: b batch · n tokens (padded to a multiple of the block size) · nb = n / block_size blocks · r random blocks.

Self-contained (Hub rule): imports only torch, transformers and sibling files.
"""

import torch
import torch.nn.functional as F
from transformers.modeling_outputs import SequenceClassifierOutput
from transformers.models.big_bird.modeling_big_bird import (
    BigBirdBlockSparseAttention,
    BigBirdClassificationHead,
    BigBirdForSequenceClassification,
    BigBirdModel,
    BigBirdPreTrainedModel,
)
from transformers.utils import logging

from .configuration_sparse_bigbird import SparseBigBirdConfig
from .modeling_sparse_longformer import (
    check_labels,
    check_right_padded,
    check_selection_inputs,
    keep_what_the_model_reads,
    real_token_mask,
)
from .selection import GlobalTokenSelector, SelectsGlobalTokens, init_selector_buffers

logger = logging.get_logger(__name__)


def global_and_sliding_blocks(num_blocks, device):
    """(nb - 2, nb) bool: the key blocks every middle query block i (1 .. nb - 2) reads anyway: the global blocks 0
    and nb - 1 and its sliding blocks i - 1, i, i + 1."""
    blocks = torch.arange(num_blocks, device=device)
    rows = blocks[1:-1, None]  # (nb - 2, 1)
    return (blocks == 0) | (blocks == num_blocks - 1) | ((blocks - rows).abs() <= 1)


def blocks_holding(selected, block_size, num_blocks, num_random_blocks):
    """(b, nb - 2, r) long: for each middle query block i (1 .. nb - 2), the r blocks with the most `selected` tokens
    (ties: the earlier block) among those it does not attend to anyway: not the global blocks 0 and nb - 1, not its
    sliding blocks i - 1, i, i + 1. `selected`: (b, n') bool, n' ≤ nb · block_size."""
    b = selected.shape[0]
    padded = torch.zeros(b, num_blocks * block_size, dtype=torch.long, device=selected.device)
    padded[:, : selected.shape[1]] = selected.long()
    counts = padded.view(b, num_blocks, block_size).sum(dim=2)  # (b, nb)
    blocks = torch.arange(num_blocks, device=selected.device)
    taken = global_and_sliding_blocks(num_blocks, selected.device)  # (nb - 2, nb)
    # rank by count, then by earlier block: count · nb + (nb - 1 - block), and -1 where the block is taken anyway
    key = counts[:, None, :] * num_blocks + (num_blocks - 1 - blocks)  # (b, nb - 2, nb)
    key = key.masked_fill(taken, -1)
    return key.topk(num_random_blocks, dim=2).indices  # (b, nb - 2, r)


class SelectedBlockSparseAttention(BigBirdBlockSparseAttention):
    """Transformers' block-sparse attention, reading `selected_blocks` ((b, nb - 2, r), set by the model for one
    forward) in place of its random blocks; with None it is Transformers' attention unchanged. Under autocast it runs
    in float32: Transformers' version mixes dtypes there and fails (`scatter(): Expected self.dtype to be equal to
    src.dtype`, transformers 5.23, CPU bf16)."""

    selected_blocks = None

    def bigbird_block_sparse_attention(self, query_layer, key_layer, value_layer, *args, **kwargs):
        device = query_layer.device.type
        if not torch.is_autocast_enabled(device):
            return super().bigbird_block_sparse_attention(query_layer, key_layer, value_layer, *args, **kwargs)
        with torch.autocast(device, enabled=False):
            return super().bigbird_block_sparse_attention(query_layer.float(), key_layer.float(), value_layer.float(),
                                                          *args, **kwargs)

    def _create_rand_mask_from_inputs(self, from_blocked_mask, to_blocked_mask, rand_attn, *args):
        # the first use of the random-block indices: write the document's blocks into them, for every head
        if self.selected_blocks is not None:
            rand_attn.copy_(self.selected_blocks[:, None].expand_as(rand_attn))
        return super()._create_rand_mask_from_inputs(from_blocked_mask, to_blocked_mask, rand_attn, *args)


class SparseBigBirdPreTrainedModel(SelectsGlobalTokens, BigBirdPreTrainedModel):
    config_class = SparseBigBirdConfig

    @torch.no_grad()
    def _init_weights(self, module):
        super()._init_weights(module)
        init_selector_buffers(module)


class SparseBigBirdModel(SparseBigBirdPreTrainedModel, BigBirdModel):
    """Transformers' `BigBirdModel` (same modules and weights) whose `forward` selects tokens and gives each query
    block the blocks holding them (module docstring)."""

    def __init__(self, config, add_pooling_layer=True):
        super().__init__(config, add_pooling_layer=add_pooling_layer)
        self.selector = GlobalTokenSelector(config)
        self.use_selected_blocks()
        self.post_init()

    def use_selected_blocks(self):
        """Make every block-sparse attention module read selected blocks. The subclass adds no parameter or buffer,
        so the module's class is swapped in place (Transformers builds a new module on every attention-type switch)."""
        for layer in self.encoder.layer:
            if type(layer.attention.self) is BigBirdBlockSparseAttention:
                layer.attention.self.__class__ = SelectedBlockSparseAttention

    def set_attention_type(self, value):
        super().set_attention_type(value)
        self.use_selected_blocks()

    def block_sparse_reads(self, length):
        """Whether a `length`-token input is read block-sparse: the config asks for it and the input is longer than
        Big Bird's (5 + 2r) blocks (else Transformers reads it with full attention)."""
        config = self.config
        return config.attention_type == "block_sparse" and length > (5 + 2 * config.num_random_blocks) * \
            config.block_size

    def attention_pattern_of(self, global_tokens, real):
        """(b, n, n) bool of the attention `forward` computes: everything with full attention; block-sparse, the first
        and last query blocks read every key and query block i reads blocks 0, nb - 1, i - 1, i, i + 1 and the blocks
        holding the selected tokens (vanilla `cls`: Transformers' random blocks, drawn afresh in training; in
        evaluation it reads block 0 in their place, which this pattern shows)."""
        config, (b, n) = self.config, real.shape
        if not self.block_sparse_reads(n):
            return torch.ones(b, n, n, dtype=torch.bool, device=real.device)
        size = config.block_size
        num_blocks = -(-n // size)
        if config.global_selector == "cls":
            chosen = torch.zeros(b, num_blocks - 2, config.num_random_blocks, dtype=torch.long, device=real.device)
        else:
            chosen = blocks_holding(global_tokens & real, size, num_blocks, config.num_random_blocks)
        reads = global_and_sliding_blocks(num_blocks, real.device).expand(b, -1, -1).clone()  # (b, nb - 2, nb)
        reads.scatter_(2, chosen, True)
        every = torch.ones(b, 1, num_blocks, dtype=torch.bool, device=real.device)
        reads = torch.cat([every, reads, every], dim=1)  # (b, nb, nb): query block -> key blocks
        block_of = torch.arange(n, device=real.device) // size
        return reads[:, block_of][:, :, block_of]

    def traced_attention_mask(self, input_ids, real):
        """(b, 1, n, n) additive mask for full attention that computes what `forward` computes, with tensor ops only
        (a traced graph, ONNX export: Transformers' block-sparse kernel does not export, and the length must stay
        symbolic). Key block j gets log(the times query block i reads it): block-sparse, once for its pattern
        (`attention_pattern_of`), 1 + r times for block 0 in vanilla Big Bird's evaluation, whose r random blocks are
        all block 0; a length too short for block-sparse reads every key once; pads are never read."""
        config, (b, n) = self.config, real.shape
        size, r = config.block_size, config.num_random_blocks
        num_blocks = (n + size - 1) // size
        blocks = torch.arange(num_blocks, device=real.device)
        edge = (blocks == 0) | (blocks == num_blocks - 1)  # the first and last query blocks read every key
        reads = (blocks == 0) | (blocks == num_blocks - 1) | ((blocks[None] - blocks[:, None]).abs() <= 1)  # (nb, nb)
        if config.global_selector == "cls" or input_ids is None:
            chosen = torch.zeros(b, num_blocks, r, dtype=torch.long, device=real.device)
        else:
            selected = self.selector(input_ids, real).bool() & real
            counts = F.pad(selected.long(), (0, num_blocks * size - n)).view(b, num_blocks, size).sum(dim=2)
            key = (counts[:, None, :] * num_blocks + (num_blocks - 1 - blocks)).masked_fill(reads, -1)  # (b, nb, nb)
            key = torch.cat([key, key.new_full((b, num_blocks, r), -2)], dim=2)  # r columns more than r picks
            chosen = key.topk(r, dim=2).indices  # (b, nb, r); only the middle rows' picks count
        times = reads.long().expand(b, -1, -1)
        times = torch.cat([times, times.new_zeros(b, num_blocks, r)], dim=2)
        times = times.scatter_add(2, chosen, torch.ones_like(chosen))[:, :, :num_blocks]  # (b, nb, nb)
        times = torch.where(edge[None, :, None], 1, times)
        length = torch.ones_like(real[0], dtype=torch.long).sum()  # n as a tensor: no branch on it
        times = torch.where(length > (5 + 2 * r) * size, times, 1)
        block_of = torch.arange(n, device=real.device) // size
        times = times[:, block_of][:, :, block_of] * real[:, None, :]  # (b, n, n)
        lowest = torch.finfo(self.embeddings.word_embeddings.weight.dtype).min
        return torch.where(times > 0, times.clamp(min=1).float().log(), lowest)[:, None]

    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.LongTensor | None = None,
        position_ids: torch.LongTensor | None = None,
        inputs_embeds: torch.Tensor | None = None,
        global_attention_mask: torch.Tensor | None = None,
        global_selector_generator: torch.Generator | None = None,
        **kwargs,
    ):
        r"""
        global_attention_mask (`torch.Tensor` of shape `(batch_size, sequence_length)`, *optional*):
            1 for the tokens whose blocks replace the random blocks. When not given, `config.global_selector` chooses
            them from `input_ids` (`"cls"`, or only `inputs_embeds`: vanilla Big Bird).
        global_selector_generator (`torch.Generator`, *optional*):
            The random source of `global_selector="random"`; fix it to repeat a selection.
        """
        config = self.config
        attention_mask, input_ids, token_type_ids, inputs_embeds, global_attention_mask = keep_what_the_model_reads(
            config.max_position_embeddings, config.max_input_length, "tokens", attention_mask, input_ids,
            token_type_ids, inputs_embeds, global_attention_mask, log=logger)
        real = real_token_mask(input_ids, inputs_embeds, attention_mask)
        if position_ids is not None:  # a caller's numbering of a cut input: its first ones, as for the truncated input
            position_ids = position_ids[:, : real.shape[1]]
        check_right_padded(real)
        check_selection_inputs(input_ids, global_attention_mask, real, config.vocab_size)
        if torch.compiler.is_compiling() and global_attention_mask is None and inputs_embeds is None:
            previous = self.attention_type
            self.set_attention_type("original_full")
            try:
                return BigBirdModel.forward(self, input_ids=input_ids,
                                            attention_mask=self.traced_attention_mask(input_ids, real),
                                            token_type_ids=token_type_ids, position_ids=position_ids, **kwargs)
            finally:
                self.set_attention_type(previous)
        length = real.shape[1]
        sparse = self.block_sparse_reads(length)
        if config.attention_type == "block_sparse" and not sparse:
            logger.info_once(f"{length} tokens are too few for block-sparse attention; this call reads them with "
                             "full attention, as Transformers' Big Bird does.")
        self.set_attention_type("block_sparse" if sparse else "original_full")
        selected_blocks = None
        if sparse:
            if global_attention_mask is None and config.global_selector != "cls" and input_ids is not None:
                global_attention_mask = self.selector(input_ids, real, generator=global_selector_generator)
            if global_attention_mask is not None:
                num_blocks = -(-length // config.block_size)
                selected_blocks = blocks_holding(global_attention_mask.bool() & real, config.block_size, num_blocks,
                                                 config.num_random_blocks)
        attentions = [layer.attention.self for layer in self.encoder.layer]
        for attention in attentions:
            attention.selected_blocks = selected_blocks
        try:
            return super().forward(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids,
                                   position_ids=position_ids, inputs_embeds=inputs_embeds, **kwargs)
        finally:
            for attention in attentions:
                attention.selected_blocks = None


class SparseBigBirdForSequenceClassification(SparseBigBirdPreTrainedModel, BigBirdForSequenceClassification):
    """Transformers' `BigBirdForSequenceClassification` (same head and weight names) around a [`SparseBigBirdModel`];
    `forward` takes the model's `global_attention_mask` and `global_selector_generator` too."""

    def __init__(self, config):
        BigBirdPreTrainedModel.__init__(self, config)
        self.num_labels = config.num_labels
        self.bert = SparseBigBirdModel(config)
        self.classifier = BigBirdClassificationHead(config)
        self.post_init()

    def forward(self, input_ids=None, attention_mask=None, token_type_ids=None, position_ids=None, inputs_embeds=None,
                labels=None, global_attention_mask=None, global_selector_generator=None, return_dict=None, **kwargs):
        # Written out rather than inherited: Transformers' head calls its encoder without `return_dict`, so a config
        # with `return_dict=False` made the encoder return a tuple and the head fail on `.last_hidden_state`.
        return_dict = self.config.return_dict if return_dict is None else return_dict
        if labels is not None:  # a clear error before the encoder runs; the logits' shape is (b, num_labels)
            b = (input_ids if input_ids is not None else inputs_embeds).shape[0]
            check_labels(labels, torch.empty(b, self.num_labels), self.config)
        outputs = self.bert(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids,
                            position_ids=position_ids, inputs_embeds=inputs_embeds,
                            global_attention_mask=global_attention_mask,
                            global_selector_generator=global_selector_generator, return_dict=True, **kwargs)
        logits = self.classifier(outputs.last_hidden_state)  # (b, num_labels), from the [CLS] state
        loss = None if labels is None else self.loss_function(labels, logits, self.config)
        output = SequenceClassifierOutput(loss=loss, logits=logits, hidden_states=outputs.hidden_states,
                                          attentions=outputs.attentions)
        return output if return_dict else output.to_tuple()


__all__ = ["SparseBigBirdForSequenceClassification", "SparseBigBirdModel", "SparseBigBirdPreTrainedModel",
           "blocks_holding"]
