"""Fine-tune a long-document classifier as Transformers' `examples/pytorch/text-classification/run_classification.py`
fine-tunes a short-text one: the same flags, the same steps, our families.

    # a family from scratch, sized as run_mlm.py sizes one
    python examples/run_classification.py --model_type contextualizer \
        --config_overrides hidden_size=128,num_hidden_layers=2 \
        --train_file train.jsonl --validation_file dev.jsonl --test_file test.jsonl --max_seq_length 4096 \
        --do_train --do_eval --do_predict --output_dir out/run --num_train_epochs 3 --per_device_train_batch_size 8

    # a family around a pretrained checkpoint
    python examples/run_classification.py --model_name_or_path bert-base-uncased --model_type segment_lm ...

    # a model hf_longdoc saved: evaluate it, predict with it, or fine-tune it further
    python examples/run_classification.py --model_name_or_path out/run --test_file test.jsonl --do_predict ...

Every `TrainingArguments` flag works (`--gradient_accumulation_steps`, `--report_to`, `--torch_compile`, `--fsdp`,
`--deepspeed`, ...), and the arguments may come from one JSON file (`run_classification.py args.json`), as in
Transformers. Files are csv/tsv/json/jsonl/parquet with a text and a label column (a column of lists is
multi-label). Without `--validation_file` (or `--test_file`) that split is carved out of the training file, 10% (20%),
as `hf-longdoc train` carves it. Unlike `hf-longdoc train`, this script is Trainer as it comes: no head stage, no
best-epoch selection, no time budget.
"""

import logging
import os
import sys
from dataclasses import dataclass, field

import numpy as np
from datasets import DatasetDict
from transformers import (
    AutoConfig,
    AutoModelForSequenceClassification,
    AutoTokenizer,
    DataCollatorWithPadding,
    HfArgumentParser,
    Trainer,
    TrainingArguments,
    set_seed,
)

import hf_longdoc  # noqa: F401  (registers the families with the Auto classes)
from hf_longdoc.catalog import FAMILY_NAMES
from hf_longdoc.data import load_text_classification_dataset, tokenize
from hf_longdoc.data.loading import load_for_evaluation
from hf_longdoc.metrics import compute_metrics_fn
from hf_longdoc.modeling import get_family
from hf_longdoc.reading import chosen_classes, decision_threshold, reading_length, scores_from_logits
from hf_longdoc.recipe import build_from_backbone, build_model, fit_statistics
from hf_longdoc.run_settings import parse_config_overrides

logger = logging.getLogger(__name__)


@dataclass
class ModelArguments:
    """Which model: a family from scratch (`model_type`), a family around a checkpoint, or a saved model."""

    model_name_or_path: str | None = field(default=None, metadata={
        "help": "a pretrained checkpoint (folder or Hub id) that --model_type wraps, or a model hf_longdoc saved (its "
                "own family; --model_type then must be omitted or match)"})
    model_type: str | None = field(default=None, metadata={
        "help": f"the family to train: {', '.join(FAMILY_NAMES)}; without --model_name_or_path it starts from "
                "scratch", "choices": FAMILY_NAMES})
    config_overrides: str | None = field(default=None, metadata={
        "help": "config settings of a new model, as run_mlm.py takes them: hidden_size=128,num_hidden_layers=2"})
    tokenizer_name: str | None = field(default=None, metadata={
        "help": "a saved tokenizer; None: the checkpoint's, the family's own, or WordPiece fitted on the train file"})
    vocab_size: int = field(default=8000, metadata={"help": "ids of the WordPiece tokenizer fitted from scratch"})


@dataclass
class DataTrainingArguments:
    """Which data, and how much of each document the model reads."""

    train_file: str | None = field(default=None, metadata={"help": "csv/tsv/json/jsonl/parquet training file"})
    validation_file: str | None = field(default=None, metadata={"help": "evaluation file (None: 10% of train)"})
    test_file: str | None = field(default=None, metadata={"help": "prediction file (None: 20% of train)"})
    text_column_name: str = field(default="text", metadata={"help": "the document column (or title,text)"})
    label_column_name: str = field(default="label", metadata={"help": "the label column (lists: multi-label)"})
    max_seq_length: int = field(default=4096, metadata={
        "help": "tokens a document is read up to; a model that reads fewer cuts there (logged)"})
    threshold: float | None = field(default=None, metadata={
        "help": "multi-label decision threshold; None: the model's own, else 0.3"})


