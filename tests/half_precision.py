"""The half-precision check shared by the conformance suite (every family) and the pretrained MiniLM tests."""

import copy

import torch
from transformers import AutoModelForSequenceClassification


def half_precision_logits(model, folder, encoded, mode):
    """Logits of `model` (saved in `folder`) in one half-precision mode: bf16 autocast, loaded with
    `dtype=torch.bfloat16` (what `torch_dtype=` was), or `.half()`."""
    with torch.no_grad():
        if mode == "autocast-bf16":
            with torch.autocast("cpu", dtype=torch.bfloat16):
                return model(**encoded).logits.float()
        if mode == "bf16":
            loaded = AutoModelForSequenceClassification.from_pretrained(folder, dtype=torch.bfloat16).eval()
            assert next(loaded.parameters()).dtype == torch.bfloat16
            return loaded(**encoded).logits.float()
        return copy.deepcopy(model).half()(**encoded).logits.float()


def assert_half_precision_agrees(model, folder, encoded, modes=("autocast-bf16", "bf16", "fp16")):
    """Finite logits in every mode, and fp32's prediction wherever fp32's top two logits are 5% of the logit scale
    apart (closer calls may flip within half precision's rounding)."""
    with torch.no_grad():
        full = model(**encoded).logits.float()
    top = full.topk(2, dim=-1).values
    clear = (top[:, 0] - top[:, 1]) >= 0.05 * full.abs().max()
    assert clear.float().mean() >= 0.5, "too few clear predictions to compare"
    for mode in modes:
        half = half_precision_logits(model, folder, encoded, mode)
        assert torch.isfinite(half).all(), mode
        assert torch.equal(half.argmax(-1)[clear], full.argmax(-1)[clear]), mode
