"""What does a frozen converted Longformer's output say about a document? Linear probes on its final states.

`hf-longdoc train --model sparse_longformer --backbone PATH` converts a BERT-like checkpoint into the sparse-map
Longformer (Haman, 2023) and, in the recipe's first stage, trains Longformer's classification head on what it reads
of the frozen model (the final [CLS] state, or the token mean for a checkpoint that embeds text by it, as MiniLM
does: `classifier_pooling`). This script measures how much each readout of the frozen states carries, on one split:
logistic regression on the final [CLS] state, on the mean of every real token's state, on the mean of the global
tokens' states (those the TF-IDF/PMI selector chose), and on the mean of the last 512 real tokens' states (where a
late-evidence document's own text lies), beside TF-IDF over the full text; each as test accuracy on the split and as
5-fold cross-validated accuracy over all documents (steadier than one test split of a few hundred). docs/results.md's
probe rows:

    python examples/frozen_longformer_probe.py reviews-late.jsonl --backbone $M --max-length 2048
    python examples/frozen_longformer_probe.py reviews-late.jsonl --backbone $M --max-length 2048 --global-selector cls

The frozen model encodes each document once (about 6 minutes for 800 documents of 2,048 tokens with MiniLM on 2 CPU
cores).
"""

import argparse
import json

import numpy as np
import torch
from sklearn.base import clone
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import StratifiedKFold
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from transformers import DataCollatorWithPadding, set_seed

from hf_longdoc.data import load_task, tokenize
from hf_longdoc.experiments.baselines import tfidf_classifier
from hf_longdoc.inference.reading import reading_length
from hf_longdoc.modeling import get_family
from hf_longdoc.modeling.sparse_longformer.configuration_sparse_longformer import GLOBAL_SELECTORS
from hf_longdoc.training.recipe import fit_statistics, wrap_backbone
from hf_longdoc.training.settings import check_backbone

READOUTS = ("cls", "mean", "global_mean", "last_512_mean")
SPLITS = ("train", "validation", "test")


@torch.no_grad()
def readouts(model, dataset, tokenizer, batch_size=8):
    """{readout: (documents, d) array} of the frozen model's final states for every document of `dataset`."""
    collator, parts = DataCollatorWithPadding(tokenizer), []
    rows = dataset.select_columns(["input_ids", "attention_mask"])
    model.eval()
    for start in range(0, len(rows), batch_size):
        batch = collator([rows[i] for i in range(start, min(start + batch_size, len(rows)))])
        ids, mask = batch["input_ids"], batch["attention_mask"]
        chosen = model.longformer.selector(ids, mask.bool(), selector=model.config.global_selector)
        states = model.longformer(ids, attention_mask=mask, global_attention_mask=chosen).last_hidden_state
        states, real, chosen = states[:, : ids.shape[1]].float(), mask.float(), chosen.float()
        lengths = real.sum(1).long()
        last = torch.stack([states[i, max(0, n - 512): n].mean(0) for i, n in enumerate(lengths.tolist())])
        parts.append({"cls": states[:, 0], "mean": (states * real[..., None]).sum(1) / real.sum(1, keepdim=True),
                      "global_mean": (states * chosen[..., None]).sum(1) / chosen.sum(1, keepdim=True).clamp(min=1),
                      "last_512_mean": last})
    return {key: torch.cat([part[key] for part in parts]).numpy() for key in READOUTS}


def probe_readout(features, labels, seed=42):
    """(test accuracy, 5-fold accuracy) of logistic regression on one readout: `features` and `labels` by split
    (train, validation, test); C is chosen on validation, the folds run over every document with that C."""
    fits = [make_pipeline(StandardScaler(), LogisticRegression(C=c, max_iter=3000)).fit(features["train"],
                                                                                        labels["train"])
            for c in (0.01, 0.1, 1.0, 10.0)]
    best = max(fits, key=lambda fit: fit.score(features["validation"], labels["validation"]))
    tested = float(best.score(features["test"], labels["test"]))
    every = np.concatenate([features[split] for split in SPLITS])
    every_label = np.concatenate([labels[split] for split in SPLITS])
    folds = StratifiedKFold(5, shuffle=True, random_state=seed).split(every, every_label)
    folded = [clone(best).fit(every[train], every_label[train]).score(every[test], every_label[test])
              for train, test in folds]  # a fresh copy per fold: the tested model is never refitted
    return tested, float(np.mean(folded))


def probe(dataset, backbone, max_length, split_seed=42, global_selector="tfidf"):
    """{readout: (test accuracy, 5-fold accuracy)} of logistic regression (its C chosen on validation) and TF-IDF's
    test accuracy, on one split; `global_selector` picks the global tokens (the thesis' selectors, or `cls` alone)."""
    family = get_family("sparse_longformer")
    data, label_names, multi_label, _ = load_task(dataset, seed=split_seed)
    if multi_label:
        raise ValueError("`dataset` must have one label per document; this probe reports accuracy.")
    set_seed(split_seed)
    check_backbone(family, backbone)
    model, tokenizer = wrap_backbone(family, backbone, label_names, False, {"global_selector": global_selector},
                                     max_length)
    tokenizer.model_max_length = reading_length(model.config, max_length)  # cut where the model stops reading
    encoded = tokenize(data, tokenizer, tokenizer.model_max_length)
    fit_statistics(family, model, encoded["train"]["input_ids"], tokenizer)
    features = {split: readouts(model, encoded[split], tokenizer) for split in SPLITS}
    labels = {split: encoded[split]["label"] for split in features}
    results = {key: probe_readout({split: features[split][key] for split in features}, labels, split_seed)
               for key in READOUTS}
    tfidf = tfidf_classifier(data["train"]["text"], data["train"]["label"]).score(data["test"]["text"],
                                                                                  data["test"]["label"])
    return results, float(tfidf)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dataset", help="JSONL (or CSV / parquet) with `text` and `label`")
    parser.add_argument("--backbone", required=True, help="a BERT or RoBERTa checkpoint folder (or Hub id)")
    parser.add_argument("--max-length", type=int, default=2048, help="tokens read per document")
    parser.add_argument("--split-seed", type=int, default=42, help="seed of the train / validation / test split")
    parser.add_argument("--global-selector", default="tfidf", choices=GLOBAL_SELECTORS,
                        help="how the global tokens are chosen (cls: [CLS] alone)")
    args = parser.parse_args(argv)
    results, tfidf = probe(args.dataset, args.backbone, args.max_length, args.split_seed, args.global_selector)
    for key, (accuracy, folded) in results.items():
        print(json.dumps({"readout": key, "test_accuracy": round(accuracy, 4), "five_fold_accuracy": round(folded, 4)}))
    print(json.dumps({"tfidf_test_accuracy": round(tfidf, 4)}))
    return results, tfidf


if __name__ == "__main__":
    main()
