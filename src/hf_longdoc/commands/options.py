"""Parsing helpers the verbs share: the dataset options, `--config` pairs and comma-separated lists."""

import argparse
import json
import os
from dataclasses import fields

from ..numbers import SEED, THRESHOLD


class Formatter(argparse.ArgumentDefaultsHelpFormatter):
    """Every optional flag's default shows in --help (a required one has none to show, and a switch's is its
    absence)."""

    def _get_help_string(self, action):
        return action.help if action.required or action.nargs == 0 else super()._get_help_string(action)


def add_data_arguments(parser, seed_help="seed of the data split, the model and training", seed_default=42,
                       threshold_default=0.3,
                       threshold_help="multi-label decision threshold on sigmoid scores, in (0, 1); saved with the "
                                      "model (`multi_label_threshold` in its config.json)"):
    parser.add_argument("--dataset", default=None,
                        help="Hub id, local .csv/.tsv/.json/.jsonl/.parquet file, or a folder of LABEL/*.txt files "
                             "(one folder per class); None: the built-in long-document task")
    parser.add_argument("--text-column", default="text",
                        help="the column holding the document, or several comma-separated (title,text), joined")
    parser.add_argument("--label-column", default="label", help="class name/id, or a list of labels (multi-label)")
    parser.add_argument("--evidence", default="end", choices=["start", "middle", "end", "anywhere"],
                        help="built-in task only: where the label evidence sits")
    parser.add_argument("--seed", type=SEED.parse, default=seed_default, help=seed_help)
    parser.add_argument("--threshold", type=THRESHOLD.parse, default=threshold_default, help=threshold_help)


def add_precision_arguments(parser):
    """--bf16 and --fp16, Trainer's mixed-precision switches (what `train` and `compare` take)."""
    parser.add_argument("--bf16", action="store_true",
                        help="mixed precision in bfloat16 (a GPU, or a CPU with AVX-512 BF16 / AMX); weights stay "
                             "float32")
    parser.add_argument("--fp16", action="store_true", help="mixed precision in float16 (a CUDA GPU)")


def settings_from(args, settings_class, **parsed):
    """The `settings_class` (`RunSettings`, `CompareSettings`) of the parsed `args`: each field from the flag of the
    same name (`--max-length` -> `max_length`), `parsed` for the fields whose flag is text to convert (`--config`,
    `--task-words`); a field without a flag keeps its default. A new option is a field plus its flag, nothing more."""
    given = {f.name: getattr(args, f.name) for f in fields(settings_class) if f.init and hasattr(args, f.name)}
    return settings_class(**{**given, **parsed})


def word_range(value):
    """`"300,900"` -> (300, 900), the built-in task's min,max words per document; a ValueError naming the flag."""
    words = integers(value, "--task-words")
    if len(words) != 2 or not 0 < words[0] <= words[1]:
        raise ValueError(f"`--task-words` must be min,max with 0 < min <= max, got {value!r}.")
    return tuple(words)


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


def per_model_overrides(pairs):
    """`["slstm.hidden_size=64"]` -> `{"slstm": {"hidden_size": 64}}`."""
    per_model = {}
    for key, value in parse_config_overrides(pairs).items():
        model, dot, setting = key.rpartition(".")
        if not dot or not model:
            raise ValueError(f"`--config` takes MODEL.KEY=VALUE pairs (e.g. slstm.compile_gates=true), got {key!r}.")
        per_model.setdefault(model, {})[setting] = value
    return per_model


def integers(value, name):
    """`"512,1024"` -> (512, 1024): positive integers, or a ValueError naming the option."""
    try:
        parsed = tuple(int(part) for part in value.split(","))
    except ValueError:
        raise ValueError(f"`{name}` must be comma-separated integers, got {value!r}.") from None
    if any(part < 1 for part in parsed):
        raise ValueError(f"`{name}` must be comma-separated positive integers, got {value!r}.")
    return parsed


def names(value):
    """`"a, b,"` -> ["a", "b"]: the entries of a comma-separated option."""
    return [part.strip() for part in value.split(",") if part.strip()]


def require_model_folder(path):
    """A ValueError unless `path` is a saved model folder."""
    if not os.path.isfile(os.path.join(path, "config.json")):
        raise ValueError(f"{path!r} is not a saved model folder (no config.json).")
