"""The thesis' Big Bird backbone against Transformers' Big Bird (vanilla: exactly), and its selected blocks against
sparse attention written from Zaheer et al. (2020) with a dense mask."""

import math

import pytest
import torch
from safetensors.torch import load_file, save_file
from transformers import BigBirdConfig, BigBirdForSequenceClassification, BigBirdModel

from fresh_process import run_without_hf_longdoc
from hf_longdoc import SparseBigBirdConfig, SparseBigBirdForSequenceClassification, SparseBigBirdModel
from hf_longdoc.modeling.sparse_longformer.modeling_sparse_bigbird import blocks_holding

TINY = dict(vocab_size=60, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=37,
            max_position_embeddings=512, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, block_size=8,
            num_random_blocks=2, pad_token_id=0, bos_token_id=1, eos_token_id=2, sep_token_id=2)
LONG, SHORT = 200, 40  # block-sparse above (5 + 2·2) blocks of 8 = 72 tokens, full attention below


@pytest.fixture(scope="module")
def bigbird_checkpoint(tmp_path_factory):
    """A tiny Transformers Big Bird classifier saved as a checkpoint (in place of google/bigbird-roberta-base)."""
    torch.manual_seed(0)
    model = BigBirdForSequenceClassification(BigBirdConfig(**TINY, num_labels=3)).eval()
    folder = tmp_path_factory.mktemp("bigbird")
    model.save_pretrained(folder)
    return folder, model


def _inputs(lengths, seed=0):
    generator = torch.Generator().manual_seed(seed)
    n = max(lengths)
    input_ids = torch.zeros(len(lengths), n, dtype=torch.long)
    attention_mask = torch.zeros_like(input_ids)
    for row, length in enumerate(lengths):
        input_ids[row, :length] = torch.randint(3, TINY["vocab_size"], (length,), generator=generator)
        input_ids[row, 0] = TINY["bos_token_id"]
        attention_mask[row, :length] = 1
    return input_ids, attention_mask


def test_bigbird_checkpoint_loads_every_weight_unchanged(bigbird_checkpoint):
    folder, reference = bigbird_checkpoint
    model = SparseBigBirdForSequenceClassification.from_pretrained(folder)
    ours = model.state_dict()
    for name, weight in reference.state_dict().items():
        assert torch.equal(ours[name], weight), name
    assert {name for name in ours if not name.startswith("bert.selector.")} == set(reference.state_dict())


@pytest.mark.parametrize("attention_type", ["block_sparse", "original_full"])
@pytest.mark.parametrize("training", [False, True])
def test_vanilla_equals_transformers_bigbird(bigbird_checkpoint, attention_type, training):
    """`cls` is Transformers' Big Bird: the same logits in evaluation and in training (its random blocks are drawn
    from the same per-layer seed), with block-sparse and full attention, on long and short inputs."""
    folder, _ = bigbird_checkpoint
    reference = BigBirdForSequenceClassification.from_pretrained(folder, attention_type=attention_type)
    model = SparseBigBirdForSequenceClassification.from_pretrained(folder, attention_type=attention_type,
                                                                   global_selector="cls")
    reference.train(training)
    model.train(training)
    for lengths in ([LONG, LONG - 24], [SHORT]):
        input_ids, attention_mask = _inputs(lengths)
        reference.bert.set_attention_type(attention_type)  # Transformers switches to full for short inputs for good
        torch.testing.assert_close(model(input_ids, attention_mask=attention_mask).logits,
                                   reference(input_ids, attention_mask=attention_mask).logits, rtol=0, atol=0)


def _slow_blocks(selected, block_size, num_blocks, r):
    """For each middle query block, the r blocks with the most selected tokens, ties to the earlier block, among the
    blocks that are neither global (first, last) nor its sliding neighbours."""
    counts = [sum(selected[j * block_size:(j + 1) * block_size]) for j in range(num_blocks)]
    rows = []
    for i in range(1, num_blocks - 1):
        free = [j for j in range(num_blocks) if j not in (0, num_blocks - 1, i - 1, i, i + 1)]
        rows.append(sorted(sorted(free, key=lambda j: (-counts[j], j))[:r]))
    return rows


def test_blocks_holding_the_most_selected_tokens():
    generator = torch.Generator().manual_seed(1)
    selected = torch.rand(3, 13 * 4, generator=generator) < torch.tensor([[0.05], [0.3], [0.0]])
    blocks = blocks_holding(selected, 4, 13, 3)
    for row in range(3):
        assert [sorted(r) for r in blocks[row].tolist()] == _slow_blocks(selected[row].tolist(), 4, 13, 3)


