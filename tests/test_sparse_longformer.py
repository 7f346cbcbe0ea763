"""The sparse-map Longformer against Transformers' Longformer, its two attention backends against each other, and the
TF-IDF / PMI statistics and selections against direct, slow computations (thesis Eq. 4.3, 4.4)."""

import contextlib
import math
from collections import Counter

import numpy as np
import pytest
import torch
from safetensors.torch import load_file, save_file
from transformers import LongformerConfig, LongformerForSequenceClassification, LongformerModel

from fresh_process import run_without_hf_longdoc
from hf_longdoc import SparseLongformerConfig, SparseLongformerForSequenceClassification, SparseLongformerModel

TINY = dict(vocab_size=120, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=37,
            attention_window=8, max_position_embeddings=4098, hidden_dropout_prob=0.0,
            attention_probs_dropout_prob=0.0, pad_token_id=1, bos_token_id=0, eos_token_id=2, sep_token_id=2)


def _documents(lengths, vocab=120, seed=0, first_id=3):
    generator = torch.Generator().manual_seed(seed)
    n = max(lengths)
    input_ids = torch.full((len(lengths), n), TINY["pad_token_id"], dtype=torch.long)
    attention_mask = torch.zeros_like(input_ids)
    for row, length in enumerate(lengths):
        input_ids[row, :length] = torch.randint(first_id, vocab, (length,), generator=generator)
        input_ids[row, 0] = TINY["bos_token_id"]
        attention_mask[row, :length] = 1
    return input_ids, attention_mask


def _scattered_globals(attention_mask, count, seed=0):
    generator = torch.Generator().manual_seed(seed)
    mask = torch.zeros_like(attention_mask)
    for row in range(mask.shape[0]):
        real = int(attention_mask[row].sum())
        mask[row, torch.randperm(real - 1, generator=generator)[: min(count, real - 1)] + 1] = 1
    mask[:, 0] = 1
    return mask


# --- Transformers' Longformer, exactly ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def longformer_checkpoint(tmp_path_factory):
    """A tiny Transformers Longformer classifier saved as a checkpoint (in place of allenai/longformer-base-4096)."""
    torch.manual_seed(0)
    config = LongformerConfig(**{k: v for k, v in TINY.items()}, num_labels=3)
    model = LongformerForSequenceClassification(config).eval()
    folder = tmp_path_factory.mktemp("longformer")
    model.save_pretrained(folder)
    return folder, model


def test_longformer_checkpoint_loads_every_weight_unchanged(longformer_checkpoint):
    folder, reference = longformer_checkpoint
    model = SparseLongformerForSequenceClassification.from_pretrained(folder)
    ours = model.state_dict()
    for name, tensor in reference.state_dict().items():
        assert torch.equal(ours[name], tensor), name
    assert {name for name in ours if name not in reference.state_dict()} == {
        f"longformer.selector.{name}" for name in ("idf", "pmi_pair_keys", "pmi_pair_values", "idf_num_documents",
                                                   "pmi_num_documents")}
    base = SparseLongformerModel.from_pretrained(folder)  # the encoder alone, Longformer's names without the prefix
    torch.testing.assert_close(base.embeddings.word_embeddings.weight,
                               reference.longformer.embeddings.word_embeddings.weight, rtol=0, atol=0)


@pytest.mark.parametrize("backend", ["longformer", "blocked", "flex"])
def test_cls_selector_equals_transformers_longformer(longformer_checkpoint, backend):
    folder, reference = longformer_checkpoint
    model = SparseLongformerForSequenceClassification.from_pretrained(folder, global_selector="cls",
                                                                      attention_backend=backend).eval()
    input_ids, attention_mask = _documents([45, 30, 7, 16])
    with torch.no_grad():
        expected = reference(input_ids, attention_mask=attention_mask).logits
        logits = model(input_ids, attention_mask=attention_mask).logits
    assert (logits - expected).abs().max() <= 1e-6


def test_given_global_mask_equals_transformers_longformer_model(longformer_checkpoint):
    folder, reference = longformer_checkpoint
    reference_base = LongformerModel.from_pretrained(folder).eval()
    model = SparseLongformerModel.from_pretrained(folder, attention_backend="longformer").eval()
    model.pooler.load_state_dict(reference_base.pooler.state_dict())  # the classifier checkpoint has no pooler
    input_ids, attention_mask = _documents([45, 30, 7])
    global_mask = _scattered_globals(attention_mask, 5)
    with torch.no_grad():
        expected = reference_base(input_ids, attention_mask=attention_mask, global_attention_mask=global_mask)
        ours = model(input_ids, attention_mask=attention_mask, global_attention_mask=global_mask)
    torch.testing.assert_close(ours.last_hidden_state, expected.last_hidden_state, rtol=0, atol=1e-6)
    torch.testing.assert_close(ours.pooler_output, expected.pooler_output, rtol=0, atol=1e-6)


# --- blocked backend == longformer backend ---------------------------------------------------------------------------


def _backend_outputs_and_gradients(model, backend, input_ids, attention_mask, global_mask):
    model.config.attention_backend = backend
    model.zero_grad()
    embeds = model.longformer.embeddings.word_embeddings(input_ids).detach().requires_grad_()
    logits = model(inputs_embeds=embeds, attention_mask=attention_mask, global_attention_mask=global_mask).logits
    (logits * torch.arange(1, logits.shape[1] + 1)).sum().backward()
    return logits, embeds.grad, {name: p.grad.clone() for name, p in model.named_parameters() if p.grad is not None}


BACKEND_CASES = [
    (512, [1500, 1100], 128),  # the setting: window 512, 128 scattered global tokens, padding
    (8, [45, 30, 7], 5),
    (8, [40, 3], 0),  # no global token at all (an explicit all-zero mask)
    (6, [12, 9], 20),  # every real token global
    (64, [20, 11], 3),  # documents shorter than one window
]


@pytest.mark.parametrize("window, lengths, num_global", BACKEND_CASES)
def test_blocked_backend_matches_longformer_outputs_and_gradients(window, lengths, num_global):
    torch.manual_seed(0)
    config = SparseLongformerConfig(**{**TINY, "attention_window": window}, num_labels=3)
    model = SparseLongformerForSequenceClassification(config).train()  # dropout is 0: train mode, same numbers
    input_ids, attention_mask = _documents(lengths)
    global_mask = _scattered_globals(attention_mask, num_global) if num_global else torch.zeros_like(attention_mask)
    expected = _backend_outputs_and_gradients(model, "longformer", input_ids, attention_mask, global_mask)
    got = _backend_outputs_and_gradients(model, "blocked", input_ids, attention_mask, global_mask)
    torch.testing.assert_close(got[0], expected[0], rtol=0, atol=1e-4)
    real = attention_mask.bool()
    torch.testing.assert_close(got[1][real], expected[1][real], rtol=0, atol=1e-4)
    assert expected[2].keys() == got[2].keys()
    for name in expected[2]:
        torch.testing.assert_close(got[2][name], expected[2][name], rtol=1e-4, atol=1e-4, msg=name)


