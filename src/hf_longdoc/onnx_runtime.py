"""The exported graphs behind `predict --backend onnxruntime` and `--backend onnxruntime-int8`.

`hf-longdoc export MODEL_DIR` writes the float graph into `MODEL_DIR/onnx/model.onnx` (and, with `--quantize int8`,
onnxruntime's dynamic int8 quantization of it into `model.int8.onnx`), with `export.json` recording which weights
they came from (the model folder's file digests), how far the float graph's logits are from PyTorch's, and each
graph's accuracy on the model's test split where that split can be drawn. `predict` runs those graphs; a graph that
is missing, or that was exported from other weights than the folder holds now, is exported once into the same cache
and the path is logged. `--backend onnxruntime` runs the float graph only, never the int8 one.

Threads: `predict` reads several batches at once on the CPU, each on one thread (`threads.reading_workers`); with
one reader the session takes `torch.get_num_threads()` intra-op threads (what the user set, or this process's share
of the cores under a launcher: `threads.share_cores`). Its threads do not spin while they wait for work
(`session.intra_op.allow_spinning` 0): a spinning thread holds a core that another process on a shared machine needs,
and the next operation then waits for it.
"""

import logging
import os

import torch

from .export import GRAPH_FILES, PRECISIONS, RECORD, export_onnx, graph_folder, quantize_graph, read_record

logger = logging.getLogger(__name__)

BACKENDS = ("torch", "onnxruntime", "onnxruntime-int8")


def graph_for(model_dir, backend, graph_dir=None, digest=None):
    """The path of the graph `backend` runs for the model saved in `model_dir` (whose files' `digest` is
    `saved_models.model_digest`'s, computed when None), exported (or quantized) once into `graph_folder` when it is
    missing or was exported from other weights than the folder holds now."""
    from .saved_models import model_digest

    folder = graph_folder(model_dir, graph_dir)
    path = os.path.join(folder, GRAPH_FILES[backend])
    record = read_record(folder)
    current = digest if digest is not None else model_digest(model_dir)

    def is_current(name):  # the graph of backend `name` is there and export.json says it is of these weights
        return (os.path.isfile(os.path.join(folder, GRAPH_FILES[name])) and record.get("model") == current
                and PRECISIONS[name] in record.get("graphs", {}))

    if is_current(backend):
        return path
    if os.path.isfile(path) and not record:
        logger.warning("%s has no %s saying which weights it was exported from; running it as it is (export again "
                       "with `hf-longdoc export %s` if the model changed since).", path, RECORD, model_dir)
        return path
    why = "is missing" if not os.path.isfile(path) else "was exported from other weights than the model has now"
    float_path = os.path.join(folder, GRAPH_FILES["onnxruntime"])
    if not is_current("onnxruntime"):
        logger.info("The ONNX graph %s %s: exporting it once (later runs reuse it).", path, why)
        export_onnx(model_dir, folder)
    if backend == "onnxruntime-int8":
        logger.info("Quantizing %s to int8 into %s once (onnxruntime's dynamic quantization; its accuracy is "
                    "measured by `hf-longdoc export %s --quantize int8 --dataset DATA`).", float_path, path, model_dir)
        quantize_graph(folder)
    return path


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
        self.session = onnxruntime.InferenceSession(path, session_options(threads),
                                                    providers=["CPUExecutionProvider"])
        logger.info("Running %s in onnxruntime %s, %d CPU thread(s) a call.", path, onnxruntime.__version__, threads)

    def __call__(self, input_ids, attention_mask):
        feeds = {"input_ids": input_ids.cpu().numpy(), "attention_mask": attention_mask.cpu().numpy()}
        (logits,) = self.session.run(["logits"], feeds)
        return torch.from_numpy(logits).float()


__all__ = ["BACKENDS", "GraphRunner", "graph_for"]
