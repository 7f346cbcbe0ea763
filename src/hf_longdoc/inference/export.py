"""`hf-longdoc export MODEL_DIR [--output-dir OUT] [--quantize int8]`: a saved classifier as `OUT/model.onnx` (inputs
`input_ids` and `attention_mask`, output `logits`; OUT defaults to `MODEL_DIR/onnx`, where `predict --backend
onnxruntime` looks), made by PyTorch's exporter (`torch.onnx.export(dynamo=True)`, which traces with `torch.export`)
and checked in onnxruntime. `--quantize int8` also writes `model_quantized.onnx`, onnxruntime's dynamic quantization
of it (int8 weights of the matrix products, activations quantized per batch), and both graphs' accuracy on the model's
test split goes into `OUT/export.json` beside the model folder's real path and its files' digests (which model and
which weights the graphs are of: what `predict` checks before it runs them, `onnx_runtime.plan_graph`).

OUT is a folder other tools load as it is: beside the graphs go the model's config.json, its tokenizer files as they
were saved, and the source files the config and the tokenizer name in `auto_map` (`COMPANION_FILES`), so that
Optimum's `ORTModelForSequenceClassification.from_pretrained(OUT, trust_remote_code=True)` reads the config (labels,
model type) where it reads the graph, and a tokenizer loads from the same folder. The graphs are named as Optimum and
Transformers.js look for them: `model.onnx` (both: the float graph) and `model_quantized.onnx` (what Optimum's
`ORTQuantizer` writes and Transformers.js loads for its default 8-bit dtype, `q8`, which for a graph without
convolutions is the same dynamic quantization with signed int8 weights). `model.int8.onnx`, the int8 graph's name
before, is still read (`graph_path`).

Batch size and length are dynamic: the check runs the graph at two batch sizes and two lengths other than the traced
ones and compares the logits with PyTorch's (Transformers' Longformer export was "silently broken", fixed to the
traced length: transformers PR #20292). Everything a family computes from the ids is inside the graph (the sparse
Longformer's TF-IDF/PMI selection, the segment LM's cut into segments), so a served model needs only the tokenizer's
ids and mask. The families skip their eager input checks while traced (a graph cannot branch on values), so the served
graph trusts the tokenizer saved with the model.
"""

import importlib.util
import json
import logging
import os
import re
import shutil
import tempfile

import torch

from ..data.tokenizer import TOKENIZER_FILES
from ..saving.run_folder import check_files_free, record_outputs, require_writable_folder
from ..saving.saved_models import load_saved_tokenizer

logger = logging.getLogger(__name__)

FORMATS = ("onnx",)
TOLERANCE = 1e-4  # largest |logit difference| between onnxruntime and PyTorch that passes
SAMPLE = ("The committee met on Tuesday to review the long report on river pollution, its causes and its costs. "
          "Several members asked for a second reading; the chair agreed, and the vote was moved to the next week. ")


class ExportBlocked(ValueError):
    """A family's graph cannot be exported: the message names the operation that blocks it and why."""

    length_dependent = False  # whether tracing at another length may succeed


