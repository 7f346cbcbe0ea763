"""Micro-benchmarks, each through the family registry.

A family's hot kernel against plain matmuls of its shapes (roofline), the cost of choosing and of fitting the statistics
of families that fit them, and tokenizer throughput.
"""

import time

import numpy as np
import torch

from .measure import median_seconds


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

    from ..tokenization import ElementwiseTokenizer

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
