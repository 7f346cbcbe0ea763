"""The recipe every training follows, `train`'s and `compare`'s alike: the `TrainingArguments` a run starts from (and
the user's own fields merged into them), the models built fresh or around a pretrained backbone, the Trainer whose
new parameters learn at their own rate, the head stage then fine-tuning (`fit_model`), and the time budget.

`training` runs one `hf-longdoc train` with it; `experiments.compare` runs every model of a comparison with it.
"""

import logging
import os
import time

import torch
from transformers import (
    AutoConfig,
    DataCollatorWithPadding,
    PreTrainedConfig,
    Trainer,
    TrainerCallback,
    TrainingArguments,
)

from ..data import load_tokenizer
from ..metrics import compute_metrics_fn, prediction_logits
from ..modeling import Family, get_family
from ..saving.run_folder import RunDiverged
from ..utils.rules import POSITIVE_INTEGER
from .head_fitting import head_parameter_names, keep_the_better
from .settings import RECIPE_DECIDES

logger = logging.getLogger(__name__)


# TrainingArguments fields that shape Trainer's optimisation, which the head stage's own loop does not read
OPTIMIZER_ARGUMENTS = {"optim", "optim_args", "adam_beta1", "adam_beta2", "adam_epsilon", "gradient_accumulation_steps",
                       "max_grad_norm", "warmup_steps", "lr_scheduler_kwargs", "label_smoothing_factor", "max_steps"}


def training_arguments(output_dir, epochs=3, batch_size=8, learning_rate=1e-3, seed=42, given=None, decides=None,
                       quiet=False, **overrides):
    """The `TrainingArguments` every hf_longdoc run starts from: linear schedule with 10% warm-up, weight decay 0.01,
    seeded data order, no reporting, the CPU when there is no GPU; `overrides` add or replace any argument (the
    recipe of `train` or `compare`). `given` are the user's own TrainingArguments fields: each replaces the recipe's
    value (logged), except where the recipe decides (`decides`: each field with the reason; None: `train`'s,
    `RECIPE_DECIDES`), where a different value is refused. The arguments are then checked as Trainer would check them
    only once training starts (`check_trainer_arguments`); every error is a ValueError of one line naming the flags.
    `quiet`: log nothing (the run built and logged the same arguments already, before reading any data)."""
    settings = dict(output_dir=output_dir, num_train_epochs=epochs, per_device_train_batch_size=batch_size,
                    per_device_eval_batch_size=batch_size, learning_rate=learning_rate, weight_decay=0.01,
                    warmup_steps=0.1, lr_scheduler_type="linear", seed=seed, data_seed=seed, report_to="none",
                    use_cpu=not torch.cuda.is_available(), dataloader_num_workers=0)
    settings.update(overrides)
    decides = RECIPE_DECIDES if decides is None else decides
    given = given or {}
    for key, value in given.items():
        if key in decides and key not in settings:  # a field the recipe leaves unset: no value of it can apply
            raise ValueError(f"--{key} {value!r} cannot apply: {decides[key]}.")
        if key in decides and settings[key] != value:
            raise ValueError(f"--{key} {value!r} cannot apply: this run sets it to {settings[key]!r} because "
                             f"{decides[key]}.")
        if key in settings and settings[key] != value and not quiet:
            logger.info("TrainingArguments: --%s %r replaces the recipe's %r.", key, value, settings[key])
        settings[key] = value
    if (given.get("max_steps") or -1) > 0 and not quiet:  # Trainer: steps above 0 override the epochs
        logger.warning("--max_steps %d replaces the epochs (%g): fine-tuning stops after %d optimizer steps, whatever "
                       "the epochs (the steps and epochs that ran are recorded with the results).", given["max_steps"],
                       epochs, given["max_steps"])
    try:
        args = TrainingArguments(**settings)
    except (ValueError, TypeError, ImportError, NotImplementedError) as error:  # Transformers' own checks
        flags = " ".join(f"--{key} {value!r}" for key, value in given.items())
        raise ValueError(f"TrainingArguments refuses {flags or 'the recipe'}: {' '.join(str(error).split())}") \
            from None
    check_trainer_arguments(args)
    return args


# TrainingArguments counts that Transformers leaves unchecked and Trainer divides by or batches with (0 is a
# ZeroDivisionError after the data is tokenized)
POSITIVE_COUNTS = ("gradient_accumulation_steps", "per_device_eval_batch_size")


