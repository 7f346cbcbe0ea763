"""`hf-longdoc compare`: every method and the Transformers baselines trained with the same budget on the same data.

Each model is trained from scratch for the same epochs with the same seed and batch size, at one width and depth
(`hidden_size`, `num_layers`, `num_heads`, mapped onto each family's own config by its `from_size`), and evaluated on
the same test split: accuracy, macro-F1, micro-F1, parameters, training time, inference documents/s and peak memory
(training and inference). Robustness: the same trained model on a sentence-inverted copy of the test split, and the
model trained and tested on the built-in task with its evidence at the start, middle or end of long documents. Several
seeds give mean ± std. Outputs: `report.md`, `results.csv` (one row per model and seed), `summary.csv`, and PNG plots
(accuracy against inference speed; time and memory against document length from `hf-longdoc bench`).

Models are families (`contextualizer`, `slstm`, `elementwise`, ...) or `family:variant` (`sparse_longformer:pmi`,
`segment_lm:rnn`: see each family's registry `variants`). Baselines: `bert-<N>`, a BERT that reads the first N tokens,
and `longformer`, Transformers' Longformer of the same size, both on the same WordPiece tokenizer.
"""

import logging
import os
import statistics
import time
from dataclasses import dataclass, field

from datasets import DatasetDict
from transformers import DataCollatorWithPadding, Trainer, set_seed

from ..data import BUILTIN_TASK, fit_wordpiece_tokenizer, invert_sentences, load_task, make_long_document_task, tokenize
from ..metrics import compute_metrics_fn
from ..modeling import Family, resolve
from ..training import build_model, fit_statistics, training_arguments
from .baselines import build_baseline, parse_baseline
from .bench import check_models, run_bench
from .measure import PeakMemory
from .report import write_compare_report, write_csv

logger = logging.getLogger(__name__)

METRICS = ("accuracy", "macro_f1", "micro_f1")
EVIDENCE_POSITIONS = ("start", "middle", "end")
FIRST_SEED = 42  # `--seeds n` runs seeds FIRST_SEED ... FIRST_SEED + n - 1


@dataclass
class CompareSettings:
    """The budget every model gets."""

    hidden_size: int = 128
    num_layers: int = 2
    num_heads: int = 4
    max_length: int = 1024  # tokens read per document (a `bert-N` baseline reads N)
    epochs: float = 3
    batch_size: int = 8
    # one rate for every model: from scratch with a few epochs, 1e-4 leaves BERT-512 at chance on BBC news (0.238
    # after 2 epochs) where 1e-3 reaches 0.929; None: each family's `hf-longdoc train` default (baselines 1e-4)
    learning_rate: float | None = 1e-3
    vocab_size: int = 8000
    window: int = 128  # Longformer-type models: attention window
    segment_length: int = 128  # segment LMs: tokens per segment
    config_overrides: dict = field(default_factory=dict)  # model name -> config kwargs

    def size(self, max_length=None):
        """The `from_size` arguments of this budget (each family takes the ones that apply to it)."""
        return dict(hidden_size=self.hidden_size, num_layers=self.num_layers, num_heads=self.num_heads,
                    max_length=max_length or self.max_length, attention_window=self.window,
                    segment_length=self.segment_length)


@dataclass
class ModelSpec:
    name: str  # as given: `slstm`, `sparse_longformer:pmi`, `bert-512`, `longformer`
    family: Family | None  # None for a baseline
    setting: dict  # the variant as config kwargs
    baseline: str | None = None  # bert | longformer
    truncation: int | None = None  # bert-N: tokens read

    def bench_name(self):
        """The name `hf-longdoc bench` measures this model under."""
        return self.baseline if self.family is None else self.name


def parse_models(models, baselines):
    """`ModelSpec`s from the comma-separated names, with a ValueError naming any unknown one."""
    specs = []
    for name in models:
        family, setting = resolve(name)  # raises for an unknown family or variant
        specs.append(ModelSpec(name, family, setting))
    for name in baselines:
        parsed = parse_baseline(name)
        if parsed is None or parsed[0] == "roberta" or (parsed[0] == "bert") != (parsed[1] is not None):
            raise ValueError(f"Unknown baseline {name!r}; use `bert-<N>` (a BERT reading the first N tokens, e.g. "
                             "bert-512) or `longformer`.")
        specs.append(ModelSpec(name, None, {}, baseline=parsed[0], truncation=parsed[1]))
    if not specs:
        raise ValueError("Give at least one model in `--models` or `--baselines`.")
    return specs


def overrides_of(spec, settings):
    """The `config_overrides` that apply to `spec`: those given for its family, then those for its exact name."""
    if spec.family is None:
        return {}
    overrides = settings.config_overrides
    return {**overrides.get(spec.family.name, {}), **overrides.get(spec.name, {})}


