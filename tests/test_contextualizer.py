"""The Contextualizer's equations (paper 001, Section 2) checked on small tensors against a direct loop version."""

import math

import pytest
import torch

from conftest import random_batch
from hf_longdoc import ContextualizerConfig, ContextualizerForSequenceClassification, ContextualizerModel
from hf_longdoc.modeling.contextualizer.modeling_contextualizer import positional_encoding


def _model(**overrides):
    settings = dict(vocab_size=50, hidden_size=12, rank=7, num_hidden_layers=3, hidden_dropout_prob=0.0)
    settings.update(overrides)
    torch.manual_seed(0)
    model = ContextualizerModel(ContextualizerConfig(**settings)).eval()
    with torch.no_grad():  # non-trivial values everywhere, s included, so every term of every equation matters
        for name, parameter in model.named_parameters():
            parameter.normal_(0, 0.05 if name.endswith("position_scale") else 0.4)
    return model


def reference_forward(model, ids, normalizer="none"):
    """Section 2 written as loops over tokens and features, in float64, for one unpadded document."""
    config = model.config
    n, m = len(ids), config.hidden_size
    e = model.embeddings.word_embeddings.weight.double()[ids]
    s = model.embeddings.position_scale.double()
    p = torch.empty(n, m, dtype=torch.float64)
    for j in range(m):  # Eq. 1: softmax over positions i = 1..n of i·s_j
        denominator = sum(math.exp(i * s[j].item()) for i in range(1, n + 1))
        for i in range(1, n + 1):
            p[i - 1, j] = math.exp(i * s[j].item()) / denominator
    x = [e[i] * p[i] for i in range(n)]  # Eq. 2
    if config.default_context == "learned":
        c = model.learned_context.double().clone()
    elif config.default_context == "random":
        c = model.random_context.double().clone()
    else:
        c = torch.ones(m, dtype=torch.float64)
    states = [c]
    for step in model.steps:
        U, V, W, b = (t.double() for t in (step.U.weight, step.V.weight, step.W.weight, step.W.bias))
        alphas = [W @ ((U @ x_i) * (V @ c)) + b for x_i in x]  # Eq. 5
        if normalizer == "sigmoid":
            alphas = [torch.sigmoid(a) for a in alphas]
        elif normalizer == "softmax":
            stacked = torch.stack(alphas)
            alphas = list(torch.exp(stacked) / torch.exp(stacked).sum(0))
        z_tilde = sum(a * x_i for a, x_i in zip(alphas, x))  # Eq. 6
        mean, variance = z_tilde.mean(), z_tilde.var(unbiased=False)
        z = (z_tilde - mean) / torch.sqrt(variance + step.layer_norm.eps)  # Eq. 7
        z = z * step.layer_norm.weight.double() + step.layer_norm.bias.double()
        c = c + z  # Eq. 8
        states.append(c)
    tokens = torch.stack([a * x_i for a, x_i in zip(alphas, x)])
    return c, states, tokens


