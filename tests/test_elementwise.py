"""Elementwise language representation (paper 000): tokenizer, the reshape and focus embeddings, v-gram pooling,
Table 1 sizes, and the patent First/Later relabeling."""

import os

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from transformers import AutoTokenizer, DataCollatorWithPadding

from fresh_process import run_without_hf_longdoc
from hf_longdoc import ElementwiseConfig, ElementwiseForSequenceClassification, ElementwiseModel, ElementwiseTokenizer
from hf_longdoc.data.patents import build_label_space, multi_hot, relabel_first_later, subclass
from hf_longdoc.modeling.elementwise.modeling_elementwise import vgram_pool

BERT = {"model_type": "bert", "hidden_size": 32, "num_hidden_layers": 1, "num_attention_heads": 4,
        "intermediate_size": 37, "max_position_embeddings": 64, "hidden_dropout_prob": 0.0,
        "attention_probs_dropout_prob": 0.0}


# --- tokenizer --------------------------------------------------------------------------------------------------


def test_ids_follow_the_design():
    tokenizer = ElementwiseTokenizer(elements_per_material=4)
    ids = tokenizer("ab Zq")["input_ids"]
    a, b, z, q = (ord(ch) + 4 for ch in "abZq")
    assert ids == [1, 0, 0, 0, a, b, 0, 0, z, q, 0, 0, 2, 0, 0, 0]  # [CLS] material, words, [SEP] material
    assert tokenizer("ab Zq")["attention_mask"] == [1, 0, 0, 0, 1, 1, 0, 0, 1, 1, 0, 0, 1, 0, 0, 0]
    assert (tokenizer.pad_token_id, tokenizer.cls_token_id, tokenizer.sep_token_id, tokenizer.mask_token_id) == \
        (0, 1, 2, 3)
    assert len(tokenizer) == 260


def test_long_words_are_truncated_or_split():
    truncate = ElementwiseTokenizer(elements_per_material=4)
    split = ElementwiseTokenizer(elements_per_material=4, long_word="split")
    text = "elementwise is here"
    assert truncate.decode(truncate(text)["input_ids"], skip_special_tokens=True) == "elem is here"
    ids = split(text)["input_ids"]
    assert len(ids) == 4 * (1 + 3 + 1 + 1 + 1)  # elem|entw|ise + is + here
    assert split.decode(ids, skip_special_tokens=True) == text


