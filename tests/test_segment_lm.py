"""Segment LMs: the heads of Eq. 1-5 and 7 against a direct, per-document computation; cutting documents into
segments; the gradient modes against plain autograd (Eq. 8, Appendix A); backbones, saving and the Hub rule."""

import pytest
import torch

from hf_longdoc.modeling.segment_lm.configuration_segment import SegmentLMConfig
from hf_longdoc.modeling.segment_lm.modeling_segment import SegmentHead, SegmentLMForSequenceClassification

BACKBONE = {"model_type": "bert", "hidden_size": 12, "num_hidden_layers": 1, "num_attention_heads": 2,
            "intermediate_size": 16, "max_position_embeddings": 64}


def _head(variant, activation="softmax", m=4, q=6):
    torch.manual_seed(0)
    config = SegmentLMConfig(backbone_config=BACKBONE, variant=variant, num_segments=m, segment_length=16,
                             lstm_hidden_size=q, attention_activation=activation, classifier_dropout=0.0,
                             num_labels=3)
    head = SegmentHead(config).eval()
    if variant in ("att", "att_ablated"):
        torch.nn.init.normal_(head.context)
    return head


def _reference(head, z, count):
    """Eq. 1-5, 7 for one document with `count` present segments, in plain steps from the paper: σ of Eq. 4 is the
    softmax over the document's segments (Section 3, after Yang et al.), whatever the head is configured with."""
    variant, d, q = head.config.variant, z.shape[-1], head.config.lstm_hidden_size
    z = z[:count]
    if variant == "base":
        return head.classifier(z[0]), None
    if variant == "cat":
        full = torch.zeros(head.config.num_segments, d)
        full[:count] = z
        return head.classifier(full.flatten()), None
    h, _ = head.lstm(z[None])
    h = h[0]
    h2 = h[1] if count > 1 else torch.zeros(q)
    features = [z[0], h2, h[count - 1]]
    if variant == "rnn":
        return head.classifier(torch.cat(features)), None
    W_s, b_s, u_s = head.attention.weight, head.attention.bias, head.context
    u = [torch.tanh(W_s @ h[i] + b_s) for i in range(count)]  # u_i = tanh(W_s h_i + b_s)
    scores = torch.stack([u_i @ u_s for u_i in u])
    alpha = scores.exp() / scores.exp().sum()  # softmax_i(u_iᵀ u_s)
    a = sum(alpha[i] * h[i] for i in range(count))
    full_alpha = torch.zeros(head.config.num_segments)
    full_alpha[:count] = alpha
    tail = [a, full_alpha, z[int(alpha.argmax())]]
    return head.classifier(torch.cat(features + tail if variant == "att" else tail)), full_alpha


@pytest.mark.parametrize("variant", ["base", "cat", "rnn", "att", "att_ablated"])
def test_heads_match_the_equations_with_absent_segments(variant):
    head = _head(variant)  # the default config: the paper's softmax
    z = torch.randn(3, 4, 12)
    counts = [4, 2, 1]
    present = torch.arange(4)[None, :] < torch.tensor(counts)[:, None]
    with torch.no_grad():
        logits, alpha, selected, _ = head(z, present)
        assert logits.shape == (3, 3)
        assert head.classifier.in_features == head.config.classifier_input_size()
        for row, count in enumerate(counts):
            expected, expected_alpha = _reference(head, z[row], count)
            torch.testing.assert_close(logits[row], expected, rtol=1e-5, atol=1e-5)
            if expected_alpha is not None:
                torch.testing.assert_close(alpha[row], expected_alpha, rtol=1e-5, atol=1e-6)
                assert int(selected[row]) < count


