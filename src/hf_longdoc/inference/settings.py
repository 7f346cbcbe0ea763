"""How a saved model reads documents: the settings `predict` and `serve` share, declared once (flags included).

Nothing heavy is imported here, so `hf-longdoc predict --help` and `serve --help` build their flags at once.
"""

import logging
from dataclasses import dataclass

from ..utils.parsing import option, parse_config_overrides
from ..utils.rules import NON_NEGATIVE_INTEGER, POSITIVE_INTEGER

logger = logging.getLogger(__name__)
LONG = ("truncate", "chunks")
TRUNCATION_SIDES = ("right", "left")
AGGREGATIONS = ("mean", "max")
DTYPE_NAMES = ("float32", "bfloat16", "float16")
BACKENDS = ("torch", "onnxruntime", "onnxruntime-int8")


@dataclass(frozen=True, kw_only=True)
class ReadSettings:
    """How documents are read: a document gets the same labels and scores from `predict`, `serve` and the pipeline
    when these agree. Checked once, when the settings are made, before any model loads.

    `top_k`, `explain`, `raw_scores` and `backend` are what the reader returns and runs on; `predict` takes them as
    flags, a server's clients per request.
    """

    batch_size: int = option(8, "documents (with --long chunks: chunks) per forward pass", type=POSITIVE_INTEGER.parse)
    device: str | None = option(None, "a torch device (cpu, cuda, cuda:1, mps); None: this process's GPU if there is "
                                      "one, else the CPU", type=str)
    dtype: str | None = option(None, "the weights' precision (float16: a GPU's); None: float32", choices=DTYPE_NAMES)
    long: str = option("truncate", "a document longer than the model reads: 'truncate' cuts it there (counted in the "
                                   "log); 'chunks' reads all of it in chunks whose logits are aggregated, as the "
                                   "long-document pipeline does", choices=LONG)
    truncation_side: str = option("right", "with --long truncate: read a cut document's start (right) or its end "
                                           "(left), as the tokenizer's truncation_side", choices=TRUNCATION_SIDES)
    stride: int = option(0, "with --long chunks: ids consecutive chunks share", type=NON_NEGATIVE_INTEGER.parse)
    aggregation: str = option("mean", "with --long chunks: how the chunks' logits become the document's",
                              choices=AGGREGATIONS)
    config_overrides: dict | None = option(None, "how the saved model runs, not what it computes: its family's "
                                                 "runtime settings as KEY=VALUE pairs (e.g. compile_gates=false)",
                                           flag="config", nargs="*", metavar="KEY=VALUE",
                                           combine=parse_config_overrides)
    top_k: int | None = None  # keep the K best classes (None: every class)
    explain: int | None = None  # the K passages that weighed most in each decision
    raw_scores: bool = False  # each prediction also holds its logits
    backend: str = "torch"  # or an exported graph run by onnxruntime (`predict --backend`)

    def __post_init__(self):
        POSITIVE_INTEGER.check(self.batch_size, "batch_size", "batch-size")
        NON_NEGATIVE_INTEGER.check(self.stride, "stride", "stride")
        for name in ("top_k", "explain"):
            if getattr(self, name) is not None:
                POSITIVE_INTEGER.check(getattr(self, name), name, name.replace("_", "-"))
        choices = {"long": LONG, "truncation_side": TRUNCATION_SIDES, "aggregation": AGGREGATIONS,
                   "dtype": (*DTYPE_NAMES, None), "backend": BACKENDS}
        for name, allowed in choices.items():
            if getattr(self, name) not in allowed:
                shown = ", ".join(choice for choice in allowed if choice is not None)
                raise ValueError(f"`{name}` (--{name.replace('_', '-')}) must be one of {shown}, got "
                                 f"{getattr(self, name)!r}.")
        if self.explain is not None and self.long == "chunks":
            raise ValueError("`explain` (--explain) shows what the model weighed in what it reads at once; it cannot "
                             "be combined with `long='chunks'` (--long chunks), which reads several chunks: drop one.")
        if self.explain is not None and self.truncation_side != "right":
            raise ValueError("`explain` (--explain) weighs the passages of a document's start; it cannot be combined "
                             "with `truncation_side='left'` (--truncation-side left): drop one.")
        if self.config_overrides is not None and not isinstance(self.config_overrides, dict):
            raise TypeError(f"`config_overrides` (--config) must be a dict of config settings, got "
                            f"{type(self.config_overrides).__name__}.")

    def note_ignored(self):
        """Log each setting that does nothing with the others (a default is never logged)."""
        if self.long == "chunks" and self.truncation_side != "right":
            logger.warning("`truncation_side` (--truncation-side %s) is ignored: --long chunks reads all of a "
                           "document.", self.truncation_side)
        if self.long == "truncate" and self.stride:
            logger.warning("`stride` (--stride %d) is ignored: it applies to --long chunks only.", self.stride)
        if self.long == "truncate" and self.aggregation != "mean":
            logger.warning("`aggregation` (--aggregation %s) is ignored: it applies to --long chunks only.",
                           self.aggregation)


__all__ = ["AGGREGATIONS", "BACKENDS", "DTYPE_NAMES", "LONG", "ReadSettings", "TRUNCATION_SIDES"]
