"""Segment LMs: the heads of Eq. 1-5 and 7 against a direct, per-document computation (work in progress: the
backbone wrapping, gradient modes and registration follow in issue 6)."""

import pytest
import torch

from hf_longdoc.modeling.segment.configuration_segment import SegmentLMConfig
from hf_longdoc.modeling.segment.modeling_segment import SegmentHead

BACKBONE = {"model_type": "bert", "hidden_size": 12, "num_hidden_layers": 1, "num_attention_heads": 2,
            "intermediate_size": 16, "max_position_embeddings": 64}


def _head(variant, activation="sigmoid", m=4, q=6):
    torch.manual_seed(0)
    config = SegmentLMConfig(backbone_config=BACKBONE, variant=variant, num_segments=m, segment_length=16,
                             lstm_hidden_size=q, attention_activation=activation, classifier_dropout=0.0,
                             num_labels=3)
    head = SegmentHead(config).eval()
    if variant in ("att", "att_ablated"):
        torch.nn.init.normal_(head.context)
    return head


def _reference(head, z, count):
    """Eq. 1-5, 7 for one document with `count` present segments, in plain steps."""
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
    scores = torch.stack([torch.tanh(head.attention(h[i])) @ head.context for i in range(count)])
    alpha = torch.softmax(scores, 0) if head.config.attention_activation == "softmax" else torch.sigmoid(scores)
    a = sum(alpha[i] * h[i] for i in range(count))
    full_alpha = torch.zeros(head.config.num_segments)
    full_alpha[:count] = alpha
    tail = [a, full_alpha, z[int(alpha.argmax())]]
    return head.classifier(torch.cat(features + tail if variant == "att" else tail)), full_alpha


@pytest.mark.parametrize("variant, activation", [("base", "sigmoid"), ("cat", "sigmoid"), ("rnn", "sigmoid"),
                                                 ("att", "sigmoid"), ("att", "softmax"), ("att_ablated", "sigmoid")])
def test_heads_match_the_equations_with_absent_segments(variant, activation):
    head = _head(variant, activation)
    z = torch.randn(3, 4, 12)
    counts = [4, 2, 1]
    present = torch.arange(4)[None, :] < torch.tensor(counts)[:, None]
    with torch.no_grad():
        logits, alpha, selected = head(z, present)
        assert logits.shape == (3, 3)
        assert head.classifier.in_features == head.config.classifier_input_size()
        for row, count in enumerate(counts):
            expected, expected_alpha = _reference(head, z[row], count)
            torch.testing.assert_close(logits[row], expected, rtol=1e-5, atol=1e-5)
            if expected_alpha is not None:
                torch.testing.assert_close(alpha[row], expected_alpha, rtol=1e-5, atol=1e-6)
                assert int(selected[row]) < count


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
    from hf_longdoc.modeling.segment.modeling_segment import cut_into_segments

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
