"""What `compare` and `bench` take: `CompareSettings` and `BenchSettings` (with `BenchCommandSettings`, what
`hf-longdoc bench` adds), each field documented once in its `option`, whose help is also its flag's.

Nothing heavy is imported here, so `hf-longdoc compare --help` and `bench --help` build their flags at once (the
experiments themselves import torch, Transformers and the model code); the checks import what they need when they
run.
"""

import os
from dataclasses import dataclass, replace

from ..training.settings import TrainingOptions, check_label_overrides
from ..utils.catalog import ATTENTION_IMPLEMENTATIONS, BASELINE_NAMES, FAMILY_NAMES, HEAD_TOKENS, MIN_TOKENS
from ..utils.parsing import (
    evidence_list,
    length_list,
    name_list,
    option,
    per_model_overrides,
    positive_integers,
    settings_of,
    word_pair,
)
from ..utils.rules import (
    DROPOUT,
    LEARNING_RATE,
    MAX_LENGTH,
    NON_NEGATIVE_INTEGER,
    POSITIVE_INTEGER,
    POSITIVE_NUMBER,
    SEED,
)

EVIDENCE_POSITIONS = ("start", "middle", "end")  # where `compare` places the built-in task's evidence
COMPARE_EPOCHS = 3  # every model's epochs unless set (with a backbone: the baselines'; families take their recipe's)
FIRST_SEED = 42  # `--seeds n` runs seeds FIRST_SEED ... FIRST_SEED + n - 1 unless `--first-seed` moves them
# one rate for every model from scratch: with a few epochs, 1e-4 leaves BERT-512 at chance on BBC news (0.238 after 2
# epochs) where 1e-3 reaches 0.929
SCRATCH_RATE = 1e-3
COMPARED_MODELS = ("elementwise", "contextualizer", "slstm", "sparse_longformer:tfidf", "sparse_longformer:pmi",
                   "segment_lm:att")
DTYPES = ("float32", "bfloat16", "float16")  # what `bench` builds its models in
GRADIENT_MODES = ("paper", "full", "none")  # the segment LM's gradient modes `bench --gradient-mode` takes


