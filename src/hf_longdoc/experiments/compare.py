"""`hf-longdoc compare`: every method and the Transformers baselines trained with the same budget on the same data.

Each model is trained from scratch for the same epochs with the same seed and batch size, at one width and depth
(`hidden_size`, `num_layers`, `num_heads`, mapped onto each family's own config by its `from_size`), and evaluated on
the same test split: accuracy, macro-F1, micro-F1, parameters, training time, inference documents/s and peak memory
(training and inference). Robustness: the same trained model on a sentence-inverted copy of the test split, and the
model trained and tested on the built-in task with its evidence at the start, middle or end of long documents (by
default on the built-in task only; with a `dataset`, when `evidence` names positions). Several seeds give mean ± std.
Each row records the epochs and optimizer steps that ran and the batch per process and per optimizer step; a run a
`time_budget` cut short is marked in `results.csv` (`cut_by_time_budget`) and the report. A run whose predictions on
the validation split are (nearly) one class is marked collapsed (`collapse.collapse_check`) in `results.csv` and the
report, and its scores are left out of the means (the summary counts healthy and collapsed seeds). Outputs:
`report.md`, `results.csv` (one row per model and seed), `summary.csv`, and PNG plots (accuracy against inference
speed; time and memory against document length from `hf-longdoc bench`).

Models are families (`contextualizer`, `slstm`, `elementwise`, ...) or `family:variant` (`sparse_longformer:pmi`,
`segment_lm:rnn`: see each family's registry `variants`). Baselines: `bert-<N>`, a BERT that reads the first N tokens;
`bert-<N>-headtail`, the same BERT reading the first 128 and the last N - 130 tokens; `longformer`, Transformers'
Longformer of the same size, all on the same WordPiece tokenizer; and `tfidf`, TF-IDF + logistic regression over the
full text.

With a pretrained `backbone` (a folder or Hub id), nothing is trained from scratch: every family that can wraps the
backbone (its registry `from_backbone`), `bert-N` and `bert-N-headtail` fine-tune the backbone itself, and all read the
backbone's tokenizer; the size settings then do not apply, and unless `epochs` is set each family trains its `train`
recipe's epochs (the baselines COMPARE_EPOCHS, at CHECKPOINT_RATE with the head at CHECKPOINT_HEAD_RATE).
"""

import logging
import os
import statistics
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field

from datasets import DatasetDict
from transformers import (
    AutoConfig,
    AutoModelForSequenceClassification,
    set_seed,
)

from ..data import (
    BUILTIN_TASK,
    fit_wordpiece_tokenizer,
    invert_sentences,
    load_task,
    load_tokenizer,
    make_long_document_task,
    tokenize,
)
from ..inference.reading import reading_length
from ..metrics import prediction_logits
from ..modeling import Family, resolve
from ..saving.run_folder import check_files_free, record_outputs, require_writable_folder
from ..training.head_fitting import FitPlan, HeadStage, new_parameter_names
from ..training.recipe import (
    TimeBudget,
    batch_sizes,
    build_model,
    fit_model,
    fit_statistics,
    label_settings,
    training_arguments,
    wrap_backbone,
)
from ..training.settings import COMPARE_DECIDES, COMPARE_RECIPE, check_backbone, check_backbone_folder, recipe_epochs
from ..utils.distributed import is_main_process, on_main_then_share, wait_for_everyone
from ..utils.parsing import settings_text
from .baselines import (
    BASELINES,
    CHECKPOINT_HEAD_RATE,
    CHECKPOINT_RATE,
    ChunkMeanClassifier,
    baseline_tokenizer,
    build_baseline,
    fewest_tokens,
    parse_baseline,
    tfidf_classifier,
    too_few_tokens,
)
from .bench import run_bench
from .bench_models import check_models
from .collapse import COST_COLUMNS, collapse_check
from .measure import PeakMemory
from .report import COMPARE_OUTPUTS, write_compare_report, write_csv
from .settings import COMPARE_EPOCHS, SCRATCH_RATE, CompareSettings

logger = logging.getLogger(__name__)

