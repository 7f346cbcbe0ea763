"""`hf-longdoc bench`: forward time and peak memory per document length, next to a Hugging Face baseline.

Every model is built at the same width and depth (`hidden_size`, `num_layers`) through its family's `from_size` and
timed in the same process: the median of `repeats` forward passes after `warmup` passes, under `torch.inference_mode`
(with `backward=True`: training steps, forward + backward of the loss). Models whose forward takes a
`global_attention_mask` (Transformers' `longformer`, the sparse-map Longformer) get the same `window` and the same
`num_global` scattered global tokens ([CLS] plus seeded random positions). Models over segments get segments of
`segment_length` tokens and as many as each length needs, trained with `gradient_mode`. A family's reference variant
(its registry `bench_reference`: the sparse Longformer on Transformers' attention, the segment LM's Base) and every
baseline in the run give each row a ratio column. Peak memory: see `measure.PeakMemory`.
"""

import inspect

import torch

from ..modeling import FAMILIES, resolve
from .baselines import BASELINES, build_baseline, parse_baseline
from .measure import time_forward


def build_bench_model(name, hidden_size, num_layers, num_heads, max_length, vocab_size=8000, window=512,
                      attention_dropout=None, segment_length=256, gradient_mode="paper", **overrides):
    """A randomly initialised classification model `name` (a family, `family:variant`, or a baseline) of the given
    width and depth. `attention_dropout` (Transformer models only) overrides their attention-probability dropout;
    `overrides` are config settings of a family model."""
    baseline = parse_baseline(name)
    if baseline is not None:
        kind, tokens = baseline
        return build_baseline(kind, hidden_size, num_layers, num_heads, tokens or max_length, attention_window=window,
                              attention_dropout=attention_dropout, vocab_size=vocab_size, num_labels=2,
                              pad_token_id=0)
    family, variant = resolve(name)
    size = family_size(hidden_size, num_layers, num_heads, max_length, window, segment_length, attention_dropout,
                       gradient_mode)
    config = family.build_config(size, vocab_size=vocab_size, num_labels=2, pad_token_id=0, **variant, **overrides)
    return family.classification_class(config)


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


def references(models):
    """(model, "speedup" | "time", with memory ratio) for every model the others are compared with: the baselines
    and each family's reference variant."""
    found = []
    for name in models:
        baseline = parse_baseline(name)
        if baseline is not None:
            found.append((name, "speedup", BASELINES[baseline[0]].sparse))
            continue
        family, _ = resolve(name)
        if family.bench_reference and name.partition(":")[2] == family.bench_reference[0]:
            found.append((name, family.bench_reference[1], True))
    return found


def check_models(models, lengths, config_overrides=None, **build_arguments):
    """Every name and size checked before any timing: unknown models and invalid configs fail here."""
    if not models:
        raise ValueError("Give at least one model to `models` (`--models`).")
    if not lengths or any(length < 8 for length in lengths):
        raise ValueError(f"`lengths` must all be at least 8 tokens, got {list(lengths)}.")
    window = build_arguments.get("window")
    if window is not None and (isinstance(window, bool) or not isinstance(window, int) or window <= 0 or window % 2):
        raise ValueError(f"`window` (--window) must be a positive even integer, got {window!r}.")
    for name in models:
        baseline = parse_baseline(name)
        if baseline is not None and baseline[1] is not None:
            raise ValueError(f"Bench times every model at every length; use `bert`, not {name!r}.")
        if baseline is None:
            family_name = name.partition(":")[0]
            if family_name.lower().replace("-", "_") not in FAMILIES:
                known = ", ".join(sorted(FAMILIES) + list(BASELINES))
                raise ValueError(f"Unknown model {name!r} for bench; choose from {known}.")
            family, variant = resolve(name)
            family.build_config(family_size(max_length=min(lengths), **build_arguments), num_labels=2, **variant,
                                **(config_overrides or {}).get(name, {}))


def family_size(hidden_size, num_layers, num_heads, max_length, window=None, segment_length=None,
                attention_dropout=None, gradient_mode=None):
    """The bench's sizing options under `from_size`'s names (each family takes the ones that apply to it)."""
    return dict(hidden_size=hidden_size, num_layers=num_layers, num_heads=num_heads, max_length=max_length,
                attention_window=window, segment_length=segment_length, attention_dropout=attention_dropout,
                gradient_mode=gradient_mode)


