"""S-LSTM (paper 002): Eq. 2-4 against a direct per-token loop in float64, the fast path's agreement (outputs and
gradients), parameter sharing, the paper's sizes, and the masked-LM head with Transformers' collator."""

import math

import pytest
import torch
from torch.nn import functional as F
from transformers import AutoModelForMaskedLM, DataCollatorForLanguageModeling, PreTrainedTokenizerFast

from hf_longdoc import SLSTMConfig, SLSTMForMaskedLM, SLSTMForSequenceClassification, SLSTMModel

H = 6
GATES = "ilrfsou"


def layer_norm(v, weight, bias, enabled, eps):
    if not enabled:
        return v
    return (v - v.mean()) / torch.sqrt(v.var(unbiased=False) + eps) * weight + bias


def reference(model, ids, cfg):
    """Eq. 2-4 for ONE document of real tokens, one token and one gate at a time, from the step t-1 states."""
    step, emb = model.step, model.embeddings
    n, k, eps, ln = len(ids), cfg.window_size, cfg.layer_norm_eps, cfg.gate_layer_norm
    zero = torch.zeros(cfg.hidden_size, dtype=torch.float64)
    x = [emb.word_embeddings.weight[w] + (emb.position_embeddings.weight[i] if emb.position_embeddings else 0)
         for i, w in enumerate(ids.tolist())]  # Eq. 2

    def at(states, j):
        return states[j] if 0 <= j < n else zero  # a neighbour beyond either end is a zero state

    def gate_rows(weight, gate):
        return weight[gate * cfg.hidden_size:(gate + 1) * cfg.hidden_size]

    h, c = list(x), list(x)
    g = sum(x) / n
    c_g = g.clone()
    for _ in range(cfg.num_recurrent_steps):
        new_h, new_c = [], []
        for i in range(n):
            if cfg.window_combine == "sum":
                left = sum((at(h, i - s) for s in range(1, k + 1)), zero)
                right = sum((at(h, i + s) for s in range(1, k + 1)), zero)
                xi = torch.cat([left, h[i], right])
            else:
                xi = torch.cat([at(h, j) for j in range(i - k, i + k + 1)])
            gate = {}
            for index, name in enumerate(GATES):
                pre = (gate_rows(step.token_W.weight, index) @ xi + gate_rows(step.token_U.weight, index) @ x[i]
                       + gate_rows(step.token_V.weight, index) @ g + gate_rows(step.token_W.bias, index))
                pre = layer_norm(pre, step.token_norm.weight[index] if ln else None,
                                 step.token_norm.bias[index] if ln else None, ln, eps)
                gate[name] = torch.tanh(pre) if name == "u" else torch.sigmoid(pre)
            hats = torch.stack([gate[name] for name in "ilrfs"])
            i_, l_, r_, f_, s_ = torch.exp(hats) / torch.exp(hats).sum(dim=0)  # softmax over the five gates
            c_left = sum((at(c, i - s) for s in range(1, k + 1)), zero)
            c_right = sum((at(c, i + s) for s in range(1, k + 1)), zero)
            c_i = l_ * c_left + f_ * c[i] + r_ * c_right + s_ * c_g + i_ * gate["u"]
            new_c.append(c_i)
            new_h.append(gate["o"] * torch.tanh(c_i))
        # Eq. 4 from the step t-1 token states
        h_bar = sum(h) / n
        Wg = step.sentence_W.weight
        bg = step.sentence_W.bias
        U_mean = step.sentence_U_mean.weight

        def sentence_gate(index, pre):
            return torch.sigmoid(layer_norm(pre, step.sentence_norm.weight[index] if ln else None,
                                            step.sentence_norm.bias[index] if ln else None, ln, eps))

        f_hat = [sentence_gate(0, gate_rows(Wg, 0) @ g + step.sentence_U_token.weight @ h[i] + gate_rows(bg, 0))
                 for i in range(n)]
        f_g_hat = sentence_gate(1, gate_rows(Wg, 1) @ g + gate_rows(U_mean, 0) @ h_bar + gate_rows(bg, 1))
        o_g = sentence_gate(2, gate_rows(Wg, 2) @ g + gate_rows(U_mean, 1) @ h_bar + gate_rows(bg, 2))
        weights = torch.softmax(torch.stack([*f_hat, f_g_hat]), dim=0)  # over tokens and the sentence slot
        c_g = weights[n] * c_g + sum(weights[i] * c[i] for i in range(n))
        g = o_g * torch.tanh(c_g)
        h, c = new_h, new_c
    return torch.stack(h), g


