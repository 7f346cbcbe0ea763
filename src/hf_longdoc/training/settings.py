"""The settings of training: documented argument by argument and validated once, before any data is read.

`TrainingOptions` holds what every training shares (data columns, length, epochs, batch, rates, schedule, backbone,
head stage, time budget, precision) and checks it; `RunSettings` (what `training.train` and `hf-longdoc train` take)
and `experiments.settings.CompareSettings` (what `compare` takes) add their own, as Transformers' `TrainingArguments`
is what `Trainer` takes. `RunSettings.resolve` checks every argument (numbers, rates, labels, the family and its
settings, the backbone folder, the tokenizer, the head stage) and resolves what the rest of the run reads: the family,
its learning rate, the tokenizer and the head stage. `option` declares a settings field and its flag at once, for every
verb's settings (`commands.options.add_settings_arguments` reads it).
"""

import logging
import os
import time
from dataclasses import dataclass, field, fields
from typing import Any

from ..utils.catalog import FAMILY_NAMES
from ..utils.parsing import is_hub_id, option, parse_config_overrides, settings_of, word_pair
from ..utils.rules import (
    DEFAULT_THRESHOLD,
    LEARNING_RATE,
    MAX_LENGTH,
    NON_NEGATIVE_INTEGER,
    POSITIVE_INTEGER,
    POSITIVE_NUMBER,
    SEED,
    THRESHOLD,
    VOCAB_SIZE,
)

# Nothing heavy is imported here: `hf-longdoc train --help` builds its flags from these dataclasses without torch,
# Transformers or the model code, which the checks import when they run.

logger = logging.getLogger(__name__)
TRAIN_EPOCHS = 4  # unless the user sets them, or the family from pretrained weights (`Family.backbone_epochs`)


# What `--dataset` reads, for every verb that reads labelled data (`data.layouts` decides a folder's layout).
DATASET_HELP = ("Hub id; local .csv/.tsv/.json/.jsonl/.parquet file; or a folder, read in the layout its files show: "
                "written by `save_to_disk` (a DatasetDict: its splits; a Dataset), data files as "
                "`datasets.load_dataset(folder)` finds them (data/train-00000-of-00001.parquet, train.csv, test.jsonl, "
                "...: splits named in file names are used as given), or LABEL/*.txt files (one folder per class); "
                "None: the built-in long-document task")