@dataclass(kw_only=True)
class CompareSettings(TrainingOptions):
    """A comparison: what `compare` (and `hf-longdoc compare`) takes, as `Trainer` takes `TrainingArguments`. The
    training options every model shares (rates, schedule, epochs, batch, backbone, head stage, precision, time
    budget) are `TrainingOptions`', with the defaults of a comparison from scratch below; a comparison adds the
    fields below (each one's `help` says what it does). The budget's sizes are mapped onto each family's config by
    its `from_size`; with a `backbone` they do not apply. `config_overrides` maps a model name (or family) to config
    settings.
    """

    max_length: int = option(1024, "tokens every model reads (bert-N: N)", type=MAX_LENGTH.parse)
    epochs: float | None = option(None, f"training epochs of every model; None: {COMPARE_EPOCHS}, and with --backbone "
                                        f"each family's `train` epochs (the baselines {COMPARE_EPOCHS})",
                                  type=POSITIVE_NUMBER.parse, trainer="num_train_epochs")
    learning_rate: float | None = option(None, f"the same for every model; None: {SCRATCH_RATE:g} from scratch, and "
                                               "with --backbone each family's own rate and 2e-5 for the baselines "
                                               "that fine-tune the checkpoint (their head: 1e-3)",
                                         type=LEARNING_RATE.parse, trainer="learning_rate")
    backbone: str | None = option(None, "fine-tune every model from this pretrained encoder (folder or Hub id) and "
                                        "read its tokenizer: families that can wrap it, and bert-N / bert-N-headtail "
                                        "as the backbone itself; the size flags then do not apply", type=str,
                                  metavar="PATH_OR_ID")
    models: tuple = option(COMPARED_MODELS, "families or family:variant (sparse_longformer:<selector>, "
                                            "segment_lm:<variant>), each named once, comma-separated",
                           type=name_list)
    baselines: tuple = option(("bert-512", "longformer"), f"bert-<N> (reading the first N tokens, N at least "
                                                          f"{MIN_TOKENS}, e.g. bert-512), bert-<N>-headtail (the "
                                                          f"first {HEAD_TOKENS} and the last N - {HEAD_TOKENS + 2} "
                                                          f"tokens, N at least {HEAD_TOKENS + 3}), and so <kind>-<N> "
                                                          "for every kind that truncates; the whole document from "
                                                          "scratch for the others; kinds: "
                                                          + ", ".join(BASELINE_NAMES) + "; "
                                                          "tfidf (TF-IDF + logistic regression on the full text); "
                                                          "with --backbone, native (the checkpoint at all its "
                                                          "positions) and bert-chunks (its logits averaged over "
                                                          "512-token chunks); '' for none", type=name_list)
    hidden_size: int = option(128, "width of every model", type=POSITIVE_INTEGER.parse)
    num_layers: int = option(2, "layers (or steps) of every model", type=POSITIVE_INTEGER.parse)
    num_heads: int = option(4, "attention heads of every Transformer", type=POSITIVE_INTEGER.parse)
    window: int = option(128, "Longformer-type models: attention window", type=POSITIVE_INTEGER.parse)
    segment_length: int = option(128, "segment LMs: tokens per segment", type=POSITIVE_INTEGER.parse)
    config_overrides: dict = option(help="config overrides for one model, e.g. slstm.num_recurrent_steps=6",
                                    factory=dict, flag="config", nargs="*", metavar="MODEL.KEY=VALUE", type=str,
                                    combine=per_model_overrides)
    seeds: int = option(1, "seeds --first-seed, --first-seed + 1, ...: mean ± std", type=POSITIVE_INTEGER.parse)
    first_seed: int = option(FIRST_SEED, "the first seed: 43 with --seeds 2 adds seeds 43 and 44 to a run of seed 42 "
                                         "alone", type=SEED.parse, trainer="seed")
    split_seed: int | None = option(None, "draw the data split (built-in task: its documents) once with this seed for "
                                          "every --seeds run; None: each seed draws its own", type=SEED.parse)
    evidence: tuple | None = option(None, "also train and test every model on the built-in task with the evidence at "
                                          "these positions (start,middle,end), or 'none'; None: start,middle,end "
                                          "without --dataset, none with it", type=evidence_list)
    task_size: int = option(1000, "built-in task: training documents", type=POSITIVE_INTEGER.parse)
    task_words: tuple = option((300, 900), "built-in task: min,max words per document", type=word_pair)
    bench_lengths: tuple = option((512, 1024, 2048), "the lengths of the time/memory plot; 'none' to skip it",
                                  type=length_list)
    output_dir: str = option("out/compare", "where the report, CSVs and plots go (existing ones hf-longdoc did not "
                                            "write are refused)", trainer="output_dir")

    @classmethod
    def of(cls, settings=None, **changes):
        """`settings` (None: the defaults) with `changes` to its fields, and a TypeError naming any unknown one. A
        comparison from scratch without a learning rate trains every model at SCRATCH_RATE."""
        settings = settings_of(cls, settings, changes, "compare()", "`compare(models=['slstm'], epochs=1)`")
        if settings.learning_rate is None and settings.backbone is None:
            settings = replace(settings, learning_rate=SCRATCH_RATE)
        return settings

    def check(self):
        """A ValueError naming the setting (and its flag) for a value no run can use, before anything is read."""
        super().check()
        for name in ("hidden_size", "num_layers", "num_heads", "window", "segment_length"):
            POSITIVE_INTEGER.check(getattr(self, name), name, name.replace("_", "-"))
        for overrides in self.config_overrides.values():
            check_label_overrides(overrides)
        POSITIVE_INTEGER.check(self.seeds, "seeds", "seeds")
        SEED.check(self.first_seed, "first_seed", "first-seed")
        if self.split_seed is not None:
            SEED.check(self.split_seed, "split_seed", "split-seed")
        if unknown := [p for p in self.evidence_positions() if p not in EVIDENCE_POSITIONS]:
            raise ValueError(f"`evidence` (--evidence) positions must be among {', '.join(EVIDENCE_POSITIONS)} (or "
                             f"'none'), got {', '.join(map(str, unknown))}.")
        if given := self.training_args or {}:
            if given.get("push_to_hub"):
                raise ValueError("--push_to_hub: compare writes a report, not one model; train the one to publish "
                                 "with `hf-longdoc train --push_to_hub`.")

    def evidence_positions(self):
        """The evidence positions of the run: `evidence`, or when None all of them on the built-in task and none with
        a `dataset` (the built-in task would train every model three more times on other data)."""
        from ..data import BUILTIN_TASK

        if self.evidence is not None:
            return tuple(self.evidence)
        return EVIDENCE_POSITIONS if self.dataset in (None, BUILTIN_TASK) else ()

    def size(self, max_length=None):
        """The `from_size` arguments of this budget (each family takes the ones that apply to it)."""
        return dict(hidden_size=self.hidden_size, num_layers=self.num_layers, num_heads=self.num_heads,
                    max_length=max_length or self.max_length, attention_window=self.window,
                    segment_length=self.segment_length)

    def backbone_settings(self, family):
        """The budget's knobs that still apply around a pretrained backbone: the optional `from_size` arguments the
        family names that are settings of its config (attention window, segment length), not the sizes."""
        from ..modeling.registry import SIZE_ARGUMENTS

        knobs = {key: value for key, value in family.size_arguments(self.size()).items()
                 if key not in SIZE_ARGUMENTS}
        return {key: value for key, value in knobs.items() if family.has_setting(key)}


