"""`hf-longdoc`: train / evaluate / bench / compare / push / demo; each verb is a parser and a thin library call."""

import argparse
import json
import logging
import os
import sys

from .modeling import FAMILIES


def _add_data_arguments(parser):
    parser.add_argument("--dataset", default=None,
                        help="Hub id or local .csv/.jsonl/.parquet file; default: the built-in long-document task")
    parser.add_argument("--text-column", default="text")
    parser.add_argument("--label-column", default="label", help="class name/id, or a list of labels (multi-label)")
    parser.add_argument("--evidence", default="end", choices=["start", "middle", "end", "anywhere"],
                        help="built-in task only: where the label evidence sits")
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--threshold", type=float, default=0.3, help="multi-label decision threshold on sigmoid scores")


def _train_parser(subparsers):
    parser = subparsers.add_parser("train", help="train a model with Trainer and save it with its tokenizer and card")
    parser.add_argument("--model", default="contextualizer", help=f"family: {', '.join(FAMILIES)}")
    parser.add_argument("--config", nargs="*", default=[], metavar="KEY=VALUE", help="config overrides")
    parser.add_argument("--output-dir", required=True)
    parser.add_argument("--tokenizer", default=None, help="a saved tokenizer; default: fit WordPiece on train")
    parser.add_argument("--vocab-size", type=int, default=8000, help="size of the fitted WordPiece vocabulary")
    parser.add_argument("--max-length", type=int, default=4096, help="tokens the model reads; longer text is cut")
    parser.add_argument("--epochs", type=float, default=4)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--learning-rate", type=float, default=None, help="default: the family's (2e-3 "
                        "Contextualizer, 1e-4 elementwise)")
    parser.add_argument("--task-size", type=int, default=None, help="built-in task: number of training documents")
    parser.add_argument("--baseline", action="store_true", help="also score the 512-token truncating TF-IDF baseline")
    parser.add_argument("--init-from", default=None, metavar="MODEL_DIR",
                        help="start from the encoder saved there (examples/pretrain_slstm_mlm.py) and its tokenizer")
    _add_data_arguments(parser)
    parser.set_defaults(run=_run_train)


def _run_train(args):
    from .training import parse_config_overrides, train

    metrics = train(
        model=args.model, output_dir=args.output_dir, dataset=args.dataset, text_column=args.text_column,
        label_column=args.label_column, tokenizer=args.tokenizer, config_overrides=parse_config_overrides(args.config),
        max_length=args.max_length, vocab_size=args.vocab_size, epochs=args.epochs, batch_size=args.batch_size,
        learning_rate=args.learning_rate, seed=args.seed, threshold=args.threshold, evidence=args.evidence,
        task_size=args.task_size, baseline=args.baseline, init_from=args.init_from,
    )
    print(json.dumps(metrics["test"], indent=2))
    print(f"Saved model, tokenizer, metrics.json and model card to {os.path.abspath(args.output_dir)}")


def _demo_parser(subparsers):
    parser = subparsers.add_parser("demo", help="train the default model on the built-in task (evidence at the end) "
                                                "next to a 512-token truncating baseline")
    parser.add_argument("--output-dir", default="out/demo-contextualizer")
    parser.add_argument("--model", default="contextualizer")
    parser.add_argument("--epochs", type=float, default=3)
    parser.add_argument("--task-size", type=int, default=800)
    parser.set_defaults(run=_run_demo)


def _run_demo(args):
    from .training import train

    metrics = train(model=args.model, output_dir=args.output_dir, epochs=args.epochs, task_size=args.task_size,
                    evidence="end", baseline=True)
    baseline = metrics["truncating_baseline_tfidf"]
    print()
    print("Built-in long-document task, label evidence in the last 20% of each 800-3000-word document:")
    accuracy = metrics["test"]["accuracy"]
    print(f"  {args.model} (reads up to {metrics['max_length']} tokens)  test accuracy {accuracy:.3f}")
    print(f"  TF-IDF + logistic regression, first 512 tokens   test accuracy {baseline['first_512']:.3f}")
    print(f"  TF-IDF + logistic regression, full text          test accuracy {baseline['full_text']:.3f}")
    print(f"Model saved to {os.path.abspath(args.output_dir)}")


