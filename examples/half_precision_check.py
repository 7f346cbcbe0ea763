"""Half precision on a trained classifier and real text: the logits of a right-padded batch in bf16 (autocast, and the
weights loaded with `dtype=torch.bfloat16`) and fp16 (autocast, and `.half()`), against fp32. docs/results.md's
half-precision rows use it:

    python examples/half_precision_check.py out/seg data/movie_reviews.jsonl --documents 16

Prints, per mode, whether every logit is finite, how many predictions equal fp32's, and the largest logit change.
"""

import argparse
import copy
import json

import torch
from transformers import AutoModelForSequenceClassification, AutoTokenizer

import hf_longdoc  # noqa: F401  (our families load with the Auto classes)


def half_precision_logits(folder, model, encoded):
    """{mode: logits} in the four half-precision modes."""
    with torch.no_grad():
        logits = {}
        for mode, dtype in (("autocast-bf16", torch.bfloat16), ("autocast-fp16", torch.float16)):
            with torch.autocast("cpu", dtype=dtype):
                logits[mode] = model(**encoded).logits.float()
        loaded = AutoModelForSequenceClassification.from_pretrained(folder, dtype=torch.bfloat16).eval()
        logits["bf16 weights"] = loaded(**encoded).logits.float()
        logits["fp16 .half()"] = copy.deepcopy(model).half()(**encoded).logits.float()
    return logits


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model", help="a saved classifier folder with its tokenizer")
    parser.add_argument("data", help="JSONL with a `text` field")
    parser.add_argument("--documents", type=int, default=16, help="how many texts (the last ones of the file)")
    args = parser.parse_args()
    with open(args.data, encoding="utf-8") as file:
        texts = [json.loads(line)["text"] for line in file if line.strip()][-args.documents:]
    tokenizer = AutoTokenizer.from_pretrained(args.model)
    model = AutoModelForSequenceClassification.from_pretrained(args.model).eval()
    encoded = tokenizer(texts, padding=True, truncation=True, return_tensors="pt")
    padded = int((encoded["attention_mask"] == 0).any(dim=1).sum())
    with torch.no_grad():
        full = model(**encoded).logits.float()
    print(f"{len(texts)} documents, {padded} of them padded, up to {encoded['input_ids'].shape[1]} ids")
    for mode, logits in half_precision_logits(args.model, model, encoded).items():
        same = int((logits.argmax(-1) == full.argmax(-1)).sum())
        print(f"{mode:>14}: finite {bool(torch.isfinite(logits).all())}, predictions equal to fp32 {same}/{len(texts)}"
              f", largest logit change {float((logits - full).abs().max()):.4f}")


if __name__ == "__main__":
    main()
