"""Issue 72 §4, the ONNX folder in others' tools. What Optimum's `ORTModelForSequenceClassification.from_pretrained(
folder, trust_remote_code=True)` relies on (optimum 2.1, `modeling_base.OptimizedModel.from_pretrained` and
`onnxruntime/modeling.ORTModel._from_pretrained`): config.json where the graph is, read by `AutoConfig` (remote code:
the config's own source file beside it), a graph named `model.onnx` (its `ONNX_WEIGHTS_NAME`; it globs `**/*.onnx`),
and the tokenizer's files there too. The int8 graph is `model_quantized.onnx` (Optimum's quantizer's name,
Transformers.js' `q8`); `model.int8.onnx`, its name before, still runs. `push` uploads `onnx/` with no local path and
says on the card which Transformers the remote code needs. Optimum itself is not installed here (it pins Transformers
4); the commands that ran it on these folders are in docs/models.md.

One tiny Contextualizer (3 labels), exported once for the module (the slow tests); the push tests fake the graph (the
upload does not read it) and run in about a second."""

import importlib.metadata
import json
import logging
import os
import shutil

import pytest
import torch

from fresh_process import run_without_hf_longdoc
from hf_longdoc import predicting
from hf_longdoc.cli import main
from hf_longdoc.inference import export, onnx_runtime
from hf_longdoc.publishing.hub import REMOTE_CODE_TRANSFORMERS
from hf_longdoc.saving.run_folder import record_outputs
from hf_longdoc.saving.saved_models import model_digest
from test_predict_backends import DOCUMENTS, saved_family_model

# what the Contextualizer's folder holds beside its graphs (its config's source file; no modeling file)
BESIDE = {"config.json", "configuration_contextualizer.py", "tokenizer.json", "tokenizer_config.json", "export.json"}


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """A tiny Contextualizer, exported with `--quantize int8` into MODEL_DIR/onnx and with `--output-dir`."""
    pytest.importorskip("onnxruntime", reason="ONNX export needs pip install 'hf_longdoc[onnx]'")
    root = tmp_path_factory.mktemp("onnx_folder")
    model_dir = saved_family_model("contextualizer", root / "model")
    assert main(["export", model_dir, "--quantize", "int8"]) == 0
    assert main(["export", model_dir, "--output-dir", str(root / "out")]) == 0
    return {"model": model_dir, "default": os.path.join(model_dir, "onnx"), "out": str(root / "out"), "root": root}


def torch_logits(model_dir, texts):
    """The saved tokenizer's ids (one document at a time, truncated) and the model's PyTorch logits for them."""
    from hf_longdoc.saving.saved_models import load_saved_model, load_saved_tokenizer

    tokenizer, model = load_saved_tokenizer(model_dir, "model"), load_saved_model(model_dir, "model").eval()
    rows = []
    for text in texts:
        ids = tokenizer(text, truncation=True)["input_ids"]
        with torch.no_grad():
            logits = model(input_ids=torch.tensor([ids]), attention_mask=torch.ones(1, len(ids), dtype=torch.long))
        rows.append({"text": text, "input_ids": ids, "logits": logits.logits[0].tolist()})
    return rows