@dataclass
class BenchSettings:
    """A bench run: what `run_bench` takes, as `compare` takes `CompareSettings`. Every model is built at one size
    (`hidden_size`, `num_layers`, `num_heads`, through each family's `from_size`) and timed at every length; each
    field's `help` says what it does, and `check` refuses a value no run can use before any model is built.
    """

    models: tuple = option(("contextualizer", "bert"), "comma-separated families (family:variant) and/or baselines: "
                                                       f"{', '.join(FAMILY_NAMES)}; {', '.join(BASELINE_NAMES)}",
                           type=name_list)
    lengths: tuple = option((512, 1024, 2048, 4096, 8192), "comma-separated document lengths, in input ids (an "
                                                           "elementwise model reads whole materials of v ids)",
                            type=positive_integers)
    batch_size: int = option(1, "documents per pass", type=POSITIVE_INTEGER.parse)
    hidden_size: int = option(256, "width of every model", type=POSITIVE_INTEGER.parse)
    num_layers: int = option(4, "layers (or steps) of every model", type=POSITIVE_INTEGER.parse)
    num_heads: int = option(4, "attention heads of every Transformer", type=POSITIVE_INTEGER.parse)
    repeats: int = option(3, "timed passes (the median is reported)", type=POSITIVE_INTEGER.parse)
    warmup: int = option(1, "untimed passes first", type=NON_NEGATIVE_INTEGER.parse)
    device: str | None = option(None, "a torch device (cpu, cuda, cuda:1); None: cuda if available, else cpu",
                                type=str)
    dtype: str = option("float32", "the models' dtype", choices=DTYPES)
    seed: int = option(0, "seed of the weights, the input ids and the global tokens", type=SEED.parse)
    window: int = option(512, "Longformer-type models: attention window (even)", type=POSITIVE_INTEGER.parse)
    num_global: int = option(128, "Longformer-type models: scattered global tokens besides [CLS]",
                             type=NON_NEGATIVE_INTEGER.parse)
    backward: bool = option(False, "time training steps (forward + backward of the loss) instead of forward passes")
    attention_dropout: float | None = option(None, "Transformer models: attention-probability dropout (None: each "
                                                   "config's, 0.1)", type=DROPOUT.parse)
    segment_length: int = option(256, "segment LMs: tokens per segment L (m = length / (L - 2) segments)",
                                 type=POSITIVE_INTEGER.parse)
    gradient_mode: str = option("paper", "segment LMs: which segments the LM gets gradient through",
                                choices=GRADIENT_MODES)
    config_overrides: dict = option(help="config overrides for one family model, e.g. slstm.compile_gates=true "
                                         "(baselines take none)", factory=dict, flag="config", nargs="*",
                                    metavar="MODEL.KEY=VALUE", type=str, combine=per_model_overrides)
    roofline: bool = option(True, "forward passes: also time each model at --roofline-length beside its matrix "
                                  "products alone (`matmul_roofline`; --no-roofline skips it)")
    roofline_length: int | None = option(None, "forward passes: the length (one of --lengths) at which each model is "
                                               "also timed beside its matrix products alone; None: the longest",
                                         type=POSITIVE_INTEGER.parse)
    attention: str = option("auto", "the baselines' attention implementation where their model supports it (else "
                                    "eager); auto: flash_attention_2 on a CUDA GPU in half precision when flash-attn "
                                    "is installed, else flex_attention for a model with a local window (ModernBERT) "
                                    "on a CUDA GPU, else sdpa", choices=ATTENTION_IMPLEMENTATIONS)
    output: str | None = option(None, "prefix of the CSV and PNG the table is written to (existing files hf-longdoc "
                                      "did not write are refused); `run_bench` writes none without it", type=str)
    overwrite: bool = option(False, "replace the --output files even if hf-longdoc did not write them")

    def sizes(self):
        """The settings every model is built with (`BenchModel.build`'s arguments)."""
        return dict(hidden_size=self.hidden_size, num_layers=self.num_layers, num_heads=self.num_heads,
                    window=self.window, attention_dropout=self.attention_dropout,
                    segment_length=self.segment_length, gradient_mode=self.gradient_mode)

    def check(self):
        """The models of the run (`bench_models.check_models`), or a ValueError naming the setting, its flag and the
        fix."""
        from ..saving.run_folder import check_files_free, require_writable_folder
        from .bench_models import check_models
        from .report import bench_output_paths

        for name in ("batch_size", "hidden_size", "num_layers", "num_heads", "repeats", "segment_length"):
            POSITIVE_INTEGER.check(getattr(self, name), name, name.replace("_", "-"))
        for name in ("warmup", "num_global"):
            NON_NEGATIVE_INTEGER.check(getattr(self, name), name, name.replace("_", "-"))
        entries = check_models(self.models, self.lengths, self.config_overrides or {}, **self.sizes())
        if self.dtype not in DTYPES:
            raise ValueError(f"`dtype` (--dtype) must be {', '.join(DTYPES[:-1])} or {DTYPES[-1]}, got "
                             f"{self.dtype!r}.")
        if self.roofline_length is not None and self.roofline_length not in self.lengths:
            raise ValueError(f"`roofline_length` (--roofline-length) {self.roofline_length} is not one of `lengths` "
                             f"(--lengths: {','.join(map(str, self.lengths))}); pick one of them, or leave it out "
                             "for the longest.")
        if self.output is not None:
            if not os.path.basename(self.output) or os.path.isdir(self.output):
                raise ValueError(f"`output` (--output) {self.output!r} is a folder; pass a file prefix (e.g. "
                                 "out/bench writes out/bench.csv and out/bench.png).")
            require_writable_folder(os.path.dirname(os.path.abspath(self.output)), "`output` (--output)")
            check_files_free(bench_output_paths(self.output), self.overwrite, "--overwrite (overwrite=True)")
        return entries


