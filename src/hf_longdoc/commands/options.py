"""What the verbs share on the command line: the help formatter, the flags of a settings dataclass
(`add_settings_arguments`, read back by `settings_from`), the `TrainingArguments` flags of `train` and `compare`, and
the model-folder check. What a list or `--config` option's text becomes is `parsing`'s."""

import argparse
import os
from dataclasses import MISSING, fields, is_dataclass


class Formatter(argparse.ArgumentDefaultsHelpFormatter):
    """Every optional flag's default shows in --help (a required one has none to show, and a switch's is its
    absence)."""

    def _get_help_string(self, action):
        return action.help if action.required or action.nargs == 0 else super()._get_help_string(action)


def string_to_bool(text):
    """`--flag`, `--flag true` or `--flag no`: a switch's value, read as Transformers' `HfArgumentParser` reads it."""
    if isinstance(text, bool):
        return text
    words = {"yes": True, "true": True, "t": True, "y": True, "1": True,
             "no": False, "false": False, "f": False, "n": False, "0": False}
    if text.lower() not in words:
        raise argparse.ArgumentTypeError(f"must be true or false, got {text!r}")
    return words[text.lower()]


class OneSpelling(argparse.Action):
    """Stores a flag's value, and refuses two spellings of one flag that disagree (`--epochs 3 --num_train_epochs
    5`): which of them the user meant cannot be guessed."""

    def __init__(self, *args, convert=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.convert = convert

    def __call__(self, parser, namespace, values, option_string=None):
        if self.nargs == 0:  # `--no-NAME`: its value is its presence
            values = self.const
        elif self.convert is not None and values is not self.const:  # `--flag VALUE`: named as the user spelled it
            try:
                values = ([self.convert(value) for value in values] if isinstance(values, list)
                          else self.convert(values))
            except (argparse.ArgumentTypeError, ValueError, TypeError) as error:
                parser.error(f"argument {option_string}: {error}")
        given = vars(namespace).setdefault("_spellings", {})
        earlier = given.get(self.dest)
        if earlier is not None and earlier[0] != option_string and earlier[1] != values:
            parser.error(f"{earlier[0]} {earlier[1]!r} and {option_string} {values!r} are one setting, given twice "
                         "with different values; pass one of them.")
        given[self.dest] = (option_string, values)
        setattr(namespace, self.dest, values)


def field_help(settings_class, name):
    """The metadata of field `name`, from the nearest class in `settings_class`'s hierarchy that documents it (a
    subclass may change a default without repeating the help)."""
    for klass in settings_class.__mro__:
        documented = {f.name: f for f in fields(klass) if "help" in f.metadata} if is_dataclass(klass) else {}
        if name in documented:
            return documented[name].metadata
    return None


def spellings(name, metadata):
    """The option strings of a settings field: Transformers' name first where the field is a `TrainingArguments`
    one, then the field's own; each with dashes and with underscores, as `HfArgumentParser` takes them."""
    words = [metadata["trainer"]] if "trainer" in metadata else []
    words.append(metadata.get("flag", name))
    return list(dict.fromkeys(f"--{spelling}" for word in words
                              for spelling in (word.replace("_", "-"), word)))


def add_settings_arguments(parser, settings_class, skip=()):
    """One flag per documented field of `settings_class` (`parsing.option`): its help, type and default are
    the field's, written once. A flag the user does not give is left out of the parsed arguments, so the dataclass
    default applies (`settings_from`). A switch that is on unless turned off (`roofline=True`) also takes
    `--no-NAME`, as Transformers' `HfArgumentParser` gives such a field."""
    for f in fields(settings_class):
        metadata = field_help(settings_class, f.name)
        if metadata is None or f.name in skip:
            continue
        default = f.default_factory() if f.default_factory is not MISSING else f.default
        if isinstance(default, tuple):
            default = ",".join(map(str, default))
        shown = "" if default is None or default is False or default in ("", {}) else f" (default: {default})"
        kwargs = dict(dest=f.name, default=argparse.SUPPRESS, action=OneSpelling,
                      help=metadata["help"].replace("%", "%%") + shown, required=metadata.get("required", False))
        if isinstance(default, bool) or metadata.get("switch"):
            kwargs.update(nargs="?", const=True, convert=string_to_bool, metavar="true|false")
        else:
            kwargs.update(convert=metadata.get("type", type(default) if default is not None else str))
            for key in ("nargs", "metavar", "choices"):
                if key in metadata:
                    kwargs[key] = metadata[key]
        names = spellings(f.name, metadata)
        action = parser.add_argument(*names, **kwargs)
        action.field_default = default  # what --help shows (the parsed arguments leave it out: `settings_from`)
        if default is True:
            word = metadata.get("flag", f.name)
            negated = parser.add_argument(*dict.fromkeys((f"--no-{word.replace('_', '-')}", f"--no_{word}")),
                                          dest=f.name, default=argparse.SUPPRESS, action=OneSpelling, nargs=0,
                                          const=False, help=f"the same as {names[0]} false")
            negated.field_default = default


def settings_from(args, settings_class, **parsed):
    """The `settings_class` (`RunSettings`, `CompareSettings`, `EvaluateSettings`, ...) of the parsed `args`: each
    field from its flag when the user gave it (combined as its metadata says: `--config` pairs to a dict), `parsed`
    for the others that are set (`training_args`); every other field keeps its dataclass default."""
    given = {}
    for f in fields(settings_class):
        if not f.init or not hasattr(args, f.name):
            continue
        value = getattr(args, f.name)
        metadata = field_help(settings_class, f.name) or {}
        given[f.name] = metadata["combine"](value) if "combine" in metadata else value
    return settings_class(**{**given, **parsed})


def require_model_folder(path):
    """A ValueError unless `path` is a saved model folder."""
    if not os.path.isfile(os.path.join(path, "config.json")):
        raise ValueError(f"{path!r} is not a saved model folder (no config.json).")


# Transformers 4 spellings that Transformers 5 folded into another field: (the field, what it now reads)
RENAMED_TRAINER_FLAGS = {"warmup_ratio": "warmup_steps"}  # a warmup_steps below 1 is a fraction of the steps


def parse_trainer_flags(argv, command):
    """The `TrainingArguments` fields among `argv` (what the command's own flags left), parsed by Transformers'
    `HfArgumentParser` as its example scripts parse them: {field: value} for the ones given, nothing for the others.
    An argument that is not a TrainingArguments field is refused, naming it."""
    if not argv:
        return {}
    import logging

    from transformers import HfArgumentParser, TrainingArguments

    parser = HfArgumentParser(TrainingArguments, prog=f"hf-longdoc {command}", add_help=False, allow_abbrev=False)
    for action in parser._actions:  # only what the user gave: the recipe's own values apply to the rest
        action.default, action.required = argparse.SUPPRESS, False
    renamed = []
    for word in argv:
        flag, equals, value = word.partition("=")
        name = flag.lstrip("-").replace("-", "_")
        if flag.startswith("--") and name in RENAMED_TRAINER_FLAGS:
            logging.getLogger(__name__).info("--%s is Transformers 4's spelling: reading it as --%s.", name,
                                             RENAMED_TRAINER_FLAGS[name])
            word = f"--{RENAMED_TRAINER_FLAGS[name]}{equals}{value}"
        renamed.append(word)
    namespace, unknown = parser.parse_known_args(renamed)
    if unknown:
        raise ValueError(f"unrecognized arguments: {' '.join(unknown)} (`hf-longdoc {command} --help` lists the "
                         "package's flags; every TrainingArguments field is taken too: `--help-trainer` lists them).")
    return vars(namespace)


class TrainerHelp(argparse.Action):
    """`--help-trainer`: Transformers' own help for every `TrainingArguments` field (imports Transformers, so it
    takes a few seconds where `--help` takes a fraction of one)."""

    def __init__(self, option_strings, dest, **kwargs):
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None):
        from transformers import HfArgumentParser, TrainingArguments

        HfArgumentParser(TrainingArguments, prog=parser.prog).print_help()
        parser.exit()


def add_trainer_flags(parser):
    """Let `parser`'s command take every `TrainingArguments` field as a flag of its own (`parse_trainer_flags`),
    and list them with `--help-trainer`."""
    parser.add_argument("--help-trainer", "--help_trainer", action=TrainerHelp,
                        help="list the TrainingArguments flags this command also takes (--gradient_accumulation_steps, "
                             "--optim, --report_to, --torch_compile, --fsdp, --deepspeed, ...), and exit")
    parser.set_defaults(takes_trainer_flags=True)
