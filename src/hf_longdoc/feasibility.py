"""Will it fit? A lower bound on the memory a model of some size needs, checked before any work.

A setting mistyped by a few orders of magnitude (`--config num_hidden_layers=100000`, `bench --lengths 100000000`)
otherwise grows until the kernel kills the process, after minutes, leaving its folders behind. The estimate is a
deliberately low bound, so a run it refuses could not have fit:

- parameters, counted exactly by building the model on PyTorch's `meta` device (no memory is allocated); a config
  with many layers is counted at one and two layers and extrapolated, since building 100,000 layers even on `meta`
  takes minutes. Training holds 4 copies of each (weights, gradients, Adam's two moments), inference 1;
- activations: `ACTIVATION_FLOATS` floats per token and hidden unit per layer in training (a Transformer layer keeps
  about 17 per token and unit for its backward pass, Korthikanti et al. 2022, https://arxiv.org/abs/2205.05198, so 4
  is far below it), two layers' worth at inference.
"""

import copy
import logging

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


def check_fits(build, config, batch_size, length, training, what, flags, device=None):
    """A ValueError, before any work, when `build(config)` at `batch_size` x `length` tokens cannot fit in memory
    (`estimate_bytes`); it gives the estimate, what is available and the `flags` that size it."""
    parameters = parameter_count(build, config)
    hidden_size = getattr(config, "hidden_size", None)
    layers = getattr(config, "num_hidden_layers", None)
    needed = estimate_bytes(parameters, hidden_size, layers, batch_size, length, training)
    available = available_bytes(device)
    if needed > available:
        counted = f"{parameters / 1e6:,.1f}M parameters" if parameters is not None else "its parameters uncounted"
        raise ValueError(
            f"{what} needs at least {needed / GIB:,.1f} GiB ({counted}; {layers} layers of width {hidden_size}; "
            f"batch {batch_size} x {length:,} tokens{', training' if training else ''}), and this machine has "
            f"{available / GIB:,.1f} GiB available; lower {flags}.")
    return needed


__all__ = ["available_bytes", "check_fits", "estimate_bytes", "parameter_count"]
