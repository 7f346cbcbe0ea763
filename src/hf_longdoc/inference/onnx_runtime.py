"""The exported graphs behind `predict --backend onnxruntime` and `--backend onnxruntime-int8`.

`hf-longdoc export MODEL_DIR` writes the float graph into `MODEL_DIR/onnx/model.onnx` (and, with `--quantize int8`,
onnxruntime's dynamic int8 quantization of it into `model_quantized.onnx`; a folder exported before, with
`model.int8.onnx`, still runs: `export.graph_path`), with `export.json` recording which model they came from
(`model_dir`: the model folder's real path) and which weights (`model`: the folder's file digests), how far the float
graph's logits are from PyTorch's, and each graph's accuracy on the model's test split where that split can be drawn.
A copy uploaded by `push` names no `model_dir` (a local path), so in `MODEL_DIR/onnx` of a download it counts as the
model's own. `predict` runs those graphs (`graph_for`), after checking them against the model before any document is
read (`plan_graph`):

- export.json names these weights: the graph runs.
- A graph that is missing is exported once into the folder (`--graph-dir`, else `MODEL_DIR/onnx`) and the path is
  logged. So is a stale graph of this model: export.json names other weights but this model folder (the model was
  retrained into it), or names no folder (written before `model_dir` was recorded) and the folder is the model's own
  `MODEL_DIR/onnx`, where `export` puts its graphs.
- export.json names other weights and another model folder (wherever the graphs are: a model copied with its graphs
  and retrained is refused too), or names no folder in a `--graph-dir` elsewhere: the folder holds another model's
  graphs, and they are replaced only with `overwrite` (`predict --overwrite`); without it a ValueError names the
  model and the fix. Two models sharing a `--graph-dir` would otherwise re-export over each other at every switch.
- A graph without export.json (the user's own, or one whose record was deleted) runs only when nothing in it says it
  is another model's: it must parse, take `input_ids` and `attention_mask`, give `config.num_labels` logits, hold a
  word-embedding table of the model's shape (its vocabulary: rows x width), named as the model names it where the
  graph names its weights as `hf-longdoc export` does, and every weight it names as the model names one must hold the
  model's values (`check_bare_graph`). Anything else is refused in one line naming the file
  and the command that exports the right graph; a graph that passes runs with a warning saying how to make it
  checkable (`hf-longdoc export`, which writes export.json). A same-shaped graph named otherwise (another exporter's)
  can only be checked for its shapes.

Where an export is needed, the folder must be writable: a read-only model folder is refused before any work, naming
`hf-longdoc export MODEL_DIR --output-dir DIR` and `--graph-dir DIR`. `--backend onnxruntime` runs the float graph
only, never the int8 one.

Threads: `predict` reads several batches at once on the CPU, each on one thread (`threads.reading_workers`); with
one reader the session takes `torch.get_num_threads()` intra-op threads (what the user set, or this process's share
of the cores under a launcher: `threads.share_cores`). Its threads do not spin while they wait for work
(`session.intra_op.allow_spinning` 0): a spinning thread holds a core that another process on a shared machine needs,
and the next operation then waits for it.
"""

import functools
import logging
import os
import tempfile
from dataclasses import dataclass

import torch

from ..saving.run_folder import check_files_free
from .export import (
    GRAPH_FILES,
    GRAPH_FOLDER,
    PRECISIONS,
    RECORD,
    check_companions_free,
    companion_copies,
    export_onnx,
    graph_folder,
    graph_path,
    quantize_graph,
    read_record,
)
from .settings import BACKENDS

logger = logging.getLogger(__name__)

GRAPH_INPUTS = ("input_ids", "attention_mask")  # what `GraphRunner` feeds, and `export_onnx` names
WRAPPER_PREFIX = "model."  # `export.LogitsOnly` holds the classifier as `model`: its weights' names in the graph


