"""Several processes of one command (`torchrun`, `accelerate launch`): who writes, and how the others wait.

Under a launcher every process runs the same command. Trainer shares the training between them, but the output
folder and its lock must have one owner: the main process stages, locks and commits; the others train into the
folder it prepared and wait at a barrier. Accelerate's `PartialState` sets the process group up from the launcher's
environment (gloo on a CPU, NCCL on GPUs), as Trainer itself does, so nothing here chooses a backend.
"""

import os

import torch


def launched_processes():
    """How many processes the launcher started for this command (1 without one): `WORLD_SIZE`, which torchrun and
    accelerate set."""
    try:
        return int(os.environ.get("WORLD_SIZE", "1"))
    except ValueError:
        return 1


def is_distributed():
    """Whether this command runs as one of several processes."""
    return launched_processes() > 1


def state():
    """Accelerate's `PartialState` (it joins the launcher's process group on first use); None in one process."""
    if not is_distributed():
        return None
    from accelerate import PartialState

    # as Trainer sets it up (`TrainingArguments(use_cpu=...)`): without `cpu`, Accelerate on a machine without a GPU
    # sees no distributed setting and each process thinks it is the only one
    return PartialState(cpu=not torch.cuda.is_available())


def is_main_process():
    """Whether this process owns the outputs: the only one, or rank 0 of several."""
    shared = state()
    return shared is None or shared.is_main_process


def wait_for_everyone():
    """A barrier across the processes (nothing in one process)."""
    shared = state()
    if shared is not None:
        shared.wait_for_everyone()


def on_main_then_share(work):
    """Run `work()` on the main process only and give every process its result; an error it raises (a ValueError,
    TypeError or OSError: the user's input) is raised on every process with the same message, so no process waits
    for a main process that has already given up."""
    shared = state()
    if shared is None:
        return work()
    outcome, raised = [None, None], None
    if shared.is_main_process:
        try:
            outcome = [work(), None]
        except (ValueError, TypeError, OSError) as error:
            outcome, raised = [None, (type(error).__name__, str(error))], error
    torch.distributed.broadcast_object_list(outcome, src=0)
    result, error = outcome
    if raised is not None:
        raise raised
    if error is not None:
        kind = {"ValueError": ValueError, "TypeError": TypeError}.get(error[0], OSError)
        raise kind(f"{error[1]} (reported by the main process)")
    return result


def finish():
    """Leave the process group together (a barrier, then its teardown), if this command joined one: left to the
    interpreter's exit, gloo's threads can abort a finished process (SIGABRT), which failed a finished run once."""
    if is_distributed() and torch.distributed.is_available() and torch.distributed.is_initialized():
        torch.distributed.barrier()
        torch.distributed.destroy_process_group()


__all__ = ["finish", "is_distributed", "is_main_process", "launched_processes", "on_main_then_share", "state",
           "wait_for_everyone"]
