"""Fine-tune a long-document classifier as Transformers' `examples/pytorch/text-classification/run_classification.py`
fine-tunes a short-text one: that script's flags and steps, our families.

    # a family from scratch, sized as run_mlm.py sizes one
    python examples/run_classification.py --model_type contextualizer \
        --config_overrides hidden_size=128,num_hidden_layers=2 \
        --train_file train.jsonl --validation_file dev.jsonl --test_file test.jsonl --max_seq_length 4096 \
        --do_train --do_eval --do_predict --output_dir out/run --num_train_epochs 3 --per_device_train_batch_size 8

    # a family around a pretrained checkpoint
    python examples/run_classification.py --model_name_or_path bert-base-uncased --model_type segment_lm ...

    # a model hf_longdoc saved: evaluate it, predict with it, or fine-tune it further; the upstream command line
    python examples/run_classification.py --model_name_or_path out/run --trust_remote_code \
        --text_column_names text --test_file test.jsonl --do_predict --output_dir out/predicted

Every flag of the upstream script's `ModelArguments` and `DataTrainingArguments` is taken (`--text_column_names`,
`--label_column_name`, `--metric_name`, `--pad_to_max_length`, `--max_train_samples`, `--shuffle_train_dataset`,
`--dataset_name`, `--remove_columns`, ...), and so is Transformers 4's `--overwrite_output_dir`; every
`TrainingArguments` flag works (`--gradient_accumulation_steps`, `--report_to`, `--torch_compile`, `--fsdp`,
`--deepspeed`, ...), and the arguments may come from one JSON file (`run_classification.py args.json`). Where this
script differs, and why:

- `--max_seq_length` defaults to 4096 (upstream 128, a sentence): these are long-document models, and a model that
  reads fewer ids cuts there (logged). `--pad_to_max_length` defaults to False (upstream True): padding every document
  to 4096 ids costs time and memory and changes no score (pads are masked); pass it to pad as upstream does.
- Files are csv/tsv/json/jsonl/parquet with a text and a label column (a column of lists is multi-label);
  `--text_column_names` defaults to `text` (upstream `sentence`), and several columns are joined as paragraphs unless
  `--text_column_delimiter` is given. A float label column is regression, which these families do not do: refused in
  one line before any work (as `--do_regression`).
- A split that is needed and not given is carved out of `--train_file`, seeded and stratified as `hf-longdoc train`
  carves it: validation (10%) for `--do_eval`, test (20%) for `--do_predict`, and nothing else; how many documents are
  held out is logged. (Upstream requires `--validation_file`, and `--test_file` for `--do_predict`.)
- A training run writes `--output_dir` as `hf-longdoc train` does: it trains in `.NAME.partial` beside it (Trainer's
  checkpoints, pickles included, live there), and only a finished run replaces the folder, the earlier run's files
  included, so two runs never mix; files hf_longdoc did not write are replaced only with `--overwrite_output_dir`.
  The checkpoints are removed when the run has succeeded, and `training_args.json` replaces Trainer's pickled
  `training_args.bin`: nothing left in the folder is pickled. An interrupted run is kept for
  `--resume_from_checkpoint .NAME.partial/checkpoint-N`. A run that only evaluates or predicts writes its results
  beside what is there and removes the results an earlier run of this script left that it does not replace.
- The model card is the package's (`README.md`, as `hf-longdoc train` writes it; upstream: `trainer.create_model_card`),
  with the test scores when the run predicts; `--push_to_hub` uploads the finished folder as `hf-longdoc push` does.
- `--trust_remote_code` is accepted: the families are this package's code, so nothing remote runs for them.
- User errors are one line and exit code 2, as `hf-longdoc` prints them.

Unlike `hf-longdoc train`, this script is Trainer as it comes: no head stage, no best-epoch selection (unless
`--load_best_model_at_end`), no time budget.
"""

import dataclasses
import json
import logging
import os
import sys
import tempfile
from dataclasses import dataclass, field

import datasets
import numpy as np
from datasets import DatasetDict, concatenate_datasets
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
from hf_longdoc.data import DatasetError, load_text_classification_dataset, save_tokenizer, tokenize
from hf_longdoc.data.loading import load_for_evaluation, load_splits, require_hub
from hf_longdoc.inference.reading import chosen_classes, decide, decision_threshold, reading_length, scores_from_logits
from hf_longdoc.metrics import MULTI_LABEL, compute_metrics_fn
from hf_longdoc.modeling import get_family
from hf_longdoc.publishing.hub import make_model_card, push_to_hub, require_hub_for_push
from hf_longdoc.saving.run_folder import (
    RunFolder,
    check_files_free,
    file_digest,
    is_unchanged,
    read_manifest,
    require_writable_folder,
    write_manifest,
)
from hf_longdoc.training.recipe import build_model, fit_statistics, label_settings, wrap_backbone
from hf_longdoc.training.run import replace_pickles
from hf_longdoc.training.settings import check_backbone
from hf_longdoc.utils.catalog import FAMILY_NAMES
from hf_longdoc.utils.parsing import parse_config_overrides

