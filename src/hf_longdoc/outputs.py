"""Output folders and files that never lose a user's work.

Two mechanisms, shared by every verb that writes:

- **A manifest of what hf_longdoc wrote.** Each folder the package writes into holds `.hf_longdoc.json`: the files of
  a `train` run (`run`) and the files other verbs wrote (`outputs`), each with its SHA-256. A file is the package's to
  replace only while it is listed there *and* unchanged since; anything else belongs to the user and is replaced only
  with an explicit `overwrite` flag (`check_files_free`, `record_outputs`).
- **A run that replaces an earlier one only when it has succeeded** (`RunFolder`). `train` writes into a staging
  folder beside the target (`.NAME.partial`, which also holds Trainer's checkpoints for `--resume`) under a lock
  (`.NAME.lock`) that refuses a second run into the same folder. When the run is complete, the staging folder takes
  the target's place by `os.rename` (one step on one file system); the user's own files in the target are carried
  into it; the earlier run's files (and only those) are removed. An interrupted or failed run leaves the target as
  it was.
"""

import fnmatch
import hashlib
import json
import logging
import os
import shutil
import tempfile
import time

from filelock import FileLock, Timeout

logger = logging.getLogger(__name__)

MANIFEST = ".hf_longdoc.json"
# Top-level names a `train` run may write (Transformers' and tokenizers' file names, the family's source files, our
# metrics, arguments and card): a user's file with such a name would be replaced, so it needs `overwrite`.
RUN_FILE_PATTERNS = ("config.json", "generation_config.json", "*.safetensors", "*.safetensors.index.json",
                     "tokenizer*", "vocab*", "merges.txt", "special_tokens_map.json", "added_tokens.json", "*.model",
                     "chat_template*", "*.py", "metrics.json", "training_args.json", "README.md", "checkpoint-*",
                     MANIFEST)


