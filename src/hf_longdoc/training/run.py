"""One `hf-longdoc train` run: check the settings, load the data, build the model, fit it with the shared recipe
(`recipe`), score it and save it with its tokenizer, metrics and card (`evaluate` is in `training.evaluation`)."""

import dataclasses
import json
import logging
import os
import shutil
from dataclasses import dataclass

import torch
from datasets import DatasetDict
from transformers import (
    AutoConfig,
    AutoModel,
    set_seed,
)

from ..data import BUILTIN_TASK, has_tokenizer_files, load_task, load_tokenizer, save_tokenizer, tokenize
from ..inference.reading import reading_length
from ..metrics import score_name
from ..publishing.hub import make_model_card, public_name, push_to_hub
from ..saving.run_folder import RunFolder
from ..utils.distributed import on_main_then_share
from ..utils.parsing import settings_text
from .feasibility import check_fits, family_squares
from .head_fitting import FitPlan, new_parameter_names
from .recipe import (
    OPTIMIZER_ARGUMENTS,
    TimeBudget,
    batch_sizes,
    build_model,
    fit_model,
    fit_statistics,
    training_arguments,
    without_prefix,
    wrap_backbone,
)
from .settings import TRAIN_RECIPE, RunSettings, mixed_precision

logger = logging.getLogger(__name__)


def train(settings=None, /, **keywords):
    """Train a family on a dataset (or the built-in task), evaluate it on test, and save everything to its
    `output_dir`: the model (safetensors, config, source files), its tokenizer, `metrics.json` and a model card.
    Returns the metrics.

    `settings` is a `RunSettings` (as `Trainer` takes `TrainingArguments`); keyword arguments instead build one
    (`train(model="slstm", dataset="data.csv")`), with the fields documented there. All are checked before any data
    is read (on a copy: the caller's settings stay as given), and `output_dir` is replaced only when the run has
    succeeded (see `RunFolder`)."""
    if settings is None:
        settings = RunSettings.of(**keywords)
    elif keywords or not isinstance(settings, RunSettings):
        raise TypeError("train() takes a RunSettings, or its fields as keyword arguments; not "
                        + (f"both (got {sorted(keywords)} too)." if keywords else f"a {type(settings).__name__}."))
    run = dataclasses.replace(settings).resolve()
    check_run_fits(run)
    run_arguments(run, run.output_dir)  # built once now, so that Transformers checks every value before any data
    with RunFolder(run.output_dir, run.overwrite, run.resume, run.recorded()) as folder:
        set_seed(run.seed)
        task = load_run_task(run)
        model, tokenizer, max_length = build_run_model(run, task, folder.checkpoint)
        tokenizer.model_max_length = max_length  # set once, here: the saved tokenizer truncates where the model stops
        # and the saved model reads as much of a longer input, given whole (a `pipeline` without truncation=True); set
        # before training, so a model from --init-from trained at another length reads this run's
        model.config.max_input_length = max_length
        encoded = tokenize(task.data, tokenizer, max_length)
        fit_statistics(run.family, model, encoded["train"]["input_ids"], tokenizer)
        trainer, head_report, budget, validation = fit(run, task, model, tokenizer, encoded, folder)
        metrics = run_metrics(run, task, trainer, encoded, max_length, head_report, budget, validation)
        if folder.owner:  # under torchrun every process trained; the main one writes (`RunFolder.commit` waits)
            save(trainer, tokenizer, folder.staging, metrics, task.name, folder.target)
        folder.commit()
    if (hub := run.hub_push()) is not None and folder.owner:  # --push_to_hub: the finished folder, as `push` sends it
        push_to_hub(run.output_dir, hub["hub_model_id"], private=hub.get("hub_private_repo", True),
                    token=hub.get("hub_token"))
        logger.info("Pushed %s to the Hub as %s.", run.output_dir, hub["hub_model_id"])
    return metrics