def tiny(**overrides):
    settings = dict(vocab_size=31, hidden_size=H, num_recurrent_steps=3, max_position_embeddings=16,
                    hidden_dropout_prob=0.0, layer_norm_eps=1e-5)
    settings.update(overrides)
    return SLSTMConfig(**settings)


def randomised(config, seed=0):
    """A double model with every parameter random (LayerNorm weights too), so no term can hide at its init value."""
    torch.manual_seed(seed)
    model = SLSTMModel(config).double().eval()
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            parameter.copy_(torch.randn_like(parameter) * (0.5 if "weight" in name else 0.3))
    return model


@pytest.mark.parametrize("settings", [
    dict(),
    dict(window_size=2),
    dict(window_size=2, window_combine="concat"),
    dict(gate_layer_norm=False),
    dict(position_embedding_type="none", window_size=3),
    dict(chunk_size=2),  # tokens updated two at a time: the halo of neighbours crosses every chunk border
    dict(chunk_size=2, window_size=3, window_combine="concat"),
    dict(chunk_size=3, window_size=2),  # 7 tokens: runs of 3 and 4 (a last run of 1 < k joins the one before)
    # the gate work through torch.compile: first, middle and last runs, summed and concatenated windows
    pytest.param(dict(compile_gates=True, chunk_size=2), marks=[pytest.mark.compile, pytest.mark.slow]),
    pytest.param(dict(compile_gates=True, chunk_size=3, window_size=2, window_combine="concat"),
                 marks=[pytest.mark.compile, pytest.mark.slow]),
])
def test_fast_path_equals_the_per_token_equations(settings):
    config = tiny(**settings)
    model = randomised(config)
    lengths = [7, 4, 1]
    ids = torch.zeros(3, 7, dtype=torch.long)
    mask = torch.zeros(3, 7, dtype=torch.long)
    generator = torch.Generator().manual_seed(1)
    for row, length in enumerate(lengths):
        start = 7 - length if row == 1 else 0  # row 1 is left-padded
        ids[row, start:start + length] = torch.randint(1, 31, (length,), generator=generator)
        mask[row, start:start + length] = 1
    # no autograd: the compiled cases then build forward graphs only (a graph that records for autograd also builds
    # its backward, about half of the compilation); the compiled training step's states and gradients are
    # test_compiled_gates_give_the_eager_states_and_gradients'
    with torch.no_grad():
        out, was_compiled = ran_compiled(model, ids, attention_mask=mask, output_hidden_states=True)
    assert was_compiled == bool(config.compile_gates)
    for row in range(3):
        real = mask[row].bool()
        h_ref, g_ref = reference(model, ids[row][real], config)
        torch.testing.assert_close(out.last_hidden_state[row][real], h_ref, rtol=1e-10, atol=1e-10)
        torch.testing.assert_close(out.pooler_output[row], g_ref, rtol=1e-10, atol=1e-10)
        for states in out.hidden_states:  # pads hold zero states at every step
            assert states[row][~real].abs().max().item() == 0 if (~real).any() else True
    assert len(out.hidden_states) == config.num_recurrent_steps + 1


