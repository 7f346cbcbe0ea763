"""Outputs of `bench` and `compare`: CSV files, text and markdown tables, and their plots (`plotting.figure`)."""

import csv
import os

from ..data import BUILTIN_TASK
from ..saving.run_folder import record_outputs
from ..training.settings import mixed_precision
from ..utils.distributed import launched_processes
from ..utils.plotting import figure, plain_log_ticks
from .baselines import CHECKPOINT_HEAD_RATE, CHECKPOINT_RATE
from .collapse import COLLAPSE_SHARE, COST_COLUMNS, MAJORITY_MARGIN, NEAR_CONSTANT_SHARE

RATIO_PREFIXES = ("speedup_vs_", "time_vs_", "memory_vs_")


def write_csv(path, table):
    """`table` (a list of dicts) as CSV, with the union of their keys as columns in the order first seen."""
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(dict.fromkeys(key for row in table for key in row)))
        writer.writeheader()
        writer.writerows(table)


def format_table(rows):
    """Bench rows as an aligned text table, with the growth from the shortest length per model."""
    ratio_keys = [key for key in rows[0] if key.startswith(RATIO_PREFIXES)] if rows else []
    header = ["model", "length", "ms", "peak MiB", "time / time(shortest)"]
    header += [key.replace("_", " ") for key in ratio_keys]
    # what compiled on first use (the first pass less the median) and the attention each model ran, where known
    extras = [("compile_seconds", "compile s")] if any(row.get("compile_seconds") is not None for row in rows) else []
    extras += [("backend", "attention")] if any(row.get("backend") or row.get("attention") for row in rows) else []
    header += [title for _, title in extras]
    shortest = {}  # model -> its row at its shortest length
    for row in rows:
        if row.get("oom"):  # out of GPU memory at this length: no time to grow from
            continue
        if row["model"] not in shortest or row["length"] < shortest[row["model"]]["length"]:
            shortest[row["model"]] = row
    lines = [header]
    for row in rows:
        if row.get("oom"):
            blank = ["-"] * (len(ratio_keys) + len(extras))
            lines.append([row["model"], str(row["length"]), "OOM", "OOM", "-"] + blank)
            continue
        line = [row["model"], str(row["length"]), f"{row['seconds'] * 1000:.1f}", f"{row['peak_mib']:.1f}",
                f"{row['seconds'] / shortest[row['model']]['seconds']:.2f}"]
        line += [f"{row[key]:.2f}x" if row.get(key) else "-" for key in ratio_keys]
        for key, _ in extras:
            value = row.get(key) if key != "backend" else row.get("backend") or row.get("attention")
            line.append("-" if value is None else f"{value:.1f}" if isinstance(value, float) else str(value))
        lines.append(line)
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    return "\n".join("  ".join(cell.rjust(width) for cell, width in zip(line, widths)) for line in lines)


def bench_output_paths(prefix):
    """The files `write_bench_outputs` writes for `prefix`."""
    return prefix + ".csv", prefix + ".png"


def write_bench_outputs(rows, prefix):
    """Write `<prefix>.csv` and a log-log plot `<prefix>.png` of time against length (recorded in the folder's
    manifest, so a rerun may replace them); returns both paths."""
    os.makedirs(os.path.dirname(os.path.abspath(prefix)), exist_ok=True)
    csv_path, png_path = bench_output_paths(prefix)
    write_csv(csv_path, rows)
    with figure(png_path) as axis:
        for name in dict.fromkeys(row["model"] for row in rows):
            points = [(row["length"], row["seconds"] * 1000) for row in rows
                      if row["model"] == name and not row.get("oom")]
            if points:  # (a model out of memory at every length has none)
                axis.plot(*zip(*points), marker="o", label=name)
        axis.set_xscale("log", base=2)
        axis.set_yscale("log")
        axis.set_xlabel("document length (tokens)")
        axis.set_ylabel("forward time (ms)")
        axis.set_title("hf-longdoc bench")
        axis.grid(True, which="both", alpha=0.3)
        axis.legend()
    record_outputs([csv_path, png_path])
    return csv_path, png_path


