"""Download the two public datasets docs/results.md measures on and write them as JSONL (`id`, `text`, `label`, `fold`).

- **movie reviews**: Pang & Lee's sentiment polarity dataset v2.0 (ACL 2004; 2,000 full-length IMDb reviews, 1,000
  positive and 1,000 negative, lower-cased and tokenized by the authors), from the copy NLTK distributes with the
  authors' permission. `fold` is the authors' 10-fold split (cv000-cv099 -> 0, ..., cv900-cv999 -> 9).
- **BBC news**: Greene & Cunningham's BBC full-text corpus (ICML 2006; 2,225 stories of 2004-2005 in five topics;
  "all rights, including copyright, in the content of the original articles are owned by the BBC": research use).
  `text` is the title line and the body; exact duplicates (after whitespace normalisation) are dropped, the first
  kept; `fold` is one of 5 stratified folds (seed 13).

    python examples/get_data.py --output-dir data        # data/movie_reviews.jsonl, data/bbc_news.jsonl

Each file is downloaded once into `--cache-dir`; an existing output file is kept unless `--overwrite`.
"""

import argparse
import io
import json
import logging
import pathlib
import re
import urllib.request
import zipfile

from sklearn.model_selection import StratifiedKFold

logger = logging.getLogger(__name__)

SOURCES = {
    "movie_reviews": "https://raw.githubusercontent.com/nltk/nltk_data/gh-pages/packages/corpora/movie_reviews.zip",
    "bbc_news": "http://mlg.ucd.ie/files/datasets/bbc-fulltext.zip",
}


def movie_reviews(archive):
    """The rows of NLTK's `movie_reviews.zip` (a path or bytes): `movie_reviews/{neg,pos}/cvNNN_ID.txt`."""
    rows = []
    with zipfile.ZipFile(archive if not isinstance(archive, bytes) else io.BytesIO(archive)) as zipped:
        for name in sorted(zipped.namelist()):
            match = re.search(r"(neg|pos)/(cv(\d{3})_\w+)\.txt$", name)
            if match:
                label, stem, number = match.groups()
                rows.append({"id": f"mr-{label}-{stem}", "text": zipped.read(name).decode("utf-8"), "label": label,
                             "fold": int(number) // 100})
    if not rows:
        raise ValueError("The archive holds no movie_reviews/{neg,pos}/cvNNN_*.txt files.")
    return rows


def bbc_news(archive, folds=5, seed=13):
    """The rows of the BBC full-text archive (a path or bytes): `bbc/<label>/NNN.txt`, title line then body. Exact
    duplicates after whitespace normalisation are dropped (the first kept); `fold` is stratified by label."""
    rows, seen = [], set()
    with zipfile.ZipFile(archive if not isinstance(archive, bytes) else io.BytesIO(archive)) as zipped:
        for name in sorted(zipped.namelist()):
            match = re.search(r"bbc/(\w+)/(\d+)\.txt$", name)
            if not match:
                continue
            label, number = match.groups()
            raw = zipped.read(name)
            try:
                text = raw.decode("utf-8").strip()
            except UnicodeDecodeError:  # some of the original files are Latin-1 (the pound sign)
                text = raw.decode("latin-1").strip()
            key = " ".join(text.split())
            if key in seen:
                continue
            seen.add(key)
            rows.append({"id": f"bbc-{label}-{number}", "title": text.split("\n", 1)[0].strip(), "text": text,
                         "label": label})
    if not rows:
        raise ValueError("The archive holds no bbc/<label>/NNN.txt files.")
    labels = [row["label"] for row in rows]
    for fold, (_, held_out) in enumerate(StratifiedKFold(folds, shuffle=True, random_state=seed).split(rows, labels)):
        for index in held_out:
            rows[index]["fold"] = fold
    return rows


def download(url, cache_dir):
    """The bytes at `url`, kept in `cache_dir` after the first download."""
    path = pathlib.Path(cache_dir) / url.rsplit("/", 1)[-1]
    if not path.exists():
        logger.warning("Downloading %s", url)
        path.parent.mkdir(parents=True, exist_ok=True)
        with urllib.request.urlopen(url, timeout=120) as response:
            path.write_bytes(response.read())
    return path.read_bytes()


def write_jsonl(rows, path, overwrite=False):
    """Write `rows` to `path`, refusing to replace an existing file unless `overwrite`."""
    path = pathlib.Path(path)
    if path.exists() and not overwrite:
        raise FileExistsError(f"{path} exists; pass --overwrite to replace it.")
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as handle:
        for row in rows:
            handle.write(json.dumps(row, ensure_ascii=False) + "\n")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--output-dir", default="data", help="where the JSONL files go")
    parser.add_argument("--cache-dir", default="data/downloads", help="where the archives are kept")
    parser.add_argument("--datasets", default="movie_reviews,bbc_news", help="comma-separated: " + ", ".join(SOURCES))
    parser.add_argument("--overwrite", action="store_true", help="replace existing JSONL files")
    args = parser.parse_args(argv)
    readers = {"movie_reviews": movie_reviews, "bbc_news": bbc_news}
    names = [name.strip() for name in args.datasets.split(",") if name.strip()]
    unknown = sorted(set(names) - set(SOURCES))
    if unknown:
        parser.error(f"--datasets: unknown {unknown}; choose from {sorted(SOURCES)}")
    for name in names:
        rows = readers[name](download(SOURCES[name], args.cache_dir))
        write_jsonl(rows, pathlib.Path(args.output_dir) / f"{name}.jsonl", args.overwrite)
        print(f"{name}: {len(rows)} documents -> {pathlib.Path(args.output_dir) / f'{name}.jsonl'}")


if __name__ == "__main__":
    main()
