"""The built-in long-document task: seeded synthetic documents whose label evidence sits at a chosen depth.

Each document is 800-3000 words (by default) of sentences drawn from a Zipf-distributed pseudo-word vocabulary shared
by every class (the distractors). A few class-specific phrases, words that no other class and no distractor uses, are
woven into sentences placed only inside the evidence window:

    start    [0.00, 0.20] of the document      middle   [0.40, 0.60]
    end      [0.80, 1.00]                      anywhere [0.00, 1.00]

With evidence at `end` and documents of at least 800 words, every piece of evidence lies past word 640, so a model
that reads only the first 512 tokens (of any tokenizer that never merges two words) sees none of it and sits at
chance, while the full text is easy. It runs offline, which makes it the default task of `hf-longdoc train`.

That `keywords` task is solved by a bag of words (TF-IDF over the full text scores 1.0): it tests only whether a model
reads far enough. The `context` task (`kind="context"`, `hf-longdoc train --task-kind context`, what `hf-longdoc demo`
trains on) also needs the evidence read in its context. Each document is a review whose label is the verdict on one
part, the room (`positive` or `negative`); in the evidence window, behind the same pseudo-word filler, it holds two
English statements as whole sentences, in a random order and apart:

    one about the room         "Honestly, the room was not clean."
    one about another part     "We thought the breakfast was lovely."

Exactly one of the two is negated, and the label says which: negative when the room's statement carries the "not",
positive when the other part's does. Adjectives, templates, the other part and the order are drawn independently of
the label, so every document holds the same words in the same counts whatever its label (even the same word pairs:
"room was", "was not", "not clean" occur in both classes); only which entity the negation attaches to decides. So a
bag of words, TF-IDF over unigrams or bigrams of the full text included, is at chance: exactly 0.5 in expectation,
since the distribution of a document's bag does not depend on its label (measured, 200-260 words, three seeds of 1,000
training and 400 test documents: .534 ± .010 over unigrams, .508 ± .025 over unigrams and bigrams), while a reader of
the statements in context finds it easy (TF-IDF over word triples: "room was not").
"""

import re

import numpy as np
from datasets import ClassLabel, Dataset, DatasetDict, Features, Value

EVIDENCE_WINDOWS = {"start": (0.0, 0.2), "middle": (0.4, 0.6), "end": (0.8, 1.0), "anywhere": (0.0, 1.0)}
TASK_KINDS = ("keywords", "context")

# The context task's statements: the label is the verdict on TARGET; every word below occurs in both classes.
TARGET = "room"
OTHER_PARTS = ["breakfast", "pool", "staff", "view", "parking", "bathroom", "location", "wifi"]
ADJECTIVES = ["clean", "good", "great", "lovely", "comfortable", "pleasant", "excellent", "quiet"]
TEMPLATES = ["The {part} was {negation}{adjective}.", "Honestly, the {part} was {negation}{adjective}.",
             "We thought the {part} was {negation}{adjective}.", "I have to say the {part} was {negation}{adjective}."]
CONTEXT_LABELS = ["negative", "positive"]

_ONSETS = ["", "b", "c", "d", "f", "g", "h", "j", "k", "l", "m", "n", "p", "r", "s", "t", "v", "w", "z", "br", "ch",
           "cl", "dr", "fl", "gr", "pl", "pr", "sh", "st", "th", "tr"]
_VOWELS = ["a", "e", "i", "o", "u", "ai", "ea", "ou", "io"]
_CODAS = ["", "", "n", "r", "s", "l", "m", "t", "nd", "st", "rk"]