logger = logging.getLogger(__name__)
PROGRAM = "run_classification.py"


@dataclass
class ModelArguments:
    """Which model: a family from scratch (`model_type`), a family around a checkpoint, or a saved model; and the
    upstream script's loading options."""

    model_name_or_path: str | None = field(default=None, metadata={
        "help": "a pretrained checkpoint (folder or Hub id) that --model_type wraps, or a model hf_longdoc saved (its "
                "own family; --model_type then must be omitted or match)"})
    model_type: str | None = field(default=None, metadata={
        "help": f"the family to train: {', '.join(FAMILY_NAMES)}; without --model_name_or_path it starts from "
                "scratch", "choices": FAMILY_NAMES})
    config_overrides: str | None = field(default=None, metadata={
        "help": "config settings of a new model, as run_mlm.py takes them: hidden_size=128,num_hidden_layers=2"})
    config_name: str | None = field(default=None, metadata={
        "help": "upstream: a config other than the model's; here a saved model keeps its config and a new one is "
                "sized by --config_overrides, so only --model_name_or_path's own folder is taken"})
    tokenizer_name: str | None = field(default=None, metadata={
        "help": "a saved tokenizer; None: the checkpoint's, the family's own, or WordPiece fitted on the train file"})
    vocab_size: int = field(default=8000, metadata={"help": "ids of the WordPiece tokenizer fitted from scratch"})
    cache_dir: str | None = field(default=None, metadata={
        "help": "where models and --dataset_name downloaded from the Hub are stored"})
    use_fast_tokenizer: bool = field(default=True, metadata={"help": "load the fast tokenizer, where there is one"})
    model_revision: str = field(default="main", metadata={"help": "branch, tag or commit of a Hub model"})
    token: str | None = field(default=None, metadata={"help": "Hub token for private models and datasets"})
    trust_remote_code: bool = field(default=False, metadata={
        "help": "as upstream; the families are this package's code, so no remote code runs for them"})
    ignore_mismatched_sizes: bool = field(default=False, metadata={
        "help": "with --do_train, fine-tune a saved model on other labels: its head is replaced (a new one for "
                "another number of labels)"})