def check_specs(specs, settings):
    """Every model's config built once before any training, so a bad size or override fails in seconds, not after
    hours; an override for a model that is not in the run (or a baseline) is an error too."""
    targets = {name for spec in specs if spec.family is not None for name in (spec.name, spec.family.name)}
    if unknown := sorted(set(settings.config_overrides) - targets):
        raise ValueError(f"`--config` names {', '.join(unknown)}, which is not a model of this run (models: "
                         f"{', '.join(sorted(targets)) or 'none'}; baselines take no overrides).")
    for spec in specs:
        if spec.family is not None:
            spec.family.build_config(settings.size(), **spec.setting, **overrides_of(spec, settings))


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
        tokenizer = fit_wordpiece_tokenizer(data["train"]["text"], vocab_size=settings.vocab_size,
                                            model_max_length=settings.max_length)
        return cls(data, label_names, tokenizer, inverted)

    def splits(self, tokenizer, max_length):
        """Train, test and (if `inverted`) the sentence-inverted test split, tokenized."""
        if tokenizer is self.tokenizer and max_length in self.encoded:
            return self.encoded[max_length]
        splits = DatasetDict(train=self.data["train"], test=self.data["test"])
        if self.inverted:
            splits["inverted"] = self.data["test"].map(lambda example: {"text": invert_sentences(example["text"])})
        encoded = tokenize(splits, tokenizer, max_length)
        if tokenizer is self.tokenizer:
            self.encoded[max_length] = encoded
        return encoded


def build_compared_model(spec, settings, task):
    """(model, tokenizer, tokens read, learning rate) of `spec` at the compare budget: a family sized by its
    `from_size` (on its own tokenizer if it has one), or a baseline on the task's WordPiece tokenizer."""
    tokenizer, max_length = task.tokenizer, spec.truncation or settings.max_length
    labels = task.label_names
    if spec.family is None:
        ids = dict(bos_token_id=tokenizer.cls_token_id, eos_token_id=tokenizer.sep_token_id,
                   sep_token_id=tokenizer.sep_token_id) if spec.truncation is None else {}
        model = build_baseline(spec.baseline, settings.hidden_size, settings.num_layers, settings.num_heads,
                               max_length, attention_window=settings.window, vocab_size=len(tokenizer),
                               pad_token_id=tokenizer.pad_token_id, num_labels=len(labels),
                               id2label=dict(enumerate(labels)), label2id={n: i for i, n in enumerate(labels)}, **ids)
        return model, tokenizer, max_length, settings.learning_rate or 1e-4
    family, size = spec.family, settings.size()
    overrides = {**spec.setting, **overrides_of(spec, settings)}
    if family.own_tokenizer is not None:  # e.g. bytes: the family's tokenizer for the sized config
        tokenizer = family.tokenizer_for(family.build_config(size, **overrides), None)
        max_length = tokenizer.model_max_length
    model = build_model(family, tokenizer, labels, False, overrides, size=size)
    return model, tokenizer, max_length, settings.learning_rate or family.learning_rate


def train_and_measure(spec, task, settings, seed, output_dir):
    """Train `spec` on the task's train split with the compare budget; returns its row of measurements on the test
    split (and its inverted copy)."""
    set_seed(seed)
    model, tokenizer, max_length, learning_rate = build_compared_model(spec, settings, task)
    encoded = task.splits(tokenizer, max_length)
    if spec.family is not None:
        fit_statistics(spec.family, model, encoded["train"]["input_ids"], tokenizer)
    args = training_arguments(output_dir, settings.epochs, settings.batch_size, learning_rate, seed,
                              save_strategy="no", eval_strategy="no", logging_strategy="no", disable_tqdm=True)
    trainer = Trainer(model=model, args=args, train_dataset=encoded["train"],
                      data_collator=DataCollatorWithPadding(tokenizer), compute_metrics=compute_metrics_fn())
    device = trainer.args.device
    with PeakMemory(device) as training_memory:
        start = time.perf_counter()
        trainer.train()
        train_seconds = time.perf_counter() - start
    with PeakMemory(device) as inference_memory:
        start = time.perf_counter()
        test = trainer.predict(encoded["test"]).metrics
        inference_seconds = time.perf_counter() - start
    row = {"model": spec.name, "seed": seed, "parameters": sum(p.numel() for p in model.parameters()),
           **{name: test[f"test_{name}"] for name in METRICS},
           "train_seconds": train_seconds, "inference_docs_per_s": len(encoded["test"]) / inference_seconds,
           "train_peak_mib": training_memory.peak / 2**20, "inference_peak_mib": inference_memory.peak / 2**20,
           "max_tokens": max_length}
    if "inverted" in encoded:
        row["inverted_accuracy"] = trainer.predict(encoded["inverted"]).metrics["test_accuracy"]
    return row


