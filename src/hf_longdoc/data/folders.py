"""Folders of `.txt` files as datasets: one document per file.

Two layouts:
- **unlabelled** (`predict`): every `.txt` file under the folder, at any depth, is a document; its `id` is its path
  relative to the folder (with `/`), so `docs/2021/a.txt` is `2021/a.txt`.
- **labelled** (`train`, `evaluate`, `compare`): scikit-learn's `load_files` layout, `docs/<label>/*.txt`: each
  subfolder is a class named after it, and every `.txt` file under it (at any depth) is one of its documents.

Files are read in sorted path order, so the rows are the same on every machine. A file that is not valid UTF-8 is
decoded with replacement characters (U+FFFD) and counted in a log line, never skipped. Rows are produced by
`Dataset.from_generator`, which writes them to an Arrow file as they come: a folder larger than memory works.
"""

import hashlib
import logging
import os

import datasets
from datasets import Features, Value

from .errors import DatasetError

logger = logging.getLogger(__name__)
EXTENSION = ".txt"
_REPLACED = "__replaced__"  # a temporary column: whether the file needed replacement characters


def _visible(name):
    return not name.startswith(".")  # .git, .DS_Store, .ipynb_checkpoints are not documents


def text_files(folder):
    """The `.txt` files under `folder` at any depth, as sorted paths relative to it (with `/`), and how many other
    files were passed over."""
    found, others = [], 0
    for root, folders, files in os.walk(folder):
        folders[:] = sorted(name for name in folders if _visible(name))
        for name in sorted(filter(_visible, files)):
            if name.lower().endswith(EXTENSION):
                found.append(os.path.relpath(os.path.join(root, name), folder).replace(os.sep, "/"))
            else:
                others += 1
    return sorted(found), others


def read_text(path):
    """The text of the file at `path` and whether it needed replacement characters (it was not valid UTF-8). A
    UTF-8 byte-order mark is not part of the text."""
    with open(path, "rb") as f:
        data = f.read()
    try:
        return data.decode("utf-8-sig"), False
    except UnicodeDecodeError:
        return data.decode("utf-8-sig", errors="replace"), True


def listing_digest(folder, paths):
    """A SHA-256 over the names and bytes of `paths` under `folder`: it changes when a file is added, removed, renamed
    or edited, even by an edit that keeps the file's size and modification time (`cp -p`, `rsync -t`, an editor that
    restores the time), which a digest of sizes and times would miss and so serve the old text from the cache. It
    reads every file (4-6 s for 100,000 files of 2-5 KB in the page cache on 2 shared cores; docs/your_data.md)."""
    digest = hashlib.sha256()
    for path in paths:
        content = hashlib.sha256()
        # Unbuffered reads in 1 MiB blocks: a small file is one read, and a large one never held whole (three times
        # faster than `hashlib.file_digest`, which allocates a 256 KiB buffer per file).
        with open(os.path.join(folder, path), "rb", buffering=0) as f:
            while block := f.read(1 << 20):
                content.update(block)
        digest.update(path.encode("utf-8", "surrogateescape") + b"\0" + content.digest())
    return digest.hexdigest()


def _rows(folder, paths, labels):
    for path, label in zip(paths, labels):
        text, replaced = read_text(os.path.join(folder, path))
        row = {"id": path, "text": text, _REPLACED: replaced}
        if label is not None:
            row["label"] = label
        yield row


def _build(folder, paths, labels, argument):
    """The rows of `paths` as a Dataset, with the count of files that needed replacement characters logged."""
    features = {"id": Value("string"), "text": Value("string"), _REPLACED: Value("bool")}
    if labels[0] is not None:
        features["label"] = Value("string")
    # The fingerprint names the folder, its layout and its files' names and bytes, so a changed folder is read again,
    # not taken from the cache of an earlier read (however the edit left the files' sizes and times).
    layout = "labelled" if labels[0] is not None else "unlabelled"
    fingerprint = hashlib.sha256(f"{os.path.abspath(folder)}\0{layout}\0{listing_digest(folder, paths)}".encode())
    dataset = datasets.Dataset.from_generator(
        _rows, features=Features(features), gen_kwargs={"folder": folder, "paths": paths, "labels": labels},
        fingerprint=fingerprint.hexdigest()[:32])
    replaced = [path for path, flagged in zip(paths, dataset[_REPLACED]) if flagged]
    if replaced:
        shown = ", ".join(replaced[:10]) + (f" and {len(replaced) - 10} more" if len(replaced) > 10 else "")
        logger.warning("%s %r: %d of %d files are not valid UTF-8 (%s); they were read with replacement characters "
                       "(U+FFFD) where their bytes do not decode (convert them, e.g. `iconv -f latin1 -t utf-8`).",
                       argument, folder, len(replaced), len(dataset), shown)
    return dataset.remove_columns(_REPLACED)


def _check_folder(folder, argument):
    if not os.path.isdir(folder):
        raise DatasetError(f"{argument} {folder!r} is not a folder.")


def load_text_folder(folder, argument="--dataset"):
    """Every `.txt` file under `folder` (at any depth) as a Dataset with `id` (the path relative to `folder`) and
    `text`, in sorted path order."""
    _check_folder(folder, argument)
    paths, others = text_files(folder)
    if not paths:
        raise DatasetError(f"{argument} {folder!r} holds no {EXTENSION} files; put one document per {EXTENSION} "
                           "file in it (subfolders are read too).")
    if others:
        logger.info("%s %r: reading %d %s files; %d other files are not documents and were passed over.", argument,
                    folder, len(paths), EXTENSION, others)
    return _build(folder, paths, [None] * len(paths), argument)


def load_labelled_folder(folder, argument="--dataset"):
    """A folder with one subfolder per class (`docs/<label>/*.txt`, scikit-learn's `load_files` layout) as a Dataset
    with `id` (the path relative to `folder`), `text` and `label` (the subfolder's name)."""
    _check_folder(folder, argument)
    classes = sorted(name for name in os.listdir(folder)
                     if _visible(name) and os.path.isdir(os.path.join(folder, name)))
    loose = [name for name in os.listdir(folder)
             if _visible(name) and os.path.isfile(os.path.join(folder, name))]
    if not classes:
        raise DatasetError(f"{argument} {folder!r} has no subfolders; a labelled folder holds one subfolder per "
                           f"class with that class's documents, {os.path.join(folder, '<label>', '*' + EXTENSION)} "
                           "(scikit-learn's `load_files` layout).")
    if loose:
        logger.warning("%s %r: %d files directly in the folder belong to no class (labels are subfolders) and were "
                       "passed over, e.g. %s.", argument, folder, len(loose), sorted(loose)[0])
    paths, labels, others = [], [], 0
    for label in classes:
        found, passed_over = text_files(os.path.join(folder, label))
        others += passed_over
        if not found:
            logger.warning("%s %r: the class folder %r holds no %s files; the class has no documents.", argument,
                           folder, label, EXTENSION)
        paths += [f"{label}/{path}" for path in found]
        labels += [label] * len(found)
    if not paths:
        raise DatasetError(f"{argument} {folder!r}: none of its class folders ({', '.join(classes)}) holds "
                           f"{EXTENSION} files.")
    if others:
        logger.info("%s %r: %d files that are not %s were passed over.", argument, folder, others, EXTENSION)
    return _build(folder, paths, labels, argument)


__all__ = ["listing_digest", "load_labelled_folder", "load_text_folder", "read_text", "text_files"]
