"""Where a forward pass spends its time on a GPU, by kernel, for a few bench models (issue 53).

At 8,192 tokens on an H200 the sparse Longformer's `flex` forward took 38.1 ms where its parts add up to about 25:
its matrix products (≈10 ms, BERT's and the global keys and values), twelve FlexAttention calls (0.85 ms each,
`examples/gpu_flex_mask.py`) and BERT's element-wise work. This script says where the rest goes. For each model it
prints, per forward pass:
- `wall`: the median forward, as bench times it; `kernels`: the sum of the GPU kernels' own times, and how many were
  launched; `busy` = kernels / wall (well under 100%: the GPU waits for the CPU, which launches or synchronises);
- the kernels that took the most time (name, ms per forward, calls per forward).

    python examples/gpu_profile.py [MODELS] [LENGTH]     (defaults: bert,sparse_longformer:flex,
                                                          sparse_longformer:blocked and 8192; about 40 s on an H200)

Bench's settings: 768 wide, 12 layers, 12 heads, batch 4, bfloat16, attention dropout 0, [CLS] + 128 scattered
global tokens. `DEVICE=cpu SIZE=64,2,2 BATCH=1` runs it small on a CPU (a dry run: CPU operator times).
"""

import os
import statistics
import sys
import time

import torch
from torch.profiler import ProfilerActivity, profile

from hf_longdoc.experiments.bench import BenchModel, scattered_global_mask, takes_global_attention_mask

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
