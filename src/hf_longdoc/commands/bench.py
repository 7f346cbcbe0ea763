"""`hf-longdoc bench`: time and peak memory per length against a Hugging Face baseline, and micro-benchmarks.

With models: each family's own micro-benchmarks follow the table; `--tokenizers` measures tokenizer throughput
instead, `--fit-documents` the cost of fitting selection statistics.
"""

import os

from ..experiments.baselines import ATTENTION_IMPLEMENTATIONS, BASELINES
from ..modeling import FAMILIES
from ..numbers import DROPOUT, NON_NEGATIVE_INTEGER, POSITIVE_INTEGER, POSITIVE_NUMBER
from .options import Formatter, integers, names, per_model_overrides


def add_parser(subparsers):
    parser = subparsers.add_parser("bench", formatter_class=Formatter,
                                   help="forward time and peak memory per length against a HF baseline")
    parser.add_argument("--models", default="contextualizer,bert",
                        help="comma-separated families (family:variant) and/or baselines: "
                             f"{', '.join(FAMILIES)}; {', '.join(BASELINES)}")
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
    if args.tokenizers:
        return run_tokenizers(args)
    lengths = integers(args.lengths, "--lengths")
    if args.roofline_length is not None and args.roofline_length not in lengths:
        raise ValueError(f"`--roofline-length` {args.roofline_length} is not one of --lengths ({args.lengths}).")
    if args.fit_documents:
        return run_fit_cost(args, max(lengths))
    from ..experiments.bench import run_bench
    from ..experiments.report import bench_output_paths, format_table, write_bench_outputs
    from ..outputs import check_files_free, require_writable_folder

    if not os.path.basename(args.output) or os.path.isdir(args.output):
        raise ValueError(f"`--output` {args.output!r} is a folder; pass a file prefix (e.g. out/bench writes "
                         "out/bench.csv and out/bench.png).")
    require_writable_folder(os.path.dirname(os.path.abspath(args.output)), "`--output`")
    check_files_free(bench_output_paths(args.output), args.overwrite, "--overwrite")
    models = names(args.models)
    config_overrides = per_model_overrides(args.config)
    rows = run_bench(models=models, lengths=lengths, batch_size=args.batch_size, hidden_size=args.hidden_size,
                     num_layers=args.num_layers, num_heads=args.num_heads, repeats=args.repeats,
                     warmup=args.warmup, device=args.device, dtype=args.dtype, window=args.window,
                     num_global=args.num_global, backward=args.backward, attention_dropout=args.attention_dropout,
                     segment_length=args.segment_length, gradient_mode=args.gradient_mode,
                     config_overrides=config_overrides, attention=args.attention,
                     roofline=not args.no_roofline, roofline_length=args.roofline_length)
    print()
    print(f"hidden_size={args.hidden_size} layers={args.num_layers} heads={args.num_heads} batch={args.batch_size} "
          f"dtype={args.dtype}; {'training steps' if args.backward else 'forward passes'}, median of {args.repeats} "
          f"after {args.warmup} warm-up")
    print(f"Models with global attention: window {args.window}, [CLS] + {args.num_global} scattered global tokens "
          f"(all tokens up to length {args.num_global + 1}); "
          f"models over segments: segments of {args.segment_length} tokens, m = length / {args.segment_length - 2}, "
          f"gradient mode {args.gradient_mode}")
    attentions = {row["model"]: row["attention"] for row in rows if "attention" in row}
    if attentions:
        print("Baselines' attention: " + ", ".join(f"{model} {kind}" for model, kind in attentions.items()))
    print(format_table(rows))
    csv_path, png_path = write_bench_outputs(rows, args.output)
    print(f"Wrote {csv_path} and {png_path}")
    for line in roofline_lines(rows):
        print(line)
    if not args.no_micro_benchmarks:
        run_micro_benchmarks(args, models, max(lengths))


