"""`predict --backend onnxruntime / onnxruntime-int8` against `--backend torch`, the graph cache beside the model,
`export --quantize int8` with its accuracy on the model's test split, and how many CPU threads reading takes.

The segment LM and the Contextualizer (and a BERT classifier, a Transformers checkpoint) at tiny sizes, saved with
their tokenizers as `train` saves them; nothing is downloaded."""

import json
import logging
import os

import pytest
import torch

from families import FAMILY_CASES
from hf_longdoc import predicting
from hf_longdoc.cli import main
from hf_longdoc.data import load_task
from hf_longdoc.inference import onnx_runtime
from hf_longdoc.utils import threads
from test_conformance import CORPUS, _tokenizer_and_model
from test_predict import save_classifier

pytest.importorskip("onnxruntime", reason="the onnxruntime backends need pip install 'hf_longdoc[onnx]'")
pytestmark = pytest.mark.slow

CASES = {case.name: case for case in FAMILY_CASES}
DOCUMENTS = [f"{CORPUS[i]} " * (1 + i % 4) for i in range(len(CORPUS))] + ["short one", "pumps"]


def saved_family_model(name, folder):
    """The tiny classifier of conformance case `name` and its tokenizer in `folder`, reading at most 96 ids, its
    classifier's weights at scale 1 so that a wrong segment or position moves the logits well past 1e-5."""
    case = CASES[name]
    tokenizer, model = _tokenizer_and_model(case, max_length=min(case.max_length, 96))
    classifier = [m for m in model.modules() if isinstance(m, torch.nn.Linear) and m.out_features == 3][-1]
    with torch.no_grad():
        classifier.weight.normal_(0, 1)
    model.config.id2label, model.config.label2id = dict(enumerate("abc")), {label: i for i, label in enumerate("abc")}
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return str(folder)


def rows_of(result):
    return list(result["label"]), [row for row in result["scores"]]


@pytest.mark.parametrize("name", ["segment_lm", "contextualizer", "bert"])
def test_onnxruntime_gives_torchs_labels_and_scores_and_exports_once(name, tmp_path, monkeypatch, caplog):
    model_dir = (save_classifier(tmp_path / "model") if name == "bert"
                 else saved_family_model(name, tmp_path / "model"))
    documents = [{"text": text} for text in DOCUMENTS]
    corpus = tmp_path / "docs.jsonl"
    corpus.write_text("".join(json.dumps(row) + "\n" for row in documents))
    torch_labels, torch_scores = rows_of(predicting.predict(model_dir, str(corpus), batch_size=4))
    with caplog.at_level(logging.INFO):
        result = predicting.predict(model_dir, str(corpus), batch_size=4, backend="onnxruntime")
    graph = os.path.join(model_dir, "onnx", "model.onnx")
    assert os.path.isfile(graph) and f"The ONNX graph {graph} is missing: exporting it once" in caplog.text
    labels, scores = rows_of(result)
    assert labels == torch_labels
    assert max(abs(a[k] - b[k]) for a, b in zip(scores, torch_scores) for k in a) <= 1e-5

    # a second run reads the cached graph: nothing is exported
    def no_export(*args, **kwargs):
        raise AssertionError("exported again")

    monkeypatch.setattr("hf_longdoc.inference.export.export_onnx", no_export)
    assert rows_of(predicting.predict(model_dir, str(corpus), batch_size=4, backend="onnxruntime"))[0] == labels


def test_a_changed_model_is_exported_again_and_the_cli_runs_the_graph(tmp_path, caplog, capsys):
    model_dir = saved_family_model("segment_lm", tmp_path / "model")
    corpus = tmp_path / "docs.jsonl"
    corpus.write_text("".join(json.dumps({"text": text}) + "\n" for text in DOCUMENTS[:6]))
    assert main(["predict", model_dir, "--dataset", str(corpus), "--output", str(tmp_path / "a.jsonl"),
                 "--backend", "onnxruntime"]) == 0
    first = os.path.getmtime(os.path.join(model_dir, "onnx", "model.onnx"))
    saved_family_model("segment_lm", tmp_path / "model")  # retrained: other weights in the same folder
    torch.manual_seed(1)
    from hf_longdoc.saving.saved_models import load_saved_model

    model = load_saved_model(model_dir, "model")
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.add_(0.01 * torch.randn_like(parameter))
    model.save_pretrained(model_dir)
    with caplog.at_level(logging.INFO):
        assert main(["predict", model_dir, "--dataset", str(corpus), "--output", str(tmp_path / "b.jsonl"),
                     "--backend", "onnxruntime"]) == 0
    assert "was exported from other weights than the model has now" in caplog.text
    assert os.path.getmtime(os.path.join(model_dir, "onnx", "model.onnx")) > first
    assert main(["predict", model_dir, "--dataset", str(corpus), "--output", str(tmp_path / "c.jsonl")]) == 0
    onnx_rows = [json.loads(line) for line in open(tmp_path / "b.jsonl")]
    torch_rows = [json.loads(line) for line in open(tmp_path / "c.jsonl")]
    assert [row["label"] for row in onnx_rows] == [row["label"] for row in torch_rows]


