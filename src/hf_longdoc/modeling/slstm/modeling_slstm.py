"""S-LSTM: a graph recurrent encoder with one node per token and one sentence node, updated L times in parallel.

Paper: Y. Wang, L. Yang, Z. Teng, M. Zhou, Y. Zhang, "Pre-Training a Graph Recurrent Network for Language
Representation", 2022 (https://arxiv.org/abs/2209.03834, Sections 3-4), after Zhang et al.'s S-LSTM (2018).

    Eq. 1  graph: token node i linked to i±1 (window k) and to the sentence node g, with self-loops
    Eq. 2  x_i = E(w_i) + P(i)
    Eq. 3  token node i at step t, from the step t-1 states:
           ξ_i = h_{i-1} ‖ h_i ‖ h_{i+1}
           î, l̂, r̂, f̂, ŝ, o = σ(LN(W ξ_i + U x_i + V g + b)),  u = tanh(LN(W_u ξ_i + U_u x_i + V_u g + b_u))
           i, l, r, f, s = softmax(î, l̂, r̂, f̂, ŝ)            (per dimension, over the five sigmoided gates)
           c_i = l ⊙ c_{i-1} + f ⊙ c_i + r ⊙ c_{i+1} + s ⊙ c_g + i ⊙ u,   h_i = o ⊙ tanh(c_i)
    Eq. 4  sentence node at step t, from the step t-1 states:
           h̄ = mean_i h_i,  f̂_i = σ(LN(W_f g + U_f h_i + b_f)),  f̂_g = σ(LN(W_g g + U_g h̄ + b_g)),
           o_g = σ(LN(W_o g + U_o h̄ + b_o)),  f_1..f_n, f_g = softmax(f̂_1..f̂_n, f̂_g)   (per dimension, over tokens)
           c_g = f_g ⊙ c_g + Σ_i f_i ⊙ c_i,   g = o_g ⊙ tanh(c_g)
    Eq. 5  masked LM: P(w | h̃) ∝ exp(E(w)ᵀ W h̃), the decoder tied to E

Where the paper is silent, the released code (github ylwangy/slstm_pytorch) decides: ONE set of parameters shared by
all L steps, h = c = x and g = c_g = masked mean of x at the start, the softmaxes taken over the already-sigmoided
gates, the window neighbours of a side summed (`window_combine="sum"`; `"concat"` is the alternative), and the final
sentence node g as the sentence vector. Unlike the code, both nodes update synchronously from step t-1 (Eq. 3-4 as
written; the code feeds the new token states to the sentence node), the gates are layer-normalised (Section 3.2; the
code's default turns it off), and positions enter once through Eq. 2 (the code adds them to the gates instead).
Padding never leaks: pads hold zero states, are skipped by the mean and the softmax, and a neighbour beyond either end
is a zero state. The masked-LM head is Eq. 5, E(w)ᵀ W h̃ with E tied to the input embeddings (`mlm_head="transform"`:
dense → GELU → LayerNorm → tied decoder, the released code's form).

Fast path (`SLSTMStep`): ξ of every token comes from shifted views of the step t-1 states (padded by k zero states),
and ONE matmul of ξ with W gives all 7 gates of all tokens (21·H² multiply-adds per token), plus U_f h_i of Eq. 4
(H²): the 22·H² per token and step of the paper's cost. U x (constant over the steps) is computed once per forward,
V g + b and the sentence-node terms in g and h̄ once per document and step. Tokens are updated in runs of `chunk_size`
(with their neighbours) so a run's gate tensors stay in cache; everything element-wise in a run is one pure function
(`run_gates`). `compile_gates` runs the step through `torch.compile`, which fuses that function into a few loops and
with the copies around the products; by default (`None`) wherever a compiler is present and the input is long
(`compiles_the_step`). On a GPU a step is one run over all tokens (the runs exist for a CPU's cache, and on a GPU each
would cost kernel launches), compiled whole; on the CPU each run is compiled (`run_update`), so one graph serves every
document length (a whole step of r runs would unroll them: one graph per run count, its compilation growing with r).
Gate arithmetic, softmaxes and sums over tokens run in fp32 under autocast.

Shapes: b batch · n tokens · H hidden size.

Self-contained (Hub rule): imports only torch, transformers and sibling files.
"""

import functools
import shutil
import time

