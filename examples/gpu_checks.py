"""The GPU's equality checks (issue 53), run before the GPU table: what the CPU suite cannot run.

1. The sparse Longformer's `flex` backend (FlexAttention, compiled) against `blocked` on CUDA in float32: logits, the
   gradient of the input embeddings and of every parameter, in training mode (dropout 0), at 4,096 tokens with a
   512-token window and 64 scattered global tokens, on a padded batch.
2. The S-LSTM's compiled step (one run over all tokens on a GPU) against its eager step on CUDA in float32: states
   and gradients.
3. A training step through `flex` under bfloat16 and float16 autocast: finite loss and gradients, logits within
   autocast's rounding of `blocked`'s.

    python examples/gpu_checks.py [slstm] [sparse_longformer] [autocast]
                                         (default: all; exit status 1 if a check fails; under a minute on an H100)
"""

import sys
import time

import torch

from hf_longdoc.modeling.slstm.configuration_slstm import SLSTMConfig
from hf_longdoc.modeling.slstm.modeling_slstm import SLSTMForSequenceClassification
from hf_longdoc.modeling.sparse_longformer.configuration_sparse_longformer import SparseLongformerConfig
from hf_longdoc.modeling.sparse_longformer.modeling_sparse_longformer import SparseLongformerForSequenceClassification

FAILED = []


def report(name, error, bar):
    ok = error <= bar
    print(f"{'ok  ' if ok else 'FAIL'} {name}: max |difference| {error:.2e} (bar {bar:.0e})", flush=True)
    if not ok:
        FAILED.append(name)


def relative_error(got, expected):
    """The largest difference of two gradient dicts, each tensor's relative to its own largest value, or to a
    thousandth of the largest gradient of all where the tensor's own is smaller (a key bias's gradient is zero in
    exact arithmetic: softmax ignores a shift common to all keys, so its rounding noise has no scale of its own)."""
    floor = 1e-3 * max(g.abs().max().item() for g in expected.values())
    return max((got[name] - g).abs().max().item() / max(g.abs().max().item(), floor) for name, g in expected.items())


def batch(lengths, vocab, device, seed=0):
    generator = torch.Generator().manual_seed(seed)
    ids = torch.full((len(lengths), max(lengths)), 1, dtype=torch.long)
    mask = torch.zeros_like(ids)
    for row, length in enumerate(lengths):
        ids[row, :length] = torch.randint(5, vocab, (length,), generator=generator)
        mask[row, :length] = 1
    return ids.to(device), mask.to(device)


def scattered(mask, count, seed=0):
    generator = torch.Generator().manual_seed(seed)
    chosen = torch.zeros_like(mask)
    for row in range(mask.shape[0]):
        real = int(mask[row].sum())
        chosen[row, torch.randperm(real - 1, generator=generator)[:count].to(mask.device) + 1] = 1
    chosen[:, 0] = 1
    return chosen


def outputs_and_gradients(model, backend, ids, mask, global_mask, autocast=None):
    model.config.attention_backend = backend
    model.zero_grad(set_to_none=True)
    embeds = model.longformer.embeddings.word_embeddings(ids).detach().requires_grad_()
    with torch.autocast("cuda", dtype=autocast, enabled=autocast is not None):
        logits = model(inputs_embeds=embeds, attention_mask=mask, global_attention_mask=global_mask).logits
    ran = model.attention_backend_for(training=True)
    assert ran == backend, ran
    (logits.float() * torch.arange(1, logits.shape[1] + 1, device=logits.device)).sum().backward()
    grads = {name: p.grad.float().clone() for name, p in model.named_parameters() if p.grad is not None}
    return logits.float().detach(), embeds.grad.float().clone(), grads


def sparse_model_and_batch(device):
    """A small sparse Longformer in training mode (dropout 0) and a padded batch of 4,096 tokens with 64 scattered
    global tokens, window 512."""
    torch.manual_seed(0)
    config = SparseLongformerConfig(vocab_size=8000, hidden_size=256, num_hidden_layers=2, num_attention_heads=4,
                                    intermediate_size=1024, attention_window=512, max_position_embeddings=4098,
                                    hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, num_labels=3)
    model = SparseLongformerForSequenceClassification(config).to(device).train()
    ids, mask = batch([4096, 3000], 8000, device)
    return model, ids, mask, scattered(mask, 64)


