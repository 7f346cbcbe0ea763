"""Patent labels as in the elementwise paper (Sections 3.3, 5.1, 5.3, Fig. 4): CPC/IPC subclasses with First/Later.

The first-listed classification symbol describes the invention, later ones add information, so a patent's label set
keeps the order: `[G06Q, G06Q, A01B]` -> {First-G06Q, Later-G06Q, Later-A01B}, which differs from
`[A01B, G06Q, A01B]` -> {First-A01B, Later-G06Q, Later-A01B}. K subclasses give a label space of 2K.
"""

import re

import numpy as np

SUBCLASS = re.compile(r"^\s*([A-HY])\s*(\d{2})\s*([A-Z])")
FIRST, LATER = "First-", "Later-"


def subclass(code):
    """The subclass of a CPC/IPC symbol (Section, Class, Subclass): `"A01N 53/12"` -> `"A01N"`."""
    if not isinstance(code, str):
        raise TypeError(f"A classification symbol must be a str such as 'A01N 53/12', got {type(code).__name__}.")
    match = SUBCLASS.match(code.upper())
    if not match:
        raise ValueError(f"{code!r} is not a CPC/IPC symbol: expected a section letter A-H or Y, two digits and a "
                         "subclass letter, as in 'A01N 53/12'.")
    return "".join(match.groups())


def relabel_first_later(codes):
    """Section 5.3: the first-listed symbol's subclass becomes First-X, every later one Later-Y (sorted, unique)."""
    if isinstance(codes, str) or not len(codes):
        raise ValueError(f"`codes` must be a non-empty list of classification symbols, got {codes!r}.")
    subclasses = [subclass(code) for code in codes]
    return sorted({FIRST + subclasses[0]} | {LATER + s for s in subclasses[1:]})


def build_label_space(code_lists):
    """The 2K labels (First-X and Later-X for every subclass X seen), sorted, for `multi_hot`."""
    seen = sorted({subclass(code) for codes in code_lists for code in codes})
    return [FIRST + s for s in seen] + [LATER + s for s in seen]


def multi_hot(labels, label_space):
    """A float32 multi-hot vector of `labels` over `label_space` (labels outside it are an error)."""
    index = {name: i for i, name in enumerate(label_space)}
    vector = np.zeros(len(label_space), dtype=np.float32)
    for label in labels:
        if label not in index:
            raise ValueError(f"Label {label!r} is not in the label space; build it from the training codes.")
        vector[index[label]] = 1.0
    return vector