def test_alpha_is_a_softmax_over_present_segments_by_default_and_sigmoid_on_request():
    assert SegmentLMConfig(backbone_config=BACKBONE, segment_length=16).attention_activation == "softmax"
    z = torch.randn(3, 4, 12)
    present = torch.arange(4)[None, :] < torch.tensor([4, 2, 1])[:, None]
    with torch.no_grad():
        _, alpha, _, h = _head("att")(z, present)
        torch.testing.assert_close(alpha.sum(dim=1), torch.ones(3))
        sigmoid = _head("att", activation="sigmoid")
        _, alpha, _, h = sigmoid(z, present)
        scores = torch.tanh(h @ sigmoid.attention.weight.T + sigmoid.attention.bias) @ sigmoid.context
        torch.testing.assert_close(alpha, torch.sigmoid(scores) * present)


def test_the_lm_learns_from_z1_through_every_path_and_from_z_m_only_directly():
    """Paper mode (module docstring): z_1's gradient reaches the LM through the classifier and the biLSTM / α paths;
    z_M(α)'s only through its own place in Eq. 5 (the biLSTM reads its stop-gradient copy)."""
    input_ids, attention_mask = _documents()
    model = _classifier("att", "paper")
    d, q, m = model.config.hidden_size, model.config.lstm_hidden_size, model.config.num_segments
    blocks = {"z_1": slice(0, d), "lstm": slice(d, d + 3 * q + m), "z_M": slice(d + 3 * q + m, 2 * d + 3 * q + m)}

    def backbone_gradient(keep):
        weight = model.head.classifier.weight
        with torch.no_grad():
            saved = weight.clone()
            for name, columns in blocks.items():
                if name not in keep:
                    weight[:, columns] = 0.0
        model.zero_grad()
        out = model(input_ids, attention_mask=attention_mask)
        out.logits.sum().backward()
        with torch.no_grad():
            weight.copy_(saved)
        grads = [p.grad for name, p in model.named_parameters() if name.startswith("segment_lm.backbone.encoder")]
        return torch.cat([g.flatten() if g is not None else torch.zeros(p.numel()) for g, p in
                          zip(grads, [p for name, p in model.named_parameters()
                                      if name.startswith("segment_lm.backbone.encoder")])]), out

    through_lstm, _ = backbone_gradient({"lstm"})
    assert through_lstm.abs().sum() > 0  # z_1 enters the biLSTM with its gradient
    through_z_m, out = backbone_gradient({"z_M"})
    # the same gradient, computed directly: only the encodings of the selected segments, through the z_M columns
    model.zero_grad()
    segments, mask, _ = model.segment_lm.segments(input_ids, attention_mask)
    rows = torch.arange(len(segments))
    selected = out.selected_segment
    vectors = model.segment_lm.encode(segments[rows, selected], mask[rows, selected])  # (b, d)
    (vectors @ model.head.classifier.weight[:, blocks["z_M"]].T).sum().backward()
    expected = torch.cat([p.grad.flatten() if p.grad is not None else torch.zeros(p.numel())
                          for name, p in model.named_parameters() if name.startswith("segment_lm.backbone.encoder")])
    torch.testing.assert_close(through_z_m, expected, rtol=1e-4, atol=1e-7)


def test_classifier_sizes_follow_the_paper():
    sizes = {variant: SegmentLMConfig(backbone_config=BACKBONE, variant=variant, num_segments=8,
                                      segment_length=16, lstm_hidden_size=6).classifier_input_size()
             for variant in ("base", "cat", "rnn", "att", "att_ablated")}
    d, q, m = 12, 6, 8
    assert sizes == {"base": d, "cat": m * d, "rnn": d + 2 * q, "att": 2 * d + 3 * q + m, "att_ablated": q + m + d}


@pytest.mark.parametrize("kwargs, fragment", [
    (dict(variant="lstm"), "variant"), (dict(gradient_mode="half"), "gradient_mode"),
    (dict(segment_pooling="max"), "segment_pooling"), (dict(lstm_hidden_size=5), "lstm_hidden_size"),
    (dict(segment_length=100), "segment_length"), (dict(num_segments=0), "num_segments"),
    (dict(backbone_config={"hidden_size": 8}), "model_type"),
])
def test_invalid_settings_raise(kwargs, fragment):
    with pytest.raises(ValueError, match=fragment):
        SegmentLMConfig(**{"backbone_config": BACKBONE, "segment_length": 16, **kwargs})