@dataclass
class DataTrainingArguments:
    """Which data, how it is read, and how much of each document the model reads (upstream's names and meanings,
    with the defaults documented where they differ)."""

    dataset_name: str | None = field(default=None, metadata={
        "help": "a Hub dataset (or a dataset folder) in place of the files; its train/validation/test splits"})
    dataset_config_name: str | None = field(default=None, metadata={"help": "the configuration of --dataset_name"})
    do_regression: bool = field(default=None, metadata={
        "help": "upstream's regression switch: these families classify, so True is refused (a float label column "
                "is refused too)"})
    text_column_names: str | None = field(default=None, metadata={
        "help": "the document column, or several comma-separated (title,text); None: text"})
    text_column_name: str | None = field(default=None, metadata={"help": "alias of --text_column_names"})
    text_column_delimiter: str | None = field(default=None, metadata={
        "help": "what joins several text columns (upstream: a space); None: one paragraph each"})
    train_split_name: str | None = field(default=None, metadata={"help": "the split of --dataset_name that trains"})
    validation_split_name: str | None = field(default=None, metadata={
        "help": "the split of --dataset_name that evaluates"})
    test_split_name: str | None = field(default=None, metadata={"help": "the split of --dataset_name to predict"})
    remove_splits: str | None = field(default=None, metadata={
        "help": "splits to leave out, comma-separated (a file given for one is not read)"})
    remove_columns: str | None = field(default=None, metadata={
        "help": "columns to leave out, comma-separated (only the text and label columns are ever read)"})
    label_column_name: str = field(default="label", metadata={"help": "the label column (lists: multi-label)"})
    max_seq_length: int = field(default=4096, metadata={
        "help": "tokens a document is read up to (upstream: 128); a model that reads fewer cuts there (logged)"})
    preprocessing_num_workers: int | None = field(default=None, metadata={
        "help": "accepted as upstream; tokenizing runs in this process (a fast tokenizer uses its own threads)"})
    overwrite_cache: bool = field(default=False, metadata={
        "help": "accepted as upstream; the splits are tokenized afresh every run"})
    pad_to_max_length: bool = field(default=False, metadata={
        "help": "pad every document to --max_seq_length (upstream's default); False: to the longest of its batch"})
    shuffle_train_dataset: bool = field(default=False, metadata={"help": "shuffle the training split first"})
    shuffle_seed: int = field(default=42, metadata={"help": "the seed of --shuffle_train_dataset"})
    max_train_samples: int | None = field(default=None, metadata={"help": "train on the first N documents"})
    max_eval_samples: int | None = field(default=None, metadata={"help": "evaluate on the first N documents"})
    max_predict_samples: int | None = field(default=None, metadata={"help": "predict the first N documents"})
    metric_name: str | None = field(default=None, metadata={
        "help": "None: accuracy, macro-F1 and micro-F1 (multi-label: micro P/R/F1), computed without the Hub; another "
                "name is loaded with `evaluate.load`, as upstream (the Hub, or a local metric script)"})
    train_file: str | None = field(default=None, metadata={"help": "csv/tsv/json/jsonl/parquet training file"})
    validation_file: str | None = field(default=None, metadata={
        "help": "evaluation file (None: 10%% of train is held out, for --do_eval only)"})
    test_file: str | None = field(default=None, metadata={
        "help": "prediction file (None: 20%% of train is held out, for --do_predict only)"})
    threshold: float | None = field(default=None, metadata={
        "help": "multi-label decision threshold; None: the model's own, else 0.3"})

    def __post_init__(self):
        """The checks upstream makes, and ours, before any data is read; `text_column` is the column(s) to read."""
        if self.text_column_names and self.text_column_name and self.text_column_names != self.text_column_name:
            raise ValueError(f"--text_column_names {self.text_column_names!r} and --text_column_name "
                             f"{self.text_column_name!r} name different columns; pass one of them.")
        self.text_column = ",".join(name.strip() for name in
                                    (self.text_column_names or self.text_column_name or "text").split(","))
        if self.do_regression:
            raise ValueError("--do_regression: these families classify (a label is a class name or id); regression "
                             "is not supported.")
        if self.dataset_name is not None and any((self.train_file, self.validation_file, self.test_file)):
            raise ValueError("Pass --dataset_name or --train_file/--validation_file/--test_file, not both.")
        for flag in ("dataset_config_name", "train_split_name", "validation_split_name", "test_split_name"):
            if getattr(self, flag) is not None and self.dataset_name is None:
                raise ValueError(f"--{flag} names a part of --dataset_name; pass --dataset_name, or pass the files "
                                 "as --train_file, --validation_file and --test_file.")
        for flag in ("max_train_samples", "max_eval_samples", "max_predict_samples"):
            if getattr(self, flag) is not None and getattr(self, flag) < 1:
                raise ValueError(f"--{flag} must be at least 1, got {getattr(self, flag)}.")
        if self.max_seq_length < 2:
            raise ValueError(f"--max_seq_length must be at least 2, got {self.max_seq_length}.")
        read = set(self.text_column.split(",")) | {self.label_column_name}
        if clash := sorted(read & set(names(self.remove_columns))):
            raise ValueError(f"--remove_columns {self.remove_columns!r} removes {', '.join(clash)}, which the run "
                             "reads (--text_column_names / --label_column_name).")


@dataclass
class OutputArguments:
    """What may be replaced in --output_dir (Transformers 4's `TrainingArguments` field; Transformers 5 dropped it)."""

    overwrite_output_dir: bool = field(default=False, metadata={
        "help": "let the run replace files in --output_dir that hf_longdoc did not write (or that were edited), and "
                "discard an interrupted run kept beside it"})


def names(text):
    """The names in a comma-separated flag value (None: none)."""
    return [name.strip() for name in (text or "").split(",") if name.strip()]


def parse_arguments(argv=None):
    """(model, data, output, training arguments) from the command line, or from one JSON file as upstream reads it."""
    parser = HfArgumentParser((ModelArguments, DataTrainingArguments, OutputArguments, TrainingArguments))
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


# The metric names the package's own metrics answer (`hf_longdoc.metrics`): computed without the Hub
PACKAGE_METRICS = ("accuracy", "macro_f1", "micro_f1", "micro_precision", "micro_recall", "exact_match",
                   "classification", "multilabel")


