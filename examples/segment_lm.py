"""The segment-LM paper's experiments in small.

`--experiment inversion` (default; Table 1's wireless / inverted wireless, Fig. 3a): Base vs Cat vs RNN vs ATT on a
long-document dataset and on its inverted copy, micro-F1 per variant, and the mean attention α per segment position.
The inversion is the paper's: the document's parts in reverse order, the words of each part in order: its paragraphs,
or its columns with `--text-column title,abstract,claims` (the document is those parts, one paragraph each, a list
column such as the claims one per item, so the claims are reversed too). `--inversion sentences` reverses sentences.

`--experiment shuffle` (Table 4): every training batch has its first segments x_1 permuted between its documents, so
x_1 no longer matches the label; each variant is trained with gradient through x_1 (and the attended segment: the
paper's mode) and without it (`gradient_mode="selected"`: only the attended segment), then tested on unshuffled
documents. Without attention the variants fall to the majority class; ATT does not.

    python examples/segment_lm.py DATA --from-pretrained bert-base-uncased          # the paper: 256-token segments
    python examples/segment_lm.py DATA --small --epochs 3                           # a CPU-sized BERT from scratch
    python examples/segment_lm.py DATA --small --experiment shuffle --variants base,cat,rnn,att,att_ablated

DATA is a Hub id, a local csv/jsonl/parquet file (`--text-column`, `--label-column`), or `builtin` (hf_longdoc's
long-document task, `--evidence`). The paper's setup (Section 4): m = 8 segments of 256 tokens, Adam lr 2e-5, 3
epochs, batch 32, dropout 0.1 before the classifier, gradient through segment 1 and the attended segment only.
"""

import argparse
import os

import numpy as np
import torch
from transformers import AutoTokenizer, DataCollatorWithPadding, Trainer, TrainingArguments, set_seed

from hf_longdoc import SegmentLMConfig, SegmentLMForSequenceClassification
from hf_longdoc.data import (
    document_parts,
    fit_wordpiece_tokenizer,
    invert_parts,
    invert_sentences,
    load_text_classification_dataset,
    make_long_document_task,
)
from hf_longdoc.modeling.segment_lm.modeling_segment import cut_into_segments

VARIANTS = ("base", "cat", "rnn", "att", "att_ablated")
GRADIENTS = {"x_1 gradients": "paper", "No x_1 gradients": "selected"}  # Table 4's rows -> gradient_mode


