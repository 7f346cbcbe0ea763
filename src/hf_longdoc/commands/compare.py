"""`hf-longdoc compare`: train every method and the baselines with one budget and write a report."""

import os

from ..experiments.compare import baseline_names
from ..numbers import (
    LEARNING_RATE,
    MAX_LENGTH,
    NON_NEGATIVE_INTEGER,
    POSITIVE_INTEGER,
    POSITIVE_NUMBER,
    SEED,
    VOCAB_SIZE,
)
from .options import (
    Formatter,
    add_precision_arguments,
    integers,
    names,
    per_model_overrides,
    settings_from,
    word_range,
)


def add_parser(subparsers):
    parser = subparsers.add_parser("compare", formatter_class=Formatter,
                                   help="train every method and the baselines with one budget; report")
    parser.add_argument("--dataset", default=None,
                        help="Hub id, local .csv/.tsv/.json/.jsonl/.parquet file, or a folder of LABEL/*.txt files "
                             "(one folder per class); None: the built-in task at --task-size, evidence anywhere")
    parser.add_argument("--text-column", default="text",
                        help="the column holding the document, or several comma-separated (title,text), joined")
    parser.add_argument("--label-column", default="label", help="the column holding the class")
    parser.add_argument("--models", default="elementwise,contextualizer,slstm,sparse_longformer:tfidf,"
                                            "sparse_longformer:pmi,segment_lm:att",
                        help="families or family:variant (sparse_longformer:<selector>, segment_lm:<variant>), each "
                             "named once")
    parser.add_argument("--baselines", default="bert-512,longformer",
                        help=f"{baseline_names()}; '' for none".replace("`", ""))
    parser.add_argument("--backbone", default=None, metavar="PATH_OR_ID",
                        help="fine-tune every model from this pretrained encoder (folder or Hub id) and read its "
                             "tokenizer: families that can wrap it, and bert-N / bert-N-headtail as the backbone "
                             "itself; the size flags then do not apply")
    parser.add_argument("--freeze-backbone", action="store_true",
                        help="with --backbone: every model trains only its new head (on cached frozen features where "
                             "the family can cache them)")
    add_precision_arguments(parser)
    parser.add_argument("--head-epochs", type=NON_NEGATIVE_INTEGER.parse, default=None,
                        help="with --backbone: epochs of each family's new head on cached frozen features before "
                             "fine-tuning; 0 skips it; None: 50 where the family caches features, else 0")
    parser.add_argument("--seeds", type=POSITIVE_INTEGER.parse, default=1,
                        help="seeds --first-seed, --first-seed + 1, ...: mean ± std")
    parser.add_argument("--first-seed", type=SEED.parse, default=42,
                        help="the first seed: 43 with --seeds 2 adds seeds 43 and 44 to a run of seed 42 alone")
    parser.add_argument("--split-seed", type=SEED.parse, default=None,
                        help="draw the data split (built-in task: its documents) once with this seed for every "
                             "--seeds run; None: each seed draws its own")
    parser.add_argument("--epochs", type=POSITIVE_NUMBER.parse, default=None,
                        help="training epochs of every model; None: 3, and with --backbone each family's `train` "
                             "epochs (its fine-tuning recipe; the baselines 3)")
    parser.add_argument("--batch-size", type=POSITIVE_INTEGER.parse, default=8,
                        help="documents per training step per process (under torchrun each process reads this many: "
                             "a step reads it x the processes; the report gives both)")
    parser.add_argument("--time-budget", type=POSITIVE_NUMBER.parse, default=None, metavar="MINUTES",
                        help="minutes of training for each model: fine-tuning stops after the step that reaches them "
                             "and the model is measured as it is then; None: --epochs alone")
    parser.add_argument("--learning-rate", type=LEARNING_RATE.parse, default=None,
                        help="the same for every model; None: 1e-3 from scratch; with --backbone each family's own "
                             "rate, and 2e-5 for the baselines that fine-tune the checkpoint (their head: 1e-3)")
    parser.add_argument("--head-learning-rate", type=LEARNING_RATE.parse, default=None,
                        help="with --backbone: the rate of the parameters it does not supply (every model's new head; "
                             "elementwise: also the byte embeddings); None: --learning-rate (the checkpoint "
                             "baselines without --learning-rate: 1e-3)")
    parser.add_argument("--lr-scheduler", default="linear", metavar="NAME",
                        help="the same Transformers schedule for every model, after the 10%% warm-up (linear, cosine, "
                             "constant_with_warmup, ...)")
    parser.add_argument("--hidden-size", type=POSITIVE_INTEGER.parse, default=128, help="width of every model")
    parser.add_argument("--num-layers", type=POSITIVE_INTEGER.parse, default=2, help="layers (or steps) of every model")
    parser.add_argument("--num-heads", type=POSITIVE_INTEGER.parse, default=4,
                        help="attention heads of every Transformer")
    parser.add_argument("--max-length", type=MAX_LENGTH.parse, default=1024,
                        help="tokens every model reads (bert-N: N)")
    parser.add_argument("--window", type=POSITIVE_INTEGER.parse, default=128,
                        help="Longformer-type models: attention window")
    parser.add_argument("--segment-length", type=POSITIVE_INTEGER.parse, default=128,
                        help="segment LMs: tokens per segment")
    parser.add_argument("--vocab-size", type=VOCAB_SIZE.parse, default=8000,
                        help="size of the fitted WordPiece vocabulary")
    parser.add_argument("--config", nargs="*", default=[], metavar="MODEL.KEY=VALUE",
                        help="config overrides for one model, e.g. slstm.num_recurrent_steps=6")
    parser.add_argument("--evidence", default=None,
                        help="also train and test every model on the built-in task with the evidence at these "
                             "positions (start,middle,end), or 'none'; None: start,middle,end without --dataset, none "
                             "with it")
    parser.add_argument("--task-size", type=POSITIVE_INTEGER.parse, default=1000,
                        help="built-in task: training documents")
    parser.add_argument("--task-words", default="300,900", help="built-in task: min,max words per document")
    parser.add_argument("--bench-lengths", default="512,1024,2048", help="'none' to skip the time/memory plot")
    parser.add_argument("--output-dir", default="out/compare",
                        help="where the report, CSVs and plots go (existing ones hf-longdoc did not write are refused)")
    parser.add_argument("--overwrite", action="store_true",
                        help="replace report.md, the CSVs and plots in --output-dir even if hf-longdoc did not write "
                             "them")
    parser.set_defaults(run=run)


def run(args):
    from ..distributed import is_main_process
    from ..experiments.compare import CompareSettings, compare

    settings = settings_from(
        args, CompareSettings, models=tuple(names(args.models)), baselines=tuple(names(args.baselines)),
        learning_rate=args.learning_rate if args.learning_rate is not None or args.backbone else 1e-3,
        config_overrides=per_model_overrides(args.config), task_words=word_range(args.task_words),
        evidence=None if args.evidence is None else () if args.evidence == "none" else tuple(names(args.evidence)),
        bench_lengths=() if args.bench_lengths == "none" else integers(args.bench_lengths, "--bench-lengths"))
    compare(settings)
    if is_main_process():  # under torchrun the main process wrote the report
        with open(os.path.join(args.output_dir, "report.md")) as f:
            print(f.read())