def _evaluate_parser(subparsers):
    parser = subparsers.add_parser("evaluate", help="metrics of a saved model on a dataset split")
    parser.add_argument("model_dir")
    parser.add_argument("--split", default="test")
    parser.add_argument("--batch-size", type=int, default=8)
    _add_data_arguments(parser)
    parser.set_defaults(run=_run_evaluate)


def _run_evaluate(args):
    from .training import evaluate_model

    if not os.path.isfile(os.path.join(args.model_dir, "config.json")):
        raise ValueError(f"{args.model_dir!r} is not a saved model folder (no config.json).")
    metrics = evaluate_model(args.model_dir, args.dataset, args.text_column, args.label_column, args.split, args.seed,
                             args.evidence, args.threshold, args.batch_size)
    print(json.dumps(metrics, indent=2))


def _bench_parser(subparsers):
    parser = subparsers.add_parser("bench", help="forward time and peak memory per length against a HF baseline")
    parser.add_argument("--models", default="contextualizer,bert", help="comma-separated families and/or bert,roberta")
    parser.add_argument("--lengths", default="512,1024,2048,4096,8192")
    parser.add_argument("--batch-size", type=int, default=1)
    parser.add_argument("--hidden-size", type=int, default=256)
    parser.add_argument("--num-layers", type=int, default=4)
    parser.add_argument("--num-heads", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--device", default=None)
    parser.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "float16"])
    parser.add_argument("--window", type=int, default=512, help="Longformer-type models: attention window")
    parser.add_argument("--num-global", type=int, default=128,
                        help="Longformer-type models: scattered global tokens besides [CLS]")
    parser.add_argument("--segment-length", type=int, default=256,
                        help="segment LMs: tokens per segment L (m = length / (L - 2) segments)")
    parser.add_argument("--gradient-mode", default="paper", choices=["paper", "full", "none"],
                        help="segment LMs: which segments the LM gets gradient through")
    parser.add_argument("--backward", action="store_true", help="time training steps (forward + backward)")
    parser.add_argument("--attention-dropout", type=float, default=None,
                        help="Transformer models: attention-probability dropout (default: each config's, 0.1)")
    parser.add_argument("--output", default="out/bench", help="prefix of the CSV and PNG written")
    parser.add_argument("--tokenizers", default=None, metavar="TEXT_FILE",
                        help="instead of models: tokenizer throughput (MB/s) on a .txt/.jsonl file, repeated to "
                             "--megabytes")
    parser.add_argument("--megabytes", type=float, default=10.0)
    parser.add_argument("--fit-documents", type=int, default=None, metavar="N",
                        help="instead of models: seconds to fit TF-IDF + PMI statistics on N documents of the "
                             "longest --lengths tokens")
    parser.set_defaults(run=_run_bench)


