"""Real documents whose label evidence lies past the first N tokens: each labelled document is put after class-neutral
filler, whole documents drawn from another dataset, until the filler alone is at least `--min-prefix` tokens of the
given tokenizer. A model that reads only the first 512 tokens then sees filler only and sits at chance, while the
label is as easy to read as in the original document. docs/results.md's "evidence past token 512" rows use it, on the
data `examples/get_data.py` downloads:

    python examples/late_evidence.py data/bbc_news.jsonl \
        --filler data/movie_reviews.jsonl --tokenizer $M --size 800 --seed 1 > bbc-late.jsonl

Each output row holds `text`, `label` and `filler_tokens` (JSON lines).
"""

import argparse
import json
import random
import sys

from transformers import AutoTokenizer


def read_jsonl(path):
    with open(path, encoding="utf-8") as file:
        return [json.loads(line) for line in file if line.strip()]


def late_evidence(documents, filler, tokenizer, min_prefix=600, size=None, seed=0):
    """`size` of `documents` (all when None), each after whole `filler` texts of at least `min_prefix` tokens."""
    if not filler:
        raise ValueError("`filler` is empty: pass a file of documents to put in front.")
    rng = random.Random(seed)
    chosen = rng.sample(documents, size) if size is not None else list(documents)
    rows = []
    for document in chosen:
        parts, count = [], 0
        while count < min_prefix:
            text = rng.choice(filler)["text"]
            parts.append(text)
            count += len(tokenizer(text, add_special_tokens=False)["input_ids"])
        rows.append({"text": "\n\n".join(parts + [document["text"]]), "label": document["label"],
                     "filler_tokens": count})
    return rows


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("documents", help="JSONL of labelled documents (`text`, `label`)")
    parser.add_argument("--filler", required=True, help="JSONL whose `text`s go in front (labels unused)")
    parser.add_argument("--tokenizer", required=True, help="the tokenizer (folder or Hub id) that counts tokens")
    parser.add_argument("--min-prefix", type=int, default=600, help="filler tokens in front of every document")
    parser.add_argument("--size", type=int, default=None, help="documents to draw (default: all)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    tokenizer = AutoTokenizer.from_pretrained(args.tokenizer)
    tokenizer.model_max_length = int(1e9)  # counting only: no "longer than the model" warning
    rows = late_evidence(read_jsonl(args.documents), read_jsonl(args.filler), tokenizer, args.min_prefix, args.size,
                         args.seed)
    for row in rows:
        sys.stdout.write(json.dumps(row) + "\n")
    return rows


if __name__ == "__main__":
    main()