def check_trainer_arguments(args):
    """A ValueError naming the flag for what `TrainingArguments` accepts and Trainer finds wrong only when it starts,
    after the data is read: a count of 0 (`POSITIVE_COUNTS`), and a `--report_to` integration that cannot run here
    (wandb not installed: Transformers' own message, from building its callback as Trainer does)."""
    from transformers.integrations import get_reporting_integration_callbacks

    for name in POSITIVE_COUNTS:
        POSITIVE_INTEGER.check(getattr(args, name), name, name)
    try:
        callbacks = get_reporting_integration_callbacks(args.report_to)
    except ValueError as error:  # a name Transformers does not know
        raise ValueError(f"--report_to: {error}") from None
    for name, callback in zip(args.report_to, callbacks):
        try:
            callback()  # what Trainer builds; only the logger's import and its checks, no run is started
        except (RuntimeError, ImportError, ValueError) as error:
            raise ValueError(f"--report_to {name}: {' '.join(str(error).split())}") from None


class HeadRateTrainer(Trainer):
    """A `Trainer` that stops on divergence and whose new parameters (`head_parameters`, names) learn at
    `head_learning_rate` while the pretrained ones keep `args.learning_rate`; the schedule scales both alike. A head
    that starts from random weights is far from where it should be, while the pretrained body must move little: one
    rate for both either leaves the head barely trained within one epoch or disturbs the body (per-group rates as in
    ULMFiT's discriminative fine-tuning, Howard & Ruder 2018, https://arxiv.org/abs/1801.06146; measured:
    https://github.com/hf-longdoc/hf_longdoc/blob/main/docs/results.md#evidence-past-token-512-real-documents).
    Without `head_learning_rate` it is a plain `Trainer` for the rates.

    Divergence is an error (`RunDiverged`, naming the rates): a non-finite training loss stops the run at that step,
    where Trainer would filter it out of the logs (`logging_nan_inf_filter`) and go on to save NaN weights as a
    result."""

    def __init__(self, *args, head_parameters=(), head_learning_rate=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.head_parameters, self.head_learning_rate = set(head_parameters), head_learning_rate

    def training_step(self, model, inputs, num_items_in_batch=None):
        loss = super().training_step(model, inputs, num_items_in_batch)
        if not torch.isfinite(loss).all():
            raise RunDiverged(f"Training diverged at step {self.state.global_step + 1}: the loss is {loss.item()} "
                              f"{self.rates()}. Nothing was saved as a result; lower --learning-rate (e.g. 1e-4 to "
                              "fine-tune, 1e-3 from scratch).")
        return loss

    def rates(self):
        """The learning rates of the run, in words, for an error message."""
        text = f"with learning_rate={self.args.learning_rate:g}"
        return text + (f" and head_learning_rate={self.head_learning_rate:g}" if self.head_learning_rate else "")

    def check_finite_weights(self):
        """A `RunDiverged` when a trained weight is NaN or infinite (the last optimizer step can make them so after
        the last finite loss)."""
        broken = [name for name, p in self.model.named_parameters() if not torch.isfinite(p).all()]
        if broken:
            raise RunDiverged(f"Training diverged: {len(broken)} weight tensors ({', '.join(broken[:3])}, ...) are "
                              f"NaN or infinite {self.rates()}. Nothing was saved as a result; lower "
                              "--learning-rate.")

    def create_optimizer(self, model=None):
        fresh = self.optimizer is None
        optimizer = super().create_optimizer(model)
        if not fresh or self.head_learning_rate is None or not self.head_parameters:
            return optimizer
        model = self.model if model is None else model
        head = {id(p) for name, p in model.named_parameters() if name in self.head_parameters}
        for group in list(optimizer.param_groups):  # before the first step: no optimizer state to move
            moved = [p for p in group["params"] if id(p) in head]
            if moved:
                group["params"] = [p for p in group["params"] if id(p) not in head]
                settings = {key: value for key, value in group.items() if key != "params"}
                optimizer.add_param_group({**settings, "params": moved, "lr": self.head_learning_rate})
        return optimizer


def label_settings(label_names, multi_label):
    """The config's label settings: `num_labels`, `id2label`, `label2id` and `problem_type`."""
    return dict(
        num_labels=len(label_names),
        id2label=dict(enumerate(label_names)),
        label2id={name: i for i, name in enumerate(label_names)},
        problem_type="multi_label_classification" if multi_label else "single_label_classification",
    )


def build_model(family, tokenizer, label_names, multi_label, config_overrides=None, init_from=None, size=None):
    """A classification model of `family` (a `Family` or its name) for the tokenizer and the labels: fresh, sized by
    `size` (the family's `from_size` arguments) or by the family's `hf-longdoc train` defaults; or with the encoder
    weights of the model saved in `init_from` (e.g. a masked-LM pre-training run) and a new classification head."""
    family = family if isinstance(family, Family) else get_family(family)
    labels = label_settings(label_names, multi_label)
    if init_from is not None:
        saved = AutoConfig.from_pretrained(init_from)
        if saved.model_type != family.config_class.model_type:
            raise ValueError(f"`init_from` holds a {saved.model_type!r} model, not {family.name!r}; pass the matching "
                             "--model or another folder.")
        if saved.vocab_size < len(tokenizer):
            raise ValueError(f"The tokenizer has {len(tokenizer)} ids but the model in {init_from} knows "
                             f"{saved.vocab_size}; fine-tune with the tokenizer saved alongside it.")
        return family.classification_class.from_pretrained(init_from, **labels, **(config_overrides or {}))
    settings = dict(vocab_size=len(tokenizer), pad_token_id=tokenizer.pad_token_id, **labels)
    settings.update(family.token_settings(tokenizer))
    settings.update(config_overrides or {})
    return family.classification_class(family.build_config(size, **settings))


def wrap_backbone(family, backbone, label_names, multi_label, config_overrides=None, max_length=4096, tokenizer=None):
    """(model, tokenizer): `family` (a `Family`) around the pretrained `backbone` (a folder or Hub id; the family's
    registry `from_backbone`), reading up to `max_length` input ids (None: as many as the model can), with a new
    classification head for the labels. The tokenizer is `tokenizer` (a folder, a Hub id or an object), else the
    backbone's own (or the family's, for the elementwise bytes). The settings are checked already
    (`settings.check_backbone` runs once per run, before any data is read), and the tokenizer's `model_max_length`
    is left as it is: the caller sets it from `reading_length` before tokenizing."""
    backbone = os.fspath(backbone) if isinstance(backbone, os.PathLike) else backbone
    if isinstance(tokenizer, str):
        tokenizer = load_tokenizer(tokenizer, "`tokenizer` (--tokenizer)")
    elif tokenizer is None and not family.has_own_tokenizer:  # the backbone's own: refused when it has none
        tokenizer = load_tokenizer(backbone, "`backbone` (--backbone)", "save the backbone's tokenizer there with "
                                   "`tokenizer.save_pretrained`, or pass --tokenizer")
    settings = {**label_settings(label_names, multi_label), **(config_overrides or {})}
    model, tokenizer = family.from_backbone(backbone, tokenizer, max_length, **settings)
    if tokenizer.pad_token is None:
        raise ValueError(f"The tokenizer of `backbone` {backbone!r} has no pad token; set one and save it there, or "
                         "pass a tokenizer with one.")
    return model, tokenizer


def fit_statistics(family, model, train_input_ids, tokenizer):
    """Fit what the family computes from the training documents before training (the sparse-map Longformer's TF-IDF
    and PMI statistics), unless the model holds it already (a model started from a fitted one)."""
    report = family.fit_statistics(model, train_input_ids, tokenizer)  # None: nothing to fit (the default)
    if report is not None:
        logger.info("Fitted the statistics of %s on %d training documents: %s", family.name, report["documents"],
                    report)


class TimeBudget(TrainerCallback):
    """Stops fine-tuning after the step at which `minutes` since `started` (a `time.monotonic()` reading) have
    passed. Trainer then ends the epoch as it ends any (evaluating and saving it, with `eval_strategy="epoch"`) and
    loads the best epoch, so a budget cuts training short without losing the best model."""

    def __init__(self, minutes, started):
        self.minutes, self.deadline, self.stopped_at_step = minutes, started + 60 * minutes, None

    def on_step_end(self, args, state, control, **kwargs):
        if self.stopped_at_step is None and time.monotonic() >= self.deadline:
            self.stopped_at_step = state.global_step
            control.should_training_stop = True
            logger.warning("The time budget of %g minutes is spent: fine-tuning stops after step %d of %d (epoch "
                           "%.2f); the best model so far is kept.", self.minutes, state.global_step, state.max_steps,
                           state.epoch)
        return control

    def report(self):
        """What `metrics.json` records: the budget, and the step it stopped training at (None: it did not)."""
        return {"minutes": self.minutes, "stopped_at_step": self.stopped_at_step}


def master_weights_in_float32(model, mixed_precision=False):
    """Cast a model with weights not in float32 (a bf16 or fp16 checkpoint: Transformers loads it in the dtype it was
    saved in) to float32, config included (each sub-model's too, so a model rebuilt from the saved config is float32),
    logging it: training keeps float32 weights, and --bf16/--fp16 mixed precision computes in half precision from
    them (Trainer cannot unscale fp16 gradients of fp16 weights)."""
    stored = {parameter.dtype for parameter in model.parameters() if parameter.is_floating_point()}
    if not stored - {torch.float32}:
        return
    logger.warning("The model's weights are %s; training casts them to float32%s.",
                   ", ".join(sorted(str(dtype).removeprefix("torch.") for dtype in stored)),
                   "" if mixed_precision else " (--bf16 or --fp16 computes in half precision from them)")
    model.float()
    for module in model.modules():
        if isinstance(getattr(module, "config", None), PreTrainedConfig):
            module.config.dtype = torch.float32


def fit_model(model, plan, encoded, tokenizer, checkpoint=None, callbacks=()):
    """The recipe every run trains with (`train` and `compare`), as `plan` (a `FitPlan`) says: the head stage on
    cached frozen features where it applies (`HeadStage`), then Trainer end to end with `plan.args` unless only the
    head trains; the head stage's warm start is kept instead when fine-tuning ends clearly below it on validation
    (`keep_the_better`). `checkpoint`: resume an interrupted run from there (its head comes from the checkpoint);
    `callbacks` go to Trainer. Returns (trainer, the head stage's report, the kept model's `PredictionOutput` on
    validation, its metrics prefixed `validation_`: the pass the paired test read, reused by the caller; None when
    the test did not run or returned to the warm start, whose scores came from cached features)."""
    args = plan.args
    master_weights_in_float32(model, args.bf16 or args.fp16)
    model.to(args.device)  # the head stage encodes where Trainer will train
    head_report, warm = plan.stage.run(model, plan, encoded, tokenizer, fit=checkpoint is None)
    # the head the stage kept may be another readout than the one built (`fit_readouts`): its parameters are new
    head_parameters = head_parameter_names(model, plan) if head_report and "readout" in head_report \
        else plan.head_parameters
    trainer = HeadRateTrainer(
        model=model, args=args, head_parameters=head_parameters, head_learning_rate=plan.head_learning_rate,
        train_dataset=encoded["train"], eval_dataset=encoded["validation"],
        data_collator=DataCollatorWithPadding(tokenizer), processing_class=tokenizer,
        compute_metrics=compute_metrics_fn(plan.multi_label, plan.threshold), callbacks=list(callbacks),
    )
    if plan.stage.trains_end_to_end:
        trainer.train(resume_from_checkpoint=checkpoint)
    trainer.check_finite_weights()
    validation = None
    if warm is not None:  # the warm start competes with the fine-tuned model (Trainer's best epoch) on validation
        validation = trainer.predict(encoded["validation"], metric_key_prefix="validation")
        head_report["kept"], counts = keep_the_better(model, warm, prediction_logits(validation.predictions),
                                                      validation.label_ids, plan.multi_label, plan.threshold)
        head_report.update(counts)
        if head_report["kept"]:
            validation = None  # of the model fine-tuning left, not of the warm start now in place
    return trainer, head_report, validation


def batch_sizes(args):
    """The batch of a run as the card and reports give it: documents per process (`--batch-size`), the processes
    (torchrun's), the batches accumulated per step, and the documents per optimizer step (their product)."""
    processes, accumulation = args.world_size, args.gradient_accumulation_steps
    return {"per_process": args.per_device_train_batch_size, "processes": processes,
            "gradient_accumulation": accumulation,
            "per_optimizer_step": args.per_device_train_batch_size * processes * accumulation}


def without_prefix(metrics, split):
    """Trainer's `{split}_accuracy`-style metrics as `accuracy` (its unprefixed `epoch` is dropped)."""
    return {key[len(split) + 1:]: value for key, value in metrics.items() if key.startswith(split + "_")}
