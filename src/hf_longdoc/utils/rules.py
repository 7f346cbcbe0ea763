"""What each number a user passes must be, checked once with the argument and its flag named.

Every numeric flag of the CLI parses through `NumberRule.parse` (an argparse `type`), and the library functions behind
the verbs check the same rules with `NumberRule.check`, so `train(epochs=float("inf"))` and `--epochs inf` fail alike,
before any data is read.
"""

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class NumberRule:
    """An integer or a finite number within bounds (`low`/`high`, each open or closed), described in words."""

    integer: bool
    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False
    meaning: str = ""  # what the number is, said in the error: "the tokens a document is cut to"

    def describe(self):
        kind = "an integer" if self.integer else "a finite number"
        bounds = []
        positive = self.low == 0 and self.low_open or self.integer and self.low == 1 and not self.low_open
        if positive:  # "must be positive", as a user says it (a negative number reads wrong against "above 0")
            kind = "a positive integer" if self.integer else "a positive finite number"
        elif self.low is not None:
            bounds.append(f"{'above' if self.low_open else 'at least'} {self.low:,}")
        if self.high is not None:
            bounds.append(f"{'below' if self.high_open else 'at most'} {self.high:,}")
        text = f"{kind} {' and '.join(bounds)}".strip()
        return f"{text} ({self.meaning})" if self.meaning else text

    def accepts(self, value):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return False
        if self.integer and not isinstance(value, int):
            return False
        if not math.isfinite(value):
            return False
        if self.low is not None and (value <= self.low if self.low_open else value < self.low):
            return False
        return self.high is None or (value < self.high if self.high_open else value <= self.high)

    def check(self, value, name, flag=None):
        """`value` when the rule accepts it; else a ValueError naming `name` (and `--flag`)."""
        if not self.accepts(value):
            where = f"`{name}` (--{flag})" if flag else f"`{name}`"
            raise ValueError(f"{where} must be {self.describe()}, got {value!r}.")
        return value

    def parse(self, text):
        """Parse a flag's text (argparse `type`): an argparse error that says what the number must be."""
        import argparse

        try:
            value = int(text) if self.integer else float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be {self.describe()}, got {text!r}") from None
        if not self.accepts(value):
            raise argparse.ArgumentTypeError(f"must be {self.describe()}, got {text!r}")
        return value


POSITIVE_INTEGER = NumberRule(integer=True, low=1)
NON_NEGATIVE_INTEGER = NumberRule(integer=True, low=0)
POSITIVE_NUMBER = NumberRule(integer=False, low=0, low_open=True)
SEED = NumberRule(integer=True, low=0, high=2**32 - 1, meaning="NumPy's seeds are 32-bit")
THRESHOLD = NumberRule(integer=False, low=0, high=1, low_open=True, high_open=True,
                       meaning="the sigmoid score at or above which a class is given")
DEFAULT_THRESHOLD = 0.3  # the multi-label decision threshold of a model saved without one (`train --threshold`)
DROPOUT = NumberRule(integer=False, low=0, high=1, high_open=True, meaning="a probability")
# [CLS], one token of text and [SEP]: fewer reads nothing of a document
MAX_LENGTH = NumberRule(integer=True, low=3, meaning="the tokens a document is cut to, special tokens included")
LEARNING_RATE = NumberRule(integer=False, low=0, low_open=True, meaning="the AdamW step size, typically 1e-5 to 1e-2")
# WordPiece needs its special tokens and the bytes it starts from
VOCAB_SIZE = NumberRule(integer=True, low=100, meaning="the size of the fitted WordPiece vocabulary")

__all__ = [
    "DEFAULT_THRESHOLD", "DROPOUT", "LEARNING_RATE", "MAX_LENGTH", "NON_NEGATIVE_INTEGER", "NumberRule",
    "POSITIVE_INTEGER", "POSITIVE_NUMBER", "SEED", "THRESHOLD", "VOCAB_SIZE"
]
