"""What a local `--dataset` folder holds, decided by the files in it, and the reader of the folders `save_to_disk`
writes.

A folder is read in the first of these layouts that fits it (`folder_layout`):

1. **`DatasetDict.save_to_disk`**: `dataset_dict.json` beside one folder per split. Its splits, as saved.
2. **`Dataset.save_to_disk`**: `dataset_info.json` and `state.json` beside the Arrow files. One split, read as a single
   file is read.
3. **Data files named by split**, as `datasets.load_dataset(folder)` finds them with its own patterns
   (`data/train-00000-of-00001.parquet`, `train.csv`, `validation.jsonl`, `test/part-0.parquet`; `dev` and `valid` are
   validation): those splits. Each split's files are in one format; the splits may differ.
4. **`.txt` documents**: class folders, `LABEL/*.txt` (scikit-learn's `load_files` layout) for `train`, `evaluate` and
   `compare`; `.txt` files at any depth for `predict` (`folders.py`).
5. **Data files not named by split**, in a folder without `.txt` documents: one split, read as a single file is read.

Data files are the formats `--dataset` reads as a file (LOCAL_FORMATS: .csv, .tsv, .json, .jsonl, .parquet);
`loading` checks each one as it checks a file given alone (its encoding, its rows). A folder in none of
these layouts is a DatasetError that names them and says what the folder holds.
"""

import logging
import os
import re
from dataclasses import dataclass, field

import datasets

# `_get_data_files_patterns` is how `load_dataset(folder)` decides the splits (`get_data_patterns` calls it with a
# resolver that globs the folder). It is private: tests/test_dataset_folders.py fails if it changes.
from datasets.data_files import DEFAULT_PATTERNS_ALL, FILES_TO_IGNORE, _get_data_files_patterns
from fsspec.utils import glob_translate

from .errors import DatasetError
from .folders import EXTENSION, _visible

logger = logging.getLogger(__name__)
# The `datasets` reader of each file extension `--dataset` reads, alone or in a folder.
LOCAL_FORMATS = {".csv": "csv", ".tsv": "csv", ".json": "json", ".jsonl": "json", ".parquet": "parquet"}
SAVED_DATASET_DICT = "DatasetDict.save_to_disk"
SAVED_DATASET = "Dataset.save_to_disk"
DATA_FILES = "data files"
TEXT_FILES = ".txt documents"
_UNNAMED = {str(split): patterns for split, patterns in DEFAULT_PATTERNS_ALL.items()}  # every file is `train`
# Never data: the metadata `datasets` passes over (README.md, dataset_info.json, ...), and the state.json that
# `Dataset.save_to_disk` writes, which it does not (a folder holding saved datasets is not a folder of JSON data).
NOT_DATA = {*FILES_TO_IGNORE, "state.json"}


@dataclass(frozen=True)
class FolderLayout:
    """What `folder_layout` found.

    Args:
        kind: SAVED_DATASET_DICT, SAVED_DATASET, DATA_FILES or TEXT_FILES.
        named_splits: whether the folder names its splits (a DatasetDict, data files named by split), so that they
            are used as a Hub dataset's are (`evaluate` scores `test`); else it is one split, as a single file is.
        files: for DATA_FILES, the data files of each split, in sorted order.
    """

    kind: str
    named_splits: bool = False
    files: dict = field(default_factory=dict)


def _scan(folder, extensions, nested_text):
    """(the data files under `folder`: sorted paths relative to it with `/`, whether it holds a `.txt` document: at any
    depth, or with `nested_text` only in a subfolder, where class folders keep them). Hidden files and folders are
    not looked at, as `datasets` and `folders.text_files` do not read them, nor is NOT_DATA."""
    data, text = [], False
    for root, folders, files in os.walk(folder):
        folders[:] = sorted(name for name in folders if _visible(name))
        for name in filter(_visible, files):
            extension = os.path.splitext(name)[1].lower()
            if extension in extensions and name not in NOT_DATA:
                data.append(os.path.relpath(os.path.join(root, name), folder).replace(os.sep, "/"))
            text = text or (extension == EXTENSION and not (nested_text and root == folder))
    return sorted(data), text


def _split_files(folder, data):
    """({split: sorted absolute paths}, whether the files name their splits): which of `data` (paths relative to
    `folder`) `datasets.load_dataset(folder)` reads as which split, by its own patterns (split names in file or folder
    names, else every file is `train`). The patterns are matched against `data`, not globbed on disk: `datasets`
    globs the folder once per pattern, about 40 times, which took 61 s for a class folder of 20,000 `.txt` files
    beside one CSV."""
    expressions = {}

    def resolve(pattern):  # what fsspec's glob, which `datasets` resolves patterns with, would find among `data`
        expression = expressions.setdefault(pattern, re.compile(glob_translate(pattern)))
        return [path for path in data if expression.fullmatch(path)]

    try:
        patterns = _get_data_files_patterns(resolve)
    except FileNotFoundError:  # no pattern finds a file
        return {}, False
    named = {str(split): found for split, found in patterns.items()} != _UNNAMED
    files = {str(split): sorted({os.path.join(os.path.abspath(folder), path) for pattern in found
                                 for path in resolve(pattern)}) for split, found in patterns.items()}
    return {split: found for split, found in files.items() if found}, named


