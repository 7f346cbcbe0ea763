"""Label a Ray Dataset: `classify(ds, model_dir)` is `ds.map_batches(DocumentClassifier, ...)` sized by the package's
thread rules: on CPUs a worker per core, each reading on one thread (`predict`'s own reading: a batch per thread);
with `num_gpus=1`, a worker per GPU.

    import ray
    from hf_longdoc.engines.ray_data import classify

    ds = ray.data.read_json("s3://bucket/corpus/")           # or read_parquet, from_huggingface, ...
    classify(ds, "/shared/model", batch_size=64).write_parquet("s3://bucket/labels/")

Each CPU worker reserves `RESERVED_PER_THREAD` of a Ray CPU per thread it reads on: with a whole CPU each, a cluster
of N cores running N workers has no CPU left for the read and write tasks, and Ray Data waits for ever (seen with
`ray.init(num_cpus=2)` and two workers). Ray retries a failed task on the same rows (`max_task_retries`, the actor
pool's `max_restarts`); a job killed halfway starts again from its input (Ray Data keeps no progress of its own).
"""

import logging

from .classifier import DocumentClassifier

logger = logging.getLogger(__name__)
RESERVED_PER_THREAD = 0.5  # of a Ray CPU: the rest of the cluster's CPUs stay schedulable for reads and writes


def require_ray(what="Ray Data"):
    """`ray` imported, or an ImportError that names the extra to install."""
    try:
        import ray
        import ray.data  # noqa: F401
    except ImportError:
        raise ImportError(f'{what} needs Ray Data: pip install "hf_longdoc[ray]".') from None
    return ray


def worker_count(num_gpus=None, threads=1):
    """Workers the running Ray cluster holds: one per GPU with `num_gpus`, else its CPUs over each worker's
    threads."""
    ray = require_ray()
    resources = ray.cluster_resources()
    if num_gpus:
        gpus = int(resources.get("GPU", 0) // num_gpus)
        if gpus < 1:
            raise ValueError(f"`num_gpus` {num_gpus}: the Ray cluster has {resources.get('GPU', 0):g} GPUs; drop "
                             "num_gpus to read on CPU workers.")
        return gpus
    return max(1, int(resources.get("CPU", 1) // threads))


def classify(dataset, model_dir, *, batch_size=64, concurrency=None, threads=1, num_gpus=None, **settings):
    """`dataset` (a `ray.data.Dataset`) with `DocumentClassifier`'s columns added, lazily, as Ray Data runs.

    Args:
        batch_size: rows Ray hands each call; the model's forward batches are `reading_batch_size` documents
            (`predict`'s --batch-size, 8) and at most `batch_tokens` padded ids.
        concurrency: workers, each loading the model once (None: `worker_count`: a GPU each, or `threads` cores).
        threads: CPU threads each CPU worker reads on.
        num_gpus: GPUs per worker (1: a worker per GPU, reading on it); None: CPU workers.
        **settings: `DocumentClassifier`'s (`text_column`, `coverage`, `batch_tokens`, `explain`, `top_k`, ...).
    """
    return map_classifier(dataset, DocumentClassifier, model_dir, batch_size=batch_size, concurrency=concurrency,
                          threads=threads, num_gpus=num_gpus, **settings)


def map_classifier(dataset, classifier, model_dir, *, batch_size, concurrency=None, threads=1, num_gpus=None,
                   **settings):
    """`dataset.map_batches(classifier, ...)` for `classifier`, `DocumentClassifier` or a subclass taking its
    settings, on workers sized as `classify` says."""
    require_ray()
    if "reading_batch_size" in settings:
        settings["batch_size"] = settings.pop("reading_batch_size")
    settings = {"model_dir": str(model_dir), "threads": None if num_gpus else threads, **settings}
    classifier(**settings)  # the settings and the folder checked here, before Ray starts workers
    workers = concurrency if concurrency is not None else worker_count(num_gpus, threads)
    logger.info("Labelling with %d Ray worker(s), each on %s.", workers,
                f"{num_gpus:g} GPU" if num_gpus else f"{threads} CPU thread(s)")
    resources = ({"num_gpus": num_gpus, "num_cpus": RESERVED_PER_THREAD} if num_gpus
                 else {"num_cpus": RESERVED_PER_THREAD * threads})
    return dataset.map_batches(classifier, fn_constructor_kwargs=settings, batch_format="pyarrow",
                               batch_size=batch_size, concurrency=workers, **resources)


__all__ = ["RESERVED_PER_THREAD", "classify", "require_ray", "worker_count"]
