"""Load a labelled text dataset (Hub id or local csv/jsonl/parquet) into train/validation/test with `datasets`.

The result always has a `text` column and a `label` column: a `ClassLabel` id for single-label data, or a float
multi-hot list for multi-label data (a column whose values are lists of label names). Missing splits are carved out of
`train`, seeded and stratified when the labels allow it.
"""

import collections
import contextlib
import csv
import hashlib
import json
import logging
import math
import os
import re
import shlex
import socket
import sys
from urllib.parse import urlparse

import datasets
from datasets import ClassLabel, DatasetDict, Sequence, Value

from .errors import DatasetError
from .folders import load_labelled_folder
from .layouts import DATA_FILES, LOCAL_FORMATS, TEXT_FILES, folder_layout, load_saved

logger = logging.getLogger(__name__)
# A CSV label column is integers only when every label is written as one: "01", "1.0" and "+1" keep their text.
CSV_INTEGER = re.compile(r"0|-?[1-9][0-9]{0,17}")  # at most 18 digits: an int64


def require_hub(argument, name):
    """Before `name` (the value of `argument`) is fetched from the Hub: a DatasetError at once when the Hub cannot be
    reached, instead of the libraries' retries (about 40 s offline). With HF_HUB_OFFLINE or HF_DATASETS_OFFLINE set,
    nothing is checked and the libraries read their cache."""
    if any(os.environ.get(flag, "").upper() in ("1", "ON", "YES", "TRUE")
           for flag in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE")):  # huggingface_hub's too
        return
    from huggingface_hub import constants

    endpoint = urlparse(os.environ.get("HF_ENDPOINT") or constants.ENDPOINT)
    port = endpoint.port or (443 if endpoint.scheme == "https" else 80)
    try:
        socket.create_connection((endpoint.hostname, port), timeout=3).close()
    except OSError as error:
        raise DatasetError(f"{argument} {name!r} is not a local path, and the Hub ({endpoint.geturl()}) cannot be "
                           f"reached ({error.__class__.__name__}); pass a local file or folder, or set "
                           "HF_HUB_OFFLINE=1 to use a copy in the Hugging Face cache.") from None


def check_utf8(path, source):
    """A DatasetError naming the file, the line, the column and the byte when a text file is not valid UTF-8 (the
    readers would fail later, or without saying where), with the command that converts it. `source` names the file
    as the user gave it (`--text-file 'doc.txt'`)."""
    offset = 0
    with open(path, "rb") as f:
        for number, line in enumerate(f, start=1):
            try:
                line.decode("utf-8")
            except UnicodeDecodeError as error:
                stem, extension = os.path.splitext(path)
                convert = f"iconv -f latin1 -t utf-8 {shlex.quote(path)} > {shlex.quote(stem + '.utf8' + extension)}"
                raise DatasetError(
                    f"{source}, line {number}: byte {line[error.start]:#04x} at column {error.start + 1} is not "
                    f"UTF-8 (byte {offset + error.start} of the file, counting from 0): the file is in another "
                    "encoding, most often Latin-1 or Windows-1252. Save it as UTF-8 and pass the converted file, "
                    f"for example `{convert}`.") from None
            offset += len(line)


def text_columns(text_column, label_column):
    """The columns `text_column` names (comma-separated: `title,abstract`), checked against `label_column` before any
    data is read: a text column that is the label column would put the answer into every document, and a column
    named twice would double it, so either is a DatasetError naming both flags."""
    for value, name in ((text_column, "text_column"), (label_column, "label_column")):
        if not isinstance(value, str):
            raise TypeError(f"`{name}` (--{name.replace('_', '-')}) must be a column name (a string), got "
                            f"{type(value).__name__}.")
    columns = [column.strip() for column in text_column.split(",") if column.strip()]
    if not columns:
        raise DatasetError(f"`text_column` (--text-column) {text_column!r} names no column; pass the column(s) that "
                           "hold the documents, comma-separated.")
    flags = f"--text-column {text_column!r} and --label-column {label_column!r}"
    if label_column in columns:
        raise DatasetError(f"{flags}: the label column {label_column!r} is also a text column, so the model would "
                           "read the answer in every document. Pass only the columns that hold the documents as "
                           "--text-column, and the one that holds the labels as --label-column.")
    if repeated := sorted({column for column in columns if columns.count(column) > 1}):
        raise DatasetError(f"{flags}: --text-column names {', '.join(map(repr, repeated))} more than once, which "
                           "would repeat it in every document; name each text column once.")
    return columns


def dataset_fingerprint(source):
    """What `--resume` compares to know the data is the same: the SHA-256 of a local file's bytes (of a folder's
    sorted relative paths and their files' bytes), a Hub dataset's id, or None for the built-in task. The path alone
    would let an edited file (labels swapped) continue a run trained on the old one."""
    if not isinstance(source, (str, os.PathLike)):
        return None
    path = os.path.expanduser(os.fspath(source))
    if os.path.isfile(path):
        files = [(None, path)]
    elif os.path.isdir(path):
        files = sorted((os.path.relpath(os.path.join(root, name), path).replace(os.sep, "/"), os.path.join(root, name))
                       for root, _, names in os.walk(path) for name in names)
    else:
        return f"hub:{source}"
    digest = hashlib.sha256()
    for relative, file in files:
        if relative is not None:  # a folder's file: its name is part of the data (a class, in a labelled folder)
            digest.update(relative.encode("utf-8") + b"\0")
        with open(file, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                digest.update(block)
    return f"sha256:{digest.hexdigest()}"


def _check_json_lines(path, source):
    """After the reader failed on a JSON file: a DatasetError naming the first line that is not valid JSON (or, in
    JSON lines, not an object) with the start of that line, where the reader's own error gives a byte position at
    best; nothing when the file is valid JSON (the reader's error is then about something else)."""
    with open(path, encoding="utf-8") as f:
        try:
            value = json.load(f)
        except json.JSONDecodeError as error:
            whole = error  # not one JSON document: JSON lines, or a broken array
        else:
            if value in ([], {}):
                raise DatasetError(f"`dataset` (--dataset) {source!r} holds no rows (it is {json.dumps(value)}); give "
                                   "it one JSON object per document, one per line: "
                                   '{"text": "the document", "label": "sport"}.')
            return
    with open(path, encoding="utf-8") as f:
        if f.read(1 << 16).lstrip().startswith("["):  # an array of rows
            raise DatasetError(f"Could not read {source!r}: line {whole.lineno}, column {whole.colno} is not valid "
                               f"JSON ({whole.msg}); fix that line.")
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, start=1):
            if not line.strip():
                continue
            shown = line.strip()[:80] + ("..." if len(line.strip()) > 80 else "")
            try:
                row = json.loads(line)
            except json.JSONDecodeError as error:
                raise DatasetError(f"Could not read {source!r}: line {number} is not valid JSON ({error.msg}): "
                                   f"{shown!r}. Each line of a JSON-lines file must be one JSON object; fix or drop "
                                   "that line.") from None
            if not isinstance(row, dict):
                raise DatasetError(f"Could not read {source!r}: line {number} is a JSON {type(row).__name__}, not an "
                                   f"object of columns: {shown!r}. Each line of a JSON-lines file must be one JSON "
                                   "object.")


def _fields(count):
    return f"{count} field{'' if count == 1 else 's'}"


@contextlib.contextmanager
def _any_field_size():
    """Python's `csv` module refuses a field over 128 KiB, which a long document is; lift the limit while reading."""
    previous = csv.field_size_limit()
    limit = sys.maxsize
    while True:
        try:
            csv.field_size_limit(limit)
            break
        except OverflowError:  # a C long narrower than sys.maxsize (Windows)
            limit //= 2
    try:
        yield
    finally:
        csv.field_size_limit(previous)


def _check_csv_rows(path, source, delimiter):
    """A DatasetError naming the line (as an editor counts it, not the record number: a quoted field may hold line
    breaks) of the first row whose number of fields differs from the header's, before the file is read as a dataset.
    pandas, which reads it, would otherwise take a row with one field too many (an unquoted comma in a document) as an
    index column, and read every column one place off; one with too few as a row with a missing value, silently. A file
    without a header, or with a header and no rows, is a DatasetError too. Blank lines are skipped, as pandas does."""
    name = "a tab" if delimiter == "\t" else f"{delimiter!r}"
    example = "<tab>" if delimiter == "\t" else f"{delimiter} "
    kind = "TSV" if delimiter == "\t" else "CSV"
    header, header_line, rows = None, None, 0
    with open(path, encoding="utf-8-sig", newline="") as f, _any_field_size():
        record = []  # the lines of the record being read, as they are in the file

        def lines():
            for line in f:
                record.append(line)
                yield line

        reader = csv.reader(lines(), delimiter=delimiter)
        end = 0
        while True:
            start = end + 1  # the record's first line: the line after the last one read
            record.clear()
            try:
                row = next(reader)
            except StopIteration:
                break
            except csv.Error as error:
                raise DatasetError(f"Could not read `dataset` (--dataset) {source!r} as {kind}: line "
                                   f"{reader.line_num}: {error}.") from None
            end = reader.line_num
            if not row or (len(row) == 1 and not row[0].strip()):  # a blank line: pandas skips it
                continue
            if header is None:
                header, header_line = row, start
                continue
            rows += 1
            if len(row) == len(header):
                continue
            lines = f"line {start}" if end == start else f"lines {start}-{end} (one row: a quoted field holds line " \
                                                          "breaks, or a quote is left open)"
            columns = ", ".join(header[:6]) + (", ..." if len(header) > 6 else "")
            text = "".join(record).rstrip("\r\n")
            shown = text[:80] + ("..." if len(text) > 80 else "")
            if len(row) > len(header):
                cause = (f"a field holds the delimiter ({name}) without quotes, which shifts the columns (the reader "
                         "takes the extra field as a row index and reads every column one place off). Put that field "
                         f"in double quotes (\"a{example}b\"; a quote inside it is written twice: \"\"), or remove "
                         "the extra delimiter")
            else:
                cause = (f"a field is missing, so the row would be read with an empty {header[-1]!r}. Give the "
                         f"row all {len(header)} fields (an empty one is nothing between two delimiters), or quote a "
                         "field that holds the delimiter or a line break")
            raise DatasetError(f"`dataset` (--dataset) {source!r}, {lines}: {_fields(len(row))} where the header "
                               f"(line {header_line}: {columns}) has {len(header)}; {cause}. The row: {shown!r}.")
    if header is None:
        raise DatasetError(f"`dataset` (--dataset) {source!r} is empty; a {kind} file holds a header line naming "
                           f"its columns (text{delimiter}label) and then one row per document.")
    if not rows:
        raise DatasetError(f"`dataset` (--dataset) {source!r} has a header (line {header_line}: "
                           f"{', '.join(header)}) and no rows; add one row per document below the header.")


def _check_json_not_empty(path, source):
    """A DatasetError when a JSON or JSON-lines file holds nothing but whitespace (the reader's own error for it is
    empty)."""
    with open(path, encoding="utf-8-sig") as f:
        for block in iter(lambda: f.read(1 << 16), ""):
            if block.strip():
                return
    raise DatasetError(f"`dataset` (--dataset) {source!r} is empty; a JSON-lines file holds one JSON object per "
                       'line, one line per document, e.g. {"text": "the document", "label": "sport"}.')


def _csv_labels(raw, label_column):
    """The CSV's label column, read as text, as ints when every label is an integer written as one (`7`, `-2`), else
    kept as text: "01" and "1" stay two classes, as do "1.0" and "1" (a typed reader would merge them). The splits of
    `raw` (a folder's CSV files) are decided together, so that a class is one label in every split."""
    if any(label_column not in part.column_names for part in raw.values()):
        return raw  # named as missing when the columns are selected
    values = [value for part in raw.values() for value in part[label_column] if value is not None]
    if not values or not all(CSV_INTEGER.fullmatch(value) for value in values):
        return raw
    return raw.cast_column(label_column, Value("int64"))


def _read_split(paths, shown, where, label_column):
    """One split's data files (`paths`, in one format), each checked first (its encoding, its rows), read with
    `datasets`: the Dataset, and its format (`csv` for .csv and .tsv). `shown` names a file as the user gave it, and
    `where` the split in errors."""
    extensions = sorted({os.path.splitext(path)[1].lower() for path in paths})
    if len({".tsv" if extension == ".tsv" else LOCAL_FORMATS[extension] for extension in extensions}) > 1:
        raise DatasetError(f"{where} holds files in several formats ({', '.join(extensions)}); `datasets` reads a "
                           "split's files with one reader, so convert them to one format.")
    extension = extensions[0]
    kind = LOCAL_FORMATS[extension]
    for path in paths:
        if kind != "parquet":
            check_utf8(path, shown(path))
        if kind == "csv":
            _check_csv_rows(path, shown(path), "\t" if extension == ".tsv" else ",")
        elif kind == "json":
            _check_json_not_empty(path, shown(path))
    kwargs = {"delimiter": "\t"} if extension == ".tsv" else {}
    if kind == "csv" and label_column is not None:
        kwargs["converters"] = {label_column: str}  # the cell's text: "01" must not become 1
    try:
        return datasets.load_dataset(kind, data_files={"train": paths}, split="train", **kwargs), kind
    except Exception as error:  # datasets raises many types for a malformed file
        if kind == "json":
            for path in paths:
                _check_json_lines(path, shown(path))
        raise DatasetError(f"Could not read {where} as {kind}: {error}") from error


def _read_files(source, files, label_column):
    """The data files of each split (`files`: {split: [paths]}; one file given as `source`, or a folder's), read as
    `datasets` reads them after the checks a file gets, a CSV's `label_column` as its cells' text (`_csv_labels`)."""
    path = os.path.abspath(os.path.expanduser(source))

    def shown(file):  # a file as the user named it: `source` itself, or a file under the folder `source`
        return source if os.path.abspath(file) == path else os.path.join(source, os.path.relpath(file, path))

    raw, kinds = DatasetDict(), {}
    for split, paths in files.items():
        where = repr(shown(paths[0])) if len(paths) == 1 else f"{source!r} (the {split} split's {len(paths)} files)"
        raw[split], kinds[split] = _read_split(paths, shown, where, label_column)
        if kinds[split] == "json":
            _report_mixed_json_labels(raw[split], where, label_column or "label")
    if not any(len(part) for part in raw.values()):
        raise DatasetError(f"`dataset` (--dataset) {source!r} holds no rows; give it one row per document.")
    if label_column is not None and (read_as_text := [split for split, kind in kinds.items() if kind == "csv"]):
        raw.update(_csv_labels(DatasetDict({split: raw[split] for split in read_as_text}), label_column))
    if len(set(kinds.values())) > 1:  # the readers type text apart (CSV: large_string), which concatenation refuses
        first = next(iter(raw))
        for split, part in raw.items():
            shared = datasets.Features({name: raw[first].features.get(name, feature)
                                        for name, feature in part.features.items()})
            if shared != part.features:
                try:
                    raw[split] = part.cast(shared)
                except (TypeError, ValueError) as error:
                    raise DatasetError(f"`dataset` (--dataset) {source!r}: the {split} split's columns "
                                       f"({part.features}) cannot be read as the {first} split's "
                                       f"({raw[first].features}): {error}") from error
    return raw


def _load_raw(source, label_column=None):
    """The splits of `source` as `datasets` reads them, a CSV's `label_column` as its cells' text (`_csv_labels`). A
    folder is read in the layout its files show (`layouts.folder_layout`): written by `save_to_disk`, data files as
    `datasets.load_dataset(folder)` finds them, or class folders of `.txt` files."""
    path = os.path.expanduser(source)
    extension = os.path.splitext(path)[1].lower()
    if os.path.isdir(path):
        layout = folder_layout(path)
        if layout.kind == DATA_FILES:
            return _read_files(source, layout.files, label_column)
        if layout.kind == TEXT_FILES:  # docs/<label>/*.txt, scikit-learn's `load_files` layout
            return DatasetDict({"train": load_labelled_folder(path, "--dataset")})
        return load_saved(path)
    if os.path.exists(path) or extension in LOCAL_FORMATS:
        if not os.path.isfile(path):
            raise DatasetError(f"`dataset` (--dataset) file {source!r} does not exist or is not a file.")
        if extension not in LOCAL_FORMATS:
            raise DatasetError(
                f"Cannot read `dataset` (--dataset) {source!r}: the extension must be one of "
                f"{', '.join(sorted(LOCAL_FORMATS))}, or pass a folder (one `save_to_disk` wrote, one of data files, "
                "or one of LABEL/*.txt files)."
            )
        return _read_files(source, {"train": [path]}, label_column)
    require_hub("--dataset", source)
    try:
        return datasets.load_dataset(source)
    except Exception as error:
        raise DatasetError(
            f"Could not load dataset {source!r} from the Hub ({type(error).__name__}: {error}). Pass a Hub id that "
            "exists and is reachable, or a local .csv/.jsonl/.parquet file."
        ) from error


def load_splits(source):
    """Every split of `source` (a .csv/.tsv/.json/.jsonl/.parquet file, a folder `save_to_disk` wrote, a folder of
    data files, a folder of `<label>/*.txt`, or a Hub id) as `datasets` reads it, in a DatasetDict: the rows `predict`
    classifies, after the checks `train` makes of a file (its encoding, its rows). A DatasetError names a source that
    cannot be read, and the fix."""
    return _load_raw(source)


def names_its_splits(source):
    """Whether `source` gives its own splits, to be used as given: a Hub dataset, or a folder that names them (a
    `DatasetDict.save_to_disk` folder, data files named by split). A file, a `Dataset.save_to_disk` folder, class
    folders and data files not named by split are one split (`train`, to carve the others from)."""
    path = os.path.expanduser(source)
    if os.path.isdir(path):
        return folder_layout(path).named_splits
    return not os.path.exists(path)


def _report_mixed_json_labels(split, path, label_column):
    """Log a JSON label column that mixes types (1 and "1", true and 1): `datasets` reads it as a `Json` column, in
    which text that spells a number becomes that number, so 1 and "1" are one class, and true and 1 are two."""
    if label_column in split.column_names and isinstance(split.features[label_column], datasets.Json):
        logger.warning(f"The labels in {path} mix JSON types (numbers, text, true/false): they are read as JSON "
                       "values, so text that spells a number becomes that number (1 and \"1\" are one class) while "
                       "true and 1 stay two; write every label the same way.")


def _is_missing(value):
    """A null label: JSON null, or the NaN a CSV reader puts in an empty cell."""
    return value is None or (isinstance(value, float) and value != value)


def _as_integer(value):
    """`value` as an int when it is an integer label (7, or the 7.0 a CSV column with a gap becomes), else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return None


def _check_label_values(dataset):
    """Whether the labels are lists (multi-label) or single values, with a DatasetError naming the first row that is
    null or that mixes the two kinds (one list in a column of strings would otherwise make every label a list)."""
    rows = [(split, i, value) for split, part in dataset.items() for i, value in enumerate(part["label"])]
    for split, i, value in rows:
        if _is_missing(value) or (isinstance(value, (list, tuple)) and any(_is_missing(item) for item in value)):
            raise DatasetError(f"{split}, row {i} (counting from 0): the label is missing (null); give every "
                               "document a label, or drop the row.")
    lists = [(split, i) for split, i, value in rows if isinstance(value, (list, tuple))]
    if lists and len(lists) < len(rows):
        odd = lists[0] if len(lists) <= len(rows) / 2 else next(
            (split, i) for split, i, value in rows if not isinstance(value, (list, tuple)))
        kind = "a list" if len(lists) <= len(rows) / 2 else "a single label"
        raise DatasetError(f"{odd[0]}, row {odd[1]} (counting from 0): the label is {kind}, unlike the other rows; "
                           "use a list of labels in every row (multi-label) or one label per row (single-label).")
    if not lists:
        _check_not_regression([value for _, _, value in rows])
    return bool(lists)


# A number as a CSV cell or a JSON string spells it: 1.207, -3, .5, 2e-3
DECIMAL = re.compile(r"[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?")


def _as_number(value):
    """`value` as a float when it is a number or text that spells one (a CSV cell), else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str) and DECIMAL.fullmatch(value.strip()):
        return float(value)
    return None


