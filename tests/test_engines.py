"""Label a corpus in an engine (`hf_longdoc.engines`): `DocumentClassifier` gives `predict`'s rows on any batch the
engine forms (a dict of columns, pandas, pyarrow), pickles without its model, and refuses bad input before any work;
Ray Data (`ray.init(num_cpus=2)`) and Spark (`local[2]`) label a file with the same rows as `predict`, and
`predict --engine ray|spark` writes the same bytes as `--engine local`. The engines' tests skip with a reason where
an engine is absent, unless HF_LONGDOC_REQUIRE_ENGINES=1 (CI), where they must run."""

import json
import os
import pickle
import shutil
import sys

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import hf_longdoc
from hf_longdoc.cli import main
from hf_longdoc.engines import DocumentClassifier
from test_serving import TEXTS, save_contextualizer

REQUIRED = os.environ.get("HF_LONGDOC_REQUIRE_ENGINES") == "1"
ODD = ["", "   ", None, "\u200b\u200b", "Une dépêche en français. Второй абзац по-русски. 日本語の文。"]


def engine_or_skip(module, why):
    """The engine's module, or a skip naming what is missing (a failure where the engines are required)."""
    try:
        return pytest.importorskip(module, reason=why)
    except pytest.skip.Exception:
        if REQUIRED:
            pytest.fail(f"HF_LONGDOC_REQUIRE_ENGINES=1 and {why}")
        raise


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return save_contextualizer(tmp_path_factory.mktemp("engine-model"))


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """A JSONL file of long documents (most longer than the model reads), one in another script, empty, blank,
    missing and invisible ones, and a gold `label` column; ids out of order."""
    rows = [{"id": f"doc-{(7 * i) % 23}", "text": text, "label": "gold"} for i, text in enumerate(TEXTS + ODD)]
    path = tmp_path_factory.mktemp("engine-corpus") / "corpus.jsonl"
    path.write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows), encoding="utf-8")
    return str(path), rows


@pytest.fixture(scope="module")
def expected(model_dir, corpus, tmp_path_factory):
    """`predict`'s JSONL rows of the corpus, with evidence (keyed by id)."""
    output = tmp_path_factory.mktemp("engine-expected") / "local.jsonl"
    hf_longdoc.predict(model_dir, corpus[0], str(output), explain=2, keep_columns="label")
    return {row["id"]: row for row in map(json.loads, output.read_text(encoding="utf-8").splitlines())}


def same_as_predict(expected, got):
    """Each row's label, score, scores (as JSON), evidence and error are predict's, to the byte."""
    for row in got:
        want = expected[row["id"]]
        for name in ("label", "score", "error"):
            assert row[name] == want[name], (row["id"], name)
        assert json.dumps(row["scores"]) == json.dumps(want["scores"]), row["id"]
        assert json.dumps(row["evidence"]) == json.dumps(want["evidence"]), row["id"]
        assert row["input_label"] == want["input_label"] == "gold"


def test_every_kind_of_batch_gets_predicts_rows_whatever_its_size(model_dir, corpus, expected):
    rows = corpus[1]
    classifier = DocumentClassifier(model_dir, explain=2, batch_size=3)
    frame = pd.DataFrame(rows)
    got = []
    for start, stop in ((0, 1), (1, 6), (6, 7), (7, len(rows))):  # batches of 1, 5, 1 and the rest
        part = frame.iloc[start:stop]
        kinds = (part, pa.Table.from_pandas(part, preserve_index=False),
                 {name: np.array(part[name].tolist(), dtype=object) for name in part})
        results = [classifier(batch) for batch in kinds]
        as_rows = [results[0].to_dict("records"), results[1].to_pylist(),
                   [dict(zip(results[2], values)) for values in zip(*results[2].values())]]
        for kind in as_rows:
            same_as_predict(expected, kind)
        assert type(results[0]) is pd.DataFrame and type(results[1]) is pa.Table and type(results[2]) is dict
        got += as_rows[1]
    assert [row["id"] for row in got] == [row["id"] for row in rows]  # every row, in order, its columns kept
    errors = {row["text"]: row["error"] for row in got if row["error"]}
    assert errors == {"": "empty text", "   ": "the text is only whitespace", None: "missing text",
                      "\u200b\u200b": "the text has no visible character (2 invisible or control characters)"}
    assert classifier(frame.iloc[0:0]).columns.tolist()[-5:] == ["label", "score", "scores", "evidence", "error"]