def check_run_fits(run):
    """A ValueError before any data is read when the run's model cannot train in this machine's memory at its
    `max_length` and `batch_size` (`feasibility.check_fits`): a fresh model's config from the run's settings, or the
    pretrained checkpoint's."""
    if run.pretrained:
        config = AutoConfig.from_pretrained(run.backbone or run.init_from)

        def build(config):
            return AutoModel.from_config(config)
    else:
        config = run.family.build_config(**{"vocab_size": run.vocab_size, **run.config_overrides})
        build = run.family.classification_class
    # positions, not input ids: an elementwise model reads v bytes a position (v unknown before a backbone's model is
    # built: then only the parameters count, which keeps the estimate a low bound)
    per_position = 1
    if run.family.position_width:
        per_position = getattr(config, run.family.position_width, None) or run.max_length
    device = "cuda" if torch.cuda.is_available() else "cpu"
    check_fits(build, config, run.batch_size, max(1, run.max_length // per_position), True,
               f"Training this {run.family.name} model",
               "--config num_hidden_layers / hidden_size, --max-length or --batch-size", device,
               family_squares(run.family.square_bytes(config, run.batch_size, 4)))


@dataclass
class RunTask:
    """A run's data: the splits, the label names (ids in this order), single- or multi-label, the dataset's name,
    and the run's `extra_scores` computed on it."""

    data: DatasetDict
    label_names: list
    multi_label: bool
    name: str
    scores: dict


def load_run_task(run):
    """The `RunTask` of `run` (its `dataset`, or the built-in task), split with its seed."""
    data, label_names, multi_label, name = load_task(run.dataset, run.text_column, run.label_column, run.seed,
                                                     run.evidence, run.task_size, run.task_words, run.task_kind)
    scores = {key: score(data, multi_label) for key, score in (run.extra_scores or {}).items()}
    return RunTask(data, label_names, multi_label, name, scores)


def build_run_model(run, task, checkpoint=None):
    """(model, tokenizer, max_length): the family around `run.backbone`, from `run.init_from`, or fresh at its
    `train` defaults, with the run's tokenizer (fitted here when none is given); `max_length` is what the model really
    reads (`reading_length`, which logs a cut). A resumed run (`checkpoint`) must have built the same model."""
    family, tokenizer, model = run.family, run.tokenizer, None
    if run.backbone is not None:  # the backbone's tokenizer (or the one given): no WordPiece is fitted
        model, tokenizer = wrap_backbone(family, run.backbone, task.label_names, task.multi_label,
                                         run.config_overrides, run.max_length, tokenizer)
    elif tokenizer is None and checkpoint is not None and has_tokenizer_files(checkpoint):
        # the interrupted run's own: its weights were trained on those ids
        logger.info("Resuming with the tokenizer of the interrupted run (%s).", checkpoint)
        tokenizer = load_tokenizer(checkpoint, "`resume` (--resume)")
    elif tokenizer is None:
        config = family.build_config(**run.config_overrides)
        # fitted once, on the main process: two processes fitting the same texts (WordPiece trains on several
        # threads) got vocabularies of different sizes under torchrun; the others receive its tokenizer
        tokenizer = on_main_then_share(
            lambda: family.tokenizer_for(config, task.data["train"]["text"], run.vocab_size, run.max_length))
    if model is None:
        model = build_model(family, tokenizer, task.label_names, task.multi_label, run.config_overrides, run.init_from)
    if checkpoint is not None:
        resume_readout(family, model, checkpoint)
        check_resume_matches(checkpoint, model.config)
    length = reading_length(model.config, run.max_length)
    if (run.max_length is not None and length is not None and length < run.max_length and not run.pretrained
            and hasattr(model.config, "max_position_embeddings")
            and "max_position_embeddings" not in run.config_overrides):
        logger.warning("The model is trained from scratch: `--config max_position_embeddings=...` (more positions) "
                       "lets it read more of each document.")
    return model, tokenizer, length


def run_arguments(run, output_dir, multi_label=False, quiet=False):
    """The `TrainingArguments` of `run`'s fine-tuning (`training_arguments` with `train`'s recipe, `TRAIN_RECIPE`,
    and the user's fields), its checkpoints in `output_dir`, the best epoch chosen by the labels' score
    (`multi_label`). `train` builds them before reading any data, so that a value Transformers (or
    `check_trainer_arguments`) refuses stops the run at once, and again for Trainer (`quiet`)."""
    return training_arguments(output_dir, run.epochs, run.batch_size, run.learning_rate, run.seed,
                              report_to=run.report_to, metric_for_best_model=score_name(multi_label), logging_steps=20,
                              quiet=quiet, **TRAIN_RECIPE, **run.trainer_arguments())


def fit(run, task, model, tokenizer, encoded, folder):
    """The run's training (`fit_model`), evaluated on validation every epoch with the best epoch kept and each epoch
    checkpointed into the run's staging folder, within `run.time_budget`. Returns (trainer, the head stage's report,
    the `TimeBudget` or None, the kept model's validation `PredictionOutput` or None: `fit_model`'s)."""
    head_parameters = new_parameter_names(model, run.family if run.backbone is not None else None)
    if run.head_learning_rate is not None:
        logger.info("The %d new parameter tensors (%s, ...) learn at %g, the pretrained ones at %g.",
                    len(head_parameters), ", ".join(head_parameters[:3]), run.head_learning_rate, run.learning_rate)
    args = run_arguments(run, folder.staging, task.multi_label, quiet=True)  # checked and logged by `train`
    if run.stage.epochs and (fine_tuning_only := sorted(set(run.user_trainer_arguments()) & OPTIMIZER_ARGUMENTS)):
        logger.info("%s apply to fine-tuning; the head stage before it keeps its own optimizer (HeadStage).",
                    ", ".join(f"--{key}" for key in fine_tuning_only))
    budget = TimeBudget(run.time_budget, run.started) if run.time_budget is not None else None
    plan = FitPlan(args, run.stage, run.family, tuple(head_parameters), run.head_learning_rate, task.multi_label,
                   run.threshold, budget.deadline if budget else None)
    trainer, head_report, validation = fit_model(model, plan, encoded, tokenizer, folder.checkpoint,
                                                 callbacks=[budget] if budget else [])
    if task.multi_label:  # the threshold is part of the model: config.json carries it to evaluate and pipelines
        # (set after training, so a checkpoint's config still matches a resumed run's, `check_resume_matches`)
        model.config.multi_label_threshold = run.threshold
    return trainer, head_report, budget, validation


def run_metrics(run, task, trainer, encoded, max_length, head_report, budget=None, validation=None):
    """What `metrics.json` records: the run's settings that shape the result, test and validation scores
    (`validation`: the kept model's `PredictionOutput` on validation where `fit_model` already made it)."""
    test = trainer.evaluate(encoded["test"], metric_key_prefix="test")
    validation = (validation.metrics if validation is not None
                  else trainer.evaluate(encoded["validation"], metric_key_prefix="validation"))
    builtin = run.dataset in (None, BUILTIN_TASK)
    metrics = {
        "model": run.model,
        "dataset": public_name(task.name),  # a local file by its name: metrics.json is uploaded by `push`
        "max_length": max_length,
        "backbone": run.backbone,
        "head_learning_rate": run.head_learning_rate,
        "freeze_backbone": run.freeze_backbone,
        "mixed_precision": mixed_precision(run.bf16, run.fp16),
        "head_stage": head_report,
        "time_budget": budget.report() if budget is not None else None,
        "training": fine_tuning_run(trainer, run),
        "batch_size": batch_sizes(trainer.args),
        "split_seed": run.seed,
        "task": {"evidence": run.evidence, "task_size": run.task_size, "task_words": run.task_words,
                 "kind": run.task_kind}
        if builtin else None,
        "sizes": {split: len(part) for split, part in encoded.items()},
        "test": without_prefix(test, "test"),
        "validation": without_prefix(validation, "validation"),
    }
    metrics.update(task.scores)
    return metrics


def fine_tuning_run(trainer, run):
    """What fine-tuning ran, from Trainer's state: optimizer steps, epochs (fewer than planned when `--max_steps` or
    the time budget stopped it; more when `--max_steps` asked for more), the planned epochs and `--max_steps` (None:
    not set); None when only the head trained, on cached features (`head_stage` records it)."""
    if not run.stage.trains_end_to_end:
        return None
    state, max_steps = trainer.state, trainer.args.max_steps
    return {"optimizer_steps": state.global_step, "epochs": round(state.epoch or 0.0, 4),
            "planned_epochs": run.epochs, "max_steps": max_steps if max_steps > 0 else None}


# Config entries that say how a model is called or where it came from, not what it is
RESUME_IGNORED = {"transformers_version", "architectures", "auto_map", "_name_or_path", "dtype", "torch_dtype",
                  "return_dict", "output_hidden_states", "output_attentions", "use_cache", "id2label", "label2id",
                  "max_input_length"}  # the run's reading length: set after the model is built


def resume_readout(family, model, checkpoint):
    """Put in `model` the head the interrupted run's head stage kept, when it chose another of the family's
    `readout_choices` (e.g. `variant_candidates`) than the one configured: the checkpoint's weights are that head's,
    and the resumed run goes on fine-tuning it."""
    saved = AutoConfig.from_pretrained(checkpoint)
    for changes in family.readout_choices(model.config):
        if all(getattr(saved, key, None) == value for key, value in changes.items()):
            family.set_readout(model, changes)
            logger.info("Resuming with the head the interrupted run's head stage kept (%s).", settings_text(changes))
            return


def check_resume_matches(checkpoint, config):
    """A ValueError naming every setting where the model this run built differs from the one in `checkpoint`
    (labels, width, depth, ...): Trainer would fail deep inside loading the state, or continue another model."""
    from ..saving.saved_models import require_safe_weights

    require_safe_weights(checkpoint, "`resume` (--resume): the checkpoint", need_weights=False)  # never unpickled
    saved, built = AutoConfig.from_pretrained(checkpoint).to_dict(), config.to_dict()  # both with their defaults
    labels_there, labels_here = (list(dict(sorted(c["id2label"].items(), key=lambda kv: int(kv[0]))).values())
                                 for c in (saved, built))
    if labels_there != labels_here:
        raise ValueError(f"`resume` (--resume): the interrupted run in {checkpoint!r} has the labels {labels_there}, "
                         f"this run's data has {labels_here}; pass the same dataset and --label-column, or train "
                         "without --resume.")
    differ = sorted(key for key in set(saved) | set(built) if key not in RESUME_IGNORED
                    and json.dumps(saved.get(key), sort_keys=True, default=str)
                    != json.dumps(built.get(key), sort_keys=True, default=str))
    if differ:
        shown = "; ".join(f"{key}: {saved.get(key)!r} there, {built.get(key)!r} here" for key in differ[:6])
        raise ValueError(f"`resume` (--resume): the interrupted run in {checkpoint!r} built another model ({shown}); "
                         "pass the same --model, --config, --max-length and --vocab-size, or train without "
                         "--resume.")


def replace_pickles(arguments, output_dir, target_dir=None):
    """Leave nothing pickled in a finished run's `output_dir`: Trainer's checkpoints (optimizer.pt, scheduler.pt,
    rng_state.pth, training_args.bin) removed, and its pickled `arguments` written as training_args.json instead
    (their output_dir: `target_dir`, where the run goes, else `output_dir`)."""
    for name in os.listdir(output_dir):
        if name.startswith("checkpoint-"):
            shutil.rmtree(os.path.join(output_dir, name))
    if os.path.exists(os.path.join(output_dir, "training_args.bin")):
        os.remove(os.path.join(output_dir, "training_args.bin"))
    recorded = json.loads(arguments.to_json_string())
    recorded["output_dir"] = target_dir or output_dir
    with open(os.path.join(output_dir, "training_args.json"), "w") as f:
        json.dump(recorded, f, indent=2, sort_keys=True)


def save(trainer, tokenizer, output_dir, metrics, dataset_name, target_dir=None):
    """Write the trained model, its tokenizer, the arguments as JSON, `metrics.json` and the model card into
    `output_dir` (the run's staging folder; `target_dir` is where it goes, recorded as the arguments' output_dir)."""
    trainer.save_model(output_dir)  # model + tokenizer (processing_class); checkpoints are removed below
    save_tokenizer(tokenizer, output_dir)  # again, under a class name Transformers 4 loads too
    replace_pickles(trainer.args, output_dir, target_dir)
    with open(os.path.join(output_dir, "metrics.json"), "w") as f:
        json.dump(metrics, f, indent=2)
    make_model_card(output_dir, dataset_name=dataset_name).save(os.path.join(output_dir, "README.md"))
