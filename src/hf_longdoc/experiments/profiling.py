"""Micro-benchmarks, each through the family registry.

A family's hot kernel against plain matmuls of its shapes (roofline), the cost of choosing and of fitting the statistics
of families that fit them, and tokenizer throughput.
"""

import math
import statistics
import time

import numpy as np
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from .measure import median_seconds, timed_call


def kernel_efficiency(family, hidden_size=256, num_layers=1, num_heads=4, length=4096, batch_size=1, repeats=5,
                      device=None, seed=0):
    """FLOP/s of the family's hot kernel (its registry `profile`, e.g. one S-LSTM recurrent step) against plain
    `torch.matmul`s of the same shapes, in the same run; `efficiency` = matmul time / kernel time."""
    device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    torch.manual_seed(seed)
    size = dict(hidden_size=hidden_size, num_layers=num_layers, num_heads=num_heads, max_length=length)
    model = family.model_class(family.build_config(size)).to(device).eval()
    kernel = family.profile(model, batch_size, length)
    with torch.inference_mode():
        kernel_seconds = median_seconds(kernel["run"], device, repeats, 1)
        matmul_seconds = median_seconds(kernel["matmuls"], device, repeats, 1)
    flops = kernel["flops"]
    return {"family": family.name, "kernel": kernel["name"], "hidden_size": hidden_size, "length": length,
            "batch_size": batch_size, "kernel_ms": kernel_seconds * 1000, "matmul_ms": matmul_seconds * 1000,
            "kernel_gflops": flops / kernel_seconds / 1e9, "matmul_gflops": flops / matmul_seconds / 1e9,
            "efficiency": matmul_seconds / kernel_seconds}


def zipf_documents(count, length, vocab_size, first_id, seed=0):
    """`count` documents of `length` Zipf-distributed ids in [first_id, vocab_size): realistic token statistics."""
    rng = np.random.default_rng(seed)
    return ((rng.zipf(1.2, size=length) % (vocab_size - first_id) + first_id) for _ in range(count))


def selection_cost(family, hidden_size=768, num_layers=1, num_heads=12, length=4096, batch_size=1, window=512,
                   num_global=128, repeats=5, device=None, seed=0, fit_documents=64, vocab_size=8000):
    """Time of choosing the global tokens (`tfidf`, `pmi`) against the forward pass of the same model, for a family
    that fits selection statistics (the sparse-map Longformer), in the same run. The statistics are fitted on
    `fit_documents` Zipf-distributed documents, so the pair table is realistically large."""
    device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    torch.manual_seed(seed)
    size = dict(hidden_size=hidden_size, num_layers=num_layers, num_heads=num_heads, max_length=length,
                attention_window=window)
    model = family.classification_class(family.build_config(size, vocab_size=vocab_size, pad_token_id=0,
                                                            num_labels=2, global_selector="random",
                                                            num_global_tokens=num_global))
    model = model.to(device).eval()
    documents = list(zipf_documents(fit_documents, length, vocab_size, first_id=5, seed=seed))
    report = model.fit_global_selector(documents, progress=False)
    input_ids = torch.from_numpy(np.stack(documents[:batch_size])).to(device)
    attention_mask = torch.ones_like(input_ids)
    with torch.inference_mode():
        forward = median_seconds(lambda: model(input_ids, attention_mask=attention_mask), device, repeats, 1)
        result = {"forward_ms": forward * 1000, "pmi_pairs": report["pairs_kept"], "length": length}
        for selector in ("tfidf", "pmi"):
            def select(selector=selector):
                return model.select_global_tokens(input_ids, attention_mask, selector=selector)

            seconds = median_seconds(select, device, repeats, 1)
            result[f"{selector}_ms"] = seconds * 1000
            result[f"{selector}_share"] = seconds / forward
    return result


def fit_cost(family, num_documents=10_000, length=4096, vocab_size=50265, seed=0):
    """Seconds to fit the family's statistics (the sparse-map Longformer's TF-IDF and PMI) on `num_documents`
    Zipf-distributed documents of `length` ids over a RoBERTa-sized vocabulary (generated on the fly)."""
    size = dict(hidden_size=8, num_layers=1, num_heads=1, max_length=length)
    config = family.build_config(size, vocab_size=vocab_size, intermediate_size=8, pad_token_id=1, bos_token_id=0,
                                 eos_token_id=2)
    model = family.model_class(config)
    start = time.perf_counter()
    report = model.fit_global_selector(zipf_documents(num_documents, length, vocab_size, first_id=3, seed=seed))
    return dict(report, seconds=time.perf_counter() - start, length=length, vocab_size=vocab_size)


def tokenizer_throughput(texts, elements_per_material=16, repeats=3):
    """MB/s of encoding `texts` (a list of documents) with the ElementwiseTokenizer (each mode) and with Transformers'
    byte/character tokenizers ByT5 and CANINE, in the same run: best of `repeats` passes over the whole list."""
    from transformers import ByT5Tokenizer, CanineTokenizer

    from ..modeling.elementwise.tokenization_elementwise import ElementwiseTokenizer

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


