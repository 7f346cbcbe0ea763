"""`DocumentClassifier`: `predict`'s reading of a document, called on a batch of rows, for the engines a corpus lives
in (Ray Data's `map_batches`, Spark's `mapInArrow` / `predict_batch_udf`, or a plain loop).

It is `predict` without the run around it: the same `SavedModel` checks, the same `Reader` (tokenizing, grouping by
length, one document a forward pass on the CPU, the threads of `threads.reading_workers`), and the same prediction
per row, so a row gets the same label, scores and evidence as in `predict`'s output whichever batches the engine
forms (on a GPU, where batches are read whole, scores can move in their last digits with the documents padded
beside them; `batch_size=1` reads one document a pass there too). Resuming, sharding and the output file are the
engine's: an engine retries a failed task by calling the class again on the same rows.

The object is picklable (an engine ships it to its workers): the model is loaded on a worker's first call, never
pickled.
"""

import logging
import os

from ..data.inversion import join_parts
from ..predicting.inputs import text_column_names
from ..predicting.settings import PredictSettings
from ..predicting.writing import OUTPUT_COLUMNS, reserved_columns
from ..utils.rules import POSITIVE_INTEGER

logger = logging.getLogger(__name__)
COVERAGE = "coverage"  # the column with `coverage=True`: what of each document the model read (`Reader.coverage`)


