"""The steps of Transformers' `examples/pytorch/text-classification/run_classification.py`, as that script takes them
with `--model_name_or_path FOLDER --trust_remote_code --text_column_names text --do_train --do_eval --do_predict`
(https://github.com/huggingface/transformers/blob/main/examples/pytorch/text-classification/run_classification.py):
what a Transformers user runs on a saved folder, unchanged. It imports nothing from hf_longdoc, so it also runs where
hf_longdoc cannot be imported (`fresh_process.run_without_hf_longdoc`).

Its one departure: the script's `evaluate.load("accuracy")` needs the Hub, so the accuracy is computed here.
"""

import os

import numpy as np
from datasets import load_dataset
from transformers import (
    AutoConfig,
    AutoModelForSequenceClassification,
    AutoTokenizer,
    Trainer,
    TrainingArguments,
    default_data_collator,
)


def accuracy(predictions, references):
    """`evaluate.load("accuracy").compute(...)`: the fraction of predictions equal to the references."""
    return {"accuracy": float(np.mean(np.asarray(predictions) == np.asarray(references)))}


def run_like_upstream(folder, files, output_dir, pad_to_max_length=True, max_seq_length=128, trust_remote_code=True):
    """Fine-tune, evaluate and predict with the saved model in `folder` on the json `files` (train / validation /
    test) as the upstream script does; returns `(model, predictions, eval metrics)`, `predictions` being what the
    script writes to `predict_results.txt` (label names)."""
    raw = load_dataset("json", data_files=files)
    label_list = sorted(str(label) for label in raw["train"].unique("label"))  # the script's `get_label_list`
    config = AutoConfig.from_pretrained(folder, num_labels=len(label_list), finetuning_task="text-classification",
                                        trust_remote_code=trust_remote_code)
    config.problem_type = "single_label_classification"
    tokenizer = AutoTokenizer.from_pretrained(folder, use_fast=True, trust_remote_code=trust_remote_code)
    model = AutoModelForSequenceClassification.from_pretrained(folder, config=config,
                                                               trust_remote_code=trust_remote_code)
    label_to_id = {label: i for i, label in enumerate(label_list)}
    model.config.label2id = label_to_id
    model.config.id2label = {i: label for label, i in label_to_id.items()}
    max_seq_length = min(max_seq_length, tokenizer.model_max_length)
    padding = "max_length" if pad_to_max_length else False

    def preprocess(examples):
        examples["sentence"] = examples["text"]  # --text_column_names text
        result = tokenizer(examples["sentence"], padding=padding, max_length=max_seq_length, truncation=True)
        result["label"] = [label_to_id[str(label)] for label in examples["label"]]
        return result

    raw = raw.map(preprocess, batched=True)

    def compute_metrics(p):
        preds = p.predictions[0] if isinstance(p.predictions, tuple) else p.predictions
        return accuracy(np.argmax(preds, axis=1), p.label_ids)

    args = TrainingArguments(output_dir=output_dir, num_train_epochs=1, per_device_train_batch_size=4,
                             learning_rate=1e-3, report_to="none", disable_tqdm=True, save_strategy="no",
                             use_cpu=True)
    trainer = Trainer(model=model, args=args, train_dataset=raw["train"], eval_dataset=raw["validation"],
                      compute_metrics=compute_metrics, processing_class=tokenizer,
                      data_collator=default_data_collator if pad_to_max_length else None)
    trainer.train()
    trainer.save_model()
    metrics = trainer.evaluate(eval_dataset=raw["validation"])
    predict_dataset = raw["test"].remove_columns("label")
    predictions = trainer.predict(predict_dataset, metric_key_prefix="predict").predictions
    predictions = np.argmax(predictions, axis=1)  # where a tuple of predictions failed (the segment LM's, before)
    named = [model.config.id2label[int(item)] for item in predictions]
    with open(os.path.join(output_dir, "predict_results.txt"), "w") as writer:
        writer.write("index\tprediction\n")
        writer.writelines(f"{index}\t{item}\n" for index, item in enumerate(named))
    trainer.create_model_card(finetuned_from=folder, tasks="text-classification")
    return model, named, metrics


__all__ = ["accuracy", "run_like_upstream"]
