"""What `predict` (and `hf-longdoc predict`) takes: the shared reading settings and a corpus run's own. Nothing heavy is
imported here, so `hf-longdoc predict --help` builds its flags at once."""

from dataclasses import dataclass, fields

from ..inference.settings import BACKENDS, ReadSettings
from ..utils.catalog import EVIDENCE_WEIGHTS, RUNTIME_SETTINGS
from ..utils.parsing import name_list, option, parse_config_overrides, settings_of
from ..utils.rules import POSITIVE_INTEGER

ENGINES = ("local", "ray", "spark")
WINDOW_BATCHES = 32  # batches sorted by length together: larger groups pad less, smaller ones resume finer


def _runtime_settings():
    """The runtime settings of each family that has some, for the help text."""
    return "; ".join(f"{name}: {', '.join(settings)}" for name, settings in RUNTIME_SETTINGS.items())


@dataclass(frozen=True, kw_only=True)
class PredictSettings(ReadSettings):
    """How `predict` reads a corpus: `ReadSettings` (shared with `serve`) and a run's own settings, each documented
    once in its field (`hf-longdoc predict --help` shows them). The settings that change the rows are part of the
    run's fingerprint (`row_settings`); the others (`RUN_ONLY`) may change between a run and its continuation.
    `raw_scores` (each prediction also holds its `logits`) and `window_batches` (batches per window; None:
    `WINDOW_BATCHES`) are the Python API's only."""

    text_column: str = option("text", "the column holding the document, or several comma-separated (title,text), "
                                      "joined as train joins them")
    id_column: str | None = option(None, "the column naming each row (unique values); None: the input's `id` column, "
                                         "else the row number (a folder: the file's path)", type=str)
    keep_columns: tuple = option((), "comma-separated input columns to copy into the output", type=name_list,
                                 metavar="NAMES")
    batch_size: int = option(8, "documents (with --long chunks: chunks) per forward pass; an interrupted run may "
                                "continue at another (e.g. a smaller one after running out of memory)",
                             type=POSITIVE_INTEGER.parse)
    top_k: int | None = option(None, "keep the K best classes in `scores`, best first; None: every class",
                               type=POSITIVE_INTEGER.parse, metavar="K")
    explain: int | None = option(None, "add `evidence`: the K passages (whole words, with their character offsets) "
                                       "that weighed most in each decision (models whose weights say so; not with "
                                       "--long chunks, whose chunks it cannot weigh against each other). A passage's "
                                       "`weight`: " + "; ".join(f"{name}: {meaning}"
                                                                for name, meaning in EVIDENCE_WEIGHTS.items()),
                                 type=POSITIVE_INTEGER.parse, metavar="K")
    overwrite: bool = option(False, "replace an existing --output (an interrupted run of the same command still "
                                    "continues; one of other settings is discarded), and another model's graphs in "
                                    "--graph-dir")
    config_overrides: dict | None = option(None, "how the saved model runs, not what it computes: its family's "
                                                 f"runtime settings ({_runtime_settings()}), e.g. compile_gates=false; "
                                                 "they do not change the rows, so a run may continue with others",
                                           flag="config", nargs="*", metavar="KEY=VALUE",
                                           combine=parse_config_overrides)
    backend: str = option("torch", "torch: the model in PyTorch; onnxruntime: the float32 graph `hf-longdoc export` "
                                   "writes (exported once into --graph-dir when missing or older than the weights; "
                                   "CPU; no --explain); onnxruntime-int8: its dynamic int8 quantization (`export "
                                   "--quantize int8` measures its accuracy)", choices=BACKENDS)
    graph_dir: str | None = option(None, "with an onnxruntime backend: the folder of the exported graphs; None: "
                                         "MODEL_DIR/onnx. Another model's graphs there are refused (unless "
                                         "--overwrite), and a graph without export.json is checked against the model "
                                         "before it runs", type=str, metavar="PATH")
    engine: str = option("local", "where the rows are read: local (this process, or the processes of torchrun); ray: "
                                  "Ray Data's workers (the running cluster, else a local one on this machine's "
                                  "cores); spark: Spark's executors (the active session, else local[N]). The rows "
                                  "are the same, in the same order; only local keeps its progress to resume",
                         choices=ENGINES)
    workers: int | None = option(None, "with --engine ray or spark: workers (a Ray worker or a Spark task each, on "
                                       "one CPU thread, or one per GPU with --device cuda); None: one per core",
                                 type=POSITIVE_INTEGER.parse, metavar="N")
    window_batches: int | None = None

    # how a run goes, not what its rows hold: a run may continue with other values (at a smaller batch size after
    # running out of memory; its windows keep their rows, `open_partial`); the fingerprint records the device's type
    RUN_ONLY = ("batch_size", "device", "overwrite", "config_overrides", "graph_dir", "window_batches", "engine",
                "workers")

    @classmethod
    def of(cls, settings=None, **changes):
        """`settings` (None: the defaults) with `changes` to its fields (`predict`'s keyword arguments), and a
        TypeError naming any unknown one."""
        return settings_of(cls, settings, changes, "predict()", "`predict(model_dir, dataset, output, batch_size=4)`")

    def __post_init__(self):
        super().__post_init__()
        for name in ("text_column", "id_column"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, str) or not value):
                raise TypeError(f"`{name}` (--{name.replace('_', '-')}) must be a column name, got {value!r}.")
        if self.text_column is None:
            raise TypeError("`text_column` (--text-column) must be a column name, got None.")
        keep = self.keep_columns or ()
        if isinstance(keep, str):
            keep = name_list(keep)
        if not all(isinstance(name, str) and name for name in keep):
            raise TypeError(f"`keep_columns` (--keep-columns) must be column names, got {self.keep_columns!r}.")
        object.__setattr__(self, "keep_columns", tuple(dict.fromkeys(keep)))
        if self.window_batches is None:
            object.__setattr__(self, "window_batches", WINDOW_BATCHES)
        POSITIVE_INTEGER.check(self.window_batches, "window_batches")
        if self.backend != "torch":
            self._check_graph_backend()
        if self.engine not in ENGINES:
            raise ValueError(f"`engine` (--engine) must be one of {', '.join(ENGINES)}, got {self.engine!r}.")
        if self.workers is not None:
            POSITIVE_INTEGER.check(self.workers, "workers")
            if self.engine == "local":
                raise ValueError("`workers` (--workers) sizes --engine ray or spark; locally, the processes are "
                                 "torchrun's (--nproc-per-node) and the threads OMP_NUM_THREADS: drop --workers, or "
                                 "pass --engine.")
        if not isinstance(self.overwrite, bool):
            raise TypeError(f"`overwrite` (--overwrite) must be True or False, got {self.overwrite!r}.")

    def _check_graph_backend(self):
        """ValueErrors, before any work, for what an exported graph cannot do."""
        from ..inference.export import PRECISIONS, require_onnxruntime

        require_onnxruntime(f"`backend` (--backend) {self.backend}")
        if self.explain is not None:
            raise ValueError(f"`explain` (--explain) reads the model's attention weights, and the exported graph "
                             f"that --backend {self.backend} runs returns only the logits: drop --explain, or pass "
                             "--backend torch.")
        if self.dtype not in (None, "float32"):
            raise ValueError(f"`dtype` (--dtype) {self.dtype} sets the PyTorch weights' precision; --backend "
                             f"{self.backend} runs the exported graph ({PRECISIONS[self.backend]}): drop --dtype, or "
                             "pass --backend torch.")

    @property
    def window_rows(self):
        return self.batch_size * self.window_batches

    def row_settings(self):
        """`{name: value}` of the settings that change the rows (all but `RUN_ONLY`), for the run's fingerprint; a
        default `truncation_side` is left out, so a run begun before it existed continues."""
        settings = {f.name: getattr(self, f.name) for f in fields(self) if f.name not in self.RUN_ONLY}
        if settings["truncation_side"] == "right":
            del settings["truncation_side"]
        return settings


__all__ = ["ENGINES", "PredictSettings", "WINDOW_BATCHES"]