def test_bytes_mode_cuts_the_stream_every_v_bytes_and_round_trips():
    tokenizer = ElementwiseTokenizer(elements_per_material=4, mode="bytes")
    text = "日本語 😀 naïve"  # characters whose bytes straddle material borders
    ids = tokenizer(text)["input_ids"]
    data = text.encode("utf-8")
    assert len(ids) == 4 * (2 + -(-len(data) // 4))
    assert tokenizer.decode(ids, skip_special_tokens=True) == text
    assert tokenizer.decode(ids) == f"[CLS]{text}[SEP]"


def test_pairs_padding_and_truncation_move_whole_materials():
    tokenizer = ElementwiseTokenizer(elements_per_material=4, max_materials=8)
    pair = tokenizer("one two three four five", "six seven", truncation=True, max_length=24)
    assert len(pair["input_ids"]) == 24
    assert tokenizer.decode(pair["input_ids"]) == "[CLS] one two [SEP] six [SEP]"  # longest first, as Transformers
    batch = tokenizer(["a", "a b c d e"], padding=True)
    assert [len(ids) for ids in batch["input_ids"]] == [28, 28]
    assert batch["attention_mask"][0][12:] == [0] * 16
    long = tokenizer(" ".join(["w"] * 50), truncation=True)
    assert len(long["input_ids"]) == tokenizer.model_max_length == 32
    collated = DataCollatorWithPadding(tokenizer)([tokenizer("a"), tokenizer("a b c")])
    assert collated["input_ids"].shape == (2, 20)
    with pytest.raises(ValueError, match="multiple of `elements_per_material`"):
        tokenizer("abc", truncation=True, max_length=10)
    with pytest.raises(TypeError, match="must be a str"):
        tokenizer(123)


@settings(max_examples=200, deadline=None)
@given(st.text(), st.sampled_from(["whitespace", "bytes", "vgram"]), st.sampled_from(["truncate", "split"]),
       st.integers(1, 9))
def test_any_unicode_encodes_to_whole_materials(text, mode, long_word, v):
    tokenizer = ElementwiseTokenizer(elements_per_material=v, mode=mode, long_word=long_word)
    encoded = tokenizer(text)
    assert len(encoded["input_ids"]) % v == 0 and len(encoded["input_ids"]) == len(encoded["attention_mask"])
    assert all(0 <= i < 260 for i in encoded["input_ids"])
    if mode != "whitespace":
        assert tokenizer.decode(encoded["input_ids"], skip_special_tokens=True) == text
    else:
        words = text.encode("utf-8", "surrogatepass").split()
        assert len(encoded["input_ids"]) >= v * (2 + len(words))


def test_tokenizer_saves_and_loads_with_and_without_hf_longdoc(tmp_path):
    tokenizer = ElementwiseTokenizer(elements_per_material=8, max_materials=32, mode="bytes")
    tokenizer.save_pretrained(tmp_path)
    assert not any(name.endswith((".bin", ".pkl")) for name in os.listdir(tmp_path))
    loaded = AutoTokenizer.from_pretrained(tmp_path)
    assert type(loaded) is ElementwiseTokenizer and loaded.mode == "bytes" and loaded.model_max_length == 256
    result = run_without_hf_longdoc("""
        from transformers import AutoTokenizer
        tokenizer = AutoTokenizer.from_pretrained(sys.argv[1], trust_remote_code=True)
        print(tokenizer("héllo wörld")["input_ids"])
    """, tmp_path, workdir=tmp_path, timeout=120)
    assert result.stdout.strip() == str(tokenizer("héllo wörld")["input_ids"])


# --- the model: Section 4.2 ---------------------------------------------------------------------------------------


def _model(**overrides):
    torch.manual_seed(0)
    config = ElementwiseConfig(backbone_config=BERT, elements_per_material=4, max_materials=16,
                               embedding_dropout=0.0, **overrides)
    return ElementwiseModel(config).eval()


def test_reshape_concatenates_v_elements_into_one_material():
    model = _model(use_focus_embeddings=False, use_embedding_layer_norm=False)
    ids = torch.randint(4, 260, (2, 12))
    materials = model.embeddings(ids, ids != 0)
    table = model.embeddings.element_embeddings.weight
    for b in range(2):
        for i in range(3):
            expected = torch.cat([table[ids[b, 4 * i + j]] for j in range(4)])  # e(i) = [e(i)[1], ..., e(i)[v]]
            torch.testing.assert_close(materials[b, i], expected)


def test_focus_embeddings_add_global_per_element_and_local_per_slot():
    model = _model(use_embedding_layer_norm=False)
    embeddings = model.embeddings
    ids = torch.randint(4, 260, (1, 8))
    materials = embeddings(ids, ids != 0)[0]  # (2, 16)
    table, g, f = embeddings.element_embeddings.weight, embeddings.global_focus.weight, embeddings.local_focus
    for i in range(2):
        # e(i) <- Reshape[{e(i)[j] ⊕ g(p)}_j] ⊕ f, p the element's position in the sequence, f[j] its slot's
        expected = torch.cat([table[ids[0, 4 * i + j]] + g[4 * i + j] + f[j] for j in range(4)])
        torch.testing.assert_close(materials[i], expected)


def test_backbone_token_embeddings_are_not_allocated():
    model = ElementwiseForSequenceClassification(ElementwiseConfig(backbone_config=BERT, elements_per_material=4,
                                                                   max_materials=16))
    names = list(model.state_dict())
    assert not any("word_embeddings" in name for name in names)
    assert model.elementwise.get_input_embeddings().weight.shape == (260, 8)


def test_vgram_pool_matches_a_loop():
    torch.manual_seed(1)
    v, c = 3, 5
    e = torch.randn(2, 7, c)
    mask = torch.ones(2, 7, dtype=torch.bool)
    mask[1, 5:] = False  # PAD elements at the end of the second row
    s = torch.randn(c)
    pooled = vgram_pool(e, mask, s, v)
    for b in range(2):
        for t in range(7):
            window = [t + j for j in range(v) if t + j < 7 and mask[b, t + j]]
            if not window:
                assert torch.all(pooled[b, t] == 0)
                continue
            alpha = torch.softmax(torch.stack([e[b, k] @ s for k in window]), dim=0)
            torch.testing.assert_close(pooled[b, t], sum(a * e[b, k] for a, k in zip(alpha, window)))


def test_vgram_mode_has_no_focus_embeddings_and_learns_s():
    model = _model(mode="vgram")
    assert model.embeddings.global_focus is None and model.embeddings.vgram_scorer is not None
    ids = torch.randint(4, 260, (2, 16))
    model.train()(ids).last_hidden_state.sum().backward()
    assert model.embeddings.vgram_scorer.grad.abs().sum() > 0


def test_head_count_must_equal_v_unless_allowed():
    with pytest.raises(ValueError, match="num_attention_heads` to 8"):
        ElementwiseConfig(backbone_config=BERT, elements_per_material=8)
    config = ElementwiseConfig(backbone_config=BERT, elements_per_material=8, allow_head_mismatch=True,
                               max_materials=16)
    assert config.element_size == 4
    ids = torch.randint(4, 260, (1, 32))
    assert ElementwiseModel(config)(ids).last_hidden_state.shape == (1, 4, 32)


def test_inputs_must_come_in_whole_materials():
    model = _model()
    with pytest.raises(ValueError, match="multiple of `elements_per_material`"):
        model(torch.randint(4, 260, (1, 10)))
    long = torch.randint(4, 260, (1, 4 * 17))  # one material more than max_materials: read up to u·v, with a warning
    model.eval()
    read = torch.cat([long[:, :4 * 15], long[:, -4:]], dim=1)  # as truncation=True: the closing material kept
    torch.testing.assert_close(model(long).last_hidden_state, model(read).last_hidden_state)


def test_end_to_end_on_text_through_the_auto_classes(tmp_path):
    from transformers import AutoModelForSequenceClassification, pipeline

    tokenizer = ElementwiseTokenizer(elements_per_material=4, max_materials=16)
    model = ElementwiseForSequenceClassification(ElementwiseConfig(backbone_config=BERT, elements_per_material=4,
                                                                   max_materials=16, num_labels=2)).eval()
    model.save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    loaded = AutoModelForSequenceClassification.from_pretrained(tmp_path).eval()
    batch = tokenizer(["a short text", "another text that is a bit longer"], padding=True, return_tensors="pt")
    with torch.no_grad():
        torch.testing.assert_close(loaded(**batch).logits, model(**batch).logits)
    result = pipeline("text-classification", model=str(tmp_path))("a short text")
    assert result[0]["label"] in ("LABEL_0", "LABEL_1")


# --- Table 1 ------------------------------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("backbone,total,embedding", [("bert", 87e6, 12e3), ("albert", 9e6, 2e3)])
def test_paper_configurations_match_table_1(backbone, total, embedding):
    """Table 1 counts the patent classifier (1,328 First/Later labels); the embedding column is the element table."""
    config = ElementwiseConfig.from_paper(backbone, num_labels=1328)
    assert (config.max_materials, config.elements_per_material, config.num_attention_heads) == (128, 16, 16)
    model = ElementwiseForSequenceClassification(config)
    count = sum(p.numel() for p in model.parameters())
    elements = model.elementwise.embeddings.element_embeddings.weight.numel()
    print(f"{backbone}_EWE: {count / 1e6:.2f}M parameters, element table {elements} (Table 1: {total / 1e6:.0f}M, "
          f"{embedding / 1e3:.0f}k)")
    assert abs(count - total) / total < 0.05
    assert abs(elements - embedding) / embedding < 0.05


@pytest.mark.slow
def test_canine_paper_configuration_builds():
    """CANINE_EWE is reported, not matched (see the note on issue 3): its position table stays at 16,384 rows."""
    config = ElementwiseConfig.from_paper("canine", num_labels=1328)
    model = ElementwiseForSequenceClassification(config)
    count = sum(p.numel() for p in model.parameters())
    print(f"canine_EWE: {count / 1e6:.2f}M parameters (Table 1: 110M)")
    assert config.element_size == 48 and 100e6 < count < 130e6


# --- patents ------------------------------------------------------------------------------------------------------


def test_cpc_subclasses():
    assert subclass("A01N 53/12") == "A01N" and subclass("g06q10/08") == "G06Q" and subclass("Y02E 10/50") == "Y02E"
    with pytest.raises(ValueError, match="CPC/IPC"):
        subclass("53/12")


def test_first_later_relabeling_reproduces_figure_4():
    space = build_label_space([["G06Q 10/00", "A01B 1/00"]])
    assert space == ["First-A01B", "First-G06Q", "Later-A01B", "Later-G06Q"]
    assert relabel_first_later(["G06Q", "G06Q", "A01B"]) == ["First-G06Q", "Later-A01B", "Later-G06Q"]
    expected = {("G06Q", "G06Q", "A01B"): [0, 1, 1, 1], ("A01B", "G06Q", "A01B"): [1, 0, 1, 1],
                ("G06Q", "A01B"): [0, 1, 1, 0]}
    for codes, vector in expected.items():
        np.testing.assert_array_equal(multi_hot(relabel_first_later(list(codes)), space), vector)
    with pytest.raises(ValueError, match="non-empty"):
        relabel_first_later([])


def test_truncated_long_words_are_counted_in_the_log(caplog):
    """The paper's `long_word="truncate"` cuts words longer than v bytes; every cut is counted, never silent."""
    from transformers.testing_utils import CaptureLogger
    from transformers.utils import logging as hf_logging

    from hf_longdoc.modeling.elementwise.tokenization_elementwise import ElementwiseTokenizer

    tokenizer = ElementwiseTokenizer(elements_per_material=8, max_materials=64)
    logger = hf_logging.get_logger("hf_longdoc.modeling.elementwise.tokenization_elementwise")
    with CaptureLogger(logger) as captured:
        tokenizer("Donaudampfschifffahrt und 吾輩は猫である")
    assert tokenizer.words_cut == 2 and "2 words longer than 8 bytes cut" in captured.out
    tokenizer("short words only")
    assert tokenizer.words_cut == 2


def test_tokenizer_refuses_left_padding():
    from hf_longdoc.modeling.elementwise.tokenization_elementwise import ElementwiseTokenizer

    with pytest.raises(ValueError, match="right only"):
        ElementwiseTokenizer(elements_per_material=4, max_materials=16, padding_side="left")
    tokenizer = ElementwiseTokenizer(elements_per_material=4, max_materials=16)
    with pytest.raises(ValueError, match="right only"):
        tokenizer(["a b", "a b c d"], padding=True, padding_side="left")
    tokenizer.padding_side = "left"
    with pytest.raises(ValueError, match="right only"):
        tokenizer(["a b", "a b c d"], padding=True)


def test_standard_size_names_set_the_backbone_before_w_is_split():
    """`--config hidden_size=32` (the CLI) resizes the backbone, and c = w / v follows; before, c kept the default
    backbone's width and the forward failed on a shape mismatch."""
    from hf_longdoc.modeling.elementwise import ElementwiseConfig, ElementwiseForSequenceClassification

    config = ElementwiseConfig(hidden_size=32, num_hidden_layers=1, max_materials=16)
    assert config.backbone_config.hidden_size == 32 and config.element_size == 32 // config.elements_per_material
    model = ElementwiseForSequenceClassification(config).eval()
    ids = torch.randint(4, 260, (2, 16 * config.elements_per_material))
    assert model(ids).logits.shape == (2, 2)
    assert ElementwiseConfig.from_dict(config.to_dict()).element_size == config.element_size


@pytest.mark.parametrize("tokenizer_v, model_v", [(16, 8), (8, 16)])
def test_a_tokenizer_of_another_material_width_is_refused_naming_both(tokenizer_v, model_v):
    """The issue's case: `ElementwiseTokenizer()` (v = 16) with `ElementwiseConfig()` (v = 8) turned a 5-word input
    into 10 materials, each word's second half read as padding, with no error."""
    from hf_longdoc import ElementwiseConfig, ElementwiseForSequenceClassification, ElementwiseTokenizer

    backbone = {"model_type": "bert", "hidden_size": 32, "num_hidden_layers": 1, "num_attention_heads": model_v,
                "intermediate_size": 37, "max_position_embeddings": 64}
    model = ElementwiseForSequenceClassification(ElementwiseConfig(backbone_config=backbone,
                                                                   elements_per_material=model_v, max_materials=64))
    encoded = ElementwiseTokenizer(elements_per_material=tokenizer_v, max_materials=16)("the cat sat on mats",
                                                                                      return_tensors="pt")
    for inputs in (dict(encoded), {"input_ids": encoded["input_ids"]}):
        with pytest.raises(ValueError, match=f"elements_per_material.* \\({model_v}\\).*elements_per_material"
                                             f"={tokenizer_v}"):
            model(**inputs)
    matching = ElementwiseTokenizer(elements_per_material=model_v, max_materials=16)
    assert model(**matching("the cat sat on mats", return_tensors="pt")).logits.shape == (1, 2)


def test_from_paper_presets_follow_table_1_and_section_6_2():
    from hf_longdoc import ElementwiseConfig

    whitespace = ElementwiseConfig.from_paper()
    assert (whitespace.elements_per_material, whitespace.max_materials, whitespace.mode) == (16, 128, "whitespace")
    gradient = ElementwiseConfig.from_paper(tokenization="gradient")
    assert (gradient.elements_per_material, gradient.mode, gradient.backbone_config.num_attention_heads) == \
        (8, "vgram", 8)
    assert ElementwiseConfig.from_paper(tokenization="bytes").mode == "bytes"
    with pytest.raises(ValueError, match="tokenization"):
        ElementwiseConfig.from_paper(tokenization="bpe")


@pytest.mark.parametrize("backbone_type", ["bert", "albert", "roberta"])
def test_the_materials_are_normalised_once_by_the_backbones_own_embedding_block(backbone_type):
    """Section 4.2: the elementwise table replaces the parent's token table; the parent's embedding block (positions,
    its LayerNorm, dropout) then runs once. The optional LayerNorm before it is off by default."""
    from hf_longdoc import ElementwiseConfig, ElementwiseModel

    backbone = {"model_type": backbone_type, "hidden_size": 32, "num_hidden_layers": 1, "num_attention_heads": 4,
                "intermediate_size": 37, "max_position_embeddings": 80}
    if backbone_type == "albert":
        backbone["embedding_size"] = 32
    model = ElementwiseModel(ElementwiseConfig(backbone_config=backbone, elements_per_material=4,
                                               max_materials=16)).eval()
    calls = []
    encoder_norms = {id(m) for m in model.backbone.encoder.modules()}
    for module in model.modules():
        if isinstance(module, torch.nn.LayerNorm) and id(module) not in encoder_norms:
            module.register_forward_hook(lambda module, args, out: calls.append(module))
    ids = torch.randint(4, 260, (2, 32))
    model(ids)
    assert len(calls) == 1 and calls[0] is model.backbone.embeddings.LayerNorm
    assert isinstance(model.embeddings.layer_norm, torch.nn.Identity) and model.embeddings.dropout.p == 0.0
    calls.clear()
    normalised_twice = ElementwiseModel(ElementwiseConfig(backbone_config=backbone, elements_per_material=4,
                                                          max_materials=16, use_embedding_layer_norm=True))
    assert isinstance(normalised_twice.embeddings.layer_norm, torch.nn.LayerNorm)