@dataclass(kw_only=True)
class TrainingOptions:
    """How a model trains: the options `train` (`RunSettings`) and `compare` (`CompareSettings`) share, documented and
    checked here once, as Transformers' `TrainingArguments` (each field's `help` is its flag's help; the flag is the
    name with dashes or underscores). Where an option is a `TrainingArguments` field (`epochs` is `num_train_epochs`,
    `batch_size` `per_device_train_batch_size`), the CLI takes Transformers' name and ours as an alias.

    `training_args` holds any other `TrainingArguments` field by its own name (`gradient_accumulation_steps`,
    `optim`, `report_to`, `torch_compile`, `fsdp`, `deepspeed`, ...): it goes to Trainer's fine-tuning as given. What
    the recipe decides itself (every epoch evaluated and the best one kept, where checkpoints go) refuses a value
    that contradicts it; a value that replaces one of the recipe's defaults (the 10% warm-up) is logged.
    """

    dataset: Any = option(None, DATASET_HELP, type=str)
    text_column: str = option("text", "the column holding the document, or several comma-separated (title,text), "
                                      "joined")
    label_column: str = option("label", "class name/id, or a list of labels (multi-label)")
    max_length: int = option(4096, "tokens (bytes for elementwise) a document is read up to; longer ones are cut "
                                   "(logged); a model that reads less cuts there", type=MAX_LENGTH.parse)
    vocab_size: int = option(8000, "ids of the WordPiece tokenizer fitted on the training split when no tokenizer is "
                                   "given", type=VOCAB_SIZE.parse)
    epochs: float | None = option(None, "training epochs (None: 4; from pretrained weights, the family's fine-tuning "
                                        "epochs)", type=POSITIVE_NUMBER.parse, trainer="num_train_epochs")
    batch_size: int = option(8, "documents per training step per process (under torchrun each process reads this "
                                "many: a step reads it x the processes x --gradient_accumulation_steps; the model "
                                "card gives all three)", type=POSITIVE_INTEGER.parse,
                             trainer="per_device_train_batch_size")
    learning_rate: float | None = option(None, "None: the family's (2e-3 Contextualizer, 1e-3 S-LSTM, 1e-4 the "
                                               "Transformers; from pretrained weights the family's fine-tuning rate: "
                                               "2e-5 sparse_longformer)", type=LEARNING_RATE.parse,
                                         trainer="learning_rate")
    weight_decay: float = option(0.01, "AdamW weight decay", type=float, trainer="weight_decay")
    lr_scheduler: str = option("linear", "a Transformers schedule after the warm-up (linear, cosine, "
                                         "constant_with_warmup, ...)", metavar="NAME", trainer="lr_scheduler_type")
    backbone: str | None = option(None, "a pretrained checkpoint (folder or Hub id) the models are built around, "
                                        "with its tokenizer (docs/models.md, \"Pretrained backbones\")", type=str,
                                  metavar="PATH_OR_ID")
    head_learning_rate: float | None = option(None, "from pretrained weights: the rate of the parameters they do not "
                                                    "supply (the head; elementwise: also the byte embeddings); None: "
                                                    "--learning-rate", type=LEARNING_RATE.parse)
    freeze_backbone: bool = option(False, "from pretrained weights: train only the new head (on features the frozen "
                                          "backbone computes once, where the family can cache them)")
    head_epochs: int | None = option(None, "from pretrained weights: epochs of the new head on cached frozen features "
                                           "before fine-tuning (linear probing, then fine-tuning); 0 skips it; None: "
                                           "50 where the family caches features (stopping 10 epochs after the best "
                                           "validation score), else 0", type=NON_NEGATIVE_INTEGER.parse)
    time_budget: float | None = option(None, "minutes of training (train: the whole run from its start; compare: "
                                             "each model's training): fine-tuning stops after the step that reaches "
                                             "them, evaluates that partial epoch and keeps the best model so far; "
                                             "None: the epochs alone", type=POSITIVE_NUMBER.parse, metavar="MINUTES")
    bf16: bool = option(False, "mixed precision in bfloat16 (a GPU, or a CPU with AVX-512 BF16 / AMX); weights stay "
                               "float32", trainer="bf16")
    fp16: bool = option(False, "mixed precision in float16 (a CUDA GPU); weights stay float32", trainer="fp16")
    overwrite: bool = option(False, "replace files in the output folder that hf-longdoc did not write (or that were "
                                    "edited) but that a run writes, and discard an interrupted run kept beside it")
    training_args: dict | None = None  # other TrainingArguments fields, by name (the CLI's unknown flags)

    STARTS_FROM = "--backbone"  # the flags that give pretrained weights (for an error message)

    @property
    def pretrained(self):
        """Whether the models start from pretrained weights."""
        return self.backbone is not None

    def check(self):
        """A ValueError naming the option (and its CLI flag) for a value no run can use, before anything is loaded:
        `max_length` 0 or 1 would silently turn truncation off, `epochs` inf would never end; a warning for a rate far
        above what fine-tuning uses."""
        MAX_LENGTH.check(self.max_length, "max_length", "max-length")
        if self.epochs is not None:  # None: each model's own
            POSITIVE_NUMBER.check(self.epochs, "epochs", "epochs")
        POSITIVE_INTEGER.check(self.batch_size, "batch_size", "batch-size")
        VOCAB_SIZE.check(self.vocab_size, "vocab_size", "vocab-size")
        for name in ("learning_rate", "head_learning_rate"):
            rate = getattr(self, name)
            if rate is None:
                continue
            LEARNING_RATE.check(rate, name, name.replace("_", "-"))
            if rate > 1:
                logger.warning("`%s`=%g is far above what AdamW fine-tunes with (1e-5 to 1e-2); a run that diverges "
                               "stops with an error.", name, rate)
        check_lr_scheduler(self.lr_scheduler)
        check_head_learning_rate(self.head_learning_rate, self.pretrained, self.STARTS_FROM)
        if self.time_budget is not None:
            POSITIVE_NUMBER.check(self.time_budget, "time_budget", "time-budget")
        check_mixed_precision(self.bf16, self.fp16)
        self.check_training_args()

    def trainer_arguments(self):
        """The options as `TrainingArguments` keywords (besides the epochs, batch, rate and seed `training_arguments`
        takes by position), and the user's `training_args` as `given` (`training_arguments` merges them)."""
        return dict(weight_decay=self.weight_decay, lr_scheduler_type=self.lr_scheduler, bf16=self.bf16, fp16=self.fp16,
                    given=self.user_trainer_arguments())

    def user_trainer_arguments(self):
        """The user's `training_args` that go to Trainer (the Hub ones are the run's: `RunSettings.hub_push`)."""
        return {key: value for key, value in (self.training_args or {}).items() if key not in HUB_ARGUMENTS}

    def check_training_args(self):
        """A TypeError or ValueError naming the field, before any data is read, for a `training_args` entry that is
        not a `TrainingArguments` field or that one of these options already sets (its flag is an alias)."""
        from transformers import TrainingArguments

        given = self.training_args or {}
        if not isinstance(given, dict):
            raise TypeError(f"`training_args` must be a dict of TrainingArguments fields, got {type(given).__name__}.")
        known = {f.name for f in fields(TrainingArguments) if f.init}
        if unknown := sorted(set(given) - known):
            raise ValueError(f"`training_args` has {', '.join(unknown)}, which TrainingArguments does not take "
                             f"(Transformers {__import__('transformers').__version__}).")
        owned = {f.metadata["trainer"]: f.name for f in fields(self) if "trainer" in f.metadata}
        if clash := sorted(set(given) & set(owned)):
            raise ValueError("`training_args` sets " + ", ".join(f"{key} (the option `{owned[key]}`)" for key in clash)
                             + ": set those options instead; on the command line both spellings are one flag.")
        for key in sorted(set(given) & set(IGNORED_ARGUMENTS)):
            logger.warning("--%s has no effect: %s", key, IGNORED_ARGUMENTS[key])


