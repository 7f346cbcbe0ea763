"""The graphs `predict --backend onnxruntime [--graph-dir DIR]` runs, checked against the model before any document is
read: another model's graphs (their export.json names another model folder) are never replaced without `--overwrite`;
a stale export of the same folder is exported again; a graph without export.json must parse, take the model's inputs,
give its number of logits, hold its vocabulary and its weights, else it is refused in one line naming the export
command; a read-only model folder is told about `--graph-dir`.

One tiny Contextualizer (3 labels, 80 ids of 32 values) exported once for the module; the other model's graphs are
made by hand with `onnx.helper` (a Gather, a mean, a MatMul: what a classifier's graph needs to be checked). The
refusals read `--dataset` from a file that does not exist: they come first, or the error would be the dataset's."""

import errno
import json
import logging
import os
import shutil
import tempfile

import numpy
import pytest
import torch

from hf_longdoc import predicting
from hf_longdoc.cli import main
from hf_longdoc.inference import onnx_runtime
from hf_longdoc.inference.export import export_onnx
from hf_longdoc.saving.run_folder import file_digest, record_outputs
from hf_longdoc.saving.saved_models import model_digest
from test_predict_backends import DOCUMENTS, saved_family_model

onnx = pytest.importorskip("onnx", reason="the onnxruntime backends need pip install 'hf_longdoc[onnx]'")
pytest.importorskip("onnxruntime", reason="the onnxruntime backends need pip install 'hf_longdoc[onnx]'")
pytestmark = pytest.mark.slow  # one export for the module (and one for --overwrite), a few seconds each

ROWS, WIDTH, LABELS = 80, 32, 3  # the tiny Contextualizer's vocabulary, hidden size and labels


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """The model folder, its graph exported into a folder of its own (export.json beside it), a corpus, and the
    scores `--backend torch` gives it."""
    root = tmp_path_factory.mktemp("graph_checks")
    model_dir = saved_family_model("contextualizer", root / "model")
    export_onnx(model_dir, str(root / "graphs"))
    corpus = root / "docs.jsonl"
    corpus.write_text("".join(json.dumps({"text": text}) + "\n" for text in DOCUMENTS[:6]))
    scores = list(predicting.predict(model_dir, str(corpus), batch_size=4)["scores"])
    return {"model": model_dir, "graphs": str(root / "graphs"), "corpus": str(corpus), "scores": scores}


def same_scores(result, saved):
    """The rows of a graph backend are `--backend torch`'s (scores within 1e-5)."""
    return max(abs(a[k] - b[k]) for a, b in zip(result["scores"], saved["scores"]) for k in a) <= 1e-5


