"""`hf-longdoc`: the entry point; it wires the verbs of `commands/` together and turns input errors into messages."""

import argparse
import logging
import re
import sys

from .commands import COMMANDS


def build_parser():
    parser = argparse.ArgumentParser(prog="hf-longdoc", description="Long-document classification with Transformers")
    subparsers = parser.add_subparsers(dest="command", required=True)
    for command in COMMANDS:
        command.add_parser(subparsers)
    return parser


# A number that starts with a minus sign: argparse takes `-1e-3`, `-inf` or `-5,10` after a flag for another flag
# ("expected one argument"), so the value never reaches the flag's own check
NEGATIVE_NUMBER = re.compile(r"-(\d+\.?\d*|\.\d+)(e[-+]?\d+)?(,.*)?|-(inf|infinity|nan)", re.IGNORECASE)


def value_flags(parser):
    """The option strings of `parser` that take a value (not the switches)."""
    return {flag for action in parser._actions if action.nargs != 0 for flag in action.option_strings}


def attach_negative_numbers(parser, argv):
    """`argv` with a negative number that follows a flag taking a value written as `--flag=VALUE`, so argparse hands
    it to the flag's type, whose message names the flag and the rule ("must be positive"), instead of refusing it
    as a missing argument. A flag abbreviated as argparse allows is recognised too."""
    subparsers = next(action for action in parser._actions if isinstance(action, argparse._SubParsersAction))
    command = next((word for word in argv if word in subparsers.choices), None)
    flags = value_flags(parser) | (value_flags(subparsers.choices[command]) if command else set())
    joined = []
    for word in argv:
        previous = joined[-1] if joined else ""
        takes_value = previous.startswith("--") and "=" not in previous and (
            previous in flags or any(flag.startswith(previous) for flag in flags))
        if takes_value and NEGATIVE_NUMBER.fullmatch(word):
            joined[-1] = f"{previous}={word}"
        else:
            joined.append(word)
    return joined


def main(argv=None):
    parser = build_parser()
    argv = attach_negative_numbers(parser, list(sys.argv[1:] if argv is None else argv))
    try:
        args, rest = parser.parse_known_args(argv)
        if rest and not getattr(args, "takes_trainer_flags", False):
            parser.parse_args(argv)  # argparse's own message for a flag the command does not take
    except SystemExit as stop:  # --help, or a flag argparse refused (its message is printed): the exit code
        return stop.code
    args.trainer_flags = rest  # train and compare read TrainingArguments fields from them
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    for noisy in ("httpx", "urllib3", "filelock"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    try:
        from .utils.distributed import finish
        from .utils.threads import share_cores

        if args.command != "push":  # every other command computes: it takes this process's share of the cores
            share_cores(args.command)
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