@pytest.mark.slow
@pytest.mark.parametrize("where", ["default", "out"])
def test_the_export_folder_loads_as_optimum_loads_it_with_torchs_logits(exported, where, tmp_path):
    """Config, tokenizer files and the graphs side by side; in a process without hf_longdoc, Optimum's steps:
    `AutoConfig.from_pretrained(folder, trust_remote_code=True)`, the one `model.onnx` among `**/*.onnx`, the
    tokenizer from the same folder (ids as the saved tokenizer's), logits within 1e-4 of PyTorch's."""
    folder = exported[where]
    graphs = {"model.onnx", "model_quantized.onnx"} if where == "default" else {"model.onnx"}
    assert {name for name in os.listdir(folder) if not name.startswith(".")} == BESIDE | graphs
    for name in BESIDE - {"export.json"}:  # copies as they were saved, byte for byte
        with open(os.path.join(exported["model"], name), "rb") as a, open(os.path.join(folder, name), "rb") as b:
            assert a.read() == b.read(), name
    reference = tmp_path / "torch.json"
    reference.write_text(json.dumps(torch_logits(exported["model"], [DOCUMENTS[1], DOCUMENTS[3] * 3, "short one"])))
    result = run_without_hf_longdoc("""
        import glob, json, os, sys
        import numpy, onnxruntime
        from transformers import AutoConfig, AutoTokenizer
        folder, reference = sys.argv[1], json.load(open(sys.argv[2]))
        config = AutoConfig.from_pretrained(folder, trust_remote_code=True)
        graphs = [p for p in glob.glob(os.path.join(folder, "**", "*.onnx"), recursive=True)
                  if os.path.basename(p) == "model.onnx"]
        assert len(graphs) == 1, graphs
        session = onnxruntime.InferenceSession(graphs[0], providers=["CPUExecutionProvider"])
        # as Optimum's users load it (config.json's auto_map makes AutoTokenizer ask about remote code otherwise)
        tokenizer = AutoTokenizer.from_pretrained(folder, trust_remote_code=True)
        worst = 0.0
        for row in reference:
            assert tokenizer(row["text"], truncation=True)["input_ids"] == row["input_ids"]
            ids = numpy.array([row["input_ids"]], dtype=numpy.int64)
            (logits,) = session.run(["logits"], {"input_ids": ids, "attention_mask": numpy.ones_like(ids)})
            worst = max(worst, float(abs(logits[0] - numpy.array(row["logits"])).max()))
        print(type(config).__name__, config.id2label, worst)
    """, folder, reference, workdir=tmp_path)
    name, *_, worst = result.stdout.split()
    assert name == "ContextualizerConfig" and "{0: 'a', 1: 'b', 2: 'c'}" in result.stdout and float(worst) <= 1e-4


@pytest.mark.slow
def test_an_old_folders_model_int8_onnx_still_runs_and_a_new_quantization_replaces_it(exported, tmp_path, monkeypatch,
                                                                                    caplog):
    """A folder `export --quantize int8` wrote before: `model.int8.onnx`, named in export.json, and nothing beside
    the graphs. `--backend onnxruntime-int8` runs it (with or without export.json); quantizing again writes
    `model_quantized.onnx` and removes the old file (the export's own, unchanged)."""
    old = tmp_path / "old"
    old.mkdir()
    shutil.copy(os.path.join(exported["default"], "model.onnx"), old / "model.onnx")
    shutil.copy(os.path.join(exported["default"], "model_quantized.onnx"), old / "model.int8.onnx")
    record = json.loads(open(os.path.join(exported["default"], "export.json")).read())
    record["graphs"]["int8"]["file"] = "model.int8.onnx"
    (old / "export.json").write_text(json.dumps(record))
    record_outputs([old / "model.onnx", old / "model.int8.onnx", old / "export.json"])
    corpus = tmp_path / "docs.jsonl"
    corpus.write_text("".join(json.dumps({"text": text}) + "\n" for text in DOCUMENTS[:4]))
    ran = []
    real = onnx_runtime.GraphRunner.__init__

    def recording(self, path, threads=None):
        ran.append(os.path.basename(path))
        real(self, path, threads)

    monkeypatch.setattr(onnx_runtime.GraphRunner, "__init__", recording)
    new = predicting.predict(exported["model"], str(corpus), backend="onnxruntime-int8")
    was = predicting.predict(exported["model"], str(corpus), backend="onnxruntime-int8", graph_dir=str(old))
    assert ran == ["model_quantized.onnx", "model.int8.onnx"] and list(was["scores"]) == list(new["scores"])
    assert sorted(os.listdir(old)) == [".hf_longdoc.json", "export.json", "model.int8.onnx", "model.onnx"]

    bare = tmp_path / "bare"  # without export.json: checked against the model as any bare graph is
    bare.mkdir()
    shutil.copy(old / "model.int8.onnx", bare / "model.int8.onnx")
    plan = onnx_runtime.plan_graph(exported["model"], "onnxruntime-int8", str(bare))
    assert plan.path == str(bare / "model.int8.onnx") and not plan.quantize and "has no export.json" in plan.note

    with caplog.at_level(logging.INFO, logger="hf_longdoc.inference.export"):
        assert export.quantize_graph(str(old)) == str(old / "model_quantized.onnx")
    assert not (old / "model.int8.onnx").exists()
    assert json.loads((old / "export.json").read_text())["graphs"]["int8"]["file"] == "model_quantized.onnx"