def test_it_pickles_without_its_model_and_loads_it_once(model_dir, corpus):
    classifier = DocumentClassifier(model_dir)
    batch = pd.DataFrame(corpus[1][:3])
    first = classifier(batch)
    reader = classifier.reader
    classifier(batch)
    assert classifier.reader is reader  # loaded on the first call only
    shipped = pickle.dumps(classifier)
    assert len(shipped) < 10_000  # the folder and the settings, not the weights
    copy = pickle.loads(shipped)
    assert copy._reader is None
    pd.testing.assert_frame_equal(copy(batch), first)


def test_coverage_and_token_sized_batches(model_dir, corpus, expected):
    rows = [row for row in corpus[1] if row["text"] and row["text"].strip()][:6]
    plain = DocumentClassifier(model_dir, coverage=True)(pa.Table.from_pylist(rows)).to_pylist()
    capped = DocumentClassifier(model_dir, coverage=True, batch_tokens=100)
    batches = capped._batches(capped.reader.documents(0, [row["text"] for row in rows]))
    assert all(len(batch) * max(len(d["chunks"][0]) for d in batch) <= 100 or len(batch) == 1 for batch in batches)
    assert len(batches) > len(capped.reader.batches(capped.reader.documents(0, [row["text"] for row in rows])))
    got = capped(pa.Table.from_pylist(rows)).to_pylist()
    assert [json.dumps(row["scores"]) for row in got] == [json.dumps(row["scores"]) for row in plain]
    long_one = max(plain, key=lambda row: len(row["text"]))
    coverage = long_one["coverage"]
    assert coverage["cut"] and coverage["part_read"] == "start" and coverage["ids_read"] < coverage["document_ids"]


def test_ray_workers_read_the_input_files_they_classify(model_dir, corpus, expected, tmp_path):
    """`predict --engine ray`'s worker class: a batch of Parquet paths gives the rows of those files, classified, in
    file order, with the text the output does not keep left behind."""
    from hf_longdoc.engines.corpus import FileClassifier

    rows = corpus[1]
    paths = []
    for number, (start, stop) in enumerate(((0, 4), (4, len(rows)))):
        paths.append(str(tmp_path / f"part-{number}.parquet"))
        pq.write_table(pa.Table.from_pylist(rows[start:stop]), paths[-1])
    classifier = FileClassifier(model_dir=model_dir, explain=2, drop=["text"])
    got = classifier(pa.table({"path": paths})).to_pylist()
    assert [row["id"] for row in got] == [row["id"] for row in rows]
    assert all("text" not in row for row in got)
    same_as_predict(expected, got)


def test_bad_input_is_refused_naming_the_argument(model_dir, tmp_path):
    with pytest.raises(TypeError, match="id_column"):
        DocumentClassifier(model_dir, id_column="id")
    with pytest.raises(ValueError, match="`long`"):
        DocumentClassifier(model_dir, long="all")
    with pytest.raises(ValueError, match="batch_tokens"):
        DocumentClassifier(model_dir, batch_tokens=0)
    with pytest.raises(ValueError, match="`model_dir`"):
        DocumentClassifier(tmp_path)  # no model there: refused when made, before an engine ships it
    classifier = DocumentClassifier(model_dir, text_column="body")
    with pytest.raises(ValueError, match="`text_column` 'body' is not a column of the batch; its columns are text"):
        classifier(pd.DataFrame({"text": ["a b"]}))
    with pytest.raises(TypeError, match="dict of columns, a pandas DataFrame or a pyarrow Table"):
        classifier(["a b"])
    with pytest.raises(ValueError, match="input_label"):
        DocumentClassifier(model_dir)(pd.DataFrame({"text": ["a b"], "label": ["x"], "input_label": ["y"]}))


# -- Ray Data ---------------------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def ray():
    ray = engine_or_skip("ray", 'Ray Data is not installed (pip install "hf_longdoc[ray]")')
    engine_or_skip("ray.data", 'Ray Data is not installed (pip install "hf_longdoc[ray]")')
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    ray.data.DataContext.get_current().enable_progress_bars = False
    yield ray
    ray.shutdown()