def test_decoder_backbones_pool_the_last_token():
    config = SegmentLMConfig(backbone_config={"model_type": "gpt2", "n_embd": 12, "n_layer": 1, "n_head": 2,
                                              "n_positions": 64}, segment_length=16)
    assert config.segment_pooling == "last"
    assert SegmentLMConfig(backbone_config=BACKBONE, segment_length=16).segment_pooling == "cls"


def test_documents_are_cut_into_wrapped_segments():
    from hf_longdoc.modeling.segment_lm.modeling_segment import cut_into_segments

    CLS, SEP, PAD = 101, 102, 0
    # a tokenized document: [CLS] 1..9 [SEP], and a short one padded
    input_ids = torch.tensor([[CLS, 1, 2, 3, 4, 5, 6, 7, 8, 9, SEP], [CLS, 11, 12, SEP] + [PAD] * 7])
    attention_mask = (input_ids != PAD).long()
    segments, mask, present = cut_into_segments(input_ids, attention_mask, num_segments=3, segment_length=5,
                                                 cls_id=CLS, sep_id=SEP, pad_id=PAD)
    assert segments[0].tolist() == [[CLS, 1, 2, 3, SEP], [CLS, 4, 5, 6, SEP], [CLS, 7, 8, 9, SEP]]
    assert segments[1].tolist() == [[CLS, 11, 12, SEP, PAD], [PAD] * 5, [PAD] * 5]
    assert present.tolist() == [[True, True, True], [True, False, False]]
    assert mask[1].long().tolist() == [[1, 1, 1, 1, 0], [0] * 5, [0] * 5]
    cut, _, _ = cut_into_segments(input_ids, attention_mask, 2, 5, CLS, SEP, PAD)  # longer than m·(L-2): cut
    assert cut[0].tolist() == [[CLS, 1, 2, 3, SEP], [CLS, 4, 5, 6, SEP]]


