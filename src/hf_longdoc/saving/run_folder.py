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
import glob
import hashlib
import json
import logging
import os
import shutil
import tempfile
import time

from filelock import FileLock, Timeout

from ..utils.distributed import is_main_process, on_main_then_share, wait_for_everyone

logger = logging.getLogger(__name__)

MANIFEST = ".hf_longdoc.json"
# The source files `save_pretrained` copies next to a model: the families' and the tokenizer's modules
PACKAGE = os.path.dirname(os.path.abspath(__file__))
SOURCE_FILES = tuple(sorted({os.path.basename(path) for pattern in ("modeling/*/*.py", "tokenization/*.py")
                             for path in glob.glob(os.path.join(PACKAGE, pattern))} - {"__init__.py"}))
# Top-level names a `train` run may write (Transformers' and tokenizers' file names, the family's source files, our
# metrics, arguments and card): a user's file with such a name would be replaced, so it needs `overwrite`.
RUN_FILE_PATTERNS = ("config.json", "generation_config.json", "*.safetensors", "*.safetensors.index.json",
                     "tokenizer*", "vocab*", "merges.txt", "special_tokens_map.json", "added_tokens.json", "*.model",
                     "chat_template*", "modeling_*.py", "configuration_*.py", "tokenization_*.py", *SOURCE_FILES,
                     "metrics.json", "training_args.json", "README.md", "checkpoint-*", MANIFEST)


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
    with RunFolder("out/model", settings={...}) as run:  # checks and locks; nothing is touched yet
        ...                                             # train into run.staging (from run.checkpoint when resuming)
        run.commit()                                    # the result takes out/model's place
    ```
    `open` (on entering) refuses, before any data is read: a target that is a file, the root, or holds the current
    directory; a user's file (one the package did not write, or changed since) with a name a run writes
    (`RUN_FILE_PATTERNS`), unless `overwrite`; a target another live run holds. With `resume`, the newest complete
    `checkpoint-N` of the interrupted run's staging folder is `checkpoint`, and `settings` (the run's arguments, as
    JSON) must equal the interrupted run's: a difference is a ValueError naming it. Without `resume`, an interrupted
    run with a checkpoint is refused (a ValueError naming --resume and --overwrite) unless `overwrite`, which discards
    it (logged), as is a staging folder without a complete checkpoint. Leaving the block with an error keeps the
    staging folder when it holds a checkpoint to resume (and says so), except after a `RunDiverged`; otherwise removes
    it. The earlier run is not touched by a failure. A symbolic link as target is followed: the folder it points to
    is the one replaced. `argument` and `flags` (`FLAGS`' keys) name the caller's options in its messages.
    """

    SETTINGS = ".run_settings.json"  # in the staging folder: what `resume` must match; never committed

    # the options a message names for `overwrite` and `resume` (examples/run_classification.py names its own flags)
    FLAGS = {"overwrite": "--overwrite (overwrite=True)", "resume": "--resume (resume=True)"}

    def __init__(self, target, overwrite=False, resume=False, settings=None, argument="`output_dir` (--output-dir)",
                 flags=None):
        self.target = os.path.realpath(os.path.expanduser(str(target)))
        self.parent, self.name = os.path.split(self.target)
        self.argument = argument
        self.flags = {**self.FLAGS, **(flags or {})}
        self.staging = os.path.join(self.parent, f".{self.name}.partial")
        self.previous = os.path.join(self.parent, f".{self.name}.previous")
        self.overwrite, self.resume, self.settings = overwrite, resume, settings
        self.checkpoint, self.owner = None, True
        self._lock = lock_beside(self.target)

    # -- before the run -------------------------------------------------------------------------------------------
    def __enter__(self):
        self.open()
        return self

    def open(self):
        """Check the target, take the lock, recover an interrupted commit and prepare the staging folder: on the
        main process only, when a launcher (torchrun, accelerate launch) started several; the others learn the
        checkpoint to resume from it, or its error, and train into the staging folder it prepared."""
        self.owner = is_main_process()
        self.checkpoint = on_main_then_share(self._open_here)

    def _open_here(self):
        if self.resume and self.overwrite:
            raise ValueError(f"Pass either {self.flags['resume']}, to continue the interrupted run, or "
                             f"{self.flags['overwrite']}, to replace the user's files that a run writes; not both.")
        if not self.name:
            raise ValueError(f"{self.argument} {self.target!r} is the root folder; pass a folder for the run.")
        if os.path.exists(self.target) and not os.path.isdir(self.target):
            raise ValueError(f"{self.argument} {self.target!r} is a file; pass a folder (new, empty, or an earlier "
                             "run) for the run.")
        working = os.path.realpath(os.getcwd())
        if working == self.target or working.startswith(self.target + os.sep):
            raise ValueError(f"{self.argument} {self.target!r} holds the current directory; the run replaces that "
                             "folder when it has succeeded, so choose a folder inside it (e.g. out/model).")
        require_writable_folder(self.parent, self.argument)
        acquire_or_refuse(self._lock, f"Another hf-longdoc run is writing {self.target!r} (it holds "
                                      f"{self._lock.lock_file!r}); wait for it to finish or choose another "
                                      f"{self.argument}.")
        try:
            self._recover_interrupted_commit()
            self._check_target()
            self._check_replaceable()
            self._prepare_staging()
        except BaseException:
            self._release()
            raise
        return self.checkpoint

    def _entries(self, folder):
        return sorted(os.listdir(folder)) if os.path.isdir(folder) else []

    def _users_entries(self, folder):
        """The entries of `folder` that are the user's: everything but the manifest and the run files the package
        wrote there and nobody changed since."""
        manifest = read_manifest(folder)
        return [e for e in self._entries(folder)
                if e != MANIFEST and not (e in manifest["run"] and is_unchanged(folder, e, manifest, "run"))]

    def _check_replaceable(self):
        """Prove, before any work, that an earlier run in the target can be replaced as `commit` will: the target is
        renamed aside and back (an immutable or read-only folder refuses it), and its entries can be moved out (the
        user's files are carried into the new run). An interruption between the two renames is undone by the next
        run's `_recover_interrupted_commit`."""
        if not os.path.isdir(self.target):
            return
        try:
            os.rename(self.target, self.previous)
        except OSError as error:
            raise ValueError(f"{self.argument} {self.target!r} holds an earlier run that cannot be replaced "
                             f"({error.strerror or error}): a finished run takes that folder's place. Make it "
                             "writable (e.g. `chattr -i` / `chmod u+w` on it and its parent), or choose another "
                             "folder.") from None
        os.rename(self.previous, self.target)
        if self._users_entries(self.target) and not os.access(self.target, os.W_OK | os.X_OK):
            raise ValueError(f"{self.argument} {self.target!r} cannot be written, so the files of yours there cannot "
                             "be carried into the new run; make it writable (`chmod u+w`), or choose another "
                             "folder.")

    def _check_target(self):
        users = self._users_entries(self.target)
        taken = [e for e in users if any(fnmatch.fnmatch(e, pattern) for pattern in RUN_FILE_PATTERNS)]
        if taken and not self.overwrite:
            shown = ", ".join(taken[:8]) + (f" and {len(taken) - 8} more" if len(taken) > 8 else "")
            manifest = read_manifest(self.target)
            older = (" (a run saved by an earlier hf-longdoc version has no manifest of its files)"
                     if not manifest["run"] and {"config.json", "metrics.json"} <= set(users) else "")
            interrupted = (f" To continue the interrupted run kept in {self.staging!r} instead, pass "
                           f"{self.flags['resume']}." if last_checkpoint(self.staging) else "")
            raise ValueError(f"{self.argument} {self.target!r} holds {shown}, which hf-longdoc did not write{older} "
                             "(or which changed since) and which a run may replace; choose a new folder, move them "
                             f"away, or pass {self.flags['overwrite']} to let the run replace the files it "
                             f"writes (nothing else there is touched).{interrupted}")
        kept = [e for e in users if e not in taken]
        if kept:
            logger.info("Keeping what hf-longdoc did not write in %s: %s.", self.target, ", ".join(kept))

    def _prepare_staging(self):
        settings_path = os.path.join(self.staging, self.SETTINGS)
        if self.resume:
            self.checkpoint = last_checkpoint(self.staging)
            if self.checkpoint is None:
                raise ValueError(f"{self.flags['resume']} continues an interrupted run from its last complete "
                                 f"checkpoint, and there is none in {self.staging!r}; train without it.")
            self._check_resumed_settings(settings_path)
            logger.info("Resuming the interrupted run into %s from %s.", self.target, self.checkpoint)
            return
        if os.path.isdir(self.staging):
            interrupted = last_checkpoint(self.staging)
            if interrupted is not None and not self.overwrite:
                raise ValueError(f"{self.argument} {self.target!r} has an interrupted run kept in {self.staging!r} "
                                 f"(its last checkpoint: {os.path.basename(interrupted)}); pass "
                                 f"{self.flags['resume']} to continue it, or {self.flags['overwrite']} to discard it "
                                 "and start over.")
            logger.warning("Discarding the interrupted run in %s (%s).", self.staging,
                           self.flags["overwrite"] if interrupted is not None
                           else "it holds no complete checkpoint to resume")
            shutil.rmtree(self.staging)
        try:
            os.makedirs(self.staging)
        except OSError as error:
            raise ValueError(f"{self.argument}: cannot create {self.staging!r} ({error.strerror or error}); choose "
                             "a folder you can write to.") from None
        if self.settings is not None:
            with open(settings_path, "w") as f:
                json.dump(self.settings, f, indent=2, sort_keys=True, default=str)
        logger.info("Training into %s; %s is replaced only when the run has succeeded.", self.staging, self.target)

    def _check_resumed_settings(self, path):
        """A ValueError naming every argument where this run differs from the interrupted one: Trainer would
        otherwise continue it with another schedule, data or size, and save the result under the new settings."""
        if self.settings is None:
            return
        try:
            with open(path) as f:
                recorded = json.load(f)
        except (OSError, ValueError):
            raise ValueError(f"`resume` (--resume): {self.staging!r} does not record the settings of the interrupted "
                             "run, so it cannot be checked; train without --resume.") from None
        given = json.loads(json.dumps(self.settings, default=str))
        # a setting one side lacks came with another hf_longdoc version (an interrupted run of an older one can
        # continue): only the settings both record are compared
        differ = [key for key in sorted(set(recorded) & set(given)) if recorded[key] != given[key]]
        if differ:
            shown = "; ".join(f"{key}: {recorded.get(key)!r} there, {given.get(key)!r} here" for key in differ)
            raise ValueError(f"`resume` (--resume): this run's settings differ from the interrupted run's ({shown}); "
                             "pass the same arguments to continue it, or train without --resume.")

    # -- after the run --------------------------------------------------------------------------------------------
    def commit(self):
        """Move the finished run into the target as one rename, carrying the user's entries over; the earlier run's
        own files are then removed. Writes the run's manifest first. With several processes, every one calls this:
        they meet at a barrier (all have finished writing), the main process commits, and they meet again."""
        wait_for_everyone()
        if self.owner:
            self._commit_here()
        wait_for_everyone()

    def _commit_here(self):
        settings_path = os.path.join(self.staging, self.SETTINGS)
        if os.path.exists(settings_path):
            os.remove(settings_path)
        umask = os.umask(0)
        os.umask(umask)
        run_files = {}
        for entry in self._entries(self.staging):
            path = os.path.join(self.staging, entry)
            if os.path.isfile(path) and entry != MANIFEST:
                os.chmod(path, 0o666 & ~umask)  # some writers create owner-only files (mkstemp)
                run_files[entry] = file_digest(path)
        outputs = {e: digest for e, digest in read_manifest(self.target)["outputs"].items() if e not in run_files}
        write_manifest(self.staging, {"run": run_files, "outputs": outputs, "written": time.time()})
        if not os.path.exists(self.target):
            os.rename(self.staging, self.target)
            return
        users = self._users_entries(self.target)
        os.rename(self.target, self.previous)
        os.rename(self.staging, self.target)  # from here on the new run is in place
        self._carry_back(users)

    def _carry_back(self, users):
        """Move the user's entries from the earlier run's folder into the new one (those the new run wrote over are
        replaced only with `overwrite`, else kept under another name), then remove what is left there: the earlier
        run's own unchanged files."""
        for entry in users:
            destination = os.path.join(self.target, entry)
            if os.path.lexists(destination):
                if self.overwrite:
                    logger.info("Replaced the user's %s (%s).", destination, self.flags["overwrite"])
                    continue
                kept = f"{destination}.kept-{int(time.time())}"
                logger.warning("The new run wrote %s, which was the user's; the user's is kept as %s.", destination,
                               kept)
                destination = kept
            os.rename(os.path.join(self.previous, entry), destination)
        shutil.rmtree(self.previous)

    def _recover_interrupted_commit(self):
        """Finish or undo a commit that was cut between its renames (the lock is held, so no run is live)."""
        if not os.path.isdir(self.previous) or os.path.islink(self.previous):
            return
        if not os.path.exists(self.target):
            logger.warning("Restoring %s from %s (a commit was interrupted).", self.target, self.previous)
            os.rename(self.previous, self.target)
            return
        logger.warning("Finishing an interrupted commit into %s.", self.target)
        overwrite, self.overwrite = self.overwrite, False
        try:
            self._carry_back(self._users_entries(self.previous))
        finally:
            self.overwrite = overwrite

    def __exit__(self, kind, error, traceback):
        if not self.owner:  # the main process cleans up and holds the lock
            return False
        try:
            if kind is not None and os.path.isdir(self.staging):
                if last_checkpoint(self.staging) is not None and not issubclass(kind, RunDiverged):
                    logger.warning("The run stopped (%s); %s is unchanged, and the interrupted run is kept in %s: "
                                   "rerun with %s to continue it.", kind.__name__, self.target, self.staging,
                                   self.flags["resume"])
                else:
                    shutil.rmtree(self.staging, ignore_errors=True)
        finally:
            self._release()
        return False

    def _release(self):
        release_lock(self._lock)


def lock_beside(target):
    """A lock on `.NAME.lock` beside `target` (NAME: its name) that one run at a time holds while it writes `target`;
    it does not wait (`acquire_or_refuse`)."""
    parent, name = os.path.split(target)
    return FileLock(os.path.join(parent or os.sep, f".{name}.lock"), timeout=0)


def acquire_or_refuse(lock, refusal):
    """Take `lock`, or raise a ValueError saying `refusal` when another run holds it."""
    try:
        lock.acquire()
    except Timeout:
        raise ValueError(refusal) from None


def release_lock(lock):
    """Remove the lock file, then release it (a run that starts in between locks a new file: it still runs alone
    once this one is done)."""
    try:
        os.remove(lock.lock_file)
    except OSError:
        pass
    lock.release()


def last_checkpoint(folder):
    """The newest complete `checkpoint-N` folder Trainer left in `folder` (None when there is none): one whose
    `trainer_state.json`, which Trainer writes last, is there and reads as JSON, so a checkpoint cut by a kill (even
    one cut while that file was written) is skipped."""
    names = os.listdir(folder) if os.path.isdir(folder) else []
    steps = [int(name.split("-")[1]) for name in names if name.startswith("checkpoint-")
             and name.split("-")[1].isdigit() and _is_complete(os.path.join(folder, name))]
    return os.path.join(folder, f"checkpoint-{max(steps)}") if steps else None


def _is_complete(checkpoint):
    try:
        with open(os.path.join(checkpoint, "trainer_state.json"), encoding="utf-8") as file:
            return isinstance(json.load(file), dict)
    except (OSError, ValueError):
        return False


__all__ = ["MANIFEST", "RunDiverged", "RunFolder", "acquire_or_refuse", "check_files_free", "file_digest",
           "is_training_run", "is_unchanged", "last_checkpoint", "lock_beside", "read_manifest", "record_outputs",
           "release_lock", "require_writable_folder", "write_manifest"]
