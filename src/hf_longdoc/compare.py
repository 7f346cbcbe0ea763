"""`hf-longdoc compare`: every method and the Transformers baselines trained with the same budget on the same data.

Each model is trained from scratch for the same epochs with the same seed and batch size, at one width and depth
(`hidden_size`, `num_layers`, `num_heads`, mapped onto each family's own config), and evaluated on the same test split:
accuracy, macro-F1, micro-F1, parameters, training time, inference documents/s and peak memory (training and
inference). Robustness: the same trained model on a sentence-inverted copy of the test split, and the model trained
and tested on the built-in task with its evidence at the start, middle or end of long documents. Several seeds give
mean ± std. Outputs: `report.md`, `results.csv` (one row per model and seed), `summary.csv`, and PNG plots (accuracy
against inference speed; time and memory against document length from `hf-longdoc bench`).

Models are families (`contextualizer`, `slstm`, `elementwise`, ...) or `family:variant`: `sparse_longformer:<selector>`
(cls | first_n | random | tfidf | pmi) and `segment_lm:<variant>` (base | cat | rnn | att | att_ablated). Baselines:
`bert-<N>`, a BERT that reads the first N tokens, and `longformer`, Transformers' Longformer of the same size, both on
the same WordPiece tokenizer.
"""

import csv
import logging
import math
import os
import statistics
import time
from dataclasses import dataclass, field

import torch
from datasets import DatasetDict
from transformers import (
    BertConfig,
    BertForSequenceClassification,
    DataCollatorWithPadding,
    LongformerConfig,
    LongformerForSequenceClassification,
    Trainer,
    TrainingArguments,
    set_seed,
)

from .bench import PeakMemory
from .data import fit_wordpiece_tokenizer, invert_sentences, make_long_document_task
from .metrics import compute_metrics_fn
from .modeling import get_family
from .training import BUILTIN_TASK, build_model, default_tokenizer, fit_statistics, load_task, tokenize

logger = logging.getLogger(__name__)

VARIANT_SETTINGS = {"sparse_longformer": "global_selector", "segment_lm": "variant"}
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


@dataclass
class ModelSpec:
    name: str  # as given: `slstm`, `sparse_longformer:pmi`, `bert-512`, `longformer`
    family: str | None  # None for a baseline
    setting: dict  # the variant as a config kwarg
    truncation: int | None = None  # bert-N: tokens read


def parse_models(models, baselines):
    """`ModelSpec`s from the comma-separated names, with a ValueError naming any unknown one."""
    specs = []
    for name in models:
        family_name, _, variant = name.partition(":")
        family = get_family(family_name)  # raises for an unknown family
        setting = {}
        if variant:
            if family.name not in VARIANT_SETTINGS:
                raise ValueError(f"`--models` entry {name!r}: only {', '.join(VARIANT_SETTINGS)} take a variant.")
            setting = {VARIANT_SETTINGS[family.name]: variant}
            family.config_class(**setting)  # an unknown variant fails here, naming the setting and its choices
        specs.append(ModelSpec(name, family.name, setting))
    for name in baselines:
        if name == "longformer":
            specs.append(ModelSpec(name, None, {}))
        elif name.startswith("bert-") and name[5:].isdigit() and int(name[5:]) >= 8:
            specs.append(ModelSpec(name, None, {}, truncation=int(name[5:])))
        else:
            raise ValueError(f"Unknown baseline {name!r}; use `bert-<N>` (a BERT reading the first N tokens, e.g. "
                             "bert-512) or `longformer`.")
    if not specs:
        raise ValueError("Give at least one model in `--models` or `--baselines`.")
    return specs