@dataclass(frozen=True)
class GraphPlan:
    """What `graph_for` does for a backend, decided by `plan_graph` before any work.

    Args:
        path: the graph the backend runs.
        export: whether the float graph is exported first (into `path`'s folder), and `why` (for the log).
        quantize: whether the float graph is then quantized to int8 into `path`.
        note: a warning to log: the graph has no export.json and runs as it is.
    """

    path: str
    export: bool = False
    quantize: bool = False
    why: str = ""
    note: str | None = None


def _same_place(a, b):
    return os.path.realpath(a) == os.path.realpath(b)


def another_model(record, folder, model_dir):
    """Why the graphs of `folder`, whose export.json (`record`) names other weights than `model_dir` holds, are another
    model's (a clause for the error), or None where they are a stale export of this model: export.json names this
    model folder, or names none (written before it was recorded) and `folder` is the model's own `MODEL_DIR/onnx`."""
    named = record.get("model_dir")
    if isinstance(named, str):
        # wherever the folder is: a model copied or moved with its graphs and retrained is refused too (the message
        # says --overwrite), rather than a graph exported into MODEL_DIR/onnx from another model being replaced
        return None if _same_place(named, model_dir) else f"its {RECORD} names the model {named!r}"
    if _same_place(folder, os.path.join(model_dir, GRAPH_FOLDER)):
        return None  # where `export` puts this model's graphs by default
    # elsewhere, nothing says they are this model's: they are kept
    return f"its {RECORD} (written by an earlier hf-longdoc) does not say which model folder they were exported from"


def export_command(model_dir, folder):
    return f"`hf-longdoc export {model_dir} --output-dir {folder} --overwrite`"


def model_embedding(model_dir):
    """(config, name, (rows, width)) of the model saved in `model_dir`: its config and its word-embedding table's
    state-dict name and shape, from config.json alone (the model is built on the meta device: no weight is read);
    name and shape are None for a model without a token table."""
    from transformers import AutoConfig, AutoModelForSequenceClassification

    config = AutoConfig.from_pretrained(model_dir)
    try:
        with torch.device("meta"):
            model = AutoModelForSequenceClassification.from_config(config)
        weight = getattr(model.get_input_embeddings(), "weight", None)
    except Exception:  # a model that cannot be built on the meta device, or has no table: its vocabulary is not checked
        weight = None
    name = next((name for name, parameter in model.named_parameters() if parameter is weight), None)
    return (config, None, None) if name is None else (config, name, tuple(weight.shape))


def read_graph(path, fix):
    """The ONNX graph at `path` (`onnx.ModelProto.graph`), checked to be one `GraphRunner` can feed: it parses, has
    operations, takes `input_ids` and `attention_mask` and gives `logits`; a ValueError ending in `fix` otherwise."""
    import onnx

    try:
        graph = onnx.load(path).graph
    except Exception as error:  # protobuf's DecodeError for a file that is not a graph, an OSError for its data
        reason = (str(error).splitlines() or [type(error).__name__])[0][:200]
        raise ValueError(f"{path!r} is not an ONNX graph onnx can read ({reason}); {fix}.") from None
    if not graph.node:  # an empty file parses as an empty ModelProto
        raise ValueError(f"{path!r} holds no ONNX graph (no operations); {fix}.")
    initializers = {tensor.name for tensor in graph.initializer}  # listed among the inputs by older IR versions
    inputs = [tensor.name for tensor in graph.input if tensor.name not in initializers]
    if sorted(inputs) != sorted(GRAPH_INPUTS):
        raise ValueError(f"{path!r} takes the inputs {inputs}, and predict feeds {' and '.join(GRAPH_INPUTS)} (what "
                         f"`hf-longdoc export` writes); {fix}.")
    if "logits" not in [tensor.name for tensor in graph.output]:
        raise ValueError(f"{path!r} has no `logits` output (its outputs: {[t.name for t in graph.output]}); {fix}.")
    return graph


def logits_width(graph):
    """The last dimension of the graph's `logits` output (the classes it scores), or None where it is not fixed."""
    dims = next(tensor for tensor in graph.output if tensor.name == "logits").type.tensor_type.shape.dim
    return dims[-1].dim_value if dims and dims[-1].HasField("dim_value") else None