def test_the_graph_names_optimum_and_transformers_js_look_for(tmp_path):
    """`model.onnx` (Optimum's ONNX_WEIGHTS_NAME, Transformers.js' fp32) and `model_quantized.onnx` (Optimum's
    ORTQuantizer, Transformers.js' q8); export.json's name first, then the standard one, then the old one."""
    assert export.GRAPH_FILES == {"onnxruntime": "model.onnx", "onnxruntime-int8": "model_quantized.onnx"}
    assert export.graph_path(str(tmp_path), "onnxruntime-int8") == str(tmp_path / "model_quantized.onnx")
    (tmp_path / "model.int8.onnx").write_bytes(b"")
    assert export.graph_path(str(tmp_path), "onnxruntime-int8") == str(tmp_path / "model.int8.onnx")
    (tmp_path / "model_quantized.onnx").write_bytes(b"")
    assert export.graph_path(str(tmp_path), "onnxruntime-int8") == str(tmp_path / "model_quantized.onnx")
    recorded = {"graphs": {"int8": {"file": "model.int8.onnx"}}}
    assert export.graph_path(str(tmp_path), "onnxruntime-int8", recorded) == str(tmp_path / "model.int8.onnx")
    assert export.graph_path(str(tmp_path), "onnxruntime-int8", {"graphs": {"int8": {"file": "../x.onnx"}}}) == str(
        tmp_path / "model_quantized.onnx")  # a record names a file of the folder, never a path


def test_the_tokenizers_own_source_file_goes_beside_the_graph(tmp_path):
    """The elementwise tokenizer is remote code (`auto_map` of tokenizer_config.json): its file is copied with the
    config's; the modeling files are not (Optimum runs the graph)."""
    model_dir = saved_family_model("elementwise-bert", tmp_path / "model")
    assert export.companion_files(model_dir) == ["config.json", "tokenizer_config.json",
                                                 "configuration_elementwise.py", "tokenization_elementwise.py"]


def fake_export(model_dir, stale=()):
    """MODEL_DIR/onnx as `hf-longdoc export` leaves it, without running the exporter (push does not read graphs):
    the copies beside the graph, a graph recorded in export.json (with the model folder's absolute path) and the
    files in `stale`, which nothing records."""
    folder = os.path.join(model_dir, "onnx")
    os.makedirs(folder)
    for source, target in export.companion_copies(model_dir, folder):
        shutil.copyfile(source, target)
    for name in ("model.onnx", *stale):
        with open(os.path.join(folder, name), "wb") as f:
            f.write(b"a graph")
    with open(os.path.join(folder, "export.json"), "w") as f:
        json.dump({"model": model_digest(model_dir), "model_dir": os.path.realpath(model_dir),
                   "graphs": {"float32": {"file": "model.onnx"}}}, f)
    record_outputs([os.path.join(folder, name) for name in os.listdir(folder)])
    return folder


def test_push_uploads_the_onnx_folder_with_no_local_path(tmp_path, capsys, caplog):
    model_dir = saved_family_model("contextualizer", tmp_path / "model")
    fake_export(model_dir, stale=["model.int8.onnx"])
    upload = tmp_path / "upload"
    assert main(["push", model_dir, "--repo-id", "me/ctx", "--dry-run", "--dry-run-dir", str(upload)]) == 0
    printed = capsys.readouterr()
    uploaded = sorted(str(path.relative_to(upload)) for path in upload.rglob("*") if path.is_file())
    assert [name for name in uploaded if name.startswith("onnx/")] == [
        "onnx/config.json", "onnx/configuration_contextualizer.py", "onnx/export.json", "onnx/model.onnx",
        "onnx/tokenizer.json", "onnx/tokenizer_config.json"]
    assert "  onnx/model.onnx" in printed.out.splitlines()
    assert "onnx/.hf_longdoc.json, onnx/model.int8.onnx" in caplog.text  # the manifest, a graph nothing records
    for path in upload.rglob("*"):
        if path.is_file():
            assert str(tmp_path).encode() not in path.read_bytes(), path
    record = json.loads((upload / "onnx" / "export.json").read_text())
    assert "model_dir" not in record and record["model"] == model_digest(str(upload))  # current once downloaded
    card = (upload / "README.md").read_text()
    assert f"needs {REMOTE_CODE_TRANSFORMERS})" in card and "cannot import name 'initialization'" in card
    assert 'ORTModelForSequenceClassification.from_pretrained("me/ctx", subfolder="onnx", trust_remote_code=True)' \
        in card and "- `model.onnx`: float32" in card


