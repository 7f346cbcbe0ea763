"""Documents per second of `hf_longdoc.predict` against a plain `pipeline("text-classification")` loop over the same
documents, one at a time and batched, on one saved model (the figures of docs/results.md, "Classifying a corpus").

    python examples/predict_throughput.py MODEL_DIR DATA.jsonl [--documents 200] [--batch-size 8]

Each way reads every document up to the model's reading length (`truncation=True`) and the script checks that the
three give the same labels. Times include tokenizing; the model is loaded once per way, before the clock starts.
"""

import argparse
import json
import os
import tempfile
import time

from transformers import pipeline

import hf_longdoc  # noqa: F401  (registers the families)
from hf_longdoc import predict


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model_dir")
    parser.add_argument("dataset", help="JSONL with a `text` column")
    parser.add_argument("--documents", type=int, default=200)
    parser.add_argument("--batch-size", type=int, default=8)
    args = parser.parse_args()
    with open(args.dataset) as f:
        rows = [json.loads(line) for _, line in zip(range(args.documents), f)]
    texts = [row["text"] for row in rows]
    results = {}
    with tempfile.TemporaryDirectory() as scratch:
        subset = os.path.join(scratch, "documents.jsonl")
        with open(subset, "w") as f:
            f.writelines(json.dumps({"id": i, "text": text}) + "\n" for i, text in enumerate(texts))
        start = time.perf_counter()
        written = predict(args.model_dir, subset, os.path.join(scratch, "labels.jsonl"), batch_size=args.batch_size)
        results["hf_longdoc.predict"] = (time.perf_counter() - start, list(written["label"]))
    classifier = pipeline("text-classification", model=args.model_dir)
    start = time.perf_counter()
    one_by_one = [classifier(text, truncation=True)[0]["label"] for text in texts]
    results["pipeline, one at a time"] = (time.perf_counter() - start, one_by_one)
    start = time.perf_counter()
    batched = [out["label"] for out in classifier(texts, truncation=True, batch_size=args.batch_size)]
    results[f"pipeline, batch_size={args.batch_size}"] = (time.perf_counter() - start, batched)
    reference = results["hf_longdoc.predict"][1]
    print(f"{len(texts)} documents, {args.model_dir}")
    for way, (seconds, labels) in results.items():
        agree = sum(a == b for a, b in zip(labels, reference))
        print(f"{way:>28}: {len(texts) / seconds:7.2f} docs/s ({seconds:6.1f} s); labels equal to predict's: "
              f"{agree}/{len(texts)}")


if __name__ == "__main__":
    main()