def embedding_shape(graph, initializers, name, shape):
    """The shape of the graph's word-embedding table: the initializer under the model's `name` for it (as
    `export_onnx` names it), else one of the model's `shape` (another exporter's names), else the 2-d table a Gather
    reads with `input_ids` (directly or through a Cast); None when there is none."""
    named = initializers.get(WRAPPER_PREFIX + name, initializers.get(name))
    if named is not None:
        return tuple(named.dims)
    if any(tuple(tensor.dims) == shape for tensor in initializers.values()):
        return shape
    sources = {"input_ids"}
    for node in graph.node:
        if node.op_type == "Cast" and node.input[0] in sources:
            sources.update(node.output)
    for node in graph.node:
        table = initializers.get(node.input[0]) if node.op_type == "Gather" and len(node.input) > 1 else None
        if table is not None and node.input[1] in sources and len(table.dims) == 2:
            return tuple(table.dims)
    return None


def differing_weight(initializers, model_dir):
    """(graph name, model name) of the first weight the graph names as the model does (`export_onnx`'s graphs keep
    the parameters' names) with the same shape but other values, or None; and how many were compared."""
    import numpy
    from onnx import numpy_helper
    from safetensors import safe_open

    compared = 0
    for file_name in sorted(os.listdir(model_dir)):  # the safetensors files (`saved_config` refuses pickled ones)
        if not file_name.endswith(".safetensors"):
            continue
        with safe_open(os.path.join(model_dir, file_name), framework="pt") as f:
            for weight in f.keys():
                tensor = initializers.get(WRAPPER_PREFIX + weight, initializers.get(weight))
                if tensor is None or tuple(tensor.dims) != tuple(f.get_slice(weight).get_shape()):
                    continue
                saved = f.get_tensor(weight)
                if not saved.is_floating_point():
                    continue
                # exact: the exporter stores a parameter as it is (a bfloat16 one widened to float32 loses nothing)
                if not numpy.array_equal(numpy_helper.to_array(tensor).astype(numpy.float32), saved.float().numpy()):
                    return (tensor.name, weight), compared
                compared += 1
    return None, compared


@functools.lru_cache(maxsize=8)
def _bare_graph_note(path, size, mtime, model_dir, folder, digest):
    """`check_bare_graph`'s verdict, read once per version of the graph and of the model (`digest`, items): predict
    checks before reading the documents and again before running."""
    fix = f"export this model's graph there with {export_command(model_dir, folder)} (or pass another --graph-dir)"
    graph = read_graph(path, fix)
    config, name, shape = model_embedding(model_dir)
    width = logits_width(graph)
    if width is not None and width != config.num_labels:
        raise ValueError(f"{path!r} gives {width} logits a document and {model_dir!r} has {config.num_labels} labels: "
                         f"it is another model's graph; {fix}.")
    checked = ["its inputs", f"{width} logits" if width is not None else "a `logits` output (of no fixed width)"]
    initializers = {tensor.name: tensor for tensor in graph.initializer}
    if shape is not None:
        if WRAPPER_PREFIX + name not in initializers and name not in initializers and any(
                other.startswith(WRAPPER_PREFIX) for other in initializers):
            # named as `export_onnx` names a model's weights, but not as this one's: another family's graph, whose
            # sizes may still be the same (two tiny models of 80 ids of 32 values)
            raise ValueError(f"{path!r} is another model's graph: its weights are named as `hf-longdoc export` names "
                             f"a model's, and none is the word embeddings of {model_dir!r} ({name!r}); {fix}.")
        found = embedding_shape(graph, initializers, name, shape)
        if found != shape:
            theirs = (f"its word embeddings are {found[0]}x{found[1]} (a vocabulary of {found[0]} ids)" if found
                      else "it holds no table of that shape")
            raise ValueError(f"{path!r} is another model's graph: {model_dir!r} has {shape[0]}x{shape[1]} word "
                             f"embeddings (a vocabulary of {shape[0]} ids) and {theirs}; {fix}.")
        checked.append(f"a vocabulary of {shape[0]} ids")
    differing, compared = differing_weight(initializers, model_dir)
    if differing is not None:
        raise ValueError(f"{path!r} was exported from other weights than {model_dir!r} holds (its {differing[0]!r} "
                         f"differs from the model's {differing[1]!r}): another model's graph, or this one's before it "
                         f"was trained again; {fix}.")
    if compared:
        checked.append(f"the {compared} weights it names as the model does")
    return (f"{path} has no {RECORD} saying which model it was exported from; it agrees with {model_dir} in what "
            f"can be checked without one ({', '.join(checked)}), so it runs as it is. To have it checked against the "
            f"model, export it with {export_command(model_dir, folder)}, which writes {RECORD} beside it.")