import torch
from torch import nn
from torch.nn import functional as F
from transformers import PreTrainedModel
from transformers import initialization as init
from transformers.activations import ACT2FN
from transformers.modeling_layers import GradientCheckpointingLayer
from transformers.modeling_outputs import BaseModelOutputWithPooling, MaskedLMOutput, SequenceClassifierOutput
from transformers.utils import can_return_tuple, logging

from .configuration_slstm import SLSTMConfig

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


def at_least_fp32(t):
    """fp16/bf16 -> fp32; fp32 and fp64 unchanged (the float64 reference tests run the model in double)."""
    return t.float() if t.dtype in (torch.float16, torch.bfloat16) else t


def chunk_sizes(n, chunk_size, window_size):
    """Lengths of the runs of tokens a step updates at a time: `chunk_size` each (at least k), the last run merged into
    the one before when it is shorter than the k neighbours a run borrows from the next."""
    chunk = max(chunk_size, window_size)
    sizes = [chunk] * (n // chunk) + ([n % chunk] if n % chunk else [])
    if len(sizes) > 1 and sizes[-1] < window_size:
        last = sizes.pop()
        sizes[-1] += last
    return sizes


def neighbours(runs, j, k):
    """The k states before and after run j of `runs` (consecutive (b, m, d) pieces of one sequence), zeros beyond the
    sequence. Only pieces of neighbouring runs are sliced, so the backward pass never touches the whole sequence per
    run."""
    run = runs[j]
    b, _, d = run.shape
    before = runs[j - 1][:, -k:] if j > 0 else run.new_zeros(b, k, d)
    after = runs[j + 1][:, :k] if j + 1 < len(runs) else run.new_zeros(b, k, d)
    return before, after


def shifted(padded, k, offset):
    """The (b, m, d) states at `offset` (-k..k) of every token, from the (b, m + 2k, d) states padded by k each side."""
    m = padded.shape[1] - 2 * k
    return padded[:, k + offset:k + offset + m]


def side_sums(padded, k):
    """The sums of the k left and of the k right neighbours of every token, from the states padded by k either side."""
    left = [shifted(padded, k, -s) for s in range(1, k + 1)]
    right = [shifted(padded, k, s) for s in range(1, k + 1)]
    return sum(left[1:], left[0]), sum(right[1:], right[0])


def tanh(x, fused):
    """tanh; `fused` (compiled by `compile_gates`) as 2σ(2x) - 1, which the compiler vectorises to one exp (its
    library tanh costs 2.5 sigmoids on CPU)."""
    return 2 * torch.sigmoid(2 * x) - 1 if fused else torch.tanh(x)


def gate_layer_norm(gates, weight, bias, eps, fused=False):
    """A LayerNorm per gate of a (..., G, H) tensor with (G, H) weight and bias (None: no LayerNorm). Eagerly one
    `group_norm` call (G groups of H channels with per-channel affine is exactly a LayerNorm per gate); `fused`, the
    same statistics in ONE pass over the gates that the compiler fuses with what follows: the mean and the variance of
    the gates shifted by their first element (the shifted-data algorithm; Chan, Golub & LeVeque, 1983): only their
    spread around that element enters the one-pass variance, not their mean, where the textbook E[x²] - E[x]² loses
    every digit once the mean dwarfs the spread (`group_norm` is an opaque kernel to the compiler, and its own
    `var_mean` reads the gates twice more)."""
    if weight is None:
        return gates
    weight, bias = weight.to(gates.dtype), bias.to(gates.dtype)
    if fused:
        shifted_gates = gates - gates[..., :1]
        mean = shifted_gates.mean(dim=-1, keepdim=True)
        var = (shifted_gates * shifted_gates).mean(dim=-1, keepdim=True) - mean * mean
        return (shifted_gates - mean) * torch.rsqrt(var + eps) * weight + bias
    count, H = gates.shape[-2:]
    normed = F.group_norm(gates.reshape(-1, count * H), count, weight.reshape(-1), bias.reshape(-1), eps)
    return normed.view(gates.shape)


def run_gates(token_pre, x_term, forget_pre, V_g, W_f_g, c_before, c_run, c_after, c_g, real, k, token_norm,
              sentence_norm, eps, fused=False):
    """Everything element-wise in one run's update, after its two matrix products, in fp32: Eq. 3's gates and new
    states of the run's m tokens, and the run's share of Eq. 4's softmax over tokens. A pure function of tensors, so
    `torch.compile` fuses it (`compile_gates` compiles the step with `fused=True`); the same function runs eagerly
    otherwise.

    token_pre (b, m, 7H) = W ξ; x_term (b, m, 7H) = U x; forget_pre (b, m, H) = U_f h_i; V_g (b, 7H) = V g + b;
    W_f_g (b, H) = W_f g + b_f; c_run (b, m, H) the step t-1 cells, with the k before and after it; c_g (b, H); real
    (b, m, 1);
    token_norm / sentence_norm: (weight, bias) of the gate LayerNorms, or (None, None); eps: theirs (one config value).
    Returns h, c of the run (b, m, H) and Σ_i exp(f̂_i), Σ_i exp(f̂_i) ⊙ c_i over its real tokens (b, H)."""
    b, m, _ = token_pre.shape
    H = c_g.shape[-1]
    gates = at_least_fp32(token_pre) + at_least_fp32(x_term) + at_least_fp32(V_g)[:, None, :]
    gates = gate_layer_norm(gates.view(b, m, 7, H), *token_norm, eps, fused)
    # softmax over the five sigmoided gates i, l, r, f, s: σ(·) ∈ (0, 1), so exp needs no max shift
    weights = torch.exp(torch.sigmoid(gates[:, :, :5]))
    cells = at_least_fp32(torch.cat([c_before, c_run, c_after], dim=1))
    c_left, c_right = side_sums(cells, k)
    c_old = shifted(cells, k, 0)
    c_new = (weights[:, :, 0] * tanh(gates[:, :, 6], fused) + weights[:, :, 1] * c_left
             + weights[:, :, 2] * c_right + weights[:, :, 3] * c_old + weights[:, :, 4] * c_g[:, None, :])
    c_new = c_new / weights.sum(dim=2) * real
    h_new = torch.sigmoid(gates[:, :, 5]) * tanh(c_new, fused)  # pads stay zero: tanh(0) = 0
    # Eq. 4's per-token forget gates f̂_i = σ(LN(W_f g + U_f h_i + b_f)); their softmax (with the sentence slot) is
    # taken per dimension over all tokens, so a run hands back its sums
    forget = at_least_fp32(forget_pre) + at_least_fp32(W_f_g)[:, None, :]
    forget = gate_layer_norm(forget[:, :, None], *sentence_norm, eps, fused).squeeze(2)
    forget_weight = torch.exp(torch.sigmoid(forget)) * real
    return h_new, c_new, forget_weight.sum(dim=1), (forget_weight * c_old).sum(dim=1)


def run_update(token_W, forget_U, xi_run, h_run, x_term, V_g, W_f_g, c_before, c_run, c_after, c_g, real, k,
               token_norm, sentence_norm, eps, fused=False):
    """One run's update: its two matrix products (W ξ for all 7 gates of Eq. 3, U_f h_i of Eq. 4), under autocast,
    then `run_gates` in fp32. token_W (7H, B·H) and forget_U (H, H) are the weights; xi_run (b, m, B·H), h_run (b, m,
    H); the rest as `run_gates` takes them."""
    token_pre = F.linear(xi_run, token_W)  # W ξ: all 7 gates, ONE matmul
    forget_pre = F.linear(h_run, forget_U)  # U_f h_i of Eq. 4
    with torch.autocast(device_type=h_run.device.type, enabled=False):
        return run_gates(token_pre, x_term, forget_pre, V_g, W_f_g, c_before, c_run, c_after, c_g, real, k,
                         token_norm, sentence_norm, eps, fused)


MAX_COMPILED_STEP_GRAPHS = 64  # `compile_gates`: graphs a process keeps of the step (lengths, train/eval, dtypes)
COMPILE_MIN_TOKENS = 2048  # `compile_gates=None`: shorter inputs run eagerly (the compilation would not pay)


@functools.cache
def compiler_present(device_type):
    """Whether `torch.compile` can build kernels for this device here: Triton for a GPU, a C++ compiler for the CPU."""
    if device_type == "cuda":
        try:
            from torch.utils._triton import has_triton
        except ImportError:
            return False
        return has_triton()
    if device_type == "cpu":
        return any(shutil.which(name) for name in ("c++", "g++", "clang++"))
    return False


# `compile_gates=None`: whether compiling pays for a pass that needs gradients. On a CPU the compiled training step
# was slower than the eager one, though its forward alone was faster; on a GPU the compiled step is the one measured in
# training (the GPU runs in the same file). Measured: https://github.com/hf-longdoc/hf_longdoc/blob/main/docs/results.md#the-s-lstms-compiled-run
COMPILE_PAYS_IN_TRAINING = {"cuda": True, "cpu": False}


def compiles_the_step(compile_gates, device_type, positions, needs_grad=False):
    """Whether a forward runs its steps through `torch.compile`: `compile_gates` True / False, or with None where it
    pays, i.e. where a compiler is present, the input has at least `COMPILE_MIN_TOKENS` positions and, for a pass that
    needs gradients, where the device's compiled training step was faster (`COMPILE_PAYS_IN_TRAINING`)."""
    if compile_gates is not None:
        return compile_gates
    if needs_grad and not COMPILE_PAYS_IN_TRAINING.get(device_type, False):
        return False
    return positions >= COMPILE_MIN_TOKENS and compiler_present(device_type)


class CompilationReport:
    """Logs, from dynamo's count of graphs around a forward, each forward that compiled the step and how long it took,
    compilation included: the first with what to do about it (the one-off cost of the default), later ones (a batch
    of one after batches of several or the other way round, training, another dtype) briefly."""

    reported = False

    def __init__(self):
        self.graphs, self.start = torch._dynamo.utils.counters["stats"]["unique_graphs"], time.perf_counter()

    def done(self):
        new = torch._dynamo.utils.counters["stats"]["unique_graphs"] - self.graphs
        if new <= 0:
            return
        seconds = time.perf_counter() - self.start
        if CompilationReport.reported:
            logger.warning(f"S-LSTM: compiled {new} more graph(s) of its recurrent step, for a new kind of input (a "
                           f"batch of one or of several documents, training, another dtype); that forward took "
                           f"{seconds:.1f} s, compilation included.")
            return
        CompilationReport.reported = True
        logger.warning(f"S-LSTM: compiled its recurrent step ({new} graph(s)); that forward took {seconds:.1f} s, "
                       "compilation included. Inputs of other lengths reuse it; a batch of one and a batch of several "
                       "documents each compile once. For a few documents, eager is faster: `compile_gates=False` "
                       "(`--config compile_gates=false`, or `from_pretrained(..., compile_gates=False)`).")


@functools.cache
def compiled_step_update():
    """`SLSTMStep.update(..., fused=True)` through `torch.compile`, built once per process, for an input of one run (a
    GPU's): the whole step, so the compiler also fuses the sentence node's work and the copies that build ξ. A length
    that changes recompiles as dynamic."""
    return torch.compile(functools.partial(SLSTMStep.update, fused=True))


@functools.cache
def compiled_run_update():
    """`run_update` (called with `fused=True`) through `torch.compile` for dynamic shapes, built once per process, for
    inputs of several runs (the CPU's): a few graphs (the first, middle and last runs, whose neighbours differ; a
    batch of one document and one of several), whatever the document's length."""
    return torch.compile(run_update, dynamic=True)


class GateLayerNorm(nn.Module):
    """A separate LayerNorm for each of G gates, applied to a (..., G, H) tensor in one call."""

    def __init__(self, num_gates, hidden_size, eps, enabled=True):
        super().__init__()
        self.enabled = enabled
        self.eps = eps
        if enabled:
            self.weight = nn.Parameter(torch.ones(num_gates, hidden_size))
            self.bias = nn.Parameter(torch.zeros(num_gates, hidden_size))

    def params(self, first=0, count=None):
        """(weight, bias) of gates first .. first + count - 1, or (None, None) without LayerNorm."""
        if not self.enabled:
            return None, None
        last = None if count is None else first + count
        return self.weight[first:last], self.bias[first:last]

    def forward(self, gates, first=0):
        """gates: (..., G', H), normalised with the parameters of gates first .. first + G' - 1."""
        return gate_layer_norm(gates, *self.params(first, gates.shape[-2]), self.eps)


class SLSTMEmbeddings(nn.Module):
    """Eq. 2: x = E(w) + P(position), positions counting real tokens only (left padding changes nothing)."""

    def __init__(self, config):
        super().__init__()
        self.word_embeddings = nn.Embedding(config.vocab_size, config.hidden_size, padding_idx=config.pad_token_id)
        self.position_embeddings = (
            nn.Embedding(config.max_position_embeddings, config.hidden_size)
            if config.position_embedding_type == "absolute" else None
        )
        self.token_type_embeddings = (
            nn.Embedding(config.type_vocab_size, config.hidden_size) if config.type_vocab_size else None
        )
        self.dropout = nn.Dropout(config.hidden_dropout_prob)

    def forward(self, input_ids, inputs_embeds, token_type_ids, mask):
        x = self.word_embeddings(input_ids) if inputs_embeds is None else inputs_embeds
        if self.position_embeddings is not None:
            positions = (mask.long().cumsum(dim=1) - 1).clamp(min=0)  # 0, 1, ... over the real tokens
            x = x + self.position_embeddings(positions)
        if self.token_type_embeddings is not None and token_type_ids is not None:
            x = x + self.token_type_embeddings(token_type_ids)
        return self.dropout(x) * mask[:, :, None].to(x.dtype)  # pads are zero states


class SLSTMStep(GradientCheckpointingLayer):
    """One synchronous update of all token nodes (Eq. 3) and the sentence node (Eq. 4). The same instance (the same
    parameters) runs all L steps.

    Parameters, by the paper's names (x the gate, H the hidden size, B = 3 or 2k+1 blocks of ξ); the 7H rows of the
    token gates are ordered i, l, r, f, s, o, u, the 3H rows of `sentence_W` and the sentence LayerNorm f_i, f_g, o:
        token_W  (7H × B·H, bias b_x)  W_x ξ          token_U (7H × H)  U_x x_i          token_V (7H × H)  V_x g
        sentence_W (3H × H, biases b_f, b_g, b_o)  W_f g, W_g g, W_o g
        sentence_U_token (H × H)  U_f h_i           sentence_U_mean (2H × H)  U_g h̄, U_o h̄
    """

    def __init__(self, config):
        super().__init__()
        H, k = config.hidden_size, config.window_size
        self.window_size = k
        self.window_combine = config.window_combine
        xi_blocks = 3 if config.window_combine == "sum" else 2 * k + 1  # ξ = left ‖ centre ‖ right
        self.token_W = nn.Linear(xi_blocks * H, 7 * H)
        self.token_U = nn.Linear(H, 7 * H, bias=False)
        self.token_V = nn.Linear(H, 7 * H, bias=False)
        self.token_norm = GateLayerNorm(7, H, config.layer_norm_eps, config.gate_layer_norm)
        self.sentence_W = nn.Linear(H, 3 * H)
        self.sentence_U_token = nn.Linear(H, H, bias=False)
        self.sentence_U_mean = nn.Linear(H, 2 * H, bias=False)
        self.sentence_norm = GateLayerNorm(3, H, config.layer_norm_eps, config.gate_layer_norm)
        self.dropout = nn.Dropout(config.step_dropout_prob)
        self.compile_gates = config.compile_gates

    def xi(self, padded):
        """ξ of Eq. 3 for every token, from the (b, n + 2k, H) states padded by k zero states either side: left ‖
        centre ‖ right, a side being the sum of its k states (`sum`) or all 2k+1 states concatenated in order
        (`concat`); (b, n, B·H)."""
        k = self.window_size
        if self.window_combine == "sum":
            left, right = side_sums(padded, k)
            return torch.cat([left, shifted(padded, k, 0), right], dim=-1)
        return torch.cat([shifted(padded, k, offset) for offset in range(-k, k + 1)], dim=-1)

    def forward(self, h, c, g, c_g, x_term, mask, sizes):
        """h, c: (b, n, H) token states, g, c_g: (b, H) sentence states, all at step t-1; x_term = U x, (b, n, 7H),
        computed once per forward; mask (b, n) bool; `sizes` from `chunk_sizes`. Returns the four step-t states: the
        step through `torch.compile` with `config.compile_gates` (unless the whole model is being compiled or
        exported), eagerly otherwise."""
        needs_grad = torch.is_grad_enabled() and (h.requires_grad or self.token_W.weight.requires_grad)
        if not torch.compiler.is_compiling() and compiles_the_step(self.compile_gates, h.device.type, h.shape[1],
                                                                   needs_grad):
            # the first step starts from h = c = x and g = c_g: distinct tensors keep it on the other steps' graph
            c = c.clone() if c is h else c
            c_g = c_g.clone() if c_g is g else c_g
            # graphs for train/eval, dtypes and lengths: more than dynamo's default of 8 per function, past which it
            # would run eagerly
            with torch._dynamo.config.patch(recompile_limit=MAX_COMPILED_STEP_GRAPHS):
                if len(sizes) == 1:
                    return compiled_step_update()(self, h, c, g, c_g, x_term, mask, sizes)
                return self.update(h, c, g, c_g, x_term, mask, sizes, fused=True, run=compiled_run_update())
        return self.update(h, c, g, c_g, x_term, mask, sizes)

    def update(self, h, c, g, c_g, x_term, mask, sizes, fused=False, run=run_update):
        """The step (`forward`'s arguments). The tokens are updated a run of `config.chunk_size` at a time, each with
        its k neighbours on either side, so the gate tensors of a run stay in cache; the result does not depend on the
        runs (tests check it). `fused`: the element-wise forms the compiler fuses best (`run_gates`); `run`: what
        updates a run (`run_update`, or its compiled form)."""
        b, n, H = h.shape
        k = self.window_size
        real = mask[:, :, None].to(h.dtype)
        # terms of g and of the sentence node, once per document
        V_g = F.linear(g, self.token_V.weight, self.token_W.bias)  # V g + b, (b, 7H): the bias once per document
        W_g = self.sentence_W(g)  # (b, 3H): W_f g + b_f, W_g g + b_g, W_o g + b_o
        h_mean = h.sum(dim=1) / real.sum(dim=1)  # h̄ of Eq. 4; pads are zero
        doc_gates = (W_g[:, H:] + self.sentence_U_mean(h_mean)).view(b, 2, H)  # W_g g + U_g h̄ + b_g, W_o g + ...
        with torch.autocast(device_type=h.device.type, enabled=False):
            forget_g, out_g = torch.sigmoid(self.sentence_norm(at_least_fp32(doc_gates), 1)).unbind(dim=1)
            c_g32 = at_least_fp32(c_g)
        h_runs, c_runs, real_runs = h.split(sizes, dim=1), c.split(sizes, dim=1), real.split(sizes, dim=1)
        x_runs = x_term.split(sizes, dim=1)
        xi_runs = self.xi(F.pad(h, (0, 0, k, k))).split(sizes, dim=1)  # (b, m, B·H) each
        token_norm, sentence_norm = self.token_norm.params(), self.sentence_norm.params(0, 1)
        h_parts, c_parts = [], []
        token_weight_sum, weighted_cells = 0.0, 0.0
        for j in range(len(sizes)):
            c_before, c_after = neighbours(c_runs, j, k)
            h_run, c_run, weight_sum, weighted = run(self.token_W.weight, self.sentence_U_token.weight, xi_runs[j],
                                                     h_runs[j], x_runs[j], V_g, W_g[:, :H], c_before, c_runs[j],
                                                     c_after, c_g32, real_runs[j], k, token_norm, sentence_norm,
                                                     self.token_norm.eps, fused=fused)
            h_parts.append(h_run)
            c_parts.append(c_run)
            token_weight_sum = token_weight_sum + weight_sum
            weighted_cells = weighted_cells + weighted
        with torch.autocast(device_type=h.device.type, enabled=False):
            weight_g = torch.exp(forget_g)  # (b, H)
            c_g_new = (weight_g * c_g32 + weighted_cells) / (token_weight_sum + weight_g)
            g_new = out_g * torch.tanh(c_g_new)
        h_new = h_parts[0] if len(h_parts) == 1 else torch.cat(h_parts, dim=1)
        c_new = c_parts[0] if len(c_parts) == 1 else torch.cat(c_parts, dim=1)
        dtype = h.dtype
        return (self.dropout(h_new.to(dtype)), c_new.to(dtype), self.dropout(g_new.to(dtype)), c_g_new.to(dtype))


class SLSTMLMHead(nn.Module):
    """The masked-LM head, the decoder tied to the input embeddings E. `mlm_head="eq5"`: logits = E · (W h̃), Eq. 5
    exactly (no bias, no nonlinearity); `"transform"`: E · LN(GELU(W h̃ + b)) + bias, the released code's form."""

    def __init__(self, config):
        super().__init__()
        self.transform = config.mlm_head == "transform"
        self.dense = nn.Linear(config.hidden_size, config.hidden_size, bias=self.transform)  # W of Eq. 5
        if self.transform:
            self.activation = ACT2FN["gelu"]
            self.layer_norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.decoder = nn.Linear(config.hidden_size, config.vocab_size, bias=self.transform)  # weight tied to E

    def forward(self, h):
        projected = self.dense(h)  # W h̃, (b, n, H)
        if self.transform:
            projected = self.layer_norm(self.activation(projected))
        return self.decoder(projected)  # E(w)ᵀ (W h̃) for every w, (b, n, vocab)


class SLSTMPreTrainedModel(PreTrainedModel):
    config_class = SLSTMConfig
    base_model_prefix = "slstm"
    main_input_name = "input_ids"
    supports_gradient_checkpointing = True
    _no_split_modules = ["SLSTMStep"]

    @torch.no_grad()
    def _init_weights(self, module):
        super()._init_weights(module)
        if isinstance(module, GateLayerNorm) and module.enabled:
            init.ones_(module.weight)
            init.zeros_(module.bias)


class SLSTMModel(SLSTMPreTrainedModel):
    """The S-LSTM encoder: token states h (last_hidden_state), the sentence node g (pooler_output), and on request the
    token states of every step (hidden_states = h after 0, 1, ..., L steps)."""

    def __init__(self, config):
        super().__init__(config)
        self.embeddings = SLSTMEmbeddings(config)
        self.step = SLSTMStep(config)  # one block, run L times (all parameters shared across steps)
        self.gradient_checkpointing = False
        self.post_init()

    def get_input_embeddings(self):
        return self.embeddings.word_embeddings

    def set_input_embeddings(self, value):
        self.embeddings.word_embeddings = value

    def position_limit(self):
        """The most tokens the positions hold: `max_position_embeddings` with absolute positions (they count real
        tokens), None (any number) with relative ones."""
        return self.config.max_position_embeddings if self.config.position_embedding_type == "absolute" else None

    def real_tokens_read(self, mask):
        """The mask of the real tokens a traced graph (ONNX export) reads: with absolute positions, the first
        `max_position_embeddings` (a graph cannot branch on the length, so the rest is treated as padding). Eagerly
        the input is cut before, as `truncation=True` cuts it (`keep_what_the_model_reads`), so this is the mask."""
        limit = self.position_limit()
        if limit is not None and torch.compiler.is_compiling():
            return mask & (mask.long().cumsum(dim=1) <= limit)
        return mask

    def check_input_ids(self, input_ids, token_type_ids, mask):
        config = self.config
        if input_ids is not None:
            check_vocabulary_range(input_ids, config.vocab_size)
        if token_type_ids is not None:
            if tuple(token_type_ids.shape) != tuple(mask.shape):
                raise ValueError(f"`token_type_ids` has shape {tuple(token_type_ids.shape)}, expected "
                                 f"{tuple(mask.shape)} like the input.")
            if config.type_vocab_size and not torch.compiler.is_compiling() and (
                    (token_type_ids < 0) | (token_type_ids >= config.type_vocab_size)).any():
                raise ValueError(f"`token_type_ids` must lie in [0, {config.type_vocab_size}) (`type_vocab_size`).")

    @can_return_tuple
    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.LongTensor | None = None,
        inputs_embeds: torch.Tensor | None = None,
        output_hidden_states: bool | None = None,
        output_attentions: bool | None = None,
        return_dict: bool | None = None,
    ) -> BaseModelOutputWithPooling:
        r"""
        output_hidden_states (`bool`, *optional*):
            Return the word states h before the first recurrent step and after each one.
        output_attentions (`bool`, *optional*):
            Accepted for the Transformers API; the S-LSTM has no attention weights (Eq. 3-4 mix a window of words and
            the sentence node through gates), so `attentions` is always None.
        """
        attention_mask, input_ids, inputs_embeds, token_type_ids = keep_what_the_model_reads(
            self.position_limit(), self.config.max_input_length, "tokens", attention_mask, input_ids, inputs_embeds,
            token_type_ids)
        mask = real_token_mask(input_ids, inputs_embeds, attention_mask)
        self.check_input_ids(input_ids, token_type_ids, mask)
        mask = self.real_tokens_read(mask)
        if output_hidden_states is None:
            output_hidden_states = self.config.output_hidden_states

        x = self.embeddings(input_ids, inputs_embeds, token_type_ids, mask)  # Eq. 2, (b, n, H), zero at pads
        n_real = mask.sum(dim=1, keepdim=True).to(x.dtype)
        h, c = x, x  # the released code's start: h = c = x, g = c_g = mean of x
        g = x.sum(dim=1) / n_real
        c_g = g
        # runs bound the gate tensors of a step (ξ, (b, n, B·H), is built whole); a traced graph (ONNX export) takes
        # the whole sequence as one run (the same states: each run reads its k neighbours from the next) so that its
        # length stays symbolic
        n = x.shape[1]
        one_run = torch.compiler.is_compiling() or x.device.type != "cpu"  # on a GPU, runs would only add launches
        sizes = [n] if one_run else chunk_sizes(n, self.config.chunk_size, self.config.window_size)
        # U x of Eq. 3, constant over the steps (its bias joins V g, per document: a bias here is a (b, n, 7H) copy)
        x_term = F.linear(x, self.step.token_U.weight)
        hidden_states = [h] if output_hidden_states else None
        compilation = None if torch.compiler.is_compiling() else CompilationReport()  # a traced graph: no clock
        for _ in range(self.config.num_recurrent_steps):
            h, c, g, c_g = self.step(h, c, g, c_g, x_term, mask, sizes)
            if output_hidden_states:
                hidden_states.append(h)
        if compilation is not None:
            compilation.done()
        return BaseModelOutputWithPooling(
            last_hidden_state=h,
            pooler_output=g,
            hidden_states=tuple(hidden_states) if output_hidden_states else None,
        )


