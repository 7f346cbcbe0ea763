"""Will it fit? A lower bound on the memory a model of some size needs, checked before any work.

A setting mistyped by a few orders of magnitude (`--config num_hidden_layers=100000`, `bench --lengths 100000000`)
otherwise grows until the kernel kills the process, after minutes, leaving its folders behind. The estimate is a
deliberately low bound, so a run it refuses could not have fit:

- parameters, counted exactly by building the model on PyTorch's `meta` device (no memory is allocated); a config
  with many layers is counted at one and two layers and extrapolated, since building 100,000 layers even on `meta`
  takes minutes. Training holds 4 copies of each (weights, gradients, Adam's two moments), inference 1;
- activations: `ACTIVATION_FLOATS` floats per token and hidden unit per layer in training (a Transformer layer keeps
  about 17 per token and unit for its backward pass, Korthikanti et al. 2022, https://arxiv.org/abs/2205.05198, so 4
  is far below it), two layers' worth at inference;
- the (length x length) tensors some models build (`SquareTensors`): dense attention scores (eager attention: batch x
  heads x n x n per layer, every layer's kept for the backward pass), and masks such as Longformer's (batch x n x n)
  or ModernBERT's sliding-window positions (n x n int64), whatever the attention. They are what makes a length
  impossible: BERT at 100,000 ids with eager attention and 4 heads needs 149 GiB for one layer's scores.
"""

import copy
import logging
from dataclasses import dataclass

import psutil
import torch

logger = logging.getLogger(__name__)

FLOAT_BYTES = 4
ACTIVATION_FLOATS = 4  # per token, hidden unit and layer kept for the backward pass: a low bound
GIB = 2**30


def parameter_count(build, config):
    """Parameters of `build(config)` without allocating them (on the `meta` device); None when the model cannot be
    built there. A config with more than two `num_hidden_layers` is counted at one and two and extrapolated."""
    layers = getattr(config, "num_hidden_layers", None)
    try:
        if isinstance(layers, int) and layers > 2:
            one, two = (_count(build, _with_layers(config, n)) for n in (1, 2))
            return one + (layers - 1) * (two - one)
        return _count(build, config)
    except Exception as error:  # a model that needs real tensors to build: no estimate, no refusal
        logger.debug("No parameter count on the meta device (%s: %s).", type(error).__name__, error)
        return None


def _with_layers(config, layers):
    smaller = copy.deepcopy(config)
    smaller.num_hidden_layers = layers
    return smaller


def _count(build, config):
    with torch.device("meta"):
        model = build(config)
    return sum(parameter.numel() for parameter in model.parameters())


@dataclass(frozen=True)
class SquareTensors:
    """The (length x length) tensors one forward pass of a model builds, in bytes per length² (0: none), and what
    they are and how to avoid them, in words (for the refusal)."""

    shared: float = 0  # made once per pass (a mask shared by the layers)
    per_layer: float = 0  # each layer's (attention scores); training keeps every layer's for the backward pass
    what: str = ""  # "eager attention's batch x heads x n x n scores"
    fix: str = ""  # the fix, with `{flags}` where the flags that size the run go

    def bytes(self, length, layers, training):
        """The bytes they take at `length` with `layers` layers."""
        kept = max(1, layers or 1) if training else 1
        return float(length) ** 2 * (self.shared + self.per_layer * kept)

    def __bool__(self):
        return bool(self.shared or self.per_layer)


def family_squares(parts):
    """The `SquareTensors` of a family's `square_bytes` answer ((shared, per layer, what), or None: none)."""
    if parts is None:
        return None
    shared, per_layer, what = parts
    return SquareTensors(shared, per_layer, what, "lower {flags} (the sparse_longformer family reads long documents "
                                                  "without n x n tensors)")


def estimate_bytes(parameters, hidden_size, layers, batch_size, length, training):
    """The low bound of the module docstring, in bytes."""
    weights = (4 if training else 1) * FLOAT_BYTES * (parameters or 0)
    kept_layers = max(1, layers or 1) if training else 2
    activations = ACTIVATION_FLOATS * FLOAT_BYTES * batch_size * length * (hidden_size or 0) * kept_layers
    return weights + activations


def available_bytes(device=None):
    """Memory the work can use: the GPU's free memory for a CUDA device, else the machine's available memory."""
    device = torch.device(device) if device is not None else torch.device("cpu")
    if device.type == "cuda" and torch.cuda.is_available():
        free, _ = torch.cuda.mem_get_info(device)
        return free
    return psutil.virtual_memory().available


def longest_fitting(needed_at, length, available):
    """The longest length up to `length` whose estimate `needed_at(n)` fits in `available` bytes (bisection; the
    estimate grows with the length), or 0 when none does."""
    low, high = 0, length
    while low < high:
        middle = (low + high + 1) // 2
        if needed_at(middle) <= available:
            low = middle
        else:
            high = middle - 1
    return low


def check_fits(build, config, batch_size, length, training, what, flags, device=None, square=None):
    """A ValueError, before any work, when `build(config)` at `batch_size` x `length` tokens cannot fit in memory
    (`estimate_bytes`, plus `square`: the `SquareTensors` the model builds, if any); it gives the estimate, what is
    available, the longest length that the estimate lets fit, and the fix (`square.fix`, the `flags` that size it)."""
    parameters = parameter_count(build, config)
    hidden_size = getattr(config, "hidden_size", None)
    layers = getattr(config, "num_hidden_layers", None)
    square = square or SquareTensors()

    def needed_at(n):
        return estimate_bytes(parameters, hidden_size, layers, batch_size, n, training) + square.bytes(n, layers,
                                                                                                       training)

    needed = needed_at(length)
    available = available_bytes(device)
    if needed > available:
        counted = f"{parameters / 1e6:,.1f}M parameters" if parameters is not None else "its parameters uncounted"
        squares = f"; {square.what}: {_size(square.bytes(length, layers, training))}" if square else ""
        longest = longest_fitting(needed_at, length, available)
        fits = f" By this estimate at most about {longest:,} tokens fit." if longest >= 8 else ""
        fix = square.fix.format(flags=flags) if square and square.fix else f"lower {flags}"
        raise ValueError(
            f"{what} needs at least {_size(needed)} ({counted}; {layers} layers of width {hidden_size}; "
            f"batch {batch_size} x {length:,} tokens{', training' if training else ''}{squares}), and this machine "
            f"has {_size(available)} available; {fix}.{fits}")
    return needed


def _size(nbytes):
    """Bytes in GiB, or TiB from 1,024 GiB on (a 9 TB estimate reads better than 8,773.4 GiB)."""
    return f"{nbytes / GIB / 1024:,.1f} TiB" if nbytes >= 1024 * GIB else f"{nbytes / GIB:,.1f} GiB"


__all__ = ["SquareTensors", "available_bytes", "check_fits", "estimate_bytes", "family_squares", "longest_fitting",
           "parameter_count"]
