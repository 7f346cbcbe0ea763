"""`hf-longdoc compare`: train every method and the baselines with one budget and write a report.

Its flags are `CompareSettings`' fields (help and defaults written there once) and every `TrainingArguments` field
under its own name, as `train` takes them.
"""

from ..experiments.settings import CompareSettings
from .options import Formatter, add_settings_arguments, add_trainer_flags


def add_parser(subparsers):
    parser = subparsers.add_parser("compare", formatter_class=Formatter, allow_abbrev=False,
                                   help="train every method and the baselines with one budget; report",
                                   description="Train every method and the baselines with one budget and write a "
                                               "report. Where a flag is also a TrainingArguments field, Transformers' "
                                               "name comes first and ours is an alias; every other TrainingArguments "
                                               "field is taken under its own name (--help-trainer lists them).")
    add_settings_arguments(parser, CompareSettings)
    add_trainer_flags(parser)
    parser.set_defaults(run=run)


def run(args):
    import os

    from ..experiments.compare import compare
    from ..utils.distributed import is_main_process
    from .options import parse_trainer_flags, settings_from

    settings = settings_from(args, CompareSettings,
                             training_args=parse_trainer_flags(args.trainer_flags, "compare") or None)
    compare(settings)
    if is_main_process():  # under torchrun the main process wrote the report
        with open(os.path.join(settings.output_dir, "report.md")) as f:
            print(f.read())
