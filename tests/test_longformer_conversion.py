"""`SparseLongformerForSequenceClassification.from_bert_like_pretrained`: the Longformer paper's conversion of a short
BERT / RoBERTa checkpoint (Beltagy et al. 2020, Sec. 5) on tiny random checkpoints saved to temporary folders."""

import logging

import pytest
import torch
from transformers import (
    BertConfig,
    BertForSequenceClassification,
    BertModel,
    CamembertConfig,
    CamembertModel,
    ElectraConfig,
    ElectraModel,
    GPT2Config,
    GPT2Model,
    RobertaConfig,
    RobertaModel,
    XLMRobertaConfig,
    XLMRobertaModel,
)

from hf_longdoc import SparseLongformerForSequenceClassification

SIZES = dict(vocab_size=99, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=37)
LENGTH = 64  # learned positions of both sources (RoBERTa's table has 2 more rows: 0 and its pad id 1 are reserved)
# source -> (model class, config, the id of its first token, the first id of ordinary tokens)
SOURCES = {
    "bert": (BertModel, BertConfig(**SIZES, max_position_embeddings=LENGTH), 2, 5),  # pad 0, type_vocab_size 2
    "roberta": (RobertaModel, RobertaConfig(**SIZES, max_position_embeddings=LENGTH + 2, type_vocab_size=1), 0, 4),
    # the same layers under other names of model: RoBERTa's numbering (XLM-R, CamemBERT) and BERT's (ELECTRA)
    "xlm-roberta": (XLMRobertaModel, XLMRobertaConfig(**SIZES, max_position_embeddings=LENGTH + 2, type_vocab_size=1),
                    0, 4),
    "camembert": (CamembertModel, CamembertConfig(**SIZES, max_position_embeddings=LENGTH + 2, type_vocab_size=1),
                  0, 4),
    "electra": (ElectraModel, ElectraConfig(**SIZES, embedding_size=32, max_position_embeddings=LENGTH), 2, 5),
}


@pytest.fixture(scope="module", params=sorted(SOURCES))
def checkpoint(request, tmp_path_factory):
    """(name, folder, source model in eval mode): a tiny random encoder whose every parameter (LayerNorms and biases
    too) is perturbed, so a weight copied to the wrong place changes the outputs."""
    model_class, config, _, _ = SOURCES[request.param]
    torch.manual_seed(0)
    model = model_class(config).eval()
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.add_(0.1 * torch.randn_like(parameter))
    folder = tmp_path_factory.mktemp(request.param)
    model.save_pretrained(folder)
    return request.param, folder, model