def hand_made_graph(path, rows=ROWS, width=WIDTH, labels=LABELS, inputs=("input_ids", "attention_mask")):
    """A classifier's graph as another exporter would write it: logits = mean of the ids' embeddings x W."""
    from onnx import TensorProto, helper, numpy_helper

    generator = numpy.random.default_rng(0)
    initializers = [numpy_helper.from_array(generator.standard_normal((rows, width), dtype=numpy.float32), "table"),
                    numpy_helper.from_array(generator.standard_normal((width, labels), dtype=numpy.float32), "w"),
                    numpy_helper.from_array(numpy.array([1]), "axes")]
    nodes = [helper.make_node("Gather", ["table", inputs[0]], ["embedded"]),
             helper.make_node("ReduceMean", ["embedded", "axes"], ["pooled"], keepdims=0),
             helper.make_node("MatMul", ["pooled", "w"], ["logits"])]
    graph = helper.make_graph(
        nodes, "another", [helper.make_tensor_value_info(name, TensorProto.INT64, ["batch", "sequence"])
                           for name in inputs],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", labels])], initializer=initializers)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]), path)
    return path


def refusal(saved, graph_dir, capsys):
    """rc and stderr of `hf-longdoc predict MODEL --backend onnxruntime --graph-dir graph_dir` on a missing dataset."""
    missing, output = (os.path.join(os.path.dirname(str(graph_dir)), name) for name in ("not_there.jsonl", "o.jsonl"))
    status = main(["predict", saved["model"], "--dataset", missing, "--output", output, "--backend", "onnxruntime",
                   "--graph-dir", str(graph_dir)])
    return status, capsys.readouterr().err


def another_models_folder(folder, owner):
    """A --graph-dir holding the graphs `hf-longdoc export OWNER` wrote: a graph, and export.json naming OWNER and
    its weights, both in the folder's manifest (what lets a rerun replace them)."""
    graph = hand_made_graph(os.path.join(folder, "model.onnx"))
    with open(os.path.join(folder, "export.json"), "w") as f:
        json.dump({"model": {"model.safetensors": "0" * 64}, "model_dir": str(owner),
                   "graphs": {"float32": {"file": "model.onnx"}}}, f)
    record_outputs([graph, os.path.join(folder, "export.json")])
    return {name: file_digest(os.path.join(folder, name)) for name in sorted(os.listdir(folder))}


def test_another_models_graphs_are_refused_unchanged_and_replaced_with_overwrite(saved, tmp_path, capsys):
    before = another_models_folder(tmp_path / "seg_onnx", tmp_path / "seg")
    status, err = refusal(saved, tmp_path / "seg_onnx", capsys)
    assert status == 2 and len(err.strip().splitlines()) == 1
    assert f"its export.json names the model '{tmp_path / 'seg'}'" in err
    assert "another --graph-dir" in err and "--overwrite" in err
    assert {name: file_digest(tmp_path / "seg_onnx" / name) for name in sorted(os.listdir(tmp_path / "seg_onnx"))} \
        == before  # byte for byte, the manifest too

    result = predicting.predict(saved["model"], saved["corpus"], batch_size=4, backend="onnxruntime",
                                graph_dir=str(tmp_path / "seg_onnx"), overwrite=True)
    assert same_scores(result, saved)
    record = json.loads((tmp_path / "seg_onnx" / "export.json").read_text())
    assert record["model_dir"] == os.path.realpath(saved["model"]) and record["model"] == model_digest(saved["model"])


def test_an_export_json_that_names_no_model_folder_is_not_taken_for_this_models(saved, tmp_path, capsys):
    """export.json written before the model folder was recorded: in a --graph-dir of its own, nothing says whose."""
    another_models_folder(tmp_path / "old", tmp_path / "x")
    record = json.loads((tmp_path / "old" / "export.json").read_text())
    del record["model_dir"]
    (tmp_path / "old" / "export.json").write_text(json.dumps(record))
    status, err = refusal(saved, tmp_path / "old", capsys)
    assert status == 2 and "does not say which model folder" in err and "--overwrite" in err


class Exported(Exception):
    """Raised by the stubbed export: the run decided to export, and stops there."""


def test_a_retrained_model_is_exported_again_into_its_graph_dir_and_its_own_folder(saved, tmp_path, monkeypatch,
                                                                                 caplog):
    """The same model folder, retrained since its export into --graph-dir (export.json names the folder), or into
    MODEL_DIR/onnx by an earlier hf-longdoc (export.json names no folder): a stale export, exported once as before.
    A copy of the model with its graphs, then retrained, is refused: its export.json names the original. The export
    is stubbed; test_predict_backends exports a retrained model again for real."""
    model_dir = str(tmp_path / "model")
    shutil.copytree(saved["model"], model_dir)
    for folder, named in ((tmp_path / "graphs", os.path.realpath(model_dir)), (tmp_path / "model" / "onnx", None)):
        shutil.copytree(saved["graphs"], folder)
        record = json.loads((folder / "export.json").read_text())
        record.pop("model_dir")
        (folder / "export.json").write_text(json.dumps({**record, "model_dir": named} if named else record))
    from hf_longdoc.saving.saved_models import load_saved_model

    model = load_saved_model(model_dir, "model")
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.add_(0.01)
    model.save_pretrained(model_dir)  # retrained: other weights in the same folder
    exports = []

    def export(model_dir, output_dir=None, overwrite=False):
        exports.append((model_dir, output_dir))
        raise Exported

    monkeypatch.setattr(onnx_runtime, "export_onnx", export)
    for graph_dir, folder in ((str(tmp_path / "graphs"), str(tmp_path / "graphs")),
                              (None, os.path.join(model_dir, "onnx"))):
        with caplog.at_level(logging.INFO), pytest.raises(Exported):
            predicting.predict(model_dir, saved["corpus"], backend="onnxruntime", graph_dir=graph_dir)
        assert exports[-1] == (model_dir, folder)
        assert "was exported from other weights than the model has now: exporting it once" in caplog.text

    shutil.copytree(saved["graphs"], tmp_path / "model" / "onnx", dirs_exist_ok=True)  # names the original folder
    with pytest.raises(ValueError, match=f"names the model '{saved['model']}'.*--overwrite"):
        predicting.predict(model_dir, saved["corpus"], backend="onnxruntime")
    assert len(exports) == 2


def test_a_file_that_is_not_a_graph_is_refused_in_one_line(saved, tmp_path, capsys):
    (tmp_path / "userg").mkdir()
    (tmp_path / "userg" / "model.onnx").write_text("my graph\n")
    status, err = refusal(saved, tmp_path / "userg", capsys)
    assert status == 2 and len(err.strip().splitlines()) == 1
    assert f"'{tmp_path / 'userg' / 'model.onnx'}' is not an ONNX graph onnx can read" in err
    assert f"`hf-longdoc export {saved['model']} --output-dir {tmp_path / 'userg'} --overwrite`" in err
    (tmp_path / "userg" / "model.onnx").write_bytes(b"")  # parses as an empty graph
    assert "holds no ONNX graph" in refusal(saved, tmp_path / "userg", capsys)[1]
    with pytest.raises(ValueError, match="onnxruntime cannot load .*hf-longdoc export MODEL_DIR"):
        onnx_runtime.GraphRunner(str(tmp_path / "userg" / "model.onnx"))


@pytest.mark.parametrize("shape, words", [
    (dict(labels=4), ["gives 4 logits a document", "has 3 labels"]),
    (dict(rows=50), ["has 80x32 word embeddings", "its word embeddings are 50x32 (a vocabulary of 50 ids)"]),
    (dict(rows=50, width=16), ["has 80x32 word embeddings", "are 50x16"]),
    (dict(inputs=("ids", "attention_mask")), ["takes the inputs ['ids', 'attention_mask']"]),
], ids=["other-label-count", "other-vocabulary", "other-width", "other-inputs"])
def test_a_graph_without_export_json_of_another_shape_is_refused(saved, tmp_path, capsys, shape, words):
    hand_made_graph(str(tmp_path / "g" / "model.onnx"), **shape)
    status, err = refusal(saved, tmp_path / "g", capsys)
    assert status == 2 and len(err.strip().splitlines()) == 1
    assert all(word in err for word in words), err
    assert f"hf-longdoc export {saved['model']} --output-dir {tmp_path / 'g'} --overwrite" in err


def test_a_same_shaped_graph_of_another_exporter_can_be_checked_for_its_shapes_only(saved, tmp_path):
    """Weights named otherwise than `hf-longdoc export` names them: nothing says whose they are, so the graph runs,
    and the warning says what was checked and how to make it checkable."""
    graph = hand_made_graph(str(tmp_path / "g" / "model.onnx"))
    plan = onnx_runtime.plan_graph(saved["model"], "onnxruntime", str(tmp_path / "g"))
    assert plan.path == graph and not plan.export
    assert "(its inputs, 3 logits, a vocabulary of 80 ids)" in plan.note and "which writes export.json" in plan.note


def test_a_graph_without_export_json_runs_only_with_the_models_weights(saved, tmp_path, caplog, capsys):
    """The model's own graph with export.json deleted runs, with a warning saying how to make it checkable; the same
    graph with one weight changed (of the model before it was retrained, or of a twin model) is refused."""
    bare = tmp_path / "bare"
    bare.mkdir()
    shutil.copy(os.path.join(saved["graphs"], "model.onnx"), bare / "model.onnx")
    with caplog.at_level(logging.WARNING):
        result = predicting.predict(saved["model"], saved["corpus"], batch_size=4, backend="onnxruntime",
                                    graph_dir=str(bare))
    assert same_scores(result, saved)
    warnings = [r.getMessage() for r in caplog.records if r.name == "hf_longdoc.inference.onnx_runtime"]
    assert len(warnings) == 1 and "has no export.json" in warnings[0]
    assert "a vocabulary of 80 ids" in warnings[0] and "weights it names as the model does" in warnings[0]
    assert f"hf-longdoc export {saved['model']} --output-dir {bare} --overwrite`, which writes export.json" \
        in warnings[0]
    assert "if the model changed since" not in caplog.text
    assert sorted(os.listdir(bare)) == ["model.onnx"]  # nothing exported

    graph = onnx.load(str(bare / "model.onnx"))
    table = next(t for t in graph.graph.initializer if t.name.endswith("word_embeddings.weight"))
    values = onnx.numpy_helper.to_array(table).copy()
    values[1, 0] += 1
    table.CopyFrom(onnx.numpy_helper.from_array(values, table.name))
    onnx.save(graph, str(bare / "model.onnx"))
    status, err = refusal(saved, bare, capsys)
    assert status == 2 and "was exported from other weights than" in err and "word_embeddings.weight" in err

    graph = onnx.load(os.path.join(saved["graphs"], "model.onnx"))  # another family of the same sizes
    renamed = {t.name: t.name.replace("contextualizer", "encoder") for t in graph.graph.initializer}
    for tensor in graph.graph.initializer:
        tensor.name = renamed[tensor.name]
    for node in graph.graph.node:
        node.input[:] = [renamed.get(name, name) for name in node.input]
    onnx.save(graph, str(bare / "model.onnx"))
    status, err = refusal(saved, bare, capsys)
    assert status == 2 and "none is" in err and "'contextualizer.embeddings.word_embeddings.weight'" in err


def test_a_read_only_model_folder_is_told_about_graph_dir(saved, tmp_path, monkeypatch, capsys):
    model_dir = tmp_path / "ro_model"
    shutil.copytree(saved["model"], model_dir)
    os.chmod(model_dir, 0o555)
    try:
        if os.access(model_dir, os.W_OK):  # root writes anyway: the write itself fails as a read-only mount's would
            real = tempfile.TemporaryFile

            def read_only(*args, dir=None, **kwargs):
                if dir is not None and os.path.realpath(dir).startswith(os.path.realpath(model_dir)):
                    raise OSError(errno.EROFS, os.strerror(errno.EROFS))
                return real(*args, dir=dir, **kwargs)

            monkeypatch.setattr(onnx_runtime.tempfile, "TemporaryFile", read_only)
        missing = str(tmp_path / "not_there.jsonl")
        status = main(["predict", str(model_dir), "--dataset", missing, "--output", str(tmp_path / "out.jsonl"),
                       "--backend", "onnxruntime"])
        err = capsys.readouterr().err
    finally:
        os.chmod(model_dir, 0o755)
    assert status == 2 and len(err.strip().splitlines()) == 1
    assert f"`hf-longdoc export {model_dir} --output-dir DIR`, then pass `--graph-dir DIR`" in err
    assert "--output-dir) " not in err and not (model_dir / "onnx").exists()
