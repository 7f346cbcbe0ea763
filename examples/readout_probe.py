"""Which segments and which readout? The segment LM's head stage on cached frozen features, over three splits.

For each way of cutting a document into segments (`--modes`: fixed windows, the paper's layout, or whole sentences
packed into each segment, `sentence_packing`; each at a number of ids read), every document of the dataset is
encoded once by the frozen backbone (the segment vectors z_i of Eq. 2, as `hf-longdoc train`'s head stage caches
them). Then, for each split seed (42, 43, 44: the splits `hf-longdoc train --seed S` draws), each head variant of
Olson et al. (2019) (`base` Eq. 1, `cat` Eq. 2, `rnn` Eq. 3, `att` Eq. 3-5, `att_ablated` Eq. 7) is fitted on the
training split's cache as the head stage fits it (`fit_head`: best validation epoch kept), and scored on validation
and test. Beside them, on the same splits: TF-IDF + logistic regression over the full text, and a logistic regression
on the frozen backbone's mean over the first 128 and last 382 tokens (what `bert-512-headtail` reads, without
fine-tuning). One JSON line per (mode, variant) with test accuracy mean ± std over the splits and the validation
accuracies; what docs/results.md's "Why the segment LM trails head + tail on bbc-late" table shows:

    python examples/readout_probe.py bbc-late.jsonl --backbone $M --modes fixed:2048,packed:2048

The head stage alone: fine-tuning after it is not measured here (it takes 40-57 minutes a seed on 2 CPU cores).
"""

import argparse
import json
import time

import numpy as np
import torch
from datasets import DatasetDict, concatenate_datasets
from sklearn.linear_model import LogisticRegression
from transformers import AutoModel, set_seed

from hf_longdoc.data import load_task, load_tokenizer, tokenize
from hf_longdoc.experiments.baselines import tfidf_classifier
from hf_longdoc.inference.reading import reading_length
from hf_longdoc.modeling import get_family
from hf_longdoc.training.head_fitting import cached_features, fit_head, new_parameter_names
from hf_longdoc.training.recipe import wrap_backbone
from hf_longdoc.training.settings import check_backbone

VARIANTS = ("att", "att_ablated", "rnn", "cat", "base")
SPLIT_SEEDS = (42, 43, 44)


def all_documents(dataset):
    """Every document of `dataset` once (the splits of seed 42 joined), with the label names."""
    data, label_names, multi_label, _ = load_task(dataset, seed=SPLIT_SEEDS[0])
    if multi_label:
        raise ValueError("`dataset` must have one label per document; this probe reports accuracy.")
    return concatenate_datasets([data[split] for split in ("train", "validation", "test")]), label_names


def split_rows(dataset, texts, seed):
    """{split: row numbers into the joined documents} for the splits `--seed seed` draws."""
    row_of = {text: i for i, text in enumerate(texts)}
    data, _, _, _ = load_task(dataset, seed=seed)
    return {split: torch.tensor([row_of[text] for text in data[split]["text"]]) for split in data}


def encode_mode(documents, label_names, backbone, mode, batch_size, settings=None):
    """(features of every document, the family, a model to fit heads on, about): the segment vectors for `mode`
    = (packed, max_length) and the model's other `settings` (e.g. `first_segment`); `about` holds the fill (the
    share of the read ids that are document text) and `covered`, which segments the head + tail window holds whole
    (`window_covered`)."""
    packed, max_length = mode
    family = get_family("segment_lm")
    check_backbone(family, backbone)
    model, tokenizer = wrap_backbone(family, backbone, label_names, False,
                                     {"sentence_packing": packed, **(settings or {})}, max_length)
    tokenizer.model_max_length = reading_length(model.config, max_length)  # cut where the model stops reading
    encoded = tokenize(DatasetDict({"all": documents}), tokenizer, tokenizer.model_max_length)["all"]
    started = time.perf_counter()
    features = cached_features(model, family, encoded, tokenizer, batch_size)
    seconds = time.perf_counter() - started
    ids = encoded["input_ids"]
    pad = tokenizer.pad_token_id
    specials = {tokenizer.cls_token_id, tokenizer.sep_token_id, pad}
    text_ids = sum(sum(token not in specials for token in row) for row in ids)
    fill = text_ids / sum(len(row) for row in ids)
    cut = sum(encoded["truncated"]) if "truncated" in encoded.column_names else None
    covered = window_covered(ids, model.config, pad)
    return features, family, model, {"fill": round(fill, 3), "cut": cut, "encode_seconds": round(seconds, 1),
                                     "covered": covered}