def _documents(name, lengths, seed=0):
    """Right-padded input_ids, attention_mask and token_type_ids (the second half of each document is segment 1 where
    the source has two segment types)."""
    _, config, first_id, lowest = SOURCES[name]
    generator = torch.Generator().manual_seed(seed)
    input_ids = torch.full((len(lengths), max(lengths)), config.pad_token_id)
    attention_mask, token_type_ids = torch.zeros_like(input_ids), torch.zeros_like(input_ids)
    for row, length in enumerate(lengths):
        input_ids[row, :length] = torch.randint(lowest, config.vocab_size, (length,), generator=generator)
        input_ids[row, 0] = first_id
        attention_mask[row, :length] = 1
        token_type_ids[row, length // 2: length] = config.type_vocab_size - 1
    return input_ids, attention_mask, token_type_ids


def _source_positions(name, n):
    """The source's position ids of tokens 0..n-1 of a right-padded document, taken mod its length."""
    first = 0 if name in ("bert", "electra") else SOURCES[name][1].pad_token_id + 1
    return first + torch.arange(n) % LENGTH


# --- equality with the source encoder ------------------------------------------------------------------------------


@pytest.mark.parametrize("backend", ["longformer", "blocked", "flex"])
def test_converted_model_equals_source_encoder(checkpoint, backend):
    """Window 128 covers 64 tokens (each side sees 64 neighbours) and [CLS] is global: the source's function."""
    name, folder, source = checkpoint
    model = SparseLongformerForSequenceClassification.from_bert_like_pretrained(
        folder, max_length=LENGTH, attention_window=2 * LENGTH, global_selector="cls", attention_backend=backend)
    assert not model.training
    input_ids, attention_mask, token_type_ids = _documents(name, [LENGTH, 41])
    with torch.no_grad():
        expected = source(input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids).last_hidden_state
        got = model.longformer(input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids)
    got = got.last_hidden_state
    torch.testing.assert_close(got[:, 0], expected[:, 0], rtol=0, atol=1e-5)  # [CLS]
    real = attention_mask.bool()
    torch.testing.assert_close(got[real], expected[real], rtol=0, atol=1e-5)  # every real token


def test_window_needs_to_span_the_document(checkpoint):
    """Window w lets a token see w/2 neighbours each side: w = 64 reproduces the source on documents of ≤ 33 tokens."""
    name, folder, source = checkpoint
    model = SparseLongformerForSequenceClassification.from_bert_like_pretrained(
        folder, max_length=LENGTH, attention_window=LENGTH, global_selector="cls")
    input_ids, attention_mask, token_type_ids = _documents(name, [LENGTH // 2 + 1, 20], seed=1)
    with torch.no_grad():
        expected = source(input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids).last_hidden_state
        got = model.longformer(input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids)
    real = attention_mask.bool()
    torch.testing.assert_close(got.last_hidden_state[real], expected[real], rtol=0, atol=1e-5)


# --- the converted weights at 4x the length ------------------------------------------------------------------------


def test_positions_repeat_and_global_projections_copy_the_local_ones(checkpoint, caplog):
    name, folder, source = checkpoint
    max_length = 4 * LENGTH
    with caplog.at_level(logging.INFO, logger="hf_longdoc.modeling.sparse_longformer.modeling_sparse_longformer"):
        model = SparseLongformerForSequenceClassification.from_bert_like_pretrained(
            folder, max_length=max_length, attention_window=32, num_labels=3, global_selector="first_n",
            num_global_tokens=4)
    assert f"Converted the {name} checkpoint" in caplog.text
    config, source_config = model.config, source.config
    pad = source_config.pad_token_id
    assert (config.pad_token_id, config.vocab_size, config.type_vocab_size, config.num_labels) == (
        pad, source_config.vocab_size, source_config.type_vocab_size, 3)
    assert config.max_position_embeddings == max_length + pad + 1
    assert (config.global_selector, config.num_global_tokens) == ("first_n", 4)

    table = model.longformer.embeddings.position_embeddings.weight  # (pad + 1 + max_length, d)
    source_table = source.embeddings.position_embeddings.weight
    assert table.shape == (max_length + pad + 1, SIZES["hidden_size"])
    if name in ("bert", "electra"):  # BERT has no reserved rows: row 0 (the pad tokens' position) is zero
        assert not table[: pad + 1].any()
    else:
        assert torch.equal(table[: pad + 1], source_table[: pad + 1])
    for copy in range(4):
        assert torch.equal(table[pad + 1 + copy * LENGTH: pad + 1 + (copy + 1) * LENGTH], source_table[-LENGTH:])

    ours, theirs = model.longformer.state_dict(), source.state_dict()
    for layer in range(SIZES["num_hidden_layers"]):
        for projection in ("query", "key", "value"):
            for kind in ("weight", "bias"):
                local = f"encoder.layer.{layer}.attention.self.{projection}.{kind}"
                assert torch.equal(ours[local.replace(projection, f"{projection}_global")], theirs[local])
    for key, tensor in theirs.items():
        if not key.startswith(("pooler.", "embeddings.position_embeddings")):
            assert torch.equal(ours[key], tensor), key

    # token i of a long right-padded document embeds with the source's position i mod 64
    input_ids, attention_mask, token_type_ids = _documents(name, [3 * LENGTH + 5, 70], seed=2)
    n = input_ids.shape[1]
    with torch.no_grad():
        got = model.longformer.embeddings(input_ids=input_ids, token_type_ids=token_type_ids)
        expected = source.embeddings(input_ids=input_ids, token_type_ids=token_type_ids,
                                     position_ids=_source_positions(name, n).expand(2, n))
        logits = model(input_ids, attention_mask=attention_mask).logits  # the whole model runs at this length
    real = attention_mask.bool()
    torch.testing.assert_close(got[real], expected[real], rtol=0, atol=1e-6)
    assert logits.shape == (2, 3) and torch.isfinite(logits).all()


def test_a_classifier_checkpoint_gives_its_encoder(tmp_path):
    """A `BertForSequenceClassification` folder: its `bert.*` encoder is converted, its classifier dropped."""
    torch.manual_seed(1)
    classifier = BertForSequenceClassification(BertConfig(**SIZES, max_position_embeddings=LENGTH, num_labels=5))
    classifier.save_pretrained(tmp_path)
    model = SparseLongformerForSequenceClassification.from_bert_like_pretrained(tmp_path, max_length=100,
                                                                                attention_window=8)
    assert model.config.num_labels == 2  # a new head, sized by config_kwargs (here the default), not the source's 5
    layer, source_layer = model.longformer.encoder.layer[1], classifier.bert.encoder.layer[1]
    assert torch.equal(layer.output.LayerNorm.weight, source_layer.output.LayerNorm.weight)
    assert torch.equal(layer.attention.self.key_global.weight, source_layer.attention.self.key.weight)


# --- bad arguments -------------------------------------------------------------------------------------------------


def test_a_folder_without_config_is_refused(tmp_path):
    with pytest.raises(ValueError, match=r"`pretrained_model_name_or_path`.*no config\.json"):
        SparseLongformerForSequenceClassification.from_bert_like_pretrained(tmp_path)


def test_a_gpt2_checkpoint_is_refused(tmp_path):
    GPT2Model(GPT2Config(n_embd=32, n_layer=1, n_head=4, n_positions=16, vocab_size=99)).save_pretrained(tmp_path)
    with pytest.raises(ValueError, match=r"`pretrained_model_name_or_path`.*'gpt2' checkpoint.*not BERT's.*'bert', "
                                         r"'electra', 'roberta', 'xlm-roberta', 'camembert'"):
        SparseLongformerForSequenceClassification.from_bert_like_pretrained(tmp_path)


def test_sizes_fixed_by_the_checkpoint_are_refused(checkpoint):
    _, folder, _ = checkpoint
    with pytest.raises(ValueError, match=r"hidden_size.*come from the checkpoint"):
        SparseLongformerForSequenceClassification.from_bert_like_pretrained(folder, max_length=LENGTH,
                                                                            hidden_size=64)
    with pytest.raises(ValueError, match=r"`max_length` must be a positive integer"):
        SparseLongformerForSequenceClassification.from_bert_like_pretrained(folder, max_length=0)
