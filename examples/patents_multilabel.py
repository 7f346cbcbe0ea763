"""Multi-label patent classification with BERT_EWE, as in the elementwise paper (Sections 5.1, 5.3-5.5).

    python examples/patents_multilabel.py DATA --claims-column claims --codes-column cpc_codes [--paper]
    python examples/patents_multilabel.py --make-sample patents.jsonl   # a small generated patent-like file

DATA is a Hub id or a local csv/jsonl/parquet with the claims (a list of claims, or one text with a claim per line)
and a list of CPC codes per patent. The paper's setup: the first 20 claims concatenated; subclass labels relabeled
First-/Later- (2K labels); BCE; AdamW, lr 2e-5 decaying linearly with no warm-up, weight decay 0.01, batch 32;
micro precision/recall/F1 at threshold 0.3. `--paper` builds Table 1's BERT_EWE (u = 128, v = 16, w = 768); without it a
small BERT backbone is used so the example runs on a CPU.
"""

import argparse
import json
import random

import datasets
import numpy as np
from transformers import DataCollatorWithPadding, Trainer, TrainingArguments

from hf_longdoc import ElementwiseConfig, ElementwiseForSequenceClassification, ElementwiseTokenizer
from hf_longdoc.data.patents import build_label_space, multi_hot, relabel_first_later
from hf_longdoc.metrics import compute_metrics_fn

SUBCLASS_TOPICS = {
    "G06Q": "payment transaction merchant ledger invoice customer account settlement",
    "A01B": "soil tillage plough harrow furrow tractor blade seedbed",
    "H04L": "packet protocol encryption router handshake network frame checksum",
    "A61K": "composition dosage tablet compound excipient formulation carrier active",
    "B60W": "vehicle torque braking steering driver controller engine speed",
}
FILLER = ("wherein the said first second plurality configured to comprising a an at least one method system device "
          "apparatus unit member coupled arranged according claim further").split()


def make_sample(path, count=240, seed=0):
    """Write `count` patent-like records: claims in the vocabulary of their codes, 1-3 CPC codes each."""
    rng = random.Random(seed)
    subclasses = sorted(SUBCLASS_TOPICS)
    with open(path, "w") as f:
        for i in range(count):
            codes = [f"{rng.choice(subclasses)} {rng.randint(1, 99)}/{rng.randint(0, 99):02d}"
                     for _ in range(rng.randint(1, 3))]
            claims = []
            for n in range(rng.randint(3, 25)):
                topic = SUBCLASS_TOPICS[codes[0 if n % 2 == 0 else -1][:4]].split()
                words = [rng.choice(topic if rng.random() < 0.4 else FILLER) for _ in range(rng.randint(12, 40))]
                claims.append(f"{n + 1}. " + " ".join(words) + ".")
            f.write(json.dumps({"id": f"US{9000000 + i}", "claims": claims, "cpc_codes": codes}) + "\n")
    return path


def first_claims(claims, count=20):
    """The first `count` claims as one text (a list of claims, or a text with one claim per line)."""
    if isinstance(claims, str):
        claims = [line for line in claims.splitlines() if line.strip()]
    return " ".join(claims[:count])


def load_splits(source, seed):
    if any(source.endswith(ext) for ext in (".csv", ".json", ".jsonl", ".parquet")):
        kind = {"csv": "csv", "json": "json", "jsonl": "json", "parquet": "parquet"}[source.rsplit(".", 1)[1]]
        data = datasets.load_dataset(kind, data_files={"train": source})
    else:
        data = datasets.load_dataset(source)
    if "test" not in data:
        parts = data["train"].train_test_split(test_size=0.2, seed=seed)
        data = datasets.DatasetDict({"train": parts["train"], "test": parts["test"]})
    if "validation" not in data:
        parts = data["train"].train_test_split(test_size=0.1, seed=seed)
        data["train"], data["validation"] = parts["train"], parts["test"]
    return data


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dataset", nargs="?")
    parser.add_argument("--make-sample", metavar="PATH", help="write a small generated patent-like jsonl and exit")
    parser.add_argument("--claims-column", default="claims")
    parser.add_argument("--codes-column", default="cpc_codes")
    parser.add_argument("--paper", action="store_true", help="Table 1's BERT_EWE instead of a small backbone")
    parser.add_argument("--epochs", type=float, default=10)
    parser.add_argument("--max-steps", type=int, default=-1)
    parser.add_argument("--learning-rate", type=float, default=2e-5)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--threshold", type=float, default=0.3)
    parser.add_argument("--output-dir", default="out/patents-bert-ewe")
    parser.add_argument("--seed", type=int, default=42)
    args = parser.parse_args(argv)
    if args.make_sample:
        print(f"Wrote {make_sample(args.make_sample)}")
        return None
    if not args.dataset:
        parser.error("pass DATA (a Hub id or a local file), or --make-sample PATH")

    data = load_splits(args.dataset, args.seed)
    for column in (args.claims_column, args.codes_column):
        if column not in data["train"].column_names:
            parser.error(f"column {column!r} not found (columns: {', '.join(data['train'].column_names)})")
    label_space = build_label_space(data["train"][args.codes_column])
    known = set(label_space)
    if args.paper:
        config = ElementwiseConfig.from_paper("bert")
    else:
        config = ElementwiseConfig(elements_per_material=8, max_materials=256,
                                   backbone_config={"model_type": "bert", "hidden_size": 128, "num_hidden_layers": 2,
                                                    "num_attention_heads": 8, "intermediate_size": 512,
                                                    "max_position_embeddings": 256})
    config.num_labels = len(label_space)
    config.id2label = dict(enumerate(label_space))
    config.label2id = {name: i for i, name in enumerate(label_space)}
    config.problem_type = "multi_label_classification"
    tokenizer = ElementwiseTokenizer(elements_per_material=config.elements_per_material,
                                     max_materials=config.max_materials)

    def encode(batch):
        encoded = tokenizer([first_claims(claims) for claims in batch[args.claims_column]], truncation=True)
        encoded["labels"] = [multi_hot([label for label in relabel_first_later(codes) if label in known],
                                       label_space).tolist() for codes in batch[args.codes_column]]
        return encoded

    data = data.map(encode, batched=True, remove_columns=data["train"].column_names)
    trainer = Trainer(
        model=ElementwiseForSequenceClassification(config),
        args=TrainingArguments(args.output_dir, num_train_epochs=args.epochs, max_steps=args.max_steps,
                               learning_rate=args.learning_rate, lr_scheduler_type="linear", warmup_steps=0,
                               weight_decay=0.01, per_device_train_batch_size=args.batch_size,
                               per_device_eval_batch_size=args.batch_size, eval_strategy="epoch",
                               save_strategy="no", report_to="none", seed=args.seed),
        train_dataset=data["train"],
        eval_dataset=data["validation"],
        data_collator=DataCollatorWithPadding(tokenizer),
        compute_metrics=compute_metrics_fn(multi_label=True, threshold=args.threshold),
    )
    trainer.train()
    metrics = trainer.evaluate(data["test"], metric_key_prefix="test")
    trainer.save_model(args.output_dir)
    tokenizer.save_pretrained(args.output_dir)
    print(json.dumps({key: value for key, value in metrics.items() if "micro" in key}, indent=2))
    return metrics


if __name__ == "__main__":
    np.set_printoptions(precision=4)
    main()