def _check_not_regression(values):
    """A DatasetError, before any split is carved or any model built, when every label is a number and some are not
    whole (1.207, 0.5): a regression target, as Transformers' run_classification.py reads a float label column. These
    families classify; read as class names, each value would become a class of its own. Whole numbers (3, 3.0) stay
    class ids."""
    numbers = [_as_number(value) for value in values]
    if not values or any(number is None for number in numbers):
        return
    fractional = sorted({(number, str(value)) for value, number in zip(values, numbers) if not number.is_integer()})
    if fractional:
        shown = ", ".join(text for _, text in fractional[:5]) + (", ..." if len(fractional) > 5 else "")
        raise DatasetError(f"The labels are numbers and {len(fractional)} distinct values are not whole ({shown}): "
                           "a regression target, which these families do not learn (they classify: each value would "
                           "become a class of its own). Give every document a class name or an integer class id; if "
                           "these numbers are class names, spell them as text that is not a number ('v1.5').")


def _label_names(values):
    """Class names for the label values, so that a value's id is its position. Integer labels keep their values as
    ids (names "0" .. str(max)); anything else is sorted as text."""
    integers = [_as_integer(value) for value in values]
    if values and all(value is not None for value in integers) and min(integers) >= 0:
        names = [str(i) for i in range(max(integers) + 1)]
        unused = sorted(set(range(max(integers) + 1)) - set(integers))
        if unused:
            logger.warning("Integer labels keep their values as ids; ids %s never occur (their classes stay empty).",
                           unused)
        return names
    return sorted({_label_text(value) for value in values})


