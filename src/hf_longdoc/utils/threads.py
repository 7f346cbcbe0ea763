"""How many CPU threads a phase of work uses.

PyTorch runs an operation on `torch.get_num_threads()` threads: every op that opens a parallel region waits until all
of them have run. On cores another process is using, one of them waits for a scheduler time slice, so a phase made of
many small operations (a head trained on cached features: a biLSTM over segments, attention, a linear layer on batches
of 8) spends its time waiting. Measured on 2 cores beside one busy process: `x.tanh_()` on (8, 192) 6.4 ms on two
threads against 0.002 ms on one, and the segment LM's head stage on the demo's cached features 9.8 s against 4.2 s
for 3 epochs (examples/head_stage_threads.py). Such phases run on one thread; the backbone's large matrix products
keep every core.

Reading a corpus (`predict` on the CPU) runs data-parallel instead: as many batches at once as the process has
threads, each on one intra-op thread (`reading_workers`). Static splitting of every operation across the cores lets
the slowest core set the pace; on 2 cores beside one busy process the segment LM around MiniLM read 3.05 documents a
second on two intra-op threads and 4.11 as two one-thread readers (5.08 and 6.30 on idle cores); on 1,000 real long
documents 1.98 and 2.70 (3.43 and 4.31 idle; docs/results.md).

Under a launcher (torchrun, accelerate launch) each process takes its share of the cores the machine lets this one
use (its CPU affinity and cgroup quota), not all of them (`share_cores`).

A user's choice is kept: with `OMP_NUM_THREADS` set, or `torch.set_num_threads` called after hf_longdoc was
imported, nothing is changed.
"""

import contextlib
import logging
import os
import sys
import threading

import torch

logger = logging.getLogger(__name__)


STARTING_THREADS = torch.get_num_threads()  # PyTorch's count when hf_longdoc was imported


def user_set_threads():
    """Whether the user chose the thread count: `OMP_NUM_THREADS`, which PyTorch reads at start, or a
    `torch.set_num_threads` since hf_longdoc was imported that hf_longdoc did not make (`share_cores`)."""
    return bool(os.environ.get("OMP_NUM_THREADS", "").strip()) or torch.get_num_threads() != _expected[0]


_expected = [STARTING_THREADS]  # the count hf_longdoc last set, or PyTorch's own


def available_cores():
    """The cores this process may run on: its CPU affinity, capped by a cgroup v2 CPU quota (a container's
    `--cpus`), rounded up."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    try:
        with open("/sys/fs/cgroup/cpu.max") as f:
            quota, period = f.read().split()[:2]
        if quota != "max":
            cores = min(cores, max(1, -(-int(quota) // int(period))))
    except (OSError, ValueError):
        pass
    return max(1, cores)


def share_cores(command):
    """Set this process's intra-op threads to its share of the available cores (all of them for one process; under
    a launcher, divided by the processes on this machine, `LOCAL_WORLD_SIZE`), unless the user chose a count; log
    the count `command` uses either way."""
    processes = max(1, int(os.environ.get("LOCAL_WORLD_SIZE", "1") or 1))
    if user_set_threads():
        why = ("OMP_NUM_THREADS" if os.environ.get("OMP_NUM_THREADS", "").strip() else "torch.set_num_threads")
        logger.info("hf-longdoc %s uses %d CPU thread(s) per process (%s).", command, torch.get_num_threads(), why)
        return torch.get_num_threads()
    cores = available_cores()
    share = max(1, cores // processes)
    if share != torch.get_num_threads():
        torch.set_num_threads(share)
    _expected[0] = share
    logger.info("hf-longdoc %s uses %d CPU thread(s)%s; set OMP_NUM_THREADS to choose.", command, share,
                f" per process ({cores} cores shared by {processes} processes)" if processes > 1 else "")
    return share


def reading_workers(device, concurrent=True):
    """How many batches `predict` reads at once on `device`: on the CPU, one per thread of this process (each then
    runs on one intra-op thread: `one_thread_each`), unless the user chose the thread count or the model cannot be
    called from several threads at once (`concurrent`); 1 on a GPU."""
    if torch.device(device).type != "cpu" or not concurrent or user_set_threads():
        return 1
    return torch.get_num_threads()


def forked_workers(device):
    """How many processes a phase of independent one-thread fits may use (the head choice's folds,
    `head_fitting.cross_validated_score`): this one and forked copies of it, one per thread of this process, on a
    Linux CPU, unless the user chose the thread count. 1 on a GPU (CUDA does not survive a fork) and on other systems
    (macOS and Windows start a process anew, which would copy the model and features by pickling them)."""
    if not sys.platform.startswith("linux") or torch.device(device).type != "cpu" or user_set_threads():
        return 1
    return torch.get_num_threads()


def per_thread(make):
    """A function that returns this thread's own object, made by `make()` on its first call in each thread (for
    what two threads must not share, such as a fast tokenizer, which can fail "Already borrowed" when it pads or cuts
    for two at once)."""
    own = threading.local()

    def mine():
        if not hasattr(own, "value"):
            own.value = make()
        return own.value

    return mine


@contextlib.contextmanager
def _one_thread():
    """One intra-op thread in the block (recorded as hf_longdoc's own choice), the count restored after."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    _expected[0] = 1
    try:
        yield
    finally:
        torch.set_num_threads(before)
        _expected[0] = before


@contextlib.contextmanager
def one_thread_each(workers):
    """With several `workers` reading batches at once, each runs on one intra-op thread; the count is restored
    after."""
    if workers <= 1 or torch.get_num_threads() == 1:
        yield
        return
    logger.info("Reading %d batches at once, each on one CPU thread.", workers)
    with _one_thread():
        yield


@contextlib.contextmanager
def small_op_phase(what, device="cpu"):
    """Run the block on one intra-op thread (see the module docstring) and restore the count after, unless the work
    runs on another `device` than the CPU, the user chose the count, or it is one already. `what` names the phase in
    the log."""
    before = torch.get_num_threads()
    if torch.device(device).type != "cpu" or before == 1 or user_set_threads():
        yield
        return
    logger.info("%s runs on 1 CPU thread (small operations: on shared cores each would wait for the other %d); set "
                "OMP_NUM_THREADS to choose.", what, before - 1)
    with _one_thread():
        yield


__all__ = ["available_cores", "forked_workers", "one_thread_each", "per_thread", "reading_workers", "share_cores",
           "small_op_phase", "user_set_threads"]
