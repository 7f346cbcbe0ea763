"""What `predict` reads, checked before any work: the rows of a file, a Hub dataset, a folder (of `.txt` files, or in
a layout `datasets` writes) or a `datasets.Dataset`, with a digest of them for the run's fingerprint
(`load_documents`); the columns it reads, names rows by and copies (`resolve_columns`); and an output that would
overwrite them (`refuse_output_over_inputs`)."""

import logging
import os

import datasets

from ..data.folders import load_text_folder
from ..data.inversion import join_parts
from ..data.layouts import TEXT_FILES, folder_layout
from ..data.loading import dataset_fingerprint, load_splits
from ..saving.run_folder import file_digest
from .writing import reserved_columns

logger = logging.getLogger(__name__)


def refuse_output_over_inputs(output, dataset):
    """A ValueError before any work when `output` is the dataset itself or lies in its folder of texts: --overwrite
    replaces an earlier output, never what the run reads."""
    if output is None or not isinstance(dataset, (str, os.PathLike)) or not os.path.exists(dataset):
        return
    source, target = os.path.realpath(os.fspath(dataset)), os.path.realpath(output)
    if target == source or (os.path.isdir(source) and os.path.commonpath([source, target]) == source):
        what = "is" if target == source else "lies in"
        raise ValueError(f"`output` (--output) {output!r} {what} the `dataset` (--dataset) the run reads; write the "
                         "predictions elsewhere (--overwrite replaces an earlier output, never an input).")


def load_documents(source):
    """The input rows and a digest of the input: a `datasets.Dataset` as given; a folder of `.txt` files (digest:
    its files' names and bytes, the fingerprint `load_text_folder` gave the rows, so the files are hashed once); a
    csv/jsonl/parquet file (digest: its bytes); a folder `save_to_disk` wrote or of data files (`layouts`; digest: its
    files' names and bytes); a Hub dataset (digest: its id and `datasets`' fingerprint); every split in order."""
    if isinstance(source, datasets.Dataset):
        if source._indices is not None:  # a split or a selection: rows read through an index table, which `datasets`
            source = source.flatten_indices()  # cannot gather once no column is left (IndexError in `fast_gather`)
        return source, f"dataset:{source._fingerprint}"
    if not isinstance(source, (str, os.PathLike)):
        raise TypeError(f"`dataset` (--dataset) must be a path, a Hub id or a datasets.Dataset, got "
                        f"{type(source).__name__}.")
    source = os.fspath(source)
    path = os.path.expanduser(source)
    if os.path.isdir(path) and folder_layout(path, labelled=False).kind == TEXT_FILES:
        documents = load_text_folder(path)
        return documents, f"folder:{documents._fingerprint}"
    raw = load_splits(source)
    if len(raw) > 1:
        logger.info("Reading every split of %s, in this order: %s.", source, ", ".join(raw))
    documents = datasets.concatenate_datasets(list(raw.values())) if len(raw) > 1 else next(iter(raw.values()))
    if os.path.isfile(path):
        return documents, f"file:{file_digest(path)}"
    if os.path.isdir(path):  # a folder `save_to_disk` wrote, or of data files: its files' names and bytes
        return documents, f"folder:{dataset_fingerprint(path)}"
    return documents, f"hub:{source}:{documents._fingerprint}"


JOINED_TEXT = "__document__"  # the documents joined from several --text-column columns


def text_column_names(text_column):
    """The columns `text_column` names: one, or several comma-separated (`title,text`)."""
    return [name.strip() for name in text_column.split(",") if name.strip()] or [text_column]