def test_fast_path_gradients_equal_the_reference_gradients():
    config = tiny(window_size=2)
    model = randomised(config)
    ids = torch.tensor([[3, 9, 4, 22, 7]])
    out = model(ids)
    fast = torch.autograd.grad(out.last_hidden_state.sum() + out.pooler_output.sum(), list(model.parameters()))
    h_ref, g_ref = reference(model, ids[0], config)
    slow = torch.autograd.grad(h_ref.sum() + g_ref.sum(), list(model.parameters()), allow_unused=True)
    for (name, _), a, b in zip(model.named_parameters(), fast, slow):
        torch.testing.assert_close(a, b if b is not None else torch.zeros_like(a), rtol=1e-9, atol=1e-9, msg=name)


@pytest.fixture(autouse=True)
def _fresh_compile(request):
    """Each compile test starts from no compiled variants: the earlier tests' variants (dtypes, windows, grad modes)
    would reach dynamo's recompile limit, after which it runs the eager function."""
    if request.node.get_closest_marker("compile"):
        from hf_longdoc.modeling.slstm import modeling_slstm

        torch._dynamo.reset()
        modeling_slstm.compiled_step_update.cache_clear()
        modeling_slstm.compiled_run_update.cache_clear()
        modeling_slstm.CompilationReport.reported = False


def ran_compiled(model, *args, **kwargs):
    """model(*args, **kwargs), and whether a torch.compile region ran in it (a region dynamo skipped, or a recompile
    limit hit, falls back to the eager function silently)."""
    with torch.profiler.profile() as profiler:
        out = model(*args, **kwargs)
    return out, any("Torch-Compiled Region" in event.name for event in profiler.events())


@pytest.mark.compile
@pytest.mark.slow
def test_compiled_gates_give_the_eager_states_and_gradients():
    """`compile_gates` in float32 with autograd: the same states and parameter gradients as the eager function, on a
    batch with padding and runs of two tokens (the reference test above checks the compiled values in float64)."""
    eager = randomised(tiny(window_size=2, chunk_size=2)).float().train()
    compiled = SLSTMModel(tiny(window_size=2, chunk_size=2, compile_gates=True)).float().train()
    compiled.load_state_dict(eager.state_dict())
    ids = torch.tensor([[3, 9, 4, 22, 7, 1, 2], [5, 6, 7, 8, 0, 0, 0]])
    mask = (ids > 0).long()
    results = []
    for model in (eager, compiled):
        out, was_compiled = ran_compiled(model, ids, attention_mask=mask)
        assert was_compiled == bool(model.config.compile_gates)
        loss = out.last_hidden_state.pow(2).sum() + out.pooler_output.sum()
        results.append((out.last_hidden_state, out.pooler_output,
                        torch.autograd.grad(loss, list(model.parameters()))))
    (h_eager, g_eager, grads_eager), (h_compiled, g_compiled, grads_compiled) = results
    torch.testing.assert_close(h_compiled, h_eager, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(g_compiled, g_eager, rtol=1e-5, atol=1e-5)
    for (name, _), a, b in zip(eager.named_parameters(), grads_compiled, grads_eager):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5, msg=name)


@pytest.mark.compile
def test_the_roofline_records_a_compiled_model_eagerly_and_leaves_it_compiled():
    """The recorder runs the forward eagerly: a compiled region run under its dispatch mode is marked to skip, and
    the timed forwards after it ran eagerly, which read the compiled path as slow as the eager one. Same products."""
    from hf_longdoc.experiments.profiling import matmul_roofline

    ids = torch.randint(1, 31, (1, 12))
    models = [SLSTMModel(tiny(chunk_size=4, compile_gates=flag)).eval() for flag in (False, True)]
    reports = [matmul_roofline(model, {"input_ids": ids}, repeats=1, warmup=0) for model in models]
    assert reports[0]["products"] == reports[1]["products"] and reports[0]["gflop"] == reports[1]["gflop"]
    with torch.inference_mode():
        assert ran_compiled(models[1], ids)[1], "the forward after the roofline no longer runs compiled"