METRICS = ("accuracy", "macro_f1", "micro_f1")
TFIDF = "tfidf"  # the bag-of-words baseline: TF-IDF + logistic regression over the full text
# baselines of a pretrained `--backbone` only: the checkpoint through its own AutoModelForSequenceClassification at all
# its positions, and the checkpoint over every chunk of the document with the logits averaged
NATIVE, CHUNKS = "native", "bert-chunks"
CHUNK_TOKENS = 512  # `bert-chunks` reads chunks of 512 tokens (fewer when the checkpoint has fewer positions)
DEFAULT_POSITIONS = 512  # what `native` reads of a checkpoint that declares no positions (nor its tokenizer a limit)


@dataclass
class ModelSpec:
    """One entry of a comparison: a family (`slstm`, `sparse_longformer:pmi`) or a baseline (`bert-512`, `tfidf`,
    ...). Each kind of entry says how it is checked, built and measured, so the run never asks which kind it holds;
    a new baseline is one more entry."""

    name: str  # as given
    family: Family | None = None  # the family of a model entry; None for a baseline
    setting: dict = field(default_factory=dict)  # the variant as config settings
    head: int | None = None  # tokens kept from the start when the document is read head + tail; None: the first ones

    def override_targets(self):
        """The `--config MODEL.KEY=VALUE` targets that reach this entry (baselines take no overrides)."""
        return ()

    def check(self, settings, positions=None):
        """A ValueError, before any training, when this entry cannot run with `settings` (`positions`: the
        backbone's, when there is one)."""

    def build(self, settings, task):
        """(model, tokenizer, tokens read, learning rate) at the compare budget, or around `settings.backbone`."""
        raise NotImplementedError

    def bench_name(self):
        """The name `hf-longdoc bench` measures this entry under (None: not measured there)."""
        return None

    def head_learning_rate(self, settings):
        """The rate of the parameters the backbone does not supply: `settings.head_learning_rate` (None: the
        entry's learning rate)."""
        return settings.head_learning_rate

    def epochs(self, settings):
        """The epochs this entry trains: `settings.epochs`, or when that is None COMPARE_EPOCHS."""
        return settings.epochs if settings.epochs is not None else COMPARE_EPOCHS

    def fit_statistics(self, model, train_input_ids, tokenizer):
        """Fit what the model computes from the training documents before training (nothing, unless a family)."""

    def measure(self, task, settings, seed, output_dir):
        """Train on the task's train split and return the row of measurements on its test split."""
        return train_and_measure(self, task, settings, seed, output_dir)


@dataclass
class FamilySpec(ModelSpec):
    """A family of the package, sized by the budget's `from_size` or around the backbone."""

    def override_targets(self):
        return (self.name, self.family.name)

    def check(self, settings, positions=None):
        if settings.backbone is None:  # every config built once: a bad size or override fails in seconds
            self.family.build_config(settings.size(), **self.setting, **overrides_of(self, settings))
            return
        check_backbone(self.family, settings.backbone)
        self.family.check_settings({**self.setting, **overrides_of(self, settings)})

    def build(self, settings, task):
        family, labels = self.family, task.label_names
        # a family with its own tokenizer (elementwise bytes) reads its config's full length; the others the budget's
        requested = None if family.has_own_tokenizer else settings.max_length
        if settings.backbone is not None:  # checked once, by `check_specs`
            overrides = {**settings.backbone_settings(family), **self.setting, **overrides_of(self, settings)}
            model, tokenizer = wrap_backbone(family, settings.backbone, labels, False, overrides, requested,
                                             None if requested is None else task.tokenizer)
            rate = settings.learning_rate or family.fine_tuning_rate
        else:
            size, tokenizer = settings.size(), task.tokenizer
            overrides = {**self.setting, **overrides_of(self, settings)}
            if requested is None:  # the family's tokenizer for the sized config
                tokenizer = family.tokenizer_for(family.build_config(size, **overrides), None)
            model = build_model(family, tokenizer, labels, False, overrides, size=size)
            rate = settings.learning_rate or family.learning_rate
        return model, tokenizer, reading_length(model.config, requested), rate

    def bench_name(self):
        return self.name

    def epochs(self, settings):
        """With a backbone and no `settings.epochs`, the family's `train` recipe (`recipe_epochs`)."""
        if settings.epochs is None and settings.backbone is not None:
            return recipe_epochs(self.family, True)
        return super().epochs(settings)

    def fit_statistics(self, model, train_input_ids, tokenizer):
        fit_statistics(self.family, model, train_input_ids, tokenizer)