@pytest.mark.parametrize("group_elements", [1, 1 << 40])  # one query block per call; all blocks in one call (a GPU's)
def test_blocked_backend_gives_the_same_numbers_whatever_its_group_size(group_elements, monkeypatch):
    from hf_longdoc.modeling.sparse_longformer import modeling_sparse_longformer as modeling

    torch.manual_seed(0)
    config = SparseLongformerConfig(**{**TINY, "attention_window": 8}, num_labels=3)
    model = SparseLongformerForSequenceClassification(config).train()
    input_ids, attention_mask = _documents([45, 30, 7])
    global_mask = _scattered_globals(attention_mask, 5)
    expected = _backend_outputs_and_gradients(model, "longformer", input_ids, attention_mask, global_mask)
    calls = []
    sdpa = torch.nn.functional.scaled_dot_product_attention
    monkeypatch.setattr(torch.nn.functional, "scaled_dot_product_attention",
                        lambda *args, **kwargs: calls.append(1) or sdpa(*args, **kwargs))
    monkeypatch.setitem(modeling.GROUP_ELEMENTS, "cpu", group_elements)
    got = _backend_outputs_and_gradients(model, "blocked", input_ids, attention_mask, global_mask)
    blocks = 48 // 4  # 45 tokens padded to the window 8, in blocks of c = 4
    per_layer = len(calls) // config.num_hidden_layers - 1  # the window calls of a layer (its last: the global rows)
    assert per_layer == (blocks if group_elements == 1 else 1), len(calls)
    torch.testing.assert_close(got[0], expected[0], rtol=0, atol=1e-4)
    for name in expected[2]:
        torch.testing.assert_close(got[2][name], expected[2][name], rtol=1e-4, atol=1e-4, msg=name)


@contextlib.contextmanager
def _kept_for_backward(model):
    """A dict that fills, while the block runs, with the bytes autograd keeps for the backward pass (each storage
    once, the parameters left out): `sum(kept.values())`."""
    parameters = {p.untyped_storage().data_ptr() for p in model.parameters()}
    kept = {}

    def keep(tensor):
        storage = tensor.untyped_storage()
        if storage.data_ptr() not in parameters:
            kept[storage.data_ptr()] = storage.nbytes()
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(keep, lambda tensor: tensor):
        yield kept


def _saved_bytes_and_gradients(model, checkpointing, input_ids, attention_mask, global_mask):
    """The bytes a training step keeps for its backward pass (`_kept_for_backward`), and the gradients."""
    model.config.attention_checkpointing = checkpointing
    model.zero_grad()
    torch.manual_seed(1)  # the attention dropout's draws
    with _kept_for_backward(model) as kept:
        logits = model(input_ids, attention_mask=attention_mask, global_attention_mask=global_mask).logits
    (logits * torch.arange(1, logits.shape[1] + 1)).sum().backward()
    return sum(kept.values()), {name: p.grad.clone() for name, p in model.named_parameters() if p.grad is not None}


@pytest.mark.parametrize("dropout", [0.0, 0.3])
def test_attention_checkpointing_keeps_less_for_the_same_gradients(dropout):
    """`attention_checkpointing` recomputes the attention in the backward pass: the same gradients (the dropout draws
    the same mask again), and far less kept between the passes (the gathered windows and the global keys)."""
    torch.manual_seed(0)
    config = SparseLongformerConfig(**{**TINY, "attention_window": 16, "attention_probs_dropout_prob": dropout},
                                    num_labels=3, attention_backend="blocked")
    model = SparseLongformerForSequenceClassification(config).train()
    input_ids, attention_mask = _documents([300, 170])
    global_mask = _scattered_globals(attention_mask, 20)
    kept, expected = _saved_bytes_and_gradients(model, False, input_ids, attention_mask, global_mask)
    kept_recomputing, got = _saved_bytes_and_gradients(model, True, input_ids, attention_mask, global_mask)
    assert kept_recomputing < 0.7 * kept, (kept_recomputing, kept)
    for name in expected:
        torch.testing.assert_close(got[name], expected[name], rtol=1e-5, atol=1e-6, msg=name)


def _activation_bytes(model, **inputs):
    """Bytes a training-mode forward keeps for the backward pass (`_kept_for_backward`)."""
    with _kept_for_backward(model) as kept:
        model.train()(**inputs)
    return sum(kept.values())


def test_with_attention_checkpointing_a_step_keeps_what_berts_keeps(monkeypatch):
    """Issue 53's memory goal, counted on the CPU: with its attention recomputed, a training step of the sparse
    Longformer keeps for the backward pass what Transformers' BERT of the same size keeps at the same length, and one
    window mask that every layer shares (its global rows keep a (b, n) choice, not the window output, and its
    projections no concatenated weight copy)."""
    from transformers import BertConfig, BertForSequenceClassification

    from hf_longdoc.modeling.sparse_longformer import modeling_sparse_longformer as modeling

    masks, make = [], modeling.additive_mask
    monkeypatch.setattr(modeling, "additive_mask", lambda *args: masks.append(make(*args)) or masks[-1])

    sizes = dict(vocab_size=120, hidden_size=256, num_hidden_layers=2, num_attention_heads=4, intermediate_size=512,
                 hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, pad_token_id=1, num_labels=2)
    input_ids, attention_mask = _documents([512, 512])
    labels = torch.tensor([0, 1])
    bert = BertForSequenceClassification(BertConfig(**sizes, max_position_embeddings=512,
                                                    attn_implementation="sdpa"))
    sparse = SparseLongformerForSequenceClassification(SparseLongformerConfig(
        **sizes, attention_window=64, max_position_embeddings=520, attention_backend="blocked",
        attention_checkpointing=True))
    inputs = dict(input_ids=input_ids, attention_mask=attention_mask, labels=labels)
    kept_by_bert = _activation_bytes(bert, **inputs)
    kept = _activation_bytes(sparse, **inputs, global_attention_mask=_scattered_globals(attention_mask, 16))
    (mask,) = masks  # one for both layers
    assert kept - mask.untyped_storage().nbytes() <= kept_by_bert, (kept, mask.untyped_storage().nbytes(), kept_by_bert)
    sparse.config.attention_checkpointing = False  # what recomputing saves: the gathered windows, the global keys
    assert _activation_bytes(sparse, **inputs, global_attention_mask=_scattered_globals(attention_mask, 16)) > \
        1.3 * kept_by_bert


