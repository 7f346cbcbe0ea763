"""The built-in long-document task: seeded synthetic documents whose label evidence sits at a chosen depth.

Each document is 800-3000 words (by default) of sentences drawn from a Zipf-distributed pseudo-word vocabulary shared
by every class (the distractors). A few class-specific phrases, words that no other class and no distractor uses, are
woven into sentences placed only inside the evidence window:

    start    [0.00, 0.20] of the document      middle   [0.40, 0.60]
    end      [0.80, 1.00]                      anywhere [0.00, 1.00]

With evidence at `end` and documents of at least 800 words, every piece of evidence lies past word 640, so a model
that reads only the first 512 tokens (of any tokenizer that never merges two words) sees none of it and sits at
chance, while the full text is easy. It runs offline, which makes it the default task of `hf-longdoc train`.
"""

import numpy as np
from datasets import ClassLabel, Dataset, DatasetDict, Features, Value

EVIDENCE_WINDOWS = {"start": (0.0, 0.2), "middle": (0.4, 0.6), "end": (0.8, 1.0), "anywhere": (0.0, 1.0)}

_ONSETS = ["", "b", "c", "d", "f", "g", "h", "j", "k", "l", "m", "n", "p", "r", "s", "t", "v", "w", "z", "br", "ch",
           "cl", "dr", "fl", "gr", "pl", "pr", "sh", "st", "th", "tr"]
_VOWELS = ["a", "e", "i", "o", "u", "ai", "ea", "ou", "io"]
_CODAS = ["", "", "n", "r", "s", "l", "m", "t", "nd", "st", "rk"]


def pseudo_words(count, rng):
    """`count` distinct pronounceable pseudo-words of 1-3 syllables, in a random order."""
    words = set()
    while len(words) < count:
        syllables = rng.integers(1, 4)
        pick = lambda parts: parts[rng.integers(len(parts))]  # noqa: E731
        words.add("".join(pick(_ONSETS) + pick(_VOWELS) + pick(_CODAS) for _ in range(syllables)))
    words = sorted(words)
    rng.shuffle(words)
    return words


def _sentence(words, rng):
    """Capitalised sentence with an occasional comma, ending in a full stop."""
    words = list(words)
    if len(words) > 8 and rng.random() < 0.5:
        words[rng.integers(2, len(words) - 2)] += ","
    return " ".join(words).capitalize() + "."


def make_long_document_task(
    num_labels=4,
    train_size=1000,
    validation_size=200,
    test_size=400,
    min_words=800,
    max_words=3000,
    evidence="end",
    evidence_count=(3, 6),
    phrases_per_label=6,
    vocabulary_size=6000,
    seed=0,
):
    """Build the task as a `DatasetDict` with `train`, `validation` and `test` splits (columns `text`, `label`).

    Args:
        num_labels: number of classes (named `topic_0`, ...).
        train_size, validation_size, test_size: documents per split (classes balanced in expectation).
        min_words, max_words: document length range in words, drawn uniformly.
        evidence: where the class evidence goes, one of `start`, `middle`, `end`, `anywhere`.
        evidence_count: (low, high) inclusive range of how many evidence phrases a document holds.
        phrases_per_label: how many distinct two-word phrases identify each class.
        vocabulary_size: number of distractor pseudo-words (shared by all classes).
        seed: everything is a function of this seed.
    """
    if evidence not in EVIDENCE_WINDOWS:
        raise ValueError(f"`evidence` must be one of {tuple(EVIDENCE_WINDOWS)}, got {evidence!r}.")
    if not 2 <= num_labels:
        raise ValueError(f"`num_labels` must be at least 2, got {num_labels}.")
    if not 0 < min_words <= max_words:
        raise ValueError(f"Need 0 < `min_words` <= `max_words`, got {min_words} and {max_words}.")
    low, high = evidence_count
    if not 1 <= low <= high:
        raise ValueError(f"`evidence_count` must be (low, high) with 1 <= low <= high, got {evidence_count}.")
    rng = np.random.default_rng(seed)
    lexicon = pseudo_words(vocabulary_size + 2 * num_labels * phrases_per_label, rng)
    distractors = np.array(lexicon[:vocabulary_size])
    evidence_words = lexicon[vocabulary_size:]
    phrases = [
        [" ".join(evidence_words[2 * (k * phrases_per_label + j): 2 * (k * phrases_per_label + j) + 2])
         for j in range(phrases_per_label)]
        for k in range(num_labels)
    ]
    zipf = 1.0 / (np.arange(vocabulary_size) + 2.7) ** 1.07
    zipf /= zipf.sum()

    def document(label):
        n_words = int(rng.integers(min_words, max_words + 1))
        words = distractors[rng.choice(vocabulary_size, size=n_words, p=zipf)].tolist()
        n_evidence = int(rng.integers(low, high + 1))
        lo, hi = EVIDENCE_WINDOWS[evidence]
        # Phrases replace two words, never straddling the window's edges.
        starts = rng.integers(int(lo * n_words), max(int(hi * n_words) - 2, int(lo * n_words) + 1), size=n_evidence)
        for start in starts:
            words[start: start + 2] = phrases[label][rng.integers(phrases_per_label)].split()
        sentences, i = [], 0
        while i < len(words):
            length = int(rng.integers(6, 19))
            sentences.append(_sentence(words[i: i + length], rng))
            i += length
        return " ".join(sentences)

    def split(size):
        labels = rng.integers(num_labels, size=size)
        return {"text": [document(int(label)) for label in labels], "label": labels.tolist()}

    features = Features({"text": Value("string"), "label": ClassLabel(names=[f"topic_{k}" for k in range(num_labels)])})
    sizes = {"train": train_size, "validation": validation_size, "test": test_size}
    return DatasetDict({name: Dataset.from_dict(split(size), features=features) for name, size in sizes.items()})
