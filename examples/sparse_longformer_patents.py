"""The thesis' experiment: Longformer and Big Bird fine-tuned with each token selector, accuracy per selector and
backbone: the ten cells of its Figure 6.1 (Chapter 6), with the bar chart.

    python examples/sparse_longformer_patents.py DATA --from-pretrained LONGFORMER_DIR \
        --bigbird-from-pretrained BIGBIRD_DIR                                                      # the thesis' setup
    python examples/sparse_longformer_patents.py DATA --small --epochs 3                          # CPU-sized models
    python examples/sparse_longformer_patents.py --make-sample patents.jsonl                      # an offline file

DATA is a Hub id or a local csv/jsonl/parquet with the description text and the IPC section (A-H) of each patent, as
in Refined Patents (`--text-column`, `--label-column`); `builtin` is hf_longdoc's long-document task (`--evidence`).
The thesis' setup (Sections 5, 6): descriptions cut at 4,096 tokens, window 512, [CLS] + 128 global tokens; AdamW,
lr 3e-5, weight decay 0.01, cosine schedule with 10% warm-up, batch 8, 5 epochs, from allenai/longformer-base-4096
(`--from-pretrained` a local copy or Hub id: its tokenizer is used too), and the same for Big Bird from
google/bigbird-roberta-base (`--bigbird-from-pretrained`; blocks of 64, 3 random blocks, which the selected tokens'
blocks replace: see `hf_longdoc.SparseBigBirdModel`). The TF-IDF and PMI statistics are fitted on the training split
only. `--small` trains small models from scratch (width 128, 2 layers) with a WordPiece tokenizer fitted on the
training split, so the grid runs on a CPU. `--backbones` picks the columns of the grid. Writes `results.json` and
`figure_6_1.png` (accuracy per selector, one bar per backbone) to `--output-dir`.
"""

import argparse
import json
import os
import random

import numpy as np
import torch
from transformers import AutoTokenizer, DataCollatorWithPadding, Trainer, TrainingArguments, set_seed

from hf_longdoc import FAMILIES
from hf_longdoc.data import (
    fit_wordpiece_tokenizer,
    invert_sentences,
    load_text_classification_dataset,
    make_long_document_task,
)
from hf_longdoc.metrics import compute_metrics_fn

SELECTORS = ("cls", "first_n", "random", "tfidf", "pmi")
BACKBONES = {"longformer": "sparse_longformer", "bigbird": "sparse_bigbird"}  # backbone -> hf_longdoc family
SECTIONS = {  # IPC sections and words of their subject, for --make-sample
    "A": "garment tape buttons food beverage medical dosage surgical",
    "B": "trimming assembly shaft cutting press conveyor printing sheet",
    "C": "solvent reaction polymer dissolves catalyst compound acid alloy",
    "D": "fibre yarn polyurethane weave textile knitted fabric thread",
    "E": "housing lever latch hinge door beam concrete drilling",
    "F": "mechanism heat liquid piston turbine combustion valve pump",
    "G": "conductive signals analog optical sensor measuring display processor",
    "H": "power telephone signal antenna transistor circuit voltage battery",
}
FILLER = ("the said first second wherein embodiment comprising a an one portion member configured to provided with "
          "which may be shown in figure further example invention according surface end side".split())


def make_sample(path, count=160, seed=0):
    """Write `count` patent-like descriptions (300-900 words) whose section's words appear only past the first 40%."""
    rng = random.Random(seed)
    with open(path, "w") as f:
        for i in range(count):
            section = "ABCDEFGH"[i % 8]
            length = rng.randint(300, 900)
            words = [rng.choice(FILLER) for _ in range(length)]
            for _ in range(rng.randint(4, 10)):
                words[rng.randint(int(0.4 * length), length - 1)] = rng.choice(SECTIONS[section].split())
            f.write(json.dumps({"id": f"US{8000000 + i}", "description": " ".join(words), "section": section}) + "\n")
    return path


