"""How long should a segment be? The segment LM around a frozen pretrained checkpoint, at several segment lengths L.

For each L, every document's segment vectors z_i are computed once with the frozen backbone (the head stage of
`hf-longdoc train --freeze-backbone`), then the biLSTM + attention head (Eq. 3-5 of Olson et al., 2019) is fitted on
that cache with several seeds, on one split; the script prints test accuracy (mean ± std over the head seeds) per L,
beside TF-IDF + logistic regression over the full text on the same split. docs/results.md's segment-length rows:

    python examples/segment_length_probe.py reviews-late.jsonl --backbone $M --max-length 2048 --lengths 256,128,64,32

Each L encodes the dataset once (about 3-4 minutes for 800 documents of 2,048 tokens with MiniLM on 2 CPU cores);
the head fits take seconds to a minute per seed.
"""

import argparse
import json

import numpy as np
import torch
from transformers import set_seed

from hf_longdoc.data import load_task, tokenize
from hf_longdoc.experiments.baselines import tfidf_classifier
from hf_longdoc.inference.reading import reading_length
from hf_longdoc.modeling import get_family
from hf_longdoc.training.head_fitting import cached_features, fit_head, labels_of, new_parameter_names
from hf_longdoc.training.recipe import wrap_backbone
from hf_longdoc.training.settings import check_backbone


def probe(dataset, backbone, max_length, lengths, seeds=(42, 43, 44), split_seed=42, batch_size=8):
    """{L: test accuracies over `seeds`} and TF-IDF's test accuracy, all on the split drawn with `split_seed`."""
    family = get_family("segment_lm")
    check_backbone(family, backbone)
    data, label_names, multi_label, _ = load_task(dataset, seed=split_seed)
    if multi_label:
        raise ValueError("`dataset` must have one label per document; this probe reports accuracy.")
    tfidf = tfidf_classifier(data["train"]["text"], data["train"]["label"]).score(data["test"]["text"],
                                                                                  data["test"]["label"])
    results = {}
    for length in lengths:
        cache = None
        for seed in seeds:
            set_seed(seed)  # the head's initial weights, as `hf-longdoc train --seed` draws them
            model, tokenizer = wrap_backbone(family, backbone, label_names, False, {"segment_length": length},
                                             max_length)
            tokenizer.model_max_length = reading_length(model.config, max_length)  # cut where the model stops reading
            if cache is None:  # the frozen backbone gives the same vectors for every seed: encode once per L
                encoded = tokenize(data, tokenizer, tokenizer.model_max_length)
                cache = {split: (cached_features(model, family, encoded[split], tokenizer, batch_size),
                                 labels_of(encoded[split], False)) for split in ("train", "validation", "test")}
            fit_head(model, family, new_parameter_names(model, family), cache["train"], cache["validation"],
                     batch_size=batch_size, seed=seed)  # leaves the head of the best validation accuracy
            features, labels = cache["test"]
            model.eval()
            with torch.no_grad():
                logits = family.head_logits(model, *features)
            results.setdefault(length, []).append((logits.argmax(-1) == labels).float().mean().item())
    return results, tfidf


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dataset", help="JSONL (or CSV / parquet) with `text` and `label`")
    parser.add_argument("--backbone", required=True, help="a pretrained checkpoint folder (or Hub id)")
    parser.add_argument("--max-length", type=int, default=2048, help="tokens read per document")
    parser.add_argument("--lengths", default="256,128,64,32", help="segment lengths L to compare, comma-separated")
    parser.add_argument("--seeds", type=int, default=3, help="head seeds per L (42, 43, ...)")
    parser.add_argument("--split-seed", type=int, default=42, help="seed of the train / validation / test split")
    args = parser.parse_args(argv)
    lengths = [int(value) for value in args.lengths.split(",")]
    results, tfidf = probe(args.dataset, args.backbone, args.max_length, lengths,
                           tuple(range(42, 42 + args.seeds)), args.split_seed)
    for length, scores in results.items():
        spread = np.std(scores, ddof=1) if len(scores) > 1 else 0.0
        print(json.dumps({"segment_length": length, "test_accuracy_mean": round(float(np.mean(scores)), 4),
                          "test_accuracy_std": round(float(spread), 4), "seeds": [round(s, 4) for s in scores]}))
    print(json.dumps({"tfidf_test_accuracy": round(float(tfidf), 4)}))
    return results, tfidf


if __name__ == "__main__":
    main()
