"""Train and evaluate any family with `Trainer`: the library functions behind `hf-longdoc train` and `evaluate`."""

import json
import logging
import os
import re
import shutil

import numpy as np
import torch
from datasets import DatasetDict
from transformers import (
    AutoConfig,
    AutoModelForSequenceClassification,
    AutoTokenizer,
    DataCollatorWithPadding,
    Trainer,
    TrainingArguments,
    set_seed,
)

from .data import fit_wordpiece_tokenizer, load_text_classification_dataset, make_long_document_task
from .hub import make_model_card
from .metrics import compute_metrics_fn
from .modeling import get_family

logger = logging.getLogger(__name__)

BUILTIN_TASK = "builtin"


def parse_config_overrides(pairs):
    """`["hidden_size=64", "default_context=random"]` -> `{"hidden_size": 64, "default_context": "random"}`."""
    overrides = {}
    for pair in pairs or []:
        if "=" not in pair:
            raise ValueError(f"`--config` takes key=value pairs, got {pair!r}.")
        key, value = pair.split("=", 1)
        try:
            overrides[key.strip()] = json.loads(value)
        except json.JSONDecodeError:
            overrides[key.strip()] = value  # a bare string such as `random`
    return overrides


def load_task(dataset=None, text_column="text", label_column="label", seed=42, evidence="end", task_size=None):
    """(DatasetDict, label names, multi_label, name): a real dataset, or the built-in task when `dataset` is None."""
    if dataset in (None, BUILTIN_TASK):
        kwargs = {"evidence": evidence, "seed": seed}
        if task_size:
            kwargs.update(train_size=task_size, validation_size=max(task_size // 5, 20),
                          test_size=max(task_size // 2, 40))
        data = make_long_document_task(**kwargs)
        return data, data["train"].features["label"].names, False, f"built-in long-document task (evidence={evidence})"
    data, names, multi_label = load_text_classification_dataset(dataset, text_column, label_column, seed=seed)
    return data, names, multi_label, dataset


def tokenize(data, tokenizer, max_length):
    """Tokenize every split with explicit truncation at `max_length`, and log how many documents were cut."""
    def encode(batch):
        if not tokenizer.is_fast:  # count what truncation cuts with a second, untruncated pass
            encoded = tokenizer(batch["text"], truncation=True, max_length=max_length)
            lengths = tokenizer(batch["text"], truncation=False, return_length=True)["length"]
            encoded["truncated"] = [length > max_length for length in lengths]
            return encoded
        encoded = tokenizer(batch["text"], truncation=True, max_length=max_length, return_overflowing_tokens=True)
        sample = encoded.pop("overflow_to_sample_mapping")  # one row per window: keep the first of each text
        first = [i for i, s in enumerate(sample) if i == 0 or sample[i - 1] != s]
        counts = np.bincount(sample, minlength=len(batch["text"]))
        encoded = {key: [values[i] for i in first] for key, values in encoded.items()}
        encoded["truncated"] = (counts > 1).tolist()
        return encoded

    data = data.map(encode, batched=True, remove_columns=["text"], desc="Tokenizing")
    for split, part in data.items():
        cut = int(np.sum(part["truncated"]))
        if cut:
            logger.warning("%s: %d of %d documents are longer than max_length=%d tokens and were truncated.",
                           split, cut, len(part), max_length)
    return data.remove_columns("truncated")


def truncating_baseline(data, multi_label=False, max_tokens=512):
    """TF-IDF + logistic regression on the first `max_tokens` word tokens of each document, and on the full text.

    This is the "reads only the first 512 tokens" reference of the built-in task; returns test accuracies (or micro-F1
    for multi-label data) for both readings.
    """
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import accuracy_score, f1_score
    from sklearn.multiclass import OneVsRestClassifier

    token_pattern = r"(?u)\b\w+\b"

    def first_tokens(text):
        return " ".join(re.findall(token_pattern, text)[:max_tokens])

    scores = {}
    for name, view in (("first_512", first_tokens), ("full_text", lambda text: text)):
        vectorizer = TfidfVectorizer(token_pattern=token_pattern, sublinear_tf=True, min_df=2)
        x_train = vectorizer.fit_transform([view(t) for t in data["train"]["text"]])
        x_test = vectorizer.transform([view(t) for t in data["test"]["text"]])
        y_train, y_test = np.asarray(data["train"]["label"]), np.asarray(data["test"]["label"])
        classifier = LogisticRegression(max_iter=2000, C=10.0)
        if multi_label:
            classifier = OneVsRestClassifier(classifier)
        classifier.fit(x_train, y_train)
        predicted = classifier.predict(x_test)
        scores[name] = float(f1_score(y_test, predicted, average="micro") if multi_label
                             else accuracy_score(y_test, predicted))
    return scores


def default_tokenizer(family_name, data, vocab_size, max_length, config_overrides=None):
    """The tokenizer `train` uses without `--tokenizer`: WordPiece fitted on train, or the family's own (elementwise:
    the byte-level ElementwiseTokenizer matching the config's v, u and mode, cut to `max_length` elements)."""
    family = get_family(family_name)
    if family.tokenizer == "elementwise":
        from .tokenization import ElementwiseTokenizer

        config = family.config_class(**{**family.defaults, **(config_overrides or {})})
        v = config.elements_per_material
        return ElementwiseTokenizer(elements_per_material=v, max_materials=min(config.max_materials, max_length // v),
                                    mode="whitespace" if config.mode == "whitespace" else "bytes")
    return fit_wordpiece_tokenizer(data["train"]["text"], vocab_size=vocab_size, model_max_length=max_length)


def build_model(family_name, tokenizer, label_names, multi_label, config_overrides=None, init_from=None):
    """A classification model of `family_name` for the tokenizer and the labels: fresh, sized by the family's CLI
    defaults, or with the encoder weights of the model saved in `init_from` (e.g. a masked-LM pre-training run) and a
    new classification head."""
    family = get_family(family_name)
    labels = dict(
        num_labels=len(label_names),
        id2label=dict(enumerate(label_names)),
        label2id={name: i for i, name in enumerate(label_names)},
        problem_type="multi_label_classification" if multi_label else "single_label_classification",
    )
    if init_from is not None:
        saved = AutoConfig.from_pretrained(init_from)
        if saved.model_type != family.config_class.model_type:
            raise ValueError(f"`init_from` holds a {saved.model_type!r} model, not {family.name!r}; pass the matching "
                             "--model or another folder.")
        if saved.vocab_size < len(tokenizer):
            raise ValueError(f"The tokenizer has {len(tokenizer)} ids but the model in {init_from} knows "
                             f"{saved.vocab_size}; fine-tune with the tokenizer saved alongside it.")
        return family.classification_class.from_pretrained(init_from, **labels, **(config_overrides or {}))
    settings = dict(family.defaults)
    settings.update(vocab_size=len(tokenizer), pad_token_id=tokenizer.pad_token_id, **labels)
    start = tokenizer.cls_token_id if tokenizer.cls_token_id is not None else tokenizer.bos_token_id
    end = tokenizer.sep_token_id if tokenizer.sep_token_id is not None else tokenizer.eos_token_id
    if family.name == "sparse_longformer":  # Longformer reads [CLS] as bos and [SEP] as eos/sep
        settings.update(bos_token_id=start, eos_token_id=end, sep_token_id=end)
    if family.name == "segment_lm":  # every segment is wrapped as [CLS] tokens [SEP]
        settings.update(cls_token_id=start, sep_token_id=end)
    settings.update(config_overrides or {})
    config = family.config_class(**settings)
    return family.classification_class(config)


def fit_statistics(model, train_input_ids, tokenizer):
    """Fit what a model computes from the training documents before training (the sparse-map Longformer's TF-IDF and
    PMI statistics), unless it holds them already (a model started from a fitted one)."""
    if not hasattr(model, "fit_global_selector") or model.config.global_selector not in ("tfidf", "pmi"):
        return
    selector = model.base_model.selector
    if int(selector.idf_num_documents) and int(selector.pmi_num_documents):
        return
    report = model.fit_global_selector(train_input_ids, tokenizer=tokenizer)
    logger.info("Fitted the global-token statistics on %d training documents: %s", report["documents"], report)


def train(
    model="contextualizer",
    output_dir="out/model",
    dataset=None,
    text_column="text",
    label_column="label",
    tokenizer=None,
    config_overrides=None,
    max_length=4096,
    vocab_size=8000,
    epochs=4,
    batch_size=8,
    learning_rate=None,
    weight_decay=0.01,
    seed=42,
    threshold=0.3,
    evidence="end",
    task_size=None,
    baseline=False,
    report_to="none",
    init_from=None,
):
    """Train `model` on `dataset` (or the built-in task), evaluate on test, and save everything to `output_dir`.

    Writes the model (safetensors + config + source files), the tokenizer, `metrics.json` and a model card; returns the
    metrics dict. `baseline=True` adds the 512-token truncating TF-IDF baseline to the metrics. `init_from` starts the
    encoder from a saved model of the same family (and its tokenizer, unless `tokenizer` is given).
    """
    family = get_family(model)  # an unknown family fails before any data is made
    learning_rate = family.learning_rate if learning_rate is None else learning_rate
    set_seed(seed)
    data, label_names, multi_label, dataset_name = load_task(dataset, text_column, label_column, seed, evidence,
                                                             task_size)
    if tokenizer is None and init_from is not None:
        if not os.path.isdir(init_from):
            raise ValueError(f"`init_from` {init_from!r} is not a folder; pass the output folder of a saved model.")
        saved_files = ("tokenizer.json", "tokenizer_config.json")
        if not any(os.path.exists(os.path.join(init_from, name)) for name in saved_files):
            raise ValueError(f"No tokenizer is saved in {init_from}; pass the one the model was trained with as "
                             "`tokenizer` (--tokenizer).")
        tokenizer = init_from
    if tokenizer is None:
        tokenizer = default_tokenizer(model, data, vocab_size, max_length, config_overrides)
        max_length = tokenizer.model_max_length
    else:
        tokenizer = AutoTokenizer.from_pretrained(tokenizer)
        tokenizer.model_max_length = max_length
        if tokenizer.pad_token is None:
            raise ValueError("The tokenizer given with `--tokenizer` has no pad token; set one before training.")
    if init_from is not None:
        limit = getattr(AutoConfig.from_pretrained(init_from), "max_position_embeddings", None)
        if limit and max_length > limit:
            logger.warning("The model in %s has %d positions; reading documents up to %d tokens instead of %d.",
                           init_from, limit, limit, max_length)
            max_length = tokenizer.model_max_length = limit
    baseline_scores = truncating_baseline(data, multi_label) if baseline else None
    encoded = tokenize(data, tokenizer, max_length)
    classifier = build_model(model, tokenizer, label_names, multi_label, config_overrides, init_from)
    fit_statistics(classifier, encoded["train"]["input_ids"], tokenizer)
    key_metric = "micro_f1" if multi_label else "accuracy"
    args = TrainingArguments(
        output_dir=output_dir,
        num_train_epochs=epochs,
        per_device_train_batch_size=batch_size,
        per_device_eval_batch_size=batch_size,
        learning_rate=learning_rate,
        weight_decay=weight_decay,
        warmup_steps=0.1,
        lr_scheduler_type="linear",
        eval_strategy="epoch",
        save_strategy="epoch",
        save_total_limit=1,
        load_best_model_at_end=True,
        metric_for_best_model=key_metric,
        greater_is_better=True,
        logging_steps=20,
        seed=seed,
        data_seed=seed,
        report_to=report_to,
        use_cpu=not torch.cuda.is_available(),
        dataloader_num_workers=0,
    )
    trainer = Trainer(
        model=classifier,
        args=args,
        train_dataset=encoded["train"],
        eval_dataset=encoded["validation"],
        data_collator=DataCollatorWithPadding(tokenizer),
        processing_class=tokenizer,
        compute_metrics=compute_metrics_fn(multi_label, threshold),
    )
    trainer.train()
    test = trainer.evaluate(encoded["test"], metric_key_prefix="test")
    validation = trainer.evaluate(encoded["validation"], metric_key_prefix="validation")
    metrics = {
        "model": model,
        "dataset": dataset_name,
        "max_length": max_length,
        "test": {key[len("test_"):]: value for key, value in test.items() if key.startswith("test_")},
        "validation": {key[len("validation_"):]: value for key, value in validation.items()},
    }
    if baseline_scores is not None:
        metrics["truncating_baseline_tfidf"] = baseline_scores
    save(trainer, tokenizer, output_dir, metrics, dataset_name)
    return metrics


def save(trainer, tokenizer, output_dir, metrics, dataset_name):
    trainer.save_model(output_dir)  # model + tokenizer (processing_class); checkpoints are removed below
    tokenizer.save_pretrained(output_dir)
    for name in os.listdir(output_dir):
        if name.startswith("checkpoint-"):
            shutil.rmtree(os.path.join(output_dir, name))
    # Trainer pickles its arguments to training_args.bin; keep them as JSON instead (nothing saved is pickled)
    if os.path.exists(os.path.join(output_dir, "training_args.bin")):
        os.remove(os.path.join(output_dir, "training_args.bin"))
    with open(os.path.join(output_dir, "training_args.json"), "w") as f:
        f.write(trainer.args.to_json_string())
    with open(os.path.join(output_dir, "metrics.json"), "w") as f:
        json.dump(metrics, f, indent=2)
    make_model_card(output_dir, dataset_name=dataset_name).save(os.path.join(output_dir, "README.md"))


def evaluate_model(model_dir, dataset=None, text_column="text", label_column="label", split="test", seed=42,
                   evidence="end", threshold=0.3, batch_size=8, max_length=None):
    """Metrics of the model saved in `model_dir` on `split` of `dataset` (or the built-in task)."""
    model = AutoModelForSequenceClassification.from_pretrained(model_dir)
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    data, label_names, multi_label, _ = load_task(dataset, text_column, label_column, seed, evidence)
    if split not in data:
        raise ValueError(f"Split {split!r} not found; choose one of {', '.join(data)}.")
    known = [model.config.id2label[i] for i in range(model.config.num_labels)]
    if list(label_names) != known:
        raise ValueError(f"The dataset's labels {label_names} differ from the model's {known}; pass the same "
                         "`--label-column` and dataset the model was trained on.")
    encoded = tokenize(DatasetDict({split: data[split]}), tokenizer, max_length or tokenizer.model_max_length)
    trainer = Trainer(
        model=model,
        args=TrainingArguments(output_dir=os.path.join(model_dir, "_eval"), per_device_eval_batch_size=batch_size,
                               report_to="none", use_cpu=not torch.cuda.is_available()),
        data_collator=DataCollatorWithPadding(tokenizer),
        compute_metrics=compute_metrics_fn(multi_label or model.config.problem_type == "multi_label_classification",
                                           threshold),
    )
    result = trainer.evaluate(encoded[split], metric_key_prefix=split)
    return {key[len(split) + 1:]: value for key, value in result.items()}