def roofline_lines(rows):
    """One line per model measured with `matmul_roofline`: how close its forward runs to the speed of its own matrix
    products alone."""
    lines = []
    for row in rows:
        if "roofline_efficiency" not in row:
            continue
        if row.get("roofline_measurement_error"):
            lines.append(f"{row['model']}: roofline at {row['length']} ids: efficiency above 100% is a measurement "
                         f"error, not reported: {row['roofline_measurement_error']}; run it again on idle cores")
            continue
        lines.append(f"{row['model']}: roofline at {row['length']} ids: {row['roofline_gflop']:.2f} GFLOP of matrix "
                     f"products in {row['roofline_products']} calls; forward {row['roofline_forward_ms']:.1f} ms = "
                     f"{row['roofline_forward_gflops']:.1f} GFLOP/s, the same products alone "
                     f"{row['roofline_matmul_ms']:.1f} ms = {row['roofline_matmul_gflops']:.1f} GFLOP/s; "
                     f"efficiency {row['roofline_efficiency']:.0%}")
    return lines


def run_micro_benchmarks(args, models, length):
    """Each benchmarked family's own micro-benchmarks: its hot kernel against matmuls of the same shapes, and the cost
    of choosing global tokens for a family that fits selection statistics."""
    from ..experiments.bench import BenchModel
    from ..experiments.profiling import kernel_efficiency, selection_cost

    families = dict.fromkeys(entry.family for entry in map(BenchModel.parse, models) if entry.family is not None)
    for family in families:
        if family.has_statistics and not args.backward:
            cost = selection_cost(family, args.hidden_size, args.num_layers, args.num_heads, length,
                                  args.batch_size, args.window, args.num_global, args.repeats, args.device)
            print(f"{family.name}: global-token selection at {cost['length']} tokens ({cost['pmi_pairs']} PMI "
                  f"pairs): tfidf {cost['tfidf_ms']:.1f} ms = {cost['tfidf_share']:.1%}, pmi {cost['pmi_ms']:.1f} ms "
                  f"= {cost['pmi_share']:.1%} of the forward pass ({cost['forward_ms']:.1f} ms)")
        if family.has_profile:
            step = kernel_efficiency(family, args.hidden_size, length=length, batch_size=args.batch_size,
                                     repeats=args.repeats, device=args.device)
            print(f"{family.name}: {step['kernel']} at {step['length']} tokens, hidden {step['hidden_size']}: "
                  f"{step['kernel_ms']:.1f} ms = {step['kernel_gflops']:.1f} GFLOP/s; torch.matmul of the same "
                  f"shapes {step['matmul_ms']:.1f} ms = {step['matmul_gflops']:.1f} GFLOP/s; efficiency "
                  f"{step['efficiency']:.0%}")


def run_fit_cost(args, length):
    from ..experiments.profiling import fit_cost

    for family in FAMILIES.values():
        if not family.has_statistics:
            continue
        cost = fit_cost(family, args.fit_documents, length)
        print(f"{family.name}: fitted TF-IDF + PMI on {cost['documents']} documents of {cost['length']} tokens "
              f"(vocabulary {cost['vocab_size']}) in {cost['seconds']:.1f} s: {cost['pairs_counted']} pairs counted, "
              f"{cost['distinct_pairs']} distinct, {cost['pairs_kept']} kept"
              + (f"; {cost['warning']}" if "warning" in cost else ""))


def run_tokenizers(args):
    from ..experiments.profiling import read_documents, tokenizer_throughput

    texts = read_documents(args.tokenizers, args.megabytes, option="--tokenizers")
    rows = tokenizer_throughput(texts, elements_per_material=args.num_heads)
    print(f"{rows[0]['megabytes']:.1f} MB of {os.path.basename(args.tokenizers)} ({len(texts)} documents), best of 3:")
    for row in rows:
        print(f"  {row['tokenizer']:>26}: {row['mb_per_s']:8.1f} MB/s  ({row['seconds']:.2f} s)")