def global_token_count(max_length):
    """The sparse Longformer's global tokens at `max_length`: the paper's share, 128 per 4,096 tokens (1/32). The
    config default of 128 is an eighth of a 1,024-token compare document, and there it stalls learning."""
    return max(1, max_length // 32)


def sized_config(spec, settings):
    """Config kwargs that give `spec`'s family the compare width and depth (the family's own names for them)."""
    h, layers, heads, max_length = settings.hidden_size, settings.num_layers, settings.num_heads, settings.max_length
    bert = {"model_type": "bert", "hidden_size": h, "num_hidden_layers": layers, "num_attention_heads": heads,
            "intermediate_size": 4 * h}
    if spec.family == "contextualizer":
        sized = {"hidden_size": h, "rank": 2 * h, "num_hidden_layers": layers}
    elif spec.family == "slstm":
        sized = {"hidden_size": h, "num_recurrent_steps": layers, "max_position_embeddings": max_length}
    elif spec.family == "elementwise":
        # one material per word: the same reach as max_length subword tokens; the paper's h = v (one head per
        # element position), so the backbone gets v heads rather than `num_heads`
        v = settings.config_overrides.get(spec.name, {}).get(
            "elements_per_material", get_family(spec.family).config_class().elements_per_material)
        sized = {"backbone_config": {**bert, "num_attention_heads": v, "max_position_embeddings": max_length},
                 "max_materials": max_length, "elements_per_material": v}
    elif spec.family == "sparse_longformer":
        sized = {"hidden_size": h, "num_hidden_layers": layers, "num_attention_heads": heads,
                 "intermediate_size": 4 * h, "attention_window": settings.window,
                 "max_position_embeddings": max_length + 2, "num_global_tokens": global_token_count(max_length)}
    elif spec.family == "segment_lm":
        length = settings.segment_length
        sized = {"backbone_config": {**bert, "max_position_embeddings": length}, "segment_length": length,
                 "num_segments": max(1, math.ceil((max_length - 2) / (length - 2)))}
    else:
        raise ValueError(f"No compare sizes for family {spec.family!r}.")
    return {**sized, **spec.setting, **settings.config_overrides.get(spec.name, {})}


def build_baseline(spec, settings, tokenizer, label_names, max_length):
    """Transformers' BERT (reading the first `spec.truncation` tokens) or Longformer of the compare size."""
    sizes = dict(vocab_size=len(tokenizer), hidden_size=settings.hidden_size, num_hidden_layers=settings.num_layers,
                 num_attention_heads=settings.num_heads, intermediate_size=4 * settings.hidden_size,
                 pad_token_id=tokenizer.pad_token_id, num_labels=len(label_names),
                 id2label=dict(enumerate(label_names)), label2id={n: i for i, n in enumerate(label_names)})
    if spec.truncation:
        config = BertConfig(**sizes, max_position_embeddings=spec.truncation)
        config._attn_implementation = "sdpa"
        return BertForSequenceClassification(config)
    config = LongformerConfig(**sizes, attention_window=settings.window, max_position_embeddings=max_length + 2,
                              bos_token_id=tokenizer.cls_token_id, eos_token_id=tokenizer.sep_token_id,
                              sep_token_id=tokenizer.sep_token_id)
    return LongformerForSequenceClassification(config)


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


def train_and_measure(spec, task, settings, seed, output_dir):
    """Train `spec` on the task's train split with the compare budget; returns its row of measurements on the test
    split (and its inverted copy)."""
    set_seed(seed)
    tokenizer, max_length = task.tokenizer, spec.truncation or settings.max_length
    config_kwargs = sized_config(spec, settings) if spec.family is not None else None
    if spec.family is not None and get_family(spec.family).tokenizer == "elementwise":  # bytes: v per material
        tokenizer = default_tokenizer(spec.family, task.data, settings.vocab_size,
                                      settings.max_length * config_kwargs["elements_per_material"], config_kwargs)
        max_length = tokenizer.model_max_length
    encoded = task.splits(tokenizer, max_length)
    label_names = task.label_names
    if spec.family is None:
        model = build_baseline(spec, settings, tokenizer, label_names, settings.max_length)
        learning_rate = settings.learning_rate or 1e-4
    else:
        model = build_model(spec.family, tokenizer, label_names, False, config_kwargs)
        fit_statistics(model, encoded["train"]["input_ids"], tokenizer)
        learning_rate = settings.learning_rate or get_family(spec.family).learning_rate
    args = TrainingArguments(
        output_dir=output_dir, num_train_epochs=settings.epochs, per_device_train_batch_size=settings.batch_size,
        per_device_eval_batch_size=settings.batch_size, learning_rate=learning_rate, weight_decay=0.01,
        warmup_steps=0.1, lr_scheduler_type="linear", save_strategy="no", eval_strategy="no", logging_strategy="no",
        seed=seed, data_seed=seed, report_to="none", use_cpu=not torch.cuda.is_available(),
        dataloader_num_workers=0, disable_tqdm=True,
    )
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
            _write_csv(os.path.join(output_dir, "results.csv"), rows)  # an interrupted run keeps what it measured
            progress(f"seed {seed} {spec.name:>24}: accuracy {row['accuracy']:.3f}, inverted "
                     f"{row['inverted_accuracy']:.3f}, {row['parameters'] / 1e6:.2f}M parameters, trained in "
                     f"{row['train_seconds']:.0f} s, {row['inference_docs_per_s']:.1f} docs/s"
                     + "".join(f", evidence {p} {row[f'evidence_{p}']:.3f}" for p in evidence_tasks))
    summary = summarize(rows)
    bench_rows = _bench(specs, settings, bench_lengths, progress) if bench_lengths else []
    write_report(rows, summary, bench_rows, settings, dataset_name, seeds, output_dir)
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


def _bench(specs, settings, lengths, progress):
    """Forward time and memory per length of each model at the compare size (`hf-longdoc bench`)."""
    from .bench import run_bench

    names = []
    for spec in specs:
        if spec.family is None:
            names.append("bert" if spec.truncation else "longformer")
        elif spec.family == "segment_lm":
            names.append(f"segment_lm:{spec.setting.get('variant', 'att')}")
        else:
            names.append(spec.family)
    names = list(dict.fromkeys(names))
    return run_bench(models=names, lengths=tuple(lengths), hidden_size=settings.hidden_size,
                     num_layers=settings.num_layers, num_heads=settings.num_heads, repeats=3, window=settings.window,
                     num_global=global_token_count(settings.max_length), segment_length=settings.segment_length,
                     progress=progress)


def _write_csv(path, table):
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(dict.fromkeys(key for row in table for key in row)))
        writer.writeheader()
        writer.writerows(table)


