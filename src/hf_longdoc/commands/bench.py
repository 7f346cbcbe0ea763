"""`hf-longdoc bench`: time and peak memory per length against a Hugging Face baseline, and micro-benchmarks.

With models: each family's own micro-benchmarks follow the table; `--tokenizers` measures tokenizer throughput
instead, `--fit-documents` the cost of fitting selection statistics. The flags build a `BenchSettings` for
`experiments.bench.run_bench`; nothing heavy is imported until the command runs, so `--help` answers at once.
"""

from ..catalog import ATTENTION_IMPLEMENTATIONS, BASELINE_NAMES, FAMILY_NAMES
from ..numbers import DROPOUT, NON_NEGATIVE_INTEGER, POSITIVE_INTEGER, POSITIVE_NUMBER
from ..run_settings import per_model_overrides
from .options import Formatter, integers, names


def add_parser(subparsers):
    parser = subparsers.add_parser("bench", formatter_class=Formatter,
                                   help="forward time and peak memory per length against a HF baseline")
    parser.add_argument("--models", default="contextualizer,bert",
                        help="comma-separated families (family:variant) and/or baselines: "
                             f"{', '.join(FAMILY_NAMES)}; {', '.join(BASELINE_NAMES)}")
    parser.add_argument("--lengths", default="512,1024,2048,4096,8192", help="comma-separated document lengths")
    parser.add_argument("--batch-size", type=POSITIVE_INTEGER.parse, default=1, help="documents per pass")
    parser.add_argument("--hidden-size", type=POSITIVE_INTEGER.parse, default=256, help="width of every model")
    parser.add_argument("--num-layers", type=POSITIVE_INTEGER.parse, default=4, help="layers (or steps) of every model")
    parser.add_argument("--num-heads", type=POSITIVE_INTEGER.parse, default=4,
                        help="attention heads of every Transformer")
    parser.add_argument("--repeats", type=POSITIVE_INTEGER.parse, default=3,
                        help="timed passes (the median is reported)")
    parser.add_argument("--warmup", type=NON_NEGATIVE_INTEGER.parse, default=1, help="untimed passes first")
    parser.add_argument("--device", default=None, help="None: cuda if available, else cpu")
    parser.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "float16"],
                        help="the models' dtype")
    parser.add_argument("--window", type=POSITIVE_INTEGER.parse, default=512,
                        help="Longformer-type models: attention window")
    parser.add_argument("--num-global", type=NON_NEGATIVE_INTEGER.parse, default=128,
                        help="Longformer-type models: scattered global tokens besides [CLS]")
    parser.add_argument("--segment-length", type=POSITIVE_INTEGER.parse, default=256,
                        help="segment LMs: tokens per segment L (m = length / (L - 2) segments)")
    parser.add_argument("--gradient-mode", default="paper", choices=["paper", "full", "none"],
                        help="segment LMs: which segments the LM gets gradient through")
    parser.add_argument("--config", nargs="*", default=[], metavar="MODEL.KEY=VALUE",
                        help="config overrides for one model, e.g. slstm.compile_gates=true")
    parser.add_argument("--backward", action="store_true", help="time training steps (forward + backward)")
    parser.add_argument("--no-micro-benchmarks", action="store_true",
                        help="skip each family's micro-benchmarks after the table (its hot kernel against plain "
                             "matmuls, the cost of choosing global tokens)")
    parser.add_argument("--no-roofline", action="store_true",
                        help="skip timing each model's forward beside its matrix products alone")
    parser.add_argument("--roofline-length", type=POSITIVE_INTEGER.parse, default=None,
                        help="forward passes: the length (one of --lengths) at which each model is also timed beside "
                             "its matrix products alone (default: the longest)")
    parser.add_argument("--attention", default="auto", choices=ATTENTION_IMPLEMENTATIONS,
                        help="the baselines' attention implementation where their model supports it (else eager); "
                             "auto: flash_attention_2 on a CUDA GPU in half precision when flash-attn is installed, "
                             "else flex_attention for a model with a local window (ModernBERT) on a CUDA GPU, else "
                             "sdpa")
    parser.add_argument("--attention-dropout", type=DROPOUT.parse, default=None,
                        help="Transformer models: attention-probability dropout (None: each config's, 0.1)")
    parser.add_argument("--output", default="out/bench",
                        help="prefix of the CSV and PNG written (existing files hf-longdoc did not write are refused)")
    parser.add_argument("--overwrite", action="store_true",
                        help="replace the --output files even if hf-longdoc did not write them")
    parser.add_argument("--tokenizers", default=None, metavar="TEXT_FILE",
                        help="instead of models: tokenizer throughput (MB/s) on a .txt/.jsonl file, repeated to "
                             "--megabytes")
    parser.add_argument("--megabytes", type=POSITIVE_NUMBER.parse, default=10.0,
                        help="with --tokenizers: MB of text to encode")
    parser.add_argument("--fit-documents", type=POSITIVE_INTEGER.parse, default=None, metavar="N",
                        help="instead of models: seconds to fit the selection statistics (TF-IDF + PMI) on N "
                             "documents of the longest --lengths tokens")
    parser.set_defaults(run=run)


def run(args):
    from ..experiments.bench import (
        BenchSettings,
        micro_benchmarks,
        run_bench,
        selection_fit_costs,
        summary_lines,
        tokenizer_speeds,
    )

    if args.tokenizers:
        tokenizer_speeds(args.tokenizers, args.megabytes, elements_per_material=args.num_heads)
        return
    lengths = integers(args.lengths, "--lengths")
    if args.fit_documents:
        selection_fit_costs(args.fit_documents, max(lengths))
        return
    settings = BenchSettings(
        models=tuple(names(args.models)), lengths=tuple(lengths), batch_size=args.batch_size,
        hidden_size=args.hidden_size, num_layers=args.num_layers, num_heads=args.num_heads, repeats=args.repeats,
        warmup=args.warmup, device=args.device, dtype=args.dtype, window=args.window, num_global=args.num_global,
        backward=args.backward, attention_dropout=args.attention_dropout, segment_length=args.segment_length,
        gradient_mode=args.gradient_mode, config_overrides=per_model_overrides(args.config),
        roofline=not args.no_roofline, roofline_length=args.roofline_length, attention=args.attention,
        output=args.output, overwrite=args.overwrite)
    rows = run_bench(settings)
    print()
    for line in summary_lines(settings, rows):
        print(line)
    if not args.no_micro_benchmarks:
        micro_benchmarks(settings)