def test_what_a_graph_cannot_do_is_refused_before_any_work(tmp_path):
    model_dir = save_classifier(tmp_path / "model")
    corpus = tmp_path / "docs.jsonl"
    corpus.write_text(json.dumps({"text": "a document"}) + "\n")
    with pytest.raises(ValueError, match="`explain` .*returns only the logits.*--backend torch"):
        predicting.predict(model_dir, str(corpus), backend="onnxruntime", explain=2)
    with pytest.raises(ValueError, match="`dtype` .*runs the exported graph"):
        predicting.predict(model_dir, str(corpus), backend="onnxruntime-int8", dtype="bfloat16")
    with pytest.raises(ValueError, match="`device` .*on the CPU"):
        predicting.predict(model_dir, str(corpus), backend="onnxruntime", device="cuda")
    with pytest.raises(ValueError, match="`backend` .*must be one of torch, onnxruntime, onnxruntime-int8"):
        predicting.predict(model_dir, str(corpus), backend="tensorrt")
    assert not os.path.exists(os.path.join(model_dir, "onnx"))


def test_export_quantize_int8_scores_both_graphs_on_the_models_test_split(tmp_path, monkeypatch, capsys):
    """A model trained on a file records its split seed; `export --quantize int8 --dataset FILE` scores the float
    and the int8 graph on that file's test split. The float graph's accuracy is torch's on the same documents, and
    `--backend onnxruntime` never runs the int8 graph."""
    model_dir = saved_family_model("segment_lm", tmp_path / "model")
    data = tmp_path / "data.jsonl"
    labels = ["a", "b", "c"]
    data.write_text("".join(json.dumps({"text": f"{CORPUS[i % len(CORPUS)]} {'valves ' * (i % 7)}",
                                        "label": labels[i % 3]}) + "\n" for i in range(60)))
    (tmp_path / "model" / "metrics.json").write_text(json.dumps({"split_seed": 42}))
    assert main(["export", model_dir, "--quantize", "int8", "--dataset", str(data)]) == 0
    printed = capsys.readouterr().out
    record = json.loads((tmp_path / "model" / "onnx" / "export.json").read_text())
    graphs = record["graphs"]
    assert os.path.isfile(tmp_path / "model" / "onnx" / "model_quantized.onnx")
    assert graphs["int8"]["test_documents"] == graphs["float32"]["test_documents"]
    assert f"float32 graph {graphs['float32']['test_accuracy']:.4f}, int8 graph {graphs['int8']['test_accuracy']:.4f}" \
        in printed
    test = load_task(str(data), seed=42)[0]["test"]
    torch_rows = predicting.predict(model_dir, test.select_columns(["text"]))
    expected = sum(p == labels[g] for p, g in zip(torch_rows["label"], test["label"])) / len(test)
    assert graphs["float32"]["test_accuracy"] == pytest.approx(expected)

    ran = []
    real = onnx_runtime.GraphRunner.__init__

    def recording(self, path, threads=None):
        ran.append(os.path.basename(path))
        real(self, path, threads)

    monkeypatch.setattr(onnx_runtime.GraphRunner, "__init__", recording)
    predicting.predict(model_dir, test.select_columns(["text"]), backend="onnxruntime")
    predicting.predict(model_dir, test.select_columns(["text"]), backend="onnxruntime-int8")
    assert ran == ["model.onnx", "model_quantized.onnx"]


def test_reading_takes_one_thread_per_batch_on_the_cpu_unless_the_user_chose(monkeypatch):
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    before = torch.get_num_threads()
    monkeypatch.setattr(threads, "_expected", [before])
    assert threads.reading_workers("cpu") == before
    assert threads.reading_workers("cpu", concurrent=False) == 1
    assert threads.reading_workers("cuda") == 1
    with threads.one_thread_each(2):
        assert torch.get_num_threads() == 1 or before == 1
    assert torch.get_num_threads() == before
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    assert threads.reading_workers("cpu") == 1  # the user's intra-op threads are kept


def test_each_launched_process_takes_its_share_of_the_cores(monkeypatch, caplog):
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    before = torch.get_num_threads()
    monkeypatch.setattr(threads, "_expected", [before])
    monkeypatch.setattr(threads, "available_cores", lambda: 8)
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "4")
    try:
        with caplog.at_level(logging.INFO):
            assert threads.share_cores("predict") == 2
        assert torch.get_num_threads() == 2
        assert "hf-longdoc predict uses 2 CPU thread(s) per process (8 cores shared by 4 processes)" in caplog.text
        torch.set_num_threads(3)  # the user's own choice after that is kept
        assert threads.share_cores("predict") == 3 and torch.get_num_threads() == 3
    finally:
        torch.set_num_threads(before)


def test_the_speed_example_measures_every_backend_against_the_floor(tmp_path):
    import importlib.util

    spec = importlib.util.spec_from_file_location("predict_speed", os.path.join(os.path.dirname(__file__), "..",
                                                                                "examples", "predict_speed.py"))
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    model_dir = saved_family_model("segment_lm", tmp_path / "model")
    corpus = tmp_path / "docs.jsonl"
    corpus.write_text("".join(json.dumps({"text": text}) + "\n" for text in DOCUMENTS[:10]))
    rows = example.main([model_dir, str(corpus), "--documents", "24", "--backends", "torch,onnxruntime",
                         "--floor-batches", "2", "--batch-size", "4"])
    assert [row["backend"] for row in rows] == ["torch", "onnxruntime"]
    assert all(row["documents"] == 24 and row["documents_per_second"] > 0 and row["share_of_floor"] > 0
               for row in rows)
    assert rows[0]["vs_torch"] == 1.0