def check_bare_graph(path, model_dir, folder=None, digest=None):
    """Check the graph at `path`, which has no export.json, against the model saved in `model_dir` (whose
    `model_digest` is `digest`; computed when None), as the module docstring says: a ValueError naming the file and
    `hf-longdoc export MODEL_DIR --output-dir FOLDER --overwrite` for a file that is not a graph or is another model's;
    else the warning to log before running it."""
    from ..saving.saved_models import model_digest

    folder = folder if folder is not None else os.path.dirname(path)
    digest = digest if digest is not None else model_digest(model_dir)
    status = os.stat(path)
    return _bare_graph_note(os.path.abspath(path), status.st_size, status.st_mtime_ns, os.fspath(model_dir),
                            os.fspath(folder), tuple(sorted(digest.items())))


def require_writable(folder, model_dir, graph_dir, backend):
    """A ValueError, before any work, when the graph cannot be exported into `folder` (or the folder it would be
    created in); it names `--graph-dir`, the flag predict has."""
    probe = os.path.abspath(folder)
    while not os.path.exists(probe) and os.path.dirname(probe) != probe:
        probe = os.path.dirname(probe)  # the folder is created by the export: its nearest existing parent is written
    try:
        with tempfile.TemporaryFile(dir=probe):
            pass
    except OSError as error:
        reason = error.strerror or error
        if graph_dir is None:
            message = (f"--backend {backend} exports the graph once into {folder!r} (MODEL_DIR/onnx), which cannot be "
                       f"written ({reason}); export it into a folder you can write to with `hf-longdoc export "
                       f"{model_dir} --output-dir DIR`, then pass `--graph-dir DIR`.")
        else:
            message = (f"`graph_dir` (--graph-dir) {folder!r} cannot be written ({reason}), and --backend {backend} "
                       "exports the graph there once; pass a --graph-dir you can write to.")
        raise ValueError(message) from None


def plan_graph(model_dir, backend, graph_dir=None, digest=None, overwrite=False):
    """What `graph_for` will do for `backend` and the model saved in `model_dir` (a `GraphPlan`), with every check of
    the module docstring made now, before any work: a ValueError for another model's graphs (unless `overwrite`), a
    graph without export.json that is not this model's, a file in the way of the export, a folder that cannot be
    written. `digest`: `saved_models.model_digest(model_dir)` (computed when None)."""
    from ..saving.saved_models import model_digest

    folder = graph_folder(model_dir, graph_dir)
    record = read_record(folder)
    path = graph_path(folder, backend, record)  # the recorded file, else the standard name, else the old one
    current = digest if digest is not None else model_digest(model_dir)

    def is_current(name):  # the graph of backend `name` is there and export.json says it is of these weights
        recorded = (record.get("graphs") or {}).get(PRECISIONS[name])
        found = graph_path(folder, name, record)
        return (os.path.isfile(found) and record.get("model") == current and isinstance(recorded, dict)
                and recorded.get("file", os.path.basename(found)) == os.path.basename(found))

    if is_current(backend):
        return GraphPlan(path)
    if record and record.get("model") != current:
        other = another_model(record, folder, model_dir)
        if other is not None and not overwrite:
            own = os.path.join(model_dir, GRAPH_FOLDER)
            instead = "" if _same_place(folder, own) else f" (or none: the graph then goes into {own!r})"
            raise ValueError(f"{folder!r} holds another model's ONNX graphs: {other}, and their weights are not "
                             f"those of {model_dir!r}. Pass another --graph-dir{instead}, or --overwrite to replace "
                             "them with this model's.")
        why = ("was exported from other weights than the model has now" if other is None
               else f"is another model's ({other}): replacing it (--overwrite)")
    elif not record and os.path.isfile(path):
        return GraphPlan(path, note=check_bare_graph(path, model_dir, folder, current))
    else:
        why = "is missing" if not os.path.isfile(path) else f"is not recorded in {RECORD}"
    export = not is_current("onnxruntime")
    quantize = backend == "onnxruntime-int8"
    # what the export and the quantization would refuse after the documents are read, refused now
    writes = [GRAPH_FILES["onnxruntime"]] * export + [GRAPH_FILES["onnxruntime-int8"]] * quantize
    check_files_free([os.path.join(folder, name) for name in writes], overwrite, "--overwrite (overwrite=True)")
    if export:
        check_companions_free(companion_copies(model_dir, folder), overwrite)
    require_writable(folder, model_dir, graph_dir, backend)
    # the graph is written under its standard name (an old `model.int8.onnx` is not written again)
    return GraphPlan(os.path.join(folder, GRAPH_FILES[backend]), export=export, quantize=quantize, why=why)


