"""Load a labelled text dataset (Hub id or local csv/jsonl/parquet) into train/validation/test with `datasets`.

The result always has a `text` column and a `label` column: a `ClassLabel` id for single-label data, or a float
multi-hot list for multi-label data (a column whose values are lists of label names). Missing splits are carved out of
`train`, seeded and stratified when the labels allow it.
"""

import logging
import os

import datasets
from datasets import ClassLabel, DatasetDict, Sequence, Value

logger = logging.getLogger(__name__)
LOCAL_FORMATS = {".csv": "csv", ".tsv": "csv", ".json": "json", ".jsonl": "json", ".parquet": "parquet"}


class DatasetError(ValueError):
    """A dataset that cannot be used as given; the message says what to change."""


def _load_raw(source):
    path = os.path.expanduser(source)
    extension = os.path.splitext(path)[1].lower()
    if os.path.exists(path) or extension in LOCAL_FORMATS:
        if not os.path.isfile(path):
            raise DatasetError(f"Dataset file {source!r} does not exist or is not a file.")
        if extension not in LOCAL_FORMATS:
            raise DatasetError(
                f"Cannot read {source!r}: the extension must be one of {', '.join(sorted(LOCAL_FORMATS))}."
            )
        kwargs = {"delimiter": "\t"} if extension == ".tsv" else {}
        try:
            return datasets.load_dataset(LOCAL_FORMATS[extension], data_files={"train": path}, **kwargs)
        except Exception as error:  # datasets raises many types for a malformed file
            raise DatasetError(f"Could not read {source!r} as {LOCAL_FORMATS[extension]}: {error}") from error
    try:
        return datasets.load_dataset(source)
    except Exception as error:
        raise DatasetError(
            f"Could not load dataset {source!r} from the Hub ({type(error).__name__}: {error}). Pass a Hub id that "
            "exists and is reachable, or a local .csv/.jsonl/.parquet file."
        ) from error


def _is_multilabel(column_values):
    return any(isinstance(value, (list, tuple)) for value in column_values[:100])


def _normalise_columns(dataset, text_column, label_column):
    """Rename to text/label, and encode labels as ClassLabel ids or float multi-hot vectors."""
    some_split = next(iter(dataset.values()))
    for column, option in ((text_column, "--text-column"), (label_column, "--label-column")):
        if column not in some_split.column_names:
            raise DatasetError(
                f"Column {column!r} not found (columns: {', '.join(some_split.column_names)}); pass {option}."
            )
    dataset = dataset.select_columns([text_column, label_column])
    if text_column != "text":
        dataset = dataset.rename_column(text_column, "text")
    if label_column != "label":
        dataset = dataset.rename_column(label_column, "label")
    feature = some_split.features[label_column]
    if isinstance(feature, ClassLabel):
        return dataset, feature.names, False
    values = [value for split in dataset.values() for value in split["label"]]
    if _is_multilabel(values):
        names = sorted({str(label) for labels in values for label in labels})
        index = {name: i for i, name in enumerate(names)}

        def multi_hot(example):
            vector = [0.0] * len(names)
            for label in example["label"]:
                vector[index[str(label)]] = 1.0
            return {"label": vector}

        features = dataset["train"].features.copy()
        features["label"] = Sequence(Value("float32"), length=len(names))
        return dataset.map(multi_hot, features=features), names, True
    names = sorted({str(value) for value in values})
    features = dataset["train"].features.copy()
    features["label"] = ClassLabel(names=names)
    dataset = dataset.map(lambda example: {"label": str(example["label"])})
    return dataset.cast(features), names, False


def _split(dataset, name, fraction, seed, stratify):
    try:
        stratify_by = "label" if stratify else None
        parts = dataset.train_test_split(test_size=fraction, seed=seed, stratify_by_column=stratify_by)
    except ValueError:  # a class too rare to stratify
        parts = dataset.train_test_split(test_size=fraction, seed=seed)
    return parts["train"], parts["test"]


def load_text_classification_dataset(source, text_column="text", label_column="label", seed=42,
                                      validation_fraction=0.1, test_fraction=0.2):
    """Load `source` (Hub id or local file) as a DatasetDict with train/validation/test, `text` and `label`.

    Returns `(dataset, label_names, multi_label)`.
    """
    raw = _load_raw(source)
    if "train" not in raw:
        raise DatasetError(f"Dataset {source!r} has no `train` split (splits: {', '.join(raw)}).")
    if "validation" not in raw and "dev" in raw:
        raw["validation"] = raw.pop("dev")
    dataset, names, multi_label = _normalise_columns(raw, text_column, label_column)
    for split, part in dataset.items():
        kept = part.filter(lambda example: isinstance(example["text"], str) and example["text"].strip() != "")
        if len(kept) < len(part):
            logger.warning("%s: dropped %d documents with empty or missing text.", split, len(part) - len(kept))
            dataset[split] = kept
    if len(dataset["train"]) == 0:
        raise DatasetError(f"Dataset {source!r} has an empty `train` split.")
    splits = {"train": dataset["train"]}
    stratify = not multi_label
    if "test" in dataset:
        splits["test"] = dataset["test"]
    else:
        splits["train"], splits["test"] = _split(splits["train"], "test", test_fraction, seed, stratify)
    if "validation" in dataset:
        splits["validation"] = dataset["validation"]
    else:
        fraction = validation_fraction / (1.0 - (0.0 if "test" in dataset else test_fraction))
        splits["train"], splits["validation"] = _split(splits["train"], "validation", fraction, seed, stratify)
    return DatasetDict(splits), names, multi_label