@pytest.mark.compile
@pytest.mark.slow
def test_every_document_length_shares_the_compiled_graphs(caplog):
    """On the CPU the compiled step is one run's update, compiled for dynamic shapes, so once the first documents have
    compiled its graphs (first, middle, last and shorter last runs), documents of any other number of runs compile
    nothing more (a compiled whole step unrolled its runs: a graph per run count, each compiling longer, 315 s for a
    45,000-token document in a user's trial). Each length runs compiled even under a recompile limit of 1 (the step
    allows its own, past which dynamo would fall back to eager silently). The compilation is logged once, as a
    warning, with the time of the forward that compiled; not by a pass that `force_eager` kept from compiling."""
    model = randomised(tiny(chunk_size=5, compile_gates=True, max_position_embeddings=64)).float().eval()
    with torch.inference_mode(), torch.compiler.set_stance("force_eager"), caplog.at_level("INFO"):
        model(torch.randint(1, 31, (1, 12)))
    assert "compiled" not in caplog.text
    with torch.inference_mode(), torch._dynamo.config.patch(recompile_limit=1), caplog.at_level("INFO"):
        for length in (12, 20):  # runs of 5, 5, 2 and of 5, 5, 5, 5
            assert ran_compiled(model, torch.randint(1, 31, (1, length)))[1]
        graphs = torch._dynamo.utils.counters["stats"]["unique_graphs"]
        for length in (24, 32, 45, 64):
            _, was_compiled = ran_compiled(model, torch.randint(1, 31, (1, length)))
            assert was_compiled, f"{length} tokens ran eagerly"
    assert torch._dynamo.utils.counters["stats"]["unique_graphs"] == graphs, "a new length compiled again"
    warnings = [record.getMessage() for record in caplog.records if record.levelname == "WARNING"]
    assert len(warnings) == 1 and "S-LSTM: compiled its recurrent step (" in warnings[0], warnings
    with torch.inference_mode(), caplog.at_level("INFO"):  # a batch of several: dynamo specialises a batch of one
        model(torch.randint(1, 31, (2, 20)))
    warnings = [record.getMessage() for record in caplog.records if record.levelname == "WARNING"]
    assert len(warnings) == 2 and "more graph(s) of its recurrent step" in warnings[1], warnings


def test_the_fused_gate_layer_norm_is_exact_far_from_zero():
    """`fused` takes the LayerNorm statistics in one pass over gates shifted by their first element: exact to float32
    rounding even when the mean dwarfs the spread, where the textbook one-pass E[x²] - E[x]² loses every digit."""
    from hf_longdoc.modeling.slstm.modeling_slstm import gate_layer_norm

    generator = torch.Generator().manual_seed(0)
    gates = (1e4 + 0.1 * torch.randn(3, 5, 7, 16, generator=generator, dtype=torch.float64))
    weight, bias = torch.randn(7, 16, dtype=torch.float64), torch.randn(7, 16, dtype=torch.float64)
    expected = F.layer_norm(gates[..., None, :], (16,), eps=1e-5).squeeze(-2) * weight + bias
    fused = gate_layer_norm(gates.float(), weight.float(), bias.float(), 1e-5, fused=True)
    torch.testing.assert_close(fused.double(), expected, rtol=0, atol=2e-2)
    torch.testing.assert_close(gate_layer_norm(gates, weight, bias, 1e-5, fused=True), expected)
    naive_var = (gates.float() ** 2).mean(-1) - gates.float().mean(-1) ** 2
    assert (naive_var - gates.var(-1, unbiased=False).float()).abs().max() > 1  # what the shift avoids


def test_compile_gates_must_be_a_bool_or_none():
    with pytest.raises(TypeError, match="compile_gates"):
        tiny(compile_gates="yes")