def builtin_task(position, seed, task_size, task_words, settings, inverted=True):
    """The built-in task at the compare's size, with its evidence at `position`."""
    data = make_long_document_task(evidence=position, seed=seed, train_size=task_size, validation_size=20,
                                   test_size=max(task_size // 2, 40), min_words=task_words[0],
                                   max_words=task_words[1])
    return Task.fit(data, data["train"].features["label"].names, settings, inverted)


def compare(dataset=None, text_column="text", label_column="label", models=("contextualizer", "slstm"),
            baselines=("bert-512",), settings=None, seeds=1, evidence=EVIDENCE_POSITIONS, task_size=1000,
            task_words=(300, 900), bench_lengths=(512, 1024, 2048), output_dir="out/compare", progress=print):
    """Run the comparison; writes the report, CSVs and plots into `output_dir` and returns the per-seed rows."""
    settings = settings or CompareSettings()
    specs = parse_models(list(models), list(baselines))
    if isinstance(seeds, bool) or not isinstance(seeds, int) or seeds < 1:
        raise ValueError(f"`seeds` must be a positive integer, got {seeds!r}.")
    if unknown := [p for p in evidence if p not in EVIDENCE_POSITIONS]:
        raise ValueError(f"`evidence` positions must be among {EVIDENCE_POSITIONS}, got {unknown}.")
    check_specs(specs, settings)
    bench_models = list(dict.fromkeys(spec.bench_name() for spec in specs))
    bench_sizes = dict(hidden_size=settings.hidden_size, num_layers=settings.num_layers, num_heads=settings.num_heads,
                       window=settings.window, segment_length=settings.segment_length)
    bench_overrides = {spec.bench_name(): overrides_of(spec, settings) for spec in specs}
    if bench_lengths:
        check_models(bench_models, tuple(bench_lengths), bench_overrides, **bench_sizes)
    os.makedirs(output_dir, exist_ok=True)
    rows = []
    for seed in range(FIRST_SEED, FIRST_SEED + seeds):
        if dataset in (None, BUILTIN_TASK):  # the built-in task at --task-size, evidence anywhere
            task = builtin_task("anywhere", seed, task_size, task_words, settings)
            dataset_name = f"built-in long-document task ({task_size} training documents)"
        else:
            data, label_names, multi_label, dataset_name = load_task(dataset, text_column, label_column, seed)
            if multi_label:
                raise ValueError("`compare` reports single-label accuracy; pass a single-label dataset.")
            task = Task.fit(data, label_names, settings)
        evidence_tasks = {position: builtin_task(position, seed, task_size, task_words, settings, inverted=False)
                          for position in evidence}
        for spec in specs:
            scratch = os.path.join(output_dir, "runs", f"{spec.name.replace(':', '-')}-{seed}")
            row = train_and_measure(spec, task, settings, seed, scratch)
            for position, evidence_task in evidence_tasks.items():
                row[f"evidence_{position}"] = train_and_measure(spec, evidence_task, settings, seed,
                                                                scratch)["accuracy"]
            rows.append(row)
            write_csv(os.path.join(output_dir, "results.csv"), rows)  # an interrupted run keeps what it measured
            progress(f"seed {seed} {spec.name:>24}: accuracy {row['accuracy']:.3f}, inverted "
                     f"{row['inverted_accuracy']:.3f}, {row['parameters'] / 1e6:.2f}M parameters, trained in "
                     f"{row['train_seconds']:.0f} s, {row['inference_docs_per_s']:.1f} docs/s"
                     + "".join(f", evidence {p} {row[f'evidence_{p}']:.3f}" for p in evidence_tasks))
    summary = summarize(rows)
    bench_rows = []
    if bench_lengths:
        bench_rows = run_bench(models=bench_models, lengths=tuple(bench_lengths), repeats=3,
                               num_global=max(1, settings.max_length // 32), progress=progress,
                               config_overrides=bench_overrides, **bench_sizes)
    seed_text = (f"seed {FIRST_SEED}" if seeds == 1
                 else f"mean ± std over seeds {FIRST_SEED}-{FIRST_SEED + seeds - 1}")
    write_compare_report(rows, summary, bench_rows, settings, dataset_name, seed_text, output_dir)
    return rows


def summarize(rows):
    """Mean and standard deviation (over seeds) of every measured column, per model, in the order first seen."""
    summary = []
    for name in dict.fromkeys(row["model"] for row in rows):
        group = [row for row in rows if row["model"] == name]
        entry = {"model": name, "seeds": len(group)}
        for key, value in group[0].items():
            if key in ("model", "seed") or not isinstance(value, (int, float)):
                continue
            values = [row[key] for row in group]
            entry[key] = statistics.fmean(values)
            entry[key + "_std"] = statistics.stdev(values) if len(values) > 1 else 0.0
        if "inverted_accuracy" in entry:
            entry["inverted_drop"] = entry["accuracy"] - entry["inverted_accuracy"]
        summary.append(entry)
    return summary


__all__ = ["CompareSettings", "compare", "parse_models", "summarize"]
