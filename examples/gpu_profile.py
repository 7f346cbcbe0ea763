"""Where a forward pass spends its time on a GPU, by kernel, for a few bench models (issue 53).

At 8,192 tokens on an H200 the sparse Longformer's `flex` forward took 38.1 ms where its parts add up to about 25:
its matrix products (≈10 ms, BERT's and the global keys and values), twelve FlexAttention calls (0.85 ms each,
`examples/gpu_flex_mask.py`) and BERT's element-wise work. This script says where the rest goes. For each model it
prints, per forward pass:
- `wall`: the median forward, as bench times it; `kernels`: the sum of the GPU kernels' own times, and how many were
  launched; `busy` = kernels / wall (well under 100%: the GPU waits for the CPU, which launches or synchronises);
- the kernels that took the most time (name, ms per forward, calls per forward);
- `parts`: each part of the layers (summed over them) timed between two CUDA events, so a part's time includes the
  GPU waiting for the CPU within it: the products by projection, the attention's own pieces, the feed-forward.

    python examples/gpu_profile.py [MODELS] [LENGTH]     (defaults: bert,sparse_longformer:flex,
                                                          sparse_longformer:blocked and 8192; about 40 s on an H200)

Bench's settings: 768 wide, 12 layers, 12 heads, batch 4, bfloat16, attention dropout 0, [CLS] + 128 scattered
global tokens. `DEVICE=cpu SIZE=64,2,2 BATCH=1` runs it small on a CPU (a dry run: CPU operator times).
"""

import os
import re
import statistics
import sys
import time

import torch
from torch.profiler import ProfilerActivity, profile

from hf_longdoc.experiments.bench import scattered_global_mask, takes_global_attention_mask
from hf_longdoc.experiments.bench_models import BenchModel

TOP = int(os.environ.get("TOP", 14))


def synchronize(device):
    if device.type == "cuda":
        torch.cuda.synchronize()


def build(name, length, device, dtype):
    hidden, layers, heads = (int(x) for x in os.environ.get("SIZE", "768,12,12").split(","))
    batch = int(os.environ.get("BATCH", 4))
    model = BenchModel.parse(name).build(hidden, layers, heads, length, attention_dropout=0.0)
    model = model.to(device=device, dtype=dtype).eval()
    ids = torch.randint(5, 8000, (batch, length), device=device)
    inputs = {"input_ids": ids, "attention_mask": torch.ones_like(ids)}
    if takes_global_attention_mask(model):
        inputs["global_attention_mask"] = scattered_global_mask(ids, 128)
    return model, inputs


def median_ms(forward, device, repeats=5):
    times = []
    for _ in range(repeats):
        synchronize(device)
        start = time.perf_counter()
        forward()
        synchronize(device)
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000


def own_time(event, device):
    """An operator's or kernel's own time in µs on `device` (the attribute's name differs across torch versions)."""
    if device.type != "cuda":
        return event.self_cpu_time_total
    return getattr(event, "self_device_time_total", None) or getattr(event, "self_cuda_time_total", 0)


# The parts `parts` times: modules by the last part of their name, and the sparse attention's methods.
PART_MODULES = ("embeddings", "self", "query", "key", "value", "query_global", "key_global", "value_global",
                "attention.output", "intermediate", "output")
PART_METHODS = ("flex_window", "blocked_window", "global_rows", "global_attention")


class Stopwatch:
    """Start and end marks of each part: CUDA events on a GPU (read once the forward has finished), the clock on a
    CPU."""

    def __init__(self, device):
        self.device, self.marks = device, {}

    def mark(self):
        if self.device.type != "cuda":
            return time.perf_counter()
        event = torch.cuda.Event(enable_timing=True)
        event.record()
        return event

    def add(self, part, start, end):
        self.marks.setdefault(part, []).append((start, end))

    def totals_ms(self):
        if self.device.type != "cuda":
            return {part: sum(e - s for s, e in pairs) * 1000 for part, pairs in self.marks.items()}
        return {part: sum(s.elapsed_time(e) for s, e in pairs) for part, pairs in self.marks.items()}


def part_of(name):
    """The part a module of this name is (PART_MODULES), or None."""
    if re.search(r"layer\.\d+\.output$", name):
        return "output"
    if name.endswith(".attention.output"):
        return "attention.output"
    if name.endswith(".attention.self"):
        return "self"
    last = name.rsplit(".", 1)[-1]
    return last if last in PART_MODULES and last not in ("self", "output") else None


