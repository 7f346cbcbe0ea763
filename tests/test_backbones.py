"""Families built around a pretrained language model (`hf-longdoc train --backbone`): the backbone's weights and its
own tokenizer are used, and the saved tokenizer truncates where the model stops reading. Tests build a tiny random
BERT, save it with its tokenizer and load it back as the "pretrained" checkpoint; nothing is downloaded."""

import json

import pytest
import torch
from transformers import AutoTokenizer, BertConfig, BertModel

from hf_longdoc.cli import main
from hf_longdoc.data import fit_wordpiece_tokenizer, make_long_document_task
from hf_longdoc.training import build_model


@pytest.fixture(scope="module")
def pretrained(tmp_path_factory):
    """A folder holding a tiny random BertModel and a WordPiece tokenizer that returns token_type_ids, as BERT's do."""
    folder = tmp_path_factory.mktemp("tiny-bert")
    texts = make_long_document_task(train_size=16, validation_size=4, test_size=8, min_words=40, max_words=80,
                                    seed=1)["train"]["text"]
    tokenizer = fit_wordpiece_tokenizer(texts, vocab_size=200, model_max_length=64)
    tokenizer.model_input_names = ["input_ids", "token_type_ids", "attention_mask"]
    torch.manual_seed(0)
    config = BertConfig(vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=1, num_attention_heads=4,
                        intermediate_size=37, max_position_embeddings=64, pad_token_id=tokenizer.pad_token_id)
    BertModel(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return str(folder)


@pytest.mark.parametrize("family, encoder", [("segment_lm", "segment_lm.backbone"),
                                             ("sparse_longformer", "longformer")])
def test_the_backbone_weights_are_used(pretrained, family, encoder):
    tokenizer = AutoTokenizer.from_pretrained(pretrained)
    model = build_model(family, tokenizer, ["a", "b"], False, backbone=pretrained, max_length=128)
    source = BertModel.from_pretrained(pretrained).state_dict()
    built = dict(model.named_parameters())
    query = source["encoder.layer.0.attention.self.query.weight"]
    assert torch.equal(built[f"{encoder}.encoder.layer.0.attention.self.query.weight"], query)
    assert model.config.num_labels == 2


def test_train_from_a_backbone_saves_its_tokenizer_cut_where_the_model_stops_reading(pretrained, tmp_path, caplog):
    out = tmp_path / "segment"
    assert main(["train", "--model", "segment_lm", "--backbone", pretrained, "--task-size", "16", "--epochs", "1",
                 "--max-length", "200", "--config", "segment_length=34", "num_segments=2", "variant=rnn",
                 "--output-dir", str(out)]) == 0
    saved = AutoTokenizer.from_pretrained(out)
    assert saved.model_max_length == 2 * (34 - 2) + 2  # m·(L − 2) content tokens plus [CLS] and [SEP]
    assert "reads at most 66 tokens" in caplog.text
    assert json.loads((out / "metrics.json").read_text())["max_length"] == 66
    assert saved.get_vocab() == AutoTokenizer.from_pretrained(pretrained).get_vocab()  # no WordPiece fitted


def test_bad_backbones_fail_before_any_data_is_made(pretrained, tmp_path, capsys):
    assert main(["train", "--model", "contextualizer", "--backbone", pretrained, "--output-dir", str(tmp_path)]) == 2
    assert "--backbone" in capsys.readouterr().err
    assert main(["train", "--model", "segment_lm", "--backbone", str(tmp_path), "--output-dir", str(tmp_path)]) == 2
    assert "config.json" in capsys.readouterr().err
