"""`hf-longdoc evaluate`: the metrics of a saved model on a dataset (whole, or one split) and how many documents."""

import json

from ..numbers import DEFAULT_THRESHOLD, POSITIVE_INTEGER
from .options import Formatter, add_data_arguments, require_model_folder


def add_parser(subparsers):
    parser = subparsers.add_parser("evaluate", formatter_class=Formatter,
                                   help="metrics of a saved model on a dataset split")
    parser.add_argument("model_dir", help="a folder saved by `hf-longdoc train` or `save_pretrained`")
    parser.add_argument("--split", default=None,
                        help="the split to score, as `train` made it; None: all of --dataset (a Hub dataset, or a "
                             "folder that names its splits: its test split), or the built-in task's test split")
    parser.add_argument("--batch-size", type=POSITIVE_INTEGER.parse, default=8, help="documents per forward pass")
    add_data_arguments(parser, seed_default=None,
                       seed_help="with --split: the seed the split was drawn with; None: the one `train` recorded "
                                 "with the model (another is refused: its split would hold training documents)",
                       threshold_default=None,
                       threshold_help="multi-label decision threshold on sigmoid scores, in (0, 1); None: the one "
                                      "saved with the model (`multi_label_threshold` in its config.json), else "
                                      f"{DEFAULT_THRESHOLD}; "
                                      "a given one overrides it (logged)")
    parser.set_defaults(run=run)


def run(args):
    from ..evaluation import EvaluateSettings, evaluate_model

    require_model_folder(args.model_dir)
    settings = EvaluateSettings(text_column=args.text_column, label_column=args.label_column, split=args.split,
                                seed=args.seed, evidence=args.evidence, threshold=args.threshold,
                                batch_size=args.batch_size)
    metrics = evaluate_model(args.model_dir, args.dataset, settings)
    print(json.dumps(metrics, indent=2))