def _cell(entry, key, digits=3):
    if key not in entry:
        return "-"
    spread = entry.get(key + "_std", 0.0)
    return f"{entry[key]:.{digits}f}" + (f" ± {spread:.{digits}f}" if entry["seeds"] > 1 else "")


def write_report(rows, summary, bench_rows, settings, dataset_name, seeds, output_dir):
    """report.md, results.csv, summary.csv and the plots."""
    for path, table in (("results.csv", rows), ("summary.csv", summary)):
        _write_csv(os.path.join(output_dir, path), table)
    plots = [_plot_accuracy_vs_speed(summary, output_dir)]
    if bench_rows:
        plots.append(_plot_bench(bench_rows, output_dir))
    evidence = [key for key in summary[0] if key.startswith("evidence_") and not key.endswith("_std")]
    header = ["model", "parameters", "accuracy", "macro-F1", "micro-F1", "train s", "inference docs/s",
              "train peak MiB", "inference peak MiB", "inverted", "drop"] + [key.replace("_", " ") for key in evidence]
    rate = f"learning rate {settings.learning_rate:g}" if settings.learning_rate else "each family's learning rate"
    seed_text = (f"seed {FIRST_SEED}" if seeds == 1
                 else f"mean ± std over seeds {FIRST_SEED}-{FIRST_SEED + seeds - 1}")
    lines = [f"# hf-longdoc compare: {dataset_name}", "",
             f"Same budget for every model: hidden size {settings.hidden_size}, {settings.num_layers} layers, "
             f"{settings.num_heads} heads, {settings.max_length} tokens per document (bert-N: N), {settings.epochs:g} "
             f"epochs, batch {settings.batch_size}, {rate}, from scratch; {seed_text}. Inverted: the same model on "
             "the test documents with their sentences in reverse order."
             + (" Evidence: trained and tested on the built-in task with the class evidence only at the start, "
                "middle or end of each document." if evidence else ""), "",
             "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for entry in summary:
        cells = [entry["model"], f"{entry['parameters'] / 1e6:.2f}M", _cell(entry, "accuracy"),
                 _cell(entry, "macro_f1"), _cell(entry, "micro_f1"), _cell(entry, "train_seconds", 0),
                 _cell(entry, "inference_docs_per_s", 1), _cell(entry, "train_peak_mib", 0),
                 _cell(entry, "inference_peak_mib", 0), _cell(entry, "inverted_accuracy"),
                 f"{entry['inverted_drop']:+.3f}" if "inverted_drop" in entry else "-"]
        cells += [_cell(entry, key) for key in evidence]
        lines.append("| " + " | ".join(cells) + " |")
    if bench_rows:
        from .bench import format_table

        lines += ["", "Forward time and peak memory per document length (`hf-longdoc bench`, same sizes):", "", "```",
                  format_table(bench_rows), "```"]
    lines += [""] + [f"![{os.path.basename(plot)}]({os.path.basename(plot)})" for plot in plots]
    with open(os.path.join(output_dir, "report.md"), "w") as f:
        f.write("\n".join(lines) + "\n")


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _plain_log_ticks(ticks, at=None):
    """Label a log axis with plain numbers (512, 20) instead of powers: at the given values, or at 1, 2, 5 × 10^k."""
    from matplotlib.ticker import FixedLocator, LogLocator, NullFormatter, ScalarFormatter

    ticks.set_major_locator(FixedLocator(at) if at is not None else LogLocator(subs=(1, 2, 5)))
    ticks.set_major_formatter(ScalarFormatter())
    ticks.set_minor_formatter(NullFormatter())


def _plot_accuracy_vs_speed(summary, output_dir):
    plt = _pyplot()
    figure, axis = plt.subplots(figsize=(6, 4))
    markers = "osD^vP*Xh<>"
    for k, entry in enumerate(summary):
        axis.errorbar(entry["inference_docs_per_s"], entry["accuracy"], yerr=entry.get("accuracy_std", 0.0),
                      marker=markers[k % len(markers)], capsize=3, linestyle="none", label=entry["model"])
    axis.set_xscale("log")
    _plain_log_ticks(axis.xaxis)
    axis.set_xlabel("inference speed (documents/s)")
    axis.set_ylabel("test accuracy")
    axis.grid(True, alpha=0.3)
    axis.legend(fontsize=7)
    figure.tight_layout()
    path = os.path.join(output_dir, "accuracy_vs_speed.png")
    figure.savefig(path, dpi=120)
    plt.close(figure)
    return path


def _plot_bench(bench_rows, output_dir):
    plt = _pyplot()
    figure, axes = plt.subplots(1, 2, figsize=(10, 4))
    for name in dict.fromkeys(row["model"] for row in bench_rows):
        points = [row for row in bench_rows if row["model"] == name]
        lengths = [row["length"] for row in points]
        axes[0].plot(lengths, [row["seconds"] * 1000 for row in points], marker="o", label=name)
        axes[1].plot(lengths, [max(row["peak_mib"], 1e-3) for row in points], marker="o", label=name)
    for axis, label in zip(axes, ("forward time (ms)", "peak memory (MiB)")):
        axis.set_xscale("log", base=2)
        axis.set_yscale("log")
        _plain_log_ticks(axis.xaxis, at=sorted({row["length"] for row in bench_rows}))
        _plain_log_ticks(axis.yaxis)
        axis.set_xlabel("document length (tokens)")
        axis.set_ylabel(label)
        axis.grid(True, which="both", alpha=0.3)
    axes[0].legend(fontsize=8)
    figure.tight_layout()
    path = os.path.join(output_dir, "time_memory_vs_length.png")
    figure.savefig(path, dpi=120)
    plt.close(figure)
    return path


__all__ = ["CompareSettings", "compare", "parse_models", "summarize"]