def _label_text(value):
    """The class name of one label value: 7.0 read from a CSV names class "7", and " sport " names "sport" (the
    whitespace a CSV cell or a hand-edited file adds around a label is not part of it)."""
    integer = _as_integer(value)
    if integer is not None:
        return str(integer)
    return value.strip() if isinstance(value, str) else str(value)


def _check_label_spellings(values):
    """Labels that differ only by surrounding whitespace are one class (merged, and logged); labels that differ
    only by case are a DatasetError naming them (`Sport` and `sport` are one class misspelt far more often than two
    classes, and guessing which is meant would be silent)."""
    texts = {value for value in values if isinstance(value, str)}
    if blank := [value for value in texts if not value.strip()]:
        raise DatasetError(f"Labels {sorted(blank)!r} are blank; give every document a label, or drop the row.")
    if padded := sorted(value for value in texts if value != value.strip()):
        logger.warning("Labels with surrounding whitespace are merged into their stripped names: %s.",
                       ", ".join(f"{value!r} -> {value.strip()!r}" for value in padded[:10]))
    spellings = {}
    for name in {value.strip() for value in texts}:
        spellings.setdefault(name.casefold(), []).append(name)
    if clashes := sorted(sorted(group) for group in spellings.values() if len(group) > 1):
        raise DatasetError(f"Labels that differ only by case: {'; '.join(', '.join(map(repr, g)) for g in clashes)}. "
                           "They would become separate classes; write each class one way in the data.")