def resolve_columns(documents, settings, labels=()):
    """(documents, text column, id column or None for row numbers, kept columns), with a ValueError naming what is
    missing, clashing or duplicated; `labels` are the model's classes (their CSV score columns are output names).
    `settings.text_column` may name several columns (`title,text`, as `train` reads them): their texts are joined into
    one document per row the way training joined them (`join_parts`)."""
    columns = documents.column_names
    shown = ", ".join(columns)
    names = text_column_names(settings.text_column)
    for name in names:
        check_text_column(documents, name, shown)
    id_column = settings.id_column
    if id_column is not None and id_column not in columns:
        raise ValueError(f"`id_column` (--id-column) {id_column!r} is not a column of the input; its columns are "
                         f"{shown}.")
    if id_column is None and "id" in columns:
        id_column = "id"
    missing = [name for name in settings.keep_columns if name not in columns]
    if missing:
        raise ValueError(f"`keep_columns` (--keep-columns) {', '.join(map(repr, missing))}: not a column of the "
                         f"input; its columns are {shown}.")
    keep = [name for name in settings.keep_columns if name != id_column]
    reserved = reserved_columns(labels)
    if (id_column or "id") in reserved:
        name = id_column or "id"
        raise ValueError(f"Input column {name!r}, the id column, has the name of {reserved[name]}; the output would "
                         "hold two columns of that name. Rename it in the input, or pass another --id-column.")
    for name in keep:  # a kept `label` (the gold one, beside the prediction) is written as `input_label`
        if name in reserved and (f"input_{name}" in columns or f"input_{name}" in reserved):
            raise ValueError(f"`keep_columns` (--keep-columns) {name!r} has the name of {reserved[name]}, and "
                             f"'input_{name}', where it would be kept, is a column of the input too; leave one out.")
    if id_column is not None:
        seen = set()
        for row, value in enumerate(documents[id_column]):
            if value is None or (isinstance(value, float) and value != value):
                raise ValueError(f"`id_column` (--id-column) {id_column!r} has no value in row {row} (counting from "
                                 "0); ids must name every row: fill it in, or pass a column with a value in each row"
                                 + (", or --id-column with another one (without it, the input's `id` column is "
                                    "used)" if settings.id_column is None else "") + ".")
            if value in seen:
                message = (f"`id_column` (--id-column) {id_column!r} has duplicate values, e.g. {value!r} (again in "
                           f"row {row}, counting from 0); ids must name one row each: pass a column with unique "
                           "values")
                if settings.id_column is None:
                    message += ", or --id-column with another one (without it, the input's `id` column is used)"
                raise ValueError(message + ".")
            seen.add(value)
    if len(names) == 1:
        return documents, names[0], id_column, keep
    documents = documents.map(lambda row: {JOINED_TEXT: join_parts([row[name] for name in names])},
                              desc="Joining the text columns")
    return documents, JOINED_TEXT, id_column, keep


def prepare_columns(documents, settings, labels):
    """`resolve_columns`, and a kept column with the name of an output column (the gold `label`) renamed
    `input_<name>`, logged: (documents, text column, id column or None, kept columns)."""
    documents, text_column, id_column, keep = resolve_columns(documents, settings, labels)
    reserved = reserved_columns(labels)
    if renamed := {name: f"input_{name}" for name in keep if name in reserved}:
        logger.warning("Kept input columns with the names of output columns are written under other names, so "
                       "that no name stands twice: %s.", ", ".join(f"{name} -> {new}" for name, new in renamed.items()))
        documents = documents.rename_columns(renamed)
        keep = [renamed.get(name, name) for name in keep]
    return documents, text_column, id_column, keep


def check_text_column(documents, name, shown):
    """A ValueError unless `name` is a column of `documents` that holds text."""
    if name not in documents.column_names:
        raise ValueError(f"`text_column` (--text-column) {name!r} is not a column of the input; its columns are "
                         f"{shown}.")
    feature = documents.features[name]
    if isinstance(feature, datasets.Json):  # JSON values of several types: name the first that is not text
        row, value = next(((i, value) for i, value in enumerate(documents[name])
                           if value is not None and not isinstance(value, str)), (None, None))
        raise ValueError(f"`text_column` (--text-column) {name!r} mixes text with other JSON values (row {row}, "
                         f"counting from 0, holds {type(value).__name__} {str(value)[:40]!r}), which `datasets` reads "
                         "as JSON, not text; write every document as a JSON string.")
    text_type = getattr(feature, "dtype", None)
    if text_type not in ("string", "large_string", "null"):
        raise ValueError(f"`text_column` (--text-column) {name!r} holds {text_type or 'lists'}, not text; pass the "
                         f"column with the documents (columns: {shown}).")


__all__ = ["JOINED_TEXT", "check_text_column", "load_documents", "prepare_columns", "refuse_output_over_inputs",
           "resolve_columns", "text_column_names"]
