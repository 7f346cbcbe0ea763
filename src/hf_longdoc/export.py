"""`hf-longdoc export MODEL_DIR --format onnx --output-dir OUT`: a saved classifier as `OUT/model.onnx` (inputs
`input_ids` and `attention_mask`, output `logits`), made by PyTorch's exporter (`torch.onnx.export(dynamo=True)`,
which traces with `torch.export`) and checked in onnxruntime.

Batch size and length are dynamic: the check runs the graph at two batch sizes and two lengths other than the traced
ones and compares the logits with PyTorch's (Transformers' Longformer export was "silently broken", fixed to the
traced length: transformers PR #20292). Everything a family computes from the ids is inside the graph (the sparse
Longformer's TF-IDF/PMI selection, the segment LM's cut into segments), so a served model needs only the tokenizer's
ids and mask. The families skip their eager input checks while traced (a graph cannot branch on values), so the served
graph trusts the tokenizer saved with the model.
"""

import importlib.util
import logging
import os
import re
import tempfile

import torch

logger = logging.getLogger(__name__)

FORMATS = ("onnx",)
TOLERANCE = 1e-4  # largest |logit difference| between onnxruntime and PyTorch that passes
SAMPLE = ("The committee met on Tuesday to review the long report on river pollution, its causes and its costs. "
          "Several members asked for a second reading; the chair agreed, and the vote was moved to the next week. ")


class ExportBlocked(ValueError):
    """A family's graph cannot be exported: the message names the operation that blocks it and why."""


class LogitsOnly(torch.nn.Module):
    """The classifier as the exported graph sees it: (input_ids, attention_mask) -> logits."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, input_ids, attention_mask):
        return self.model(input_ids=input_ids, attention_mask=attention_mask).logits


def sample_inputs(tokenizer, documents, words):
    """A right-padded batch of `documents` texts of different lengths, the longest about `words` words, cut where the
    model stops reading (the tokenizer's model_max_length)."""
    text = SAMPLE.split()
    texts = [" ".join(text[j % len(text)] for j in range(max(3, words * (i + 1) // documents)))
             for i in range(documents)]
    encoded = tokenizer(texts, padding=True, truncation=True, return_tensors="pt")
    return encoded["input_ids"], encoded["attention_mask"]


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


def export_onnx(model_dir, output_dir, overwrite=False):
    """Export the classifier saved in `model_dir` to `output_dir/model.onnx` and check it in onnxruntime at two
    batch sizes and lengths other than the traced ones. Returns a report (path, the checked shapes, the largest
    logit difference). An `ExportBlocked` error names the operation that stops a family's export."""
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    import hf_longdoc  # noqa: F401  (our families load with the Auto classes)
    from hf_longdoc.pipelines import UNBOUNDED

    missing = [name for name in ("onnx", "onnxscript", "onnxruntime") if importlib.util.find_spec(name) is None]
    if missing:
        raise ValueError(f"ONNX export needs {', '.join(missing)}: pip install 'hf_longdoc[onnx]'.")
    if not os.path.isfile(os.path.join(model_dir, "config.json")):
        raise ValueError(f"`model_dir` {model_dir!r} holds no config.json; pass the folder of a saved model.")
    target = os.path.join(output_dir, "model.onnx")
    if os.path.exists(target) and not overwrite:
        raise ValueError(f"{target} exists; pass --overwrite (overwrite=True) to replace it, or another --output-dir.")
    try:
        tokenizer = AutoTokenizer.from_pretrained(model_dir)
    except (OSError, ValueError) as error:
        raise ValueError(f"`model_dir` {model_dir!r} has no tokenizer ({error}); the export traces with the ids it "
                         "makes. Save the model's tokenizer there with `tokenizer.save_pretrained`.") from error
    model = AutoModelForSequenceClassification.from_pretrained(model_dir).eval()
    wrapped = LogitsOnly(model).eval()
    # traced at a fraction of what the model reads (windows, blocks and segments past the first), checked below at
    # a short batch and at the full length
    limit = tokenizer.model_max_length
    reads = limit if limit and limit < UNBOUNDED else 4096
    traced = sample_inputs(tokenizer, documents=2, words=min(max(20, reads // 4), 2048))
    batch, length = torch.export.Dim("batch"), torch.export.Dim("sequence")
    os.makedirs(output_dir, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=output_dir) as scratch:  # the user's folder changes only on success
        written = os.path.join(scratch, "model.onnx")
        try:
            torch.onnx.export(wrapped, traced, written, dynamo=True, input_names=["input_ids", "attention_mask"],
                              output_names=["logits"], external_data=False,
                              dynamic_shapes={"input_ids": {0: batch, 1: length},
                                              "attention_mask": {0: batch, 1: length}})
        except Exception as error:  # the exporter raises its own error types, from torch.export and onnxscript
            raise ExportBlocked(f"{type(model).__name__} cannot be exported to ONNX: {blocking_operation(error)}") \
                from error
        # a short batch, and one document as long as the model reads (at most 4,096 words): every segment, window
        # and global token a served document can have
        longest = min(max(60, reads), 4096)
        checks = [sample_inputs(tokenizer, documents=3, words=8), sample_inputs(tokenizer, documents=1, words=longest)]
        fixed = fixed_dimensions(written)
        if fixed:
            raise ExportBlocked(f"{type(model).__name__} cannot be exported with a dynamic batch and length: the "
                                f"exporter fixed {fixed} to the traced shape {tuple(traced[0].shape)} (an operation "
                                "reads the length as a Python number); the graph would fail on any other shape.")
        worst = check_with_onnxruntime(written, wrapped, checks)
        shapes = [tuple(input_ids.shape) for input_ids, _ in checks]
        if worst > TOLERANCE:
            raise ExportBlocked(f"The ONNX graph of {type(model).__name__} differs from PyTorch by {worst:.2e} "
                                f"(more than {TOLERANCE}) at input shapes {shapes}; it was not written.")
        os.replace(written, target)
    logger.info("Wrote %s: onnxruntime agrees with PyTorch within %.1e at input shapes %s.", target, worst, shapes)
    return {"path": target, "checked_shapes": shapes, "max_abs_difference": worst,
            "traced_shape": tuple(traced[0].shape)}


__all__ = ["ExportBlocked", "FORMATS", "export_onnx"]
