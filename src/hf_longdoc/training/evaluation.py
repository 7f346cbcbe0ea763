"""Score a saved model on labelled documents: `hf-longdoc evaluate` and `evaluate_model`, with the split `train` drew
(`documents_to_score`, `split_seed_of`). The model is opened as `predict` opens it (`inference.reader.SavedModel`) and
read as every other path reads it (`hf_longdoc.inference.reading`: its reading length, and its multi-label threshold
and decision rule, handed to the metrics as decisions).

Nothing heavy is imported at the top: `hf-longdoc evaluate --help` builds its flags from `EvaluateSettings` at once,
and the functions import datasets, Transformers and the model code when they run.
"""

import json
import logging
import os
import tempfile
from dataclasses import dataclass

from ..utils.parsing import option, settings_of
from ..utils.rules import DEFAULT_THRESHOLD, MAX_LENGTH, POSITIVE_INTEGER, SEED, THRESHOLD

logger = logging.getLogger(__name__)
EVIDENCE = ("start", "middle", "end", "anywhere")  # where the built-in task's evidence sits (`train --evidence`)


def documents_to_score(model_dir, config, dataset=None, text_column="text", label_column="label", split=None,
                       seed=None, evidence="end"):
    """(split name, its documents, multi-label) that `evaluate_model` scores the model saved in `model_dir` (with
    `config`) on: a whole `dataset` (split None), else `split` (default test) as `train` drew it, with the seed it
    recorded. A ValueError names a split or labels that do not fit the model."""
    from ..data import BUILTIN_TASK, load_for_evaluation, load_task
    from ..inference.reading import is_multi_label

    task = {}
    if split is not None or dataset in (None, BUILTIN_TASK):  # a split as `train` drew it
        seed, task = split_seed_of(model_dir, seed)
    known = [config.id2label[i] for i in range(config.num_labels)]
    multi_label = is_multi_label(config)
    if dataset not in (None, BUILTIN_TASK) and split is None:
        return "evaluation", load_for_evaluation(dataset, known, multi_label, text_column, label_column), multi_label
    split = split or "test"
    data, label_names, data_multi_label, _ = load_task(dataset, text_column, label_column, seed, evidence,
                                                       task.get("task_size"), task.get("task_words"),
                                                       task.get("kind", "keywords"))
    multi_label = multi_label or data_multi_label
    if split not in data:
        raise ValueError(f"`split` (--split) {split!r} not found; choose one of {', '.join(data)}.")
    if list(label_names) != known:
        if dataset in (None, BUILTIN_TASK):
            raise ValueError(f"No `dataset` (--dataset) was given, so the built-in task's {split} split was read; "
                             f"its labels {list(label_names)} are not the model's {known}: pass --dataset with the "
                             "data the model was trained on.")
        raise ValueError(f"The dataset's labels {label_names} differ from the model's {known}; pass the same "
                         "`--label-column` and dataset the model was trained on, or leave out --split to score "
                         "the whole file.")
    part = data[split]
    return split, part, multi_label


@dataclass(frozen=True)
class EvaluateSettings:
    """How `evaluate_model` (and `hf-longdoc evaluate`) scores a saved model: what its keyword arguments set, each
    field documented once in its `option` (whose help is also its flag's), and checked once before the model is read.
    """

    text_column: str = option("text", "the column holding the document, or several comma-separated (title,text), "
                                      "joined as `train` joins them")
    label_column: str = option("label", "the column with the gold labels: class name/id, or a list of labels "
                                        "(multi-label)")
    split: str | None = option(None, "the split to score, as `train` drew it; None: all of --dataset (a Hub "
                                     "dataset, or a folder that names its splits: its test split), or the built-in "
                                     "task's test split", type=str)
    seed: int | None = option(None, "with --split: the seed the split was drawn with; None: the one `train` "
                                    "recorded with the model (another is refused: its split would hold training "
                                    "documents)", type=SEED.parse)
    evidence: str = option("end", "built-in task only: where the label evidence sits, as `train` made it",
                           choices=EVIDENCE)
    threshold: float | None = option(None, "multi-label decision threshold on sigmoid scores, in (0, 1); None: the "
                                           "one saved with the model (`multi_label_threshold` in its config.json), "
                                           f"else {DEFAULT_THRESHOLD}; a given one overrides it (logged)",
                                     type=THRESHOLD.parse)
    batch_size: int = option(8, "documents per forward pass", type=POSITIVE_INTEGER.parse)
    max_length: int | None = option(None, "the most ids read of a document; None: what the model was trained to "
                                          "read", type=MAX_LENGTH.parse)

    def __post_init__(self):
        if self.threshold is not None:
            THRESHOLD.check(self.threshold, "threshold", "threshold")
        POSITIVE_INTEGER.check(self.batch_size, "batch_size", "batch-size")
        if self.seed is not None:
            SEED.check(self.seed, "seed", "seed")
        if self.max_length is not None:
            MAX_LENGTH.check(self.max_length, "max_length", "max-length")

    @classmethod
    def of(cls, settings=None, **changes):
        """`settings` (None: the defaults) with `changes` to its fields (`evaluate_model`'s keyword arguments), and a
        TypeError naming any unknown one."""
        return settings_of(cls, settings, changes, "evaluate_model()",
                           "`evaluate_model(model_dir, dataset, split='test')`")