def _classifier(variant, gradient_mode, m=3, segments_per_pass=16):
    from hf_longdoc.modeling.segment_lm.modeling_segment import SegmentLMForSequenceClassification

    torch.manual_seed(0)
    backbone = {**BACKBONE, "hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0}
    config = SegmentLMConfig(backbone_config=backbone, variant=variant, num_segments=m, segment_length=8,
                             lstm_hidden_size=6, gradient_mode=gradient_mode, classifier_dropout=0.0, num_labels=3,
                             cls_token_id=1, sep_token_id=2, pad_token_id=0, segments_per_pass=segments_per_pass)
    model = SegmentLMForSequenceClassification(config).train()
    if variant.startswith("att"):
        torch.nn.init.normal_(model.head.context)
    return model


def _documents():
    generator = torch.Generator().manual_seed(1)
    input_ids = torch.zeros((3, 20), dtype=torch.long)
    for row, length in enumerate([20, 11, 5]):
        input_ids[row, :length] = torch.randint(3, 50, (length,), generator=generator)
        input_ids[row, 0], input_ids[row, length - 1] = 1, 2
    return input_ids, (input_ids != 0).long()


def _loop_gradients(model, input_ids, attention_mask, detach_others, detach_first=False):
    """The same loss computed segment by segment with plain autograd (the reference for both gradient modes)."""
    segments, mask, present = model.segment_lm.segments(input_ids, attention_mask)
    b, m, _ = segments.shape
    z = torch.zeros(b, m, model.config.hidden_size)
    rows = []
    for i in range(b):
        row = []
        for j in range(m):
            if present[i, j]:
                vector = model.segment_lm.encode(segments[i, j][None], mask[i, j][None])[0]
                row.append(vector.detach() if (detach_others and j > 0) or (detach_first and j == 0) else vector)
            else:
                row.append(torch.zeros(model.config.hidden_size))
        rows.append(torch.stack(row))
    z = torch.stack(rows)

    def encode_selected(selected):
        return torch.stack([z[i, 0] if int(selected[i]) == 0 and not detach_first else
                            model.segment_lm.encode(segments[i, selected[i]][None], mask[i, selected[i]][None])[0]
                            for i in range(b)])

    logits, _, _, _ = model.head(z, present, encode_selected if detach_others else None)
    model.zero_grad()
    torch.nn.functional.cross_entropy(logits, torch.tensor([0, 1, 2])).backward()
    return logits, {name: p.grad.clone() for name, p in model.named_parameters() if p.grad is not None}


@pytest.mark.parametrize("segments_per_pass", [16, 2])  # 2: the 6 present segments take 3 (checkpointed) passes
@pytest.mark.parametrize("variant", ["base", "cat", "rnn", "att", "att_ablated"])
def test_full_mode_is_exact_autograd_and_paper_mode_drops_the_other_segments(variant, segments_per_pass):
    input_ids, attention_mask = _documents()
    grads = {}
    for mode in ("full", "paper"):
        model = _classifier(variant, mode, segments_per_pass=segments_per_pass)
        out = model(input_ids, attention_mask=attention_mask, labels=torch.tensor([0, 1, 2]))
        model.zero_grad()
        out.loss.backward()
        grads[mode] = {name: p.grad.clone() for name, p in model.named_parameters() if p.grad is not None}
        expected_logits, expected = _loop_gradients(model, input_ids, attention_mask, detach_others=mode == "paper")
        torch.testing.assert_close(out.logits, expected_logits, rtol=1e-5, atol=1e-5)
        assert grads[mode].keys() == expected.keys()
        for name in expected:
            torch.testing.assert_close(grads[mode][name], expected[name], rtol=1e-4, atol=1e-6, msg=name)
    backbone = [name for name in grads["full"] if name.startswith("segment_lm.backbone.encoder")]
    differs = any(not torch.allclose(grads["full"][name], grads["paper"][name]) for name in backbone)
    assert differs == (variant != "base")  # Eq. 1 reads segment 1 only: both modes are the same gradient


@pytest.mark.parametrize("variant", ["base", "att"])
def test_selected_mode_sends_no_gradient_through_x1(variant):
    """Table 4's "No x_1 gradients": every segment encoded without gradient, z_M(α) again with it (att variants)."""
    input_ids, attention_mask = _documents()
    model = _classifier(variant, "selected")
    out = model(input_ids, attention_mask=attention_mask, labels=torch.tensor([0, 1, 2]))
    model.zero_grad()
    out.loss.backward()
    grads = {name: p.grad.clone() for name, p in model.named_parameters()
             if p.grad is not None and name.startswith("segment_lm.backbone")}
    if variant == "base":
        assert not grads  # Eq. 1 reads z_1 only: the LM is not trained
        return
    expected_logits, expected = _loop_gradients(model, input_ids, attention_mask, detach_others=True,
                                                detach_first=True)
    torch.testing.assert_close(out.logits, expected_logits, rtol=1e-5, atol=1e-5)
    for name, grad in grads.items():
        torch.testing.assert_close(grad, expected[name], rtol=1e-4, atol=1e-6, msg=name)


def test_modes_give_the_same_forward_values_and_alpha_is_returned():
    input_ids, attention_mask = _documents()
    outputs = []
    for mode in ("paper", "full", "none"):
        model = _classifier("att", mode).eval()
        with torch.no_grad():
            outputs.append(model(input_ids, attention_mask=attention_mask))
    for other in outputs[1:]:
        torch.testing.assert_close(other.logits, outputs[0].logits, rtol=0, atol=1e-6)
    alpha, present = outputs[0].alpha, outputs[0].segment_mask.bool()
    assert alpha.shape == (3, 3) and torch.all(alpha[~present] == 0)
    assert present.long().tolist() == [[1, 1, 1], [1, 1, 0], [1, 0, 0]]


def test_from_backbone_pretrained_loads_a_local_bert_and_its_tokenizer(tmp_path):
    from transformers import BertConfig, BertModel

    from hf_longdoc.data import fit_wordpiece_tokenizer
    from hf_longdoc.modeling.segment_lm.modeling_segment import SegmentLMForSequenceClassification

    texts = ["the reactor core runs hot", "a zirconium alloy resists corrosion"] * 10
    tokenizer = fit_wordpiece_tokenizer(texts, vocab_size=120, model_max_length=512)
    torch.manual_seed(0)
    bert = BertModel(BertConfig(vocab_size=len(tokenizer), hidden_size=12, num_hidden_layers=1, num_attention_heads=2,
                                intermediate_size=16, max_position_embeddings=64))
    bert.save_pretrained(tmp_path / "bert")
    tokenizer.save_pretrained(tmp_path / "bert")
    model = SegmentLMForSequenceClassification.from_backbone_pretrained(tmp_path / "bert", variant="rnn",
                                                                        num_segments=4, segment_length=16,
                                                                        num_labels=2)
    assert (model.config.cls_token_id, model.config.sep_token_id) == (tokenizer.cls_token_id, tokenizer.sep_token_id)
    for name, tensor in bert.state_dict().items():
        if not name.startswith("pooler."):
            assert torch.equal(model.segment_lm.backbone.state_dict()[name], tensor), name
    assert not any(name.startswith("pooler") for name, _ in model.segment_lm.backbone.named_parameters())
    batch = tokenizer([" ".join(texts[:6]), texts[0]], padding=True, return_tensors="pt")
    out = model(batch["input_ids"], attention_mask=batch["attention_mask"])
    assert out.logits.shape == (2, 2) and out.segment_mask[1].tolist() == [1, 0, 0, 0]


def test_bad_input_raises_clear_errors():
    model = _classifier("att", "paper")
    input_ids, attention_mask = _documents()
    with pytest.raises(ValueError, match="empty"):
        model(torch.zeros((0, 5), dtype=torch.long))
    with pytest.raises(ValueError, match="attention_mask"):
        model(input_ids, attention_mask=attention_mask[:, :4])
    with pytest.raises(ValueError, match="vocabulary"):
        model(input_ids + 40000, attention_mask=attention_mask)
    attention_mask[1] = 0
    with pytest.raises(ValueError, match=r"Rows \[1\]"):
        model(input_ids, attention_mask=attention_mask)
    with pytest.raises(ValueError, match="labels"):
        model(input_ids, labels=torch.tensor([0, 7, 1]))
    with pytest.raises(ValueError, match="num_segments"):
        model(torch.ones((2, 5, 8), dtype=torch.long))


BACKBONES = {
    "bert": BACKBONE,
    "roberta": {"model_type": "roberta", "vocab_size": 60, "hidden_size": 12, "num_hidden_layers": 1,
                "num_attention_heads": 2, "intermediate_size": 16, "max_position_embeddings": 20, "pad_token_id": 0},
    "gpt2": {"model_type": "gpt2", "vocab_size": 60, "n_embd": 12, "n_layer": 1, "n_head": 2, "n_positions": 16},
}


@pytest.mark.parametrize("backbone", list(BACKBONES))
@pytest.mark.parametrize("mode", ["paper", "full"])
def test_encoder_and_decoder_backbones_train_with_both_gradient_modes(backbone, mode):
    from hf_longdoc.modeling.segment_lm.modeling_segment import SegmentLMForSequenceClassification

    settings = {**BACKBONES[backbone], "hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0}
    if backbone == "gpt2":
        settings = {**BACKBONES[backbone], "resid_pdrop": 0.0, "embd_pdrop": 0.0, "attn_pdrop": 0.0}
    torch.manual_seed(0)
    config = SegmentLMConfig(backbone_config=settings, variant="att", num_segments=3, segment_length=8,
                             lstm_hidden_size=6, gradient_mode=mode, classifier_dropout=0.0, num_labels=3,
                             cls_token_id=1, sep_token_id=2, pad_token_id=0)
    assert config.segment_pooling == ("last" if backbone == "gpt2" else "cls")
    model = SegmentLMForSequenceClassification(config).train()
    input_ids, attention_mask = _documents()
    out = model(input_ids, attention_mask=attention_mask, labels=torch.tensor([0, 1, 2]))
    model.zero_grad()
    out.loss.backward()
    got = {name: p.grad.clone() for name, p in model.named_parameters() if p.grad is not None}
    expected_logits, expected = _loop_gradients(model, input_ids, attention_mask, detach_others=mode == "paper")
    torch.testing.assert_close(out.logits, expected_logits, rtol=1e-5, atol=1e-5)
    for name in expected:
        torch.testing.assert_close(got[name], expected[name], rtol=1e-4, atol=1e-6, msg=name)


def test_from_backbone_pretrained_gpt2_appends_an_added_classification_token(tmp_path):
    from tokenizers import ByteLevelBPETokenizer
    from transformers import GPT2Config, GPT2Model, PreTrainedTokenizerFast

    from hf_longdoc.modeling.segment_lm.modeling_segment import SegmentLMForSequenceClassification

    texts = ["the reactor core runs hot", "a zirconium alloy resists corrosion"] * 10
    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator(texts, vocab_size=300, special_tokens=["<|endoftext|>"], show_progress=False)
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=bpe, bos_token="<|endoftext|>", eos_token="<|endoftext|>")
    torch.manual_seed(0)
    gpt2 = GPT2Model(GPT2Config(vocab_size=len(tokenizer), n_embd=12, n_layer=1, n_head=2, n_positions=32))
    gpt2.save_pretrained(tmp_path / "gpt2")
    tokenizer.save_pretrained(tmp_path / "gpt2")
    model = SegmentLMForSequenceClassification.from_backbone_pretrained(tmp_path / "gpt2", tokenizer=tokenizer,
                                                                        variant="att", num_segments=3,
                                                                        segment_length=16, num_labels=2)
    classify = tokenizer.cls_token_id
    assert classify == len(tokenizer) - 1 and model.config.sep_token_id == classify
    assert model.config.segment_pooling == "last" and model.config.vocab_size == len(tokenizer)
    segments, mask, _ = model.segment_lm.segments(*[tokenizer([texts[0]], return_tensors="pt")[key]
                                                    for key in ("input_ids", "attention_mask")])
    assert segments[0, 0, int(mask[0, 0].sum()) - 1] == classify  # the classification token ends the segment
    batch = tokenizer([" ".join(texts[:4]), texts[1]], padding=True, return_tensors="pt")
    assert model(batch["input_ids"], attention_mask=batch["attention_mask"]).logits.shape == (2, 2)


@pytest.mark.parametrize("stopped_segment_dropout", [False, True])
def test_stopped_segments_are_encoded_without_dropout_unless_asked(stopped_segment_dropout):
    from hf_longdoc.modeling.segment_lm.modeling_segment import SegmentLMModel

    torch.manual_seed(0)
    backbone = {**BACKBONE, "hidden_dropout_prob": 0.5, "attention_probs_dropout_prob": 0.5}
    config = SegmentLMConfig(backbone_config=backbone, num_segments=3, segment_length=8, gradient_mode="paper",
                             stopped_segment_dropout=stopped_segment_dropout, cls_token_id=1, sep_token_id=2)
    model = SegmentLMModel(config).train()
    input_ids, attention_mask = _documents()
    first, second = (model(input_ids, attention_mask=attention_mask).last_hidden_state for _ in range(2))
    assert model.backbone.training  # the mode is restored
    assert not torch.equal(first[:, 0], second[:, 0])  # segment 1 (with gradient) always sees dropout
    stopped_equal = torch.equal(first[:, 1:], second[:, 1:])
    assert stopped_equal != stopped_segment_dropout
    if not stopped_segment_dropout:
        with torch.no_grad():
            evaluated = model.eval()(input_ids, attention_mask=attention_mask).last_hidden_state
        torch.testing.assert_close(first[:, 1:], evaluated[:, 1:])


@pytest.mark.parametrize("mode", ["paper", "full"])
def test_no_backbone_pass_takes_more_than_segments_per_pass_segments(mode):
    model = _classifier("cat", mode, m=3, segments_per_pass=2)
    sizes, encode = [], model.segment_lm.encode

    def recording_encode(segments, mask):  # (module hooks do not fire when checkpointing recomputes)
        sizes.append(len(segments))
        return encode(segments, mask)

    model.segment_lm.encode = recording_encode
    input_ids, attention_mask = _documents()  # 6 present segments, 3 of them first segments
    loss = model(input_ids, attention_mask=attention_mask, labels=torch.tensor([0, 1, 2])).loss
    forward_sizes = list(sizes)
    loss.backward()
    if mode == "full":  # 3 checkpointed passes of 2, recomputed one at a time in the backward pass
        assert forward_sizes == [2, 2, 2] and sizes[3:] == [2, 2, 2]
    else:  # the 3 first segments with gradient in one pass; the 3 others without, in passes of 2
        assert sorted(forward_sizes) == [1, 2, 3] and len(sizes) == 3


@pytest.mark.parametrize("mode", ["paper", "full", "none"])
def test_base_encodes_only_the_first_segments(mode):
    """Eq. 1 reads z_1 alone: the base variant never runs the LM over the other segments, with gradient or without
    (they are zeros in z), and its logits are those of segment 1 read alone."""
    model = _classifier("base", mode, m=3, segments_per_pass=2)
    sizes, encode = [], model.segment_lm.encode

    def recording_encode(segments, mask):
        sizes.append(len(segments))
        return encode(segments, mask)

    model.segment_lm.encode = recording_encode
    input_ids, attention_mask = _documents()  # 6 present segments, 3 of them first segments
    with torch.set_grad_enabled(mode != "none"):
        logits = model(input_ids, attention_mask=attention_mask).logits
    assert sum(sizes) == 3
    segments, mask, _ = model.segment_lm.segments(input_ids, attention_mask)
    with torch.no_grad():
        alone = model.head.classifier(encode(segments[:, 0], mask[:, 0]))
    torch.testing.assert_close(logits, alone, rtol=1e-5, atol=1e-6)


@pytest.mark.slow
@pytest.mark.parametrize("variant", ["att", "cat"])
def test_two_process_ddp_in_full_gradient_mode(variant, ddp, tmp_path):
    """Every segment with gradient under per-pass checkpointing, inside the Trainer's own layer checkpointing, with
    DDP's strict unused-parameter check (conformance runs `paper` mode)."""
    result, weights = ddp.run("segment_lm", tmp_path, {"gradient_mode": "full", "variant": variant,
                                                       "segments_per_pass": 2})
    assert weights is not None, result.stdout[-2000:] + result.stderr[-4000:]
    for name in weights[0]:
        torch.testing.assert_close(weights[0][name], weights[1][name], rtol=0, atol=0, msg=name)


def test_full_mode_without_checkpointed_passes_keeps_the_gradients_and_encodes_each_segment_once():
    """`checkpoint_segment_passes=False` keeps the passes' activations instead of recomputing them: the same loss and
    gradients, and the backward pass encodes nothing again."""
    input_ids, attention_mask = _documents()
    grads, calls = [], []
    for checkpointed in (True, False):
        model = _classifier("att", "full", segments_per_pass=2)
        model.config.checkpoint_segment_passes = checkpointed
        sizes = []

        def recording_encode(segments, mask, sizes=sizes, encode=model.segment_lm.encode):
            sizes.append(len(segments))
            return encode(segments, mask)

        model.segment_lm.encode = recording_encode
        model(input_ids, attention_mask=attention_mask, labels=torch.tensor([0, 1, 2])).loss.backward()
        grads.append({name: p.grad for name, p in model.named_parameters() if p.grad is not None})
        calls.append(sizes)
    assert calls == [[2, 2, 2, 2, 2, 2], [2, 2, 2]]  # 6 present segments: 3 passes, recomputed only when checkpointed
    assert grads[0].keys() == grads[1].keys()
    for name in grads[0]:
        torch.testing.assert_close(grads[1][name], grads[0][name], rtol=1e-5, atol=1e-7, msg=name)


@pytest.mark.parametrize("mode", ["paper", "full"])
def test_backbone_gradient_checkpointing_keeps_the_gradients(mode):
    """`gradient_checkpointing_enable()` (the Trainer's switch) checkpoints the backbone's layers in the passes with
    gradient; the stopped segments (evaluation mode, no gradient) are untouched; gradients are unchanged."""
    input_ids, attention_mask = _documents()
    grads = []
    for checkpointed in (False, True):
        model = _classifier("att", mode)
        if checkpointed:
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        model(input_ids, attention_mask=attention_mask, labels=torch.tensor([0, 1, 2])).loss.backward()
        grads.append({name: p.grad for name, p in model.named_parameters() if p.grad is not None})
    assert grads[0].keys() == grads[1].keys()
    for name in grads[0]:
        torch.testing.assert_close(grads[1][name], grads[0][name], rtol=1e-5, atol=1e-7, msg=name)


@pytest.mark.parametrize("variant", ["base", "cat", "rnn", "att", "att_ablated"])
def test_an_empty_text_reads_as_one_segment_of_cls_and_sep(variant):
    """`tokenizer("")` gives [CLS] [SEP]: no content token, yet one present segment (it used to crash with an
    AttributeError deep in the encoder); a padded batch gives the same logits as the empty text alone."""
    model = _classifier(variant, "paper").eval()
    input_ids, attention_mask = _documents()
    empty = torch.tensor([[1, 2]])
    with torch.no_grad():
        alone = model(empty)
        assert alone.segment_mask.tolist() == [[1, 0, 0]]
        padded = torch.zeros((1, 20), dtype=torch.long)
        padded[0, :2] = empty
        batch = model(torch.cat([input_ids, padded]), attention_mask=torch.cat([attention_mask, (padded != 0).long()]))
    torch.testing.assert_close(batch.logits[3], alone.logits[0], rtol=1e-5, atol=1e-5)


def test_the_unpacked_bilstm_of_a_traced_graph_equals_the_packed_one():
    """`segment_states_unpacked` (ONNX export has no packed sequences): the forward direction over padded z and the
    backward one over each document's present segments reversed in place give pad_packed_sequence's states."""
    config = SegmentLMConfig(variant="att", num_segments=6, segment_length=8, cls_token_id=1, sep_token_id=2,
                             backbone_config={"model_type": "bert", "hidden_size": 16, "num_hidden_layers": 1,
                                              "num_attention_heads": 2, "intermediate_size": 20,
                                              "max_position_embeddings": 16, "vocab_size": 30})
    model = SegmentLMForSequenceClassification(config).eval()
    z = torch.randn(4, 6, 16)
    present = torch.tensor([[1, 1, 1, 0, 0, 0], [1, 1, 1, 1, 1, 1], [1, 0, 0, 0, 0, 0], [1, 1, 1, 1, 1, 0]]).bool()
    with torch.no_grad():
        packed = model.head.segment_states(z, present)
        unpacked = model.head.segment_states_unpacked(z, present, dict(model.head.lstm.named_parameters()))
    torch.testing.assert_close(unpacked, packed, rtol=1e-5, atol=1e-6)
