"""Write a sample of a public long-document set, news articles labelled by political bias, as JSONL.

Each row is `{"id", "text", "label", "fold"}`.

Source: Baly, Da San Martino, Glass & Nakov, "We Can Detect Your Bias: Predicting the Political Ideology of News
Articles" (EMNLP 2020), GitHub repository `ramybaly/Article-Bias-Prediction`, commit
ced8111a720948e6a410e52031ace99c4e53f096 (2021-03-31; the data arrived in e9353def1b6599f8a16bccb6ac5fe682185d728e).
The repository holds 37,554 articles crawled from allsides.com, one JSON file each under `data/jsons/<ID>.json`. Each
file's `bias_text` (left / center / right; AllSides' rating) is the label. The text is `content_original`, the article
body that newspaper3k returned, with only surrounding whitespace stripped. The title and the authors' tokenized
`content` are not used. Across the whole set the body is 810 words long at the median (10th-90th percentile 394-1,636).
The repository is under the Apache License 2.0, as its LICENSE file states. It gives no other terms, and the
copyright in the article texts stays with their publishers.

Texts that occur more than once (after whitespace normalisation) are kept once, from the first file in path order. A
text that occurs under two different labels is dropped altogether. At most `--size` articles are then drawn, stratified
by label (sklearn's `train_test_split`, `random_state=--seed`). `fold` (0-4) comes from
`StratifiedKFold(5, shuffle=True, random_state=13)` over the sample in id order. A caveat: the labels follow the
outlet closely, and the authors also provide a media-based split. Five random folds can therefore reward recognising
the outlet, so report that next to any result.

Rebuild (after the `fetch` tool has brought github:ramybaly/Article-Bias-Prediction into /work/.mirror):

    .venv/bin/python examples/get_long_set.py --output /work/runs/longset.jsonl     # --size 800 --seed 1

The files are read from the git directory (`--mirror`) with `git archive COMMIT data/jsons`. No network is used.
"""

import argparse
import collections
import json
import logging
import pathlib
import re
import subprocess
import sys
import tarfile

from sklearn.model_selection import StratifiedKFold, train_test_split

logger = logging.getLogger(__name__)

REPO = "ramybaly/Article-Bias-Prediction"
COMMIT = "ced8111a720948e6a410e52031ace99c4e53f096"
MIRROR = "/work/.mirror/ramybaly+Article-Bias-Prediction/repo"
DATA_DIR = "data/jsons"
LABELS = ("left", "center", "right")


def read_articles(mirror, commit=COMMIT):
    """Every `data/jsons/*.json` at `commit` of the git directory `mirror`, as dicts in path order."""
    command = ["git", "--git-dir", str(mirror), "archive", "--format=tar", commit, DATA_DIR]
    articles = []
    with subprocess.Popen(command, stdout=subprocess.PIPE) as process:
        with tarfile.open(fileobj=process.stdout, mode="r|") as archive:
            for member in archive:
                if member.isfile() and member.name.endswith(".json"):
                    articles.append((member.name, json.load(archive.extractfile(member))))
    if process.returncode:
        raise RuntimeError(f"`{' '.join(command)}` failed with exit status {process.returncode}")
    if not articles:
        raise ValueError(f"{mirror} holds no {DATA_DIR}/*.json at {commit}")
    return [article for _, article in sorted(articles, key=lambda pair: pair[0])]


def rows_of(articles, min_words=0):
    """One row per distinct text (`id`, `text`, `label`). Same-label repeats are kept once, the first one.
    Texts seen under two labels are dropped, and so are texts shorter than `min_words` words."""
    labels_of, first = collections.defaultdict(set), {}
    for article in articles:
        text = article["content_original"].strip()
        label = article["bias_text"]
        if label not in LABELS:
            raise ValueError(f"article {article['ID']}: unexpected label {label!r}")
        key = re.sub(r"\s+", " ", text)
        labels_of[key].add(label)
        first.setdefault(key, {"id": f"abp-{article['ID']}", "text": text, "label": label})
    rows = [row for key, row in first.items() if len(labels_of[key]) == 1 and len(row["text"].split()) >= min_words]
    dropped = len(articles) - len(rows)
    logger.info("%d articles, %d distinct kept (%d repeats, conflicting-label or short texts dropped)",
                len(articles), len(rows), dropped)
    return rows


def sample(rows, size, seed=1, folds=5, fold_seed=13):
    """At most `size` rows, stratified by label, in id order, each with a stratified `fold`."""
    if size < len(rows):
        rows, _ = train_test_split(rows, train_size=size, stratify=[row["label"] for row in rows], random_state=seed)
    rows = sorted(rows, key=lambda row: row["id"])
    labels = [row["label"] for row in rows]
    splitter = StratifiedKFold(n_splits=folds, shuffle=True, random_state=fold_seed)
    for fold, (_, held) in enumerate(splitter.split(labels, labels)):
        for index in held:
            rows[index]["fold"] = fold
    return rows


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mirror", default=MIRROR, help="the fetched git directory of " + REPO)
    parser.add_argument("--commit", default=COMMIT, help="the commit to read (default: the one documented above)")
    parser.add_argument("--size", type=int, default=800, help="most articles to keep, stratified by label")
    parser.add_argument("--seed", type=int, default=1, help="random_state of the stratified sample")
    parser.add_argument("--min-words", type=int, default=0,
                        help="drop texts shorter than this many words (default: none)")
    parser.add_argument("--output", type=pathlib.Path, help="JSONL file to write (default: stdout)")
    parser.add_argument("--overwrite", action="store_true", help="replace an existing --output file")
    args = parser.parse_args(argv)
    if args.output and args.output.exists() and not args.overwrite:
        parser.error(f"--output {args.output} exists; pass --overwrite to replace it.")  # before the long read
    logging.basicConfig(level=logging.INFO, format="%(message)s")

    rows = sample(rows_of(read_articles(args.mirror, args.commit), args.min_words), args.size, args.seed)
    out = args.output.open("w", encoding="utf-8") if args.output else sys.stdout
    try:
        for row in rows:
            out.write(json.dumps({key: row[key] for key in ("id", "text", "label", "fold")}, ensure_ascii=False) + "\n")
    finally:
        if args.output:
            out.close()
    logger.info("%d rows, labels %s", len(rows), dict(collections.Counter(row["label"] for row in rows)))


if __name__ == "__main__":
    main()
