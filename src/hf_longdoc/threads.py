"""How many CPU threads a phase of work uses.

PyTorch runs an operation on `torch.get_num_threads()` threads: every op that opens a parallel region waits until all
of them have run. On cores another process is using, one of them waits for a scheduler time slice, so a phase made of
many small operations (a head trained on cached features: a biLSTM over segments, attention, a linear layer on batches
of 8) spends its time waiting. Measured on 2 cores beside one busy process: `x.tanh_()` on (8, 192) 6.4 ms on two
threads against 0.002 ms on one, and the segment LM's head stage on the demo's cached features 9.8 s against 4.2 s
for 3 epochs (examples/head_stage_threads.py). Such phases run on one thread; the backbone's large matrix products
keep every core.

A user's choice is kept: with `OMP_NUM_THREADS` set, nothing is changed.
"""

import contextlib
import logging
import os

import torch

logger = logging.getLogger(__name__)


def user_set_threads():
    """Whether the user chose the thread count (`OMP_NUM_THREADS`, which PyTorch reads at start)."""
    return bool(os.environ.get("OMP_NUM_THREADS", "").strip())


@contextlib.contextmanager
def small_op_phase(what, device="cpu"):
    """Run the block on one intra-op thread (see the module docstring) and restore the count after, unless the work
    runs on another `device` than the CPU, the user chose the count, or it is one already. `what` names the phase in
    the log."""
    before = torch.get_num_threads()
    if torch.device(device).type != "cpu" or before == 1 or user_set_threads():
        yield
        return
    torch.set_num_threads(1)
    logger.info("%s runs on 1 CPU thread (small operations: on shared cores each would wait for the other %d); set "
                "OMP_NUM_THREADS to choose.", what, before - 1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


__all__ = ["small_op_phase", "user_set_threads"]