def file_digest(path):
    """The SHA-256 of the file at `path`, as hex."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def read_manifest(folder):
    """The manifest of `folder` (`{"run": {name: sha256}, "outputs": {name: sha256}, ...}`); empty when there is
    none or it cannot be read (then nothing in the folder counts as the package's)."""
    try:
        with open(os.path.join(folder, MANIFEST)) as f:
            manifest = json.load(f)
    except (OSError, ValueError):
        return {"run": {}, "outputs": {}}
    if not isinstance(manifest, dict):
        return {"run": {}, "outputs": {}}
    return {**manifest, "run": dict(manifest.get("run") or {}), "outputs": dict(manifest.get("outputs") or {})}


def write_manifest(folder, manifest):
    """Write `manifest` into `folder`, replacing the earlier one in one step (a temporary file renamed over it)."""
    handle, scratch = tempfile.mkstemp(dir=folder, prefix=MANIFEST + ".")
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(scratch, 0o666 & ~umask)  # as an ordinary file, not mkstemp's owner-only mode
    with os.fdopen(handle, "w") as f:
        json.dump(manifest, f, indent=2, sort_keys=True)
    os.replace(scratch, os.path.join(folder, MANIFEST))


def is_unchanged(folder, name, manifest=None, section=None):
    """Whether `folder/name` is a file hf_longdoc wrote (in its manifest's `section`, or either) and nobody has
    changed since."""
    manifest = read_manifest(folder) if manifest is None else manifest
    recorded = {**manifest["outputs"], **manifest["run"]} if section is None else manifest[section]
    path = os.path.join(folder, name)
    return name in recorded and os.path.isfile(path) and file_digest(path) == recorded[name]


def is_training_run(folder):
    """Whether `folder` holds a finished `hf-longdoc train` run (its manifest lists the run's files)."""
    return bool(read_manifest(folder)["run"])


def require_writable_folder(folder, argument):
    """Create `folder` if needed and prove it can be written (a ValueError naming `argument` otherwise), before any
    long work."""
    if os.path.exists(folder) and not os.path.isdir(folder):
        raise ValueError(f"{argument} {folder!r} is a file; pass a folder.")
    try:
        os.makedirs(folder, exist_ok=True)
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as error:
        raise ValueError(f"{argument} {folder!r} cannot be written ({error.strerror or error}); choose a folder you "
                         "can write to.") from None


def check_files_free(paths, overwrite, flag):
    """Refuse, before any work, to write over an existing file hf_longdoc did not write (or one a user changed
    since): a ValueError naming the files and `flag` (the option that allows it). Folders are never written over."""
    taken = []
    for path in paths:
        if os.path.isdir(path):
            raise ValueError(f"{path!r} is a folder; choose another output name.")
        if os.path.exists(path) and not overwrite and not is_unchanged(*os.path.split(os.path.abspath(path))):
            taken.append(path)
    if taken:
        raise ValueError(f"{', '.join(map(repr, taken))} already exist{'s' if len(taken) == 1 else ''} and "
                         f"{'was' if len(taken) == 1 else 'were'} not written by hf-longdoc (or changed since); "
                         f"choose another output, or pass {flag} to replace {'it' if len(taken) == 1 else 'them'}.")


def record_outputs(paths):
    """List the files just written at `paths` in their folders' manifests, so a rerun may replace them."""
    by_folder = {}
    for path in paths:
        folder, name = os.path.split(os.path.abspath(path))
        by_folder.setdefault(folder, []).append(name)
    for folder, file_names in by_folder.items():
        manifest = read_manifest(folder)
        for name in file_names:
            manifest["outputs"][name] = file_digest(os.path.join(folder, name))
        write_manifest(folder, manifest)


class RunDiverged(ValueError):
    """Training produced a non-finite loss or non-finite weights; nothing was saved as a result."""


class RunFolder:
    """The output folder of one `train` run: staged, locked, and replaced only on success.

    ```python
    with RunFolder("out/model", overwrite=False, resume=False) as run:  # checks and locks; nothing is touched yet
        ...                                                            # train into run.staging (run.checkpoint)
        run.commit()                                                   # the result takes out/model's place
    ```
    `open` (on entering) refuses, before any data is read: a target that is a file or holds the current directory; a
    target whose files are not the package's but have the names a run writes (`RUN_FILE_PATTERNS`), or that a user
    changed since the package wrote them, unless `overwrite`; a target another live run holds. With `resume`, the
    newest `checkpoint-N` of the interrupted run's staging folder is `checkpoint`. Without it, an interrupted run's
    staging folder is discarded (logged). Leaving the block with an error keeps the staging folder when it holds a
    checkpoint to resume (and says so), except after a `RunDiverged`; otherwise removes it. The earlier run is not
    touched by a failure.
    """

    def __init__(self, target, overwrite=False, resume=False, argument="`output_dir` (--output-dir)"):
        self.target = os.path.abspath(os.path.expanduser(target))
        parent, name = os.path.split(self.target.rstrip(os.sep))
        self.parent, self.name, self.argument = parent, name, argument
        self.staging = os.path.join(parent, f".{name}.partial")
        self.previous = os.path.join(parent, f".{name}.previous")
        self.overwrite, self.resume = overwrite, resume
        self.checkpoint = None
        self._lock = FileLock(os.path.join(parent, f".{name}.lock"), timeout=0)

    # -- before the run -------------------------------------------------------------------------------------------
    def __enter__(self):
        self.open()
        return self

    def open(self):
        """Check the target, take the lock, recover an interrupted commit and prepare the staging folder."""
        if self.resume and self.overwrite:
            raise ValueError("Pass either `resume` (--resume: continue the interrupted run) or `overwrite` "
                             "(--overwrite: replace the user's files that a run writes), not both.")
        if os.path.exists(self.target) and not os.path.isdir(self.target):
            raise ValueError(f"{self.argument} {self.target!r} is a file; pass a folder (new, empty, or an earlier "
                             "run) for the run.")
        working = os.path.abspath(os.getcwd())
        if working == self.target or working.startswith(self.target + os.sep):
            raise ValueError(f"{self.argument} {self.target!r} holds the current directory; the run replaces that "
                             "folder when it has succeeded, so choose a folder inside it (e.g. out/model).")
        require_writable_folder(self.parent, self.argument)
        try:
            self._lock.acquire()
        except Timeout:
            raise ValueError(f"Another hf-longdoc run is writing {self.target!r} (it holds "
                             f"{self._lock.lock_file!r}); wait for it to finish or choose another "
                             f"{self.argument}.") from None
        try:
            self._recover_interrupted_commit()
            self._check_target()
            self._prepare_staging()
        except BaseException:
            self._release()
            raise

    def _entries(self, folder):
        return sorted(os.listdir(folder)) if os.path.isdir(folder) else []

    def _foreign_entries(self, folder, manifest):
        """The entries of `folder` the package did not write as a run (the user's), the manifest excepted."""
        return [e for e in self._entries(folder) if e != MANIFEST and e not in manifest["run"]]

    def _check_target(self):
        manifest = read_manifest(self.target)
        foreign = self._foreign_entries(self.target, manifest)
        taken = [e for e in foreign if any(fnmatch.fnmatch(e, pattern) for pattern in RUN_FILE_PATTERNS)]
        taken += [e for e in manifest["run"] if os.path.exists(os.path.join(self.target, e))
                  and not is_unchanged(self.target, e, manifest, "run")]
        if taken and not self.overwrite:
            shown = ", ".join(sorted(taken)[:8]) + (f" and {len(taken) - 8} more" if len(taken) > 8 else "")
            older = (" (a run saved by an earlier hf-longdoc version has no manifest of its files)"
                     if not manifest["run"] and {"config.json", "metrics.json"} <= set(foreign) else "")
            raise ValueError(f"{self.argument} {self.target!r} holds {shown}, which hf-longdoc did not write{older} "
                             "(or which changed since) and which the run would replace; choose a new folder, move "
                             "them away, or pass --overwrite (overwrite=True) to replace them (nothing else there is "
                             "touched). To continue an interrupted run instead, pass --resume (resume=True).")
        self.replaced = set(taken)
        kept = [e for e in foreign if e not in self.replaced]
        if kept:
            logger.info("Keeping what hf-longdoc did not write in %s: %s.", self.target, ", ".join(kept))

    def _prepare_staging(self):
        if self.resume:
            self.checkpoint = last_checkpoint(self.staging)
            if self.checkpoint is None:
                raise ValueError(f"`resume` (--resume) continues an interrupted run from its last checkpoint, and "
                                 f"there is none in {self.staging!r}; train without --resume.")
            logger.info("Resuming the interrupted run into %s from %s.", self.target, self.checkpoint)
            return
        if os.path.isdir(self.staging):
            logger.warning("Discarding the interrupted run in %s (pass --resume to continue it instead).",
                           self.staging)
            shutil.rmtree(self.staging)
        try:
            os.makedirs(self.staging)
        except OSError as error:
            raise ValueError(f"{self.argument}: cannot create {self.staging!r} ({error.strerror or error}); choose "
                             "a folder you can write to.") from None
        logger.info("Training into %s; %s is replaced only when the run has succeeded.", self.staging, self.target)

    # -- after the run --------------------------------------------------------------------------------------------
    def commit(self):
        """Move the finished run into the target as one rename, carrying the user's files over; the earlier run's
        files are then removed. Writes the run's manifest first."""
        manifest = read_manifest(self.target)
        run_files = {e: file_digest(os.path.join(self.staging, e)) for e in self._entries(self.staging)
                     if os.path.isfile(os.path.join(self.staging, e)) and e != MANIFEST}
        outputs = {e: digest for e, digest in manifest["outputs"].items() if e not in run_files}
        write_manifest(self.staging, {"run": run_files, "outputs": outputs, "written": time.time()})
        if not os.path.exists(self.target):
            os.rename(self.staging, self.target)
            return
        carried = [e for e in self._foreign_entries(self.target, manifest) if e not in self.replaced]
        os.rename(self.target, self.previous)
        os.rename(self.staging, self.target)  # from here on the new run is in place
        self._carry_back(carried)

    def _carry_back(self, carried):
        """Move the user's entries from the earlier run's folder into the new one, then remove what is left there
        (the earlier run's own files, and those `overwrite` allowed replacing)."""
        for entry in carried:
            destination = os.path.join(self.target, entry)
            if os.path.exists(destination):  # a name RUN_FILE_PATTERNS did not foresee: keep both
                kept = f"{destination}.kept-{int(time.time())}"
                logger.warning("The new run wrote %s, which was the user's; the user's file is kept as %s.",
                               destination, kept)
                destination = kept
            os.rename(os.path.join(self.previous, entry), destination)
        shutil.rmtree(self.previous)

    def _recover_interrupted_commit(self):
        """Finish or undo a commit that was cut between its renames (the lock is held, so no run is live)."""
        if not os.path.isdir(self.previous):
            return
        if not os.path.exists(self.target):
            logger.warning("Restoring %s from %s (a commit was interrupted).", self.target, self.previous)
            os.rename(self.previous, self.target)
            return
        logger.warning("Finishing an interrupted commit into %s.", self.target)
        self._carry_back(self._foreign_entries(self.previous, read_manifest(self.previous)))

    def __exit__(self, kind, error, traceback):
        try:
            if kind is not None and os.path.isdir(self.staging):
                if last_checkpoint(self.staging) is not None and not issubclass(kind, RunDiverged):
                    logger.warning("The run stopped (%s); %s is unchanged, and the interrupted run is kept in %s: "
                                   "rerun with --resume to continue it.", kind.__name__, self.target, self.staging)
                else:
                    shutil.rmtree(self.staging, ignore_errors=True)
        finally:
            self._release()
        return False

    def _release(self):
        """Remove the lock file, then release it (a run that starts in between locks a new file: it still runs alone
        once this one is done)."""
        try:
            os.remove(self._lock.lock_file)
        except OSError:
            pass
        self._lock.release()


def last_checkpoint(folder):
    """The newest `checkpoint-N` folder Trainer left in `folder` (None when there is none)."""
    steps = [int(name.split("-")[1]) for name in (os.listdir(folder) if os.path.isdir(folder) else [])
             if name.startswith("checkpoint-") and name.split("-")[1].isdigit()]
    return os.path.join(folder, f"checkpoint-{max(steps)}") if steps else None


__all__ = ["MANIFEST", "RunDiverged", "RunFolder", "check_files_free", "file_digest", "is_training_run",
           "is_unchanged", "last_checkpoint", "read_manifest", "record_outputs", "require_writable_folder",
           "write_manifest"]