# TrainingArguments fields the recipe sets for a reason a user's value would break, with the reason; a field the
# recipe leaves unset (`save_steps`: Trainer reads it only with --save_strategy steps) is refused whatever its value,
# since the user who gives it expects an effect it cannot have
RECIPE_DECIDES = {
    "eval_strategy": "every epoch is evaluated on validation, so that the best one is kept",
    "eval_steps": "every epoch is evaluated on validation (--eval_strategy epoch), so that the best one is kept; "
                  "Trainer reads --eval_steps only with --eval_strategy steps",
    "eval_delay": "every epoch is evaluated on validation, from the first, so that the best one is kept",
    "save_strategy": "every epoch is checkpointed, so that the best one is kept and an interrupted run resumes",
    "save_steps": "every epoch is checkpointed (--save_strategy epoch), so that the best one is kept and an "
                  "interrupted run resumes; Trainer reads --save_steps only with --save_strategy steps",
    "load_best_model_at_end": "the best epoch on validation is the saved model",
    "metric_for_best_model": "the best epoch is the one with the best validation accuracy (micro F1 multi-label)",
    "greater_is_better": "the best epoch is the one with the best validation accuracy (micro F1 multi-label)",
    "save_total_limit": "one checkpoint is kept beside the run: the best epoch",
    "output_dir": "checkpoints go to the run's staging folder; --output-dir names where the model goes",
    "resume_from_checkpoint": "pass --resume to continue the interrupted run in --output-dir",
}
# what `train` sets them to (`metric_for_best_model` follows the labels: accuracy, or micro F1 multi-label)
TRAIN_RECIPE = dict(eval_strategy="epoch", save_strategy="epoch", save_total_limit=1, load_best_model_at_end=True,
                    greater_is_better=True, eval_delay=0)
# what `compare` sets them to: each model trains in a temporary folder and is measured once its training ends
COMPARE_RECIPE = dict(eval_strategy="no", save_strategy="no", logging_strategy="no", disable_tqdm=True)
MEASURED_WHEN_TRAINED = ("compare trains each model for its epochs and measures it once, on test, when its training "
                         "ends: it evaluates nothing during training and keeps no checkpoint")
COMPARE_DECIDES = {
    **{key: MEASURED_WHEN_TRAINED for key in ("eval_strategy", "eval_steps", "eval_delay", "save_strategy",
                                              "save_steps", "load_best_model_at_end", "metric_for_best_model",
                                              "greater_is_better", "save_total_limit")},
    "resume_from_checkpoint": "compare trains every model afresh",
}
# TrainingArguments fields that only pick which stages Transformers' example scripts run
IGNORED_ARGUMENTS = {name: "train always trains, keeps the best epoch on validation and tests the kept model"
                     for name in ("do_train", "do_eval", "do_predict")}