def _run_bench(args):
    from .bench import format_table, run_bench, write_outputs

    if args.tokenizers:
        return _run_tokenizer_bench(args)
    lengths = list(_integers(args.lengths, "--lengths"))
    if args.fit_documents:
        from .bench import fit_cost

        cost = fit_cost(args.fit_documents, max(lengths))
        print(f"Fitted TF-IDF + PMI on {cost['documents']} documents of {cost['length']} tokens (vocabulary "
              f"{cost['vocab_size']}) in {cost['seconds']:.1f} s: {cost['pairs_counted']} pairs counted, "
              f"{cost['distinct_pairs']} distinct, {cost['pairs_kept']} kept" + (f"; {cost['warning']}"
                                                                                   if "warning" in cost else ""))
        return None
    names = _names(args.models)
    rows = run_bench(models=names, lengths=lengths,
                     batch_size=args.batch_size, hidden_size=args.hidden_size, num_layers=args.num_layers,
                     num_heads=args.num_heads, repeats=args.repeats, warmup=args.warmup, device=args.device,
                     dtype=args.dtype, window=args.window, num_global=args.num_global, backward=args.backward,
                     attention_dropout=args.attention_dropout, segment_length=args.segment_length,
                     gradient_mode=args.gradient_mode)
    print()
    print(f"hidden_size={args.hidden_size} layers={args.num_layers} heads={args.num_heads} batch={args.batch_size} "
          f"dtype={args.dtype}; {'training steps' if args.backward else 'forward passes'}, median of {args.repeats} "
          f"after {args.warmup} warm-up")
    if any(name.startswith(("sparse_longformer", "longformer")) for name in names):
        print(f"Longformer-type models: window {args.window}, [CLS] + {args.num_global} scattered global tokens")
    if any(name.startswith("segment_lm") for name in names):
        print(f"Segment LMs: BERT backbone over segments of {args.segment_length} tokens, m = length / "
              f"{args.segment_length - 2} segments, gradient mode {args.gradient_mode}")
    print(format_table(rows))
    csv_path, png_path = write_outputs(rows, args.output)
    print(f"Wrote {csv_path} and {png_path}")
    if "sparse_longformer" in names and not args.backward:
        from .bench import selection_cost

        cost = selection_cost(args.hidden_size, args.num_layers, args.num_heads, max(lengths), args.batch_size,
                              args.window, args.num_global, args.repeats, args.device)
        print(f"Global-token selection at {cost['length']} tokens ({cost['pmi_pairs']} PMI pairs): tfidf "
              f"{cost['tfidf_ms']:.1f} ms = {cost['tfidf_share']:.1%}, pmi {cost['pmi_ms']:.1f} ms = "
              f"{cost['pmi_share']:.1%} of the forward pass ({cost['forward_ms']:.1f} ms)")
    if "slstm" in names:
        from .bench import slstm_step_efficiency

        step = slstm_step_efficiency(args.hidden_size, max(lengths), args.batch_size, args.repeats, args.device)
        print(f"S-LSTM recurrent step at {step['length']} tokens, hidden {step['hidden_size']}: "
              f"{step['step_ms']:.1f} ms = {step['step_gflops']:.1f} GFLOP/s; torch.matmul of the same shapes "
              f"{step['matmul_ms']:.1f} ms = {step['matmul_gflops']:.1f} GFLOP/s; efficiency {step['efficiency']:.0%}")


def _read_texts(path, megabytes):
    """Documents from a .txt (one per line) or .jsonl (`text` field) file, repeated up to `megabytes`."""
    if not os.path.isfile(path):
        raise ValueError(f"`--tokenizers` file {path!r} does not exist.")
    with open(path, encoding="utf-8") as f:
        if path.endswith(".jsonl"):
            texts = [json.loads(line)["text"] for line in f if line.strip()]
        else:
            texts = [line.rstrip("\n") for line in f if line.strip()]
    if not texts:
        raise ValueError(f"`--tokenizers` file {path!r} holds no text.")
    size = sum(len(text.encode("utf-8")) for text in texts)
    return texts * max(1, int(megabytes * 1e6 / size + 0.999))


def _run_tokenizer_bench(args):
    from .bench import tokenizer_throughput

    texts = _read_texts(args.tokenizers, args.megabytes)
    rows = tokenizer_throughput(texts, elements_per_material=args.num_heads)
    print(f"{rows[0]['megabytes']:.1f} MB of {os.path.basename(args.tokenizers)} ({len(texts)} documents), best of 3:")
    for row in rows:
        print(f"  {row['tokenizer']:>26}: {row['mb_per_s']:8.1f} MB/s  ({row['seconds']:.2f} s)")