def _holdings(folder):
    """What the top of `folder` holds, for an error: `3 files (a.arrow, b.md, c.xlsx) and 1 subfolder (data)`."""
    names = sorted(filter(_visible, os.listdir(folder)))
    folders = [name for name in names if os.path.isdir(os.path.join(folder, name))]
    files = [name for name in names if name not in folders]

    def some(kind, found):
        shown = ", ".join(found[:5]) + (", ..." if len(found) > 5 else "")
        return f"{len(found)} {kind}{'' if len(found) == 1 else 's'} ({shown})"

    parts = [some(kind, found) for kind, found in (("file", files), ("subfolder", folders)) if found]
    return " and ".join(parts) or "nothing (hidden files aside)"


def _unknown_layout(folder, labelled, argument, extensions):
    """The DatasetError for a folder in no layout: what it holds, each layout it could be in, and a subfolder that
    `save_to_disk` wrote, when one is the folder meant."""
    markers = ("dataset_dict.json", "state.json")
    saved = [name for name in sorted(filter(_visible, os.listdir(folder)))
             if any(os.path.isfile(os.path.join(folder, name, marker)) for marker in markers)]
    hint = f" Its subfolder {saved[0]!r} was written by `save_to_disk`: pass {os.path.join(folder, saved[0])!r}." \
        if saved else ""
    documents = (f"class folders, one subfolder per class with that class's documents, "
                 f"{os.path.join(folder, '<label>', '*' + EXTENSION)} (scikit-learn's `load_files` layout)"
                 if labelled else f"{EXTENSION} files, one document each, at any depth")
    return DatasetError(
        f"{argument} {folder!r} is a folder in none of the layouts it reads; it holds {_holdings(folder)}.{hint} A "
        "folder is read as: a DatasetDict or a Dataset written by `save_to_disk` (dataset_dict.json, or "
        "dataset_info.json and state.json, at its top; read with `datasets.load_from_disk`); data files as "
        f"`datasets.load_dataset(folder)` finds them ({'/'.join(sorted(extensions))}, named by split: "
        f"data/train-00000-of-00001.parquet, train.csv, validation.jsonl, test.parquet); or {documents}.")


def folder_layout(folder, labelled=True, argument="--dataset"):
    """The FolderLayout of `folder` (the module docstring lists the layouts, in the order they are tried): `labelled`
    for `train`, `evaluate` and `compare` (`.txt` documents are class folders), else for `predict` (`.txt` files at any
    depth). A DatasetError names the layouts when none fits."""
    names = set(os.listdir(folder))
    if "dataset_dict.json" in names:
        return FolderLayout(SAVED_DATASET_DICT, named_splits=True)
    if {"dataset_info.json", "state.json"} <= names:
        return FolderLayout(SAVED_DATASET)
    data, has_text = _scan(folder, LOCAL_FORMATS, nested_text=labelled)
    if data:
        files, named = _split_files(folder, data)
        if files and (named or not has_text):
            if has_text:
                logger.warning("%s %r holds data files named by split (%s) and %s files; it is read as the data "
                               "files, as `datasets.load_dataset` reads it, and the %s files are not read.", argument,
                               folder, ", ".join(files), EXTENSION, EXTENSION)
            return FolderLayout(DATA_FILES, named_splits=named, files=files)
    if has_text:
        return FolderLayout(TEXT_FILES)
    raise _unknown_layout(folder, labelled, argument, LOCAL_FORMATS)


def load_saved(folder, argument="--dataset"):
    """The splits of a folder `save_to_disk` wrote, read with `datasets.load_from_disk`: a DatasetDict's as saved, a
    Dataset's as one split, `train`. Each split is a copy in the Hugging Face cache (see `_cached_copy`)."""
    try:
        saved = datasets.load_from_disk(folder)
    except Exception as error:  # a folder save_to_disk did not finish, or one written by another datasets version
        raise DatasetError(f"{argument} {folder!r} holds the files `save_to_disk` writes, but "
                           f"`datasets.load_from_disk` cannot read it ({type(error).__name__}: {error}); save it "
                           "again.") from error
    parts = saved if isinstance(saved, datasets.DatasetDict) else {"train": saved}
    if not any(len(part) for part in parts.values()):
        raise DatasetError(f"{argument} {folder!r} holds no rows; save a dataset with one row per document.")
    return datasets.DatasetDict({split: _cached_copy(part) for split, part in parts.items()})


def _cached_copy(part):
    """`part` read again by `datasets`' `arrow` builder, into the Hugging Face cache. `load_from_disk` maps the
    folder's own Arrow files, and `datasets` writes the cache file of every later `map` or `filter` beside them: into
    the user's folder, which that litters and whose fingerprint it changes (a `--resume` would be refused). The copy is
    keyed by the files like any other local data file's, so a changed folder is copied again."""
    files = [entry["filename"] for entry in part.cache_files]
    if not files:  # held in memory: nothing is written beside it
        return part
    return datasets.load_dataset("arrow", data_files={"train": files}, features=part.features, split="train")


__all__ = ["DATA_FILES", "LOCAL_FORMATS", "FolderLayout", "SAVED_DATASET", "SAVED_DATASET_DICT", "TEXT_FILES",
           "folder_layout", "load_saved"]
