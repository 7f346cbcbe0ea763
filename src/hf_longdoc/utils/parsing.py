"""What a comma-separated or `KEY=VALUE` option becomes, for every verb and the Python API alike.

The settings fields take these as their flag's `type` or `combine` (`parsing.option`), so `--models a,b`,
`--lengths 512,1024` and `--config slstm.hidden_size=64` parse the same way under every verb; an argparse error says
what the values must be, and the flag it came from is named by the parser (`commands.options.OneSpelling`) or by
`named`. It imports nothing of ours, as `rules` (the rule every single number follows) does not; `option` and
`settings_of` declare and build the settings dataclasses every verb takes.
"""

import argparse
import json
import os
from dataclasses import field, fields, replace


def option(default=None, help="", *, factory=None, **flag):
    """A settings field that is also a command-line flag: `help` is its documentation (shown by `--help`), `flag`
    says how the CLI reads it (`type`: what parses each value, `combine`: what the values become together, `nargs`,
    `metavar`, `choices`, `required`, `flag`: another name for the flag, `trainer`: the `TrainingArguments` field it
    is, whose name is then the flag's and this one's an alias). A field whose default is True also takes
    `--no-NAME`, as Transformers' `HfArgumentParser` gives it. The default is written here once, for the Python API
    and the CLI alike."""
    metadata = {"help": help, **flag}
    if factory is not None:
        return field(default_factory=factory, metadata=metadata)
    return field(default=default, metadata=metadata)


def settings_of(settings_class, settings, changes, caller, example):
    """`settings` (a `settings_class`; None: its defaults) with `changes` to its fields: what a library function
    (`caller`, e.g. "predict()") builds from its keyword arguments. A TypeError names an unknown argument, or
    `settings` of another class (`example` shows the keyword spelling)."""
    known = [f.name for f in fields(settings_class) if f.init]
    if unknown := sorted(set(changes) - set(known)):
        raise TypeError(f"{caller} got unknown arguments {unknown}; it takes {', '.join(known)} (see "
                        f"{settings_class.__name__}).")
    if settings is None:
        return settings_class(**changes)
    if not isinstance(settings, settings_class):
        raise TypeError(f"`settings` must be a {settings_class.__name__}, got {type(settings).__name__}; or pass its "
                        f"fields as keyword arguments ({example}).")
    return replace(settings, **changes) if changes else settings


DATA_FILE_EXTENSIONS = (".csv", ".tsv", ".json", ".jsonl", ".parquet", ".txt", ".arrow")


def is_hub_id(name, namespaced=False):
    """Whether `name` names a Hub repository (`name` or `org/name`; `namespaced`: only `org/name`, as a model card's
    metadata names one) rather than a local path: the one rule every `--backbone`, `--tokenizer` and model card asks.
    A path that exists, or that starts with `.`, `/` or `~`, holds more than one `/` or ends in a data file's
    extension, is local; the rest must be a valid repository id (huggingface_hub's `validate_repo_id`)."""
    if not isinstance(name, str) or not name or name.startswith((".", "/", "~")) or name.count("/") > 1:
        return False
    if namespaced and "/" not in name:
        return False
    if name.lower().endswith(DATA_FILE_EXTENSIONS) or os.path.exists(os.path.expanduser(name)):
        return False
    from huggingface_hub.utils import HFValidationError, validate_repo_id

    try:
        validate_repo_id(name)
    except HFValidationError:
        return False
    return True


def name_list(text):
    """`"a, b,"` -> ("a", "b"): a comma-separated option's entries."""
    return tuple(part.strip() for part in text.split(",") if part.strip())


def evidence_list(text):
    """`--evidence start,end` -> ("start", "end"); `none` -> ()."""
    return () if text == "none" else name_list(text)


def positive_integers(text):
    """`"512,1024"` -> (512, 1024); an argparse error that says what they must be otherwise."""
    try:
        values = tuple(int(part) for part in text.split(","))
    except ValueError:
        values = ()
    if not values or any(value < 1 for value in values):
        raise argparse.ArgumentTypeError(f"must be comma-separated positive integers, got {text!r}")
    return values


def length_list(text):
    """`--bench-lengths 512,1024` -> (512, 1024); `none` -> (); an error naming the rule otherwise."""
    if text == "none":
        return ()
    try:
        return positive_integers(text)
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(f"must be comma-separated positive integers or 'none', got {text!r}") from None


def word_pair(text):
    """`--task-words 300,900` -> (300, 900): min,max words per built-in document."""
    try:
        words = positive_integers(text)
    except argparse.ArgumentTypeError:
        words = ()
    if len(words) != 2 or words[0] > words[1]:
        raise argparse.ArgumentTypeError(f"must be two positive integers min,max with min <= max, got {text!r}")
    return words


def parse_config_overrides(pairs):
    """`["hidden_size=64", "default_context=random"]` -> `{"hidden_size": 64, "default_context": "random"}`."""
    overrides = {}
    for pair in pairs or []:
        if "=" not in pair:
            raise ValueError(f"`--config` takes key=value pairs, got {pair!r}.")
        key, value = pair.split("=", 1)
        try:
            overrides[key.strip()] = json.loads(value)
        except json.JSONDecodeError:
            overrides[key.strip()] = value  # a bare string such as `random`
    return overrides


def settings_text(settings):
    """`{"variant": "base", "hidden_size": 64}` -> `"variant=base hidden_size=64"`: settings as `--config` takes
    them, for a log, a model card or a CSV cell."""
    return " ".join(f"{key}={value}" for key, value in settings.items())


def per_model_overrides(pairs):
    """`["slstm.hidden_size=64"]` -> `{"slstm": {"hidden_size": 64}}`."""
    per_model = {}
    for key, value in parse_config_overrides(pairs).items():
        model, dot, setting = key.rpartition(".")
        if not dot or not model:
            raise ValueError(f"`--config` takes MODEL.KEY=VALUE pairs (e.g. slstm.compile_gates=true), got {key!r}.")
        per_model.setdefault(model, {})[setting] = value
    return per_model


def named(parse, value, flag):
    """`parse(value)` (one of the parsers above), its argparse error turned into a ValueError naming `flag`: for a
    value that does not come through a parser (a function's argument, a flag parsed by hand)."""
    try:
        return parse(value)
    except argparse.ArgumentTypeError as error:
        raise ValueError(f"`{flag}` {error}.") from None


def word_range(value):
    """`"300,900"` -> (300, 900), the built-in task's min,max words per document; a ValueError naming the flag."""
    return named(word_pair, value, "--task-words")


__all__ = ["evidence_list", "length_list", "name_list", "named", "parse_config_overrides", "per_model_overrides",
           "positive_integers", "word_pair", "word_range"]