def _attention_map_parser(subparsers):
    parser = subparsers.add_parser("attention-map", help="sparse-map Longformer: save a PNG of a document's attention "
                                                         "map (window band, global rows/columns) and list the "
                                                         "selected tokens as words")
    parser.add_argument("model_dir", help="a saved sparse_longformer model with its tokenizer")
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--text", help="the document")
    source.add_argument("--text-file", help="a file holding the document")
    parser.add_argument("--selector", default=None, choices=["cls", "first_n", "random", "tfidf", "pmi"],
                        help="default: the model's global_selector")
    parser.add_argument("--output", default="out/attention_map.png")
    parser.add_argument("--top", type=int, default=20, help="selected words to print")
    parser.set_defaults(run=_run_attention_map)


def _run_attention_map(args):
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    from .attention_map import attention_map

    if not os.path.isfile(os.path.join(args.model_dir, "config.json")):
        raise ValueError(f"{args.model_dir!r} is not a saved model folder (no config.json).")
    if args.text_file is not None:
        if not os.path.isfile(args.text_file):
            raise ValueError(f"`--text-file` {args.text_file!r} does not exist.")
        with open(args.text_file, encoding="utf-8") as f:
            text = f.read()
    else:
        text = args.text
    model = AutoModelForSequenceClassification.from_pretrained(args.model_dir).eval()
    tokenizer = AutoTokenizer.from_pretrained(args.model_dir)
    os.makedirs(os.path.dirname(os.path.abspath(args.output)), exist_ok=True)
    listing = attention_map(model, tokenizer, text, args.output, selector=args.selector)
    print(f"Wrote {args.output}; top selected tokens (word, score):")
    for item in listing[: args.top]:
        print(f"  {item['position']:>6}  {item['word']!r:<24} {item['token']!r:<16} {item['score']:.4f}")


def _push_parser(subparsers):
    parser = subparsers.add_parser("push", help="upload a saved model (with its model card) to the Hub")
    parser.add_argument("output_dir")
    parser.add_argument("--repo-id", required=True, help="USER/NAME")
    parser.add_argument("--dry-run", action="store_true", help="write the folder that would be uploaded, and list it")
    parser.add_argument("--dry-run-dir", default=None, help="where --dry-run writes (default OUTPUT_DIR/_hub_upload)")
    parser.add_argument("--private", action="store_true")
    parser.set_defaults(run=_run_push)


def _run_push(args):
    from .hub import push_to_hub

    folder, files = push_to_hub(args.output_dir, args.repo_id, dry_run=args.dry_run, dry_run_dir=args.dry_run_dir,
                                private=args.private)
    if args.dry_run:
        print(f"Dry run: would upload {folder} to {args.repo_id}:")
    else:
        print(f"Uploaded to https://huggingface.co/{args.repo_id}:")
    for name in files:
        print(f"  {name}")


