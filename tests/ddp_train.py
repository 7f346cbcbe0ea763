"""A few DDP Trainer steps on CPU with gloo, run under `torchrun --nproc_per_node 2` by `launch` (one family) or
`launch_jobs` (several, one after the other in the same two processes: a launch starts torchrun and two Pythons, about
10 s on 2 cores, and the steps take well under one): `python ddp_train.py OUTPUT_DIR JOBS_JSON`, a list of
[family, config overrides] pairs."""

import json
import os
import socket
import subprocess
import sys

import psutil
import torch
from safetensors.torch import load_file, save_file
from transformers import Trainer, TrainingArguments

sys.path.insert(0, os.path.dirname(__file__))
from families import FAMILY_CASES  # noqa: E402

LAUNCH_TIMEOUTS = (300, 600)  # seconds: a launch that hangs is killed, then tried once more


def free_port():
    """A loopback port no process holds now: a fixed port hangs the rendezvous when a stray run still holds it (a CI
    run once waited out its 600 s timeout there)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return str(probe.getsockname()[1])


def launch(name, output_dir, overrides=None):
    """The steps of family `name` (with config `overrides`) on 2 processes: (completed process, each rank's final
    weights or None)."""
    result, weights = launch_jobs([(name, overrides or {})], output_dir)
    return result, weights and weights[0]


def launch_jobs(jobs, output_dir):
    """Run this script on 2 processes over loopback, each (family, overrides) of `jobs` in turn; returns (completed
    process, for each job each rank's final weights, or None when the launch failed). A launch that hangs (the
    rendezvous or a gloo connection, never the training: one clean-clone CI run in several waited out its timeout in a
    case that passes in about a minute) is killed at 300 s and launched once more on a fresh port; the assertions on
    its result are unchanged."""
    env = dict(os.environ, OMP_NUM_THREADS="1", HF_HUB_OFFLINE="1", GLOO_SOCKET_IFNAME="lo")
    for timeout in LAUNCH_TIMEOUTS:
        command = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_addr",
                   "127.0.0.1", "--master_port", free_port(), __file__, str(output_dir),
                   json.dumps([[name, overrides] for name, overrides in jobs])]
        process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                   cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        try:
            stdout, stderr = process.communicate(timeout=timeout)
            result = subprocess.CompletedProcess(command, process.returncode, stdout, stderr)
            break
        except subprocess.TimeoutExpired:
            kill_tree(process)
            if timeout == LAUNCH_TIMEOUTS[-1]:
                raise
    if result.returncode:
        return result, None
    return result, [[load_file(os.path.join(output_dir, f"job{job}-rank{rank}.safetensors")) for rank in (0, 1)]
                    for job in range(len(jobs))]


# every job the tests run, launched together by `SharedLaunch`: the conformance suite's families as they are, and
# test_segment_lm.py's full-gradient mode in both variants
SHARED_JOBS = [(case.name, {}) for case in FAMILY_CASES] + [
    ("segment_lm", {"gradient_mode": "full", "variant": variant, "segments_per_pass": 2}) for variant in ("att", "cat")]


class SharedLaunch:
    """`SHARED_JOBS` in one launch, made when a test first asks for one of them (ten launches took 100 s on 2 cores,
    one takes a quarter of that)."""

    def __init__(self, output_dir):
        self.output_dir, self.result, self.weights = output_dir, None, None

    def run(self, name, output_dir, overrides=None):
        """`launch(name, output_dir, overrides)`'s result, from the shared launch where the job is one of it. When the
        shared launch failed, the job is launched alone, so that each test says whether its own job is the one that
        fails."""
        job = (name, overrides or {})
        if job in SHARED_JOBS:
            if self.result is None:
                self.result, self.weights = launch_jobs(SHARED_JOBS, self.output_dir)
            if self.weights is not None:
                return self.result, self.weights[SHARED_JOBS.index(job)]
        return launch(name, output_dir, overrides)


def kill_tree(process):
    """Kill a launcher and every rank it started, and collect its pipes: torchrun starts each rank in a session of its
    own, so killing the launcher (or its process group) left a hung rank running past the test, holding a core and
    the output pipes."""
    launcher = psutil.Process(process.pid)
    for stuck in launcher.children(recursive=True) + [launcher]:
        try:
            stuck.kill()
        except psutil.NoSuchProcess:  # it ended meanwhile
            pass
    process.communicate()


def collate(features):
    n = max(len(f["input_ids"]) for f in features)
    return {
        "input_ids": torch.tensor([f["input_ids"] + [0] * (n - len(f["input_ids"])) for f in features]),
        "attention_mask": torch.tensor([[1] * len(f["input_ids"]) + [0] * (n - len(f["input_ids"])) for f in features]),
        "labels": torch.tensor([f["label"] for f in features]),
    }


def main(output_dir, jobs):
    for job, (name, overrides) in enumerate(jobs):
        train(name, overrides, os.path.join(output_dir, f"job{job}"))
    # shut gloo down before the interpreter does: left to exit, its threads can abort the process (SIGABRT,
    # "terminate called without an active exception"), which failed a finished run once in CI
    torch.distributed.barrier()  # both ranks reach the teardown together; destroying alone hung one CI run
    torch.distributed.destroy_process_group()


def train(name, overrides, prefix):
    """3 DDP steps of family `name`'s tiny classifier; each rank saves its final weights to PREFIX-rankN."""
    case = next(case for case in FAMILY_CASES if case.name == name)
    torch.manual_seed(0)
    model = case.classification_class(case.config(**overrides))
    rows = []
    for i in range(16):
        input_ids, _ = case.batch([5 + (7 * i) % 36], seed=i)
        rows.append({"input_ids": input_ids[0].tolist(), "label": i % case.tiny["num_labels"]})
    # Checkpointing turns find_unused_parameters off, the strict setting; a backbone with layers a classifier never
    # uses (CANINE's upsampling) needs it on instead, as it would in Transformers' own CANINE classifier.
    strict = not case.unused_parameters
    args = TrainingArguments(output_dir=prefix, max_steps=3, per_device_train_batch_size=2, use_cpu=True,
                             ddp_backend="gloo", report_to="none", save_strategy="no", learning_rate=1e-2,
                             gradient_checkpointing=strict and model.supports_gradient_checkpointing,
                             ddp_find_unused_parameters=not strict)
    trainer = Trainer(model=model, args=args, train_dataset=rows, data_collator=collate)
    trainer.train()
    assert trainer.args.world_size == 2, trainer.args.world_size
    rank = int(os.environ["RANK"])
    save_file({k: v.contiguous() for k, v in trainer.model.state_dict().items()}, f"{prefix}-rank{rank}.safetensors")


if __name__ == "__main__":
    main(sys.argv[1], json.loads(sys.argv[2]))