class LogitsOnly(torch.nn.Module):
    """The classifier as the exported graph sees it: (input_ids, attention_mask) -> logits."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, input_ids, attention_mask):
        return self.model(input_ids=input_ids, attention_mask=attention_mask).logits


def sample_inputs(tokenizer, documents, words, length=None):
    """A right-padded batch of `documents` texts of different lengths, the longest about `words` words, cut where the
    model stops reading (the tokenizer's model_max_length); `length`: padded and cut to exactly that many ids."""
    text = SAMPLE.split()
    texts = [" ".join(text[j % len(text)] for j in range(max(3, words * (i + 1) // documents)))
             for i in range(documents)]
    sizing = dict(padding=True) if length is None else dict(padding="max_length", max_length=length)
    encoded = tokenizer(texts, truncation=True, return_tensors="pt", **sizing)
    return encoded["input_ids"], encoded["attention_mask"]


def traced_length(reads, unit, padding=None):
    """How many ids the graph is traced at: about a quarter of what the model reads (windows, blocks and segments past
    the first), at least 20 and at most 2,048 ids, an odd number of positions of `unit` ids. Odd, because a
    trace at a multiple of the model's padding (Longformer's window, Big Bird's block: even numbers) records no
    padding, and the graph then fails at any length that needs some (measured: a sparse Longformer with
    `attention_window` 8 traced at 64 ids failed in onnxruntime at 26). Longer than one `padding` multiple where the
    model reads more: traced within one window, the export keeps one window as a constant and fails (measured: the
    sparse Longformer converted from MiniLM, window 512, reading 1,024, failed at 255 and 383 ids, exported at 583)."""
    positions = max(1, min(max(20, reads // 4), 2048, reads) // unit)
    if padding and reads > padding:
        positions = max(positions, min(padding + padding // 4, reads) // unit)
    return max(1, positions - (positions % 2 == 0)) * unit


def vocabulary_inputs(config, documents, length, unit=1, seed=0):
    """A right-padded batch of `documents` rows of ids drawn from the config's vocabulary (what optimum traces with
    when there is no tokenizer), the longest `length` ids, every length a multiple of `unit`; special ids (pad, CLS,
    SEP, ...: the lowest ids of our vocabularies) are left out of the draw."""
    special = [getattr(config, name, None) for name in ("pad_token_id", "bos_token_id", "eos_token_id",
                                                         "cls_token_id", "sep_token_id", "mask_token_id")]
    low = 1 + max([i for i in special if isinstance(i, int) and 0 <= i < config.vocab_size - 1], default=-1)
    generator = torch.Generator().manual_seed(seed)
    lengths = [max(unit, length * (i + 1) // documents // unit * unit) for i in range(documents)]
    input_ids = torch.full((documents, max(lengths)), getattr(config, "pad_token_id", None) or 0, dtype=torch.long)
    attention_mask = torch.zeros_like(input_ids)
    for row, size in enumerate(lengths):
        input_ids[row, :size] = torch.randint(low, config.vocab_size, (size,), generator=generator)
        attention_mask[row, :size] = 1
    return input_ids, attention_mask


def blocking_operation(error):
    """The line of our model code that the exporter stopped at and its reason, read from the exporter's message."""
    text = str(error)
    summary = re.search(r"## Exception summary\s+(.+?)(?:\n\n|$)", text, re.S)
    reason = (summary.group(1) if summary else text.splitlines()[0] if text else type(error).__name__).strip()
    reason = re.sub(r"\x1b\[[0-9;]*m", "", reason).splitlines()[0]
    where = re.findall(r'File "([^"]+)", line (\d+), in (\w+)\n\s+(.+)', text)
    ours = [frame for frame in where if "hf_longdoc" in frame[0] or "/transformers/" in frame[0]]
    if ours:
        path, line, function, code = ours[-1]
        return f"`{code.strip()}` in {function} ({os.path.basename(path)}:{line}): {reason}"
    return reason


def fixed_dimensions(path):
    """The input dimensions the exported graph fixed to a number, e.g. ["input_ids[1] = 64"] (none: all dynamic)."""
    import onnx

    graph = onnx.load(path, load_external_data=False).graph
    return [f"{tensor.name}[{axis}] = {dim.dim_value}" for tensor in graph.input
            for axis, dim in enumerate(tensor.type.tensor_type.shape.dim) if dim.HasField("dim_value")]


def check_with_onnxruntime(path, model, batches):
    """The largest |logit difference| between onnxruntime and PyTorch over `batches` ((input_ids, mask) pairs)."""
    import onnxruntime

    session = onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"])
    worst = 0.0
    for input_ids, attention_mask in batches:
        with torch.no_grad():
            expected = model(input_ids, attention_mask).float().numpy()
        (got,) = session.run(["logits"], {"input_ids": input_ids.numpy(), "attention_mask": attention_mask.numpy()})
        worst = max(worst, float(abs(got - expected).max()))
    return worst


GRAPH_FOLDER = "onnx"  # inside the model folder: the export's default output and predict's cache
# Optimum's standard name (ONNX_WEIGHTS_NAME) and Transformers.js' fp32 file; `model_quantized.onnx` is what Optimum's
# ORTQuantizer writes (file_suffix "quantized") and what Transformers.js loads for dtype "q8" (its `_int8` suffix is
# found by nobody else)
GRAPH_FILES = {"onnxruntime": "model.onnx", "onnxruntime-int8": "model_quantized.onnx"}
LEGACY_GRAPH_FILES = {"onnxruntime-int8": ("model.int8.onnx",)}  # written by `--quantize int8` before: still read
PRECISIONS = {"onnxruntime": "float32", "onnxruntime-int8": "int8"}  # the keys of export.json's `graphs`
RECORD = "export.json"
# What goes beside the graphs, from the model folder, where it is there: the config (Optimum reads it where it reads
# the graph) and the tokenizer's files as `save_pretrained` wrote them; plus the source files `auto_map` names
# (`companion_sources`)
COMPANION_FILES = ("config.json", *TOKENIZER_FILES, "special_tokens_map.json", "added_tokens.json", "merges.txt",
                   "chat_template.jinja")


def require_onnxruntime(what):
    """A ValueError naming the extra to install when onnx, onnxscript or onnxruntime is missing."""
    missing = [name for name in ("onnx", "onnxscript", "onnxruntime") if importlib.util.find_spec(name) is None]
    if missing:
        raise ValueError(f"{what} needs {', '.join(missing)}: pip install 'hf_longdoc[onnx]'.")


def graph_folder(model_dir, graph_dir=None):
    """Where the graphs of the model in `model_dir` are: `graph_dir`, else `MODEL_DIR/onnx`."""
    return os.fspath(graph_dir) if graph_dir is not None else os.path.join(os.fspath(model_dir), GRAPH_FOLDER)


def read_record(folder):
    """`export.json` of `folder` (`{"model": digests, "model_dir": the model folder's real path, "graphs": {precision:
    {...}}}`; `model_dir` is missing from a record written before it was recorded); empty when there is none."""
    try:
        with open(os.path.join(folder, RECORD), encoding="utf-8") as f:
            record = json.load(f)
    except (OSError, ValueError):
        return {}
    return record if isinstance(record, dict) else {}


def write_record(folder, record):
    path = os.path.join(folder, RECORD)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(record, f, indent=2)
    record_outputs([path])


def graph_path(folder, backend, record=None):
    """The file of `backend`'s graph in `folder`: the one `record` (export.json, read when None) names for its
    precision, else the standard name (`GRAPH_FILES`), else an older name (`LEGACY_GRAPH_FILES`: `model.int8.onnx`),
    whichever exists first; the standard name, where the graph would be written, when none does."""
    record = read_record(folder) if record is None else record
    named = ((record.get("graphs") or {}).get(PRECISIONS[backend]) or {}).get("file")
    names = [named] if isinstance(named, str) and named == os.path.basename(named) else []
    names += [GRAPH_FILES[backend], *LEGACY_GRAPH_FILES.get(backend, ())]
    return next((os.path.join(folder, name) for name in names if os.path.isfile(os.path.join(folder, name))),
                os.path.join(folder, GRAPH_FILES[backend]))


def companion_sources(model_dir):
    """The source files of `model_dir` that its config.json's `AutoConfig` and its tokenizer_config.json's
    `AutoTokenizer` (`auto_map`) name, with the files they import (`from .x import y`): what `trust_remote_code`
    runs to read the config and the tokenizer. The modeling files are left out: a graph needs none (and under
    Transformers 4, where Optimum runs, they do not import)."""
    from transformers.dynamic_module_utils import get_relative_import_files

    wanted = (("config.json", ("AutoConfig",)), ("tokenizer_config.json", ("AutoTokenizer",)))
    names = set()
    for saved, keys in wanted:
        try:
            with open(os.path.join(model_dir, saved), encoding="utf-8") as f:
                auto_map = json.load(f).get("auto_map") or {}
        except (OSError, ValueError, AttributeError):
            continue
        for key in keys:
            value = auto_map.get(key)
            for reference in value if isinstance(value, (list, tuple)) else [value]:
                # `module.Class` in the folder; not another repository's `repo--module.Class`
                if not isinstance(reference, str) or "--" in reference:
                    continue
                module = os.path.join(model_dir, reference.rsplit(".", 1)[0] + ".py")
                if os.path.isfile(module):
                    names.add(os.path.basename(module))
                    names.update(os.path.basename(path) for path in get_relative_import_files(module))
    return sorted(names)


def companion_files(model_dir):
    """The names of the files of `model_dir` that `export_onnx` copies beside the graphs (the `COMPANION_FILES` there,
    and `companion_sources`)."""
    present = [name for name in COMPANION_FILES if os.path.isfile(os.path.join(model_dir, name))]
    return present + companion_sources(model_dir)


def companion_copies(model_dir, output_dir):
    """(source, target) of each of `companion_files` of `model_dir` in `output_dir`; none when `output_dir` is the
    model folder itself."""
    if os.path.realpath(model_dir) == os.path.realpath(output_dir):
        return []
    return [(os.path.join(model_dir, name), os.path.join(output_dir, name)) for name in companion_files(model_dir)]


def check_companions_free(copies, overwrite):
    """`check_files_free` for the copies' targets, but a file that already holds the source's bytes (copied by hand
    beside the graph, as Optimum's users had to) is no one's work to lose."""
    from ..saving.run_folder import file_digest

    differing = [target for source, target in copies
                 if not (os.path.isfile(target) and file_digest(target) == file_digest(source))]
    check_files_free(differing, overwrite, "--overwrite (overwrite=True)")


QUANTIZED_OPERATIONS = ["MatMul"]  # what `--quantize int8` quantizes (`quantize_graph`)
TRACE_ATTEMPTS = 8  # trace lengths tried (two positions apart, so each is odd) before an export is refused


def export_and_check(wrapped, traced, written, checks):
    """Export `wrapped` traced at `traced` to `written` and return the largest |logit difference| from PyTorch in
    onnxruntime over `checks`; an `ExportBlocked` error otherwise (`length_dependent`: another trace length may
    work)."""
    name = type(wrapped.model).__name__
    batch, length = torch.export.Dim("batch"), torch.export.Dim("sequence")
    try:
        torch.onnx.export(wrapped, traced, written, dynamo=True, input_names=["input_ids", "attention_mask"],
                          output_names=["logits"], external_data=False,
                          dynamic_shapes={"input_ids": {0: batch, 1: length}, "attention_mask": {0: batch, 1: length}})
    except Exception as error:  # the exporter raises its own error types, from torch.export and onnxscript
        blocked = ExportBlocked(f"{name} cannot be exported to ONNX: {blocking_operation(error)}")
        blocked.length_dependent = "_sequence" in str(error)  # a guard on the traced length (a derived dimension)
        raise blocked from error
    fixed = fixed_dimensions(written)
    if fixed:
        raise ExportBlocked(f"{name} cannot be exported with a dynamic batch and length: the exporter fixed {fixed} to "
                            f"the traced shape {tuple(traced[0].shape)} (an operation reads the length as a Python "
                            "number); the graph would fail on any other shape.")
    shapes = [tuple(input_ids.shape) for input_ids, _ in checks]
    try:
        worst = check_with_onnxruntime(written, wrapped, checks)
    except Exception as error:  # onnxruntime's own error types: the graph does not run at another shape
        blocked = ExportBlocked(f"The ONNX graph of {name}, traced at {tuple(traced[0].shape)}, fails in onnxruntime "
                                f"at input shapes {shapes} ({str(error).splitlines()[0][:300]}); it was not written.")
        blocked.length_dependent = True
        raise blocked from error
    if worst > TOLERANCE:
        blocked = ExportBlocked(f"The ONNX graph of {name} differs from PyTorch by {worst:.2e} (more than "
                                f"{TOLERANCE}) at input shapes {shapes}; it was not written.")
        blocked.length_dependent = True
        raise blocked
    return worst


def export_onnx(model_dir, output_dir=None, overwrite=False):
    """Export the classifier saved in `model_dir` to `output_dir/model.onnx` (None: `MODEL_DIR/onnx`) and check it in
    onnxruntime at two batch sizes and lengths other than the traced ones; the model's config, tokenizer files and
    their source files are copied beside it (`companion_files`: what Optimum loads with the graph). An earlier
    export's files, unchanged since, are replaced; any other existing file of those names only with `overwrite`.
    Returns a report (path, the checked shapes, the largest logit difference). An `ExportBlocked` error names the
    operation that stops a family's export."""
    from ..modeling.registry import family_of_model_type
    from ..saving.saved_models import load_saved_model, model_digest, saved_config
    from .reading import ids_per_position, saved_reading_length

    require_onnxruntime("ONNX export")
    saved_config(model_dir, "`model_dir`")
    output_dir = graph_folder(model_dir, output_dir)
    target = os.path.join(output_dir, GRAPH_FILES["onnxruntime"])
    # an earlier export's model.onnx (in the folder's manifest, unchanged since) is replaced, as `train` and `bench`
    # replace their own outputs; a file of the user's only with `overwrite`
    check_files_free([target], overwrite, "--overwrite (overwrite=True)")
    copies = companion_copies(model_dir, output_dir)
    check_companions_free(copies, overwrite)
    require_writable_folder(output_dir, "`output_dir` (--output-dir)")
    model = load_saved_model(model_dir, "`model_dir`")
    tokenizer = None  # a folder saved by Trainer alone has none: the trace draws ids from the vocabulary
    if any(os.path.isfile(os.path.join(model_dir, name)) for name in TOKENIZER_FILES):
        tokenizer = load_saved_tokenizer(model_dir, "`model_dir`")
    wrapped = LogitsOnly(model).eval()
    reads, unit = saved_reading_length(model.config, tokenizer) or 4096, ids_per_position(model.config)
    if tokenizer is None:
        logger.info("%s holds no tokenizer: tracing and checking with ids drawn from the config's vocabulary (%d ids), "
                    "as optimum does; serve the graph with the tokenizer the model was trained with.", model_dir,
                    model.config.vocab_size)
    # a short batch, and one document as long as the model reads (at most 4,096 words): every segment, window and
    # global token a served document can have
    longest = min(max(60, reads), 4096)
    if tokenizer is not None:
        checks = [sample_inputs(tokenizer, documents=3, words=8), sample_inputs(tokenizer, documents=1, words=longest)]
    else:
        checks = [vocabulary_inputs(model.config, 3, 9 * unit, unit, seed=1),
                  vocabulary_inputs(model.config, 1, longest // unit * unit, unit, seed=2)]
    shapes = [tuple(input_ids.shape) for input_ids, _ in checks]
    with tempfile.TemporaryDirectory(dir=output_dir) as scratch:  # the user's folder changes only on success
        written = os.path.join(scratch, "model.onnx")
        # None: a Transformers checkpoint, with no window or block to pad to
        family = family_of_model_type(model.config.model_type)
        first = traced_length(reads, unit, family.padding_length(model.config) if family is not None else None)
        # the trace length decides how torch.export models the padding to a window or block (measured with the
        # sparse Longformer: a pad of 0 records none, a pad above half the window is a derived-dimension assertion,
        # `8*_sequence - 6 >= 0` at window 8); so the next lengths are tried, and a graph that onnxruntime cannot
        # run at the check lengths is never written
        step = 2 * unit  # odd numbers of positions only (`traced_length`)
        for attempt, length in enumerate(range(first, max(0, first - TRACE_ATTEMPTS * step), -step)):
            traced = (sample_inputs(tokenizer, documents=2, words=2048, length=length) if tokenizer is not None
                      else vocabulary_inputs(model.config, 2, length, unit))
            try:
                worst = export_and_check(wrapped, traced, written, checks)
                break
            except ExportBlocked as error:
                if not error.length_dependent or attempt == TRACE_ATTEMPTS - 1 or length - step < unit:
                    raise
                logger.info("Traced at %d ids, the graph fails (%s); tracing at %d.", length, error, length - step)
        staged = []
        for source, copy in copies:  # copied into the scratch folder first: none is written unless all are
            staged.append((os.path.join(scratch, os.path.basename(copy)), copy))
            shutil.copyfile(source, staged[-1][0])
        os.replace(written, target)
        for path, copy in staged:
            os.replace(path, copy)
    record_outputs([target] + [copy for _, copy in copies])  # a rerun into the same folder may replace them
    logger.info("Wrote %s: onnxruntime agrees with PyTorch within %.1e at input shapes %s.", target, worst, shapes)
    report = {"path": target, "checked_shapes": shapes, "max_abs_difference": worst,
              "traced_shape": tuple(traced[0].shape)}
    # a new float graph: a quantized graph of an earlier one no longer stands for it
    record = read_record(output_dir)
    digest = model_digest(model_dir)
    graphs = {name: graph for name, graph in (record.get("graphs") or {}).items()
              if name != "int8" and record.get("model") == digest}
    graphs["float32"] = {"file": os.path.basename(target), "max_abs_difference": worst,
                         "checked_shapes": [list(shape) for shape in shapes],
                         "traced_shape": list(report["traced_shape"])}
    write_record(output_dir, {"model": digest, "model_dir": os.path.realpath(model_dir), "graphs": graphs})
    return report


def quantize_graph(output_dir, overwrite=False):
    """Write `output_dir/model_quantized.onnx`: onnxruntime's dynamic int8 quantization (`quantize_dynamic`, signed
    int8 weights) of the float graph `export_onnx` wrote there; recorded in export.json. An earlier export's
    `model.int8.onnx` (the old name), unchanged since, is removed: export.json no longer names it. Returns its path."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    from ..saving.run_folder import file_digest, is_unchanged, read_manifest, write_manifest

    source = os.path.join(output_dir, GRAPH_FILES["onnxruntime"])
    target = os.path.join(output_dir, GRAPH_FILES["onnxruntime-int8"])
    if not os.path.isfile(source):
        raise ValueError(f"{source!r} is missing: export the float graph first (`hf-longdoc export MODEL_DIR`).")
    check_files_free([target], overwrite, "--overwrite (overwrite=True)")
    with tempfile.TemporaryDirectory(dir=output_dir) as scratch:
        written = os.path.join(scratch, os.path.basename(target))
        logging.disable(logging.INFO)  # the quantizer logs a line per tensor it leaves alone, on the root logger
        try:
            # the matrix products only: quantizing the rest as well (the LSTM over segments, the embeddings' gather)
            # cost the demo's segment LM 2 points of test accuracy (.90 against the float graph's .92; MatMul only:
            # .93); per-channel scales give a graph onnxruntime 1.32 cannot load
            quantize_dynamic(source, written, weight_type=QuantType.QInt8, op_types_to_quantize=QUANTIZED_OPERATIONS)
        finally:
            logging.disable(logging.NOTSET)
        os.replace(written, target)
    record_outputs([target])
    manifest = read_manifest(output_dir)
    for old in LEGACY_GRAPH_FILES["onnxruntime-int8"]:  # ours and unchanged: stale beside the new one (push skips it)
        if is_unchanged(output_dir, old, manifest):
            os.remove(os.path.join(output_dir, old))
            manifest["outputs"].pop(old, None)
            write_manifest(output_dir, manifest)
    record = read_record(output_dir)
    record.setdefault("graphs", {})["int8"] = {
        "file": os.path.basename(target), "from": file_digest(source),
        "quantization": f"onnxruntime.quantization.quantize_dynamic, QInt8 weights, {QUANTIZED_OPERATIONS}"}
    write_record(output_dir, record)
    logger.info("Wrote %s (%.1f MB; the float graph %.1f MB).", target, os.path.getsize(target) / 1e6,
                os.path.getsize(source) / 1e6)
    return target


__all__ = ["COMPANION_FILES", "ExportBlocked", "FORMATS", "GRAPH_FILES", "LEGACY_GRAPH_FILES", "companion_files",
           "export_onnx", "graph_folder", "graph_path", "quantize_graph", "read_record"]