@pytest.mark.parametrize("default_context", ["constant", "learned", "random"])
@pytest.mark.parametrize("normalizer", ["none", "sigmoid", "softmax"])
def test_model_matches_the_equations(default_context, normalizer):
    model = _model(default_context=default_context, alpha_normalizer=normalizer)
    ids = torch.randint(1, 50, (23,))
    c, states, tokens = reference_forward(model, ids, normalizer)
    with torch.no_grad():
        out = model(ids[None], output_hidden_states=True)
    torch.testing.assert_close(out.pooler_output[0].double(), c, rtol=1e-5, atol=1e-5)
    assert len(out.hidden_states) == model.config.num_hidden_layers + 1
    for got, want in zip(out.hidden_states, states):
        torch.testing.assert_close(got[0].double(), want, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(out.last_hidden_state[0].double(), tokens, rtol=1e-4, atol=1e-6)


def test_positional_encoding_is_a_masked_softmax_over_real_positions():
    s = torch.tensor([0.0, 0.3, -0.7, 2.0])
    mask = torch.tensor([[1, 1, 1, 1, 1, 0, 0], [0, 0, 1, 1, 1, 1, 1]], dtype=torch.bool)
    p = positional_encoding(mask, s) / 5  # the function returns n·p
    assert torch.all(p[~mask] == 0)
    torch.testing.assert_close(p.sum(dim=1), torch.ones(2, 4))
    torch.testing.assert_close(p[0, :5], p[1, 2:])  # left and right padding give the same encoding
    expected = torch.softmax(torch.arange(1, 6.0)[:, None] * s[None, :], dim=0)
    torch.testing.assert_close(p[0, :5], expected)
    torch.testing.assert_close(p[0, :5, 0], torch.full((5,), 0.2))  # s_j = 0 weighs every position alike


def test_positional_encoding_is_stable_where_exp_would_overflow():
    mask = torch.ones(1, 20000, dtype=torch.bool)
    p = positional_encoding(mask, torch.tensor([1.0, -1.0, 0.01]))
    assert torch.isfinite(p).all()
    assert p[0, -1, 0] > 0.5 * 20000 and p[0, 0, 1] > 0.5 * 20000  # all mass at the last / first position


def test_factored_update_equals_the_direct_sum():
    model = _model(rank=9)
    step = model.steps[0]
    input_ids, attention_mask = random_batch(50, [30, 11, 19])
    mask = attention_mask.bool()
    x_hat = model.embeddings(input_ids, None, mask)
    c = torch.randn(3, 12)
    n_real = mask.sum(1).float()[:, None, None]
    with torch.no_grad():
        direct = (step.attention(x_hat, c, mask, n_real) * x_hat / n_real).sum(1)
        factored = step.factored_update(x_hat, c, n_real)
        torch.testing.assert_close(factored, direct, rtol=1e-5, atol=1e-6)
        c_fast, none = step(x_hat, c, mask)
        c_direct, contributions = step(x_hat, c, mask, True)
    assert none is None and contributions.shape == (3, 30, 12)
    torch.testing.assert_close(c_fast, c_direct, rtol=1e-5, atol=1e-5)


def test_pads_change_nothing_whatever_their_ids():
    model = _model()
    input_ids, attention_mask = random_batch(50, [14, 6])
    scrambled = input_ids.clone()
    scrambled[attention_mask == 0] = 17
    with torch.no_grad():
        a = model(input_ids, attention_mask=attention_mask).pooler_output
        b = model(scrambled, attention_mask=attention_mask).pooler_output
    torch.testing.assert_close(a, b, rtol=0, atol=0)


def test_random_default_context_is_redrawn_in_training_and_fixed_in_evaluation(tmp_path):
    model = _model(default_context="random")
    assert model.random_context.abs().max() <= 1 and model.random_context.std() > 0.1
    model.train()
    drawn = model.default_context(4, torch.device("cpu"))
    assert not torch.equal(drawn[0], drawn[1]) and drawn.abs().max() <= 1
    model.eval()
    fixed = model.default_context(4, torch.device("cpu"))
    assert torch.equal(fixed[0], model.random_context) and torch.equal(fixed[0], fixed[3])
    rebuilt = ContextualizerModel(model.config)  # the evaluation draw is a function of the seed
    assert torch.equal(rebuilt.random_context, ContextualizerModel(model.config).random_context)
    model.save_pretrained(tmp_path)
    assert torch.equal(ContextualizerModel.from_pretrained(tmp_path).random_context, model.random_context)


def test_no_maximum_length():
    model = ContextualizerForSequenceClassification(ContextualizerConfig(vocab_size=30, hidden_size=16, rank=8,
                                                                         num_hidden_layers=2)).eval()
    with torch.no_grad():
        logits = model(torch.randint(1, 30, (1, 50000))).logits
    assert torch.isfinite(logits).all()


@pytest.mark.parametrize("size,target", [("0.5M", 0.5e6), ("1M", 1.0e6), ("1.5M", 1.5e6), ("2M", 2.0e6)])
def test_paper_sizes_match_table_2(size, target):
    config = ContextualizerConfig.from_paper(size, vocab_size=100)
    model = ContextualizerModel(config)
    without_embeddings = sum(p.numel() for name, p in model.named_parameters() if "word_embeddings" not in name)
    assert config.hidden_size == 128 and config.num_hidden_layers == 5
    assert abs(without_embeddings - target) / target < 0.01, without_embeddings


def test_softmax_tail_is_flushed_instead_of_left_subnormal():
    """A learned s makes most of Eq. 1's tail subnormal; those slow CPU matmuls ~20x and are flushed to 0."""
    mask = torch.ones(1, 3000, dtype=torch.bool)
    np_i = positional_encoding(mask, torch.full((8,), 0.05))
    tiny = torch.finfo(torch.float32).tiny
    assert not torch.any((np_i > 0) & (np_i < tiny))
    torch.testing.assert_close(np_i.sum(dim=1) / 3000, torch.ones(1, 8))  # the mass is all still there