def test_the_window_mask_is_built_once_per_forward_and_let_go_after_it(monkeypatch):
    from hf_longdoc.modeling.sparse_longformer import modeling_sparse_longformer as modeling

    built, build = [], modeling.blocked_mask
    monkeypatch.setattr(modeling, "blocked_mask", lambda *args: built.append(1) or build(*args))
    model = SparseLongformerForSequenceClassification(SparseLongformerConfig(
        **TINY, num_labels=2, global_selector="cls", attention_backend="blocked")).eval()
    input_ids, attention_mask = _documents([40, 20])
    with torch.no_grad():
        model(input_ids, attention_mask=attention_mask)
        model(input_ids, attention_mask=attention_mask)
    assert len(built) == 2  # one per forward, for both layers
    patterns = model.longformer.patterns.local
    assert patterns.values == {} and patterns.key is None


def test_threads_forwarding_one_model_at_once_each_read_their_own_window_mask():
    """`predict` and the head stage run forwards of one model on several threads (`concurrent_inference`): each
    forward must read the masks built from its own batch. A cache shared by the threads handed one forward another's
    mask, of another length (a shape error in CI, 20 of these 160 forwards with it), or wrong numbers. Threads switch
    every microsecond here, so the interleavings that broke it come within the second the test takes."""
    import sys
    import threading

    model = SparseLongformerForSequenceClassification(SparseLongformerConfig(
        **{**TINY, "num_hidden_layers": 4}, num_labels=2, global_selector="cls", attention_backend="blocked")).eval()
    batches = [_documents([8 * (k + 1) + 3, 5], seed=k) for k in range(6)]
    with torch.no_grad():
        alone = [model(ids, attention_mask=mask).logits for ids, mask in batches]
    failures = []

    def forwards(thread):
        for step in range(40):
            k = (thread + step) % len(batches)
            try:
                with torch.no_grad():
                    logits = model(batches[k][0], attention_mask=batches[k][1]).logits
                if not torch.allclose(logits, alone[k], atol=1e-5):
                    failures.append(f"batch {k}: other logits")
            except RuntimeError as error:
                failures.append(f"batch {k}: {error}")

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        threads = [threading.Thread(target=forwards, args=(thread,)) for thread in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        sys.setswitchinterval(interval)
    assert not failures, failures[:3]


def test_attention_checkpointing_is_the_devices_choice_by_default(monkeypatch):
    from hf_longdoc.modeling.sparse_longformer import modeling_sparse_longformer as modeling

    config = SparseLongformerConfig(**TINY)
    assert config.attention_checkpointing is None
    needs_grad = torch.zeros(1, 2, 3, requires_grad=True)
    assert not modeling.recomputes_attention(config, needs_grad)  # the CPU's choice: off
    monkeypatch.setitem(modeling.RECOMPUTES_ATTENTION, "cpu", True)
    assert modeling.recomputes_attention(config, needs_grad)
    assert not modeling.recomputes_attention(config, needs_grad.detach())  # nothing to recompute for
    with torch.no_grad():
        assert not modeling.recomputes_attention(config, needs_grad)
    config.attention_checkpointing = False
    assert not modeling.recomputes_attention(config, needs_grad)
    with pytest.raises(ValueError, match="attention_checkpointing"):
        SparseLongformerConfig(**TINY, attention_checkpointing="yes")


@pytest.mark.parametrize("window, lengths, num_global", BACKEND_CASES + [
    (8, [300, 200], 140),  # more global tokens than one FlexAttention block: a prefix of two blocks
])
def test_flex_backend_matches_longformer_outputs(window, lengths, num_global):
    """FlexAttention over [global slots | keys] computes Longformer's attention: the same logits and final states
    (forward only: FlexAttention has no CPU backward; the GPU check covers training)."""
    torch.manual_seed(0)
    config = SparseLongformerConfig(**{**TINY, "attention_window": window}, num_labels=3)
    model = SparseLongformerForSequenceClassification(config).eval()
    input_ids, attention_mask = _documents(lengths)
    global_mask = _scattered_globals(attention_mask, num_global) if num_global else torch.zeros_like(attention_mask)
    outputs = {}
    for backend in ("longformer", "flex"):
        model.config.attention_backend = backend
        with torch.no_grad():
            outputs[backend] = model.longformer(input_ids, attention_mask=attention_mask,
                                                global_attention_mask=global_mask).last_hidden_state
    real = attention_mask.bool()
    torch.testing.assert_close(outputs["flex"][real], outputs["longformer"][real], rtol=0, atol=1e-5)


def test_flex_block_mask_is_sparse_and_built_once_per_forward(monkeypatch):
    """The block mask skips the blocks outside the band and the prefix (at 2,048 tokens, window 256, far fewer than
    all), and the layers share one mask per forward."""
    from hf_longdoc.modeling.sparse_longformer import modeling_sparse_longformer as modeling

    built = []
    original = modeling.flex_block_mask
    monkeypatch.setattr(modeling, "flex_block_mask", lambda *args: built.append(original(*args)) or built[-1])
    torch.manual_seed(0)
    config = SparseLongformerConfig(**{**TINY, "attention_window": 256, "max_position_embeddings": 2100},
                                    attention_backend="flex", num_labels=2)
    model = SparseLongformerForSequenceClassification(config).eval()
    input_ids, attention_mask = _documents([2048])
    global_mask = _scattered_globals(attention_mask, 40)
    with torch.no_grad():
        model(input_ids, attention_mask=attention_mask, global_attention_mask=global_mask)
    assert len(built) == 1 and config.num_hidden_layers > 1
    blocks = built[0].to_dense()  # (1, 1, query blocks, key blocks) of 0/1, the same for every document and head
    assert blocks.shape[-2:] == (2048 // 128, (128 + 2048) // 128)
    assert blocks.float().mean() < 0.4  # the band (≈ 3-4 key blocks of 17) and the prefix block
    # every block holding an allowed pair is in it: the blocks `create_block_mask` finds by evaluating every pair
    from torch.nn.attention.flex_attention import create_block_mask, create_mask

    mask_mod = built[0].mask_mod
    needed = create_block_mask(mask_mod, B=1, H=None, Q_LEN=2048, KV_LEN=128 + 2048, device="cpu").to_dense()
    assert needed.sum() > 0 and bool((blocks.bool() | ~needed.bool()).all())
    # a block marked full (the kernel skips `mask_mod` there) allows every pair in it
    pairs = create_mask(mask_mod, 1, 1, 2048, 128 + 2048, device="cpu")[0, 0]  # (n, G' + n) bool
    full_blocks = built[0].full_kv_num_blocks[0, 0]
    assert int(full_blocks.sum()) > 0  # the window's inner blocks (2048 tokens, c = 128: each block with itself)
    for query_block in range(2048 // 128):
        for key_block in built[0].full_kv_indices[0, 0, query_block, : full_blocks[query_block]].tolist():
            rows = pairs[query_block * 128: (query_block + 1) * 128, key_block * 128: (key_block + 1) * 128]
            assert bool(rows.all()), (query_block, key_block)


@pytest.mark.parametrize("backend, device, training, dropout, needs_grad, expected", [
    ("auto", "cpu", False, 0.0, False, "blocked"),
    ("auto", "cuda", False, 0.0, False, "blocked"),  # reading: blocked, faster there (AUTO_BACKEND)
    ("auto", "cuda", True, 0.0, True, "flex"),  # training: flex, within dense BERT's memory
    ("auto", "cuda", True, 0.1, True, "blocked"),  # FlexAttention has no dropout
    ("auto", "cpu", True, 0.0, True, "blocked"),
    ("flex", "cuda", False, 0.1, False, "flex"),
    ("flex", "cuda", True, 0.0, True, "flex"),
    ("flex", "cuda", True, 0.1, True, "blocked"),  # FlexAttention has no dropout
    ("flex", "cpu", False, 0.0, False, "flex"),
    ("flex", "cpu", True, 0.0, True, "blocked"),  # no CPU backward
    ("blocked", "cuda", False, 0.0, False, "blocked"),
    ("longformer", "cuda", True, 0.0, True, "longformer"),
])
def test_attention_backend_choice(backend, device, training, dropout, needs_grad, expected, monkeypatch):
    from hf_longdoc.modeling.sparse_longformer import modeling_sparse_longformer as modeling
    from hf_longdoc.modeling.sparse_longformer.modeling_sparse_longformer import attention_backend_for

    monkeypatch.setattr(modeling, "compiles_flex", lambda device: device.type == "cuda")  # Triton, as CUDA builds have
    config = SparseLongformerConfig(**{**TINY, "attention_probs_dropout_prob": dropout}, attention_backend=backend)
    assert attention_backend_for(config, torch.device(device), training, needs_grad) == expected


def test_a_backend_set_on_the_config_afterwards_is_checked():
    """`model.config.attention_backend = "Flex"` (any value not a backend) is refused at the next forward instead of
    running `blocked` silently."""
    model = SparseLongformerForSequenceClassification(SparseLongformerConfig(**TINY, global_selector="cls",
                                                                             num_labels=2)).eval()
    input_ids, attention_mask = _documents([40, 20])
    model.config.attention_backend = "Flex"
    with pytest.raises(ValueError, match="attention_backend"):
        model(input_ids, attention_mask=attention_mask)


def test_auto_backend_needs_a_compiler_for_flex(monkeypatch):
    """Without Triton (a CPU build of PyTorch, or a platform Triton does not support) `auto` never picks `flex`,
    which would run eagerly, computing every score."""
    from hf_longdoc.modeling.sparse_longformer import modeling_sparse_longformer as modeling

    monkeypatch.setattr(modeling.importlib.util, "find_spec", lambda name: None)
    modeling.has_triton.cache_clear()  # looked up once per process: here again, without Triton
    try:
        assert not modeling.compiles_flex(torch.device("cuda"))
        config = SparseLongformerConfig(**TINY)
        assert modeling.attention_backend_for(config, torch.device("cuda"), True, True) == "blocked"
        assert not modeling.compiles_flex(torch.device("cpu"))
    finally:
        modeling.has_triton.cache_clear()  # the next lookup sees the real installation


def test_auto_backend_trains_on_the_cpu_through_blocked():
    """The default (`auto`) on the CPU is the blocked backend, in training and at inference; `flex` asked for on
    the CPU still trains (through `blocked`, logged)."""
    torch.manual_seed(0)
    model = SparseLongformerForSequenceClassification(SparseLongformerConfig(**TINY, global_selector="cls",
                                                                             num_labels=2))
    assert model.config.attention_backend == "auto" and model.attention_backend_for(training=True) == "blocked"
    model.config.attention_backend = "flex"
    input_ids, attention_mask = _documents([40, 20])
    loss = model(input_ids, attention_mask=attention_mask, labels=torch.tensor([0, 1])).loss
    loss.backward()
    assert model.classifier.out_proj.weight.grad is not None


def test_mean_pooling_reads_the_mean_of_each_documents_real_token_states():
    """`classifier_pooling="mean"`: the head reads each document's mean final state over its real tokens (ModernBERT's
    definition, written out per document here), so padding a document in a batch leaves its logits unchanged; "cls"
    reads the [CLS] state, as Longformer does."""
    torch.manual_seed(0)
    model = SparseLongformerForSequenceClassification(
        SparseLongformerConfig(**TINY, global_selector="first_n", num_global_tokens=3, num_labels=3,
                               classifier_pooling="mean")).eval()
    input_ids, attention_mask = _documents([45, 30, 7])
    with torch.no_grad():
        batch = model(input_ids=input_ids, attention_mask=attention_mask).logits
        for row, length in enumerate(attention_mask.sum(dim=1).tolist()):
            states = model.longformer(input_ids[row:row + 1, :length]).last_hidden_state[0]  # (length, d)
            expected = model.classifier(states.mean(dim=0)[None, None])
            torch.testing.assert_close(batch[row:row + 1], expected, rtol=0, atol=1e-5)
        model.config.classifier_pooling = "cls"
        states = model.longformer(input_ids, attention_mask=attention_mask).last_hidden_state
        torch.testing.assert_close(model(input_ids=input_ids, attention_mask=attention_mask).logits,
                                   model.classifier(states))
    with pytest.raises(ValueError, match="classifier_pooling"):
        SparseLongformerConfig(classifier_pooling="max")


def test_gated_pooling_weights_each_real_token_by_its_gate_and_starts_as_the_mean(tmp_path):
    """`classifier_pooling="gated"`: the head reads Σ_i σ(w·LN(h_i) + b) h_i / Σ_i σ(...) over each document's real
    tokens (written out per document here); with the gate's initial w = 0, b = 0 that is the mean, and the gate is a
    head parameter that saves and loads with the model."""
    torch.manual_seed(0)
    config = dict(**TINY, global_selector="first_n", num_global_tokens=3, num_labels=3)
    model = SparseLongformerForSequenceClassification(SparseLongformerConfig(**config, classifier_pooling="gated"))
    model.eval()
    input_ids, attention_mask = _documents([45, 30, 7])
    with torch.no_grad():
        assert not model.token_gate.weight.any() and not model.token_gate.bias.any()
        model.config.classifier_pooling = "mean"
        as_mean = model(input_ids=input_ids, attention_mask=attention_mask).logits
        model.config.classifier_pooling = "gated"
        torch.testing.assert_close(model(input_ids=input_ids, attention_mask=attention_mask).logits, as_mean)
        torch.nn.init.normal_(model.token_gate.weight, std=0.5)
        torch.nn.init.constant_(model.token_gate.bias, -0.3)
        batch = model(input_ids=input_ids, attention_mask=attention_mask).logits
        w, b = model.token_gate.weight, model.token_gate.bias[0]
        for row, length in enumerate(attention_mask.sum(dim=1).tolist()):
            states = model.longformer(input_ids[row:row + 1, :length]).last_hidden_state[0]  # (length, d)
            normed = (states - states.mean(-1, keepdim=True)) / torch.sqrt(states.var(-1, unbiased=False, keepdim=True)
                                                                           + model.config.layer_norm_eps)
            gates = torch.sigmoid(normed @ w + b)  # (length,); the LayerNorm's own weight 1 and bias 0
            expected = model.classifier(((gates[:, None] * states).sum(0) / gates.sum())[None, None])
            torch.testing.assert_close(batch[row:row + 1], expected, rtol=0, atol=1e-5)
        assert not torch.allclose(batch, as_mean, atol=1e-3)  # the gates changed what the head reads
    assert "token_gate.weight" in dict(model.named_parameters())
    model.save_pretrained(tmp_path)
    loaded = SparseLongformerForSequenceClassification.from_pretrained(tmp_path).eval()
    with torch.no_grad():
        torch.testing.assert_close(loaded(input_ids=input_ids, attention_mask=attention_mask).logits, batch)
    assert SparseLongformerForSequenceClassification(SparseLongformerConfig(**config)).token_gate is None


def test_mean_pooling_reads_what_the_model_reads_of_an_over_long_document():
    """A document longer than the positions is cut (with a warning) before the mean, as before [CLS], and as the
    tokenizer's truncation=True cuts it (its first 39 tokens and its last); a global mask value of 2 still counts one
    token once."""
    torch.manual_seed(0)
    model = SparseLongformerForSequenceClassification(SparseLongformerConfig(
        **{**TINY, "max_position_embeddings": 42}, global_selector="first_n", num_global_tokens=3,
        classifier_pooling="mean")).eval()  # reads 42 - pad id 1 - 1 = 40 tokens
    input_ids, attention_mask = _documents([45, 30])
    truncated = input_ids[:, :40].clone()
    truncated[0, 39] = input_ids[0, 44]  # the long row's last token, where truncation=True keeps the closing one
    with torch.no_grad():
        cut = model(input_ids=truncated, attention_mask=attention_mask[:, :40]).logits
        torch.testing.assert_close(model(input_ids=input_ids, attention_mask=attention_mask).logits, cut)
        torch.testing.assert_close(model(input_ids=truncated, attention_mask=2 * attention_mask[:, :40]).logits, cut)


def test_blocked_backend_never_builds_a_dense_mask(monkeypatch):
    """No tensor with n × n elements is allocated on the blocked path (Transformers' path builds (b, 1, n, n))."""
    torch.manual_seed(0)
    model = SparseLongformerModel(SparseLongformerConfig(**{**TINY, "attention_window": 64}, global_selector="first_n",
                                                         num_global_tokens=8)).eval()
    input_ids, attention_mask = _documents([1024])
    n = input_ids.shape[1]
    largest = []
    original = torch.nn.functional.scaled_dot_product_attention

    def spy(q, k, v, attn_mask=None, **kwargs):
        largest.append(attn_mask.numel())
        return original(q, k, v, attn_mask=attn_mask, **kwargs)

    monkeypatch.setattr(torch.nn.functional, "scaled_dot_product_attention", spy)
    with torch.no_grad():
        model(input_ids, attention_mask=attention_mask)
    assert largest and max(largest) < n * n / 4


# --- statistics and selection against slow references ---------------------------------------------------------------

PAD, CLS, SEP = 1, 0, 2


def _slow_idf(documents, vocab, excluded):
    df = Counter()
    for doc in documents:
        df.update({t for t in doc if t not in excluded})
    return [math.log2(len(documents) / max(df[t], 1)) for t in range(vocab)]


def _slow_pmi(documents, window, excluded, min_count):
    pairs, tokens = Counter(), Counter()
    for doc in documents:
        kept = [t for t in doc if t not in excluded]
        tokens.update(kept)
        for i in range(len(kept)):
            for j in range(i + 1, min(i + window, len(kept))):
                pairs[kept[i], kept[j]] += 1
    total_pairs, total_tokens = sum(pairs.values()), sum(tokens.values())
    def p(token):
        return tokens[token] / total_tokens

    return {pair: math.log2((count / total_pairs) / (p(pair[0]) * p(pair[1])))
            for pair, count in pairs.items() if count >= min_count}


def _corpus(seed=0, documents=40, vocab=30):
    rng = np.random.default_rng(seed)
    corpus = []
    for _ in range(documents):
        length = int(rng.integers(5, 60))
        body = rng.zipf(1.3, size=length) % (vocab - 3) + 3  # skewed, so idf and PMI vary
        corpus.append([CLS] + body.tolist() + [SEP])
    return corpus


def _selector_model(**overrides):
    config = SparseLongformerConfig(**{**TINY, "vocab_size": 30, **overrides})
    return SparseLongformerModel(config).eval()


def test_fitted_idf_and_pmi_equal_direct_counting():
    corpus = _corpus()
    model = _selector_model(pmi_window=4, pmi_min_count=2)
    report = model.fit_global_selector(corpus, batch_documents=7, progress=False)  # several batches, merged
    excluded = {PAD, CLS, SEP}
    np.testing.assert_allclose(model.selector.idf.numpy(), _slow_idf(corpus, 30, excluded), rtol=1e-6)
    expected = _slow_pmi(corpus, 4, excluded, 2)
    keys = model.selector.pmi_pair_keys.tolist()
    assert keys == sorted(keys) and keys[-1] == torch.iinfo(torch.long).max  # the sentinel ends them
    keys = keys[:-1]
    assert model.config.pmi_num_pairs == len(keys) == len(expected) == report["pairs_kept"]
    got = {(key // 30, key % 30): value for key, value in zip(keys, model.selector.pmi_pair_values.tolist())}
    assert got.keys() == expected.keys()
    for pair, value in expected.items():
        assert got[pair] == pytest.approx(value, abs=1e-5)


def test_pmi_keeps_at_most_max_pairs_the_most_frequent():
    corpus = _corpus()
    model = _selector_model(pmi_window=4, pmi_min_count=1, pmi_max_pairs=10)
    model.fit_global_selector(corpus, statistics=("pmi",), progress=False)
    assert model.selector.pmi_pair_keys.numel() == 10 + 1  # and the sentinel
    counts = Counter()
    for doc in corpus:
        kept = [t for t in doc if t not in {PAD, CLS, SEP}]
        counts.update((kept[i], kept[j]) for i in range(len(kept)) for j in range(i + 1, min(i + 4, len(kept))))
    tenth = sorted(counts.values(), reverse=True)[9]
    assert all(counts[key // 30, key % 30] >= tenth for key in model.selector.pmi_pair_keys.tolist()[:-1])


def _pmi_table(model):
    vocab = model.config.vocab_size
    return {(key // vocab, key % vocab): value for key, value in zip(model.selector.pmi_pair_keys.tolist()[:-1],
                                                                    model.selector.pmi_pair_values.tolist())}


def _slow_pairs(doc, real, model):
    """The thesis' pairs of one document, from the text: its counted tokens (real, not excluded) in order, each with
    the next `pmi_window` - 1 counted tokens; (position i, position j, PMI) for the pairs the fitted table holds."""
    excluded = set(model.selector.excluded_ids())
    kept = [i for i in range(len(doc)) if real[i] and doc[i] not in excluded]
    table = _pmi_table(model)
    return [(kept[a], kept[b], table[doc[kept[a]], doc[kept[b]]])
            for a in range(len(kept)) for b in range(a + 1, min(a + model.config.pmi_window, len(kept)))
            if (doc[kept[a]], doc[kept[b]]) in table]


def _slow_scores(doc, real, selector, model):
    excluded = set(model.selector.excluded_ids())
    counted = [bool(real[i]) and doc[i] not in excluded for i in range(len(doc))]
    if selector == "tfidf":
        n = max(sum(counted), 1)
        idf = model.selector.idf.tolist()
        return [sum(1 for j in range(len(doc)) if counted[j] and doc[j] == doc[i]) / n * idf[doc[i]] for i in
                range(len(doc))], counted
    scores = [0.0] * len(doc)
    for i, j, pmi in _slow_pairs(doc, real, model):
        scores[i] += pmi
        scores[j] += pmi
    return scores, counted


def _slow_selection(doc, real, selector, model):
    """[CLS] plus `num_global_tokens` positions: the top scores (tfidf, pmi "sum"), or the thesis' pairs: the best
    pairs' tokens, pair by pair, each position and (unique) each id once, until the slots are full."""
    chosen, seen = {0}, set()
    if selector == "pmi" and model.config.pmi_selection == "pairs":
        pairs = sorted(_slow_pairs(doc, real, model), key=lambda pair: (-pair[2], pair[0], pair[1]))
        ranked = [position for i, j, _ in pairs for position in (i, j)]
    else:
        scores, counted = _slow_scores(doc, real, selector, model)
        ranked = sorted((i for i in range(len(doc)) if counted[i]), key=lambda i: (-scores[i], i))
    for i in ranked:
        if len(chosen) > model.config.num_global_tokens:
            break
        if i == 0 or i in chosen or doc[i] in seen:
            continue
        seen.add(doc[i])
        chosen.add(i)
    return chosen


def _padded(documents):
    n = max(len(d) for d in documents)
    input_ids = torch.full((len(documents), n), PAD)
    attention_mask = torch.zeros((len(documents), n), dtype=torch.long)
    for row, doc in enumerate(documents):
        input_ids[row, : len(doc)] = torch.tensor(doc)
        attention_mask[row, : len(doc)] = 1
    return input_ids, attention_mask


@pytest.mark.parametrize("selector,pmi_selection", [("tfidf", "pairs"), ("pmi", "sum"), ("pmi", "pairs")])
def test_scores_and_selection_equal_direct_computation(selector, pmi_selection):
    model = _selector_model(pmi_window=4, pmi_min_count=1, num_global_tokens=6, global_selector=selector,
                            pmi_selection=pmi_selection)
    model.fit_global_selector(_corpus(seed=1), progress=False)
    documents = _corpus(seed=2, documents=5)
    input_ids, attention_mask = _padded(documents)
    real = attention_mask.bool()
    counted = model.selector.counted_tokens(input_ids, real)
    chosen = model.select_global_tokens(input_ids, attention_mask)
    for row in range(len(documents)):
        padded = input_ids[row].tolist()
        if pmi_selection == "sum":
            scores = getattr(model.selector, f"{selector}_scores")(input_ids, counted)
            expected_scores, _ = _slow_scores(padded, real[row].tolist(), selector, model)
            np.testing.assert_allclose(scores[row][counted[row]].numpy(),
                                       np.array(expected_scores)[counted[row].numpy()], rtol=1e-5, atol=1e-5)
        assert set(chosen[row].nonzero().flatten().tolist()) == _slow_selection(padded, real[row].tolist(), selector,
                                                                                model)


def test_the_thesis_pair_selection_and_the_sum_of_pairs_pick_different_tokens():
    """Tokens with many moderate pairs (the 10 12 11 12 13 ... run) win the sum; the rarest collocation (20 21) wins
    the pairs. Each against the direct computation."""
    corpus = [[CLS, 10, 12, 11, 12, 13, 12, 14, 12, SEP]] * 6 + [[CLS, 20, 21, 15, 16, SEP]] * 2 + \
        [[CLS, 15, 16, 17, 18, 19, SEP]] * 6
    document = [CLS, 10, 12, 11, 12, 13, 12, 14, 12, 3, 20, 21, 3, 15, 16, SEP]
    picks = {}
    for pmi_selection in ("pairs", "sum"):
        model = _selector_model(pmi_window=3, pmi_min_count=1, num_global_tokens=2, global_selector="pmi",
                                pmi_selection=pmi_selection)
        model.fit_global_selector(corpus, progress=False)
        chosen = model.select_global_tokens(torch.tensor([document]))[0]
        picks[pmi_selection] = {document[i] for i in chosen.nonzero().flatten().tolist()} - {CLS}
        assert set(chosen.nonzero().flatten().tolist()) == _slow_selection(document, [1] * len(document), "pmi",
                                                                           model)
    assert picks["pairs"] == {20, 21}
    assert picks["sum"] & {10, 11, 12, 13, 14} and not picks["sum"] & picks["pairs"]


def test_every_pair_counted_while_fitting_gets_its_fitted_pmi_when_scored():
    """Excluded tokens (specials, punctuation) inside the window: fitting skips them, and so does scoring."""
    rng = np.random.default_rng(3)
    punctuation = [3, 4]
    corpus = []
    for _ in range(30):
        body = (rng.zipf(1.4, size=int(rng.integers(8, 40))) % 25 + 5).tolist()
        for at in rng.choice(len(body), size=len(body) // 3):
            body[at] = int(rng.choice(punctuation))
        corpus.append([CLS] + body + [SEP])
    model = _selector_model(pmi_window=4, pmi_min_count=1, excluded_token_ids=[PAD, CLS, SEP, *punctuation])
    model.fit_global_selector(corpus, statistics=("pmi",), progress=False)
    table = _pmi_table(model)
    input_ids, attention_mask = _padded(corpus)
    first, second, pmi = model.selector.document_pairs(input_ids, model.selector.counted_tokens(
        input_ids, attention_mask.bool()))
    for row, doc in enumerate(corpus):
        kept = [t for t in doc if t not in {PAD, CLS, SEP, *punctuation}]
        fitted = Counter((kept[i], kept[j]) for i in range(len(kept)) for j in range(i + 1, min(i + 4, len(kept))))
        scored = Counter()
        for i, j, value in zip(first[row].flatten().tolist(), second[row].flatten().tolist(),
                               pmi[row].flatten().tolist()):
            if not math.isnan(value):
                pair = (doc[i], doc[j])
                assert value == pytest.approx(table[pair])
                scored[pair] += 1
        assert scored == fitted  # every pair fitting counted in this document, as often, and nothing else


def test_stop_words_leave_the_statistics_and_the_selection():
    from hf_longdoc.data import fit_wordpiece_tokenizer

    texts = ["the reactor and the alloy of the plant", "a zirconium alloy in the reactor is cooled by water"] * 20
    tokenizer = fit_wordpiece_tokenizer(texts, vocab_size=200)
    config = SparseLongformerConfig(**{**TINY, "vocab_size": len(tokenizer), "pad_token_id": tokenizer.pad_token_id},
                                    stop_words="english", global_selector="tfidf", num_global_tokens=20)
    model = SparseLongformerModel(config).eval()
    documents = [tokenizer(t)["input_ids"] for t in texts]
    with pytest.raises(ValueError, match="tokenizer=tokenizer"):
        model.fit_global_selector(documents, progress=False)
    model.fit_global_selector(documents, tokenizer=tokenizer, progress=False)
    stop = {tokenizer.convert_tokens_to_ids(word) for word in ("the", "and", "of", "a", "in", "is", "by")}
    assert stop <= set(model.config.excluded_token_ids)
    assert tokenizer.convert_tokens_to_ids("reactor") not in model.config.excluded_token_ids
    chosen = model.select_global_tokens(torch.tensor([documents[0]]))[0]
    assert not stop & set(torch.tensor(documents[0])[chosen].tolist())
    assert SparseLongformerConfig(stop_words=["the", "of"]).stop_words == ["the", "of"]
    with pytest.raises(ValueError, match="stop_words"):
        SparseLongformerConfig(stop_words="french")
    with pytest.raises(ValueError, match="pmi_selection"):
        SparseLongformerConfig(pmi_selection="max")


def test_selection_is_computed_per_document_so_shuffling_is_safe():
    model = _selector_model(num_global_tokens=4, global_selector="tfidf")
    model.fit_global_selector(_corpus(), progress=False)
    input_ids, attention_mask = _documents([50, 35, 20], vocab=30)
    chosen = model.select_global_tokens(input_ids, attention_mask)
    order = torch.tensor([2, 0, 1])
    torch.testing.assert_close(model.select_global_tokens(input_ids[order], attention_mask[order]), chosen[order])


def test_first_n_random_cls_rules():
    model = _selector_model(num_global_tokens=5)
    input_ids, attention_mask = _documents([20, 4], vocab=30)
    first = model.select_global_tokens(input_ids, attention_mask, selector="first_n")
    assert first[0].nonzero().flatten().tolist() == [0, 1, 2, 3, 4, 5]
    assert first[1].nonzero().flatten().tolist() == [0, 1, 2, 3]  # pads never, even when too few tokens
    assert model.select_global_tokens(input_ids, attention_mask, selector="cls").sum(dim=1).tolist() == [1, 1]
    draws = [model.select_global_tokens(input_ids, attention_mask, selector="random",
                                        generator=torch.Generator().manual_seed(seed)) for seed in (7, 7, 8)]
    assert torch.equal(draws[0], draws[1]) and not torch.equal(draws[0], draws[2])
    assert all(d[:, 0].all() and not (d & ~attention_mask.bool()).any() for d in draws)
    assert draws[0].sum(dim=1).tolist() == [6, 4]


def test_unique_tokens_take_one_slot_and_can_be_turned_off():
    corpus = [[CLS, 5, 6, 7, 8, SEP], [CLS, 6, 7, 8, SEP], [CLS, 7, 8, SEP], [CLS, 8, SEP]]
    document = torch.tensor([[CLS, 5, 5, 5, 6, 8, SEP]])
    model = _selector_model(num_global_tokens=3, global_selector="tfidf")
    model.fit_global_selector(corpus, statistics=("tfidf",), progress=False)
    # idf: 5 -> 2, 6 -> log2(4/2) = 1, 8 -> 0; 5 is repeated: one slot (its first occurrence) when unique
    assert model.select_global_tokens(document)[0].nonzero().flatten().tolist() == [0, 1, 4, 5]
    model.config.unique_global_tokens = False
    assert model.select_global_tokens(document)[0].nonzero().flatten().tolist() == [0, 1, 2, 3]


WORDS = ("the of and a to in is was for on that with as by at it from new york city council said "
         "zirconium alloy reactor").split()


def _word_ids(text):
    return [CLS] + [WORDS.index(word) + 3 for word in text.split()] + [SEP]


def test_tfidf_picks_rare_repeated_content_words_and_pmi_picks_collocations():
    rng = np.random.default_rng(0)
    filler = WORDS[:12]
    corpus = []
    for i in range(200):
        words = list(rng.choice(filler, size=40))
        if i % 4 == 0:  # "new york" is a collocation: the two words occur together, rarely apart
            at = int(rng.integers(0, 38))
            words[at: at + 2] = ["new", "york"]
        if i % 25 == 0:
            words[5] = "zirconium"
        corpus.append(_word_ids(" ".join(words)))
    vocab = len(WORDS) + 3
    model = SparseLongformerModel(SparseLongformerConfig(**{**TINY, "vocab_size": vocab}, num_global_tokens=2,
                                                         pmi_window=3, pmi_min_count=2)).eval()
    model.fit_global_selector(corpus, progress=False)
    text = "the of and a zirconium to in new york is was zirconium for on that zirconium with as by"
    document = torch.tensor([_word_ids(text)])

    def chosen_words(selector):
        mask = model.select_global_tokens(document, selector=selector)[0]
        return {WORDS[i - 3] for i in document[0][mask].tolist() if i >= 3}

    assert "zirconium" in chosen_words("tfidf")
    assert chosen_words("pmi") == {"new", "york"}


def test_unfitted_statistics_raise_a_clear_error():
    model = _selector_model(global_selector="tfidf")
    input_ids, attention_mask = _documents([10], vocab=30)
    with pytest.raises(ValueError, match="fit_global_selector"):
        model(input_ids, attention_mask=attention_mask)
    with pytest.raises(ValueError, match="no documents"):
        model.fit_global_selector([], progress=False)
    with pytest.raises(ValueError, match="outside the vocabulary"):
        model.fit_global_selector([[0, 500]], progress=False)
    with pytest.raises(ValueError, match="statistics"):
        model.fit_global_selector([[0, 5]], statistics=("bm25",), progress=False)


def test_fit_with_a_tokenizer_excludes_specials_and_punctuation():
    from hf_longdoc.data import fit_wordpiece_tokenizer

    texts = ["The reactor, cooled by water; runs hot!", "A zirconium alloy (cladding) resists corrosion."] * 20
    tokenizer = fit_wordpiece_tokenizer(texts, vocab_size=200)
    config = SparseLongformerConfig(**{**TINY, "vocab_size": len(tokenizer), "pad_token_id": tokenizer.pad_token_id})
    model = SparseLongformerModel(config).eval()
    model.fit_global_selector([tokenizer(t)["input_ids"] for t in texts], tokenizer=tokenizer, progress=False)
    excluded = set(model.config.excluded_token_ids)
    assert set(tokenizer.all_special_ids) <= excluded
    assert {tokenizer.convert_tokens_to_ids(p) for p in [",", ";", "!", "(", ")", "."]} <= excluded
    assert tokenizer.convert_tokens_to_ids("reactor") not in excluded


# --- saving keeps the fitted statistics ------------------------------------------------------------------------------

LOAD_PREDICT_AND_SELECT = """
    import torch
    from safetensors.torch import load_file, save_file
    from transformers import AutoModelForSequenceClassification
    folder, inputs, outputs = sys.argv[1:4]
    model = AutoModelForSequenceClassification.from_pretrained(folder, trust_remote_code=True).eval()
    batch = load_file(inputs)
    with torch.no_grad():
        logits = model(batch["input_ids"], attention_mask=batch["attention_mask"]).logits
    chosen = model.select_global_tokens(batch["input_ids"], batch["attention_mask"])
    save_file({"logits": logits.contiguous(), "chosen": chosen.contiguous()}, outputs)
"""


@pytest.mark.parametrize("selector", ["tfidf", "pmi"])
def test_saved_model_keeps_fitted_statistics_with_and_without_hf_longdoc(selector, tmp_path):
    torch.manual_seed(0)
    config = SparseLongformerConfig(**{**TINY, "vocab_size": 30}, global_selector=selector, num_global_tokens=4,
                                    pmi_min_count=1, num_labels=2)
    model = SparseLongformerForSequenceClassification(config).eval()
    model.fit_global_selector(_corpus(), progress=False)
    model.save_pretrained(tmp_path / "model")
    loaded = SparseLongformerForSequenceClassification.from_pretrained(tmp_path / "model").eval()
    for name, buffer in model.longformer.selector.named_buffers():
        assert torch.equal(getattr(loaded.longformer.selector, name), buffer), name
    input_ids, attention_mask = _documents([50, 33], vocab=30)
    with torch.no_grad():
        expected = model(input_ids, attention_mask=attention_mask).logits
        torch.testing.assert_close(loaded(input_ids, attention_mask=attention_mask).logits, expected, rtol=0, atol=0)
    chosen = model.select_global_tokens(input_ids, attention_mask)
    assert chosen.sum() > 2  # more than [CLS]: the statistics did the choosing

    save_file({"input_ids": input_ids, "attention_mask": attention_mask}, str(tmp_path / "inputs.safetensors"))
    run_without_hf_longdoc(LOAD_PREDICT_AND_SELECT, tmp_path / "model", tmp_path / "inputs.safetensors",
                           tmp_path / "out.safetensors", workdir=tmp_path)
    out = load_file(str(tmp_path / "out.safetensors"))
    assert torch.equal(out["logits"], expected) and torch.equal(out["chosen"], chosen)


def test_neighbour_blocks_lays_each_query_block_beside_its_window():
    from hf_longdoc.modeling.sparse_longformer.modeling_sparse_longformer import neighbour_blocks

    x = torch.arange(1, 9)[None]  # one document of 8 tokens, blocks of c = 2; 0 marks "beyond the ends"
    expected = torch.tensor([[0, 0, 1, 2, 3, 4], [1, 2, 3, 4, 5, 6], [3, 4, 5, 6, 7, 8], [5, 6, 7, 8, 0, 0]])
    assert torch.equal(neighbour_blocks(x, 0, 4, 2)[0], expected)
    assert torch.equal(neighbour_blocks(x, 1, 3, 2)[0], expected[1:3])  # a group of blocks sees the same keys
    prefix = torch.tensor([[100, 200]])
    with_prefix = neighbour_blocks(x, 0, 4, 2, prefix)[0]
    assert torch.equal(with_prefix[:, :2], prefix.expand(4, 2)) and torch.equal(with_prefix[:, 2:], expected)


def test_window_mask_is_longformers_band_over_real_local_keys():
    """Against the rule of Beltagy et al. (Sec. 3.1), written per (query, key) pair: a real query i attends to key j
    when |i - j| ≤ c and j is a real token that is not global. A pad query (its output row is zeroed) also sees
    itself, so that no softmax row is empty."""
    from hf_longdoc.modeling.sparse_longformer.modeling_sparse_longformer import window_mask

    c, n = 2, 8
    is_pad = torch.tensor([[False] * 6 + [True] * 2, [False] * 8])
    is_global = torch.zeros(2, n, dtype=torch.bool)
    is_global[0, 0] = is_global[1, 5] = True
    mask = window_mask(is_pad, is_global, c)
    assert mask.shape == (2, n // c, c, 3 * c)
    for doc in range(2):
        for i in range(n):
            block, row = divmod(i, c)
            for slot in range(3 * c):
                j = (block - 1) * c + slot
                if not 0 <= j < n:
                    expected = False
                else:
                    local = abs(i - j) <= c and not is_pad[doc, j] and not is_global[doc, j]
                    expected = local or bool(is_pad[doc, i] and j == i)
                assert bool(mask[doc, block, row, slot]) == expected, (doc, i, j)


def test_global_slots_list_each_documents_global_tokens_in_order():
    from hf_longdoc.modeling.sparse_longformer.modeling_sparse_longformer import global_slots

    is_global = torch.tensor([[0, 1, 0, 1], [1, 0, 0, 0]], dtype=torch.bool)
    positions, used = global_slots(is_global)
    assert torch.equal(used, torch.tensor([[True, True], [True, False]]))
    assert positions[0].tolist() == [1, 3] and positions[1, 0].item() == 0
