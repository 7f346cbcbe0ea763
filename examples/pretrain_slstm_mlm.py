"""Masked-LM pre-training of an S-LSTM (paper 002, Section 3.3 and 5.2) on a text corpus, with held-out perplexity.

    python examples/pretrain_slstm_mlm.py data/bbc_news.jsonl --output-dir out/slstm-mlm
    hf-longdoc train --model slstm --init-from out/slstm-mlm \
        --dataset data/movie_reviews.jsonl --output-dir out/slstm-reviews

The corpus is one or more local .txt (one document per line) / .jsonl / .json / .csv / .parquet files, or a Hub dataset
id, read from `--text-column`. A seeded `--heldout-fraction` of the documents is kept out of training; the rest fits a
WordPiece tokenizer (unless `--tokenizer` is given) and is cut into `--block-size` token blocks, as Transformers'
run_mlm.py does. 15% of the tokens are masked (`DataCollatorForLanguageModeling`: 80% [MASK], 10% random, 10% kept).
The held-out blocks are masked ONCE with a fixed seed, so the perplexity before and after training reads the same
masks. The paper's optimiser: Adam with β2 = 0.98, linear warm-up then linear decay. The output folder (model,
tokenizer, `pretraining_metrics.json`) is what `hf-longdoc train --init-from` fine-tunes.
"""

import argparse
import json
import math
import os

import torch
from datasets import concatenate_datasets, load_dataset
from transformers import (
    AutoTokenizer,
    DataCollatorForLanguageModeling,
    Trainer,
    TrainingArguments,
    set_seed,
)

from hf_longdoc import SLSTMConfig, SLSTMForMaskedLM
from hf_longdoc.data import fit_wordpiece_tokenizer

LOADERS = {".txt": "text", ".jsonl": "json", ".json": "json", ".csv": "csv", ".parquet": "parquet"}


def load_corpus(sources, text_column="text"):
    """One `datasets.Dataset` with a single `text` column: every local file or Hub dataset in `sources`, empty texts
    dropped."""
    parts = []
    for source in sources:
        extension = os.path.splitext(source)[1].lower()
        if os.path.exists(source):
            if extension not in LOADERS:
                raise ValueError(f"{source}: unsupported file type {extension!r}; use one of {', '.join(LOADERS)}.")
            part = load_dataset(LOADERS[extension], data_files=source, split="train")
        else:
            part = load_dataset(source, split="train")
        column = "text" if LOADERS.get(extension) == "text" else text_column
        if column not in part.column_names:
            raise ValueError(f"{source} has no column {column!r} (columns: {part.column_names}); pass --text-column.")
        parts.append(part.select_columns([column]).rename_column(column, "text") if column != "text"
                     else part.select_columns(["text"]))
    corpus = concatenate_datasets(parts)
    return corpus.filter(lambda row: bool(row["text"] and row["text"].strip()))


def to_blocks(texts, tokenizer, block_size):
    """Tokenize, concatenate and cut into `block_size` blocks (the short tail is dropped), as run_mlm.py does."""
    def group(batch):
        ids = [token for row in tokenizer(batch["text"])["input_ids"] for token in row]
        usable = len(ids) // block_size * block_size
        return {"input_ids": [ids[i:i + block_size] for i in range(0, usable, block_size)]}

    return texts.map(group, batched=True, batch_size=1000, remove_columns=texts.column_names, desc="Blocking")


def fixed_masks(blocks, collator, batch_size):
    """The held-out blocks masked once: a list of ready batches (input_ids, attention_mask, labels)."""
    rows = [{"input_ids": ids} for ids in blocks["input_ids"]]
    return [collator(rows[i:i + batch_size]) for i in range(0, len(rows), batch_size)]


