"""`hf-longdoc predict`: label every document of a corpus with a saved model, into a JSONL, CSV or Parquet file."""

import sys

from ..catalog import EVIDENCE_WEIGHTS, RUNTIME_SETTINGS
from ..numbers import NON_NEGATIVE_INTEGER, POSITIVE_INTEGER
from ..run_settings import parse_config_overrides
from .options import Formatter, names


def add_parser(subparsers):
    parser = subparsers.add_parser(
        "predict", formatter_class=Formatter,
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
    parser.add_argument("--text-column", default="text",
                        help="the column holding the document, or several comma-separated (title,text), joined as "
                             "train joins them")
    parser.add_argument("--id-column", default=None,
                        help="the column naming each row (unique values); None: the input's `id` column, else the row "
                             "number (a folder: the file's path)")
    parser.add_argument("--keep-columns", type=names, default=None,
                        help="comma-separated input columns to copy into the output")
    parser.add_argument("--batch-size", type=POSITIVE_INTEGER.parse, default=8,
                        help="documents (with --long chunks: chunks) per forward pass; an interrupted run may "
                             "continue at another (e.g. a smaller one after running out of memory)")
    parser.add_argument("--device", default=None,
                        help="cpu, cuda, cuda:1, mps, ...; None: this process's GPU if there is one, else the CPU")
    parser.add_argument("--dtype", default=None, choices=["float32", "bfloat16", "float16"],
                        help="the weights' precision (float16: a GPU); None: float32")
    parser.add_argument("--long", default="truncate", choices=["truncate", "chunks"],
                        help="documents longer than the model reads: cut them (counted in the log), or read them in "
                             "chunks whose logits are aggregated (adds a `chunks` column)")
    parser.add_argument("--truncation-side", default="right", choices=["right", "left"],
                        help="with --long truncate: read a cut document's start (right) or its end (left)")
    parser.add_argument("--stride", type=NON_NEGATIVE_INTEGER.parse, default=0,
                        help="with --long chunks: ids consecutive chunks share")
    parser.add_argument("--aggregation", default="mean", choices=["mean", "max"],
                        help="with --long chunks: how the chunks' logits become the document's")
    parser.add_argument("--top-k", type=POSITIVE_INTEGER.parse, default=None,
                        help="keep the K best classes in `scores`; None: every class")
    parser.add_argument("--explain", type=POSITIVE_INTEGER.parse, default=None, metavar="K",
                        help="add `evidence`: the K passages (whole words, with their character offsets) that weighed "
                             "most in each decision (models whose weights say so; not with --long chunks, whose chunks "
                             "it cannot weigh against each other). A passage's `weight`: "
                             + "; ".join(f"{name}: {meaning}" for name, meaning in EVIDENCE_WEIGHTS.items()))
    parser.add_argument("--backend", default="torch", choices=["torch", "onnxruntime", "onnxruntime-int8"],
                        help="torch: the model in PyTorch; onnxruntime: the float32 graph `hf-longdoc export` writes "
                             "(exported once into --graph-dir when missing or older than the weights; CPU; no "
                             "--explain); onnxruntime-int8: its "
                             "dynamic int8 quantization (`export --quantize int8` measures its accuracy)")
    parser.add_argument("--graph-dir", default=None,
                        help="with an onnxruntime backend: the folder of the exported graphs; None: MODEL_DIR/onnx. "
                             "Another model's graphs there are refused (unless --overwrite), and a graph without "
                             "export.json is checked against the model before it runs")
    parser.add_argument("--overwrite", action="store_true",
                        help="replace an existing --output (an interrupted run of the same command still continues; "
                             "one of other settings is discarded), and another model's graphs in --graph-dir")
    parser.add_argument("--config", nargs="*", default=[], metavar="KEY=VALUE",
                        help="how the saved model runs, not what it computes: its family's runtime settings "
                             f"({runtime_settings()}), e.g. compile_gates=false")
    parser.set_defaults(run=run)


def runtime_settings():
    """The runtime settings of each family that has some, for the help text."""
    return "; ".join(f"{name}: {', '.join(settings)}" for name, settings in RUNTIME_SETTINGS.items())


def run(args):
    import torch

    from ..predicting import PredictSettings, predict

    settings = PredictSettings(text_column=args.text_column, id_column=args.id_column, keep_columns=args.keep_columns,
                               batch_size=args.batch_size, device=args.device, dtype=args.dtype, long=args.long,
                               truncation_side=args.truncation_side, stride=args.stride,
                               aggregation=args.aggregation, top_k=args.top_k,
                               explain=args.explain, overwrite=args.overwrite,
                               config_overrides=parse_config_overrides(args.config), backend=args.backend,
                               graph_dir=args.graph_dir)
    try:
        result = predict(args.model_dir, args.dataset, args.output, settings)
    except KeyboardInterrupt:
        print(f"The finished batches are kept in {args.output}.partial; rerun the same command to continue.",
              file=sys.stderr)
        raise
    except torch.OutOfMemoryError:
        smaller = max(1, args.batch_size // 2)
        print(f"Out of memory at --batch-size {args.batch_size}. The finished batches are kept in "
              f"{args.output}.partial; rerun the command with --batch-size {smaller} to continue.", file=sys.stderr)
        raise
    if result is None:  # another process than the main one of a launcher: the main one reports
        return
    errors = sum(error is not None for error in result["error"])
    print(f"Wrote {len(result)} rows to {args.output}: {len(result) - errors} labelled, {errors} without text "
          "(see their `error`).")