def load_data(source, text_column, label_column, evidence, seed):
    if source == "builtin":
        data = make_long_document_task(evidence=evidence, seed=seed, train_size=400, validation_size=80, test_size=200)
        return data, data["train"].features["label"].names
    data, names, multi_label = load_text_classification_dataset(source, text_column, label_column, seed=seed)
    if multi_label:
        raise ValueError("The thesis' task is single-label (one IPC section per patent).")
    return data, names


def checkpoint_of(args, backbone):
    return args.from_pretrained if backbone == "longformer" else args.bigbird_from_pretrained


def build_model(args, tokenizer, names, backbone, selector):
    """The backbone's model with `selector`: from its checkpoint, or small and from scratch (`--small`)."""
    family = FAMILIES[BACKBONES[backbone]]
    labels = dict(num_labels=len(names), id2label=dict(enumerate(names)),
                  label2id={name: i for i, name in enumerate(names)})
    settings = dict(global_selector=selector, num_global_tokens=args.num_global, **labels)
    if checkpoint_of(args, backbone):
        return family.classification_class.from_pretrained(checkpoint_of(args, backbone), **settings)
    size = dict(hidden_size=128, num_layers=2, num_heads=4, max_length=args.max_length, attention_window=args.window)
    config = family.build_config(size, vocab_size=len(tokenizer), pad_token_id=tokenizer.pad_token_id,
                                 **family.token_settings(tokenizer), **settings)
    return family.classification_class(config)