def test_ray_data_reads_classifies_and_writes_predicts_rows(ray, model_dir, corpus, expected, tmp_path):
    """The class as Ray's docs call one: two CPU workers on the two cores, half a Ray CPU each (room for the read
    and write tasks); `engines.ray_data.classify`, which sizes them so, runs under `predict --engine ray` below."""
    labelled = ray.data.read_json(corpus[0], override_num_blocks=4).map_batches(
        DocumentClassifier, fn_constructor_kwargs={"model_dir": model_dir, "explain": 2}, batch_size=5,
        concurrency=2, num_cpus=0.5)
    labelled.write_parquet(str(tmp_path / "labels"))
    # the files Ray wrote, read without Ray, one by one (a block whose texts are all missing has a null `text`)
    got = [row for path in sorted((tmp_path / "labels").iterdir()) for row in pq.read_table(path).to_pylist()]
    assert sorted(row["id"] for row in got) == sorted(expected)
    same_as_predict(expected, got)


# -- Spark ------------------------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def spark():
    engine_or_skip("pyspark", 'PySpark is not installed (pip install "hf_longdoc[spark]")')
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        if REQUIRED:
            pytest.fail("HF_LONGDOC_REQUIRE_ENGINES=1 and no Java runtime for Spark (apt-get install "
                        "default-jre-headless)")
        pytest.skip("Spark needs a Java runtime (apt-get install default-jre-headless)")
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    session = (SparkSession.builder.master("local[2]").appName("hf-longdoc tests")
               .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "4").getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


def test_spark_classifies_with_predicts_rows_loading_the_model_once_per_process(spark, model_dir, corpus, expected):
    from hf_longdoc.engines import spark as engine
    from hf_longdoc.engines.spark import classify

    frame = spark.read.json(corpus[0]).repartition(4)  # four tasks on the two executor processes
    labelled = classify(frame, model_dir, batch_size=3, explain=2)
    got = [row.asDict(recursive=True) for row in labelled.collect()]
    assert sorted(row["id"] for row in got) == sorted(expected)
    same_as_predict(expected, got)

    # what `classify`'s tasks call for each partition: over 4 tasks of 3 batches, a process's batches share one
    # classifier, loaded once (a fresh copy arrives with each task; the cache is the process's)
    classifier, token = DocumentClassifier(model_dir), "test-token"

    def loaded(batches):
        for batch in batches:
            for _part in pa.Table.from_batches([batch]).to_batches(max_chunksize=2):
                mine = engine.loaded_classifier(token, classifier)
                yield pa.RecordBatch.from_pylist([{"pid": os.getpid(), "copy": id(mine), "reader": id(mine.reader)}])

    seen = frame.select("text").mapInArrow(loaded, "pid long, copy long, reader long").collect()
    assert len(seen) >= 8 and len({row["pid"] for row in seen}) <= 2  # local[2]: at most two Python workers
    for pid in {row["pid"] for row in seen}:
        assert len({(row["copy"], row["reader"]) for row in seen if row["pid"] == pid}) == 1, seen


# -- the command line -------------------------------------------------------------------------------------------------

FLAGS = ["--explain", "2", "--keep-columns", "label", "--top-k", "2"]


@pytest.fixture(scope="module")
def local_output(model_dir, corpus, tmp_path_factory):
    output = tmp_path_factory.mktemp("engine-local") / "local.jsonl"
    assert main(["predict", model_dir, "--dataset", corpus[0], "--output", str(output), *FLAGS]) == 0
    return output.read_bytes()


@pytest.mark.parametrize("engine", ["ray", "spark"])
def test_predict_engine_writes_the_bytes_local_writes(engine, request, model_dir, corpus, local_output, tmp_path):
    request.getfixturevalue(engine)  # the engine (its running session, which the command uses), or the skip
    output = tmp_path / f"{engine}.jsonl"
    assert main(["predict", model_dir, "--dataset", corpus[0], "--output", str(output), *FLAGS, "--engine", engine,
                 "--workers", "1"]) == 0  # one worker: the rows are the same on any number (two: the tests above)
    assert output.read_bytes() == local_output
    with pytest.raises(ValueError, match="already exists"):
        hf_longdoc.predict(model_dir, corpus[0], output, engine=engine)


def test_engine_flags_are_refused_where_they_cannot_apply(model_dir, corpus):
    with pytest.raises(ValueError, match="`workers` .*--engine"):
        hf_longdoc.predict(model_dir, corpus[0], workers=2)
    with pytest.raises(ValueError, match="`engine` .*one of local, ray, spark"):
        hf_longdoc.predict(model_dir, corpus[0], engine="dask")
