"""Launch the `hf-longdoc` command itself under `torchrun --nproc_per_node 2` on CPU (gloo), as a user does:
`launch_cli(["train", ...], cwd)`. Shared by the tests of every verb that runs on several processes."""

import os
import shutil
import subprocess
import sys

from ddp_train import LAUNCH_TIMEOUTS, free_port, kill_tree


def hf_longdoc_command():
    """The installed `hf-longdoc` console script (beside this Python), as torchrun `--no-python` runs it."""
    beside = os.path.join(os.path.dirname(sys.executable), "hf-longdoc")
    return beside if os.path.exists(beside) else shutil.which("hf-longdoc")


def launch_cli(arguments, cwd, processes=2):
    """`torchrun --nproc_per_node 2 --no-python hf-longdoc ARGUMENTS` in `cwd`; the completed process. A launch that
    hangs (the rendezvous, never the work) is killed with its ranks and tried once more on a fresh port."""
    env = dict(os.environ, OMP_NUM_THREADS="1", HF_HUB_OFFLINE="1", GLOO_SOCKET_IFNAME="lo")
    for timeout in LAUNCH_TIMEOUTS:
        command = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", str(processes),
                   "--master_addr", "127.0.0.1", "--master_port", free_port(), "--no-python", hf_longdoc_command(),
                   *arguments]
        process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                   cwd=cwd)
        try:
            stdout, stderr = process.communicate(timeout=timeout)
            return subprocess.CompletedProcess(command, process.returncode, stdout, stderr)
        except subprocess.TimeoutExpired:
            kill_tree(process)
            if timeout == LAUNCH_TIMEOUTS[-1]:
                raise