def run_bench(models=("contextualizer", "bert"), lengths=(512, 1024, 2048, 4096, 8192), batch_size=1,
              hidden_size=256, num_layers=4, num_heads=4, repeats=3, warmup=1, device=None, dtype="float32",
              seed=0, progress=print, window=512, num_global=128, backward=False, attention_dropout=None,
              segment_length=256, gradient_mode="paper", config_overrides=None):
    """Time every model at every length; returns rows of dicts (model, length, seconds, peak_mib, ratio fields).
    `config_overrides` maps a model name to config settings of that family model."""
    sizes = dict(hidden_size=hidden_size, num_layers=num_layers, num_heads=num_heads, window=window,
                 attention_dropout=attention_dropout, segment_length=segment_length, gradient_mode=gradient_mode)
    config_overrides = config_overrides or {}
    check_models(models, lengths, config_overrides, **sizes)
    if isinstance(repeats, bool) or not isinstance(repeats, int) or repeats < 1:
        raise ValueError(f"`repeats` (--repeats) must be a positive integer, got {repeats!r}.")
    device = bench_device(device)
    torch_dtype = getattr(torch, dtype)
    torch.manual_seed(seed)
    rows = []
    baseline = next((name for name in models if parse_baseline(name) is not None), None)
    packing = {}  # input ids per encoder position of each model
    for name in models:
        for length in lengths:  # one model per length: positions (and a segment LM's m) follow the length
            model = build_bench_model(name, max_length=length, **sizes, **config_overrides.get(name, {}))
            model = model.to(device, torch_dtype).eval()
            packing[name] = ids_per_position(name, model.config)
            low = 4 if packing[name] > 1 else 5  # element ids are bytes + 4
            input_ids = torch.randint(low, min(model.config.vocab_size, 8000), (batch_size, length), device=device)
            inputs = {}
            if takes_global_attention_mask(model):
                inputs["global_attention_mask"] = scattered_global_mask(input_ids, num_global, seed)
            rows.append(_measure(model, name, input_ids, repeats, warmup, progress, backward, **inputs))
            del model
    # Models that read v ids per position (elementwise: `length` bytes as length / v materials): also time the
    # baseline at length / v tokens (the subword-level cost of the same number of positions).
    v = max(packing.values())
    if baseline and v > 1:
        model = build_bench_model(baseline, max_length=max(lengths), **sizes).to(device, torch_dtype).eval()
        for length in lengths:
            input_ids = torch.randint(5, 8000, (batch_size, max(length // v, 1)), device=device)
            row = _measure(model, f"{baseline}@length/v", input_ids, repeats, warmup, progress, backward)
            row["length"] = length
            rows.append(row)
        del model
    for reference_name, kind, memory in references(models):
        reference = {row["length"]: row for row in rows if row["model"] == reference_name}
        for row in rows:
            base = reference.get(row["length"])
            if kind == "time":
                row["time_vs_" + reference_name] = row["seconds"] / base["seconds"] if base else None
            else:
                row["speedup_vs_" + reference_name] = base["seconds"] / row["seconds"] if base else None
            if memory:
                row["memory_vs_" + reference_name] = (row["peak_mib"] / base["peak_mib"]
                                                      if base and base["peak_mib"] > 0 else None)
    if baseline:
        packed = {row["length"]: row for row in rows if row["model"].startswith(baseline + "@")}
        for row in rows:
            if packed:
                same_positions = packed.get(row["length"]) if packing.get(row["model"], 1) > 1 else None
                row["time_vs_" + baseline + "_at_length_over_v"] = (
                    row["seconds"] / same_positions["seconds"] if same_positions else None)
    return rows


def bench_device(device):
    """`device` as a torch.device (default: cuda if available, else cpu), or a ValueError naming the fix."""
    try:
        device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    except RuntimeError:
        raise ValueError(f"`device` (--device) {device!r} is not a torch device; use cpu, cuda or cuda:N.") from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"`device` (--device) is {device} but this torch sees no CUDA GPU; use cpu.")
    return device


def ids_per_position(name, config):
    if parse_baseline(name) is not None:
        return 1
    family, _ = resolve(name)
    return family.ids_per_position(config)


def _measure(model, name, input_ids, repeats, warmup, progress, backward=False, **inputs):
    seconds, peak = time_forward(model, input_ids, torch.ones_like(input_ids), repeats, warmup, backward, **inputs)
    length = input_ids.shape[1]
    progress(f"{name:>16} {length:>6} ids: {seconds * 1000:9.1f} ms  {peak / 2**20:8.1f} MiB")
    return {"model": name, "length": length, "seconds": seconds, "peak_mib": peak / 2**20}
