"""Label a Spark DataFrame: `classify(df, model_dir)` runs `DocumentClassifier` in `mapInArrow` (Spark 3.4+), the model
loaded once per executor Python process (Spark reuses its Python workers: `spark.python.worker.reuse`, on by default).

    from hf_longdoc.engines.spark import classify

    df = spark.read.json("dbfs:/corpus/")                  # or a table: spark.table("catalog.schema.docs")
    classify(df, "/dbfs/models/topics", text_col="text").write.parquet("dbfs:/labels/")

The rows keep their order within each partition and every input column; the model folder must be readable from
every executor (a shared file system: DBFS, a volume, NFS). A failed task is retried by Spark on the same rows
(`spark.task.maxFailures`); a job killed halfway starts again from its input (write with a partitioned output and
filter the inputs already written to resume).
"""

import logging
import os
import uuid

from .classifier import DocumentClassifier

logger = logging.getLogger(__name__)
_LOADED = {}  # this Python worker's classifiers, by the token of the `classify` call that made them


def require_spark(what="Spark"):
    """`pyspark` imported, or an ImportError that names the extra to install."""
    try:
        import pyspark
    except ImportError:
        raise ImportError(f'{what} needs PySpark: pip install "hf_longdoc[spark]" (and a Java 17 runtime).') from None
    return pyspark


def loaded_classifier(token, classifier):
    """This process's copy of `classifier` for the call `token`, its model loaded on the first batch only."""
    if token not in _LOADED:
        classifier.reader  # noqa: B018 (loads the model)
        _LOADED[token] = classifier
        logger.info("Loaded %s in process %d.", classifier, os.getpid())
    return _LOADED[token]


def classify(df, model_dir, text_col="text", *, batch_size=64, threads=1, **settings):
    """`df` (a `pyspark.sql.DataFrame`) with `DocumentClassifier`'s columns added (`label`, `score`, `scores`,
    `error`, and `chunks`, `evidence`, `coverage` when asked), lazily, as Spark runs.

    Args:
        text_col: the column holding the document (several comma-separated: `title,text`).
        batch_size: rows a call classifies (Spark's Arrow batches, `spark.sql.execution.arrow.maxRecordsPerBatch`,
            are cut to it); the model's forward batches are `reading_batch_size` documents (`predict`'s
            --batch-size, 8).
        threads: CPU threads each task reads on (one task a core: `local[N]`, `spark.task.cpus`).
        **settings: `DocumentClassifier`'s (`coverage`, `batch_tokens`, `explain`, `top_k`, `device`, ...).
    """
    require_spark()
    from pyspark.sql.pandas.types import from_arrow_schema, to_arrow_schema

    if "reading_batch_size" in settings:
        settings["batch_size"] = settings.pop("reading_batch_size")
    # the settings and the folder checked here, on the driver, before Spark starts a task
    classifier = DocumentClassifier(model_dir, text_column=text_col, threads=threads, **settings)
    schema = from_arrow_schema(classifier.arrow_schema(to_arrow_schema(df.schema)))
    token = uuid.uuid4().hex
    rows = int(batch_size)

    def label(batches):
        import pyarrow as pa

        mine = loaded_classifier(token, classifier)
        for batch in batches:
            for part in pa.Table.from_batches([batch]).to_batches(max_chunksize=rows):
                yield from mine(pa.Table.from_batches([part])).to_batches()

    return df.mapInArrow(label, schema)


__all__ = ["classify", "loaded_classifier", "require_spark"]
