"""`hf-longdoc bench`: forward time and peak memory per document length, next to a Hugging Face baseline.

Every model is built at the same width and depth (`hidden_size`, `num_layers`) and timed in the same process: the median
of `repeats` forward passes after `warmup` passes, under `torch.inference_mode` (with `backward=True`: training steps,
forward + backward of the loss). Longformer-type models (`longformer`, Transformers' own; `sparse_longformer`, the
`blocked` backend; `sparse_longformer:longformer`, our model on Transformers' attention) get the same `window` and the
same `num_global` scattered global tokens ([CLS] plus seeded random positions), given as `global_attention_mask`.
Segment LMs (`segment_lm:<variant>`, base | cat | rnn | att | att_ablated) get a BERT backbone of the same size over
segments of `segment_length` tokens and m = ⌈length / (segment_length − 2)⌉ segments per length, trained with
`gradient_mode`; with `segment_lm:base` in the run, every row gets its time and memory relative to it (Table 3).
Peak memory is `torch.cuda.max_memory_allocated` on GPU and, on CPU, the peak resident-set growth during the passes,
sampled every millisecond from /proc (an approximation that catches every allocation that lives longer than 1 ms).
"""

import csv
import ctypes
import os
import statistics
import threading
import time

import torch
from transformers import (
    BertConfig,
    BertForSequenceClassification,
    LongformerConfig,
    LongformerForSequenceClassification,
    RobertaConfig,
    RobertaForSequenceClassification,
)

from .modeling import FAMILIES, get_family
from .modeling.segment.configuration_segment import VARIANTS as SEGMENT_VARIANTS

BASELINES = ("bert", "roberta", "longformer")
LONGFORMER_TYPES = ("longformer", "sparse_longformer")


SEGMENT_LM = "segment_lm"