def plot_accuracy_vs_speed(summary, path):
    """Test accuracy (± std over seeds) against inference documents/s, one marker per model."""
    markers = "osD^vP*Xh<>"
    with figure(path) as axis:
        for k, entry in enumerate(summary):
            axis.errorbar(entry["inference_docs_per_s"], entry["accuracy"], yerr=entry.get("accuracy_std", 0.0),
                          marker=markers[k % len(markers)], capsize=3, linestyle="none",
                          label=entry["model"] + (" (collapsed)" if entry.get("collapsed") and not entry.get(
                              "healthy", 1) else ""))
        axis.set_xscale("log")
        plain_log_ticks(axis.xaxis)
        axis.set_xlabel("inference speed (documents/s)")
        axis.set_ylabel("test accuracy")
        axis.grid(True, alpha=0.3)
        axis.legend(fontsize=7)
    return path


def plot_time_memory_vs_length(bench_rows, path):
    """Forward time and peak memory against document length, side by side, one line per model."""
    with figure(path, columns=2, size=(10, 4)) as axes:
        for name in dict.fromkeys(row["model"] for row in bench_rows):
            points = [row for row in bench_rows if row["model"] == name]
            lengths = [row["length"] for row in points]
            axes[0].plot(lengths, [row["seconds"] * 1000 for row in points], marker="o", label=name)
            axes[1].plot(lengths, [max(row["peak_mib"], 1e-3) for row in points], marker="o", label=name)
        for axis, label in zip(axes, ("forward time (ms)", "peak memory (MiB)")):
            axis.set_xscale("log", base=2)
            axis.set_yscale("log")
            plain_log_ticks(axis.xaxis, at=sorted({row["length"] for row in bench_rows}))
            plain_log_ticks(axis.yaxis)
            axis.set_xlabel("document length (tokens)")
            axis.set_ylabel(label)
            axis.grid(True, which="both", alpha=0.3)
        axes[0].legend(fontsize=8)
    return path


def _cell(entry, key, digits=3):
    """A summary value as `mean ± std` over the seeds it was averaged over (a score: the healthy ones, if any)."""
    if key not in entry:
        return "-"
    spread = entry.get(key + "_std", 0.0)
    averaged = entry["seeds"] if key in COST_COLUMNS or not entry.get("healthy") else entry["healthy"]
    return f"{entry[key]:.{digits}f}" + (f" ± {spread:.{digits}f}" if averaged > 1 else "")


def score_cell(entry, key, digits=3):
    """`_cell` of a score, saying how many seeds it averages when some collapsed: "mean ± std (n healthy), k
    collapsed", or "mean (all k collapsed)" when no seed is healthy; and, when a time budget cut some of its runs,
    how many ("cut by the time budget", "k of n cut by the time budget")."""
    text, collapsed = _cell(entry, key, digits), entry.get("collapsed", 0)
    if text == "-":
        return text
    cut, seeds = entry.get("cut", 0), entry.get("seeds", 1)
    cut_note = "cut by the time budget" if cut == seeds == 1 else (
        f"all {cut} cut by the time budget" if cut == seeds else f"{cut} of {seeds} cut by the time budget")
    if collapsed and not entry.get("healthy"):
        note = "collapsed" if collapsed == 1 else f"all {collapsed} collapsed"
        return f"{text} ({note}; {cut_note})" if cut else f"{text} ({note})"
    if collapsed:
        text = f"{text} ({entry['healthy']} healthy), {collapsed} collapsed"
        return f"{text}, {cut_note}" if cut else text
    return f"{text} ({cut_note})" if cut else text


def collapsed_lines(rows):
    """The report's list of collapsed runs (model, seed, what its validation predictions were), or nothing."""
    collapsed = [row for row in rows if row.get("collapsed")]
    if not collapsed:
        return []
    runs = "; ".join(f"{row['model']} seed {row['seed']} (one class for {row['validation_top_share']:.0%} of "
                     f"validation, validation accuracy {row['validation_accuracy']:.3f} against a majority-class "
                     f"rate of {row['validation_majority_rate']:.3f})" for row in collapsed)
    return ["", f"**Collapsed runs**, left out of the means above (a model with no healthy seed shows its collapsed "
            f"runs' mean, marked): {runs}. A run is collapsed when one predicted "
            f"class takes {COLLAPSE_SHARE:.0%} of the validation documents or more, or {NEAR_CONSTANT_SHARE:.0%} "
            f"with an accuracy within {MAJORITY_MARGIN * 100:g} points of the majority-class rate "
            "(`hf_longdoc.experiments.collapse`)."]