# TrainingArguments fields that publish the finished model: `train` pushes its output folder (`hub.push_to_hub`)
HUB_ARGUMENTS = ("push_to_hub", "hub_model_id", "hub_token", "hub_private_repo")


@dataclass(kw_only=True)
class RunSettings(TrainingOptions):
    """One training run: what `training.train` (and `hf-longdoc train`) takes, as `Trainer` takes
    `TrainingArguments`. The options every training shares are `TrainingOptions`'; a run adds the fields below (each
    one's `help` says what it does). `epochs`, `learning_rate` None: 4 epochs at the family's rate; from pretrained
    weights the family's fine-tuning ones, `Family.backbone_epochs` and `backbone_learning_rate`. An earlier run in
    `output_dir` is replaced only when this one succeeds; files hf-longdoc did not write are kept
    (`run_folder.RunFolder`), unless `overwrite`. `tokenizer` may also be a tokenizer object, and `extra_scores` maps a
    name to a function(data, multi_label) -> scores recorded in `metrics.json` under that name.
    """

    model: str = option("contextualizer", "the family to train: " + ", ".join(FAMILY_NAMES))
    output_dir: str = option("out/model", "where the model, tokenizer, metrics and card go: a new folder, or an "
                                          "earlier run (replaced only when this one succeeds; files hf-longdoc did "
                                          "not write are kept)", trainer="output_dir", required=True)
    tokenizer: Any = option(None, "a saved tokenizer (folder or Hub id); None: the backbone's, the family's own, or "
                                  "WordPiece fitted on the training split with --vocab-size ids", type=str)
    config_overrides: dict | None = option(None, "config settings of the model (hidden_size=256 ...); the label "
                                                 "settings come from the data", flag="config", nargs="*",
                                           metavar="KEY=VALUE", type=str, combine=parse_config_overrides)
    seed: int = option(42, "seed of the data split, the model and training", type=SEED.parse, trainer="seed")
    threshold: float = option(DEFAULT_THRESHOLD, "multi-label decision threshold on sigmoid scores, in (0, 1); saved "
                                                 "with the model (`multi_label_threshold` in its config.json)",
                              type=THRESHOLD.parse)
    evidence: str = option("end", "built-in task only: where the label evidence sits (start, middle, end, anywhere)")
    task_size: int | None = option(None, "built-in task: number of training documents (None: the task's default)",
                                   type=POSITIVE_INTEGER.parse)
    task_words: tuple | None = option(None, "built-in task: min,max words per document (None: the task's 800,3000)",
                                      type=word_pair)
    task_kind: str = option("keywords", "built-in task: 'keywords' (class-specific phrases; a bag of words solves "
                                        "it) or 'context' (the same words in every document; which entity a negation "
                                        "attaches to decides)")
    extra_scores: dict | None = None
    report_to: Any = option("none", "Trainer's loggers (tensorboard, wandb, ...; none)", nargs="+",
                            trainer="report_to")
    init_from: str | None = option(None, "start from the encoder saved in this model folder "
                                         "(examples/pretrain_slstm_mlm.py) and its tokenizer", type=str,
                                   metavar="MODEL_DIR")
    resume: bool = option(False, "continue the interrupted run in --output-dir from its last checkpoint (a rerun "
                                 "without --resume or --overwrite is refused while one is kept)")
    family: Any = field(default=None, init=False, repr=False)  # the `Family`, resolved by `resolve`
    stage: Any = field(default=None, init=False, repr=False)  # the `HeadStage`
    started: float = field(default_factory=time.monotonic, init=False, repr=False)  # when the run began

    STARTS_FROM = "--backbone or --init-from"

    @classmethod
    def of(cls, **settings):
        """The settings from `train`'s keyword arguments, with a TypeError naming any unknown one."""
        return settings_of(cls, None, settings, "train()", "`train(model='slstm', dataset='data.csv')`")

    @property
    def pretrained(self):
        """Whether the run starts from pretrained weights (a backbone or a saved model)."""
        return self.backbone is not None or self.init_from is not None

    def resolve(self):
        """Check every argument, in the order a user would fix them, and resolve the family, the epochs, the learning
        rate, the tokenizer and the head stage; a ValueError names the argument and the fix. Returns self."""
        from ..modeling import get_family
        from .head_fitting import HeadStage

        self.family = get_family(self.model)  # an unknown family or setting fails before any data is made
        for name in ("backbone", "init_from", "tokenizer"):  # `~/models/x` as typed inside quotes: the shell left it
            value = getattr(self, name)
            if isinstance(value, str) and value.startswith("~"):
                setattr(self, name, os.path.expanduser(value))
        self.config_overrides = dict(self.config_overrides or {})
        check_label_overrides(self.config_overrides)
        self.family.check_settings(self.config_overrides)
        epochs_given = self.epochs is not None
        if self.epochs is None:  # the family's fine-tuning epochs from pretrained weights
            self.epochs = recipe_epochs(self.family, self.pretrained)
        self.check()
        THRESHOLD.check(self.threshold, "threshold", "threshold")
        SEED.check(self.seed, "seed", "seed")
        check_task_kind(self.task_kind, self.dataset)
        self.stage = HeadStage.resolve(self.family, self.pretrained, self.freeze_backbone, self.head_epochs)
        if epochs_given and not self.stage.trains_end_to_end:
            logger.warning(f"`epochs` (--epochs) {self.epochs:g} has no effect here: with `freeze_backbone` only the "
                           f"new head trains, on the backbone's cached features, for `head_epochs` (--head-epochs; "
                           f"at most {self.stage.epochs}, stopping early once the validation score stops improving).")
        if not self.pretrained:
            self.family.build_config(**self.config_overrides)  # an impossible setting fails before any data is made
        if self.backbone is not None:  # the one check of the backbone in a run: the model is built unchecked
            check_backbone(self.family, self.backbone)
        if self.init_from is not None:  # safetensors only: pickled weights are refused before any data is read
            from ..saving.saved_models import require_safe_weights

            require_safe_weights(self.init_from, "`init_from` (--init-from)")
        if (hub := self.hub_push()) is not None:  # no repository, no token or no Hub fails now, not after training
            from ..publishing.hub import require_hub_for_push

            require_hub_for_push(hub.get("hub_token"), "--push_to_hub",
                                 "train without --push_to_hub and upload the folder later with `hf-longdoc push`")
        for key, value in (self.training_args or {}).items():  # what the recipe decides, refused before any data
            if key in RECIPE_DECIDES and TRAIN_RECIPE.get(key, not value) != value:
                raise ValueError(f"--{key} {value!r} cannot apply: {RECIPE_DECIDES[key]}.")
        self.tokenizer = resolve_tokenizer(self.family, self.tokenizer, self.backbone, self.init_from)
        if self.learning_rate is None:
            self.learning_rate = self.family.fine_tuning_rate if self.pretrained else self.family.learning_rate
        return self

    def hub_push(self):
        """The Hub settings when `training_args` asks for `push_to_hub` (the run pushes its output folder once it
        has succeeded, as `hf-longdoc push` does), else None; a ValueError without `hub_model_id`."""
        hub = {key: value for key, value in (self.training_args or {}).items() if key in HUB_ARGUMENTS}
        if not hub.get("push_to_hub"):
            return None
        if not hub.get("hub_model_id"):
            raise ValueError("--push_to_hub needs --hub_model_id NAMESPACE/NAME: the repository the model goes to.")
        return hub

    def recorded(self):
        """The settings as `RunFolder` records them (a resumed run must repeat them; where it writes, how it reports
        and its time budget, which starts again on resume, may differ). `dataset_contents` is the dataset's
        fingerprint (`dataset_fingerprint`: a file's SHA-256), so a file edited since (labels swapped) is refused."""
        from ..data import BUILTIN_TASK
        from ..data.loading import dataset_fingerprint

        left_out = ("family", "stage", "started", "output_dir", "overwrite", "resume", "report_to", "time_budget")
        settings = {f.name: getattr(self, f.name) for f in fields(self) if f.name not in left_out}
        dataset = None if self.dataset == BUILTIN_TASK else self.dataset
        settings.update(tokenizer=getattr(self.tokenizer, "name_or_path", self.tokenizer),
                        dataset_contents=dataset_fingerprint(dataset),
                        head_epochs=self.stage.epochs, extra_scores=sorted(self.extra_scores or {}),
                        training_args=self.user_trainer_arguments())  # never the Hub token
        return settings