def graph_for(model_dir, backend, graph_dir=None, digest=None, overwrite=False):
    """The path of the graph `backend` runs for the model saved in `model_dir` (whose files' `digest` is
    `saved_models.model_digest`'s, computed when None), exported (or quantized) once into `graph_folder` when it is
    missing or a stale export of this model; `overwrite`: also over another model's graphs. Checked first by
    `plan_graph`, whose ValueErrors it raises."""
    plan = plan_graph(model_dir, backend, graph_dir, digest, overwrite)
    folder = os.path.dirname(plan.path)
    if plan.note:
        logger.warning(plan.note)
    if plan.export:
        logger.info("The ONNX graph %s %s: exporting it once (later runs reuse it).", plan.path, plan.why)
        export_onnx(model_dir, folder, overwrite=overwrite)
    if plan.quantize:
        logger.info("Quantizing %s to int8 into %s once (onnxruntime's dynamic quantization; its accuracy is "
                    "measured by `hf-longdoc export %s --quantize int8 --dataset DATA`).",
                    os.path.join(folder, GRAPH_FILES["onnxruntime"]), plan.path, model_dir)
        quantize_graph(folder, overwrite=overwrite)
    return plan.path


def session_options(threads):
    """onnxruntime's session options: `threads` intra-op threads, and no spinning."""
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return options


class GraphRunner:
    """An exported classifier in onnxruntime, called as the model's forward is: (input_ids, attention_mask) tensors
    in, float32 logits out as a tensor. Several threads may call it at once (onnxruntime's `run` is thread-safe);
    each call then uses `threads` intra-op threads."""

    def __init__(self, path, threads=None):
        import onnxruntime

        self.path = path
        threads = threads or torch.get_num_threads()
        try:
            self.session = onnxruntime.InferenceSession(path, session_options(threads),
                                                        providers=["CPUExecutionProvider"])
        except Exception as error:  # onnxruntime's own error types (InvalidProtobuf, Fail, ...): one line, and the fix
            reason = (str(error).splitlines() or [type(error).__name__])[0][:300]
            raise ValueError(f"onnxruntime cannot load {path!r} ({reason}); export the model's graph there again with "
                             f"{export_command('MODEL_DIR', os.path.dirname(path))}.") from None
        logger.info("Running %s in onnxruntime %s, %d CPU thread(s) a call.", path, onnxruntime.__version__, threads)

    def __call__(self, input_ids, attention_mask):
        feeds = {"input_ids": input_ids.cpu().numpy(), "attention_mask": attention_mask.cpu().numpy()}
        (logits,) = self.session.run(["logits"], feeds)
        return torch.from_numpy(logits).float()


__all__ = ["BACKENDS", "GraphPlan", "GraphRunner", "check_bare_graph", "graph_for", "plan_graph"]