def plot_grid(results, path):
    """Figure 6.1: test accuracy per selector, one bar per backbone."""
    from hf_longdoc.utils.plotting import figure

    backbones = list(results)
    selectors = [s for s in SELECTORS if any(s in results[b] for b in backbones)]
    width = 0.8 / len(backbones)
    with figure(path, size=(7, 4)) as axis:
        for i, backbone in enumerate(backbones):
            xs = [j + (i - (len(backbones) - 1) / 2) * width for j in range(len(selectors))]
            heights = [results[backbone].get(selector, {}).get("accuracy", 0.0) for selector in selectors]
            bars = axis.bar(xs, heights, width, label=backbone)
            axis.bar_label(bars, fmt="%.3f", fontsize=7)
        axis.set_xticks(range(len(selectors)), selectors)
        axis.set_ylabel("test accuracy")
        axis.set_ylim(0, 1.05)
        axis.legend()
        axis.set_title("Token selectors on two backbones (thesis Fig. 6.1)")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("data", nargs="?", help="Hub id, local csv/jsonl/parquet file, or `builtin`")
    parser.add_argument("--make-sample", metavar="PATH", help="write a small patent-like jsonl file and exit")
    parser.add_argument("--text-column", default="description")
    parser.add_argument("--label-column", default="section")
    parser.add_argument("--evidence", default="end", help="builtin task: where the label evidence sits")
    parser.add_argument("--invert", action="store_true", help="reverse every document's sentence order (evidence "
                                                               "that sat at the start moves to the end)")
    parser.add_argument("--from-pretrained", default=None, help="a Longformer checkpoint (folder or Hub id)")
    parser.add_argument("--bigbird-from-pretrained", default=None, help="a Big Bird checkpoint (folder or Hub id)")
    parser.add_argument("--small", action="store_true", help="small models from scratch (CPU-sized)")
    parser.add_argument("--backbones", default="longformer,bigbird", help="longformer and/or bigbird")
    parser.add_argument("--selectors", default=",".join(SELECTORS))
    parser.add_argument("--max-length", type=int, default=4096)
    parser.add_argument("--window", type=int, default=512, help="attention window (--small only; a checkpoint "
                                                                 "keeps its own)")
    parser.add_argument("--num-global", type=int, default=128)
    parser.add_argument("--epochs", type=float, default=5)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--learning-rate", type=float, default=3e-5)
    parser.add_argument("--max-steps", type=int, default=-1)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--output-dir", default="out/sparse_longformer_patents")
    args = parser.parse_args(argv)
    if args.make_sample:
        print(f"Wrote {make_sample(args.make_sample)}")
        return None
    if not args.data:
        parser.error("give DATA (or --make-sample PATH)")
    backbones = [b.strip() for b in args.backbones.split(",") if b.strip()]
    if not backbones or set(backbones) - set(BACKBONES):
        parser.error(f"--backbones must name {' and/or '.join(BACKBONES)}, got {args.backbones!r}")
    for backbone in backbones:
        if not checkpoint_of(args, backbone) and not args.small:
            flag = "--from-pretrained" if backbone == "longformer" else "--bigbird-from-pretrained"
            parser.error(f"give {flag} (a {backbone} checkpoint: the thesis' setup) or --small, or leave {backbone} "
                         "out of --backbones")
    selectors = [s.strip() for s in args.selectors.split(",") if s.strip()]
    if unknown := set(selectors) - set(SELECTORS):
        parser.error(f"unknown selectors {sorted(unknown)}; choose from {', '.join(SELECTORS)}")

    set_seed(args.seed)
    data, names = load_data(args.data, args.text_column, args.label_column, args.evidence, args.seed)
    if args.invert:
        data = data.map(lambda example: {"text": invert_sentences(example["text"])})
    results = {}
    for backbone in backbones:
        checkpoint = checkpoint_of(args, backbone)
        if checkpoint:  # each checkpoint reads its own tokenizer, as in the thesis (5.3)
            tokenizer = AutoTokenizer.from_pretrained(checkpoint, model_max_length=args.max_length)
        else:
            tokenizer = fit_wordpiece_tokenizer(data["train"]["text"], model_max_length=args.max_length)
        encoded = data.map(lambda batch, tokenizer=tokenizer: tokenizer(batch["text"], truncation=True,
                                                                        max_length=args.max_length),
                           batched=True, remove_columns=["text"])
        results[backbone] = {}
        for selector in selectors:
            set_seed(args.seed)
            model = build_model(args, tokenizer, names, backbone, selector)
            if selector in ("tfidf", "pmi"):  # statistics from the training split only
                model.fit_global_selector(encoded["train"]["input_ids"], tokenizer=tokenizer, progress=False)
            training = TrainingArguments(
                output_dir=f"{args.output_dir}/{backbone}-{selector}", num_train_epochs=args.epochs,
                max_steps=args.max_steps, per_device_train_batch_size=args.batch_size,
                per_device_eval_batch_size=args.batch_size, learning_rate=args.learning_rate, weight_decay=0.01,
                lr_scheduler_type="cosine", warmup_steps=0.1, optim="adamw_torch", eval_strategy="no",
                save_strategy="no", logging_steps=50, seed=args.seed, data_seed=args.seed, report_to="none",
                use_cpu=not torch.cuda.is_available(),
            )
            trainer = Trainer(model=model, args=training, train_dataset=encoded["train"],
                              data_collator=DataCollatorWithPadding(tokenizer),
                              compute_metrics=compute_metrics_fn(False))
            trainer.train()
            test = trainer.evaluate(encoded["test"], metric_key_prefix="test")
            results[backbone][selector] = {"accuracy": test["test_accuracy"], "macro_f1": test["test_macro_f1"]}
            print(f"{backbone:>10} {selector:>8}: test accuracy {test['test_accuracy']:.3f}  "
                  f"macro-F1 {test['test_macro_f1']:.3f}")
    print()
    print(f"{len(data['train'])} training / {len(data['test'])} test documents, {args.max_length} tokens, "
          f"[CLS] + {args.num_global} selected tokens")
    print("  backbone  selector  accuracy  macro-F1")
    for backbone, cells in results.items():
        for selector, scores in cells.items():
            print(f"{backbone:>10}  {selector:>8}  {scores['accuracy']:8.3f}  {scores['macro_f1']:8.3f}")
        spread = np.ptp([scores["accuracy"] for scores in cells.values()]) if cells else 0.0
        print(f"{backbone:>10}  spread of accuracy across selectors: {spread:.3f}")
    os.makedirs(args.output_dir, exist_ok=True)
    with open(os.path.join(args.output_dir, "results.json"), "w") as f:
        json.dump(results, f, indent=2)
    plot_grid(results, os.path.join(args.output_dir, "figure_6_1.png"))
    print(f"Wrote {args.output_dir}/results.json and figure_6_1.png")
    return results


if __name__ == "__main__":
    main()
