"""Timers and peak-memory meters shared by `bench` and `compare`."""

import ctypes
import os
import statistics
import threading
import time
from typing import NamedTuple

import torch


def release_freed_heap():
    """Return the C heap's freed pages to the OS (glibc `malloc_trim`), so RSS growth measures new allocations."""
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # not glibc: the measurement is then a lower bound
        pass


class PeakMemory:
    """Context manager measuring peak memory growth (bytes) of the code inside it: `torch.cuda.max_memory_allocated`
    on GPU and, on CPU, the peak resident-set growth sampled every millisecond from /proc (an approximation that
    catches every allocation that lives longer than 1 ms)."""

    def __init__(self, device):
        self.device = torch.device(device)
        self.peak = 0

    def _rss(self):
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")

    def _sample(self):
        while not self._stop.is_set():
            self.peak = max(self.peak, self._rss() - self._start)
            time.sleep(0.001)

    def __enter__(self):
        if self.device.type == "cuda":
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats(self.device)
            self._start = torch.cuda.memory_allocated(self.device)
        elif os.path.exists("/proc/self/statm"):
            release_freed_heap()  # otherwise memory freed by earlier passes is reused unseen and the peak reads ~0
            self._start = self._rss()
            self._stop = threading.Event()
            self._thread = threading.Thread(target=self._sample, daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc):
        if self.device.type == "cuda":
            torch.cuda.synchronize()
            self.peak = torch.cuda.max_memory_allocated(self.device) - self._start
        elif hasattr(self, "_thread"):
            self._stop.set()
            self._thread.join()
        return False


class Timing(NamedTuple):
    seconds: float  # the median of the timed passes
    peak: int  # bytes, all passes (warm-up included)
    first_seconds: float | None  # the first warm-up pass alone (what compiles on first use, and one pass); None: none


def timed_call(function, device):
    """Seconds one call of `function` takes (CUDA synchronised around it)."""
    if device.type == "cuda":
        torch.cuda.synchronize()
    start = time.perf_counter()
    function()
    if device.type == "cuda":
        torch.cuda.synchronize()
    return time.perf_counter() - start


def first_and_median_seconds(function, device, repeats, warmup):
    """(the first warm-up call's seconds, or None without warm-up; the median of `repeats` calls after `warmup`
    calls), CUDA synchronised around each call: a compilation on first use shows in the first."""
    warmups = [timed_call(function, device) for _ in range(warmup)]
    return (warmups[0] if warmups else None), statistics.median(timed_call(function, device) for _ in range(repeats))


def median_seconds(function, device, repeats, warmup):
    """Median wall time of `repeats` calls of `function` after `warmup` calls (CUDA synchronised around each)."""
    return first_and_median_seconds(function, device, repeats, warmup)[1]


def time_forward(model, input_ids, attention_mask, repeats, warmup, backward=False, **inputs):
    """`Timing` of the timed passes (forward, or with `backward` a training step: forward + backward of the loss):
    their median, the peak memory of all passes (warm-up included) and the first warm-up pass alone. `inputs` go to
    the model too."""
    device = input_ids.device
    if backward:
        labels = torch.zeros(input_ids.shape[0], dtype=torch.long, device=device)

        def step():
            model.zero_grad(set_to_none=True)
            model(input_ids=input_ids, attention_mask=attention_mask, labels=labels, **inputs).loss.backward()

        model.train()
        with PeakMemory(device) as memory:
            first, seconds = first_and_median_seconds(step, device, repeats, warmup)
        model.zero_grad(set_to_none=True)
        return Timing(seconds, memory.peak, first)
    with torch.inference_mode(), PeakMemory(device) as memory:  # the warm-up too: its first pass allocates
        first, seconds = first_and_median_seconds(
            lambda: model(input_ids=input_ids, attention_mask=attention_mask, **inputs), device, repeats, warmup)
    return Timing(seconds, memory.peak, first)