def load_metric(name, cache_dir=None, multi_label=False):
    """`evaluate.load(name)` as upstream loads `--metric_name` (its multi-label configuration for multi-label data),
    or a ValueError in one line naming what is computed without it."""
    import evaluate

    try:
        return evaluate.load(name, config_name="multilabel", cache_dir=cache_dir) if multi_label else \
            evaluate.load(name, cache_dir=cache_dir)
    except Exception as error:  # evaluate raises FileNotFoundError, ConnectionError, ... for a metric it cannot find
        cause = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise ValueError(f"--metric_name {name!r} cannot be loaded ({cause}); pass a metric the package computes "
                         f"itself ({', '.join(PACKAGE_METRICS[:3])}: the default), or a local `evaluate` metric "
                         "script.") from None


def check_arguments(model_args, data_args, training_args):
    """A ValueError naming the flag, before any data is read. Returns the saved model's family, or None."""
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
    trains_from = data_args.train_file or data_args.dataset_name
    if training_args.do_train and trains_from is None:
        raise ValueError("--do_train needs --train_file (or --dataset_name).")
    if not saved and trains_from is None:
        raise ValueError("A new model learns its labels from --train_file; pass it.")
    if training_args.do_predict and data_args.test_file is None and trains_from is None:
        raise ValueError("--do_predict needs --test_file.")
    if training_args.do_eval and not (data_args.validation_file or data_args.test_file or trains_from):
        raise ValueError("--do_eval needs --validation_file.")
    if model_args.config_overrides and saved:
        raise ValueError("--config_overrides sizes a new model; a saved one keeps its config.")
    if model_args.config_name and not (saved and os.path.realpath(model_args.config_name)
                                       == os.path.realpath(model_args.model_name_or_path)):
        raise ValueError(f"--config_name {model_args.config_name!r}: a saved model keeps its own config and a new one "
                         "is sized by --config_overrides; omit --config_name.")
    if training_args.push_to_hub:
        if not training_args.do_train:
            raise ValueError("--push_to_hub uploads the model a run trains; pass --do_train, or upload a saved model "
                             "with `hf-longdoc push FOLDER --repo-id ID`.")
        require_hub_for_push(training_args.hub_token, "--push_to_hub", "drop --push_to_hub and run `hf-longdoc push` "
                                                                       "on the finished folder")
    if data_args.metric_name is not None and data_args.metric_name not in PACKAGE_METRICS:
        load_metric(data_args.metric_name, model_args.cache_dir)  # refused now, not after training
    for flag, effect in (("preprocessing_num_workers", "tokenizing runs in this process"),
                         ("overwrite_cache", "the splits are tokenized afresh every run"),
                         ("trust_remote_code", "the families are this package's own code")):
        if getattr(data_args, flag, None) or getattr(model_args, flag, None):
            logger.info("--%s has no effect here: %s.", flag, effect)
    return saved


# -- data -------------------------------------------------------------------------------------------------------------
SPLITS = ("train", "validation", "test")


def load_named_dataset(data_args, model_args):
    """The splits of --dataset_name: a dataset folder or file in the layouts `hf-longdoc train --dataset` reads, or a
    Hub dataset (with --dataset_config_name), in one line when it cannot be had (offline and not in the cache)."""
    name, config = data_args.dataset_name, data_args.dataset_config_name
    if os.path.exists(os.path.expanduser(name)) and config is None:
        return load_splits(name)
    require_hub("--dataset_name", name)
    try:
        return datasets.load_dataset(name, config, cache_dir=model_args.cache_dir, token=model_args.token)
    except Exception as error:  # datasets raises many types for a dataset it cannot find or read
        cause = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        named = f"--dataset_name {name!r}" + (f" (--dataset_config_name {config!r})" if config else "")
        raise DatasetError(f"{named} could not be loaded ({type(error).__name__}: {cause}); pass a Hub dataset that "
                           "exists and can be reached (or is in the cache, with HF_HUB_OFFLINE=1), or its splits as "
                           "--train_file, --validation_file and --test_file.") from None