@dataclass
class TransformersBaseline(ModelSpec):
    """Transformers' own model of the budget's size (`bert-N`, `bert-N-headtail`, `albert-N`, `canine-N`,
    `longformer`, `bigbird`) on the task's tokenizer; with a backbone, `bert-N` is the checkpoint itself reading N
    tokens (`bert-N-headtail`: the first 128 and the last N - 130)."""

    kind: str = "bert"  # a key of `BASELINES`
    truncation: int | None = None  # tokens read; None: the whole budget

    def check(self, settings, positions=None):
        if settings.backbone is None:
            return
        if not BASELINES[self.kind].from_checkpoint:
            pretrained = ", ".join(f"{kind}-N and {kind}-N-headtail" for kind in checkpoint_kinds())
            raise ValueError(f"The `{self.name}` baseline is trained from scratch; with `--backbone` the pretrained "
                             f"baselines are {pretrained} (the backbone itself), and "
                             "`sparse_longformer:cls` is the backbone converted to a Longformer.")
        if self.truncation is not None and positions is not None and self.truncation > positions:
            raise ValueError(f"{self.name} reads {self.truncation} tokens but the backbone has {positions} "
                             f"positions; use bert-{positions}.")

    def build(self, settings, task):
        if settings.backbone is not None:
            rate = settings.learning_rate or CHECKPOINT_RATE
            return checkpoint_classifier(settings, task), task.tokenizer, self.truncation, rate
        labels = label_settings(task.label_names, False)
        max_length = self.truncation or settings.max_length
        tokenizer = baseline_tokenizer(self.kind, max_length, task.tokenizer)
        ids = dict(bos_token_id=tokenizer.cls_token_id, eos_token_id=tokenizer.sep_token_id,
                   cls_token_id=tokenizer.cls_token_id, sep_token_id=tokenizer.sep_token_id) \
            if self.truncation is None else {}
        model = build_baseline(self.kind, settings.hidden_size, settings.num_layers, settings.num_heads, max_length,
                               attention_window=settings.window, vocab_size=len(tokenizer),
                               pad_token_id=tokenizer.pad_token_id, **labels, **ids)
        return model, tokenizer, max_length, settings.learning_rate or 1e-4

    def bench_name(self):
        return self.kind

    def head_learning_rate(self, settings):
        return checkpoint_head_rate(settings) if settings.backbone is not None else settings.head_learning_rate


@dataclass
class CheckpointBaseline(ModelSpec):
    """A baseline only a pretrained `--backbone` has."""

    def check(self, settings, positions=None):
        if settings.backbone is None:
            raise ValueError(f"The {self.name} baseline fine-tunes a pretrained checkpoint; pass --backbone.")

    def head_learning_rate(self, settings):
        return checkpoint_head_rate(settings)

    def checkpoint(self, settings, task):
        """The backbone through its own classifier, and the most tokens it reads that way."""
        model = checkpoint_classifier(settings, task)
        # the tokenizer's limit as saved with the checkpoint (RoBERTa's 514 positions hold 512 tokens)
        native = reading_length(model.config, tokenizer_limit=task.tokenizer.model_max_length)
        return model, native or DEFAULT_POSITIONS


class NativeBaseline(CheckpointBaseline):
    """`native`: the checkpoint through its own `AutoModelForSequenceClassification` at all its positions (8,192
    tokens for ModernBERT, 512 for MiniLM)."""

    def build(self, settings, task):
        model, native = self.checkpoint(settings, task)
        return model, task.tokenizer, native, settings.learning_rate or CHECKPOINT_RATE