def _report_unseen_labels(dataset, names, multi_label):
    """Warn about labels that occur in validation or test but never in train: the model cannot learn them."""
    def seen(part):
        if multi_label:
            return {names[j] for vector in part["label"] for j, on in enumerate(vector) if on}
        return {names[i] for i in part["label"]}

    trained = seen(dataset["train"])
    for split, part in dataset.items():
        unseen = sorted(seen(part) - trained) if split != "train" else []
        if unseen:
            logger.warning("%s: labels %s never occur in train; the model cannot learn them.", split, unseen)


def _select_columns(dataset, text_column, label_column):
    """The text and label columns, renamed to `text` and `label`, with a DatasetError naming the missing one."""
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
    return dataset


def _encode_labels(dataset, names, multi_label):
    """Labels as ids into `names` (ClassLabel) or float multi-hot vectors over them; a DatasetError lists any label
    that is not one of `names`."""
    values = [value for part in dataset.values() for value in part["label"]]
    given = {_label_text(label) for value in values for label in (value if multi_label else [value])}
    unknown = sorted(given - set(names))
    if unknown:
        raise DatasetError(f"Labels {unknown[:10]} are not among the model's labels {names}; pass the dataset and "
                           "--label-column the model was trained with.")
    index = {name: i for i, name in enumerate(names)}
    features = next(iter(dataset.values())).features.copy()
    if multi_label:
        def multi_hot(example):
            vector = [0.0] * len(names)
            for label in example["label"]:
                vector[index[_label_text(label)]] = 1.0
            return {"label": vector}

        features["label"] = Sequence(Value("float32"), length=len(names))
        return dataset.map(multi_hot, remove_columns=["label"]).cast(features)
    features["label"] = ClassLabel(names=names)
    return dataset.map(lambda example: {"label": index[_label_text(example["label"])]},
                       remove_columns=["label"]).cast(features)