def data_sources(data_args, model_args, scratch):
    """({split: file}, text column): the files given, less --remove_splits; or, for --dataset_name (or to join text
    columns with --text_column_delimiter), the splits after upstream's steps (--remove_splits, --*_split_name,
    --remove_columns, the join), written as parquet into `scratch`. Either way the package's loader reads them next,
    with its checks."""
    removed = set(names(data_args.remove_splits))
    columns = data_args.text_column.split(",")
    delimiter = data_args.text_column_delimiter if len(columns) > 1 else None
    if data_args.dataset_name is None:
        given = dict(zip(SPLITS, (data_args.train_file, data_args.validation_file, data_args.test_file)))
        for split in sorted(removed & {split for split, path in given.items() if path}):
            logger.info("--remove_splits: %s (%s) is not read.", split, given[split])
        sources = {split: path for split, path in given.items() if path and split not in removed}
        if delimiter is None:
            return sources, data_args.text_column
        raw = DatasetDict({split: concatenate_datasets(list(load_splits(path).values()))
                           for split, path in sources.items()})
    else:
        raw = load_named_dataset(data_args, model_args)
        if missing := sorted(removed - set(raw)):
            raise ValueError(f"--remove_splits names {', '.join(missing)}, which --dataset_name "
                             f"{data_args.dataset_name!r} does not have (its splits: {', '.join(raw)}).")
        raw = DatasetDict({split: part for split, part in raw.items() if split not in removed})
        for split, chosen in zip(SPLITS, (data_args.train_split_name, data_args.validation_split_name,
                                          data_args.test_split_name)):
            if chosen is None:
                continue
            if chosen not in raw:
                raise ValueError(f"--{split}_split_name {chosen!r} is not a split of --dataset_name "
                                 f"{data_args.dataset_name!r} (its splits: {', '.join(raw)}).")
            logger.info("Using the split %s as %s.", chosen, split)
            raw[split] = raw.pop(chosen)
        if "validation" not in raw and "dev" in raw:
            raw["validation"] = raw.pop("dev")
        if ignored := sorted(set(raw) - set(SPLITS)):
            logger.info("Splits %s of --dataset_name are not read (train, validation and test are).",
                        ", ".join(ignored))
    removable = set(names(data_args.remove_columns))
    raw = DatasetDict({split: part.remove_columns(sorted(removable & set(part.column_names)))
                       for split, part in raw.items() if split in SPLITS})
    text_column = data_args.text_column
    if delimiter is not None:
        for split, part in raw.items():
            if missing := [column for column in columns if column not in part.column_names]:
                raise DatasetError(f"{split}: no column {', '.join(map(repr, missing))} of --text_column_names "
                                   f"({data_args.text_column!r}); its columns are {', '.join(part.column_names)}.")
        raw = raw.map(lambda row: {"__text__": delimiter.join(str(row[column] or "") for column in columns)})
        text_column = "__text__"
    sources = {}
    for split, part in raw.items():
        sources[split] = os.path.join(scratch, f"{split}.parquet")
        part.to_parquet(sources[split])
    return sources, text_column


def needs_validation(training_args):
    """Whether the run evaluates: --do_eval, or an evaluation strategy during training."""
    return training_args.do_eval or (training_args.do_train and training_args.eval_strategy != "no")


def load_data(data_args, training_args, sources, text_column, label_names=None, multi_label=False):
    """(splits, label names, multi-label): the training file's labels (or a saved model's), the given validation and
    test files encoded with them, and, out of the training file, only the splits that are needed and not given
    (validation to evaluate, test to predict; seeded and stratified, as `hf-longdoc train` carves them, logged).
    Every other training document trains."""
    columns = dict(text_column=text_column, label_column=data_args.label_column_name)
    carve = {"validation": needs_validation(training_args) and "validation" not in sources,
             "test": training_args.do_predict and "test" not in sources}
    data = DatasetDict()
    if "train" in sources:
        carved, label_names, multi_label = load_text_classification_dataset(sources["train"],
                                                                            seed=training_args.seed, **columns)
        if any(carve.values()):
            data["train"] = concatenate_datasets([carved["train"]] + [carved[split] for split, needed in carve.items()
                                                                      if not needed])
            total = sum(len(part) for part in carved.values())
            for split in (split for split, needed in carve.items() if needed):
                data[split] = carved[split]
                logger.warning("%d of the %d documents of the training data are held out as the %s split (seeded by "
                               "--seed, as `hf-longdoc train` carves it); pass --%s_file to train on all of them.",
                               len(carved[split]), total, split, split)
        else:  # nothing to carve: the whole file trains
            data["train"] = load_for_evaluation(sources["train"], label_names, multi_label, **columns)
    for split in ("validation", "test"):
        if split in sources:
            data[split] = load_for_evaluation(sources[split], label_names, multi_label, **columns)
    if needs_validation(training_args) and "validation" not in data and "test" in data:
        logger.warning("No validation split: evaluating on the test split, as Transformers' script does.")
        data["validation"] = data["test"]
    return data, label_names, multi_label