def parse_arguments(argv=None):
    parser = HfArgumentParser((ModelArguments, DataTrainingArguments, TrainingArguments))
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) == 1 and argv[0].endswith(".json"):
        return parser.parse_json_file(json_file=os.path.abspath(argv[0]))
    return parser.parse_args_into_dataclasses(args=argv)


def saved_family(path):
    """The family name of a model hf_longdoc saved in `path`, or None (a checkpoint to wrap, or a Hub id)."""
    config_file = os.path.join(os.path.expanduser(path), "config.json")
    if not os.path.isfile(config_file):
        return None
    model_type = AutoConfig.from_pretrained(path).model_type
    return model_type if model_type in FAMILY_NAMES else None


def check_arguments(model_args, data_args, training_args):
    """A ValueError naming the flag, before any data is read."""
    if not (training_args.do_train or training_args.do_eval or training_args.do_predict):
        raise ValueError("Pass at least one of --do_train, --do_eval and --do_predict.")
    if model_args.model_name_or_path is None and model_args.model_type is None:
        raise ValueError("Pass --model_type (a family, from scratch) or --model_name_or_path.")
    saved = saved_family(model_args.model_name_or_path) if model_args.model_name_or_path else None
    if saved and model_args.model_type not in (None, saved):
        raise ValueError(f"--model_name_or_path holds a {saved} model; --model_type {model_args.model_type} cannot "
                         "change it (omit --model_type).")
    if model_args.model_name_or_path and not saved and model_args.model_type is None:
        raise ValueError(f"--model_name_or_path {model_args.model_name_or_path} is not a model hf_longdoc saved: pass "
                         "--model_type, the family to build around it.")
    if training_args.do_train and data_args.train_file is None:
        raise ValueError("--do_train needs --train_file.")
    if not saved and data_args.train_file is None:
        raise ValueError("A new model learns its labels from --train_file; pass it.")
    if training_args.do_predict and data_args.test_file is None and data_args.train_file is None:
        raise ValueError("--do_predict needs --test_file.")
    if model_args.config_overrides and saved:
        raise ValueError("--config_overrides sizes a new model; a saved one keeps its config.")
    return saved


def load_data(data_args, label_names=None, multi_label=False, seed=42):
    """(splits, label names, multi-label): the train file's labels (or a saved model's), its splits carved where no
    file is given, and the given validation and test files encoded with those labels."""
    columns = dict(text_column=data_args.text_column_name, label_column=data_args.label_column_name)
    data = DatasetDict()
    if data_args.train_file is not None:
        data, label_names, multi_label = load_text_classification_dataset(data_args.train_file, seed=seed, **columns)
        if data_args.validation_file and data_args.test_file:  # nothing to carve: the whole file trains
            data["train"] = load_for_evaluation(data_args.train_file, label_names, multi_label, **columns)
    for split, path in (("validation", data_args.validation_file), ("test", data_args.test_file)):
        if path is not None:
            data[split] = load_for_evaluation(path, label_names, multi_label, **columns)
    return data, label_names, multi_label


def load_model(model_args, data_args, saved, data, label_names, multi_label):
    """(model, tokenizer, family name): a saved model as it is; a family around a checkpoint; or a new one."""
    if saved:
        model = AutoModelForSequenceClassification.from_pretrained(model_args.model_name_or_path)
        known = [model.config.id2label[i] for i in range(model.config.num_labels)]
        if label_names is not None and list(label_names) != known:
            raise ValueError(f"The data's labels {label_names} are not the model's {known}; fine-tune a new head with "
                             "`hf-longdoc train --init-from`, or pass data with the model's labels.")
        tokenizer = AutoTokenizer.from_pretrained(model_args.tokenizer_name or model_args.model_name_or_path)
        return model, tokenizer, saved
    family = get_family(model_args.model_type)
    overrides = parse_config_overrides((model_args.config_overrides or "").split(",") if
                                       model_args.config_overrides else [])
    if model_args.model_name_or_path:
        model, tokenizer = build_from_backbone(family, model_args.model_name_or_path, label_names, multi_label,
                                               overrides, data_args.max_seq_length, model_args.tokenizer_name)
        return model, tokenizer, family.name
    config = family.build_config(**overrides)
    tokenizer = (AutoTokenizer.from_pretrained(model_args.tokenizer_name) if model_args.tokenizer_name else
                 family.tokenizer_for(config, data["train"]["text"], model_args.vocab_size, data_args.max_seq_length))
    model = build_model(family, tokenizer, label_names, multi_label, overrides)
    return model, tokenizer, family.name


