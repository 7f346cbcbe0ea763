"""The settings of training: documented argument by argument and validated once, before any data is read.

`TrainingOptions` holds what every training shares (data columns, length, epochs, batch, rates, schedule, backbone,
head stage, time budget, precision) and checks it; `RunSettings` (what `training.train` and `hf-longdoc train` take)
and `experiments.compare.CompareSettings` (what `compare` takes) add their own, as Transformers' `TrainingArguments`
is what `Trainer` takes. `RunSettings.resolve` checks every argument (numbers, rates, labels, the family and its
settings, the backbone folder, the tokenizer, the head stage) and resolves what the rest of the run reads: the family,
its learning rate, the tokenizer and the head stage.
"""

import logging
import os
import time
from dataclasses import dataclass, field, fields

import torch
from transformers import AutoConfig, SchedulerType

from .data import BUILTIN_TASK, TASK_KINDS, load_tokenizer
from .data.loading import dataset_fingerprint, require_hub
from .head_fitting import HeadStage
from .modeling import FAMILIES, Family, get_family
from .numbers import (
    LEARNING_RATE,
    MAX_LENGTH,
    POSITIVE_INTEGER,
    POSITIVE_NUMBER,
    SEED,
    THRESHOLD,
    VOCAB_SIZE,
)
from .saved_models import require_safe_weights

logger = logging.getLogger(__name__)
TRAIN_EPOCHS = 4  # unless the user sets them, or the family from pretrained weights (`Family.backbone_epochs`)


@dataclass(kw_only=True)
class TrainingOptions:
    """How a model trains: the options `train` (`RunSettings`) and `compare` (`CompareSettings`) share, documented and
    checked here once (as Transformers' `TrainingArguments`; the CLI flag is the name with dashes).

    - `dataset`: a CSV / JSONL / parquet file or a Hub dataset id with `text_column` and `label_column` (a column of
      lists is multi-label); None: the built-in synthetic task.
    - `max_length`: tokens (bytes for elementwise) a document is read up to; longer ones are cut, and the cut is
      logged. A model that reads less cuts there (`reading_length`).
    - `vocab_size`: the ids of the WordPiece tokenizer fitted on the training split when no tokenizer is given.
    - `epochs`, `batch_size`, `learning_rate` (None: each model's own, see `RunSettings` and `CompareSettings`),
      `weight_decay`, `lr_scheduler` (a Transformers schedule after a 10% warm-up).
    - `backbone`: a pretrained checkpoint (folder or Hub id) the models are built around, with its tokenizer.
    - `head_learning_rate`: from pretrained weights, the rate of the parameters they do not supply (the head, the
      elementwise byte embeddings); None: `learning_rate`.
    - `freeze_backbone`: from pretrained weights, train only the new head; `head_epochs`: the epochs of the head on
      cached frozen features before fine-tuning (None: `HeadStage.DEFAULT_EPOCHS` where the family caches them,
      else 0).
    - `time_budget`: minutes of training (`train`: the whole run from its start, data, encoding and the head stage
      included; `compare`: each model's training from its start): fine-tuning stops after the step that reaches it,
      evaluates that last partial epoch, and keeps the best model so far (the stop is logged). None: `epochs` alone
      decide.
    - `bf16`, `fp16`: train and evaluate in mixed precision (Trainer's `bf16` / `fp16`: autocast, float32 weights;
      the head stage's frozen encoding too). `bf16` runs on a GPU or on a CPU with bfloat16 instructions (AVX-512
      BF16 or AMX: a sparse Longformer step over 2,048 tokens takes 0.65-0.77 of its float32 time there, results.md);
      `fp16` needs a CUDA GPU. The saved weights are float32 either way.
    - `overwrite`: replace files in the output folder that hf-longdoc did not write.
    """

    dataset: object = None
    text_column: str = "text"
    label_column: str = "label"
    max_length: int = 4096
    vocab_size: int = 8000
    epochs: float | None = None
    batch_size: int = 8
    learning_rate: float | None = None
    weight_decay: float = 0.01
    lr_scheduler: str = "linear"
    backbone: str | None = None
    head_learning_rate: float | None = None
    freeze_backbone: bool = False
    head_epochs: int | None = None
    time_budget: float | None = None
    bf16: bool = False
    fp16: bool = False
    overwrite: bool = False

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

    def trainer_arguments(self):
        """The options as `TrainingArguments` keywords (besides the epochs, batch, rate and seed `training_arguments`
        takes by position)."""
        return dict(weight_decay=self.weight_decay, lr_scheduler_type=self.lr_scheduler, bf16=self.bf16, fp16=self.fp16)