def recipe_epochs(family, pretrained):
    """The epochs `train` gives `family` when none are set: from pretrained weights its `backbone_epochs`, else (or
    when it sets none) TRAIN_EPOCHS."""
    return (family.backbone_epochs if pretrained else None) or TRAIN_EPOCHS


def check_task_kind(task_kind, dataset):
    """A ValueError naming `task_kind` (--task-kind) when it is not a built-in task's, or when a dataset replaces
    the built-in task it would shape."""
    from ..data import BUILTIN_TASK, TASK_KINDS

    if task_kind not in TASK_KINDS:
        raise ValueError(f"`task_kind` (--task-kind) must be one of {', '.join(TASK_KINDS)}, got {task_kind!r}.")
    if task_kind != "keywords" and dataset not in (None, BUILTIN_TASK):
        raise ValueError(f"`task_kind` (--task-kind) {task_kind!r} shapes the built-in task, and `dataset` "
                         f"({dataset!r}) replaces it; leave one of them out.")


def check_mixed_precision(bf16, fp16):
    """A TypeError or ValueError naming the flag when mixed precision cannot run here; a warning when bf16 will be
    slow (a CPU without bfloat16 instructions emulates it)."""
    import torch

    for name, value in (("bf16", bf16), ("fp16", fp16)):
        if not isinstance(value, bool):
            raise TypeError(f"`{name}` (--{name}) must be True or False, got {value!r}.")
    if bf16 and fp16:
        raise ValueError("Pass one of `bf16` (--bf16) and `fp16` (--fp16), not both.")
    if fp16 and not torch.cuda.is_available():
        raise ValueError("`fp16` (--fp16) needs a CUDA GPU, and none is visible (Accelerate would train in float32 "
                         "while recording fp16); on a CPU pass --bf16 instead, or neither for float32.")
    if bf16 and torch.cuda.is_available() and not torch.cuda.is_bf16_supported():
        raise ValueError("`bf16` (--bf16) needs a GPU with bfloat16 (Ampere or newer), and this one has none; pass "
                         "--fp16 instead.")
    if bf16 and not torch.cuda.is_available() and not cpu_has_bfloat16():
        logger.warning("--bf16 on a CPU without AVX-512 BF16 or AMX: PyTorch emulates bfloat16 there, which is "
                       "usually slower than float32.")