def _normalise_columns(dataset, text_column, label_column):
    """Rename to text/label, and encode labels as ClassLabel ids or float multi-hot vectors."""
    dataset = _select_columns(dataset, text_column, label_column)
    feature = next(iter(dataset.values())).features["label"]
    if isinstance(feature, ClassLabel):
        return dataset, feature.names, False
    multi_label = _check_label_values(dataset)
    values = [value for split in dataset.values() for value in split["label"]]
    flat = [label for labels in values for label in labels] if multi_label else values
    _check_label_spellings(flat)
    names = _label_names(flat)
    return _encode_labels(dataset, names, multi_label), names, multi_label


def _drop_empty_texts(dataset):
    """`dataset` without documents whose text is missing or blank (the count is logged per split)."""
    for split, part in dataset.items():
        kept = part.filter(lambda example: isinstance(example["text"], str) and example["text"].strip() != "")
        if len(kept) < len(part):
            logger.warning("%s: dropped %d documents with empty or missing text.", split, len(part) - len(kept))
            dataset[split] = kept
    return dataset


def load_for_evaluation(source, label_names, multi_label, text_column="text", label_column="label"):
    """All of `source` to score a trained model on: every row of a local file (or of a folder that is one split), or
    the `test` split of a Hub dataset (or of a folder that names its splits: `names_its_splits`), with `text` and
    `label` encoded as the model's ids (`label_names` in id order). A label the model does not know is a DatasetError;
    a class the file lacks is fine. `text_column` may name several columns, as in training."""
    columns = text_columns(text_column, label_column)
    raw = _load_raw(source, label_column)
    if not names_its_splits(source):  # one split: every row of it
        part = datasets.concatenate_datasets(list(raw.values()))
    elif "test" in raw:
        part = raw["test"]
    else:
        raise DatasetError(f"Dataset {source!r} has no `test` split (splits: {', '.join(raw)}); pass --split to "
                           "choose one.")
    dataset = DatasetDict({"evaluation": part})
    if len(columns) > 1:
        dataset, text_column = _joined_parts(dataset, source, columns)
    else:
        text_column = columns[0]
    dataset = _select_columns(dataset, text_column, label_column)
    feature = dataset["evaluation"].features["label"]
    if isinstance(feature, ClassLabel):  # a Hub dataset's ids: back to their names
        # The features say so: `datasets` 5 keeps a column's ClassLabel when `map` writes the column again, and
        # encodes the names back to ids (every label then reads as unknown: '0', '1', ...).
        named = dataset["evaluation"].features.copy()
        named["label"] = Value("string")
        dataset = dataset.map(lambda example: {"label": feature.names[example["label"]]}, features=named)
    if _check_label_values(dataset) != multi_label:
        kind = "lists of labels (multi-label)" if not multi_label else "single labels"
        raise DatasetError(f"{source!r} holds {kind}, but the model is "
                           f"{'multi' if multi_label else 'single'}-label; pass the matching dataset.")
    dataset = _drop_empty_texts(dataset)
    if len(dataset["evaluation"]) == 0:
        raise DatasetError(f"{source!r} holds no document with text to score.")
    return _encode_labels(dataset, list(label_names), multi_label)["evaluation"]