class DocumentClassifier:
    """Label the documents of a batch with the model saved in `model_dir`, as `hf-longdoc predict` labels them.

    Args:
        model_dir: a folder saved by `hf-longdoc train` or `save_pretrained` (a sequence classifier and tokenizer).
        text_column: the column holding the document, or several comma-separated (`title,text`), joined as `train`
            and `predict` join them.
        coverage: add a `coverage` column: the document's ids, how many were read, whether it was cut, which part.
        threads: the CPU threads this worker reads on (None: the process's, as the engine set them: Ray and Spark
            set OMP_NUM_THREADS from the cores they reserve). One thread a worker and a worker a core is `predict`'s
            own reading on the CPU (a batch per thread, `threads.reading_workers`).
        batch_tokens: also cap each forward batch at this many padded ids (documents x the longest's ids), so that
            a batch of long documents holds fewer of them than `batch_size`; None: `batch_size` documents.
        **settings: `predict`'s reading settings (`PredictSettings`: `batch_size`, `device`, `dtype`, `long`,
            `truncation_side`, `stride`, `aggregation`, `top_k`, `explain`, `config_overrides`, `backend`,
            `graph_dir`); the corpus run's own (`id_column`, `keep_columns`, `overwrite`) are the engine's here.

    Called on a batch (a dict of columns as Ray's numpy batches, a pandas DataFrame or a pyarrow Table), it returns
    the same kind with every input column and `label`, `score`, `scores`, `error` (why a row has no label: missing,
    blank or unreadable text), `chunks` with `long="chunks"`, `evidence` with `explain`, and `coverage` when asked.
    An input column with one of those names is kept as `input_<name>` (the gold `label` beside the prediction).
    A row that cannot be classified never fails the batch: it gets its `error`.

    Ray Data: `ds.map_batches(DocumentClassifier, fn_constructor_kwargs={"model_dir": ...}, concurrency=2,
    num_cpus=0.5, batch_size=64)`; Spark: `hf_longdoc.engines.spark.classify(df, model_dir)`. The settings and the
    folder's config are checked when the object is made; the model loads on its first batch (on the worker).
    """

    RUN_SETTINGS = ("id_column", "keep_columns", "overwrite", "window_batches")  # `predict`'s run, not the reading

    def __init__(self, model_dir, text_column="text", coverage=False, batch_tokens=None, threads=None, **settings):
        if not isinstance(model_dir, (str, os.PathLike)):
            raise TypeError(f"`model_dir` must be a saved model folder, got {type(model_dir).__name__}.")
        if run_only := sorted(set(settings) & set(self.RUN_SETTINGS)):
            raise TypeError(f"DocumentClassifier() does not take {', '.join(run_only)}: a batch keeps its own "
                            "columns (the engine's rows are the ids), and the engine writes the output.")
        if not isinstance(coverage, bool):
            raise TypeError(f"`coverage` must be True or False, got {coverage!r}.")
        for name, value in (("batch_tokens", batch_tokens), ("threads", threads)):
            if value is not None:
                POSITIVE_INTEGER.check(value, name)
        from ..inference.reader import MODEL_ARGUMENT, saved_labels
        from ..saving.saved_models import saved_config

        self.model_dir = os.fspath(model_dir)
        self.settings = PredictSettings.of(text_column=text_column, **settings)
        self.coverage, self.batch_tokens, self.threads = coverage, batch_tokens, threads
        config = saved_config(self.model_dir, MODEL_ARGUMENT)  # a folder that is no model is refused here, at once
        self.labels = saved_labels(config)
        self.multi_label = config.get("problem_type") == "multi_label_classification"
        self._reader = None

    def __getstate__(self):
        """What an engine ships to a worker: the folder and the settings, never the loaded model."""
        return {**self.__dict__, "_reader": None}

    def __repr__(self):
        return f"DocumentClassifier({self.model_dir!r}, text_column={self.settings.text_column!r})"

    @property
    def reader(self):
        """The `Reader` of the model, loaded on first use in this process (a worker's first batch)."""
        if self._reader is None:
            if self.threads is not None:  # this worker's share of the cores (an engine sets OMP_NUM_THREADS as it
                import torch  # reserves them, which need not be what it runs on)

                torch.set_num_threads(self.threads)
            self._reader = open_reader(self.model_dir, self.settings)
        return self._reader

    @property
    def text_columns(self):
        """The column names the document is read from (one, or the parts `text_column` names)."""
        return text_column_names(self.settings.text_column)

    def output_columns(self):
        """The columns a batch gains, in order."""
        columns = ["label", "score", "scores"]
        if self.settings.long == "chunks":
            columns.append("chunks")
        if self.settings.explain is not None:
            columns.append("evidence")
        columns.append("error")
        if self.coverage:
            columns.append(COVERAGE)
        return columns

    def __call__(self, batch):
        """`batch` with the predictions' columns added (see the class)."""
        import pandas as pd
        import pyarrow as pa

        if isinstance(batch, pa.RecordBatch):
            batch = pa.Table.from_batches([batch])
        if isinstance(batch, pa.Table):
            texts = self._texts({name: batch.column(name).to_pylist() for name in self._present(batch.column_names)})
            columns = self.classify(texts)
            table = batch.rename_columns(self._kept_names(batch.column_names))
            for name, values in columns.items():
                table = table.append_column(name, pa.array(values, type=self.arrow_type(name)))
            return table
        if isinstance(batch, pd.DataFrame):
            texts = self._texts({name: batch[name].tolist() for name in self._present(batch.columns)})
            frame = batch.rename(columns=dict(zip(batch.columns, self._kept_names(batch.columns))))
            columns = {name: pd.Series(values, index=frame.index, dtype=object)  # None stays None, not NaN
                       for name, values in self.classify(texts).items()}
            return frame.assign(**columns)
        if isinstance(batch, dict):  # Ray's numpy batches: each column an array
            import numpy as np

            texts = self._texts({name: list(batch[name]) for name in self._present(batch)})
            result = dict(zip(self._kept_names(batch), batch.values()))
            for name, values in self.classify(texts).items():
                column = np.empty(len(values), dtype=object)
                column[:] = values
                result[name] = column
            return result
        raise TypeError(f"DocumentClassifier takes a batch as a dict of columns, a pandas DataFrame or a pyarrow "
                        f"Table, got {type(batch).__name__}.")

    def _present(self, columns):
        """The text columns, with a ValueError naming the batch's columns when one is missing."""
        columns = list(columns)
        if missing := [name for name in self.text_columns if name not in columns]:
            raise ValueError(f"`text_column` {', '.join(map(repr, missing))} is not a column of the batch; its "
                             f"columns are {', '.join(map(str, columns))}. Pass text_column=... (several: "
                             "'title,text').")
        return self.text_columns

    def _texts(self, parts):
        """Each row's document: the text column's value, or the parts joined as `predict` joins them."""
        names = self.text_columns
        if len(names) == 1:
            return [missing_as_none(value) for value in parts[names[0]]]
        rows = zip(*(parts[name] for name in names))
        return [join_parts([missing_as_none(value) for value in row]) for row in rows]

    def _kept_names(self, columns):
        """The batch's column names, those the predictions take renamed `input_<name>` (nothing is lost: the gold
        `label` stays beside the predicted one), with a ValueError when `input_<name>` is taken too."""
        columns = [str(name) for name in columns]
        taken = set(self.output_columns()) | set(reserved_columns(()))
        kept = [f"input_{name}" if name in taken else name for name in columns]
        if clash := sorted(name for name in columns if name in taken and f"input_{name}" in columns):
            raise ValueError(f"The batch has columns {', '.join(clash)}, which the predictions take, and "
                             f"{', '.join('input_' + name for name in clash)}, where they would be kept; drop or "
                             "rename one.")
        return kept

    def classify(self, texts):
        """`{column: values}` of the predictions of `texts` (strings, or None for a missing one), in their order."""
        if not texts:
            return {name: [] for name in self.output_columns()}
        reader = self.reader
        documents = reader.documents(0, texts)
        predictions = [None] * len(texts)
        for _, rows in reader.read_batches(self._batches(documents)):
            for row, prediction in rows:
                predictions[row] = prediction
        if cut := sum(1 for prediction in predictions if prediction.get("cut")):
            logger.info("%d of %d documents of this batch are longer than the %s ids the model reads and were cut "
                        "there (coverage=True shows which; long='chunks' reads all of each).", cut, len(texts),
                        reader.length)
        by_row = {document["row"]: document for document in documents}
        columns = {name: [] for name in self.output_columns()}
        for row, prediction in enumerate(predictions):
            for name in columns:
                if name == COVERAGE:
                    value = reader.coverage(by_row[row]) if "error" not in by_row[row] else None
                elif name == "scores" and prediction.get("scores") is not None:
                    value = {label: prediction["scores"].get(label) for label in self.labels}  # top_k: others null
                else:
                    value = prediction.get(name)
                columns[name].append(value)
        return columns

    def _batches(self, documents):
        """The reader's batches (longest first, `batch_size` documents), each also capped at `batch_tokens`."""
        batches = self.reader.batches(documents)
        if self.batch_tokens is None:
            return batches
        capped = []
        for batch in batches:
            if "error" in batch[0]:
                capped.append(batch)
                continue
            current = []
            for document in batch:  # longest first: the first sets the padded length
                longest = max(len(chunk) for chunk in (current[0] if current else document)["chunks"])
                if current and (len(current) + 1) * longest > self.batch_tokens:
                    capped.append(current)
                    current = []
                current.append(document)
            capped.append(current)
        return capped

    def arrow_type(self, name):
        """The pyarrow type of the output column `name`: `predict`'s Parquet types."""
        import pyarrow as pa

        multi = self.multi_label
        types = {
            "label": pa.list_(pa.string()) if multi else pa.string(),
            "score": pa.list_(pa.float64()) if multi else pa.float64(),
            "scores": pa.struct([(label, pa.float64()) for label in self.labels]),
            "chunks": pa.int64(),
            "evidence": pa.list_(pa.struct([("text", pa.string()), ("start", pa.int64()), ("end", pa.int64()),
                                            ("weight", pa.float64())])),
            "error": pa.string(),
            COVERAGE: pa.struct([("document_ids", pa.int64()), ("ids_read", pa.int64()), ("cut", pa.bool_()),
                                 ("part_read", pa.string()), ("chunks", pa.int64())]),
        }
        return types[name]

    def arrow_schema(self, input_schema):
        """The schema of a classified batch whose input has `input_schema` (a `pyarrow.Schema`)."""
        import pyarrow as pa

        fields = [field.with_name(name) for field, name in zip(input_schema, self._kept_names(input_schema.names))]
        return pa.schema(fields + [pa.field(name, self.arrow_type(name)) for name in self.output_columns()])