def mixed_precision(bf16, fp16):
    """The run's mixed precision as `metrics.json` and reports name it: "bf16", "fp16", or None (float32)."""
    return "bf16" if bf16 else "fp16" if fp16 else None


def cpu_has_bfloat16():
    """Whether this CPU computes bfloat16 natively (AVX-512 BF16 or AMX tiles), as PyTorch reports it."""
    import torch

    checks = [getattr(torch.cpu, name, None) for name in ("_is_avx512_bf16_supported", "_is_amx_tile_supported")]
    return any(check() for check in checks if check is not None)


def check_head_learning_rate(head_learning_rate, pretrained, starts_from="--backbone or --init-from"):
    """A ValueError naming `head_learning_rate` (--head-learning-rate) unless it is None or a positive number for a
    model started from pretrained weights (`pretrained`, which the flags `starts_from` give): from scratch every
    parameter is new."""
    if head_learning_rate is None:
        return
    LEARNING_RATE.check(head_learning_rate, "head_learning_rate", "head-learning-rate")
    if not pretrained:
        raise ValueError("`head_learning_rate` (--head-learning-rate) is the rate of the parameters a pretrained model "
                         f"does not supply; a model trained from scratch has only new ones: pass {starts_from}, or "
                         "set --learning-rate alone.")


def check_lr_scheduler(lr_scheduler):
    """A ValueError naming `lr_scheduler` (--lr-scheduler) unless it is a Transformers schedule name."""
    from transformers import SchedulerType

    schedules = [kind.value for kind in SchedulerType]
    if lr_scheduler not in schedules:
        raise ValueError(f"`lr_scheduler` (--lr-scheduler) must be one of {', '.join(schedules)}, got "
                         f"{lr_scheduler!r}.")