def cut_lines(rows, settings):
    """The report's list of the runs the time budget cut (model, seed, the epochs and steps that ran), or a line
    saying none was."""
    if settings.time_budget is None:
        return []
    cut = [row for row in rows if row.get("cut_by_time_budget")]
    if not cut:
        return ["", f"Time budget: {settings.time_budget:g} minutes of training per model; no run reached it."]
    runs = "; ".join(f"{row['model']} seed {row['seed']} ({row['epochs']:g} of {row['planned_epochs']:g} epochs, "
                     f"{row['steps']} optimizer step{'' if row['steps'] == 1 else 's'})" for row in cut)
    return ["", f"**Runs cut by the time budget** of {settings.time_budget:g} minutes of training per model, measured "
            f"as they were when it ran out (marked in the table and in results.csv's `cut_by_time_budget`; `epochs` "
            f"and `steps` there are what ran): {runs}."]


def batch_text(rows, settings):
    """The batch of a compare run in words: documents per process and per optimizer step (per process x processes x
    gradient accumulation), as the trained rows record them."""
    trained = next((row for row in rows if row.get("batch_per_step")), None)
    per_process = trained["batch_per_process"] if trained else settings.batch_size
    processes = trained["processes"] if trained else launched_processes()
    accumulation = trained["gradient_accumulation"] if trained else 1
    per_step = per_process * processes * accumulation
    how = f"{processes} processes" if processes > 1 else "one process"
    if accumulation > 1:
        how += f", {accumulation} accumulated batches"
    return f"batch {per_process} per process, {per_step} documents per optimizer step ({how})"


# What `compare` writes into its output folder (checked before a run, so no user file is overwritten hours later)
COMPARE_OUTPUTS = ("report.md", "results.csv", "summary.csv", "accuracy_vs_speed.png", "time_memory_vs_length.png")


def epochs_text(settings, summary):
    """The epochs a compare run set for its report (`planned_epochs`; a time budget may have cut them): one number,
    or each trained model's (with a backbone and no `--epochs`, each family trains its recipe's)."""
    # `planned_epochs`; rows written before it was recorded have the epochs set as `epochs`
    planned = {entry["model"]: entry.get("planned_epochs", entry.get("epochs")) for entry in summary}
    trained = {model: epochs for model, epochs in planned.items() if epochs}
    if settings.epochs is None and not trained:
        return "no training epochs (nothing but TF-IDF)"
    if settings.epochs is not None or len(set(trained.values())) == 1:
        epochs = settings.epochs if settings.epochs is not None else next(iter(trained.values()))
        return f"{epochs:g} epoch{'' if epochs == 1 else 's'}"
    return "epochs: " + ", ".join(f"{model} {epochs:g}" for model, epochs in trained.items())


def step_cap_text(settings, summary, epochs):
    """The report's words for `--max_steps` (Trainer's step cap, which replaces the `epochs` set), with the epochs
    each trained model ran: "3 optimizer steps per model (--max_steps 3 replaced 1 epoch; epochs that ran:
    contextualizer 0.67)"; None without a cap."""
    max_steps = (settings.training_args or {}).get("max_steps") or -1
    if max_steps <= 0:
        return None
    ran = ", ".join(f"{entry['model']} {round(entry['epochs'], 2):g}" for entry in summary
                    if entry.get("planned_epochs") and entry.get("steps"))
    return (f"{max_steps} optimizer step{'' if max_steps == 1 else 's'} per model (--max_steps {max_steps} replaced "
            f"{epochs}" + (f"; epochs that ran: {ran})" if ran else ")"))


def evidence_text(evidence, settings):
    """What the report says of the built-in evidence runs: what they are when they ran (`evidence`: their columns),
    and with a dataset, that they ran on the built-in task besides it, or how to add them."""
    dataset = settings.dataset not in (None, BUILTIN_TASK)
    if not evidence:
        return ("No built-in evidence runs (--evidence start,middle,end adds them: each model trained and tested again "
                "on the built-in task)." if dataset else "")
    positions = ", ".join(key.removeprefix("evidence_") for key in evidence)
    return (f"Evidence ({positions}): each model also trained and tested on the built-in long-document task "
            f"({settings.task_size} training documents) with the class evidence only at that place in each document"
            + (", besides the dataset above (asked for with --evidence)." if dataset else "."))