def test_push_replaces_a_local_backbones_path_in_the_onnx_folders_config(tmp_path, monkeypatch, capsys):
    """A segment LM around a BERT in the home folder: config.json, beside the model and beside the graph, records
    the backbone's folder; both uploaded copies name it by its folder's name, and nothing uploaded names the user."""
    from hf_longdoc.data import fit_wordpiece_tokenizer
    from test_publishing import USER, assert_nothing_local, saved_around
    from tiny_bert import save_tiny_bert

    home = tmp_path / "home" / USER
    monkeypatch.setenv("HOME", str(home))
    tokenizer = fit_wordpiece_tokenizer([" ".join(DOCUMENTS[:8])], vocab_size=120, model_max_length=256)
    backbone = save_tiny_bert(home / "models" / "tiny-bert", tokenizer, max_positions=256)
    model_dir = tmp_path / "model"
    saved_around(backbone, "segment_lm", model_dir, str(home / "data" / "news.csv"))
    fake_export(str(model_dir))
    upload = tmp_path / "upload"
    assert main(["push", str(model_dir), "--repo-id", "me/seg", "--dry-run", "--dry-run-dir", str(upload)]) == 0
    assert f"onnx/config.json backbone_config._name_or_path: {backbone} -> tiny-bert" in capsys.readouterr().out
    assert_nothing_local(upload, str(tmp_path), str(home), USER)
    for config in (upload / "config.json", upload / "onnx" / "config.json"):
        assert json.loads(config.read_text())["backbone_config"]["_name_or_path"] == "tiny-bert"


def test_push_leaves_out_graphs_of_other_weights(tmp_path, caplog):
    model_dir = saved_family_model("contextualizer", tmp_path / "model")
    record = os.path.join(fake_export(model_dir), "export.json")
    with open(record) as f:
        stale = {**json.load(f), "model": {"model.safetensors": "0" * 64}}  # of the weights before a retraining
    with open(record, "w") as f:
        json.dump(stale, f)
    upload = tmp_path / "upload"
    assert main(["push", model_dir, "--repo-id", "me/ctx", "--dry-run", "--dry-run-dir", str(upload)]) == 0
    assert not (upload / "onnx").exists() and "## ONNX" not in (upload / "README.md").read_text()
    assert "Not uploading onnx/: its export.json says its graphs were exported from other weights" in caplog.text
    assert f"hf-longdoc export {model_dir}" in caplog.text


def test_the_remote_code_requirement_is_the_packages():
    assert REMOTE_CODE_TRANSFORMERS in importlib.metadata.requires("hf_longdoc")


def test_a_users_file_beside_the_graph_is_kept_and_a_copy_of_the_models_is_not_in_the_way(tmp_path, monkeypatch,
                                                                                         capsys):
    """The copies beside the graph follow the graph's rule (an earlier export's are replaced, a user's file only
    with --overwrite), except that a file already holding the model's bytes (the copy Optimum's users made by hand)
    is taken over. The exporter is stubbed."""
    pytest.importorskip("onnxruntime", reason="ONNX export needs pip install 'hf_longdoc[onnx]'")

    def export_and_check(wrapped, inputs, written, checks):
        with open(written, "wb") as f:
            f.write(b"a graph")
        return 0.0

    monkeypatch.setattr(export, "export_and_check", export_and_check)
    model_dir = saved_family_model("contextualizer", tmp_path / "model")
    out = tmp_path / "out"
    out.mkdir()
    shutil.copy(os.path.join(model_dir, "config.json"), out / "config.json")  # by hand, as the report's workaround
    arguments = ["export", model_dir, "--output-dir", str(out)]
    assert main(arguments) == 0 and (out / "model.onnx").read_bytes() == b"a graph"
    assert main(arguments) == 0  # its own copies, unchanged: replaced
    (out / "tokenizer.json").write_text("{}")  # edited by the user
    assert main(arguments) == 2
    assert "tokenizer.json' already exists and was not written by hf-longdoc" in capsys.readouterr().err
    assert (out / "tokenizer.json").read_text() == "{}"
    assert main(arguments + ["--overwrite"]) == 0
    assert (out / "tokenizer.json").read_bytes() == open(os.path.join(model_dir, "tokenizer.json"), "rb").read()
