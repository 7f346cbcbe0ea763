"""`hf-longdoc train`: train one family with Trainer and save it with its tokenizer, metrics and model card."""

import json
import os

from ..distributed import is_main_process
from ..modeling import FAMILIES
from ..numbers import (
    LEARNING_RATE,
    MAX_LENGTH,
    NON_NEGATIVE_INTEGER,
    POSITIVE_INTEGER,
    POSITIVE_NUMBER,
    VOCAB_SIZE,
)
from .options import (
    Formatter,
    add_data_arguments,
    add_precision_arguments,
    parse_config_overrides,
    settings_from,
    word_range,
)


def add_parser(subparsers):
    parser = subparsers.add_parser("train", formatter_class=Formatter,
                                   help="train a model with Trainer and save it with its tokenizer and card")
    parser.add_argument("--model", default="contextualizer", help=f"family: {', '.join(FAMILIES)}")
    parser.add_argument("--config", nargs="*", default=[], metavar="KEY=VALUE", help="config overrides")
    parser.add_argument("--output-dir", required=True,
                        help="where the model, tokenizer, metrics and card go: a new folder, or an earlier run "
                             "(replaced only when this one succeeds; files hf-longdoc did not write are kept)")
    parser.add_argument("--overwrite", action="store_true",
                        help="replace files in --output-dir that hf-longdoc did not write (or that were edited) but "
                             "that a run writes (config.json, README.md, ...), and discard an interrupted run kept "
                             "beside it (start over); nothing else there is touched")
    parser.add_argument("--resume", action="store_true",
                        help="continue the interrupted run in --output-dir from its last checkpoint (a rerun without "
                             "--resume or --overwrite is refused while one is kept)")
    parser.add_argument("--tokenizer", default=None,
                        help="a saved tokenizer; None: the family's own, else WordPiece fitted on train")
    parser.add_argument("--vocab-size", type=VOCAB_SIZE.parse, default=8000,
                        help="size of the fitted WordPiece vocabulary")
    parser.add_argument("--max-length", type=MAX_LENGTH.parse, default=4096,
                        help="tokens the model reads; longer text is cut")
    parser.add_argument("--epochs", type=POSITIVE_NUMBER.parse, default=None,
                        help="training epochs (default 4; from a --backbone, the family's fine-tuning epochs)")
    parser.add_argument("--batch-size", type=POSITIVE_INTEGER.parse, default=8,
                        help="documents per training step per process (under torchrun each process reads this many: "
                             "a step reads it x the processes; the model card gives both)")
    parser.add_argument("--learning-rate", type=LEARNING_RATE.parse, default=None,
                        help="None: the family's (2e-3 Contextualizer, 1e-3 S-LSTM, 1e-4 the Transformers; "
                             "from a --backbone, the family's fine-tuning rate: 2e-5 sparse_longformer)")
    parser.add_argument("--head-learning-rate", type=LEARNING_RATE.parse, default=None,
                        help="with --backbone or --init-from: the rate of the new parameters (the head; elementwise: "
                             "also the byte embeddings); None: --learning-rate")
    parser.add_argument("--lr-scheduler", default="linear", metavar="NAME",
                        help="a Transformers schedule after the 10%% warm-up (linear, cosine, "
                             "constant_with_warmup, ...)")
    parser.add_argument("--task-size", type=POSITIVE_INTEGER.parse, default=None,
                        help="built-in task: number of training documents (None: the task's default)")
    parser.add_argument("--task-words", default=None,
                        help="built-in task: min,max words per document (None: the task's 800,3000)")
    parser.add_argument("--task-kind", default="keywords", choices=["keywords", "context"],
                        help="built-in task: 'keywords' (class-specific phrases; a bag of words solves it) or "
                             "'context' (the same words in every document; which entity a negation attaches to "
                             "decides)")
    parser.add_argument("--baseline", action="store_true", help="also score the 512-token truncating TF-IDF baseline")
    parser.add_argument("--backbone", default=None, metavar="PATH_OR_ID",
                        help="a pretrained model (folder or Hub id) the family is built around, with its tokenizer; "
                             "families that take one: "
                             f"{', '.join(name for name, family in FAMILIES.items() if family.supports_backbones)} "
                             "(docs/models.md, \"Pretrained backbones\", says what each does with it)")
    parser.add_argument("--freeze-backbone", action="store_true",
                        help="with --backbone or --init-from: train only the new head (on features the frozen "
                             "backbone computes once, where the family can cache them); the saved model is whole")
    parser.add_argument("--head-epochs", type=NON_NEGATIVE_INTEGER.parse, default=None,
                        help="with a pretrained backbone: epochs of the new head on cached frozen features before "
                             "fine-tuning (linear probing, then fine-tuning); 0 skips it; None: 50 where the family "
                             "caches features (it stops 10 epochs after the best validation score), else 0")
    parser.add_argument("--time-budget", type=POSITIVE_NUMBER.parse, default=None, metavar="MINUTES",
                        help="minutes for the whole run: fine-tuning stops after the step that reaches them, that "
                             "partial epoch is evaluated and the best model so far kept; None: --epochs alone")
    add_precision_arguments(parser)
    parser.add_argument("--init-from", default=None, metavar="MODEL_DIR",
                        help="start from the encoder saved there (examples/pretrain_slstm_mlm.py) and its tokenizer")
    add_data_arguments(parser)
    parser.set_defaults(run=run)


def run(args):
    from ..experiments.baselines import truncating_baseline
    from ..run_settings import RunSettings
    from ..training import train

    settings = settings_from(
        args, RunSettings, config_overrides=parse_config_overrides(args.config),
        task_words=word_range(args.task_words) if args.task_words else None,
        extra_scores={"truncating_baseline_tfidf": truncating_baseline} if args.baseline else None)
    metrics = train(settings)
    if not is_main_process():  # under torchrun the main process reports
        return
    print(json.dumps(metrics["test"], indent=2))
    print(f"Saved model, tokenizer, metrics.json and model card to {os.path.abspath(args.output_dir)}")
