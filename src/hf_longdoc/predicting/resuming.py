"""`OUT.partial/`, the work folder that lets an interrupted `predict` continue.

A run is named by its fingerprint (`run_fingerprint`), written first into the folder; a rerun with the same one
continues, another is refused unless `overwrite` (`open_partial`). Each finished batch is a shard (`shard_path`: JSON
lines of `[row, prediction]`), each finished window a `.done` file of its counts (`done_path`), both written whole or
not at all (`write_atomically`); `window_predictions` and `summary` read them back. `output_lock` keeps a second run of
the same output out of the folder.
"""

import contextlib
import json
import logging
import os
import shutil
import tempfile

from ..saving.run_folder import acquire_or_refuse, file_digest, lock_beside, release_lock
from ..utils import distributed

logger = logging.getLogger(__name__)
FINGERPRINT = "fingerprint.json"


@contextlib.contextmanager
def output_lock(output):
    """Hold `.OUT.lock` beside `output` while a run writes it (on the main process, when several predict), so that a
    second run of the same `output` is refused at once instead of writing into the first one's .partial folder."""
    if output is None:
        yield
        return
    lock = lock_beside(output)
    distributed.on_main_then_share(lambda: acquire_or_refuse(
        lock, f"Another hf-longdoc predict is writing {output!r} (it holds {lock.lock_file!r}); wait for it to finish, "
              "or choose another --output."))
    try:
        yield
    finally:
        if lock.is_locked:  # the main process's
            release_lock(lock)


def run_fingerprint(settings, model_digest, input_digest, id_column, device, threshold, graph=None):
    """What names a run in its `.partial` folder: the digests of the model's files, of the input and of the exported
    `graph` it runs (if any); its layout (the batch size, the rows per window); and the settings that change the rows
    (`PredictSettings.row_settings`) with the id column it resolved, the type of the device it runs on and the
    decision threshold. A rerun continues the folder when the model, the input and these settings agree
    (`open_partial`; the batch size may differ)."""
    return {"model": model_digest, "input": input_digest, "batch_size": settings.batch_size,
            **({"graph": file_digest(graph)} if graph is not None else {}),
            "window_rows": settings.window_rows,
            "settings": {**settings.row_settings(), "keep_columns": list(settings.keep_columns),
                         "id_column": id_column, "device": device, "threshold": threshold}}


def open_partial(partial, fingerprint, overwrite, shared):
    """Prepare the `.partial` work folder: continue one with the same fingerprint, refuse another (naming what
    differs) unless `overwrite`, which starts over. Returns the rows per window: the run's own when it continues
    (they do not change with the batch size), else `fingerprint["window_rows"]`."""
    path = os.path.join(partial, FINGERPRINT)
    start_over, recorded = False, None
    if os.path.isdir(partial):
        try:
            with open(path) as f:
                recorded = json.load(f)
        except (OSError, ValueError):
            recorded = None
        differ = _differences(recorded, fingerprint) if recorded is not None else None
        if recorded is None and not overwrite:
            raise ValueError(f"{partial!r} exists but records no run of predict; move it away, or pass --overwrite "
                             "to start over.")
        if differ and not overwrite:
            raise ValueError(f"{partial!r} holds an interrupted run that differs from this one ({'; '.join(differ)}); "
                             "rerun the same command to continue it, or pass --overwrite (overwrite=True) to start "
                             "over.")
        # the same command continues, --overwrite or not (it replaces the finished file); another run starts over
        start_over = recorded is None or bool(differ)
        if not start_over and recorded["batch_size"] != fingerprint["batch_size"]:
            logger.warning("Continuing at --batch-size %d a run that started at %d: its finished windows are kept and "
                           "the rest are read %d at a time (a document padded beside others can get scores that "
                           "differ in their last digits).", fingerprint["batch_size"], recorded["batch_size"],
                           fingerprint["batch_size"])
    distributed.wait_for_everyone()  # every process has compared before the main one changes anything
    if shared is None or shared.is_main_process:
        if start_over:
            logger.warning("Starting over: removing the interrupted run of other settings in %s (--overwrite).",
                           partial)
            shutil.rmtree(partial)
        os.makedirs(partial, exist_ok=True)
        if not os.path.exists(path):
            write_atomically(path, json.dumps(fingerprint, indent=2, sort_keys=True))
        else:
            logger.info("Continuing the interrupted run in %s.", partial)
    distributed.wait_for_everyone()
    return fingerprint["window_rows"] if start_over or recorded is None else recorded["window_rows"]


def _differences(recorded, given):
    """What differs between two fingerprints, in words."""
    if not isinstance(recorded.get("window_rows"), int) or not isinstance(recorded.get("batch_size"), int):
        return ["layout (the folder was written by an earlier version of hf_longdoc)"]
    differ = []
    if recorded.get("model") != given["model"]:
        files = sorted(name for name in set(recorded.get("model") or {}) | set(given["model"])
                       if (recorded.get("model") or {}).get(name) != given["model"].get(name))
        differ.append(f"model (files that differ: {', '.join(files)})")
    if recorded.get("input") != given["input"]:
        differ.append("input (--dataset: another file, or the file changed since)")
    settings = recorded.get("settings") or {}
    changed = [f"{key} {settings.get(key)!r} there, {value!r} here" for key, value in given["settings"].items()
               if settings.get(key) != value]
    if changed:
        differ.append(f"settings ({'; '.join(changed)})")
    return differ


def write_atomically(path, text):
    """Write `text` to `path` through a temporary file in the same folder, so a kill leaves the old file or the new
    one, never half of one."""
    handle, scratch = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".tmp-")
    with os.fdopen(handle, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(scratch, path)


def _window_name(start):
    return f"{start:012d}"


def shard_path(partial, start, batch_size, number):
    """Batch `number` of a window read `batch_size` at a time (a window resumed at another size does not read the
    shards of the first)."""
    return os.path.join(partial, f"{_window_name(start)}-{batch_size}-{number:05d}.jsonl")


def done_path(partial, start):
    return os.path.join(partial, f"{_window_name(start)}.done")


def window_predictions(partial, start):
    """`{row: prediction}` of one finished window."""
    with open(done_path(partial, start)) as f:
        done = json.load(f)
    predictions = {}
    for number in range(done["batches"]):
        with open(shard_path(partial, start, done["batch_size"], number), encoding="utf-8") as f:
            predictions.update((row, prediction) for row, prediction in map(json.loads, f))
    return predictions


def summary(partial, windows):
    """The windows' counts added up, and the batch sizes they were read at."""
    totals = {"rows": 0, "errors": 0, "cut": 0}
    batch_sizes = set()
    for start in windows:
        with open(done_path(partial, start)) as f:
            stats = json.load(f)
        for key in totals:
            totals[key] += stats[key]
        batch_sizes.add(stats["batch_size"])
    return totals, sorted(batch_sizes)


__all__ = ["FINGERPRINT", "done_path", "open_partial", "output_lock", "run_fingerprint", "shard_path", "summary",
           "window_predictions", "write_atomically"]