def _class_counts(part, num_labels, multi_label):
    """How many documents of `part` each class has (a multi-label document counts for each of its labels)."""
    counts = [0] * num_labels
    for label in part["label"]:
        for j in ([j for j, on in enumerate(label) if on] if multi_label else [label]):
            counts[j] += 1
    return counts


def _check_emptied_classes(source, names, before, after):
    """A DatasetError naming each class that had training documents and has none left once the empty ones are
    dropped: the model would name it without ever having seen it."""
    emptied = [(name, count) for name, count, left in zip(names, before, after) if count and not left]
    if emptied:
        shown = "; ".join(f"{name!r}: all {count} of its documents" for name, count in emptied)
        raise DatasetError(f"Dataset {source!r}: {len(emptied)} class(es) have no document with text left in `train` "
                           f"({shown} there are empty or whitespace, and empty documents are dropped). A model would "
                           "name the class without having seen it; give those documents their text, or drop their "
                           "rows.")


def _carved(n, fraction):
    """(kept, carved): the sizes `train_test_split` gives `n` rows for a float `fraction` (carved rounds up)."""
    carved = math.ceil(fraction * n)
    return n - carved, carved


def _check_enough_to_split(source, n, carve_validation, carve_test, validation_fraction, test_fraction):
    """A DatasetError saying how many documents there are and how many are needed when `train` is too small to carve
    the missing validation and test splits out of it (with one document left to train on), before any work; the
    splitter's own error names neither."""
    def enough(count):
        if carve_test:
            count, carved = _carved(count, test_fraction)
            if count < 1 or carved < 1:
                return False
        if carve_validation:
            count, carved = _carved(count, validation_fraction / (1.0 - (test_fraction if carve_test else 0.0)))
            if count < 1 or carved < 1:
                return False
        return True

    if not (carve_validation or carve_test) or enough(n):
        return
    needed = next(count for count in range(n + 1, n + 10_000) if enough(count))
    missing = " and ".join(name for name, carve in (("validation", carve_validation), ("test", carve_test)) if carve)
    raise DatasetError(f"Dataset {source!r} has {n} document(s) with text; carving {missing} split(s) out of them "
                       f"needs at least {needed} (a document for each split and at least one to train on). Add "
                       "documents (a classifier needs many more to learn anything), or give the dataset its own "
                       f"{missing} split(s).")