def load_data(args):
    if args.data == "builtin":
        data = make_long_document_task(evidence=args.evidence, seed=args.seed, train_size=args.train_size,
                                       validation_size=40, test_size=max(args.train_size // 2, 40))
        return data, data["train"].features["label"].names
    data, names, multi_label = load_text_classification_dataset(args.data, args.text_column, args.label_column,
                                                                seed=args.seed)
    if multi_label:
        raise ValueError("This example compares single-label micro-F1; pass a single-label dataset.")
    return data, names


def build_model(args, tokenizer, names, variant, gradient_mode="paper"):
    settings = dict(variant=variant, num_segments=args.num_segments, segment_length=args.segment_length,
                    gradient_mode=gradient_mode,
                    num_labels=len(names), id2label=dict(enumerate(names)),
                    label2id={name: i for i, name in enumerate(names)})
    if args.from_pretrained:
        return SegmentLMForSequenceClassification.from_backbone_pretrained(args.from_pretrained, tokenizer=tokenizer,
                                                                           **settings)
    backbone = {"model_type": "bert", "vocab_size": len(tokenizer), "hidden_size": 128, "num_hidden_layers": 2,
                "num_attention_heads": 4, "intermediate_size": 512, "max_position_embeddings": args.segment_length}
    config = SegmentLMConfig(backbone_config=backbone, cls_token_id=tokenizer.cls_token_id,
                             sep_token_id=tokenizer.sep_token_id, pad_token_id=tokenizer.pad_token_id, **settings)
    return SegmentLMForSequenceClassification(config)


def evaluate(model, dataset, collator, batch_size):
    """Micro-F1 (= accuracy for one label per document) and the mean α per segment position over the documents that
    reach that segment (att variants)."""
    model.eval()
    predictions, alpha_sum, documents = [], 0.0, 0
    with torch.no_grad():
        for start in range(0, len(dataset), batch_size):
            batch = collator([dataset[i] for i in range(start, min(start + batch_size, len(dataset)))])
            out = model(batch["input_ids"].to(model.device), attention_mask=batch["attention_mask"].to(model.device))
            predictions.append(out.logits.argmax(dim=-1).cpu())
            if out.alpha is not None:
                alpha_sum = alpha_sum + out.alpha.float().sum(dim=0).cpu()
                documents = documents + out.segment_mask.sum(dim=0).cpu()
    predicted = torch.cat(predictions).numpy()
    micro_f1 = float(np.mean(predicted == np.asarray(dataset["labels"])))
    profile = None if isinstance(documents, int) else (alpha_sum / documents.clamp(min=1)).tolist()
    return micro_f1, profile


class ShuffledFirstSegments:
    """Table 4's training batches: padded, cut into the model's segments, and the first segments x_1 permuted between
    the batch's documents (the labels stay), as `(batch, m, L)` input the model reads as it is."""

    def __init__(self, tokenizer, config, seed):
        self.pad = DataCollatorWithPadding(tokenizer)
        self.config = config
        self.generator = torch.Generator().manual_seed(seed)

    def __call__(self, features):
        batch = self.pad([{k: v for k, v in f.items() if k != "token_type_ids"} for f in features])
        config = self.config
        segments, mask, _ = cut_into_segments(batch["input_ids"], batch["attention_mask"], config.num_segments,
                                              config.segment_length, config.cls_token_id, config.sep_token_id,
                                              config.pad_token_id)
        order = torch.randperm(len(segments), generator=self.generator)
        segments[:, 0], mask[:, 0] = segments[order, 0], mask[order, 0]
        batch["input_ids"], batch["attention_mask"] = segments, mask.long()
        return batch


def train(args, model, dataset, collator, output_dir):
    training = TrainingArguments(
        output_dir=output_dir, num_train_epochs=args.epochs, max_steps=args.max_steps,
        per_device_train_batch_size=args.batch_size, learning_rate=args.learning_rate, lr_scheduler_type="linear",
        warmup_steps=0.1, save_strategy="no", eval_strategy="no", logging_steps=50, seed=args.seed,
        data_seed=args.seed, report_to="none", use_cpu=not torch.cuda.is_available(), remove_unused_columns=False,
    )
    Trainer(model=model, args=training, train_dataset=dataset, data_collator=collator).train()
    return model


def plot_alpha(profiles, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(6, 3.5))
    width = 0.8 / len(profiles)
    for k, (name, alpha) in enumerate(profiles.items()):
        axis.bar(np.arange(len(alpha)) + 1 + (k - (len(profiles) - 1) / 2) * width, alpha, width=width, label=name)
    axis.set_xlabel("segment position")
    axis.set_ylabel("mean α (documents reaching the segment)")
    axis.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("data", help="Hub id, local csv/jsonl/parquet file, or `builtin`")
    parser.add_argument("--text-column", default="text")
    parser.add_argument("--label-column", default="label")
    parser.add_argument("--evidence", default="end", help="builtin task: where the label evidence sits")
    parser.add_argument("--train-size", type=int, default=400, help="builtin task: training documents")
    parser.add_argument("--from-pretrained", default=None, help="a backbone checkpoint (BERT, RoBERTa, GPT-2, ...)")
    parser.add_argument("--small", action="store_true", help="a small BERT from scratch (CPU-sized)")
    parser.add_argument("--variants", default="base,cat,rnn,att")
    parser.add_argument("--num-segments", type=int, default=8)
    parser.add_argument("--segment-length", type=int, default=256)
    parser.add_argument("--experiment", choices=("inversion", "shuffle"), default="inversion")
    parser.add_argument("--inversion", choices=("parts", "sentences"), default="parts",
                        help="parts: the paper's structural inversion; sentences: reverse every sentence")
    parser.add_argument("--no-inverted", action="store_true", help="skip the inverted copy of the dataset")
    parser.add_argument("--epochs", type=float, default=3)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--learning-rate", type=float, default=2e-5)
    parser.add_argument("--max-steps", type=int, default=-1)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--output-dir", default="out/segment_lm")
    args = parser.parse_args(argv)
    if not args.from_pretrained and not args.small:
        parser.error("give --from-pretrained BACKBONE (the paper's setup) or --small")
    variants = [v.strip() for v in args.variants.split(",") if v.strip()]
    if unknown := set(variants) - set(VARIANTS):
        parser.error(f"unknown variants {sorted(unknown)}; choose from {', '.join(VARIANTS)}")

    set_seed(args.seed)
    data, names = load_data(args)
    max_length = args.num_segments * (args.segment_length - 2) + 2
    if args.from_pretrained:
        tokenizer = AutoTokenizer.from_pretrained(args.from_pretrained)
    else:
        tokenizer = fit_wordpiece_tokenizer(data["train"]["text"], model_max_length=max_length)
    tokenizer.model_max_length = max_length  # the model reads m·(L - 2) document tokens
    encode = dict(batched=True, remove_columns=[c for c in data["train"].column_names if c != "label"])
    if args.experiment == "shuffle":
        return shuffle_experiment(args, data, tokenizer, names, variants, max_length, encode)
    invert = invert_sentences if args.inversion == "sentences" else invert_parts
    readings = {"original": data}
    if not args.no_inverted:
        if args.inversion == "parts":
            whole = sum(len(document_parts(text)) < 2 for text in data["train"]["text"])
            if whole:
                print(f"Note: {whole} of {len(data['train'])} training documents are one part (no paragraph break); "
                      "the part inversion leaves them as they are (--inversion sentences reverses sentences).")
        readings["inverted"] = data.map(lambda example: {"text": invert(example["text"])})
    results, profiles = {}, {}
    os.makedirs(args.output_dir, exist_ok=True)
    for reading, dataset in readings.items():
        encoded = dataset.map(lambda batch: tokenizer(batch["text"], truncation=True, max_length=max_length),
                              **encode).rename_column("label", "labels")
        collator = DataCollatorWithPadding(tokenizer)
        for variant in variants:
            set_seed(args.seed)
            model = train(args, build_model(args, tokenizer, names, variant), encoded["train"], collator,
                          f"{args.output_dir}/{reading}-{variant}")
            micro_f1, alpha = evaluate(model, encoded["test"], collator, args.batch_size)
            results[reading, variant] = micro_f1
            if alpha is not None:
                profiles[f"{variant} ({reading})"] = alpha
            print(f"{reading:>8} {variant:>11}: test micro-F1 {micro_f1:.3f}")
    print()
    print(f"{'variant':>11}  " + "  ".join(f"{reading:>8}" for reading in readings) + "   drop when inverted")
    for variant in variants:
        scores = [results[reading, variant] for reading in readings]
        drop = f"{scores[0] - scores[1]:+.3f}" if len(scores) == 2 else "-"
        print(f"{variant:>11}  " + "  ".join(f"{score:8.3f}" for score in scores) + f"   {drop:>18}")
    if profiles:
        path = os.path.join(args.output_dir, "alpha_per_segment.png")
        plot_alpha(profiles, path)
        print(f"Mean α per segment position, over the documents that reach it: {path}")
        for name, alpha in profiles.items():
            print(f"  {name}: " + " ".join(f"{value:.2f}" for value in alpha))
    return results, profiles


def shuffle_experiment(args, data, tokenizer, names, variants, max_length, encode):
    """Table 4: micro-F1 of every variant trained on shuffled x_1, with and without x_1 gradients."""
    encoded = data.map(lambda batch: tokenizer(batch["text"], truncation=True, max_length=max_length),
                       **encode).rename_column("label", "labels")
    test_collator = DataCollatorWithPadding(tokenizer)
    results = {}
    for row, gradient_mode in GRADIENTS.items():
        for variant in variants:
            set_seed(args.seed)
            model = build_model(args, tokenizer, names, variant, gradient_mode)
            collator = ShuffledFirstSegments(tokenizer, model.config, args.seed)
            train(args, model, encoded["train"], collator, f"{args.output_dir}/shuffle-{gradient_mode}-{variant}")
            results[row, variant] = evaluate(model, encoded["test"], test_collator, args.batch_size)[0]
            print(f"{row:>16} {variant:>11}: test micro-F1 {results[row, variant]:.3f}")
    majority = np.bincount(np.asarray(encoded["test"]["labels"])).max() / len(encoded["test"])
    print(f"\nTable 4 (x_1 shuffled between the documents of every training batch; majority class {majority:.3f})")
    print(f"{'':>16}  " + "  ".join(f"{variant:>11}" for variant in variants))
    for row in GRADIENTS:
        print(f"{row:>16}  " + "  ".join(f"{results[row, variant]:11.3f}" for variant in variants))
    return results, {}


if __name__ == "__main__":
    main()