@dataclass(kw_only=True)
class RunSettings(TrainingOptions):
    """One training run: what `training.train` (and `hf-longdoc train`) takes, as `Trainer` takes
    `TrainingArguments`. The options every training shares are `TrainingOptions`'; a run adds:

    - `model`: the family's name (`hf-longdoc train --help` lists them).
    - `output_dir`: where the model, its tokenizer, `metrics.json`, `training_args.json` and the card go. An earlier
      run there is replaced only when this one succeeds; files hf-longdoc did not write are kept (`outputs.RunFolder`),
      unless `overwrite`.
    - `evidence`, `task_size`, `task_words` shape the built-in task (no `dataset`), and `task_kind`: `keywords`, which
      a bag of words solves, or `context`, which needs the evidence read in context.
    - `tokenizer`: a saved tokenizer (folder, Hub id or object); None: the backbone's, the family's own, or WordPiece
      fitted on the training split with `vocab_size` ids.
    - `config_overrides`: config settings ({"hidden_size": 256}); the label settings come from the data.
    - `epochs`, `learning_rate` None: 4 epochs at the family's rate; from pretrained weights the family's fine-tuning
      ones, `Family.backbone_epochs` and `backbone_learning_rate`.
    - `seed` (the split and the initial weights), `threshold` (multi-label decisions), `report_to` (Trainer's loggers).
    - `extra_scores`: name -> function(data, multi_label) -> scores, recorded in `metrics.json` under that name.
    - `init_from`: a saved model of the same family whose encoder (and tokenizer) the run starts from (pretrained
      weights, as `backbone`).
    - `resume`: continue the interrupted run in `output_dir`, which must have the same settings.
    """

    model: str = "contextualizer"
    output_dir: str = "out/model"
    tokenizer: object = None
    config_overrides: dict | None = None
    seed: int = 42
    threshold: float = 0.3
    evidence: str = "end"
    task_size: int | None = None
    task_words: tuple | None = None
    task_kind: str = "keywords"
    extra_scores: dict | None = None
    report_to: str = "none"
    init_from: str | None = None
    resume: bool = False
    family: Family | None = field(default=None, init=False, repr=False)  # resolved by `resolve`
    stage: HeadStage | None = field(default=None, init=False, repr=False)
    started: float = field(default_factory=time.monotonic, init=False, repr=False)  # when the run began

    STARTS_FROM = "--backbone or --init-from"

    @classmethod
    def of(cls, **settings):
        """The settings from `train`'s keyword arguments, with a TypeError naming any unknown one."""
        known = [f.name for f in fields(cls) if f.init]  # the resolved fields are not arguments
        unknown = sorted(set(settings) - set(known))
        if unknown:
            raise TypeError(f"train() got unknown arguments {unknown}; it takes {', '.join(known)} (see RunSettings).")
        return cls(**settings)

    @property
    def pretrained(self):
        """Whether the run starts from pretrained weights (a backbone or a saved model)."""
        return self.backbone is not None or self.init_from is not None

    def resolve(self):
        """Check every argument, in the order a user would fix them, and resolve the family, the epochs, the learning
        rate, the tokenizer and the head stage; a ValueError names the argument and the fix. Returns self."""
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
            require_safe_weights(self.init_from, "`init_from` (--init-from)")
        self.tokenizer = resolve_tokenizer(self.family, self.tokenizer, self.backbone, self.init_from)
        if self.learning_rate is None:
            self.learning_rate = self.family.fine_tuning_rate if self.pretrained else self.family.learning_rate
        return self

    def recorded(self):
        """The settings as `RunFolder` records them (a resumed run must repeat them; where it writes, how it reports
        and its time budget, which starts again on resume, may differ). `dataset_contents` is the dataset's
        fingerprint (`dataset_fingerprint`: a file's SHA-256), so a file edited since (labels swapped) is refused."""
        left_out = ("family", "stage", "started", "output_dir", "overwrite", "resume", "report_to", "time_budget")
        settings = {f.name: getattr(self, f.name) for f in fields(self) if f.name not in left_out}
        dataset = None if self.dataset == BUILTIN_TASK else self.dataset
        settings.update(tokenizer=getattr(self.tokenizer, "name_or_path", self.tokenizer),
                        dataset_contents=dataset_fingerprint(dataset),
                        head_epochs=self.stage.epochs, extra_scores=sorted(self.extra_scores or {}))
        return settings


def recipe_epochs(family, pretrained):
    """The epochs `train` gives `family` when none are set: from pretrained weights its `backbone_epochs`, else (or
    when it sets none) TRAIN_EPOCHS."""
    return (family.backbone_epochs if pretrained else None) or TRAIN_EPOCHS


def check_task_kind(task_kind, dataset):
    """A ValueError naming `task_kind` (--task-kind) when it is not a built-in task's, or when a dataset replaces
    the built-in task it would shape."""
    if task_kind not in TASK_KINDS:
        raise ValueError(f"`task_kind` (--task-kind) must be one of {', '.join(TASK_KINDS)}, got {task_kind!r}.")
    if task_kind != "keywords" and dataset not in (None, BUILTIN_TASK):
        raise ValueError(f"`task_kind` (--task-kind) {task_kind!r} shapes the built-in task, and `dataset` "
                         f"({dataset!r}) replaces it; leave one of them out.")


def check_mixed_precision(bf16, fp16):
    """A TypeError or ValueError naming the flag when mixed precision cannot run here; a warning when bf16 will be
    slow (a CPU without bfloat16 instructions emulates it)."""
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
    used (`build_from_backbone` loads and checks it)."""
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
    looks_local = os.path.exists(backbone) or backbone.startswith((".", "/", "~")) or backbone.count("/") > 1
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