def select_documents(data, data_args):
    """`data` shuffled (--shuffle_train_dataset) and cut to --max_train_samples / --max_eval_samples /
    --max_predict_samples, as upstream selects them."""
    if "train" in data and data_args.shuffle_train_dataset:
        logger.info("Shuffling the training split (seed %d).", data_args.shuffle_seed)
        data["train"] = data["train"].shuffle(seed=data_args.shuffle_seed)
    for split, limit in (("train", data_args.max_train_samples), ("validation", data_args.max_eval_samples),
                         ("test", data_args.max_predict_samples)):
        if limit is not None and split in data:
            data[split] = data[split].select(range(min(limit, len(data[split]))))
    return data


# -- model ------------------------------------------------------------------------------------------------------------
def saved_labels(path):
    """(label names in id order, multi-label) of the model saved in `path`."""
    config = AutoConfig.from_pretrained(path)
    return [config.id2label[i] for i in range(config.num_labels)], \
        config.problem_type == "multi_label_classification"


def load_model(model_args, data_args, training_args, saved, data, label_names, multi_label):
    """(model, tokenizer, family name): a saved model as it is (a new head for other labels with
    --ignore_mismatched_sizes); a family around a checkpoint; or a new one."""
    hub = dict(cache_dir=model_args.cache_dir, revision=model_args.model_revision, token=model_args.token)
    if saved:
        path = model_args.model_name_or_path
        model = AutoModelForSequenceClassification.from_pretrained(path, **hub)
        known = [model.config.id2label[i] for i in range(model.config.num_labels)]
        if label_names is not None and list(label_names) != known:
            if not (model_args.ignore_mismatched_sizes and training_args.do_train):
                raise ValueError(f"The data's labels {label_names} are not the model's {known}; pass "
                                 "--ignore_mismatched_sizes with --do_train to fine-tune it with a new head, or pass "
                                 "data with the model's labels.")
            logger.warning("The data's labels %s replace the model's %s: the head is new (--ignore_mismatched_sizes).",
                           label_names, known)
            model = AutoModelForSequenceClassification.from_pretrained(
                path, ignore_mismatched_sizes=True, **label_settings(label_names, multi_label), **hub)
        tokenizer = AutoTokenizer.from_pretrained(model_args.tokenizer_name or path,
                                                  use_fast=model_args.use_fast_tokenizer, **hub)
        return model, tokenizer, saved
    family = get_family(model_args.model_type)
    overrides = parse_config_overrides((model_args.config_overrides or "").split(",") if
                                       model_args.config_overrides else [])
    if model_args.model_name_or_path:
        check_backbone(family, model_args.model_name_or_path)
        model, tokenizer = wrap_backbone(family, model_args.model_name_or_path, label_names, multi_label, overrides,
                                         data_args.max_seq_length, model_args.tokenizer_name)  # `run` sets its length
        return model, tokenizer, family.name
    config = family.build_config(**overrides)
    tokenizer = (AutoTokenizer.from_pretrained(model_args.tokenizer_name, use_fast=model_args.use_fast_tokenizer)
                 if model_args.tokenizer_name else
                 family.tokenizer_for(config, data["train"]["text"], model_args.vocab_size, data_args.max_seq_length))
    model = build_model(family, tokenizer, label_names, multi_label, overrides)
    return model, tokenizer, family.name


def metrics_function(data_args, model_args, multi_label, threshold):
    """Trainer's `compute_metrics`: the package's metrics (the default, and the names in `PACKAGE_METRICS`), or the
    `evaluate` metric --metric_name names, computed as upstream computes it (micro average for multi-label, on the
    labels decided at `threshold`; `combined_score` when it gives several values)."""
    if data_args.metric_name is None or data_args.metric_name in PACKAGE_METRICS:
        return compute_metrics_fn(multi_label, threshold) if multi_label else compute_metrics_fn()
    metric = load_metric(data_args.metric_name, model_args.cache_dir, multi_label)

    def compute_metrics(p):
        logits = p.predictions[0] if isinstance(p.predictions, tuple) else p.predictions
        if multi_label:
            decided = decide(scores_from_logits(logits, MULTI_LABEL), threshold).astype(int)
            result = metric.compute(predictions=decided, references=p.label_ids.astype(int), average="micro")
        else:
            result = metric.compute(predictions=np.argmax(logits, axis=1), references=p.label_ids)
        if len(result) > 1:
            result["combined_score"] = np.mean(list(result.values())).item()
        return result

    return compute_metrics