@dataclass
class BenchCommandSettings(BenchSettings):
    """What `hf-longdoc bench` takes: a `BenchSettings` whose table goes to out/bench unless `output` says otherwise,
    each family's micro-benchmarks after it (`bench.micro_benchmarks`), or, in its place, the throughput of the
    tokenizers (`bench.tokenizer_speeds`) or the cost of fitting selection statistics (`bench.selection_fit_costs`).
    """

    output: str | None = "out/bench"
    micro_benchmarks: bool = option(True, "after the table: each family's micro-benchmarks (its hot kernel against "
                                          "plain matmuls, the cost of choosing global tokens; --no-micro-benchmarks "
                                          "skips them)")
    tokenizers: str | None = option(None, "instead of models: tokenizer throughput (MB/s) on a .txt/.jsonl file, "
                                          "repeated to --megabytes", type=str, metavar="TEXT_FILE")
    megabytes: float = option(10.0, "with --tokenizers: MB of text to encode", type=POSITIVE_NUMBER.parse)
    elements_per_material: int = option(4, "with --tokenizers: bytes per material (v) of the elementwise tokenizer "
                                           "timed", type=POSITIVE_INTEGER.parse, metavar="V")
    fit_documents: int | None = option(None, "instead of models: seconds to fit the selection statistics (TF-IDF + "
                                             "PMI) on N documents of the longest --lengths tokens",
                                       type=POSITIVE_INTEGER.parse, metavar="N")


__all__ = ["BenchCommandSettings", "BenchSettings", "CompareSettings"]