def _split(dataset, name, fraction, seed, stratify):
    try:
        stratify_by = "label" if stratify else None
        parts = dataset.train_test_split(test_size=fraction, seed=seed, stratify_by_column=stratify_by)
    except ValueError as error:  # a class too rare to stratify
        counts = collections.Counter(dataset["label"])
        names = dataset.features["label"].names
        rare = ", ".join(f"{names[label]!r} ({count})" for label, count in sorted(counts.items()) if count < 2)
        logger.warning(f"The {name} split is drawn at random, not stratified by label ("
                       f"{'documents of a class: ' + rare if rare else error}): a class may be missing from it or "
                       "over-represented; give every class at least a few documents.")
        parts = dataset.train_test_split(test_size=fraction, seed=seed)
    return parts["train"], parts["test"]


def _joined_parts(raw, source, columns):
    """The splits with a `__document__` column joined from the text `columns` (`text_columns`), in order."""
    from .inversion import join_parts

    first = next(iter(raw.values()))
    missing = [column for column in columns if column not in first.column_names]
    if missing:
        raise DatasetError(f"Dataset {source!r} has no column {', '.join(map(repr, missing))} of `text_column` "
                           f"({','.join(columns)!r}); its columns are {', '.join(first.column_names)}.")
    joined = raw.map(lambda example: {"__document__": join_parts([example[column] for column in columns])})
    return joined, "__document__"