def check_sparse_longformer(device):
    model, ids, mask, global_mask = sparse_model_and_batch(device)
    start = time.perf_counter()
    got = outputs_and_gradients(model, "flex", ids, mask, global_mask)
    print(f"     flex: first training pass (compilation included) {time.perf_counter() - start:.1f} s", flush=True)
    expected = outputs_and_gradients(model, "blocked", ids, mask, global_mask)
    report("sparse Longformer flex == blocked, logits (float32)", (got[0] - expected[0]).abs().max().item(), 1e-4)
    real = mask.bool()
    report("sparse Longformer flex == blocked, input gradients", (got[1][real] - expected[1][real]).abs().max().item(),
           1e-4)
    report("sparse Longformer flex == blocked, parameter gradients (relative)", relative_error(got[2], expected[2]),
           1e-3)


def check_autocast(device):
    model, ids, mask, global_mask = sparse_model_and_batch(device)
    for dtype in (torch.bfloat16, torch.float16):
        half = outputs_and_gradients(model, "flex", ids, mask, global_mask, autocast=dtype)
        reference = outputs_and_gradients(model, "blocked", ids, mask, global_mask, autocast=dtype)
        finite = all(torch.isfinite(g).all() for g in half[2].values()) and torch.isfinite(half[0]).all()
        print(f"{'ok  ' if finite else 'FAIL'} sparse Longformer flex trains under {dtype} autocast: finite logits and "
              "gradients", flush=True)
        if not finite:
            FAILED.append(f"flex {dtype}")
        report(f"sparse Longformer flex == blocked under {dtype} autocast, logits", (half[0] - reference[0]).abs().max()
               .item(), 5e-2)


def check_slstm(device):
    torch.manual_seed(0)
    settings = dict(vocab_size=8000, hidden_size=128, num_recurrent_steps=3, max_position_embeddings=2048,
                    hidden_dropout_prob=0.0, num_labels=3)
    eager = SLSTMForSequenceClassification(SLSTMConfig(**settings, compile_gates=False)).to(device).train()
    compiled = SLSTMForSequenceClassification(SLSTMConfig(**settings, compile_gates=True)).to(device).train()
    compiled.load_state_dict(eager.state_dict())
    ids, mask = batch([2048, 1500], 8000, device)
    results = []
    for model in (compiled, eager):
        start = time.perf_counter()
        logits = model(ids, attention_mask=mask).logits
        logits.sum().backward()
        results.append((logits.detach(), {name: p.grad.clone() for name, p in model.named_parameters()
                                          if p.grad is not None}))
        print(f"     S-LSTM compile_gates={model.config.compile_gates}: first training pass "
              f"{time.perf_counter() - start:.1f} s", flush=True)
    report("S-LSTM compiled step == eager step, logits (float32)", (results[0][0] - results[1][0]).abs().max().item(),
           1e-4)
    report("S-LSTM compiled step == eager step, parameter gradients (relative)",
           relative_error(results[0][1], results[1][1]), 1e-3)


def main():
    if not torch.cuda.is_available():
        sys.exit("No CUDA GPU: these checks are for a GPU (the CPU suite covers the rest).")
    import transformers

    torch.backends.cuda.matmul.allow_tf32 = False  # float32 comparisons in float32
    torch.backends.cudnn.allow_tf32 = False
    print(f"{torch.cuda.get_device_name()}; torch {torch.__version__}, transformers {transformers.__version__}")
    checks = {"slstm": check_slstm, "sparse_longformer": check_sparse_longformer, "autocast": check_autocast}
    chosen = sys.argv[1:] or list(checks)
    unknown = sorted(set(chosen) - set(checks))
    if unknown:
        sys.exit(f"Unknown check(s) {', '.join(unknown)}; choose from {', '.join(checks)}.")
    for check in (checks[name] for name in chosen):
        try:
            check(torch.device("cuda"))
        except Exception as error:  # report and go on to the next check
            print(f"FAIL {check.__name__}: {type(error).__name__}: {error}", flush=True)
            FAILED.append(check.__name__)
    print("all checks passed" if not FAILED else f"{len(FAILED)} failed: {', '.join(FAILED)}")
    sys.exit(1 if FAILED else 0)


if __name__ == "__main__":
    main()