class SLSTMForSequenceClassification(SLSTMPreTrainedModel):
    """A linear head on the final sentence node g (Section 5.3: g plays [CLS]; a sentence pair is one concatenated
    sequence): single-label, multi-label (BCE) or regression, by `problem_type`."""

    accepts_loss_kwargs = False  # the loss is a mean over the batch; it does not use num_items_in_batch

    def __init__(self, config):
        super().__init__(config)
        self.num_labels = config.num_labels
        self.slstm = SLSTMModel(config)
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
        r"""output_attentions: accepted; the S-LSTM has no attention weights, so `attentions` is None."""
        outputs = self.slstm(input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids,
                             inputs_embeds=inputs_embeds, output_hidden_states=output_hidden_states, return_dict=True)
        logits = self.classifier(self.dropout(outputs.pooler_output))  # (b, num_labels)
        loss = None
        if labels is not None:
            check_labels(labels, logits, self.config)
            loss = self.loss_function(labels=labels, pooled_logits=logits, config=self.config)
        return SequenceClassifierOutput(loss=loss, logits=logits, hidden_states=outputs.hidden_states)


class SLSTMForMaskedLM(SLSTMPreTrainedModel):
    """Masked-LM pre-training (Section 3.3): cross-entropy over the masked tokens (`labels` = -100 elsewhere, as
    `DataCollatorForLanguageModeling` makes them)."""

    _tied_weights_keys = {"lm_head.decoder.weight": "slstm.embeddings.word_embeddings.weight"}

    def __init__(self, config):
        super().__init__(config)
        self.slstm = SLSTMModel(config)
        self.lm_head = SLSTMLMHead(config)
        self.post_init()

    def get_output_embeddings(self):
        return self.lm_head.decoder

    def set_output_embeddings(self, new_embeddings):
        self.lm_head.decoder = new_embeddings

    @can_return_tuple
    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.LongTensor | None = None,
        inputs_embeds: torch.Tensor | None = None,
        labels: torch.LongTensor | None = None,
        output_hidden_states: bool | None = None,
        output_attentions: bool | None = None,
        return_dict: bool | None = None,
    ) -> MaskedLMOutput:
        r"""output_attentions: accepted; the S-LSTM has no attention weights, so `attentions` is None."""
        outputs = self.slstm(input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids,
                             inputs_embeds=inputs_embeds, output_hidden_states=output_hidden_states, return_dict=True)
        logits = self.lm_head(outputs.last_hidden_state)  # (b, n, vocab)
        loss = None
        if labels is not None:
            if tuple(labels.shape) != tuple(logits.shape[:2]):
                raise ValueError(f"`labels` must have the input's shape {tuple(logits.shape[:2])} (-100 where no "
                                 f"token is predicted), got {tuple(labels.shape)}.")
            loss = F.cross_entropy(logits.float().view(-1, logits.shape[-1]), labels.view(-1), ignore_index=-100)
        return MaskedLMOutput(loss=loss, logits=logits, hidden_states=outputs.hidden_states)


__all__ = ["SLSTMModel", "SLSTMForMaskedLM", "SLSTMForSequenceClassification", "SLSTMPreTrainedModel"]
