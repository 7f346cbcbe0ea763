"""How long `hf-longdoc --help` and `hf-longdoc COMMAND --help` take, and what `import hf_longdoc` costs, each in a
fresh process, as a user meets them.

    python examples/cli_help_speed.py --repeats 5

Prints one row per command: the median wall-clock and CPU seconds of `--repeats` runs. Then `import hf_longdoc` alone
(lazy: nothing heavy), with Transformers (the families register once it is imported), and the registration's own
share: the same imports without hf_longdoc.
"""

import argparse
import resource
import shutil
import statistics
import subprocess
import sys
import time

COMMANDS = ["", "train", "compare", "predict", "evaluate", "export", "bench", "demo", "attention-map", "push"]
IMPORTS = {
    "import hf_longdoc": "import hf_longdoc",
    "import transformers": "import transformers",
    "import hf_longdoc; from transformers import AutoConfig (registers)":
        "import hf_longdoc\nfrom transformers import AutoConfig",
    "import torch, transformers (what registration adds to)": "import torch, transformers\nfrom transformers import "
                                                               "AutoConfig",
}


def timed(command):
    """(wall seconds, CPU seconds of the child) of one run of `command`."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def median_of(command, repeats):
    runs = [timed(command) for _ in range(repeats)]
    return statistics.median(wall for wall, _ in runs), statistics.median(cpu for _, cpu in runs)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--commands-only", action="store_true", help="time the help of every command, no imports")
    args = parser.parse_args(argv)
    executable = shutil.which("hf-longdoc") or sys.executable
    prefix = [executable] if executable.endswith("hf-longdoc") else [sys.executable, "-m", "hf_longdoc"]
    rows = []
    print("| command | wall s (median) | CPU s |\n|---|---|---|")
    for command in COMMANDS:
        wall, cpu = median_of([*prefix, *([command] if command else []), "--help"], args.repeats)
        name = f"hf-longdoc {command} --help".replace("  ", " ")
        rows.append((name, wall, cpu))
        print(f"| `{name}` | {wall:.2f} | {cpu:.2f} |")
    for name, code in {} if args.commands_only else IMPORTS.items():
        wall, cpu = median_of([sys.executable, "-c", code], args.repeats)
        rows.append((name, wall, cpu))
        print(f"| `{name}` | {wall:.2f} | {cpu:.2f} |")
    return rows


if __name__ == "__main__":
    main()