def window_covered(ids, config, pad):
    """(documents, m) bool: the segments whose every document id the head + tail window also reads (its first H and
    last T document ids; `first_segment_head`, W - 2 - H), from each document's read ids (a [CLS], the segments'
    slots of L - 2, a [SEP]; a packed layout's pads hold slots but are no document ids)."""
    width, m = config.segment_length - 2, config.num_segments
    head = config.first_segment_head
    tail = config.first_segment_length - 2 - head
    covered = torch.zeros(len(ids), m, dtype=torch.bool)
    for row, document in enumerate(ids):
        slots = document[1:-1]
        rank, ranks = 0, []
        for token in slots:
            ranks.append(rank if token != pad else None)
            rank += token != pad
        for i in range(min(m, -(-len(slots) // width))):
            held = [r for r in ranks[i * width:(i + 1) * width] if r is not None]
            covered[row, i] = bool(held) and (held[-1] < head or held[0] >= rank - tail)
    return covered


def partitioned(features, covered):
    """The features with x_2..x_m the segments the window does not hold whole: z_1 (the window) first, then the other
    present segments in order, the rest absent (a partition of the document at segment granularity, as the paper's
    x_1..x_m partition it)."""
    z, present = features
    kept = present.clone()
    kept[:, 1:] &= ~covered[:, 1:]
    order = torch.sort((~kept).to(torch.uint8), dim=1, stable=True).indices  # kept segments first, in order
    z = z.gather(1, order[..., None].expand_as(z))
    present = torch.arange(z.shape[1])[None] < kept.sum(1, keepdim=True)
    return [z * present[..., None], present]


def fit_variant(model, family, variant, features, labels, rows, seed, learning_rate):
    """(validation, test) accuracy of the head `variant` fitted on the training rows' cache, and its lowest
    validation loss."""
    model.config.variant = variant
    set_seed(seed)
    model.head = type(model.head)(model.config)  # a fresh head of this variant, drawn as `train --seed` draws it
    model.head.apply(model._init_weights)
    part = {split: ([feature[index] for feature in features], labels[index]) for split, index in rows.items()}
    report, _ = fit_head(model, family, new_parameter_names(model, family), part["train"], part["validation"],
                         learning_rate=learning_rate, seed=seed)
    model.eval()
    scores = []
    for split in ("validation", "test"):
        with torch.no_grad():
            logits = family.head_logits(model, *part[split][0])
        scores.append((logits.argmax(-1) == part[split][1]).float().mean().item())
    return [*scores, report["lowest_validation_loss"]]


@torch.no_grad()
def head_tail_vectors(documents, backbone, batch_size, head=128, length=512):
    """The frozen backbone's mean final state over each document's first `head` and last tokens (`length` ids)."""
    from hf_longdoc.data.tasks import head_and_tail

    tokenizer = load_tokenizer(backbone, "`backbone`")
    encoder = AutoModel.from_pretrained(backbone).eval()
    length = min(length, encoder.config.max_position_embeddings)  # a small backbone reads fewer positions
    head = min(head, length // 4)
    vectors = []
    for start in range(0, len(documents), batch_size):
        texts = documents["text"][start:start + batch_size]
        batch = tokenizer.pad(head_and_tail(tokenizer, texts, length, head), return_tensors="pt")
        mask = batch["attention_mask"]
        states = encoder(input_ids=batch["input_ids"], attention_mask=mask).last_hidden_state
        vectors.append((states * mask[..., None]).sum(1) / mask.sum(1, keepdim=True))
    return torch.cat(vectors).numpy()


def mode_name(mode):
    """`fixed-IDS` or `packed-IDS`: how a mode is named in the output and in the saved features' file name."""
    return f"{'packed' if mode[0] else 'fixed'}-{mode[1]}"


def save_features(folder, mode, features, labels, rows, covered):
    """`features` (z, present), `labels`, which segments the window holds whole, and each split seed's rows, as
    FOLDER/{fixed,packed}-IDS.safetensors."""
    from pathlib import Path

    from safetensors.torch import save_file

    Path(folder).mkdir(parents=True, exist_ok=True)
    tensors = {"z": features[0].contiguous(), "present": features[1].contiguous(), "labels": labels,
               "covered": covered.contiguous()}
    tensors.update({f"rows_{seed}_{split}": index for seed, splits in rows.items() for split, index in splits.items()})
    save_file(tensors, str(Path(folder) / f"{mode_name(mode)}.safetensors"))


def saved_features(folder, mode):
    """((z, present), covered) that `save_features` wrote for `mode` into `folder` (covered None if it saved none),
    or None."""
    from pathlib import Path

    from safetensors.torch import load_file

    path = Path(folder or "") / f"{mode_name(mode)}.safetensors"
    if not folder or not path.exists():
        return None
    tensors = load_file(str(path))
    return [tensors["z"], tensors["present"].bool()], tensors.get("covered")


def save_head_tail(folder, vectors):
    """The frozen head + tail window's vectors (documents, d) as FOLDER/head-tail.safetensors."""
    from pathlib import Path

    from safetensors.numpy import save_file

    Path(folder).mkdir(parents=True, exist_ok=True)
    save_file({"vectors": np.ascontiguousarray(vectors)}, str(Path(folder) / "head-tail.safetensors"))


def saved_head_tail(folder):
    """What `save_head_tail` wrote into `folder`, or None."""
    from pathlib import Path

    from safetensors.numpy import load_file

    path = Path(folder or "") / "head-tail.safetensors"
    return load_file(str(path))["vectors"] if folder and path.exists() else None


def pooled_readouts(features, labels, rows, last=16):
    """{readout: test accuracies over the splits} of a logistic regression (standardised, C = 0.1) on the mean of
    every present segment vector, and on the mean of the `last` ones: where the segment heads lose, does a plain
    average of the same vectors lose too?"""
    from sklearn.preprocessing import StandardScaler

    z, present = features[0].float(), features[1].bool()
    counts = present.sum(1)
    means = {"mean of all segments": (z * present[..., None]).sum(1) / counts[:, None],
             f"mean of the last {last} segments": torch.stack(
                 [z[i, max(0, int(n) - last):int(n)].mean(0) for i, n in enumerate(counts)])}
    results = {}
    for name, vectors in means.items():
        vectors = vectors.numpy()
        for seed in SPLIT_SEEDS:
            train, test = rows[seed]["train"], rows[seed]["test"]
            scale = StandardScaler().fit(vectors[train])
            probe = LogisticRegression(max_iter=3000, C=0.1).fit(scale.transform(vectors[train]), labels[train])
            results.setdefault(name, []).append(probe.score(scale.transform(vectors[test]), labels[test]))
    return results


def summary(scores):
    return {"mean": round(float(np.mean(scores)), 4),
            "std": round(float(np.std(scores, ddof=1)) if len(scores) > 1 else 0.0, 4),
            "splits": [round(s, 4) for s in scores]}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dataset", help="JSONL (or CSV / parquet) with `text` and `label`")
    parser.add_argument("--backbone", required=True, help="a pretrained checkpoint folder")
    parser.add_argument("--modes", default="fixed:2048,packed:2048",
                        help="comma-separated SEGMENTS:IDS, SEGMENTS fixed (windows) or packed (whole sentences)")
    parser.add_argument("--variants", default=",".join(VARIANTS), help="head variants to fit")
    parser.add_argument("--head-learning-rate", type=float, default=1e-3)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--no-head-tail", action="store_true", help="skip the frozen head + tail readout")
    parser.add_argument("--head-tail-first-segment", action="store_true",
                        help="also fit each head with z_1 replaced by the frozen head + tail window's vector (the "
                             "paper's first segment read as one window of 512 tokens with full attention)")
    parser.add_argument("--no-segment-first", action="store_true",
                        help="with --head-tail-first-segment, fit the heads with z_1 as the window only")
    parser.add_argument("--first-segment", choices=("segment", "head_tail"), default="segment",
                        help="what z_1 is in the encoded features: the first segment, or the model's own head + tail "
                             "window (`--config first_segment=head_tail`: one pass over the first 128 and last 382 "
                             "document ids read, a cut document's true end kept)")
    parser.add_argument("--partition", action="store_true",
                        help="with --first-segment head_tail, also fit each head with x_2..x_m the segments the "
                             "window does not hold whole (the document partitioned at segment granularity)")
    parser.add_argument("--save-features", metavar="DIR",
                        help="write each mode's cached features and the labels there (safetensors), and read them "
                             "back instead of encoding when a later run finds them there")
    args = parser.parse_args(argv)
    modes = []
    for item in args.modes.split(","):
        kind, _, length = item.partition(":")
        if kind not in ("fixed", "packed") or not length.isdigit():
            raise ValueError(f"`--modes` item {item!r} must be fixed:IDS or packed:IDS, e.g. packed:2048.")
        modes.append((kind == "packed", int(length)))
    documents, label_names = all_documents(args.dataset)
    texts = documents["text"]
    labels = torch.tensor(documents["label"])
    rows = {seed: split_rows(args.dataset, texts, seed) for seed in SPLIT_SEEDS}
    tfidf, printed = [], []
    for seed in SPLIT_SEEDS:
        train, test = rows[seed]["train"].tolist(), rows[seed]["test"].tolist()
        classifier = tfidf_classifier([texts[i] for i in train], labels[train].tolist())
        tfidf.append(classifier.score([texts[i] for i in test], labels[test].tolist()))
    printed.append({"dataset": args.dataset, "reader": "tfidf", "test": summary(tfidf)})
    print(json.dumps(printed[-1]), flush=True)
    vectors = None
    if not args.no_head_tail or args.head_tail_first_segment:
        vectors = saved_head_tail(args.save_features)
        if vectors is None:
            vectors = head_tail_vectors(documents, args.backbone, args.batch_size)
            if args.save_features:
                save_head_tail(args.save_features, vectors)
    if not args.no_head_tail:
        scores = []
        for seed in SPLIT_SEEDS:
            train, test = rows[seed]["train"], rows[seed]["test"]
            probe = LogisticRegression(max_iter=2000, C=1.0).fit(vectors[train], labels[train])
            scores.append(probe.score(vectors[test], labels[test]))
        printed.append({"dataset": args.dataset, "reader": "frozen head+tail mean, logistic regression",
                        "test": summary(scores)})
        print(json.dumps(printed[-1]), flush=True)
    for mode in modes:
        saved = saved_features(args.save_features, mode)
        settings = {"first_segment": args.first_segment}
        if saved is not None:  # encoded by an earlier run: fit the heads on it
            family = get_family("segment_lm")
            check_backbone(family, args.backbone)
            model, _ = wrap_backbone(family, args.backbone, label_names, False,
                                     {"sentence_packing": mode[0], "num_segments": saved[0][0].shape[1], **settings},
                                     mode[1])
            (features, covered), about = saved, {"fill": None, "cut": None, "encode_seconds": None}
        else:
            features, family, model, about = encode_mode(documents, label_names, args.backbone, mode, args.batch_size,
                                                         settings)
            covered = about.pop("covered")
            if args.save_features:
                save_features(args.save_features, mode, features, labels, rows, covered)
        layout = {"dataset": args.dataset, "segments": mode_name(mode).split("-")[0], "ids": mode[1],
                  "first_segment": args.first_segment}
        for readout, scores in pooled_readouts(features, labels, rows).items():
            printed.append({**layout, "reader": f"logistic regression on the {readout}", "test": summary(scores)})
            print(json.dumps(printed[-1]), flush=True)
        firsts = {} if args.head_tail_first_segment and args.no_segment_first else {"z_1": features}
        if args.partition:
            if args.first_segment != "head_tail" or covered is None:
                raise ValueError("--partition needs --first-segment head_tail (and features saved with it).")
            firsts["x_2..x_m outside the window"] = partitioned(features, covered)
        if args.head_tail_first_segment:
            z = features[0].clone()
            z[:, 0] = torch.as_tensor(vectors, dtype=z.dtype)
            firsts["head+tail window"] = [z, *features[1:]]
        for first, read in firsts.items():
            for variant in [name for name in args.variants.split(",") if name]:
                results = [fit_variant(model, family, variant, read, labels, rows[seed], seed,
                                       args.head_learning_rate) for seed in SPLIT_SEEDS]
                printed.append({**layout, **about, "variant": variant, "read": first,
                                "validation": summary([r[0] for r in results]),
                                "test": summary([r[1] for r in results]),
                                "validation_loss": summary([r[2] for r in results])})
                print(json.dumps(printed[-1]), flush=True)
    return printed


if __name__ == "__main__":
    main()
