"""`hf-longdoc bench`: forward time and peak memory per document length, next to a Hugging Face baseline.

Every model is built at the same width and depth (`hidden_size`, `num_layers`) through its family's `from_size` and
timed in the same process: the median of `repeats` forward passes after `warmup` passes, under `torch.inference_mode`
(with `backward=True`: training steps, forward + backward of the loss). Models whose forward takes a
`global_attention_mask` (Transformers' `longformer`, the sparse-map Longformer) get the same `window` and the same
`num_global` scattered global tokens ([CLS] plus seeded random positions). Models over segments get segments of
`segment_length` tokens and as many as each length needs, trained with `gradient_mode`. A family's reference variant
(its registry `bench_reference`: the sparse Longformer on Transformers' attention, the segment LM's Base) and every
baseline in the run give each row a ratio column. Peak memory: see `measure.PeakMemory`.

The first (warm-up) pass is timed apart: `first_seconds`, and `compile_seconds` = first - median, the one-off cost of
what compiles on first use (FlexAttention, the S-LSTM's step, ModernBERT's flex_attention). A model that runs out of
GPU memory at a length gets a row with `oom` set (no time), and the run goes on. A model that says which attention
backend it ran (`attention_backend_for`) has it in its row's `backend`.
"""

import copy
import inspect
import os
import re

import torch

from ..modeling import FAMILIES
from ..training.feasibility import check_fits, family_squares
from ..utils.parsing import settings_of
from .baselines import baseline_attention, check_attention, square_tensors
from .bench_models import BenchModel
from .measure import time_forward
from .profiling import (
    fit_cost,
    kernel_efficiency,
    matmul_roofline,
    read_documents,
    selection_cost,
    tokenizer_throughput,
)
from .report import bench_output_paths, format_table, write_bench_outputs
from .settings import BenchSettings


def takes_global_attention_mask(model):
    return "global_attention_mask" in inspect.signature(model.forward).parameters


def scattered_global_mask(input_ids, num_global, seed=0):
    """[CLS] plus `num_global` distinct random positions per row: the global tokens every Longformer-type model gets."""
    generator = torch.Generator().manual_seed(seed)
    b, n = input_ids.shape
    mask = torch.zeros(b, n, dtype=torch.long)
    for row in range(b):
        mask[row, torch.randperm(n - 1, generator=generator)[: min(num_global, n - 1)] + 1] = 1
    mask[:, 0] = 1
    return mask.to(input_ids.device)


def check_bench_fits(entries, lengths, batch_size, backward, device, config_overrides=None, attentions=None,
                     dtype=torch.float32, **sizes):
    """A ValueError before any timing when a model at the longest length cannot fit in memory
    (`feasibility.check_fits`), naming the model, the estimate and the fix. A baseline's estimate includes the
    (n x n) tensors its attention builds (`baselines.square_tensors`; `attentions`: each baseline's implementation,
    as `baseline_attention` resolved it), in `dtype`."""
    config_overrides, length, attentions = config_overrides or {}, max(lengths), attentions or {}
    for entry in entries:
        with torch.device("meta"):  # one layer, to learn the model's class and config without building them all
            model = entry.build(max_length=length, **{**sizes, "num_layers": 1}, **config_overrides.get(entry.name, {}))
        config = copy.deepcopy(model.config)
        config.num_hidden_layers = sizes.get("num_layers", config.num_hidden_layers)
        square = None
        if entry.family is not None:
            square = family_squares(entry.family.square_bytes(config, batch_size, dtype.itemsize))
        else:  # its config as built: some models fill per-layer lists into it (Longformer)
            config = entry.baseline_config(sizes["hidden_size"], sizes["num_layers"], sizes["num_heads"], length,
                                           window=sizes.get("window", 512))
            attention = attentions.get(entry.name) or baseline_attention(entry.baseline, "auto", device, dtype)
            square = square_tensors(entry.baseline, attention, batch_size, getattr(config, "num_attention_heads", 1),
                                    dtype.itemsize)
        mode = "training steps" if backward else "forward passes"
        check_fits(type(model), config, batch_size, length, backward,
                   f"Bench of {entry.name} at {length:,} ids ({mode})",
                   "--lengths, --batch-size, --hidden-size or --num-layers", device, square)


