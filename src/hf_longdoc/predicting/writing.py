"""What `predict` writes: the output's path, checked before any work (`output_paths`); its columns (`output_features`,
and the names it keeps for itself, `reserved_columns`); its rows in input order, merged from the finished windows'
shards (`merged_rows`); and the file, in the format its extension names (`write_output`)."""

import csv
import json
import os

from datasets import Features, List, Value

from ..inference.reading import best_first
from ..saving.run_folder import require_writable_folder
from .resuming import window_predictions

FORMATS = (".jsonl", ".csv", ".parquet")
OUTPUT_COLUMNS = ("label", "score", "scores", "chunks", "evidence", "error")


def output_paths(output, overwrite):
    """(OUT, its `.partial` work folder), with a ValueError before any work for an unknown extension, a folder that
    cannot be written, or an existing OUT without `overwrite`."""
    if not isinstance(output, (str, os.PathLike)):
        raise TypeError(f"`output` (--output) must be a file path, got {type(output).__name__}.")
    output = os.path.abspath(os.path.expanduser(os.fspath(output)))
    extension = os.path.splitext(output)[1].lower()
    if extension not in FORMATS:
        raise ValueError(f"`output` (--output) {output!r}: the format follows the extension, which must be one of "
                         f"{', '.join(FORMATS)}; got {extension or 'none'}.")
    if os.path.isdir(output):
        raise ValueError(f"`output` (--output) {output!r} is a folder; pass a file name ending in {extension}.")
    require_writable_folder(os.path.dirname(output), "The folder of `output` (--output)")
    if os.path.exists(output) and not overwrite:
        raise ValueError(f"`output` (--output) {output!r} already exists and is kept; choose another name, or pass "
                         "--overwrite (overwrite=True) to replace it.")
    return output, output + ".partial"


def reserved_columns(labels):
    """`{name: what it is}` for the columns the output writes itself: the prediction's, and in a CSV one
    `score_<label>` per class. An input column of one of these names would stand twice in the output (pandas reads
    them as `score_x` and `score_x.1`), so the id column may not have one, and a kept column is renamed `input_<name>`;
    the same names in every format, so that a CSV, a JSONL and a Parquet output have the same columns."""
    reserved = {name: f"the output column {name!r}" for name in OUTPUT_COLUMNS}
    reserved.update((f"score_{label}", f"the output column 'score_{label}' (class {label!r}'s score in a CSV)")
                    for label in labels)
    return reserved


def output_features(documents, id_column, keep, reader):
    """The output's columns and types: the id (the input's, or row numbers), the kept columns, the predictions."""
    features = {id_column or "id": documents.features[id_column] if id_column else Value("int64")}
    features.update((name, documents.features[name]) for name in keep)
    if reader.multi_label:
        features.update(label=List(Value("string")), score=List(Value("float64")))
    else:
        features.update(label=Value("string"), score=Value("float64"))
    features["scores"] = {label: Value("float64") for label in reader.labels}
    if reader.settings.long == "chunks":
        features["chunks"] = Value("int64")
    if reader.settings.explain is not None:
        features["evidence"] = List({"text": Value("string"), "start": Value("int64"), "end": Value("int64"),
                                     "weight": Value("float64")})
    features["error"] = Value("string")
    return Features(features)


def merged_rows(documents, id_column, keep, features, partial, window_rows):
    """The output rows in input order, read from the finished windows' shards and the input's id/kept columns."""
    carried = documents.select_columns([id_column, *keep] if id_column else keep)
    predicted = [name for name in features if name in OUTPUT_COLUMNS]
    for start in range(0, len(documents), window_rows):
        stop = min(start + window_rows, len(documents))
        predictions = window_predictions(partial, start)
        columns = carried[start:stop]
        for row in range(start, stop):
            out = {id_column or "id": columns[id_column][row - start] if id_column else row}
            out.update((name, columns[name][row - start]) for name in keep)
            prediction = predictions[row]
            for name in predicted:
                value = prediction.get(name)
                if name == "scores" and value is not None:
                    value = {label: value.get(label) for label in features["scores"]}  # top_k: the others null
                out[name] = value
            yield out


def _json_default(value):
    return value.isoformat() if hasattr(value, "isoformat") else str(value)


def _cell(value):
    """A CSV cell: empty for null, JSON for lists and dicts."""
    if value is None:
        return ""
    if isinstance(value, (list, dict)):
        return json.dumps(value, ensure_ascii=False, default=_json_default)
    return value


def _csv_cells(row, labels):
    """A row's CSV cells: `scores` as one cell per class (empty when not among the top K)."""
    cells = []
    for name, value in row.items():
        if name == "scores":
            cells += [_cell((value or {}).get(label)) for label in labels]
        else:
            cells.append(_cell(value))
    return cells


def write_output(result, path, labels, ranked=False):
    """Write the rows of `result` to `path` in the format its extension names; JSONL scores `ranked` best first (with
    `top_k`: the classes in the order of their scores, the pipeline's), else in label order."""
    extension = os.path.splitext(path)[1].lower()
    if extension == ".parquet":
        result.to_parquet(path)
        return
    with open(path, "w", encoding="utf-8", newline="") as f:
        writer = csv.writer(f) if extension == ".csv" else None
        if writer is not None:
            writer.writerow([column for name in result.column_names
                             for column in ([f"score_{label}" for label in labels] if name == "scores" else [name])])
        for columns in result.iter(batch_size=1000):
            for values in zip(*columns.values()):
                row = dict(zip(columns, values))
                if writer is not None:
                    writer.writerow(_csv_cells(row, labels))
                    continue
                if row["scores"] is not None:  # top_k: the K best (the others are null), best first
                    shown = {label: score for label, score in row["scores"].items() if score is not None}
                    names, scores = list(shown), list(shown.values())
                    row["scores"] = {names[index]: scores[index] for index in best_first(scores)} if ranked else shown
                f.write(json.dumps(row, ensure_ascii=False, default=_json_default) + "\n")


__all__ = ["FORMATS", "OUTPUT_COLUMNS", "merged_rows", "output_features", "output_paths", "reserved_columns",
           "write_output"]