def write_predictions(trainer, test, model, threshold, output_dir):
    """`predict_results.txt` as Transformers' script writes it (index and predicted label(s), tab-separated); returns
    the test split's metrics (its labels are known)."""
    output = trainer.predict(test, metric_key_prefix="predict")
    logits = output.predictions[0] if isinstance(output.predictions, tuple) else output.predictions
    scores = scores_from_logits(logits, model.config).numpy()
    names_of = model.config.id2label
    if trainer.is_world_process_zero():
        path = os.path.join(output_dir, "predict_results.txt")
        with open(path, "w") as writer:
            writer.write("index\tprediction\n")
            for index, row in enumerate(scores):
                if multi_label_of(model):
                    chosen = ",".join(names_of[i] for i in chosen_classes(row, threshold))
                else:
                    chosen = names_of[int(np.argmax(row))]
                writer.write(f"{index}\t{chosen}\n")
        logger.info("Predictions written to %s", path)
    return output.metrics


def multi_label_of(model):
    return model.config.problem_type == "multi_label_classification"


# -- the run ----------------------------------------------------------------------------------------------------------
def run(model_args, data_args, training_args, saved, scratch):
    """Upstream's steps (data, model, tokenizing, Trainer; train, evaluate, predict) into `training_args.output_dir`;
    returns (trainer, the test split's metrics or None)."""
    label_names, multi_label = saved_labels(model_args.model_name_or_path) if saved else (None, False)
    sources, text_column = data_sources(data_args, model_args, scratch)
    data, label_names, multi_label = load_data(data_args, training_args, sources, text_column, label_names,
                                               multi_label)
    data = select_documents(data, data_args)
    model, tokenizer, family_name = load_model(model_args, data_args, training_args, saved, data, label_names,
                                               multi_label)
    max_length = reading_length(model.config, data_args.max_seq_length)
    if max_length is not None:
        tokenizer.model_max_length = max_length  # the saved tokenizer cuts where the model stops reading
    max_length = max_length or data_args.max_seq_length
    if training_args.do_train:  # as `hf-longdoc train`: the saved model reads this length of a longer input
        model.config.max_input_length = max_length
    encoded = tokenize(data, tokenizer, max_length)
    if training_args.do_train and not saved:
        fit_statistics(get_family(family_name), model, encoded["train"]["input_ids"], tokenizer)
    threshold = decision_threshold(model.config, data_args.threshold, multi_label) if multi_label else None
    collator = (DataCollatorWithPadding(tokenizer, padding="max_length", max_length=max_length)
                if data_args.pad_to_max_length else DataCollatorWithPadding(tokenizer))
    trainer = Trainer(
        model=model, args=training_args,
        train_dataset=encoded["train"] if training_args.do_train else None,
        eval_dataset=encoded["validation"] if needs_validation(training_args) else None,
        processing_class=tokenizer, data_collator=collator,
        compute_metrics=metrics_function(data_args, model_args, multi_label, threshold),
    )
    results, test_metrics = {}, None
    if training_args.do_train:
        result = trainer.train(resume_from_checkpoint=training_args.resume_from_checkpoint)
        if multi_label:
            model.config.multi_label_threshold = threshold
        trainer.save_model()  # the model, its config and tokenizer, safetensors
        save_tokenizer(tokenizer, training_args.output_dir)  # under a class name Transformers 4 loads too
        metrics = {**result.metrics, "train_samples": len(encoded["train"])}
        trainer.log_metrics("train", metrics)
        trainer.save_metrics("train", metrics, combined=False)
        trainer.save_state()
        results.update(metrics)
    if training_args.do_eval:
        metrics = {**trainer.evaluate(), "eval_samples": len(encoded["validation"])}
        trainer.log_metrics("eval", metrics)
        trainer.save_metrics("eval", metrics, combined=False)
        results.update(metrics)
    if training_args.do_predict:
        metrics = write_predictions(trainer, encoded["test"], model, threshold, training_args.output_dir)
        test_metrics = {key.removeprefix("predict_"): value for key, value in metrics.items()}  # the card's scores
        metrics["predict_samples"] = len(encoded["test"])
        trainer.log_metrics("predict", metrics)
        trainer.save_metrics("predict", metrics, combined=False)
        results.update(metrics)
    if trainer.is_world_process_zero():  # this run's metrics only (Trainer would merge an earlier run's)
        with open(os.path.join(training_args.output_dir, "all_results.json"), "w") as f:
            json.dump(results, f, indent=4, sort_keys=True)
    return trainer, test_metrics


