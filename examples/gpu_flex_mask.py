"""What one FlexAttention call of the sparse Longformer costs on a GPU, by the form of its `mask_mod` (issue 53).

The bench shape: batch 4, 12 heads of 64, 8,192 tokens, window 512 (c = 256), [CLS] + 128 scattered global tokens
(a prefix of 256 slots), bfloat16. Every form uses the same blocks (`window_kv_blocks`), so the differences are the
cost of evaluating `mask_mod` in the partial blocks:

1. the model's mask (`flex_block_mask`): one length and one count per document, and the slots' positions;
2. the earlier form, which read a pad flag per key and per query and a filled flag per slot (bool gathers);
3. arithmetic alone (the band and the prefix, no pads and no duplicates: a lower bound, not a correct mask);

beside a pure band of the same width (`create_block_mask`, no prefix), dense FlexAttention and dense SDPA (flash).

    python examples/gpu_flex_mask.py         (about 40 s on an H200: each form compiles once)
"""

import sys
import time

import torch
import torch.nn.functional as F
from torch.nn.attention.flex_attention import BlockMask, create_block_mask, flex_attention

from hf_longdoc.experiments.bench import scattered_global_mask
from hf_longdoc.modeling.sparse_longformer.modeling_sparse_longformer import (
    FLEX_BLOCK,
    flex_block_mask,
    global_slots,
)

BATCH, HEADS, LENGTH, HEAD_DIM, C = 4, 12, 8192, 64, 256


def milliseconds_per_call(function, calls=10):
    function()  # the compilation
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(calls):
        function()
    torch.cuda.synchronize()
    return (time.perf_counter() - start) * 1000 / calls


def same_blocks(block_mask, mask_mod, slots):
    return BlockMask.from_kv_blocks(block_mask.kv_num_blocks, block_mask.kv_indices, block_mask.full_kv_num_blocks,
                                    block_mask.full_kv_indices, BLOCK_SIZE=FLEX_BLOCK, mask_mod=mask_mod,
                                    seq_lengths=(LENGTH, slots + LENGTH))


def main():
    if not torch.cuda.is_available():
        sys.exit("No CUDA GPU: FlexAttention's kernel needs one (on the CPU it materialises every score).")
    device, dtype = torch.device("cuda"), torch.bfloat16
    flex = torch.compile(flex_attention)
    is_global = scattered_global_mask(torch.ones(BATCH, LENGTH, dtype=torch.long, device=device), 128).bool()
    is_pad = torch.zeros(BATCH, LENGTH, dtype=torch.bool, device=device)
    positions, filled = global_slots(is_global)
    extra = -(-positions.shape[1] // FLEX_BLOCK) * FLEX_BLOCK - positions.shape[1]
    positions, filled = F.pad(positions, (0, extra)), F.pad(filled, (0, extra), value=False)
    slots = positions.shape[1]
    q = torch.randn(BATCH, HEADS, LENGTH, HEAD_DIM, device=device, dtype=dtype)
    kv = torch.randn(BATCH, HEADS, slots + LENGTH, HEAD_DIM, device=device, dtype=dtype)
    k = kv[:, :, slots:]
    model_mask = flex_block_mask(is_pad, positions, filled, C)
    is_real = ~is_pad

    def flag_gathers(batch, head, query, key):
        j = key - slots
        slot = key.clamp(0, slots - 1)
        window = (j >= 0) & ((query - j).abs() <= C) & is_real[batch, j.clamp(0, LENGTH - 1)]
        far = (query - positions[batch, slot]).abs() > C
        return window | ((j == query) & is_pad[batch, query]) | ((j < 0) & filled[batch, slot] & far)

    def arithmetic(batch, head, query, key):
        return ((query - (key - slots)).abs() <= C) | (key < slots)

    band = create_block_mask(lambda batch, head, query, key: (query - key).abs() <= C, None, None, LENGTH, LENGTH,
                             device=device)
    gathered, bound = same_blocks(model_mask, flag_gathers, slots), same_blocks(model_mask, arithmetic, slots)
    forms = [
        ("the model's mask_mod (per-document length and count)", lambda: flex(q, kv, kv, block_mask=model_mask)),
        ("the earlier mask_mod (a bool flag gathered per key)", lambda: flex(q, kv, kv, block_mask=gathered)),
        ("arithmetic alone, same blocks (lower bound)", lambda: flex(q, kv, kv, block_mask=bound)),
        (f"a pure band, no prefix ({100 - band.sparsity():.0f}% of blocks)", lambda: flex(q, k, k, block_mask=band)),
        ("dense FlexAttention", lambda: flex(q, k, k)),
        ("dense SDPA (flash)", lambda: F.scaled_dot_product_attention(q, k, k)),
    ]
    print(f"{torch.cuda.get_device_name()}; torch {torch.__version__}; one call, batch {BATCH}, {HEADS} heads, "
          f"{LENGTH} tokens, window {2 * C}, {slots} global slots")
    for name, function in forms:
        print(f"{milliseconds_per_call(function):8.3f} ms  {name}", flush=True)


if __name__ == "__main__":
    main()