def write_compare_report(rows, summary, bench_rows, settings, dataset_name, seed_text, output_dir):
    """report.md, results.csv, summary.csv and the plots of a `compare` run (`COMPARE_OUTPUTS`), recorded in the
    folder's manifest."""
    for path, table in (("results.csv", rows), ("summary.csv", summary)):
        write_csv(os.path.join(output_dir, path), table)
    plots = [plot_accuracy_vs_speed(summary, os.path.join(output_dir, "accuracy_vs_speed.png"))]
    if bench_rows:
        plots.append(plot_time_memory_vs_length(bench_rows, os.path.join(output_dir, "time_memory_vs_length.png")))
    evidence = [key for key in summary[0] if key.startswith("evidence_") and not key.endswith("_std")]
    header = ["model", "parameters", "accuracy", "macro-F1", "micro-F1", "train s", "inference docs/s",
              "train peak MiB", "inference peak MiB", "inverted", "drop"] + [key.replace("_", " ") for key in evidence]
    rate = f"learning rate {settings.learning_rate:g}" if settings.learning_rate else "each family's learning rate"
    if settings.backbone and not (settings.learning_rate or settings.head_learning_rate):
        rate += (f" (the baselines fine-tuning the checkpoint: {CHECKPOINT_RATE:g}, their new head "
                 f"{CHECKPOINT_HEAD_RATE:g})")
    precision = mixed_precision(settings.bf16, settings.fp16)
    precision = f"{precision} mixed precision" if precision else "float32"
    if settings.head_learning_rate:
        rate += f" ({settings.head_learning_rate:g} for the parameters the checkpoint does not supply)"
    sizes = (f"fine-tuned from the pretrained `{settings.backbone}` (its sizes and tokenizer)" if settings.backbone
             else f"hidden size {settings.hidden_size}, {settings.num_layers} layers, {settings.num_heads} heads "
                  "(for the models with attention heads), from scratch")
    epochs = epochs_text(settings, summary)
    lead = "Each family at its `train` recipe" if epochs.startswith("epochs:") else "Same budget for every model"
    epochs = step_cap_text(settings, summary, epochs) or epochs
    if settings.time_budget is not None:
        cut = sum(entry.get("cut", 0) for entry in summary)
        epochs += (f" within a time budget of {settings.time_budget:g} minutes of training per model ("
                   + (f"{cut} run{'s' if cut > 1 else ''} cut short: see below)" if cut else "no run reached it)"))
    lines = [f"# hf-longdoc compare: {dataset_name}", "",
             f"{lead}: {sizes}, {settings.max_length} tokens per document (bert-N: N), "
             f"{epochs}, {batch_text(rows, settings)}, {rate}, {precision}; {seed_text}. TF-IDF: "
             "logistic regression over the whole text. Inverted: the same model on "
             "the test documents with their sentences in reverse order. " + evidence_text(evidence, settings), "",
             "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for entry in summary:
        cells = [entry["model"], f"{entry['parameters'] / 1e6:.2f}M", score_cell(entry, "accuracy"),
                 _cell(entry, "macro_f1"), _cell(entry, "micro_f1"), _cell(entry, "train_seconds", 0),
                 _cell(entry, "inference_docs_per_s", 1), _cell(entry, "train_peak_mib", 0),
                 _cell(entry, "inference_peak_mib", 0), _cell(entry, "inverted_accuracy"),
                 f"{entry['inverted_drop']:+.3f}" if "inverted_drop" in entry else "-"]
        cells += [_cell(entry, key) for key in evidence]
        lines.append("| " + " | ".join(cells) + " |")
    lines += collapsed_lines(rows)
    lines += cut_lines(rows, settings)
    if bench_rows:
        lines += ["", "Forward time and peak memory per document length (`hf-longdoc bench`, same sizes):", "", "```",
                  format_table(bench_rows), "```"]
    lines += [""] + [f"![{os.path.basename(plot)}]({os.path.basename(plot)})" for plot in plots]
    with open(os.path.join(output_dir, "report.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    record_outputs([os.path.join(output_dir, name) for name in ("report.md", "results.csv", "summary.csv")] + plots)
