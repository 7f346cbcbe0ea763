"""`hf-longdoc`: the entry point; it wires the verbs of `commands/` together and turns input errors into messages."""

import argparse
import logging
import sys

from .commands import COMMANDS
from .distributed import finish


def build_parser():
    parser = argparse.ArgumentParser(prog="hf-longdoc", description="Long-document classification with Transformers")
    subparsers = parser.add_subparsers(dest="command", required=True)
    for command in COMMANDS:
        command.add_parser(subparsers)
    return parser


def main(argv=None):
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as stop:  # --help, or a flag argparse refused (its message is printed): the exit code
        return stop.code
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    for noisy in ("httpx", "urllib3", "filelock"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    try:
        args.run(args)
        finish()  # under torchrun: every process leaves the group together
    except (ValueError, TypeError, OSError) as error:
        print(f"hf-longdoc {args.command}: error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # what was kept (an interrupted run, for --resume) is logged where it happens
        print(f"hf-longdoc {args.command}: interrupted", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