def missing_as_none(value):
    """A missing cell as None (pandas' NaN, numpy's None), so its row's `error` says "missing text" as `predict`'s."""
    if value is None or (isinstance(value, float) and value != value):
        return None
    return value


def open_reader(model_dir, settings):
    """The `Reader` `predict` would read with, in this process: an exported graph must already be there (an engine's
    workers would otherwise export it at once, each its own: run `hf-longdoc export` first, or `predict --engine`,
    which exports it once before the workers start)."""
    from ..inference.reader import SavedModel

    saved = SavedModel(model_dir, settings)
    settings.note_ignored()
    runner = None
    if settings.backend != "torch":
        import torch

        from ..inference.onnx_runtime import GraphRunner, plan_graph

        plan = plan_graph(model_dir, settings.backend, settings.graph_dir)
        if plan.export or plan.quantize:
            raise ValueError(f"`backend` {settings.backend}: the graph {plan.path} {plan.why}; export it once before "
                             f"the workers start (`hf-longdoc export {model_dir}`"
                             + (" --quantize int8" if plan.quantize else "") + ").")
        runner = GraphRunner(plan.path, threads=1 if saved.workers > 1 else torch.get_num_threads())
    return saved.reader(runner)


__all__ = ["COVERAGE", "DocumentClassifier", "OUTPUT_COLUMNS", "open_reader"]
