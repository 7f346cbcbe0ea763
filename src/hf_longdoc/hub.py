"""Model cards and Hub upload.

A saved hf_longdoc model already carries its `auto_map` and the family's source files (the family registry sees to
that: `register_for_auto_class` and the config's default `auto_map`), so the folder loads with `trust_remote_code=True`
where hf_longdoc is not installed. This module writes the model card and uploads the folder with `huggingface_hub`.
"""

import json
import os
import shutil

from huggingface_hub import HfApi, ModelCard, ModelCardData
from transformers import AutoConfig

from .modeling import family_of_config

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
# without hf_longdoc: the modeling code ships with the weights
model = AutoModelForSequenceClassification.from_pretrained("{repo_id}", trust_remote_code=True)
classifier = pipeline("text-classification", model="{repo_id}", trust_remote_code=True)
```

## Citation

```bibtex
{citation}
```
"""


def _architecture(config, family):
    keys = family.card_settings + ("num_labels", "problem_type")
    rows = [f"| `{key}` | `{getattr(config, key)}` |" for key in keys if getattr(config, key, None) is not None]
    rows.append(f"| labels | {', '.join(config.id2label[i] for i in range(config.num_labels))} |")
    return "| setting | value |\n|---|---|\n" + "\n".join(rows)


def _evaluation(metrics):
    if not metrics:
        return "No evaluation was recorded."
    timing = ("runtime", "per_second")
    rows = [f"| {name} | {value:.4f} |" for name, value in sorted(metrics.items())
            if isinstance(value, (int, float)) and not any(word in name for word in timing)]
    return "Test split:\n\n| metric | value |\n|---|---|\n" + "\n".join(rows)


def _reading(output_dir, config, family):
    """A sentence on how much of a document the model reads: the saved tokenizer's `model_max_length`, or the
    family's reading length (a segment LM reads m·(L − 2) tokens, whatever the text's length)."""
    limits = [family.reads(config)]
    tokenizer_config = os.path.join(output_dir, "tokenizer_config.json")
    if os.path.isfile(tokenizer_config):
        with open(tokenizer_config) as f:
            limits.append(json.load(f).get("model_max_length"))
    limits = [int(limit) for limit in limits if isinstance(limit, (int, float)) and 0 < limit < 10**9]
    if not limits:
        return ""
    return (f"It reads the first {min(limits)} input ids of a document (the saved tokenizer truncates there, and "
            "`hf-longdoc train` logs how many documents it cut): text past them is not seen. ")


def _is_hub_id(name):
    """`user/name` of the Hub, as opposed to a local file (which has an extension or exists)."""
    return bool(name) and name.count("/") == 1 and not os.path.splitext(name)[1] and not os.path.exists(name)


def make_model_card(output_dir, repo_id=None, dataset_name=None, metrics=None, training_data=None):
    """A `huggingface_hub.ModelCard` for the model saved in `output_dir` (metrics default to its metrics.json)."""
    config = AutoConfig.from_pretrained(output_dir)
    family = family_of_config(config)
    metrics_path = os.path.join(output_dir, "metrics.json")
    if os.path.isfile(metrics_path):  # written by `hf-longdoc train`
        with open(metrics_path) as f:
            recorded = json.load(f)
        metrics = recorded.get("test", {}) if metrics is None else metrics
        dataset_name = dataset_name or recorded.get("dataset")
        if recorded.get("backbone") and training_data is None:
            training_data = (f"Fine-tuned from the pretrained `{recorded['backbone']}` on `{dataset_name}`."
                             if dataset_name else f"Fine-tuned from the pretrained `{recorded['backbone']}`.")
    repo_id = repo_id or f"your-name/{family.name}-model"
    card_data = ModelCardData(
        library_name="transformers",
        pipeline_tag="text-classification",
        tags=["hf_longdoc", family.name, "long-document-classification"],
        datasets=[dataset_name] if _is_hub_id(dataset_name) else None,
        model_name=repo_id.split("/")[-1],
    )
    text = CARD_TEMPLATE.format(
        card_data=card_data.to_yaml(),
        title=repo_id.split("/")[-1],
        summary=family.summary,
        family=family.name,
        paper_title=family.paper_title,
        architecture=_architecture(config, family),
        training_data=training_data or (f"`{dataset_name}`" if dataset_name else "Not recorded."),
        evaluation=_evaluation(metrics),
        reading=_reading(output_dir, config, family),
        limits=family.card_limits,
        repo_id=repo_id,
        citation=family.paper_citation,
    )
    return ModelCard(text)


def push_to_hub(output_dir, repo_id, dry_run=False, dry_run_dir=None, private=False, token=None):
    """Upload `output_dir` (card included) to `repo_id`; with `dry_run`, write exactly that folder and list it."""
    if not os.path.isfile(os.path.join(output_dir, "config.json")):
        raise ValueError(f"{output_dir!r} is not a saved model folder (no config.json); pass the `--output-dir` of "
                         "`hf-longdoc train` or a `save_pretrained` folder.")
    if "/" not in repo_id:
        raise ValueError(f"`repo_id` must look like USER/NAME, got {repo_id!r}.")
    staging = dry_run_dir or os.path.join(output_dir, "_hub_upload")
    if os.path.exists(staging):
        shutil.rmtree(staging)
    shutil.copytree(output_dir, staging, ignore=shutil.ignore_patterns("checkpoint-*", "_hub_upload", "runs"))
    make_model_card(staging, repo_id=repo_id).save(os.path.join(staging, "README.md"))  # names the real repo
    files = sorted(os.path.relpath(os.path.join(root, name), staging)
                   for root, _, names in os.walk(staging) for name in names)
    if not dry_run:
        api = HfApi(token=token)
        api.create_repo(repo_id, private=private, exist_ok=True)
        api.upload_folder(folder_path=staging, repo_id=repo_id, commit_message="Upload hf_longdoc model")
        shutil.rmtree(staging)
    return staging, files