class ChunksBaseline(CheckpointBaseline):
    """`bert-chunks`: the checkpoint over every chunk of `CHUNK_TOKENS` tokens of the document, its logits averaged
    (every chunk trained through)."""

    def build(self, settings, task):
        model, native = self.checkpoint(settings, task)
        chunk, tokenizer = min(CHUNK_TOKENS, native), task.tokenizer
        chunks = -(-(settings.max_length - 2) // (chunk - 2))
        model = ChunkMeanClassifier(model, chunks, chunk, tokenizer.cls_token_id, tokenizer.sep_token_id,
                                    tokenizer.pad_token_id)
        return model, tokenizer, settings.max_length, settings.learning_rate or CHECKPOINT_RATE


class TfidfBaseline(ModelSpec):
    """`tfidf`: TF-IDF + logistic regression over the full text; nothing neural is trained."""

    def measure(self, task, settings, seed, output_dir):
        return tfidf_row(self, task, seed)


# the baselines named as they are; `bert-N`-style names are parsed into a `TransformersBaseline`
NAMED_BASELINES = {TFIDF: TfidfBaseline, NATIVE: NativeBaseline, CHUNKS: ChunksBaseline}


def whole_document_baselines():
    """Transformers' models `compare` trains from scratch over the whole document (no `-<N>` cut)."""
    return [kind for kind, baseline in BASELINES.items() if not baseline.truncating and baseline.in_compare]


def checkpoint_kinds():
    """The `BASELINES` whose `name-N` is the pretrained checkpoint itself with `compare --backbone`."""
    return [kind for kind, baseline in BASELINES.items() if baseline.from_checkpoint]


def baseline_names():
    """Every `--baselines` name, for the CLI help and the error of an unknown one."""
    whole = ", ".join(f"`{kind}`" for kind in whole_document_baselines())
    truncating = [kind for kind, baseline in BASELINES.items() if baseline.truncating and baseline.in_compare]
    first = truncating[0]
    return (f"`{first}-<N>` (reading the first N tokens, N at least {fewest_tokens()}, e.g. {first}-512), "
            f"`{first}-<N>-headtail` (the first 128 and the last N - 130 tokens, N at least "
            f"{fewest_tokens('headtail')}), and so for every kind that truncates: "
            f"{', '.join(f'`{kind}-<N>`' for kind in truncating)}; the whole document from scratch: {whole}; "
            f"`{TFIDF}` (TF-IDF + logistic regression on the "
            f"full text); with --backbone, `{NATIVE}` (the checkpoint at all its positions) and `{CHUNKS}` (its "
            "logits averaged over 512-token chunks)")


def parse_models(models, baselines):
    """`ModelSpec`s from the comma-separated names, with a ValueError naming any unknown or repeated one."""
    for given, flag in ((models, "models"), (baselines, "baselines")):
        if repeated := [name for name, count in Counter(given).items() if count > 1]:
            raise ValueError(f"`{flag}` (--{flag}) names {', '.join(map(repr, repeated))} more than once; each model "
                             "trains once per seed, so name it once (--seeds runs more seeds).")
    specs = []
    for name in models:
        family, setting = resolve(name)  # raises for an unknown family or variant
        specs.append(FamilySpec(name, family, setting))
    for name in baselines:
        if name in NAMED_BASELINES:
            specs.append(NAMED_BASELINES[name](name))
            continue
        if (refusal := too_few_tokens(name)) is not None:
            raise ValueError(f"`baselines` (--baselines): {refusal}")
        parsed = parse_baseline(name)
        if parsed is None or not BASELINES[parsed.kind].in_compare or \
                BASELINES[parsed.kind].truncating != (parsed.tokens is not None):
            raise ValueError(f"Unknown baseline {name!r}; use {baseline_names()}.")
        specs.append(TransformersBaseline(name, head=parsed.head, kind=parsed.kind, truncation=parsed.tokens))
    if not specs:
        raise ValueError("Give at least one model in `--models` or `--baselines`.")
    return specs


def overrides_of(spec, settings):
    """The `config_overrides` that apply to `spec`: those given for its family, then those for its exact name."""
    overrides = settings.config_overrides
    return {key: value for target in reversed(spec.override_targets()) for key, value in overrides.get(target,
                                                                                                      {}).items()}


def check_specs(specs, settings):
    """Every entry checked before any training, so a bad size or override fails in seconds, not after hours; an
    override for a model that is not in the run (or a baseline) is an error too."""
    targets = {name for spec in specs for name in spec.override_targets()}
    if unknown := sorted(set(settings.config_overrides) - targets):
        raise ValueError(f"`--config` names {', '.join(unknown)}, which is not a model of this run (models: "
                         f"{', '.join(sorted(targets)) or 'none'}; baselines take no overrides).")
    positions = None
    if settings.backbone is not None:
        check_backbone_folder(settings.backbone)
        positions = getattr(AutoConfig.from_pretrained(settings.backbone), "max_position_embeddings", None)
    for spec in specs:
        spec.check(settings, positions)


@dataclass
class Task:
    """One labelled dataset of the comparison, its WordPiece tokenizer, and its tokenized splits per length (most
    models share the tokenizer and length, so each dataset is tokenized once per length, not once per model)."""

    data: DatasetDict
    label_names: list
    tokenizer: object
    inverted: bool = True  # whether models are also tested on the sentence-inverted test split
    encoded: dict = field(default_factory=dict)  # max_length -> tokenized train / test (/ inverted test)

    @classmethod
    def fit(cls, data, label_names, settings, inverted=True):
        """The task with the backbone's tokenizer, or a WordPiece tokenizer fitted on its train split."""
        if settings.backbone is not None:
            tokenizer = load_tokenizer(settings.backbone, "`backbone` (--backbone)",
                                       "save the backbone's tokenizer there with `tokenizer.save_pretrained`")
        else:
            # fitted on the main process only: under torchrun two fits of the same texts differed (`training`)
            tokenizer = on_main_then_share(lambda: fit_wordpiece_tokenizer(
                data["train"]["text"], vocab_size=settings.vocab_size, model_max_length=settings.max_length))
        return cls(data, label_names, tokenizer, inverted)

    def test_texts(self):
        """The test texts and, if `inverted`, their sentence-inverted copies (None otherwise)."""
        texts = self.data["test"]["text"]
        return texts, [invert_sentences(text) for text in texts] if self.inverted else None

    def splits(self, tokenizer, max_length, head=None):
        """Train, test and (if `inverted`) the sentence-inverted test split, tokenized (`head`: head + tail)."""
        key = (max_length, head)
        if tokenizer is self.tokenizer and key in self.encoded:
            return self.encoded[key]
        splits = DatasetDict(train=self.data["train"], validation=self.data["validation"], test=self.data["test"])
        if self.inverted:
            splits["inverted"] = self.data["test"].map(lambda example: {"text": invert_sentences(example["text"])})
        encoded = tokenize(splits, tokenizer, max_length, head)
        if tokenizer is self.tokenizer:
            self.encoded[key] = encoded
        return encoded


def checkpoint_classifier(settings, task):
    """The pretrained backbone through its own `AutoModelForSequenceClassification`, with a new head for the labels."""
    return AutoModelForSequenceClassification.from_pretrained(settings.backbone,
                                                              **label_settings(task.label_names, False))


def checkpoint_head_rate(settings):
    """The head's rate of a baseline fine-tuning the checkpoint: --head-learning-rate, else CHECKPOINT_HEAD_RATE when
    no --learning-rate is given either (a given rate alone is every parameter's, as for the families)."""
    if settings.head_learning_rate is not None or settings.learning_rate is not None:
        return settings.head_learning_rate
    return CHECKPOINT_HEAD_RATE


def tfidf_row(spec, task, seed):
    """The row of the TF-IDF + logistic-regression baseline: fitted on the full train texts, scored on the test."""
    from sklearn.metrics import accuracy_score, f1_score

    start = time.perf_counter()
    classifier = tfidf_classifier(task.data["train"]["text"], task.data["train"]["label"])
    train_seconds = time.perf_counter() - start
    texts, inverted = task.test_texts()
    truth = task.data["test"]["label"]
    start = time.perf_counter()
    predicted = classifier.predict(texts)
    inference_seconds = time.perf_counter() - start
    row = {"model": spec.name, "seed": seed, "parameters": classifier[-1].coef_.size,
           "accuracy": accuracy_score(truth, predicted), "macro_f1": f1_score(truth, predicted, average="macro"),
           "micro_f1": f1_score(truth, predicted, average="micro"), "train_seconds": train_seconds,
           "inference_docs_per_s": len(texts) / max(inference_seconds, 1e-9), "max_tokens": None}
    if inverted is not None:
        row["inverted_accuracy"] = accuracy_score(truth, classifier.predict(inverted))
    validation = task.data["validation"]
    row.update(collapse_check(classifier.predict(validation["text"]), validation["label"]))
    return row


def head_stage(spec, settings):
    """The `HeadStage` of `spec` in this run (`--head-epochs` applies to the families that cache frozen features)."""
    cacheable = spec.family is not None and spec.family.has_frozen_features
    return HeadStage.resolve(spec.family, settings.backbone is not None, settings.freeze_backbone,
                             settings.head_epochs if cacheable else None)


def train_and_measure(spec, task, settings, seed, output_dir):
    """Train `spec` on the task's train split with the compare budget; returns its row of measurements on the test
    split (and its inverted copy)."""
    set_seed(seed)
    model, tokenizer, max_length, learning_rate = spec.build(settings, task)
    encoded = task.splits(tokenizer, max_length, spec.head)
    spec.fit_statistics(model, encoded["train"]["input_ids"], tokenizer)
    head = new_parameter_names(model, spec.family) if settings.backbone is not None else ()
    epochs = spec.epochs(settings)
    args = compare_arguments(settings, output_dir, epochs, learning_rate, seed, quiet=True)  # checked by `compare`
    device = args.device
    with PeakMemory(device) as training_memory:  # the head stage and fine-tuning alike
        start = time.perf_counter()
        # the time budget: each model's training from its start
        budget = TimeBudget(settings.time_budget, time.monotonic()) if settings.time_budget is not None else None
        plan = FitPlan(args, head_stage(spec, settings), spec.family, tuple(head), spec.head_learning_rate(settings),
                       deadline=budget.deadline if budget else None)
        trainer, head_report, validation = fit_model(model, plan, encoded, tokenizer,
                                                     callbacks=[budget] if budget else [])
        train_seconds = time.perf_counter() - start
    with PeakMemory(device) as inference_memory:
        start = time.perf_counter()
        test = trainer.predict(encoded["test"]).metrics
        inference_seconds = time.perf_counter() - start
    row = {"model": spec.name, "seed": seed, **what_ran(trainer, plan, head_report, budget, epochs),
           "parameters": sum(p.numel() for p in model.parameters()),
           **{name: test[f"test_{name}"] for name in METRICS},
           "train_seconds": train_seconds, "inference_docs_per_s": len(encoded["test"]) / inference_seconds,
           "train_peak_mib": training_memory.peak / 2**20,
           "inference_peak_mib": inference_memory.peak / 2**20,
           "max_tokens": max_length}
    if "inverted" in encoded:
        row["inverted_accuracy"] = trainer.predict(encoded["inverted"]).metrics["test_accuracy"]
    row.update(validation_check(trainer, encoded["validation"], validation))
    return row


def compare_arguments(settings, output_dir, epochs, learning_rate, seed, quiet=False):
    """The `TrainingArguments` a model of the comparison trains with: `compare`'s recipe (`COMPARE_RECIPE`: no
    evaluation or checkpoint during training, what it decides refused with `COMPARE_DECIDES`' reasons) and the user's
    fields. `compare` builds them once before reading any data, so that a value Transformers (or
    `check_trainer_arguments`) refuses stops it at once; each model's build is then `quiet`."""
    return training_arguments(output_dir, epochs, settings.batch_size, learning_rate, seed, decides=COMPARE_DECIDES,
                              quiet=quiet, **COMPARE_RECIPE, **settings.trainer_arguments())


def what_ran(trainer, plan, head_report, budget, planned_epochs):
    """The row's record of the training that ran: `epochs` (fine-tuning's, from Trainer's state: 0.14 when a time
    budget cut it there; the head stage's when only the head trained), `planned_epochs`, `steps` (optimizer steps),
    `cut_by_time_budget`, and the batch per process and per optimizer step (per process x processes x gradient
    accumulation: under torchrun each process reads `batch_size` documents a step); `readout`, the head the head
    stage chose over its folds, where it chose one."""
    state, args = trainer.state, plan.args
    if plan.stage.trains_end_to_end:
        epochs, steps = round(state.epoch or 0.0, 4), state.global_step
        cut = budget is not None and budget.stopped_at_step is not None and state.global_step < state.max_steps
    else:  # only the head trained, on cached features, for its stage's epochs
        epochs, steps = head_report["epochs_run"], 0
        cut = (budget is not None and head_report["epochs_run"] < plan.stage.epochs
               and time.monotonic() >= budget.deadline)
    batch = batch_sizes(args)
    ran = {"epochs": epochs, "planned_epochs": planned_epochs, "steps": steps, "cut_by_time_budget": bool(cut),
           "batch_per_process": batch["per_process"], "processes": batch["processes"],
           "gradient_accumulation": batch["gradient_accumulation"], "batch_per_step": batch["per_optimizer_step"]}
    if head_report and "readout" in head_report:  # the head the stage chose over its folds (`variant_candidates`)
        ran["readout"] = settings_text(head_report["readout"])
    return ran


def validation_check(trainer, validation, output=None):
    """`collapse_check` of the trained model's predictions on the validation split (a tokenized dataset); `output`:
    the model's `PredictionOutput` on it where `fit_model` already made it."""
    if output is None:
        output = trainer.predict(validation, metric_key_prefix="validation")
    return collapse_check(prediction_logits(output.predictions).argmax(-1), output.label_ids)


def builtin_task(position, seed, task_size, task_words, settings, inverted=True):
    """The built-in task at the compare's size, with its evidence at `position`."""
    data = make_long_document_task(evidence=position, seed=seed, train_size=task_size, validation_size=20,
                                   test_size=max(task_size // 2, 40), min_words=task_words[0],
                                   max_words=task_words[1])
    return Task.fit(data, data["train"].features["label"].names, settings, inverted)


def compare(settings=None, progress=print, **changes):
    """Run the comparison `settings` (a `CompareSettings`) describes; writes the report, CSVs and plots into its
    `output_dir` and returns the per-seed rows. Keyword arguments instead (or as well) set its fields
    (`compare(models=["slstm"], baselines=["tfidf"])`). `progress` receives a line per trained model.

    It runs seeds `first_seed` ... `first_seed + seeds - 1` (a later `first_seed` adds seeds to an earlier run's).
    Each seed draws the data (a file's train/validation/test split; the built-in task's documents) with that seed,
    unless `split_seed` fixes them: then every seed trains on the same split and only the training draws differ.
    A file of `COMPARE_OUTPUTS` already in `output_dir` that hf-longdoc did not write is refused before any training,
    unless `overwrite`; nothing else there is touched (each model trains in a temporary folder)."""
    settings = CompareSettings.of(settings, **changes)
    specs = parse_models(list(settings.models), list(settings.baselines))
    settings.check()
    check_specs(specs, settings)
    for spec in specs:
        head_stage(spec, settings)  # a frozen backbone or head epochs that cannot apply fail now
    # every TrainingArguments value checked now (building them writes nothing; each model trains in a scratch folder)
    compare_arguments(settings, settings.output_dir, settings.epochs or COMPARE_EPOCHS,
                      settings.learning_rate or SCRATCH_RATE, settings.first_seed)
    output_dir, bench_lengths = settings.output_dir, settings.bench_lengths
    require_writable_folder(output_dir, "`output_dir` (--output-dir)")
    check_files_free([os.path.join(output_dir, name) for name in COMPARE_OUTPUTS], settings.overwrite,
                     "--overwrite (overwrite=True)")
    if settings.backbone is not None and bench_lengths:
        logger.info("Skipping the time/memory bench: it measures random models of the compare size, not the "
                    "pretrained backbone.")
        bench_lengths = ()
    bench_models = list(dict.fromkeys(spec.bench_name() for spec in specs if spec.bench_name() is not None))
    bench_sizes = dict(hidden_size=settings.hidden_size, num_layers=settings.num_layers, num_heads=settings.num_heads,
                       window=settings.window, segment_length=settings.segment_length)
    bench_overrides = {spec.bench_name(): overrides_of(spec, settings) for spec in specs if spec.bench_name()}
    if bench_lengths:
        check_models(bench_models, tuple(bench_lengths), bench_overrides, **bench_sizes)
    rows = []
    first_seed, seeds, split_seed = settings.first_seed, settings.seeds, settings.split_seed
    task_size, task_words = settings.task_size, settings.task_words
    for seed in range(first_seed, first_seed + seeds):
        data_seed = seed if split_seed is None else split_seed
        if settings.dataset in (None, BUILTIN_TASK):  # the built-in task at --task-size, evidence anywhere
            task = builtin_task("anywhere", data_seed, task_size, task_words, settings)
            dataset_name = f"built-in long-document task ({task_size} training documents)"
        else:
            data, label_names, multi_label, dataset_name = load_task(settings.dataset, settings.text_column,
                                                                     settings.label_column, data_seed)
            if multi_label:
                raise ValueError("`compare` reports single-label accuracy; pass a single-label dataset.")
            task = Task.fit(data, label_names, settings)
        evidence_tasks = {position: builtin_task(position, data_seed, task_size, task_words, settings,
                                                 inverted=False)
                          for position in settings.evidence_positions()}
        for spec in specs:
            with tempfile.TemporaryDirectory(prefix="hf-longdoc-compare-") as scratch:  # Trainer's output folder
                row = spec.measure(task, settings, seed, scratch)
                for position, evidence_task in evidence_tasks.items():
                    row[f"evidence_{position}"] = spec.measure(evidence_task, settings, seed, scratch)["accuracy"]
            rows.append(row)
            if is_main_process():  # under torchrun every process trains and measures alike; one writes
                results = os.path.join(output_dir, "results.csv")
                write_csv(results, rows)  # an interrupted run keeps what it measured
                record_outputs([results])
                progress(f"seed {seed} {spec.name:>24}: accuracy {row['accuracy']:.3f}, inverted "
                         f"{row['inverted_accuracy']:.3f}, {row['parameters'] / 1e6:.2f}M parameters, trained in "
                         f"{row['train_seconds']:.0f} s, {row['inference_docs_per_s']:.1f} docs/s"
                         + "".join(f", evidence {p} {row[f'evidence_{p}']:.3f}" for p in evidence_tasks)
                         + (f"; COLLAPSED: one class for {row['validation_top_share']:.0%} of validation, left out "
                            "of the means" if row.get("collapsed") else "")
                         + (f"; CUT by the time budget after {row['steps']} optimizer step(s) ({row['epochs']:g} of "
                            f"{row['planned_epochs']:g} epochs)" if row.get("cut_by_time_budget") else ""))
    summary = summarize(rows)
    bench_rows = []
    if not is_main_process():  # the main process benches and writes the report; the others wait for it
        wait_for_everyone()
        return rows
    if bench_lengths:
        bench_rows = run_bench(models=bench_models, lengths=tuple(bench_lengths), repeats=3, roofline=False,
                               num_global=max(1, settings.max_length // 32), progress=progress,
                               config_overrides=bench_overrides, **bench_sizes)
    seed_text = (f"seed {first_seed}" if seeds == 1
                 else f"mean ± std over seeds {first_seed}-{first_seed + seeds - 1}")
    seed_text += (", each drawing its own split" if split_seed is None and seeds > 1
                  else f", on the split drawn with seed {split_seed}" if split_seed is not None else "")
    write_compare_report(rows, summary, bench_rows, settings, dataset_name, seed_text, output_dir)
    wait_for_everyone()
    return rows


def summarize(rows):
    """Mean and standard deviation (over seeds) of every measured column, per model, in the order first seen, with
    the number of `healthy` and `collapsed` seeds (`collapse.collapse_check`) and of those a time budget `cut`.
    Scores are averaged over the healthy seeds only, never with a collapsed run; costs (`COST_COLUMNS`: time, memory,
    size) over every seed. A model whose every seed collapsed keeps the mean of its collapsed runs, and `healthy` 0
    says so."""
    summary = []
    for name in dict.fromkeys(row["model"] for row in rows):
        group = [row for row in rows if row["model"] == name]
        healthy = [row for row in group if not row.get("collapsed")]
        entry = {"model": name, "seeds": len(group), "healthy": len(healthy), "collapsed": len(group) - len(healthy),
                 "cut": sum(bool(row.get("cut_by_time_budget")) for row in group)}
        for key, value in group[0].items():
            if key in ("model", "seed") or isinstance(value, bool) or not isinstance(value, (int, float)):
                continue
            values = [row[key] for row in (group if key in COST_COLUMNS or not healthy else healthy)]
            entry[key] = statistics.fmean(values)
            entry[key + "_std"] = statistics.stdev(values) if len(values) > 1 else 0.0
        if "inverted_accuracy" in entry:
            entry["inverted_drop"] = entry["accuracy"] - entry["inverted_accuracy"]
        summary.append(entry)
    return summary


__all__ = ["baseline_names", "compare", "parse_models", "summarize"]
