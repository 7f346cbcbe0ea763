"""Every verb with a settings dataclass takes its flags from the dataclass's fields: a flag's default is the field's
(the parser holds none of its own), every multi-word flag takes both spellings (`--batch-size`, `--batch_size`), and
the command module writes no default again. Nothing here imports torch: the parsers are what `--help` builds."""

import argparse
import pathlib
from dataclasses import MISSING, fields

import pytest

import hf_longdoc
from hf_longdoc.cli import build_parser
from hf_longdoc.commands.options import settings_from
from hf_longdoc.experiments.settings import BenchCommandSettings, CompareSettings
from hf_longdoc.predicting.settings import PredictSettings
from hf_longdoc.serving.settings import ServeSettings
from hf_longdoc.training.evaluation import EvaluateSettings
from hf_longdoc.training.settings import RunSettings

SRC = pathlib.Path(hf_longdoc.__file__).parent
# verb -> (its settings dataclass, the flags it takes besides the fields: what its library function takes by position,
# and the command's own switches)
SETTINGS = {
    "train": (RunSettings, {"baseline", "help_trainer"}),
    "compare": (CompareSettings, {"help_trainer"}),
    "serve": (ServeSettings, set()),
    "evaluate": (EvaluateSettings, {"dataset"}),
    "bench": (BenchCommandSettings, set()),
    "predict": (PredictSettings, {"dataset", "output"}),
}
# what each verb needs to parse at all (a positional model folder, a required flag)
REQUIRED = {"train": ["--output-dir", "out"], "serve": ["model"], "evaluate": ["model"],
            "predict": ["model", "--dataset", "data.csv", "--output", "out.jsonl"]}


def subparser(verb):
    action = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return action.choices[verb]


def parse(verb, *argv):
    return subparser(verb).parse_args([*REQUIRED.get(verb, []), *argv])


def shown(default):
    """A field's default as `add_settings_arguments` shows it in --help (a tuple comma-separated)."""
    return ",".join(map(str, default)) if isinstance(default, tuple) else default


def field_defaults(settings_class):
    return {f.name: shown(f.default_factory() if f.default_factory is not MISSING else f.default)
            for f in fields(settings_class) if f.init}


@pytest.mark.parametrize("verb", sorted(SETTINGS))
def test_every_flag_default_is_its_settings_fields(verb):
    settings_class, own = SETTINGS[verb]
    defaults = field_defaults(settings_class)
    flags = [action for action in subparser(verb)._actions if action.option_strings and action.dest != "help"]
    unknown = sorted({action.dest for action in flags} - set(defaults) - own)
    assert not unknown, f"{verb}: flags that are not {settings_class.__name__} fields: {unknown}"
    for action in flags:
        if action.dest in own:
            continue
        assert action.default is argparse.SUPPRESS, (verb, action.option_strings)  # no default of the parser's own
        assert action.field_default == defaults[action.dest], (verb, action.option_strings)
    documented = {f.name for f in fields(settings_class) if f.init and "help" in f.metadata}
    assert documented <= {action.dest for action in flags}, (verb, documented - {action.dest for action in flags})


@pytest.mark.parametrize("verb", sorted(SETTINGS))
def test_every_multi_word_flag_takes_both_spellings(verb):
    missing = []
    for action in subparser(verb)._actions:
        for flag in action.option_strings:
            if not flag.startswith("--"):
                continue
            word = flag[2:]
            missing += [spelling for spelling in (f"--{word.replace('_', '-')}", f"--{word.replace('-', '_')}")
                        if spelling not in action.option_strings]
    assert not missing, (verb, missing)


@pytest.mark.parametrize("verb", sorted(SETTINGS))
def test_the_command_module_writes_no_default(verb):
    assert "default=" not in (SRC / "commands" / f"{verb}.py").read_text()


@pytest.mark.parametrize("verb", ["compare", "serve", "evaluate", "bench"])
def test_no_flags_give_the_dataclass_defaults(verb):
    settings_class, _ = SETTINGS[verb]
    assert settings_from(parse(verb), settings_class) == settings_class()


def test_evaluate_takes_either_spelling():
    for flag in ("--batch_size", "--batch-size"):
        settings = settings_from(parse("evaluate", flag, "4"), EvaluateSettings)
        assert settings.batch_size == 4 and settings.text_column == "text"
    args = parse("evaluate", "--dataset", "data.csv", "--split", "test", "--seed", "7", "--threshold", "0.4",
                 "--evidence", "start", "--text-column", "body", "--label-column", "topic")
    settings = settings_from(args, EvaluateSettings)
    assert args.dataset == "data.csv" and args.model_dir == "model"
    assert (settings.split, settings.seed, settings.threshold, settings.evidence, settings.text_column,
            settings.label_column) == ("test", 7, 0.4, "start", "body", "topic")


def test_bench_takes_its_lists_switches_and_either_spelling():
    assert settings_from(parse("bench", "--batch_size", "2"), BenchCommandSettings).batch_size == 2
    settings = settings_from(parse("bench", "--models", "slstm, bert", "--lengths", "512,1024", "--config",
                                   "slstm.compile_gates=true", "--no-micro-benchmarks", "--no-roofline",
                                   "--tokenizers", "docs.txt", "--megabytes", "0.5", "--fit-documents", "10"),
                             BenchCommandSettings)
    assert settings.models == ("slstm", "bert") and settings.lengths == (512, 1024)
    assert settings.config_overrides == {"slstm": {"compile_gates": True}}
    assert not settings.micro_benchmarks and not settings.roofline
    assert (settings.tokenizers, settings.megabytes, settings.fit_documents) == ("docs.txt", 0.5, 10)
    assert settings.output == "out/bench"  # the command's; `run_bench` writes nothing unless given one
    # the tokenizer timed has its own flag: `--num-heads` sizes the models only
    settings = settings_from(parse("bench", "--num-heads", "8"), BenchCommandSettings)
    assert (settings.num_heads, settings.elements_per_material) == (8, 4)
    assert settings_from(parse("bench", "--elements-per-material", "16"), BenchCommandSettings).elements_per_material \
        == 16


@pytest.mark.parametrize("argv, message", [
    (["--lengths", "1k"], "argument --lengths: must be comma-separated positive integers, got '1k'"),
    (["--batch-size", "2", "--batch_size", "3"], "one setting, given twice"),
    (["--roofline", "--no-roofline"], "one setting, given twice"),
    (["--dtype", "float64"], "invalid choice"),
])
def test_bench_flags_refuse_what_they_refused(argv, message, capsys):
    with pytest.raises(SystemExit):
        parse("bench", *argv)
    assert message in capsys.readouterr().err


def test_one_rule_says_whether_a_name_is_a_hub_id(tmp_path, monkeypatch):
    from hf_longdoc.utils.parsing import is_hub_id

    monkeypatch.chdir(tmp_path)
    (tmp_path / "local-model").mkdir()
    for name in ("bert-base-uncased", "sentence-transformers/all-MiniLM-L6-v2", "org/name.v2"):
        assert is_hub_id(name), name
    for name in ("local-model", "./model", "/abs/model", "~/model", "a/b/c", "data.csv", "train.jsonl", "", None,
                 "bad name", "org//name"):
        assert not is_hub_id(name), name