def watch_parts(model, watch):
    """Hooks and wrappers that mark the start and end of every part of every layer (PART_MODULES, PART_METHODS)."""
    for name, module in model.named_modules():
        part = part_of(name)
        if part is not None:
            module.register_forward_pre_hook(lambda m, args: setattr(m, "_mark", watch.mark()))
            module.register_forward_hook(lambda m, args, out, part=part: watch.add(part, m._mark, watch.mark()))
        for method in PART_METHODS:
            if hasattr(module, method):
                setattr(module, method, timed(getattr(module, method), method, watch))


def timed(function, part, watch):
    """`function`, its calls marked as `part`."""
    def wrapped(*args, **kwargs):
        start = watch.mark()
        result = function(*args, **kwargs)
        watch.add(part, start, watch.mark())
        return result
    return wrapped


def time_parts(model, forward, device, passes=3):
    """Each part's time per forward (PART_MODULES, PART_METHODS), summed over the layers."""
    watch = Stopwatch(device)
    watch_parts(model, watch)
    forward()  # the hooks' first pass
    synchronize(device)
    watch.marks = {}
    for _ in range(passes):
        start = watch.mark()
        forward()
        watch.add("forward", start, watch.mark())
    synchronize(device)
    totals = watch.totals_ms()
    print("  parts (ms per forward, summed over layers; between CUDA events):")
    for part in PART_MODULES + PART_METHODS:
        if part in totals:
            print(f"  {totals[part] / passes:8.2f} ms {len(watch.marks[part]) // passes:4d}x  {part}")
    top = sum(totals.get(p, 0) for p in ("embeddings", "self", "attention.output", "intermediate", "output"))
    print(f"  {(totals['forward'] - top) / passes:8.2f} ms        the rest of the forward "
          f"({totals['forward'] / passes:.2f} ms with the hooks) outside the parts")


def profile_model(name, length, device, dtype, passes=3):
    model, inputs = build(name, length, device, dtype)
    with torch.inference_mode():
        def forward():
            return model(**inputs)

        for _ in range(2):  # compilation (FlexAttention, the S-LSTM's step) and warm-up
            forward()
        wall = median_ms(forward, device)
        activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
        with profile(activities=activities) as prof:
            for _ in range(passes):
                forward()
            synchronize(device)
    if device.type == "cuda":  # the kernels themselves: the events that ran on the GPU
        events = [e for e in prof.key_averages() if e.device_type == torch.autograd.DeviceType.CUDA]
    else:  # operators of the top level only would double count; their own times do not
        events = list(prof.key_averages())
    total = sum(own_time(e, device) for e in events) / 1000 / passes
    launches = sum(e.count for e in events) / passes
    print(f"\n== {name} at {length} ids: wall {wall:.1f} ms, kernels {total:.1f} ms ({launches:.0f} launched), "
          f"busy {100 * total / wall:.0f}%")
    for event in sorted(events, key=lambda e: own_time(e, device), reverse=True)[:TOP]:
        print(f"  {own_time(event, device) / 1000 / passes:8.2f} ms {event.count / passes:6.0f}x  {event.key[:90]}")
    with torch.inference_mode():
        time_parts(model, forward, device)


def main():
    models = (sys.argv[1] if len(sys.argv) > 1 else "bert,sparse_longformer:flex,sparse_longformer:blocked")
    length = int(sys.argv[2]) if len(sys.argv) > 2 else 8192
    device = torch.device(os.environ.get("DEVICE", "cuda"))
    if device.type == "cuda" and not torch.cuda.is_available():
        sys.exit("No CUDA GPU here; DEVICE=cpu SIZE=64,2,2 BATCH=1 runs a small dry run.")
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    import transformers

    print(f"torch {torch.__version__}, transformers {transformers.__version__}, "
          f"{torch.cuda.get_device_name() if device.type == 'cuda' else 'cpu'}, {dtype}")
    for name in models.split(","):
        try:
            profile_model(name, length, device, dtype)
        except Exception as error:  # one model's failure must not hide the others' profiles
            print(f"\n== {name}: failed ({type(error).__name__}: {str(error)[:200]})")
        if device.type == "cuda":  # the model is gone with its call: its memory goes back before the next
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