def build_bench_model(name, hidden_size, num_layers, num_heads, max_length, vocab_size=8000, window=512,
                      num_global=128, attention_dropout=None, segment_length=256, gradient_mode="paper"):
    """A randomly initialised classification model `name` (a family, `family:variant`, or a baseline) of the given
    width and depth. `attention_dropout` (Transformer models only) overrides their attention-probability dropout."""
    family_name, _, variant = name.partition(":")
    dropout = {} if attention_dropout is None else {"attention_probs_dropout_prob": attention_dropout}
    if family_name == SEGMENT_LM:
        backbone = {"model_type": "bert", "vocab_size": vocab_size, "hidden_size": hidden_size,
                    "num_hidden_layers": num_layers, "num_attention_heads": num_heads,
                    "intermediate_size": 4 * hidden_size, "max_position_embeddings": segment_length, **dropout}
        num_segments = max(1, -(-max_length // (segment_length - 2)))
        config = get_family(SEGMENT_LM).config_class(
            backbone_config=backbone, variant=variant or "att", num_segments=num_segments,
            segment_length=segment_length, gradient_mode=gradient_mode, num_labels=2)
        config.backbone_config._attn_implementation = "sdpa"
        return get_family(SEGMENT_LM).classification_class(config)
    if family_name in LONGFORMER_TYPES:
        sizes = dict(vocab_size=vocab_size, hidden_size=hidden_size, num_hidden_layers=num_layers,
                     num_attention_heads=num_heads, intermediate_size=4 * hidden_size, attention_window=window,
                     max_position_embeddings=max_length + 2, pad_token_id=0, num_labels=2, **dropout)
        if family_name == "longformer":
            return LongformerForSequenceClassification(LongformerConfig(**sizes))
        config = get_family(family_name).config_class(**sizes, attention_backend=variant or "blocked",
                                                      global_selector="random", num_global_tokens=num_global)
        return get_family(family_name).classification_class(config)
    if name in BASELINES:
        config_class, model_class = {
            "bert": (BertConfig, BertForSequenceClassification),
            "roberta": (RobertaConfig, RobertaForSequenceClassification),
        }[name]
        config = config_class(
            vocab_size=vocab_size,
            hidden_size=hidden_size,
            num_hidden_layers=num_layers,
            num_attention_heads=num_heads,
            intermediate_size=4 * hidden_size,
            max_position_embeddings=max_length + 2,
            num_labels=2,
            **dropout,
        )
        config._attn_implementation = "sdpa"
        return model_class(config)
    family = get_family(name)
    if name == "elementwise":  # a BERT backbone of this size behind v = heads elements per material
        backbone = {"model_type": "bert", "hidden_size": hidden_size, "num_hidden_layers": num_layers,
                    "num_attention_heads": num_heads, "intermediate_size": 4 * hidden_size,
                    "max_position_embeddings": max(max_length // num_heads, 8)}
        config = family.config_class(backbone_config=backbone, elements_per_material=num_heads,
                                     max_materials=max(max_length // num_heads, 8), num_labels=2)
        config.backbone_config._attn_implementation = "sdpa"
        return family.classification_class(config)
    settings = dict(family.defaults, vocab_size=vocab_size, hidden_size=hidden_size, num_hidden_layers=num_layers,
                    num_labels=2)
    if "rank" in settings:
        settings["rank"] = hidden_size
    if hasattr(family.config_class(), "max_position_embeddings"):
        settings["max_position_embeddings"] = max(max_length, family.config_class().max_position_embeddings)
    return family.classification_class(family.config_class(**settings))


def elements_per_token(model):
    """How many input ids one position of the model's encoder covers (v for elementwise models, else 1)."""
    return getattr(model.config, "elements_per_material", 1)


def release_freed_heap():
    """Return the C heap's freed pages to the OS (glibc `malloc_trim`), so RSS growth measures new allocations."""
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # not glibc: the measurement is then a lower bound
        pass


class PeakMemory:
    """Context manager measuring peak memory growth (bytes) of the code inside it."""

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


def median_seconds(function, device, repeats, warmup):
    """Median wall time of `repeats` calls of `function` after `warmup` calls (CUDA synchronised around each)."""
    for _ in range(warmup):
        function()
    times = []
    for _ in range(repeats):
        if device.type == "cuda":
            torch.cuda.synchronize()
        start = time.perf_counter()
        function()
        if device.type == "cuda":
            torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def time_forward(model, input_ids, attention_mask, repeats, warmup, backward=False, **inputs):
    """Median seconds of the timed passes (forward, or with `backward` a training step: forward + backward of the
    loss), and the peak memory of all passes (warm-up included). `inputs` go to the model too."""
    device = input_ids.device
    if backward:
        labels = torch.zeros(input_ids.shape[0], dtype=torch.long, device=device)

        def step():
            model.zero_grad(set_to_none=True)
            model(input_ids=input_ids, attention_mask=attention_mask, labels=labels, **inputs).loss.backward()

        model.train()
        with PeakMemory(device) as memory:
            seconds = median_seconds(step, device, repeats, warmup)
        model.zero_grad(set_to_none=True)
        return seconds, memory.peak
    with torch.inference_mode(), PeakMemory(device) as memory:  # the warm-up too: its first pass allocates
        seconds = median_seconds(lambda: model(input_ids=input_ids, attention_mask=attention_mask, **inputs), device,
                                 repeats, warmup)
    return seconds, memory.peak


def scattered_global_mask(input_ids, num_global, seed=0):
    """[CLS] plus `num_global` distinct random positions per row: the global tokens every Longformer-type model gets."""
    generator = torch.Generator().manual_seed(seed)
    b, n = input_ids.shape
    mask = torch.zeros(b, n, dtype=torch.long)
    for row in range(b):
        mask[row, torch.randperm(n - 1, generator=generator)[: min(num_global, n - 1)] + 1] = 1
    mask[:, 0] = 1
    return mask.to(input_ids.device)


def run_bench(models=("contextualizer", "bert"), lengths=(512, 1024, 2048, 4096, 8192), batch_size=1,
              hidden_size=256, num_layers=4, num_heads=4, repeats=3, warmup=1, device=None, dtype="float32",
              seed=0, progress=print, window=512, num_global=128, backward=False, attention_dropout=None,
              segment_length=256, gradient_mode="paper"):
    """Time every model at every length; returns rows of dicts (model, length, seconds, peak_mib, ratio fields)."""
    variants = {"sparse_longformer": ("blocked", "longformer"), SEGMENT_LM: SEGMENT_VARIANTS}
    for name in models:
        family_name, _, variant = name.partition(":")
        if name not in BASELINES and family_name not in FAMILIES:
            known = ", ".join(sorted(FAMILIES) + list(BASELINES))
            raise ValueError(f"Unknown model {name!r} for bench; choose from {known}.")
        if variant and variant not in variants.get(family_name, ()):
            known = ", ".join(f"{family}:{v}" for family, names in variants.items() for v in names)
            raise ValueError(f"Unknown variant {name!r}; the variants are {known}.")
    if any(name.startswith(SEGMENT_LM) for name in models) and (
            isinstance(segment_length, bool) or not isinstance(segment_length, int) or segment_length < 3):
        raise ValueError(f"`segment_length` must be an integer ≥ 3, got {segment_length!r}.")
    if any(length < 8 for length in lengths):
        raise ValueError(f"`lengths` must all be at least 8 tokens, got {list(lengths)}.")
    device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    torch_dtype = getattr(torch, dtype)
    torch.manual_seed(seed)
    rows = []
    baseline = next((name for name in models if name in BASELINES), None)
    packing = {}  # elements per encoder position of each model
    for name in models:
        # one model for all lengths; segment LMs get one per length (m follows the length)
        per_length = name.startswith(SEGMENT_LM)
        for length in lengths:
            if per_length or length == lengths[0]:
                model = build_bench_model(name, hidden_size, num_layers, num_heads,
                                          length if per_length else max(lengths), window=window,
                                          num_global=num_global, attention_dropout=attention_dropout,
                                          segment_length=segment_length, gradient_mode=gradient_mode)
                model = model.to(device, torch_dtype).eval()
                packing[name] = elements_per_token(model)
            low = 4 if packing[name] > 1 else 5  # element ids are bytes + 4
            high = min(model.config.vocab_size, 8000)
            input_ids = torch.randint(low, high, (batch_size, length), device=device)
            inputs = {}
            if model.config.model_type in LONGFORMER_TYPES:
                inputs["global_attention_mask"] = scattered_global_mask(input_ids, num_global, seed)
            rows.append(_measure(model, name, input_ids, repeats, warmup, progress, backward, **inputs))
        del model
    # Elementwise models read `length` bytes as length / v materials: also time the baseline at length / v tokens
    # (the subword-level cost of the same number of positions).
    v = max(packing.values())
    if baseline and v > 1:
        model = build_bench_model(baseline, hidden_size, num_layers, num_heads, max(lengths)).to(device, torch_dtype)
        model.eval()
        for length in lengths:
            input_ids = torch.randint(5, 8000, (batch_size, max(length // v, 1)), device=device)
            row = _measure(model, f"{baseline}@length/v", input_ids, repeats, warmup, progress, backward)
            row["length"] = length
            rows.append(row)
        del model
    # ratios against every Hugging Face baseline in the run (and against our model on Transformers' attention)
    references = [name for name in models if name in BASELINES or name == "sparse_longformer:longformer"]
    for reference_name in references + [name for name in models if name == SEGMENT_LM + ":base"]:
        reference = {row["length"]: row for row in rows if row["model"] == reference_name}
        for row in rows:
            base = reference.get(row["length"])
            if reference_name.startswith(SEGMENT_LM):  # the paper's Table 3 reports time as a multiple of Base
                row["time_vs_" + reference_name] = row["seconds"] / base["seconds"] if base else None
            else:
                row["speedup_vs_" + reference_name] = base["seconds"] / row["seconds"] if base else None
            if reference_name.startswith(LONGFORMER_TYPES + (SEGMENT_LM,)):
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


def _measure(model, name, input_ids, repeats, warmup, progress, backward=False, **inputs):
    seconds, peak = time_forward(model, input_ids, torch.ones_like(input_ids), repeats, warmup, backward, **inputs)
    length = input_ids.shape[1]
    progress(f"{name:>16} {length:>6} ids: {seconds * 1000:9.1f} ms  {peak / 2**20:8.1f} MiB")
    return {"model": name, "length": length, "seconds": seconds, "peak_mib": peak / 2**20}


def format_table(rows):
    """The rows as an aligned text table, with the growth from the shortest length per model."""
    ratio_keys = [key for key in rows[0] if key.startswith(("speedup_vs_", "time_vs_", "memory_vs_"))] if rows else []
    header = ["model", "length", "ms", "peak MiB", "time / time(shortest)"]
    header += [key.replace("_", " ") for key in ratio_keys]
    shortest = {}
    for row in rows:
        shortest.setdefault(row["model"], row["seconds"])
    lines = [header]
    for row in rows:
        line = [row["model"], str(row["length"]), f"{row['seconds'] * 1000:.1f}", f"{row['peak_mib']:.1f}",
                f"{row['seconds'] / shortest[row['model']]:.2f}"]
        line += [f"{row[key]:.2f}x" if row.get(key) else "-" for key in ratio_keys]
        lines.append(line)
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    return "\n".join("  ".join(cell.rjust(width) for cell, width in zip(line, widths)) for line in lines)


def write_outputs(rows, prefix):
    """Write `<prefix>.csv` and a log-log plot `<prefix>.png` of time against length; returns both paths."""
    os.makedirs(os.path.dirname(os.path.abspath(prefix)), exist_ok=True)
    csv_path, png_path = prefix + ".csv", prefix + ".png"
    with open(csv_path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(6, 4))
    for name in dict.fromkeys(row["model"] for row in rows):
        points = [(row["length"], row["seconds"] * 1000) for row in rows if row["model"] == name]
        axis.plot(*zip(*points), marker="o", label=name)
    axis.set_xscale("log", base=2)
    axis.set_yscale("log")
    axis.set_xlabel("document length (tokens)")
    axis.set_ylabel("forward time (ms)")
    axis.set_title("hf-longdoc bench")
    axis.grid(True, which="both", alpha=0.3)
    axis.legend()
    figure.tight_layout()
    figure.savefig(png_path, dpi=120)
    plt.close(figure)
    return csv_path, png_path


def tokenizer_throughput(texts, elements_per_material=16, repeats=3):
    """MB/s of encoding `texts` (a list of documents) with the ElementwiseTokenizer (each mode) and with Transformers'
    byte/character tokenizers ByT5 and CANINE, in the same run: best of `repeats` passes over the whole list."""
    from transformers import ByT5Tokenizer, CanineTokenizer

    from .tokenization import ElementwiseTokenizer

    megabytes = sum(len(text.encode("utf-8")) for text in texts) / 1e6
    tokenizers = {
        "elementwise (whitespace)": ElementwiseTokenizer(elements_per_material=elements_per_material),
        "elementwise (bytes)": ElementwiseTokenizer(elements_per_material=elements_per_material, mode="bytes"),
        "ByT5Tokenizer": ByT5Tokenizer(),
        "CanineTokenizer": CanineTokenizer(),
    }
    rows = []
    for name, tokenizer in tokenizers.items():
        best = float("inf")
        for _ in range(repeats):
            start = time.perf_counter()
            tokenizer(texts)
            best = min(best, time.perf_counter() - start)
        rows.append({"tokenizer": name, "megabytes": megabytes, "seconds": best, "mb_per_s": megabytes / best})
    return rows


def slstm_step_efficiency(hidden_size=256, length=4096, batch_size=1, repeats=5, device=None, seed=0):
    """FLOP/s of one S-LSTM recurrent step against plain `torch.matmul`s of the same shapes, in the same run.

    The step's FLOPs are counted as its two matmuls, ξ (b·n, 3H) @ (3H, 7H) for the token gates and h (b·n, H) @ (H, H)
    for the sentence node's token forget gate: 2 · 22·H² per token for window 1. Everything else a step does (gate
    LayerNorms, sigmoids, softmaxes, cell updates, the sentence node) counts as overhead, so `efficiency` = matmul
    time / step time."""
    from .modeling.slstm import SLSTMConfig, SLSTMModel
    from .modeling.slstm.modeling_slstm import chunk_sizes

    device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    torch.manual_seed(seed)
    config = SLSTMConfig(hidden_size=hidden_size, num_recurrent_steps=1, max_position_embeddings=length)
    step = SLSTMModel(config).to(device).eval().step
    H, tokens = hidden_size, batch_size * length
    h = torch.randn(batch_size, length, H, device=device)
    c, g, c_g = torch.randn_like(h), h.mean(dim=1), h.mean(dim=1)
    mask = torch.ones(batch_size, length, dtype=torch.bool, device=device)
    x_term = torch.randn(batch_size, length, 7 * H, device=device)
    sizes = chunk_sizes(length, config.chunk_size, config.window_size)
    xi, w_gates = torch.randn(tokens, 3 * H, device=device), torch.randn(3 * H, 7 * H, device=device)
    h_flat, w_forget = torch.randn(tokens, H, device=device), torch.randn(H, H, device=device)
    flops = 2 * 22 * H * H * tokens

    with torch.inference_mode():
        step_seconds = median_seconds(lambda: step(h, c, g, c_g, x_term, mask, sizes), device, repeats, 1)
        matmul_seconds = median_seconds(lambda: (torch.matmul(xi, w_gates), torch.matmul(h_flat, w_forget)), device,
                                        repeats, 1)
    return {"hidden_size": H, "length": length, "batch_size": batch_size,
            "step_ms": step_seconds * 1000, "matmul_ms": matmul_seconds * 1000,
            "step_gflops": flops / step_seconds / 1e9, "matmul_gflops": flops / matmul_seconds / 1e9,
            "efficiency": matmul_seconds / step_seconds}


def selection_cost(hidden_size=768, num_layers=1, num_heads=12, length=4096, batch_size=1, window=512,
                   num_global=128, repeats=5, device=None, seed=0, fit_documents=64, vocab_size=8000):
    """Time of choosing the global tokens (`tfidf`, `pmi`) against the forward pass of the same sparse-map Longformer
    (blocked backend), in the same run. The statistics are fitted on `fit_documents` Zipf-distributed documents, so
    the pair table is realistically large (all pairs seen at least `pmi_min_count` times)."""
    import numpy as np

    device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    torch.manual_seed(seed)
    model = build_bench_model("sparse_longformer", hidden_size, num_layers, num_heads, length, vocab_size, window,
                              num_global).to(device).eval()
    rng = np.random.default_rng(seed)
    documents = [(rng.zipf(1.2, size=length) % (vocab_size - 5) + 5) for _ in range(fit_documents)]
    report = model.fit_global_selector(documents, progress=False)
    input_ids = torch.from_numpy(np.stack(documents[:batch_size])).to(device)
    attention_mask = torch.ones_like(input_ids)
    with torch.inference_mode():
        model.config.global_selector = "random"
        forward = median_seconds(lambda: model(input_ids, attention_mask=attention_mask), device, repeats, 1)
        result = {"forward_ms": forward * 1000, "pmi_pairs": report["pairs_kept"], "length": length}
        for selector in ("tfidf", "pmi"):
            def select(selector=selector):
                return model.select_global_tokens(input_ids, attention_mask, selector=selector)

            seconds = median_seconds(select, device, repeats, 1)
            result[f"{selector}_ms"] = seconds * 1000
            result[f"{selector}_share"] = seconds / forward
    return result


def fit_cost(num_documents=10_000, length=4096, vocab_size=50265, seed=0):
    """Seconds to fit the sparse-map Longformer's TF-IDF and PMI statistics on `num_documents` Zipf-distributed
    documents of `length` ids over a RoBERTa-sized vocabulary (generated on the fly, not held in memory)."""
    import numpy as np

    from .modeling.sparse_longformer import SparseLongformerConfig, SparseLongformerModel

    config = SparseLongformerConfig(vocab_size=vocab_size, hidden_size=8, num_hidden_layers=1, num_attention_heads=1,
                                    intermediate_size=8, pad_token_id=1, bos_token_id=0, eos_token_id=2)
    model = SparseLongformerModel(config)
    rng = np.random.default_rng(seed)
    documents = (rng.zipf(1.2, size=length) % (vocab_size - 3) + 3 for _ in range(num_documents))
    start = time.perf_counter()
    report = model.fit_global_selector(documents)
    return dict(report, seconds=time.perf_counter() - start, length=length, vocab_size=vocab_size)