def pseudo_words(count, rng, exclude=()):
    """`count` distinct pronounceable pseudo-words of 1-3 syllables, in a random order, none of them in `exclude`."""
    words = set()
    while len(words) < count:
        syllables = rng.integers(1, 4)
        pick = lambda parts: parts[rng.integers(len(parts))]  # noqa: E731
        word = "".join(pick(_ONSETS) + pick(_VOWELS) + pick(_CODAS) for _ in range(syllables))
        if word not in exclude:
            words.add(word)
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
    num_labels=None,
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
    kind="keywords",
):
    """Build the task as a `DatasetDict` with `train`, `validation` and `test` splits (columns `text`, `label`).

    Args:
        num_labels: number of classes (named `topic_0`, ...); None: 4 for `keywords`. The `context` task has two
            (`negative`, `positive`) and takes no other number.
        train_size, validation_size, test_size: documents per split (classes balanced in expectation).
        min_words, max_words: document length range in words, drawn uniformly.
        evidence: where the class evidence goes, one of `start`, `middle`, `end`, `anywhere`.
        evidence_count: (low, high) inclusive range of how many evidence phrases a document holds (`keywords`; a
            `context` document holds one statement about the room and one about another part).
        phrases_per_label: how many distinct two-word phrases identify each class (`keywords` only).
        vocabulary_size: number of distractor pseudo-words (shared by all classes).
        seed: everything is a function of this seed.
        kind: `keywords` (class-specific phrases: a bag of words solves it) or `context` (the same words in every
            document, and which entity the negation attaches to decides: see the module docstring).
    """
    if kind not in TASK_KINDS:
        raise ValueError(f"`kind` must be one of {TASK_KINDS}, got {kind!r}.")
    if evidence not in EVIDENCE_WINDOWS:
        raise ValueError(f"`evidence` must be one of {tuple(EVIDENCE_WINDOWS)}, got {evidence!r}.")
    if kind == "context" and num_labels not in (None, 2):
        raise ValueError(f"The `context` task has two labels (negative, positive); got `num_labels`={num_labels}: "
                         "leave it out.")
    num_labels = num_labels or (2 if kind == "context" else 4)
    if not 2 <= num_labels:
        raise ValueError(f"`num_labels` must be at least 2, got {num_labels}.")
    if not 0 < min_words <= max_words:
        raise ValueError(f"Need 0 < `min_words` <= `max_words`, got {min_words} and {max_words}.")
    low, high = evidence_count
    if not 1 <= low <= high:
        raise ValueError(f"`evidence_count` must be (low, high) with 1 <= low <= high, got {evidence_count}.")
    rng = np.random.default_rng(seed)
    # The filler may not contain a statement's words ("not", "the", "was", "clean" are also pseudo-words).
    exclude = statement_words() if kind == "context" else ()
    lexicon = pseudo_words(vocabulary_size + 2 * num_labels * phrases_per_label, rng, exclude)
    distractors = np.array(lexicon[:vocabulary_size])
    evidence_words = lexicon[vocabulary_size:]
    phrases = [
        [" ".join(evidence_words[2 * (k * phrases_per_label + j): 2 * (k * phrases_per_label + j) + 2])
         for j in range(phrases_per_label)]
        for k in range(num_labels)
    ]
    zipf = 1.0 / (np.arange(vocabulary_size) + 2.7) ** 1.07
    zipf /= zipf.sum()
    lo, hi = EVIDENCE_WINDOWS[evidence]

    def filler():
        n_words = int(rng.integers(min_words, max_words + 1))
        return n_words, distractors[rng.choice(vocabulary_size, size=n_words, p=zipf)].tolist()

    def sentences_of(words):
        sentences, i = [], 0
        while i < len(words):
            length = int(rng.integers(6, 19))
            sentences.append(_sentence(words[i: i + length], rng))
            i += length
        return sentences

    def keywords_document(label):
        n_words, words = filler()
        n_evidence = int(rng.integers(low, high + 1))
        # Phrases replace two words, never straddling the window's edges.
        starts = rng.integers(int(lo * n_words), max(int(hi * n_words) - 2, int(lo * n_words) + 1), size=n_evidence)
        for start in starts:
            words[start: start + 2] = phrases[label][rng.integers(phrases_per_label)].split()
        return " ".join(sentences_of(words))

    def context_document(label):
        n_words, words = filler()
        sentences = sentences_of(words)
        statements = [_statement(TARGET, negated=label == 0, rng=rng),
                      _statement(OTHER_PARTS[rng.integers(len(OTHER_PARTS))], negated=label == 1, rng=rng)]
        rng.shuffle(statements)  # the order says nothing about the label
        # Sentence boundaries inside the window (boundary i is before filler sentence i); the statements go at two
        # of them with at least one filler sentence between, so that no reader sees them as one sentence.
        starts = np.cumsum([0] + [len(sentence.split()) for sentence in sentences])  # (len(sentences) + 1,)
        inside = [i for i, start in enumerate(starts) if lo * n_words <= start <= hi * n_words]
        if len(inside) < 3:  # a window too short for three boundaries: the last ones of the document
            inside = list(range(max(len(sentences) - 2, 0), len(sentences) + 1))
        a = inside[rng.integers(max(len(inside) - 2, 1))]
        b = int(rng.integers(min(a + 2, inside[-1]), inside[-1] + 1))
        sentences.insert(b, statements[1])
        sentences.insert(a, statements[0])
        return " ".join(sentences)

    document = context_document if kind == "context" else keywords_document

    def split(size):
        labels = rng.integers(num_labels, size=size)
        return {"text": [document(int(label)) for label in labels], "label": labels.tolist()}

    names = CONTEXT_LABELS if kind == "context" else [f"topic_{k}" for k in range(num_labels)]
    features = Features({"text": Value("string"), "label": ClassLabel(names=names)})
    sizes = {"train": train_size, "validation": validation_size, "test": test_size}
    return DatasetDict({name: Dataset.from_dict(split(size), features=features) for name, size in sizes.items()})


def statement_words():
    """Every word a context-task statement can contain, lower-cased."""
    texts = [TARGET, *OTHER_PARTS, *ADJECTIVES, "not", *TEMPLATES]
    return set(re.findall(r"[a-z]+", " ".join(texts).lower())) - {"part", "negation", "adjective"}


def _statement(part, negated, rng):
    """One sentence of the context task: a verdict on `part`, negated or not, from a random template and adjective."""
    template = TEMPLATES[rng.integers(len(TEMPLATES))]
    adjective = ADJECTIVES[rng.integers(len(ADJECTIVES))]
    return template.format(part=part, negation="not " if negated else "", adjective=adjective)