def evaluate_model(model_dir, dataset=None, settings=None, **keywords):
    """Metrics of the model saved in `model_dir`, with the number of `documents` scored (and, for a multi-label
    model, the `threshold` it was scored at: `settings.threshold` when given, else the model's, `decision_threshold`).

    A `dataset` is scored whole (every row of a local file; a Hub dataset's test split), its labels matched to the
    model's by name, unless `split` names one: then that split as `train` made it (the same seeded carve-out of the
    file). Without a dataset: `split` (default test) of the built-in task. A split is drawn with the seed `train`
    recorded with the model (`seed` None), so it holds the same documents; another `seed` is refused, since its
    "test" split would hold documents the model trained on. Nothing is written to `model_dir`.

    `settings` is an `EvaluateSettings` (None: the defaults); keyword arguments set its fields instead, or change them
    (`evaluate_model(model_dir, "data.csv", label_column="gold")`)."""
    settings = EvaluateSettings.of(settings, **keywords)
    from datasets import DatasetDict
    from transformers import DataCollatorWithPadding, Trainer

    from ..data import tokenize
    from ..inference.reader import SavedModel
    from ..inference.reading import decision_threshold, reading_length, saved_tokenizer_limit
    from ..inference.settings import ReadSettings
    from ..metrics import compute_metrics_fn
    from .recipe import training_arguments, without_prefix

    model, tokenizer = SavedModel(model_dir, ReadSettings(batch_size=settings.batch_size)).load()  # as predict opens it
    split, part, multi_label = documents_to_score(model_dir, model.config, dataset, settings.text_column,
                                                  settings.label_column, settings.split, settings.seed,
                                                  settings.evidence)
    threshold = decision_threshold(model.config, settings.threshold, multi_label, model_dir)
    # the saved tokenizer's limit: what train read
    max_length = reading_length(model.config, settings.max_length, saved_tokenizer_limit(tokenizer))
    model.config.max_input_length = max_length  # a `max_length` past the trained one is read, not cut in the forward
    encoded = tokenize(DatasetDict({split: part}), tokenizer, max_length)
    with tempfile.TemporaryDirectory() as scratch:  # Trainer needs an output folder; the model's is left alone
        trainer = Trainer(
            model=model,
            args=training_arguments(scratch, batch_size=settings.batch_size,
                                    seed=42 if settings.seed is None else settings.seed),
            data_collator=DataCollatorWithPadding(tokenizer),
            compute_metrics=compute_metrics_fn(multi_label, threshold),
        )
        result = trainer.evaluate(encoded[split], metric_key_prefix=split)
    scored_at = {"threshold": threshold} if multi_label else {}
    return {**without_prefix(result, split), "documents": len(part), **scored_at}


def split_seed_of(model_dir, seed=None):
    """(seed, built-in task sizes): the seed `train` drew the model's splits with and the built-in task's size (its
    metrics.json), with a ValueError when `seed` differs; a model without the record (not saved by `hf-longdoc
    train`, or by an older version) takes `seed` or 42."""
    recorded, task = None, {}
    for name, key in (("metrics.json", "split_seed"), ("training_args.json", "data_seed")):  # what train wrote
        try:
            with open(os.path.join(model_dir, name)) as f:
                record = json.load(f)
            recorded, task = record[key], record.get("task") or {}
            if name != "metrics.json":
                logger.warning("%s has no metrics.json; the split seed %s comes from its %s (a built-in task's size "
                               "is not recorded there: the default size is drawn).", model_dir, recorded, name)
            break
        except (OSError, ValueError, KeyError, TypeError):
            continue
    if recorded is None:
        logger.warning("%s does not record the seed its splits were drawn with; using --seed %s. A split drawn with "
                       "another seed than training used holds documents the model trained on.", model_dir,
                       42 if seed is None else seed)
        return 42 if seed is None else seed, task
    if seed is not None and seed != recorded:
        raise ValueError(f"`seed` (--seed) {seed} differs from the seed {recorded} the model's splits were drawn with "
                         f"(recorded with the model in {model_dir}): that split would score documents the model "
                         "trained on. Leave out --seed, or leave out --split to score a whole held-out file.")
    return recorded, task


__all__ = ["EvaluateSettings", "documents_to_score", "evaluate_model", "split_seed_of"]