@pytest.mark.parametrize("compile_gates, device, positions, present, needs_grad, expected", [
    (None, "cpu", 4096, True, False, True),  # the default: compiled where a compiler is present and the input is long
    (None, "cpu", 512, True, False, False),  # too short to amortise the compilation
    (None, "cpu", 4096, False, False, False),  # no compiler
    (None, "cpu", 4096, True, True, False),  # a CPU's compiled training step was slower than the eager one
    (None, "cuda", 8192, True, False, True),
    (None, "cuda", 8192, True, True, True),
    (True, "cpu", 8, False, True, True),  # the user's choice, either way
    (False, "cuda", 8192, True, False, False),
])
def test_the_step_compiles_by_default_where_it_pays(monkeypatch, compile_gates, device, positions, present, needs_grad,
                                                    expected):
    from hf_longdoc.modeling.slstm import modeling_slstm

    monkeypatch.setattr(modeling_slstm, "compiler_present", lambda device_type: present)
    assert modeling_slstm.compiles_the_step(compile_gates, device, positions, needs_grad) == expected


def test_a_long_input_runs_the_compiled_step_by_default(monkeypatch):
    """With the default settings, a forward of COMPILE_MIN_TOKENS tokens goes through the compiled step (recorded
    here by a stand-in that runs the eager function), a short one does not."""
    from hf_longdoc.modeling.slstm import modeling_slstm

    calls = []

    def stand_in():  # for the compiled run update: the tokens of each run
        def update(*args, **kwargs):
            calls.append(args[2].shape[1])
            return modeling_slstm.run_update(*args, **kwargs)
        return update

    monkeypatch.setattr(modeling_slstm, "compiler_present", lambda device_type: True)
    monkeypatch.setattr(modeling_slstm, "compiled_run_update", stand_in)
    model = SLSTMModel(tiny(max_position_embeddings=modeling_slstm.COMPILE_MIN_TOKENS)).eval()
    assert model.config.compile_gates is None
    long_input = torch.randint(1, 31, (1, modeling_slstm.COMPILE_MIN_TOKENS))
    with torch.inference_mode():
        model(torch.randint(1, 31, (1, 16)))
        assert calls == []
        model(long_input)
    assert sum(calls) == modeling_slstm.COMPILE_MIN_TOKENS * model.config.num_recurrent_steps
    calls.clear()
    model.train()(long_input).pooler_output.sum().backward()  # on the CPU a training step runs eagerly
    assert calls == []


def test_one_step_is_the_synchronous_update_from_the_initial_states():
    """After one step, g depends on the initial token states only (h = c = x), not on the updated ones."""
    config = tiny(num_recurrent_steps=1)
    model = randomised(config)
    ids = torch.tensor([[5, 6, 7, 8]])
    _, g_ref = reference(model, ids[0], config)
    torch.testing.assert_close(model(ids).pooler_output[0], g_ref, rtol=1e-10, atol=1e-10)


def test_parameters_are_shared_across_steps():
    counts = {steps: sum(p.numel() for p in SLSTMModel(tiny(num_recurrent_steps=steps)).parameters())
              for steps in (1, 4, 10)}
    assert len(set(counts.values())) == 1
    names = {name for name, _ in SLSTMModel(tiny(num_recurrent_steps=4)).named_parameters()}
    assert not any(char.isdigit() for name in names for char in name.split(".")[1])  # no per-step copies


def test_window_combine_only_matters_beyond_one_neighbour():
    sum_model = randomised(tiny(window_combine="sum"))
    concat_model = SLSTMModel(tiny(window_combine="concat")).double().eval()
    concat_model.load_state_dict(sum_model.state_dict())
    ids = torch.tensor([[4, 8, 15, 16, 23]])
    torch.testing.assert_close(sum_model(ids).pooler_output, concat_model(ids).pooler_output)
    assert SLSTMModel(tiny(window_combine="concat", window_size=2)).step.token_W.in_features == 5 * H


@pytest.mark.parametrize("size,millions,steps,hidden", [
    ("base", 186, 10, 1792),  # Section 5.2
    ("6x1280", 107, 6, 1280),  # Table 5
    ("12x1280", 107, 12, 1280),
    ("6x2048", 238, 6, 2048),
    ("12x2048", 238, 12, 2048),
])
def test_paper_sizes(size, millions, steps, hidden):
    config = SLSTMConfig.from_paper(size)
    assert (config.num_hidden_layers, config.hidden_size, config.window_size) == (steps, hidden, 1)
    with torch.device("meta"):
        model = SLSTMForMaskedLM(config)
    total = sum(p.numel() for p in model.parameters()) / 1e6
    print(f"S-LSTM {size}: {total:.1f}M parameters (paper {millions}M)")
    assert abs(total - millions) / millions < 0.05