def _compare_parser(subparsers):
    parser = subparsers.add_parser("compare", help="train every method and the baselines with one budget; report")
    parser.add_argument("--dataset", default=None,
                        help="Hub id or local .csv/.jsonl/.parquet file; default: the built-in task at --task-size, "
                             "evidence anywhere")
    parser.add_argument("--text-column", default="text")
    parser.add_argument("--label-column", default="label")
    parser.add_argument("--models", default="elementwise,contextualizer,slstm,sparse_longformer:tfidf,"
                                            "sparse_longformer:pmi,segment_lm:att",
                        help="families or family:variant (sparse_longformer:<selector>, segment_lm:<variant>)")
    parser.add_argument("--baselines", default="bert-512,longformer", help="bert-<N> and/or longformer; '' for none")
    parser.add_argument("--seeds", type=int, default=1, help="seeds 42, 43, ...: mean ± std")
    parser.add_argument("--epochs", type=float, default=3)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--learning-rate", type=float, default=1e-3, help="the same for every model")
    parser.add_argument("--hidden-size", type=int, default=128)
    parser.add_argument("--num-layers", type=int, default=2)
    parser.add_argument("--num-heads", type=int, default=4)
    parser.add_argument("--max-length", type=int, default=1024, help="tokens every model reads (bert-N: N)")
    parser.add_argument("--window", type=int, default=128, help="Longformer-type models: attention window")
    parser.add_argument("--segment-length", type=int, default=128, help="segment LMs: tokens per segment")
    parser.add_argument("--vocab-size", type=int, default=8000)
    parser.add_argument("--config", nargs="*", default=[], metavar="MODEL.KEY=VALUE",
                        help="config overrides for one model, e.g. slstm.num_recurrent_steps=6")
    parser.add_argument("--evidence", default="start,middle,end",
                        help="built-in task runs with the evidence at these positions; 'none' to skip")
    parser.add_argument("--task-size", type=int, default=1000, help="built-in task: training documents")
    parser.add_argument("--task-words", default="300,900", help="built-in task: min,max words per document")
    parser.add_argument("--bench-lengths", default="512,1024,2048", help="'none' to skip the time/memory plot")
    parser.add_argument("--output-dir", default="out/compare")
    parser.set_defaults(run=_run_compare)


def _integers(value, name):
    """`"512,1024"` -> (512, 1024), or a ValueError naming the option."""
    try:
        return tuple(int(part) for part in value.split(","))
    except ValueError:
        raise ValueError(f"`{name}` must be comma-separated integers, got {value!r}.") from None


def _names(value):
    """`"a, b,"` -> ["a", "b"]: the entries of a comma-separated option."""
    return [part.strip() for part in value.split(",") if part.strip()]


def _run_compare(args):
    from .compare import CompareSettings, compare
    from .training import parse_config_overrides

    per_model = {}
    for key, value in parse_config_overrides(args.config).items():
        model, dot, setting = key.rpartition(".")
        if not dot or not model:
            raise ValueError(f"`--config` takes MODEL.KEY=VALUE pairs for compare, got {key!r}.")
        per_model.setdefault(model, {})[setting] = value
    settings = CompareSettings(
        hidden_size=args.hidden_size, num_layers=args.num_layers, num_heads=args.num_heads,
        max_length=args.max_length, epochs=args.epochs, batch_size=args.batch_size, learning_rate=args.learning_rate,
        vocab_size=args.vocab_size, window=args.window, segment_length=args.segment_length, config_overrides=per_model)
    words = _integers(args.task_words, "--task-words")
    if len(words) != 2 or not 0 < words[0] <= words[1]:
        raise ValueError(f"`--task-words` must be min,max with 0 < min <= max, got {args.task_words!r}.")
    compare(dataset=args.dataset, text_column=args.text_column, label_column=args.label_column,
            models=_names(args.models), baselines=_names(args.baselines), settings=settings, seeds=args.seeds,
            evidence=() if args.evidence == "none" else tuple(_names(args.evidence)), task_size=args.task_size,
            task_words=words, bench_lengths=() if args.bench_lengths == "none" else
            _integers(args.bench_lengths, "--bench-lengths"), output_dir=args.output_dir)
    print(open(os.path.join(args.output_dir, "report.md")).read())


def build_parser():
    parser = argparse.ArgumentParser(prog="hf-longdoc", description="Long-document classification with Transformers")
    subparsers = parser.add_subparsers(dest="command", required=True)
    for add in (_train_parser, _evaluate_parser, _bench_parser, _compare_parser, _attention_map_parser, _push_parser,
                _demo_parser):
        add(subparsers)
    return parser


def main(argv=None):
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    for noisy in ("httpx", "urllib3", "filelock"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    try:
        args.run(args)
    except (ValueError, TypeError, FileNotFoundError) as error:
        print(f"hf-longdoc {args.command}: error: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
