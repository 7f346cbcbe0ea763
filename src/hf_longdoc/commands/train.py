"""`hf-longdoc train`: train one family with Trainer and save it with its tokenizer, metrics and model card.

Its flags are `RunSettings`' fields (help and defaults written there once) and every `TrainingArguments` field under
its own name (`--gradient_accumulation_steps 2 --report_to tensorboard --optim adafactor`), parsed by Transformers'
`HfArgumentParser`; nothing heavy is imported until the command runs, so `--help` answers at once.
"""

from ..training.settings import RunSettings
from .options import Formatter, add_settings_arguments, add_trainer_flags


def add_parser(subparsers):
    parser = subparsers.add_parser("train", formatter_class=Formatter, allow_abbrev=False,
                                   help="train a model with Trainer and save it with its tokenizer and card",
                                   description="Train one family and save it with its tokenizer, metrics and card. "
                                               "Where a flag is also a TrainingArguments field, Transformers' name "
                                               "comes first and ours is an alias (--num_train_epochs, --epochs); two "
                                               "spellings that disagree are refused. Every other TrainingArguments "
                                               "field is taken under its own name (--help-trainer lists them).")
    add_settings_arguments(parser, RunSettings)
    parser.add_argument("--baseline", action="store_true", help="also score the 512-token truncating TF-IDF baseline")
    add_trainer_flags(parser)
    parser.set_defaults(run=run)


def run(args):
    import json
    import os

    from ..experiments.baselines import truncating_baseline
    from ..training.run import train
    from ..utils.distributed import is_main_process
    from .options import parse_trainer_flags, settings_from

    settings = settings_from(
        args, RunSettings, training_args=parse_trainer_flags(args.trainer_flags, "train") or None,
        extra_scores={"truncating_baseline_tfidf": truncating_baseline} if args.baseline else None)
    metrics = train(settings)
    if not is_main_process():  # under torchrun the main process reports
        return
    print(json.dumps(metrics["test"], indent=2))
    print(f"Saved model, tokenizer, metrics.json and model card to {os.path.abspath(settings.output_dir)}")