def _dense_reference(attention, hidden, allowed):
    """softmax(QKᵀ/√d + mask) V over a dense (b, n, n) mask of the allowed keys, per head."""
    b, n, _ = hidden.shape
    heads, size = attention.num_attention_heads, attention.attention_head_size

    def split(x):
        return x.view(b, n, heads, size).transpose(1, 2)

    q, k, v = split(attention.query(hidden)), split(attention.key(hidden)), split(attention.value(hidden))
    scores = q @ k.transpose(-1, -2) / math.sqrt(size)
    scores = scores.masked_fill(~allowed[:, None], -math.inf)
    return (scores.softmax(dim=-1) @ v).transpose(1, 2).reshape(b, n, heads * size)


def test_selected_blocks_equal_sparse_attention_written_from_the_paper():
    """Big Bird's pattern with the chosen blocks in place of random ones: the first and last query blocks attend to
    every key; every other query block i to blocks 0 and nb - 1, i - 1, i, i + 1 and its chosen blocks."""
    torch.manual_seed(0)
    config = SparseBigBirdConfig(**TINY, global_selector="first_n")
    model = SparseBigBirdModel(config).eval()
    block, r, n, b = config.block_size, config.num_random_blocks, LONG - LONG % 8, 2
    num_blocks = n // block
    generator = torch.Generator().manual_seed(3)
    selected = torch.rand(b, n, generator=generator) < 0.1
    chosen = blocks_holding(selected, block, num_blocks, r)  # (b, nb - 2, r)
    attention = model.encoder.layer[0].attention.self
    attention.selected_blocks = chosen
    hidden = torch.randn(b, n, config.hidden_size, generator=generator)
    mask = torch.ones(b, n)
    blocked, band, from_mask, to_mask = model.create_masks_for_block_sparse_attn(mask, block)
    with torch.no_grad():
        got, _ = attention(hidden, band_mask=band, from_mask=from_mask, to_mask=to_mask, from_blocked_mask=blocked,
                           to_blocked_mask=blocked)
        block_of = torch.arange(n) // block
        allowed = torch.zeros(b, n, n, dtype=torch.bool)
        for row in range(b):
            for i in range(num_blocks):
                keys = set(range(num_blocks)) if i in (0, num_blocks - 1) else \
                    {0, num_blocks - 1, i - 1, i, i + 1, *chosen[row, i - 1].tolist()}
                allowed[row, block_of == i] = torch.isin(block_of, torch.tensor(sorted(keys)))
        expected = _dense_reference(attention, hidden, allowed)
    torch.testing.assert_close(got.view(b, n, -1), expected, rtol=1e-5, atol=1e-5)


def test_the_selector_chooses_the_blocks_and_the_logits_follow():
    torch.manual_seed(0)
    config = SparseBigBirdConfig(**TINY, num_labels=2, global_selector="tfidf", num_global_tokens=12)
    model = SparseBigBirdForSequenceClassification(config).eval()
    corpus = [_inputs([LONG], seed=s)[0][0].tolist() for s in range(8)]
    model.fit_global_selector(corpus, progress=False)
    input_ids, attention_mask = _inputs([LONG, LONG - 50], seed=11)
    first_n = model.select_global_tokens(input_ids, attention_mask, "first_n")
    with torch.no_grad():
        tfidf = model.bert(input_ids, attention_mask=attention_mask).last_hidden_state
        first = model.bert(input_ids, attention_mask=attention_mask, global_attention_mask=first_n).last_hidden_state
        model.config.global_selector = "cls"
        vanilla = model.bert(input_ids, attention_mask=attention_mask).last_hidden_state
        model.config.global_selector = "tfidf"
    assert not torch.allclose(tfidf, first, atol=1e-4)  # other blocks, other states
    assert not torch.allclose(tfidf, vanilla, atol=1e-4)
    # training and evaluation read the same blocks: nothing random (dropout is 0 here)
    model.train()
    torch.testing.assert_close(model.bert(input_ids, attention_mask=attention_mask).last_hidden_state, tfidf)


def test_bad_inputs_get_clear_errors():
    model = SparseBigBirdForSequenceClassification(SparseBigBirdConfig(**TINY, global_selector="tfidf")).eval()
    input_ids, attention_mask = _inputs([LONG])
    with pytest.raises(ValueError, match="fit_global_selector"):
        model(input_ids, attention_mask=attention_mask)
    with pytest.raises(ValueError, match="global_attention_mask"):
        model(input_ids, global_attention_mask=torch.ones(1, 3))
    with pytest.raises(ValueError, match="labels"):
        model(input_ids, labels=torch.tensor([7]))
    with pytest.raises(ValueError, match="attention_type"):
        SparseBigBirdConfig(attention_type="sliding")


