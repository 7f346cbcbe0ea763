"""`reading_length`: how many input ids a model reads, from its config, the length asked for and the tokenizer's
limit; tiny configs, nothing is built or downloaded."""

import logging

from transformers import BertConfig, RobertaConfig

from hf_longdoc import ContextualizerConfig, ElementwiseConfig, SLSTMConfig
from hf_longdoc.inference.reading import UNBOUNDED, reading_length


def test_a_request_longer_than_the_model_reads_is_cut_there_and_said(caplog):
    config = SLSTMConfig(max_position_embeddings=300)
    with caplog.at_level(logging.WARNING, logger="hf_longdoc.inference.reading"):
        assert reading_length(config, 1000) == 300
    assert "reads at most 300 tokens, fewer than max_length=1000" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="hf_longdoc.inference.reading"):
        assert reading_length(config, 200) == 200  # a shorter request is kept, silently
        assert reading_length(config, 200, tokenizer_limit=100) == 200  # the request, not the tokenizer, decides
    assert caplog.text == ""


def test_without_a_request_the_model_reads_its_limit_capped_by_the_tokenizers():
    config = SLSTMConfig(max_position_embeddings=300)
    assert reading_length(config) == 300
    assert reading_length(config, tokenizer_limit=120) == 120  # a saved tokenizer: the length its run read
    assert reading_length(config, tokenizer_limit=int(1e30)) == 300  # Transformers' "no limit"
    assert reading_length(BertConfig(max_position_embeddings=128)) == 128  # any checkpoint: its positions
    assert reading_length(RobertaConfig(max_position_embeddings=130, pad_token_id=1)) == 128  # less its pad rows


def test_a_model_without_a_limit_reads_the_request_or_the_tokenizers_limit():
    config = ContextualizerConfig()
    assert reading_length(config, 5000) == 5000
    assert reading_length(config, tokenizer_limit=700) == 700
    assert reading_length(config, tokenizer_limit=UNBOUNDED) is None  # nothing bounds it
    assert reading_length(config) is None


def test_an_elementwise_model_reads_whole_materials(caplog):
    config = ElementwiseConfig(max_materials=32)  # v = 8 bytes a position: 256 bytes in all
    v = config.elements_per_material
    assert reading_length(config) == 32 * v
    assert reading_length(config, 1000) == 32 * v
    with caplog.at_level(logging.INFO, logger="hf_longdoc.inference.reading"):
        assert reading_length(config, 101) == 96  # 12 whole materials of 8 bytes
    assert "Reading 96 input ids, not 101" in caplog.text
    assert reading_length(config, 3) == v  # at least one material
    assert reading_length(config, tokenizer_limit=100) == 96
