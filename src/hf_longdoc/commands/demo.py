"""`hf-longdoc demo`: the default model on the built-in task, next to a 512-token truncating baseline."""

import os

from ..numbers import POSITIVE_INTEGER, POSITIVE_NUMBER
from .options import Formatter


def add_parser(subparsers):
    parser = subparsers.add_parser("demo", formatter_class=Formatter,
                                   help="train the default model on the built-in task (evidence at the end) next to "
                                        "a 512-token truncating baseline")
    parser.add_argument("--output-dir", default="out/demo-contextualizer", help="where the trained model goes")
    parser.add_argument("--model", default="contextualizer", help="the family to train")
    parser.add_argument("--epochs", type=POSITIVE_NUMBER.parse, default=3, help="training epochs")
    parser.add_argument("--task-size", type=POSITIVE_INTEGER.parse, default=800,
                        help="training documents of the built-in task")
    parser.set_defaults(run=run)


def run(args):
    from ..experiments.baselines import truncating_baseline
    from ..training import train

    metrics = train(model=args.model, output_dir=args.output_dir, epochs=args.epochs, task_size=args.task_size,
                    evidence="end", extra_scores={"truncating_baseline_tfidf": truncating_baseline})
    baseline = metrics["truncating_baseline_tfidf"]
    print()
    print("Built-in long-document task, label evidence in the last 20% of each 800-3000-word document:")
    accuracy = metrics["test"]["accuracy"]
    print(f"  {args.model} (reads up to {metrics['max_length']} tokens)  test accuracy {accuracy:.3f}")
    print(f"  TF-IDF + logistic regression, first 512 tokens   test accuracy {baseline['first_512']:.3f}")
    print(f"  TF-IDF + logistic regression, full text          test accuracy {baseline['full_text']:.3f}")
    print(f"Model saved to {os.path.abspath(args.output_dir)}")
