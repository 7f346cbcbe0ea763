"""`hf-longdoc evaluate`: the metrics of a saved model on a dataset (whole, or one split) and how many documents.

Its flags are `EvaluateSettings`' fields (help and defaults written there once) besides what `evaluate_model` takes
by position: the model folder and `--dataset`.
"""

import json

from ..training.evaluation import EvaluateSettings
from ..training.settings import DATASET_HELP
from .options import Formatter, add_settings_arguments, require_model_folder


def add_parser(subparsers):
    parser = subparsers.add_parser("evaluate", formatter_class=Formatter,
                                   help="metrics of a saved model on a dataset split")
    parser.add_argument("model_dir", help="a folder saved by `hf-longdoc train` or `save_pretrained`")
    parser.add_argument("--dataset", help=DATASET_HELP)
    add_settings_arguments(parser, EvaluateSettings)
    parser.set_defaults(run=run)


def run(args):
    from ..training.evaluation import evaluate_model
    from .options import settings_from

    require_model_folder(args.model_dir)
    metrics = evaluate_model(args.model_dir, args.dataset, settings_from(args, EvaluateSettings))
    print(json.dumps(metrics, indent=2))