LOAD_AND_PREDICT = """
    import torch
    from safetensors.torch import load_file, save_file
    from transformers import AutoModelForSequenceClassification
    folder, inputs, outputs = sys.argv[1:4]
    model = AutoModelForSequenceClassification.from_pretrained(folder, trust_remote_code=True).eval()
    batch = load_file(inputs)
    with torch.no_grad():
        logits = model(batch["input_ids"], attention_mask=batch["attention_mask"]).logits
    save_file({"logits": logits.contiguous()}, outputs)
"""


def test_saved_model_keeps_its_statistics_and_loads_without_hf_longdoc(tmp_path):
    torch.manual_seed(0)
    config = SparseBigBirdConfig(**TINY, num_labels=2, global_selector="pmi", num_global_tokens=12, pmi_min_count=1)
    model = SparseBigBirdForSequenceClassification(config).eval()
    model.fit_global_selector([_inputs([LONG], seed=s)[0][0].tolist() for s in range(8)], progress=False)
    model.save_pretrained(tmp_path / "model")
    input_ids, attention_mask = _inputs([LONG, 150], seed=5)
    with torch.no_grad():
        expected = model(input_ids, attention_mask=attention_mask).logits
    save_file({"input_ids": input_ids, "attention_mask": attention_mask}, str(tmp_path / "inputs.safetensors"))
    run_without_hf_longdoc(LOAD_AND_PREDICT, tmp_path / "model", tmp_path / "inputs.safetensors",
                           tmp_path / "out.safetensors", workdir=tmp_path)
    assert torch.equal(load_file(str(tmp_path / "out.safetensors"))["logits"], expected)


def test_a_plain_bigbird_model_loads_into_the_base_class(bigbird_checkpoint):
    folder, reference = bigbird_checkpoint
    base = SparseBigBirdModel.from_pretrained(folder, global_selector="cls").eval()
    plain = BigBirdModel.from_pretrained(folder).eval()
    input_ids, attention_mask = _inputs([LONG])
    with torch.no_grad():
        torch.testing.assert_close(base(input_ids, attention_mask=attention_mask).last_hidden_state,
                                   plain(input_ids, attention_mask=attention_mask).last_hidden_state)


def test_block_sparse_head_honours_config_return_dict_false():
    """At a length that runs block-sparse attention, `return_dict=False` in the config gives the argument's tuple
    (Transformers' own Big Bird head fails there on its encoder's tuple)."""
    config = SparseBigBirdConfig(vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                                 intermediate_size=37, max_position_embeddings=1024, block_size=16,
                                 num_random_blocks=2, attention_type="block_sparse", global_selector="first_n")
    model = SparseBigBirdForSequenceClassification(config).eval()
    input_ids = torch.randint(5, 100, (2, 500))
    labels = torch.tensor([0, 1])
    with torch.no_grad():
        as_dict = model(input_ids, labels=labels)
        model.config.return_dict = False
        as_tuple = model(input_ids, labels=labels)
    assert isinstance(as_tuple, tuple)
    torch.testing.assert_close(as_tuple[0], as_dict.loss, rtol=0, atol=0)
    torch.testing.assert_close(as_tuple[1], as_dict.logits, rtol=0, atol=0)


@pytest.mark.parametrize("selector", ["cls", "first_n", "random"])
@pytest.mark.parametrize("lengths", [(LONG, 130), (SHORT, 25)])
def test_the_traced_graphs_dense_mask_computes_what_block_sparse_attention_does(selector, lengths):
    """What ONNX export traces (`traced_attention_mask`: full attention under one additive mask, built with tensor
    ops) against the block-sparse forward, on padded batches, block-sparse and short. Vanilla Big Bird's evaluation
    reads block 0 in place of its r random blocks, so block 0 counts 1 + r times: the mask adds log(1 + r)."""
    from unittest import mock

    torch.manual_seed(0)
    model = SparseBigBirdModel(SparseBigBirdConfig(**TINY, global_selector=selector, num_global_tokens=6)).eval()
    input_ids, attention_mask = _inputs(lengths, seed=2)
    generator = torch.Generator().manual_seed(5)
    with torch.no_grad():
        expected = model(input_ids, attention_mask=attention_mask, global_selector_generator=generator)
        before = model.attention_type
        with mock.patch("torch.compiler.is_compiling", return_value=True):  # the path a traced graph takes
            generator.manual_seed(5)
            model.selector.forward = lambda ids, real, **kwargs: type(model.selector).forward(
                model.selector, ids, real, generator=generator)
            traced = model(input_ids, attention_mask=attention_mask)
    real = attention_mask.bool()
    torch.testing.assert_close(traced.last_hidden_state[real], expected.last_hidden_state[real], rtol=1e-4,
                               atol=1e-5)
    assert model.attention_type == before  # the traced path restores the attention type