def test_positions_count_real_tokens_and_long_documents_are_read_up_to_the_positions():
    model = SLSTMForSequenceClassification(tiny(num_labels=2)).eval()
    ids = torch.randint(4, 30, (1, 17))
    cut = model(torch.cat([ids[:, :15], ids[:, -1:]], dim=1)).logits  # as truncation=True keeps the closing token
    torch.testing.assert_close(model(ids).logits, cut)  # the 16th token is ignored, with a warning
    torch.testing.assert_close(model(ids, attention_mask=torch.ones(1, 17)).logits, cut)
    model(torch.ones(1, 20, dtype=torch.long), attention_mask=torch.tensor([[0] * 4 + [1] * 16]))  # 16 real: fine
    unbounded = SLSTMForSequenceClassification(tiny(num_labels=2, position_embedding_type="none")).eval()
    assert unbounded(torch.ones(1, 40, dtype=torch.long)).logits.shape == (1, 2)


def test_token_type_ids_are_optional_and_used_only_with_a_type_table():
    ids = torch.tensor([[2, 5, 6, 3, 7, 8, 3]])
    types = torch.tensor([[0, 0, 0, 0, 1, 1, 1]])
    plain = SLSTMForSequenceClassification(tiny(num_labels=2)).eval()
    torch.testing.assert_close(plain(ids).logits, plain(ids, token_type_ids=types).logits)
    typed = SLSTMForSequenceClassification(tiny(num_labels=2, type_vocab_size=2)).eval()
    assert not torch.allclose(typed(ids).logits, typed(ids, token_type_ids=types).logits)
    with pytest.raises(ValueError, match="token_type_ids"):
        typed(ids, token_type_ids=types + 2)


def _word_tokenizer():
    from tokenizers import Tokenizer, models, pre_tokenizers

    vocab = {"[PAD]": 0, "[UNK]": 1, "[CLS]": 2, "[SEP]": 3, "[MASK]": 4}
    for word in "the cat sat on a mat dog ran to red blue hat".split():
        vocab[word] = len(vocab)
    backend = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    backend.pre_tokenizer = pre_tokenizers.Whitespace()
    return PreTrainedTokenizerFast(tokenizer_object=backend, pad_token="[PAD]", unk_token="[UNK]",
                                   mask_token="[MASK]", cls_token="[CLS]", sep_token="[SEP]")


@pytest.mark.parametrize("mlm_head", ["eq5", "transform"])
def test_masked_lm_is_tied_trains_with_the_collator_and_round_trips(tmp_path, mlm_head):
    tokenizer = _word_tokenizer()
    torch.manual_seed(0)
    model = SLSTMForMaskedLM(tiny(vocab_size=len(tokenizer), hidden_size=16, mlm_head=mlm_head))
    assert model.lm_head.decoder.weight.data_ptr() == model.slstm.embeddings.word_embeddings.weight.data_ptr()
    collator = DataCollatorForLanguageModeling(tokenizer, mlm_probability=0.3, seed=0)
    texts = ["the cat sat on a mat", "a dog ran to the red hat", "the blue cat sat on the dog"] * 4
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    losses = []
    for _ in range(80):  # Eq. 5's head (no LayerNorm, logits near 0 at initialisation) starts slower
        batch = collator([tokenizer(text) for text in texts])
        loss = model(**batch).loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    assert math.isfinite(losses[0]) and sum(losses[-5:]) / 5 < 0.75 * sum(losses[:5]) / 5
    model.save_pretrained(tmp_path)
    loaded = AutoModelForMaskedLM.from_pretrained(tmp_path)
    assert type(loaded) is SLSTMForMaskedLM
    assert loaded.lm_head.decoder.weight.data_ptr() == loaded.slstm.embeddings.word_embeddings.weight.data_ptr()
    model.eval()
    loaded.eval()
    batch = tokenizer(["the cat sat"], return_tensors="pt")
    torch.testing.assert_close(loaded(**batch).logits, model(**batch).logits)
    with pytest.raises(ValueError, match="labels"):
        model(**batch, labels=torch.zeros(1, 2, dtype=torch.long))