def read_documents(path, megabytes, option="path"):
    """Documents from a .txt (one per line) or .jsonl (`text` field) file, repeated up to `megabytes`."""
    import json
    import os

    if not os.path.isfile(path):
        raise ValueError(f"`{option}` file {path!r} does not exist.")
    with open(path, encoding="utf-8") as f:
        if path.endswith(".jsonl"):
            texts = [json.loads(line)["text"] for line in f if line.strip()]
        else:
            texts = [line.rstrip("\n") for line in f if line.strip()]
    if not texts:
        raise ValueError(f"`{option}` file {path!r} holds no text.")
    size = sum(len(text.encode("utf-8")) for text in texts)
    return texts * max(1, int(megabytes * 1e6 / size + 0.999))


class MatmulRecorder(TorchDispatchMode):
    """Records the matrix products a forward pass makes (`linear`, `matmul`, `bmm`, `mm`, `addmm`, and the two
    products inside `scaled_dot_product_attention`) as (FLOPs, operand shapes, dtype, device), so that
    `matmul_roofline` can replay each as a plain `torch.matmul` of the same shapes. Everything else the model does
    (norms, activations, gathers, copies, an LSTM) is what the products alone leave out."""

    def __init__(self):
        super().__init__()
        self.products = []  # (flops, (a, b) shapes, dtype, device)

    def _product(self, a_shape, b_shape, like):
        m, k, n = a_shape[-2], a_shape[-1], b_shape[-1]
        batch = math.prod(torch.broadcast_shapes(a_shape[:-2], b_shape[:-2]))
        self.products.append((2 * batch * m * k * n, (tuple(a_shape), tuple(b_shape)), like.dtype, like.device))

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = func.overloadpacket.__name__
        if name == "linear":
            x, weight = args[0], args[1]
            self._product((math.prod(x.shape[:-1]), x.shape[-1]), (weight.shape[1], weight.shape[0]), x)
        elif name in ("matmul", "bmm", "mm") and args[0].dim() >= 2 and args[1].dim() >= 2:
            self._product(args[0].shape, args[1].shape, args[0])
        elif name in ("addmm", "baddbmm"):
            self._product(args[1].shape, args[2].shape, args[1])
        elif name == "scaled_dot_product_attention":
            q, k = args[0], args[1]  # (..., n, d), (..., s, d): q k^T, then p v
            *batch, n, d = q.shape
            s = k.shape[-2]
            self._product((*batch, n, d), (*batch, d, s), q)
            self._product((*batch, n, s), (*batch, s, d), q)
        return func(*args, **kwargs)


ROOFLINE_REPEATS = 5  # interleaved (forward, products) pairs at least: the median of each


def matmul_roofline(model, inputs, repeats=3, warmup=1):
    """A roofline line for any model: its forward time against the time of the same matrix products alone
    (`MatmulRecorder`: every product the forward makes, replayed as plain `torch.matmul`s of the same shapes, in the
    same run). `efficiency` = matmul time / forward time: 1.0 means the model runs at matmul speed, and the rest of
    the time is element-wise work and memory traffic (the S-LSTM's gates, the sparse attention's gathers).

    Both are timed here, on the path the forward takes anyway (compiled where the model compiles, this process's
    threads), after `warmup` + 1 untimed forwards (a compiled model's graph for this mode is built before any
    timing), and interleaved: forward, products, forward, products, ... at least `ROOFLINE_REPEATS` times, so that a
    change of load on shared cores slows both alike. An efficiency above 1.0 cannot be (the forward makes these
    products and more): it is returned as `measurement_error`, with `efficiency` None."""
    device = next(model.parameters()).device
    recorder = MatmulRecorder()
    with torch.inference_mode():
        # recorded eagerly (the same products): a compiled region run under a dispatch mode would be skipped for good
        with torch.compiler.set_stance("force_eager"), recorder:
            model(**inputs)
        operands = {}  # one pair of random operands per distinct shape
        for _, shapes, dtype, where in recorder.products:
            if shapes not in operands:
                operands[shapes] = tuple(torch.randn(shape, dtype=dtype, device=where) for shape in shapes)
        pairs = [operands[shapes] for _, shapes, _, _ in recorder.products]

        def forward():
            model(**inputs)

        def replay():
            for a, b in pairs:
                torch.matmul(a, b)

        for _ in range(warmup + 1):
            timed_call(forward, device)
        timed_call(replay, device)
        forwards, products = [], []
        for _ in range(max(repeats, ROOFLINE_REPEATS)):
            forwards.append(timed_call(forward, device))
            products.append(timed_call(replay, device))
    forward, matmuls = statistics.median(forwards), statistics.median(products)
    flops = sum(flops for flops, *_ in recorder.products)
    line = {"forward_ms": forward * 1000, "matmul_ms": matmuls * 1000, "gflop": flops / 1e9, "products": len(pairs),
            "forward_gflops": flops / forward / 1e9, "matmul_gflops": flops / matmuls / 1e9,
            "efficiency": matmuls / forward, "measurement_error": None}
    if line["efficiency"] > 1.0:
        line["measurement_error"] = (f"the products alone took {matmuls * 1000:.1f} ms, longer than the forward that "
                                     f"makes them and more ({forward * 1000:.1f} ms): the timings are not of the same "
                                     "conditions (load changed, or the forward ran another path)")
        line["efficiency"] = None
    return line