LABEL_SETTINGS = ("num_labels", "id2label", "label2id", "problem_type")


def check_label_overrides(config_overrides):
    """A ValueError for a config override of what the dataset decides: the label names, their ids and number, and
    single- or multi-label. An `id2label` in another order than the data's ids would name every prediction wrongly
    while the run reports a perfect score."""
    given = [key for key in LABEL_SETTINGS if key in (config_overrides or {})]
    if given:
        raise ValueError(f"`config_overrides` (--config) sets {', '.join(given)}, which the dataset decides: the "
                         "label names and their number come from --label-column (single- or multi-label from its "
                         "values), in sorted order. Remove the override; rename the labels in the data to change "
                         "them.")


def resolve_tokenizer(family, tokenizer, backbone, init_from):
    """The tokenizer of a run, loaded and checked before any data is read: `tokenizer` (a folder or Hub id, or an
    object), else the one saved with `init_from`; None when the family fits or builds its own, or a `backbone`'s is
    used (`check_backbone` loads and checks it)."""
    from ..data import load_tokenizer

    if isinstance(tokenizer, str):
        tokenizer = load_tokenizer(tokenizer, "`tokenizer` (--tokenizer)")
        if tokenizer.pad_token is None and backbone is None:
            raise ValueError("The tokenizer given with `tokenizer` (--tokenizer) has no pad token; set one and save "
                             "it before training.")
        return tokenizer
    if tokenizer is not None or init_from is None:
        return tokenizer
    if not os.path.isdir(init_from):
        raise ValueError(f"`init_from` {init_from!r} is not a folder; pass the output folder of a saved model.")
    return load_tokenizer(init_from, "`init_from` (--init-from)", "pass the tokenizer the model was trained with as "
                          "`tokenizer` (--tokenizer)")


def check_backbone(family, backbone):
    """A ValueError, before any data is made, when `family` cannot start from a pretrained model, `backbone` is a
    local path that holds no model, or the family cannot start from that architecture (its `backbone_refusal`)."""
    from transformers import AutoConfig

    from ..modeling import FAMILIES

    if not family.supports_backbones:
        able = ", ".join(name for name, other in FAMILIES.items() if other.supports_backbones)
        raise ValueError(f"{family.name} does not start from a pretrained backbone; `backbone` (--backbone) works with "
                         f"{able}.")
    check_backbone_folder(backbone)
    if not os.path.isdir(os.path.expanduser(backbone)):
        return  # a Hub id: its config is read when it loads
    try:
        config = AutoConfig.from_pretrained(os.path.expanduser(backbone))
    except (OSError, ValueError) as error:  # an unknown model_type, a malformed config.json
        raise ValueError(f"`backbone` (--backbone) {backbone!r} could not be read as a checkpoint: {error}") from error
    def refusal(candidate):
        return candidate.backbone_refusal(config)

    if (reason := refusal(family)) is not None:
        able = [name for name, other in FAMILIES.items() if other.supports_backbones and refusal(other) is None]
        raise ValueError(f"--model {family.name} cannot start from `backbone` (--backbone) {backbone!r}: it {reason}. "
                         + (f"The {config.model_type} checkpoint works with --model {', '.join(able)}."
                            if able else f"No family starts from a {config.model_type} checkpoint."))


def check_backbone_folder(backbone):
    """A ValueError when `backbone` is a local path that holds no model (a Hub id is checked when it loads)."""
    from ..data.loading import require_hub
    from ..saving.saved_models import require_safe_weights

    looks_local = not is_hub_id(backbone)
    if looks_local and not os.path.exists(os.path.expanduser(backbone)):
        raise ValueError(f"`backbone` (--backbone) {backbone!r} does not exist; pass a folder saved with "
                         "`save_pretrained` (model and tokenizer) or a Hub id.")
    if looks_local and not os.path.isfile(os.path.join(os.path.expanduser(backbone), "config.json")):
        raise ValueError(f"`backbone` (--backbone) {backbone!r} holds no config.json; pass a folder saved with "
                         "`save_pretrained` (model and tokenizer) or a Hub id.")
    if looks_local:
        require_safe_weights(backbone, "`backbone` (--backbone)", default_class="AutoModel")
    if not looks_local:
        require_hub("`backbone` (--backbone)", backbone)
