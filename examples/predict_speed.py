"""Documents per second of `hf-longdoc predict` on each backend, idle or beside a busy process, against the floor of
the model's matrix products.

For each backend (`torch`, `onnxruntime`, `onnxruntime-int8`), `predict` labels the first `--documents` documents of
a JSONL file (repeated when it holds fewer) after one untimed warm-up run on 16 of them (which also exports the graph
when it is missing). The floor: the matrix products a torch forward makes on `--floor-batches` batches of the corpus
(`bench`'s roofline recorder), replayed alone as plain `torch.matmul`s on this process's threads; documents per second
at that rate is what the torch path would reach if nothing but its products took time (the products replayed the
faster of two ways: split over every thread, or one batch per thread). `--busy` starts one other
process that spins on one core for the whole run (`while True: pass`), the "one busy process" of a shared machine.

    python examples/predict_speed.py MODEL_DIR reviews-late.jsonl --documents 1000
    python examples/predict_speed.py MODEL_DIR reviews-late.jsonl --documents 1000 --busy

One JSON line per backend: documents per second, the ratio to torch's in the same run, and the share of the floor.
"""

import argparse
import json
import multiprocessing
import os
import time
from concurrent.futures import ThreadPoolExecutor

import datasets
import torch

from hf_longdoc.experiments.profiling import MatmulRecorder
from hf_longdoc.predicting import predict
from hf_longdoc.saving.saved_models import load_saved_model, load_saved_tokenizer
from hf_longdoc.utils.threads import one_thread_each


def spin():
    """The busy process: one core, never idle."""
    while True:
        pass


def corpus(path, documents):
    with open(path, encoding="utf-8") as f:
        texts = [json.loads(line)["text"] for line in f if line.strip()]
    texts = (texts * (documents // len(texts) + 1))[:documents]
    return datasets.Dataset.from_dict({"text": texts})


def floor_documents_per_second(model_dir, texts, batch_size, batches):
    """Documents per second at the speed of the model's matrix products alone, over `batches` batches spread over
    the corpus sorted by length (as `predict` sorts a window): the products (`bench`'s recorder) replayed the faster
    of two ways on this process's threads, each batch's products split over every thread, or one batch per thread
    (as `predict` reads on the CPU)."""
    model = load_saved_model(model_dir, "model_dir").eval()
    tokenizer = load_saved_tokenizer(model_dir, "model_dir")
    ordered = sorted(texts, key=len, reverse=True)
    step = max(1, len(ordered) // batches)
    documents, pairs = 0, []
    for start in range(0, len(ordered), step)[:batches]:
        chunk = ordered[start:start + batch_size]
        inputs = tokenizer(chunk, truncation=True, padding=True, return_tensors="pt")
        recorder = MatmulRecorder()
        with torch.inference_mode(), recorder:
            model(**inputs)
        pairs.append([tuple(torch.randn(shape) for shape in shapes) for _, shapes, _, _ in recorder.products])
        documents += len(chunk)

    def replay(products):
        with torch.inference_mode():
            for a, b in products:
                torch.matmul(a, b)

    threads = torch.get_num_threads()
    best = float("inf")
    for workers in sorted({1, threads}):
        with ThreadPoolExecutor(workers) as pool, one_thread_each(workers):
            list(pool.map(replay, pairs))  # warm-up
            started = time.perf_counter()
            list(pool.map(replay, pairs))
            best = min(best, time.perf_counter() - started)
    return documents / best


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model_dir")
    parser.add_argument("dataset", help="a JSONL file with a `text` field")
    parser.add_argument("--documents", type=int, default=1000)
    parser.add_argument("--backends", default="torch,onnxruntime,onnxruntime-int8")
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--floor-batches", type=int, default=4)
    parser.add_argument("--busy", action="store_true", help="run beside one process that spins on one core")
    args = parser.parse_args(argv)
    data = corpus(args.dataset, args.documents)
    busy = None
    if args.busy:
        busy = multiprocessing.Process(target=spin, daemon=True)
        busy.start()
    rows = []
    try:
        floor = floor_documents_per_second(args.model_dir, data["text"], args.batch_size, args.floor_batches)
        for backend in args.backends.split(","):
            predict(args.model_dir, data.select(range(16)), batch_size=args.batch_size, backend=backend)
            started = time.perf_counter()
            predict(args.model_dir, data, batch_size=args.batch_size, backend=backend)
            rate = len(data) / (time.perf_counter() - started)
            rows.append({"backend": backend, "documents": len(data), "documents_per_second": round(rate, 3),
                         "busy_process": args.busy, "threads": torch.get_num_threads(),
                         "floor_documents_per_second": round(floor, 3), "share_of_floor": round(rate / floor, 3)})
        for row in rows:
            row["vs_torch"] = round(row["documents_per_second"] / rows[0]["documents_per_second"], 3)
            print(json.dumps(row), flush=True)
    finally:
        if busy is not None:
            busy.terminate()
    return rows


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    main()
