"""The `hf-longdoc` verbs, one module each.

`add_parser(subparsers)` builds a verb's parser; `run(args)` calls one library function and prints what it returns.
"""

from . import attention_map, bench, compare, demo, evaluate, export, predict, push, serve, train

COMMANDS = (train, evaluate, predict, serve, bench, compare, attention_map, export, push, demo)

__all__ = ["COMMANDS"]