def bench_device(device):
    """`device` as a torch.device (default: cuda if available, else cpu), or a ValueError naming the fix."""
    try:
        device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    except RuntimeError:
        raise ValueError(f"`device` (--device) {device!r} is not a torch device; use cpu, cuda or cuda:N.") from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"`device` (--device) is {device} but this torch sees no CUDA GPU; use cpu.")
    return device


def run_bench(settings=None, /, progress=print, **changes):
    """Time every model of `settings` (a `BenchSettings`) at every length; returns rows of dicts (model, length,
    seconds, peak_mib, ratio fields; a baseline's rows also name its `attention` implementation, a model's row at the
    roofline length its `matmul_roofline` under `roofline_*` keys). Keyword arguments instead (or as well) set its
    fields (`run_bench(models=["slstm", "bert"], lengths=[1024])`). With an `output` prefix, the rows are also written
    to `<output>.csv` and `<output>.png`. `progress` receives a line per measurement."""
    settings = settings_of(BenchSettings, settings, changes, "run_bench()",
                           "`run_bench(models=['slstm', 'bert'], lengths=[1024])`")
    entries = settings.check()
    lengths, batch_size = tuple(settings.lengths), settings.batch_size
    repeats, warmup, seed, backward = settings.repeats, settings.warmup, settings.seed, settings.backward
    num_global, roofline, roofline_length = settings.num_global, settings.roofline, settings.roofline_length
    sizes, config_overrides = settings.sizes(), settings.config_overrides or {}
    device = bench_device(settings.device)
    if settings.dtype == "float16" and device.type == "cpu":  # emulated there: times that say nothing of a GPU's
        raise ValueError("`dtype` (--dtype) float16 has no fast CPU kernels (its times and roofline would be "
                         "meaningless); on the CPU use bfloat16 or float32, or pass --device cuda.")
    torch_dtype = getattr(torch, settings.dtype)
    check_attention(settings.attention, device, torch_dtype)
    attentions = {entry.name: baseline_attention(entry.baseline, settings.attention, device, torch_dtype)
                  for entry in entries if entry.family is None}
    check_bench_fits(entries, lengths, batch_size, backward, device, config_overrides, attentions, torch_dtype,
                     **sizes)
    torch.manual_seed(seed)
    rows = []
    baseline = next((entry for entry in entries if entry.family is None), None)
    packing = {}  # input ids per encoder position of each model
    roofline_length = max(lengths) if roofline_length is None else roofline_length

    def model_and_inputs(entry, length, say=progress):
        """The model of `entry` at `length`, built where it runs (initialising a base-size model on the CPU is slow),
        with random input ids of whole positions and, for global attention, its scattered global tokens."""
        settings = dict(attention=attentions[entry.name]) if entry.family is None else {}
        with torch.device(device):
            model = entry.build(max_length=length, **sizes, **settings, **config_overrides.get(entry.name, {}))
        model = model.to(device, torch_dtype).eval()
        packing[entry.name] = per = entry.ids_per_position(model.config)
        ids = whole_positions(length, per, entry.name, say)
        low = 4 if per > 1 else 5  # element ids are bytes + 4
        input_ids = torch.randint(low, min(model.config.vocab_size, 8000), (batch_size, ids), device=device)
        inputs = {}
        if takes_global_attention_mask(model):
            inputs["global_attention_mask"] = scattered_global_mask(input_ids, num_global, seed)
        return model, ids, input_ids, inputs

    warm_up_the_process(model_and_inputs, entries[0], min(*lengths, WARM_UP_LENGTH), backward, device)
    for entry in entries:
        for length in lengths:  # one model per length: positions (and a segment LM's m) follow the length
            try:
                model, ids, input_ids, inputs = model_and_inputs(entry, length)
                rows.append(_measure(model, entry.name, input_ids, repeats, warmup, progress, backward, **inputs))
            except torch.OutOfMemoryError:
                model = input_ids = inputs = None
                release_gpu_memory(device)
                progress(f"{entry.name:>16} {length:>6} ids: out of GPU memory (OOM); going on")
                rows.append({"model": entry.name, "length": length, "seconds": None, "peak_mib": None, "oom": True})
                continue
            if ids != length:  # compared with the other models at the length asked for
                rows[-1].update(length=length, ids=ids)
            if entry.family is None:
                rows[-1]["attention"] = model.config._attn_implementation
            if hasattr(model, "attention_backend_for"):  # the backend `auto` chose on this device, in this mode
                rows[-1]["backend"] = model.attention_backend_for(training=backward)
            if roofline and not backward and length == roofline_length:
                # the forward timed again beside its products, both without the memory sampler of `_measure`
                # (a thread waking every millisecond, on a trimmed heap), which would bias the ratio against it
                try:
                    line = matmul_roofline(model, dict(input_ids=input_ids, attention_mask=torch.ones_like(input_ids),
                                                       **inputs), repeats, warmup)
                except NotImplementedError as error:  # an operator the recorder cannot look into (flex_attention)
                    operator = re.search(r"HigherOrderOperator (\w+)", str(error))
                    why = (f"its matrix products run inside `{operator.group(1)}`, which the recorder cannot look "
                           "into" if operator else str(error).splitlines()[0][:200])
                    progress(f"{entry.name}: no roofline line: {why}")
                except torch.OutOfMemoryError:
                    release_gpu_memory(device)
                    progress(f"{entry.name}: no roofline line: out of GPU memory")
                else:
                    rows[-1].update({"roofline_" + key: value for key, value in line.items()})
            model = input_ids = inputs = None
            release_gpu_memory(device)
    # Models that read v ids per position (elementwise: `length` bytes as length / v materials): also time the
    # baseline at length / v tokens (the subword-level cost of the same number of positions).
    v = max(packing.values())
    if baseline and v > 1:
        with torch.device(device):
            model = baseline.build(max_length=max(lengths), attention=attentions[baseline.name], **sizes)
        model = model.to(device, torch_dtype).eval()
        for length in lengths:
            input_ids = torch.randint(5, 8000, (batch_size, max(length // v, 1)), device=device)
            try:
                row = _measure(model, f"{baseline.name}@length/v", input_ids, repeats, warmup, progress, backward)
            except torch.OutOfMemoryError:
                release_gpu_memory(device)
                row = {"model": f"{baseline.name}@length/v", "seconds": None, "peak_mib": None, "oom": True}
            row["length"], row["attention"] = length, model.config._attn_implementation
            rows.append(row)
        model = None
        release_gpu_memory(device)
    for entry in entries:
        if (reference_kind := entry.reference()) is None:
            continue
        kind, memory = reference_kind
        reference = {row["length"]: row for row in rows if row["model"] == entry.name and not row.get("oom")}
        for row in rows:
            base = reference.get(row["length"]) if not row.get("oom") else None
            if kind == "time":
                row["time_vs_" + entry.name] = row["seconds"] / base["seconds"] if base else None
            else:
                row["speedup_vs_" + entry.name] = base["seconds"] / row["seconds"] if base else None
            if memory:
                row["memory_vs_" + entry.name] = (row["peak_mib"] / base["peak_mib"]
                                                  if base and base["peak_mib"] > 0 else None)
    if baseline:
        packed = {row["length"]: row for row in rows
                  if row["model"].startswith(baseline.name + "@") and not row.get("oom")}
        for row in rows:
            if packed:
                same_positions = (packed.get(row["length"]) if packing.get(row["model"], 1) > 1 and not row.get("oom")
                                  else None)
                row["time_vs_" + baseline.name + "_at_length_over_v"] = (
                    row["seconds"] / same_positions["seconds"] if same_positions else None)
    if settings.output is not None:
        write_bench_outputs(rows, settings.output)
    return rows


def summary_lines(settings, rows):
    """What a run of `settings` measured, in words: its sizes and mode, the baselines' attention, the table of `rows`,
    the files written and each model's roofline line."""
    s = settings
    lines = [f"hidden_size={s.hidden_size} layers={s.num_layers} heads={s.num_heads} batch={s.batch_size} "
             f"dtype={s.dtype}; {'training steps' if s.backward else 'forward passes'}, median of {s.repeats} "
             f"after {s.warmup} warm-up",
             f"Models with global attention: window {s.window}, [CLS] + {s.num_global} scattered global tokens "
             f"(all tokens up to length {s.num_global + 1}); models over segments: segments of {s.segment_length} "
             f"tokens, m = length / {s.segment_length - 2}, gradient mode {s.gradient_mode}"]
    attentions = {row["model"]: row["attention"] for row in rows if "attention" in row}
    if attentions:
        lines.append("Baselines' attention: " + ", ".join(f"{model} {kind}" for model, kind in attentions.items()))
    lines.append(format_table(rows))
    if s.output is not None:
        lines.append("Wrote {} and {}".format(*bench_output_paths(s.output)))
    return lines + roofline_lines(rows)


def roofline_lines(rows):
    """One line per model measured with `matmul_roofline`: how close its forward runs to the speed of its own matrix
    products alone."""
    lines = []
    for row in rows:
        if "roofline_efficiency" not in row:
            continue
        if row.get("roofline_measurement_error"):
            lines.append(f"{row['model']}: roofline at {row['length']} ids: efficiency above 100% is a measurement "
                         f"error, not reported: {row['roofline_measurement_error']}; run it again on idle cores")
            continue
        lines.append(f"{row['model']}: roofline at {row['length']} ids: {row['roofline_gflop']:.2f} GFLOP of matrix "
                     f"products in {row['roofline_products']} calls; forward {row['roofline_forward_ms']:.1f} ms = "
                     f"{row['roofline_forward_gflops']:.1f} GFLOP/s, the same products alone "
                     f"{row['roofline_matmul_ms']:.1f} ms = {row['roofline_matmul_gflops']:.1f} GFLOP/s; "
                     f"efficiency {row['roofline_efficiency']:.0%}")
    return lines


def micro_benchmarks(settings=None, /, progress=print, **changes):
    """Each family of `settings`' models, at the longest of its lengths: its hot kernel against matmuls of the same
    shapes (a family with `has_profile`), and for forward passes the cost of choosing global tokens (a family with
    statistics). Returns the measurements (`kernel_efficiency`'s and `selection_cost`'s dicts), each also said to
    `progress` as a line."""
    s = settings_of(BenchSettings, settings, changes, "micro_benchmarks()", "`micro_benchmarks(models=['slstm'])`")
    length, found = max(s.lengths), []
    families = dict.fromkeys(entry.family for entry in map(BenchModel.parse, s.models) if entry.family is not None)
    for family in families:
        if family.has_statistics and not s.backward:
            cost = selection_cost(family, s.hidden_size, s.num_layers, s.num_heads, length, s.batch_size, s.window,
                                  s.num_global, s.repeats, s.device)
            progress(f"{family.name}: global-token selection at {cost['length']} tokens ({cost['pmi_pairs']} PMI "
                     f"pairs): tfidf {cost['tfidf_ms']:.1f} ms = {cost['tfidf_share']:.1%}, pmi {cost['pmi_ms']:.1f} "
                     f"ms = {cost['pmi_share']:.1%} of the forward pass ({cost['forward_ms']:.1f} ms)")
            found.append({"family": family.name, **cost})
        if family.has_profile:
            step = kernel_efficiency(family, s.hidden_size, length=length, batch_size=s.batch_size,
                                     repeats=s.repeats, device=s.device)
            progress(f"{family.name}: {step['kernel']} at {step['length']} tokens, hidden {step['hidden_size']}: "
                     f"{step['kernel_ms']:.1f} ms = {step['kernel_gflops']:.1f} GFLOP/s; torch.matmul of the same "
                     f"shapes {step['matmul_ms']:.1f} ms = {step['matmul_gflops']:.1f} GFLOP/s; efficiency "
                     f"{step['efficiency']:.0%}")
            found.append({"family": family.name, **step})
    return found


def selection_fit_costs(documents, length, progress=print):
    """For each family that fits selection statistics: the seconds to fit them (TF-IDF + PMI) on `documents`
    documents of `length` ids (`profiling.fit_cost`), each also said to `progress` as a line."""
    costs = []
    for family in FAMILIES.values():
        if not family.has_statistics:
            continue
        cost = fit_cost(family, documents, length)
        progress(f"{family.name}: fitted TF-IDF + PMI on {cost['documents']} documents of {cost['length']} tokens "
                 f"(vocabulary {cost['vocab_size']}) in {cost['seconds']:.1f} s: {cost['pairs_counted']} pairs "
                 f"counted, {cost['distinct_pairs']} distinct, {cost['pairs_kept']} kept"
                 + (f"; {cost['warning']}" if "warning" in cost else ""))
        costs.append({"family": family.name, **cost})
    return costs


def tokenizer_speeds(path, megabytes=10.0, elements_per_material=4, progress=print, option="--tokenizers"):
    """Each tokenizer's throughput on the .txt/.jsonl file at `path`, repeated to `megabytes` MB
    (`profiling.tokenizer_throughput`; best of 3), also said to `progress`. `option` names `path` in errors."""
    texts = read_documents(path, megabytes, option=option)
    rows = tokenizer_throughput(texts, elements_per_material=elements_per_material)
    progress(f"{rows[0]['megabytes']:.1f} MB of {os.path.basename(path)} ({len(texts)} documents), best of 3:")
    for row in rows:
        progress(f"  {row['tokenizer']:>26}: {row['mb_per_s']:8.1f} MB/s  ({row['seconds']:.2f} s)")
    return rows


def whole_positions(length, per_position, name, progress):
    """`length` ids rounded down to whole positions of `per_position` ids (an elementwise model reads whole
    materials of v bytes), and said when that changes it."""
    ids = max(per_position, length - length % per_position)
    if ids != length:
        progress(f"{name}: {length} ids are not whole materials of {per_position}; timing {ids} ids")
    return ids


WARM_UP_LENGTH = 512  # at most: short enough for an eager pass of any model (flex_attention eagerly is dense)


def warm_up_the_process(model_and_inputs, entry, length, backward, device):
    """One pass of the first model at a short length, eagerly and unmeasured: what a process allocates once (the
    thread pools, the math library's buffers) would otherwise count in the first model's peak (on 2 CPU cores, 13.6
    MiB for a contextualizer at 1,024 ids measured first, 2.1 after the warm-up). A pass that runs out of memory is
    left to the measurement, which reports it."""
    try:
        model, _, input_ids, inputs = model_and_inputs(entry, length, say=lambda message: None)
        with torch.compiler.set_stance("force_eager"):  # what compiles on first use stays in the first timed pass
            time_forward(model, input_ids, torch.ones_like(input_ids), repeats=1, warmup=0, backward=backward,
                         **inputs)
    except torch.OutOfMemoryError:
        pass
    model = input_ids = inputs = None
    release_gpu_memory(device)


def release_gpu_memory(device):
    """Give the CUDA caching allocator's free blocks back, so the next model's peak starts from what it holds."""
    if torch.device(device).type == "cuda":
        torch.cuda.empty_cache()


def _measure(model, name, input_ids, repeats, warmup, progress, backward=False, **inputs):
    timing = time_forward(model, input_ids, torch.ones_like(input_ids), repeats, warmup, backward, **inputs)
    length = input_ids.shape[1]
    compile_seconds = max(0.0, timing.first_seconds - timing.seconds) if timing.first_seconds is not None else None
    progress(f"{name:>16} {length:>6} ids: {timing.seconds * 1000:9.1f} ms  {timing.peak / 2**20:8.1f} MiB"
             + (f"  (first pass {timing.first_seconds:.1f} s)" if timing.first_seconds is not None else ""))
    return {"model": name, "length": length, "seconds": timing.seconds, "peak_mib": timing.peak / 2**20,
            "first_seconds": timing.first_seconds, "compile_seconds": compile_seconds}