@torch.no_grad()
def masked_perplexity(model, batches):
    """exp of the mean cross-entropy over every masked token of `batches`."""
    model.eval()
    device = next(model.parameters()).device
    total, count = 0.0, 0
    for batch in batches:
        batch = {key: value.to(device) for key, value in batch.items()}
        masked = int((batch["labels"] != -100).sum())
        total += model(**batch).loss.item() * masked
        count += masked
    return math.exp(total / max(count, 1))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("corpus", nargs="+", help="local text/jsonl/json/csv/parquet files or a Hub dataset id")
    parser.add_argument("--text-column", default="text")
    parser.add_argument("--output-dir", default="out/slstm-mlm")
    parser.add_argument("--tokenizer", default=None, help="a saved tokenizer; default: fit WordPiece on the corpus")
    parser.add_argument("--vocab-size", type=int, default=8000)
    parser.add_argument("--block-size", type=int, default=512)
    parser.add_argument("--hidden-size", type=int, default=256)
    parser.add_argument("--num-recurrent-steps", type=int, default=4)
    parser.add_argument("--max-position-embeddings", type=int, default=4096)
    parser.add_argument("--heldout-fraction", type=float, default=0.1)
    parser.add_argument("--epochs", type=float, default=3)
    parser.add_argument("--max-steps", type=int, default=-1)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--learning-rate", type=float, default=1e-3)
    parser.add_argument("--mlm-probability", type=float, default=0.15)
    parser.add_argument("--seed", type=int, default=42)
    args = parser.parse_args(argv)
    if args.block_size > args.max_position_embeddings:
        parser.error("--block-size must not exceed --max-position-embeddings")

    set_seed(args.seed)
    corpus = load_corpus(args.corpus, args.text_column)
    if len(corpus) < 2:
        raise ValueError(f"The corpus has {len(corpus)} non-empty document(s); pre-training needs at least two.")
    split = corpus.train_test_split(test_size=args.heldout_fraction, seed=args.seed)
    if args.tokenizer:
        tokenizer = AutoTokenizer.from_pretrained(args.tokenizer)
    else:
        tokenizer = fit_wordpiece_tokenizer(split["train"]["text"], vocab_size=args.vocab_size,
                                            model_max_length=args.max_position_embeddings)
    if tokenizer.mask_token is None or tokenizer.pad_token is None:
        raise ValueError("The tokenizer needs a mask token and a pad token for masked-LM pre-training.")
    train_blocks = to_blocks(split["train"], tokenizer, args.block_size)
    heldout_blocks = to_blocks(split["test"], tokenizer, args.block_size)
    if len(train_blocks) == 0 or len(heldout_blocks) == 0:
        raise ValueError(f"Too little text for one {args.block_size}-token block in each split; lower --block-size.")

    config = SLSTMConfig(vocab_size=len(tokenizer), pad_token_id=tokenizer.pad_token_id, hidden_size=args.hidden_size,
                         num_recurrent_steps=args.num_recurrent_steps,
                         max_position_embeddings=args.max_position_embeddings)
    model = SLSTMForMaskedLM(config)
    collator = DataCollatorForLanguageModeling(tokenizer, mlm_probability=args.mlm_probability, seed=args.seed)
    heldout = fixed_masks(heldout_blocks, DataCollatorForLanguageModeling(
        tokenizer, mlm_probability=args.mlm_probability, seed=args.seed + 1), args.batch_size)
    before = masked_perplexity(model, heldout)
    print(f"held-out masked-LM perplexity before training: {before:.1f}")

    training_args = TrainingArguments(
        output_dir=args.output_dir, num_train_epochs=args.epochs, max_steps=args.max_steps,
        per_device_train_batch_size=args.batch_size, learning_rate=args.learning_rate, adam_beta2=0.98,
        weight_decay=0.01, warmup_steps=0.06, lr_scheduler_type="linear", logging_steps=20, save_strategy="no",
        seed=args.seed, data_seed=args.seed, report_to="none", use_cpu=not torch.cuda.is_available(),
    )
    trainer = Trainer(model=model, args=training_args, train_dataset=train_blocks, data_collator=collator)
    trainer.train()
    after = masked_perplexity(model, heldout)
    print(f"held-out masked-LM perplexity after training: {after:.1f}")

    trainer.save_model(args.output_dir)
    tokenizer.save_pretrained(args.output_dir)
    pickled = os.path.join(args.output_dir, "training_args.bin")  # nothing saved is pickled
    if os.path.exists(pickled):
        os.remove(pickled)
    metrics = {"heldout_perplexity_before": before, "heldout_perplexity_after": after,
               "train_blocks": len(train_blocks), "heldout_blocks": len(heldout_blocks),
               "block_size": args.block_size, "parameters": sum(p.numel() for p in model.parameters())}
    with open(os.path.join(args.output_dir, "pretraining_metrics.json"), "w") as f:
        json.dump(metrics, f, indent=2)
    print(json.dumps(metrics, indent=2))
    return metrics


if __name__ == "__main__":
    main()
