"""Fine-tune a Contextualizer on a local labelled jsonl/csv file with plain Transformers APIs.

    python examples/finetune_contextualizer.py data/movie_reviews.jsonl --epochs 4

The same as `hf-longdoc train --dataset FILE`, spelled out: load, fit a WordPiece tokenizer, tokenize without cutting
the documents short, build the model through the Auto classes, train with Trainer, evaluate on held-out documents.
"""

import argparse

from transformers import (
                              AutoConfig,
                              AutoModelForSequenceClassification,
                              DataCollatorWithPadding,
                              Trainer,
                              TrainingArguments,
)

import hf_longdoc  # noqa: F401  (registers the model types with the Auto classes)
from hf_longdoc.data import fit_wordpiece_tokenizer, load_text_classification_dataset
from hf_longdoc.metrics import compute_metrics_fn

parser = argparse.ArgumentParser()
parser.add_argument("dataset")
parser.add_argument("--text-column", default="text")
parser.add_argument("--label-column", default="label")
parser.add_argument("--max-length", type=int, default=4096)
parser.add_argument("--epochs", type=float, default=4)
parser.add_argument("--output-dir", default="out/finetuned-contextualizer")
args = parser.parse_args()

data, labels, multi_label = load_text_classification_dataset(args.dataset, args.text_column, args.label_column)
tokenizer = fit_wordpiece_tokenizer(data["train"]["text"], vocab_size=16000, model_max_length=args.max_length)
data = data.map(lambda batch: tokenizer(batch["text"], truncation=True), batched=True, remove_columns=["text"])

config = AutoConfig.for_model("contextualizer", vocab_size=len(tokenizer), hidden_size=128, rank=256,
                              num_hidden_layers=3, num_labels=len(labels), id2label=dict(enumerate(labels)),
                              label2id={name: i for i, name in enumerate(labels)})
model = AutoModelForSequenceClassification.from_config(config)
trainer = Trainer(
    model=model,
    args=TrainingArguments(args.output_dir, num_train_epochs=args.epochs, learning_rate=2e-3, eval_strategy="epoch",
                           save_strategy="epoch", load_best_model_at_end=True, metric_for_best_model="accuracy",
                           per_device_train_batch_size=16, report_to="none", save_total_limit=1),
    train_dataset=data["train"],
    eval_dataset=data["validation"],
    data_collator=DataCollatorWithPadding(tokenizer),
    processing_class=tokenizer,
    compute_metrics=compute_metrics_fn(multi_label),
)
trainer.train()
print(trainer.evaluate(data["test"], metric_key_prefix="test"))
trainer.save_model(args.output_dir)