def finish_training_folder(trainer, folder, data_args, test_metrics):
    """The staging folder as a finished run leaves it: Trainer's checkpoints (which hold pickles: optimizer.pt,
    scheduler.pt, rng_state.pth, training_args.bin) removed, the arguments as JSON, and the package's model card."""
    replace_pickles(trainer.args, folder.staging, folder.target)
    card = make_model_card(folder.staging, dataset_name=data_args.dataset_name or data_args.train_file,
                           metrics=test_metrics)
    card.save(os.path.join(folder.staging, "README.md"))


# What a run that does not train writes, and what it removes of an earlier one's (so that no two runs' results mix)
RESULT_FILES = ("eval_results.json", "predict_results.txt", "predict_results.json", "all_results.json")


def result_files(training_args):
    """The files a run that does not train writes into --output_dir."""
    return ["all_results.json"] + (["eval_results.json"] if training_args.do_eval else []) + (
        ["predict_results.txt", "predict_results.json"] if training_args.do_predict else [])


def record_results(folder, written):
    """List the files `written` in `folder`'s manifest (a rerun may replace them), and remove the results an earlier
    run of this script wrote there that this one did not replace (logged); nothing else there is touched."""
    manifest = read_manifest(folder)
    stale = [name for name in RESULT_FILES if name not in written and is_unchanged(folder, name, manifest)]
    for name in stale:
        os.remove(os.path.join(folder, name))
        manifest["run"].pop(name, None)
        manifest["outputs"].pop(name, None)
    if stale:
        logger.info("Removed the earlier run's %s from %s (this run does not write them).", ", ".join(stale), folder)
    for name in written:  # a file of the training run that wrote the folder stays one (a new training replaces it)
        manifest["run" if name in manifest["run"] else "outputs"][name] = file_digest(os.path.join(folder, name))
    write_manifest(folder, manifest)


# RunFolder's messages name this script's flags
FLAGS = {"overwrite": "--overwrite_output_dir", "resume": "--resume_from_checkpoint (its last checkpoint-N folder)"}


def main(argv=None):
    """Run the script on `argv` (None: the command line); returns the Trainer. A user error is a ValueError (or
    TypeError, OSError) raised before the work it stops."""
    model_args, data_args, output_args, training_args = parse_arguments(argv)
    logging.basicConfig(format="%(levelname)s %(name)s: %(message)s", level=logging.INFO)
    saved = check_arguments(model_args, data_args, training_args)
    set_seed(training_args.seed)
    if not training_args.do_train:  # results beside what --output_dir holds (the model's folder, for one)
        output_dir = training_args.output_dir
        written = result_files(training_args)
        require_writable_folder(output_dir, "--output_dir")
        check_files_free([os.path.join(output_dir, name) for name in written], output_args.overwrite_output_dir,
                         "--overwrite_output_dir")
        with tempfile.TemporaryDirectory() as scratch:
            trainer, _ = run(model_args, data_args, training_args, saved, scratch)
        if trainer.is_world_process_zero():
            record_results(output_dir, [name for name in written if os.path.exists(os.path.join(output_dir, name))])
        return trainer
    # a training run: `hf-longdoc train`'s rule (staged beside --output_dir, which a finished run replaces)
    folder = RunFolder(training_args.output_dir, overwrite=output_args.overwrite_output_dir, argument="--output_dir",
                       flags=FLAGS)
    checkpoint = training_args.resume_from_checkpoint
    folder.resume = checkpoint is not None and os.path.realpath(checkpoint).startswith(folder.staging + os.sep)
    with folder, tempfile.TemporaryDirectory() as scratch:
        staged = dataclasses.replace(training_args, output_dir=folder.staging, push_to_hub=False)
        trainer, test_metrics = run(model_args, data_args, staged, saved, scratch)
        if folder.owner:
            finish_training_folder(trainer, folder, data_args, test_metrics)
        folder.commit()
    if training_args.push_to_hub and folder.owner:  # the finished folder, as `hf-longdoc push` uploads it
        repo_id = training_args.hub_model_id or os.path.basename(folder.target)
        push_to_hub(folder.target, repo_id, private=training_args.hub_private_repo is not False,
                    token=training_args.hub_token)
        logger.info("Pushed %s to the Hub as %s.", folder.target, repo_id)
    return trainer


def cli(argv=None):
    """`main` on the command line: a user error is one line on stderr and exit code 2, as `hf-longdoc` prints it."""
    try:
        main(argv)
    except (ValueError, TypeError, OSError) as error:
        print(f"{PROGRAM}: error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # an interrupted training run is kept beside --output_dir (logged)
        print(f"{PROGRAM}: interrupted", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(cli())
