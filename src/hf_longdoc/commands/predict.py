"""`hf-longdoc predict`: label every document of a corpus with a saved model, into a JSONL, CSV or Parquet file."""

import sys

from ..predicting.settings import PredictSettings
from .options import Formatter, add_settings_arguments


def add_parser(subparsers):
    parser = subparsers.add_parser(
        "predict", formatter_class=Formatter, allow_abbrev=False,
        help="label every document of a corpus (resumable, on one or many processes)",
        description="Label every row of --dataset with the model in MODEL_DIR and write one row per input row, in "
                    "order, to --output. An interrupted run continues when the same command is run again; under "
                    "torchrun or accelerate launch the rows are shared between the processes.")
    parser.add_argument("model_dir", help="a folder saved by `hf-longdoc train` or `save_pretrained`")
    parser.add_argument("--dataset", required=True,
                        help="a .csv/.tsv/.json/.jsonl/.parquet file, a Hub id, or a folder: written by "
                             "`save_to_disk`, of data files as `datasets.load_dataset(folder)` finds them (every "
                             "split, in order), or of .txt files (one document each)")
    parser.add_argument("--output", required=True,
                        help="the file to write: .jsonl, .csv (one score_<label> column per class) or .parquet")
    add_settings_arguments(parser, PredictSettings)
    parser.set_defaults(run=run)


def run(args):
    import torch

    from ..engines import predict
    from .options import settings_from

    settings = settings_from(args, PredictSettings)
    try:
        result = predict(args.model_dir, args.dataset, args.output, settings)
    except KeyboardInterrupt:
        print(f"The finished batches are kept in {args.output}.partial; rerun the same command to continue.",
              file=sys.stderr)
        raise
    except torch.OutOfMemoryError:
        smaller = max(1, settings.batch_size // 2)
        print(f"Out of memory at --batch-size {settings.batch_size}. The finished batches are kept in "
              f"{args.output}.partial; rerun the command with --batch-size {smaller} to continue.", file=sys.stderr)
        raise
    if result is None:  # another process than the main one of a launcher: the main one reports
        return
    errors = sum(error is not None for error in result["error"])
    print(f"Wrote {len(result)} rows to {args.output}: {len(result) - errors} labelled, {errors} without text "
          "(see their `error`).")