def test_sentence_softmax_is_stable_in_half_precision_on_long_documents():
    # the eager step: at 4,096 positions the default compiles it, once per dtype (40 s on 2 cores), and this test is
    # about the sentence softmax; the compiled step's own tests check it against the reference
    model = SLSTMModel(tiny(max_position_embeddings=4096, hidden_size=8, compile_gates=False)).eval()
    ids = torch.randint(1, 31, (1, 4096))
    with torch.no_grad():
        full = model(ids).pooler_output
        half = model.half()(ids).pooler_output
    assert torch.isfinite(half).all()
    torch.testing.assert_close(half.float(), full, rtol=0, atol=2e-2)


def test_mlm_loss_matches_cross_entropy_over_masked_positions():
    model = SLSTMForMaskedLM(tiny()).eval()
    ids = torch.tensor([[5, 6, 7, 8, 9]])
    labels = torch.tensor([[-100, 6, -100, -100, 9]])
    out = model(ids, labels=labels)
    expected = F.cross_entropy(out.logits[0, [1, 4]], torch.tensor([6, 9]))
    torch.testing.assert_close(out.loss, expected)


def test_step_efficiency_report():
    from hf_longdoc import get_family
    from hf_longdoc.experiments.profiling import kernel_efficiency

    report = kernel_efficiency(get_family("slstm"), hidden_size=16, length=64, repeats=1)
    assert report["kernel"] == "recurrent step" and report["length"] == 64
    assert report["kernel_gflops"] > 0 and report["matmul_gflops"] > 0 and 0 < report["efficiency"]


def test_chunk_sizes_keep_every_run_at_least_the_window():
    from hf_longdoc.modeling.slstm.modeling_slstm import chunk_sizes

    assert chunk_sizes(10, 4, 1) == [4, 4, 2]
    assert chunk_sizes(9, 4, 2) == [4, 5]  # a last run of 1 < k = 2 joins the one before
    assert chunk_sizes(5, 1, 3) == [5]  # runs of at least k = 3
    assert sum(chunk_sizes(4097, 512, 1)) == 4097


def test_the_masked_lm_head_is_eq5_by_default():
    """Eq. 5: logits = E · (W h̃), written from the equation with the model's E and W; the released code's head is
    the `transform` option."""
    torch.manual_seed(0)
    model = SLSTMForMaskedLM(tiny(vocab_size=30, hidden_size=16)).eval()
    ids = torch.randint(1, 30, (2, 9))
    with torch.no_grad():
        h = model.slstm(ids).last_hidden_state  # h̃, (b, n, H)
        expected = h @ model.lm_head.dense.weight.T @ model.slstm.embeddings.word_embeddings.weight.T
        torch.testing.assert_close(model(ids).logits, expected)
    assert not hasattr(model.lm_head, "layer_norm") and model.lm_head.decoder.bias is None
    transform = SLSTMForMaskedLM(tiny(vocab_size=30, hidden_size=16, mlm_head="transform"))
    assert hasattr(transform.lm_head, "layer_norm") and transform.lm_head.decoder.bias is not None
    with pytest.raises(ValueError, match="mlm_head"):
        tiny(mlm_head="bert")


def test_from_paper_trains_without_dropout():
    from hf_longdoc import SLSTMConfig

    config = SLSTMConfig.from_paper("6x1280")
    assert config.hidden_dropout_prob == 0.0 and config.step_dropout_prob == 0.0