def load_text_classification_dataset(source, text_column="text", label_column="label", seed=42,
                                      validation_fraction=0.1, test_fraction=0.2):
    """Load `source` (Hub id or local file) as a DatasetDict with train/validation/test, `text` and `label`.
    `text_column` may name several columns, comma-separated (`title,abstract,claims`): the document is then its parts
    in that order, one paragraph each (`join_parts`; a list column such as the claims gives one paragraph per item).

    Returns `(dataset, label_names, multi_label)`.
    """
    columns = text_columns(text_column, label_column)
    raw = _load_raw(source, label_column)
    if len(columns) > 1:
        raw, text_column = _joined_parts(raw, source, columns)
    else:
        text_column = columns[0]
    if "train" not in raw:
        raise DatasetError(f"Dataset {source!r} has no `train` split (splits: {', '.join(raw)}).")
    if "validation" not in raw and "dev" in raw:
        raw["validation"] = raw.pop("dev")
    dataset, names, multi_label = _normalise_columns(raw, text_column, label_column)
    if not multi_label and len(names) < 2:
        raise DatasetError(f"Dataset {source!r} has one class in `{label_column}` ({names}); a classifier needs at "
                           "least two. Check `label_column` (--label-column), or add documents of other classes.")
    with_blanks = _class_counts(dataset["train"], len(names), multi_label)
    dataset = _drop_empty_texts(dataset)
    if len(dataset["train"]) == 0:
        raise DatasetError(f"Dataset {source!r} has an empty `train` split.")
    _check_emptied_classes(source, names, with_blanks, _class_counts(dataset["train"], len(names), multi_label))
    _check_enough_to_split(source, len(dataset["train"]), "validation" not in dataset, "test" not in dataset,
                           validation_fraction, test_fraction)
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
    for name in ("validation", "test"):  # a given split whose every text was empty (a carved one never is)
        if len(splits[name]) == 0:
            raise DatasetError(f"Dataset {source!r} has an empty `{name}` split: none of its documents has text. Give "
                               f"it documents with text, or drop the split so that one is carved from `train`.")
    _report_unseen_labels(splits, names, multi_label)
    return DatasetDict(splits), names, multi_label