def write_predictions(trainer, test, model, threshold, output_dir):
    """`predict_results.txt` as Transformers' script writes it: index and predicted label(s), tab-separated."""
    output = trainer.predict(test.remove_columns([c for c in ("labels", "label") if c in test.column_names]))
    logits = output.predictions[0] if isinstance(output.predictions, tuple) else output.predictions  # then weights
    scores = scores_from_logits(logits, model.config).numpy()
    names = model.config.id2label
    path = os.path.join(output_dir, "predict_results.txt")
    with open(path, "w") as writer:
        writer.write("index\tprediction\n")
        for index, row in enumerate(scores):
            if multi_label_of(model):
                chosen = ",".join(names[i] for i in chosen_classes(row, threshold))
            else:
                chosen = names[int(np.argmax(row))]
            writer.write(f"{index}\t{chosen}\n")
    logger.info("Predictions written to %s", path)


def keep_arguments_as_json(training_args):
    """`training_args.json` in place of the pickle Trainer saves beside the model (nothing saved is pickled)."""
    pickled = os.path.join(training_args.output_dir, "training_args.bin")
    if os.path.exists(pickled):
        os.remove(pickled)
    with open(os.path.join(training_args.output_dir, "training_args.json"), "w") as f:
        f.write(training_args.to_json_string())


def multi_label_of(model):
    return model.config.problem_type == "multi_label_classification"


def main(argv=None):
    model_args, data_args, training_args = parse_arguments(argv)
    logging.basicConfig(format="%(levelname)s %(name)s: %(message)s", level=logging.INFO)
    saved = check_arguments(model_args, data_args, training_args)
    set_seed(training_args.seed)
    label_names, multi_label = None, False
    if saved:
        config = AutoConfig.from_pretrained(model_args.model_name_or_path)
        label_names = [config.id2label[i] for i in range(config.num_labels)]
        multi_label = config.problem_type == "multi_label_classification"
    data, label_names, multi_label = load_data(data_args, label_names, multi_label, training_args.seed)
    model, tokenizer, family_name = load_model(model_args, data_args, saved, data, label_names, multi_label)
    max_length = reading_length(model.config, data_args.max_seq_length)
    if max_length is not None:
        tokenizer.model_max_length = max_length  # the saved tokenizer cuts where the model stops reading
    encoded = tokenize(data, tokenizer, max_length or data_args.max_seq_length)
    if training_args.do_train and not saved:
        fit_statistics(get_family(family_name), model, encoded["train"]["input_ids"], tokenizer)
    threshold = decision_threshold(model.config, data_args.threshold, multi_label) if multi_label else None
    trainer = Trainer(
        model=model, args=training_args,
        train_dataset=encoded["train"] if training_args.do_train else None,
        eval_dataset=encoded["validation"] if training_args.do_eval else None,
        processing_class=tokenizer, data_collator=DataCollatorWithPadding(tokenizer),
        compute_metrics=compute_metrics_fn(multi_label, threshold) if multi_label else compute_metrics_fn(),
    )
    if training_args.do_train:
        result = trainer.train(resume_from_checkpoint=training_args.resume_from_checkpoint)
        if multi_label:
            model.config.multi_label_threshold = threshold
        trainer.save_model()  # the model, its config and tokenizer, safetensors
        keep_arguments_as_json(training_args)
        trainer.log_metrics("train", result.metrics)
        trainer.save_metrics("train", result.metrics)
        trainer.save_state()
    if training_args.do_eval:
        metrics = trainer.evaluate()
        trainer.log_metrics("eval", metrics)
        trainer.save_metrics("eval", metrics)
    if training_args.do_predict:
        write_predictions(trainer, encoded["test"], model, threshold, training_args.output_dir)
    return trainer


if __name__ == "__main__":
    main()
