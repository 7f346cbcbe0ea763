"""`explain` (predict --explain K): the passages that decided a label, with character offsets into the document as
given and the model's own weights (the segment LM's α of Eq. 4, as `output_attentions=True` returns it); the segment
LM's passages are the whole sentences each segment holds."""

import re

import pytest
import torch
from transformers import BertConfig, BertForSequenceClassification, BertModel

from hf_longdoc.data import fit_wordpiece_tokenizer
from hf_longdoc.inference.explaining import check_explainable, explain
from hf_longdoc.modeling.segment_lm.family import segment_of_positions
from hf_longdoc.modeling.segment_lm.modeling_segment import SegmentLMForSequenceClassification, cut_into_segments

WORDS = ("the reactor core runs hot while a zirconium alloy resists corrosion near café naïve zürich "
         "coolant pumps fail quietly").split()
SENTENCE_ENDS = (5, 12, 16, 22, 29, 37)  # the first document's sentences end after these of its 37 words


def _sentences(words, ends):
    """The words as sentences ending after the word numbers `ends`, each capitalised and closed by a full stop."""
    return " ".join(" ".join(words[start:end]).capitalize() + "." for start, end in zip((0, *ends), ends))


DOCUMENTS = [
    _sentences([WORDS[i % len(WORDS)] for i in range(3, 40)], SENTENCE_ENDS),  # 6 sentences, past 2 segments
    "the reactor core runs hot",  # one segment
    "  Café   naïve\t\tZÜRICH —\n\n  東京  the  core 🎉 runs   hot  ",  # accents, CJK, emoji, whitespace runs
]
NUM_SEGMENTS, SEGMENT_LENGTH = 4, 9  # 7 document tokens per segment: not a divisor of the lengths above


@pytest.fixture(scope="module")
def saved_bert(tmp_path_factory):
    """A tiny random BERT saved with a fast WordPiece tokenizer, as a pretrained checkpoint."""
    folder = tmp_path_factory.mktemp("bert")
    tokenizer = fit_wordpiece_tokenizer([" ".join(WORDS)] * 20 + DOCUMENTS, vocab_size=150, model_max_length=512)
    torch.manual_seed(0)
    BertModel(BertConfig(vocab_size=len(tokenizer), hidden_size=12, num_hidden_layers=1, num_attention_heads=2,
                         intermediate_size=16, max_position_embeddings=32)).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder, tokenizer


def _segment_lm(saved_bert, variant="att", **settings):
    folder, tokenizer = saved_bert
    torch.manual_seed(1)
    model = SegmentLMForSequenceClassification.from_backbone_pretrained(
        folder, tokenizer=tokenizer, variant=variant, num_segments=NUM_SEGMENTS, segment_length=SEGMENT_LENGTH,
        num_labels=3, **settings)
    if hasattr(model.head, "context"):
        with torch.no_grad():  # u_s starts random; make α clearly uneven so that the order means something
            model.head.context.mul_(20)
    return model.eval(), tokenizer


@pytest.fixture(scope="module")
def segment_lm(saved_bert):
    return _segment_lm(saved_bert)


def _plain_forward(model, tokenizer, texts, max_length=None):
    batch = tokenizer(texts, truncation=True, max_length=max_length, padding=True, return_offsets_mapping=True,
                      return_tensors="pt")
    offsets = batch.pop("offset_mapping")
    with torch.no_grad():
        return batch, offsets, model(**batch, output_attentions=True)


def _sentence_spans(document):
    """The document's sentences as (start, end) characters, written from the rule: a sentence ends at a full stop (or
    ! or ?) followed by whitespace, at a blank line, or at the end; its surrounding whitespace is no part of it."""
    spans, start = [], 0
    for match in [*re.finditer(r"[.!?](?=\s)|\n\s*\n", document), None]:
        end = match.end() if match else len(document)
        text = document[start:end]
        if text.strip():
            first = start + len(text) - len(text.lstrip())
            spans.append((first, first + len(text.strip())))
        start = end
    return spans


def _expected_passages(document, offsets, segment, alpha):
    """{(start, end): weight}: each present segment's characters (its first to last token) as the sentences at least
    half inside them (else the sentence they overlap most), at the largest α among the segments that come to them."""
    expected = {}
    for i in range(len(alpha)):
        positions = (segment == i).nonzero().flatten()
        if not len(positions):
            continue
        start, end = int(offsets[positions[0], 0]), int(offsets[positions[-1], 1])
        overlaps = [(max(0, min(end, e) - max(start, s)), (s, e)) for s, e in _sentence_spans(document)]
        held = [span for overlap, span in overlaps if 2 * overlap >= span[1] - span[0]]
        span = (held[0][0], held[-1][1]) if held else max(overlaps)[1]
        expected[span] = max(expected.get(span, 0.0), alpha[i].item())
    return expected


def test_passages_are_the_whole_sentences_each_segment_holds(segment_lm):
    model, tokenizer = segment_lm
    logits, evidence = explain(model, tokenizer, DOCUMENTS, k=NUM_SEGMENTS, max_length=None)
    batch, offsets, out = _plain_forward(model, tokenizer, DOCUMENTS)
    (alpha,) = out.attentions  # (b, m), Eq. 4
    segment = segment_of_positions(batch["input_ids"], batch["attention_mask"], NUM_SEGMENTS, SEGMENT_LENGTH,
                                   model.config.cls_token_id, model.config.sep_token_id)
    for row, (document, passages) in enumerate(zip(DOCUMENTS, evidence)):
        expected = _expected_passages(document, offsets[row], segment[row], alpha[row])
        assert {(p["start"], p["end"]): p["weight"] for p in passages} == expected  # the model's own α
        sentences = _sentence_spans(document)
        for passage in passages:
            assert document[passage["start"]:passage["end"]] == passage["text"]
            assert passage["start"] in {s for s, _ in sentences} and passage["end"] in {e for _, e in sentences}
        weights = [passage["weight"] for passage in passages]
        assert weights == sorted(weights, reverse=True)
    # the first document's 4 segments of 7 tokens start and end inside its sentences: each comes to the sentence it
    # holds most of
    assert [p["text"].split()[0] for p in sorted(evidence[0], key=lambda p: p["start"])] == ["Runs", "Alloy",
                                                                                             "Coolant", "The"]
    assert all(p["text"].endswith(".") for p in evidence[0])
    assert len(set(alpha[0].tolist())) == NUM_SEGMENTS  # the test can tell the segments apart
    torch.testing.assert_close(logits, out.logits, rtol=0, atol=0)


def test_the_base_variants_passage_is_segment_one_at_weight_one(saved_bert):
    """Eq. 1: the classifier reads z_1 alone, so segment 1's sentences are all of the weight and nothing else is."""
    model, tokenizer = _segment_lm(saved_bert, variant="base")
    _, evidence = explain(model, tokenizer, DOCUMENTS, k=NUM_SEGMENTS, max_length=None)
    batch, offsets, _ = _plain_forward(model, tokenizer, DOCUMENTS)
    segment = segment_of_positions(batch["input_ids"], batch["attention_mask"], NUM_SEGMENTS, SEGMENT_LENGTH,
                                   model.config.cls_token_id, model.config.sep_token_id)
    for row, (document, passages) in enumerate(zip(DOCUMENTS, evidence)):
        expected = _expected_passages(document, offsets[row], segment[row], torch.ones(1))
        assert {(p["start"], p["end"]): p["weight"] for p in passages} == expected and len(expected) == 1
        assert all(document[p["start"]:p["end"]] == p["text"] for p in passages)


def test_k_keeps_the_best_and_never_more_than_the_passages(segment_lm):
    model, tokenizer = segment_lm
    _, everything = explain(model, tokenizer, DOCUMENTS, k=NUM_SEGMENTS, max_length=None)
    _, best = explain(model, tokenizer, DOCUMENTS, k=1, max_length=None)
    _, plenty = explain(model, tokenizer, DOCUMENTS, k=100, max_length=None)
    assert [passages[:1] for passages in everything] == best
    assert plenty == everything
    assert [len(passages) for passages in plenty] == [4, 1, 2]


def test_max_length_truncates_as_the_pipeline_does(segment_lm, caplog):
    model, tokenizer = segment_lm
    with caplog.at_level("DEBUG", logger="hf_longdoc.inference.explaining"):  # INFO the first time in a process only
        logits, evidence = explain(model, tokenizer, DOCUMENTS[:1], k=NUM_SEGMENTS, max_length=12)
    assert "1 of 1 documents" in caplog.text  # the cut is logged
    _, _, out = _plain_forward(model, tokenizer, DOCUMENTS[:1], max_length=12)
    torch.testing.assert_close(logits, out.logits, rtol=0, atol=0)
    read = tokenizer(DOCUMENTS[0], truncation=True, max_length=12, return_offsets_mapping=True)["offset_mapping"]
    last_read = read[-2][1]  # 10 document tokens: two segments of 7
    assert max(passage["end"] for passage in evidence[0]) <= DOCUMENTS[0].index(".", last_read) + 1
    assert all(passage["start"] < last_read for passage in evidence[0])  # the sentences the read tokens are in


def test_segment_positions_follow_the_models_cut(segment_lm):
    model, tokenizer = segment_lm
    batch, _, _ = _plain_forward(model, tokenizer, DOCUMENTS)
    config = model.config
    segments, mask, _ = cut_into_segments(batch["input_ids"], batch["attention_mask"], NUM_SEGMENTS, SEGMENT_LENGTH,
                                          config.cls_token_id, config.sep_token_id, config.pad_token_id)
    segment = segment_of_positions(batch["input_ids"], batch["attention_mask"], NUM_SEGMENTS, SEGMENT_LENGTH,
                                   config.cls_token_id, config.sep_token_id)
    for row in range(len(DOCUMENTS)):
        for i in range(NUM_SEGMENTS):
            content = segments[row, i][mask[row, i]][1:-1]  # without [CLS] and [SEP]
            assert batch["input_ids"][row][segment[row] == i].tolist() == content.tolist()


def test_families_and_variants_without_weights_are_refused(saved_bert, segment_lm):
    from hf_longdoc.modeling.slstm import SLSTMConfig, SLSTMForSequenceClassification

    check_explainable(segment_lm[0])
    check_explainable(_segment_lm(saved_bert, variant="att_ablated")[0])
    check_explainable(_segment_lm(saved_bert, variant="base")[0])
    with pytest.raises(ValueError, match=r"slstm family .*cannot be explained.*segment_lm"):
        check_explainable(SLSTMForSequenceClassification(SLSTMConfig(vocab_size=50, hidden_size=8,
                                                                     num_hidden_layers=1)))
    rnn, tokenizer = _segment_lm(saved_bert, variant="rnn")
    with pytest.raises(ValueError, match=r"variant 'rnn' .*'att'"):
        check_explainable(rnn)
    with pytest.raises(ValueError, match=r"variant 'rnn'"):
        explain(rnn, tokenizer, DOCUMENTS, k=2, max_length=None)
    bert = BertForSequenceClassification(BertConfig(vocab_size=50, hidden_size=8, num_hidden_layers=1,
                                                    num_attention_heads=2, intermediate_size=8))
    with pytest.raises(ValueError, match=r"'bert' model: it is not an hf_longdoc family.*segment_lm"):
        check_explainable(bert)


def test_bad_arguments_are_refused_before_the_forward(segment_lm):
    model, tokenizer = segment_lm
    with pytest.raises(ValueError, match=r"`texts\[1\]` is empty"):
        explain(model, tokenizer, ["the core", "  \n"], k=1, max_length=None)
    with pytest.raises(TypeError, match="`texts` must be a non-empty list"):
        explain(model, tokenizer, "the core", k=1, max_length=None)
    with pytest.raises(ValueError, match=r"`k` \(--explain\) must be at least 1"):
        explain(model, tokenizer, ["the core"], k=0, max_length=None)

    class SlowTokenizer:
        is_fast = False

    with pytest.raises(ValueError, match="fast tokenizer"):
        explain(model, SlowTokenizer(), ["the core"], k=1, max_length=None)


def test_contextualizer_passages_are_windows_weighed_by_their_share_of_alpha_times_x(saved_bert):
    from hf_longdoc import ContextualizerConfig, ContextualizerForSequenceClassification
    from hf_longdoc.modeling.contextualizer.family import EVIDENCE_WINDOW

    _, tokenizer = saved_bert
    torch.manual_seed(0)
    model = ContextualizerForSequenceClassification(ContextualizerConfig(
        vocab_size=len(tokenizer), hidden_size=12, rank=7, num_hidden_layers=1, num_labels=3,
        pad_token_id=tokenizer.pad_token_id)).eval()
    with torch.no_grad():  # non-trivial values everywhere, so that the weights differ between tokens
        for parameter in model.parameters():
            parameter.normal_(0, 0.4)
    logits, evidence = explain(model, tokenizer, DOCUMENTS, k=100, max_length=None)
    batch, offsets, out = _plain_forward(model, tokenizer, DOCUMENTS)
    torch.testing.assert_close(logits, out.logits, rtol=0, atol=0)
    with torch.no_grad():  # one step: the token outputs are α(1) ⊙ x, the terms of Eq. 6
        terms = model.contextualizer(**batch).last_hidden_state.norm(dim=-1)  # (b, n)
    for row, (document, passages) in enumerate(zip(DOCUMENTS, evidence)):
        n = int(batch["attention_mask"][row].sum())
        assert len(passages) == -(-n // EVIDENCE_WINDOW) and len(passages) == (2 if row == 0 else 1)
        assert sum(passage["weight"] for passage in passages) == pytest.approx(1.0)
        for passage in passages:
            assert document[passage["start"]:passage["end"]] == passage["text"]
            first = int((offsets[row, :n, 0] == passage["start"]).nonzero()[0])  # the window's first text token
            window = slice(first - first % EVIDENCE_WINDOW, first - first % EVIDENCE_WINDOW + EVIDENCE_WINDOW)
            expected = float(terms[row, window].sum() / terms[row, :n].sum())
            assert passage["weight"] == pytest.approx(expected, rel=1e-5)


def test_sparse_longformer_passages_are_its_global_tokens_weighed_by_tfidf(saved_bert):
    from hf_longdoc import SparseLongformerConfig, SparseLongformerForSequenceClassification

    _, tokenizer = saved_bert
    ids = dict(pad_token_id=tokenizer.pad_token_id, bos_token_id=tokenizer.cls_token_id,
               eos_token_id=tokenizer.sep_token_id, sep_token_id=tokenizer.sep_token_id)
    config = SparseLongformerConfig(vocab_size=len(tokenizer), hidden_size=16, num_hidden_layers=1,
                                    num_attention_heads=2, intermediate_size=20, attention_window=4,
                                    max_position_embeddings=130, num_labels=3, global_selector="tfidf",
                                    num_global_tokens=3, **ids)
    torch.manual_seed(0)
    model = SparseLongformerForSequenceClassification(config).eval()
    corpus = [tokenizer(text)["input_ids"] for text in DOCUMENTS + [" ".join(WORDS)] * 3]
    model.fit_global_selector(corpus, tokenizer=tokenizer, statistics=("tfidf",), progress=False)
    logits, evidence = explain(model, tokenizer, DOCUMENTS, k=2, max_length=None)
    batch, offsets, out = _plain_forward(model, tokenizer, DOCUMENTS)
    torch.testing.assert_close(logits, out.logits)
    idf = model.base_model.selector.idf
    chosen = model.select_global_tokens(batch["input_ids"], batch["attention_mask"])
    for row, (document, passages) in enumerate(zip(DOCUMENTS, evidence)):
        assert len(passages) == 2 and passages[0]["weight"] >= passages[1]["weight"] >= 0
        read = batch["input_ids"][row][batch["attention_mask"][row].bool()].tolist()
        counted = [i for i in read if i not in config.excluded_token_ids]
        words = tokenizer(document).word_ids()
        expected = {}  # each selected token's whole word, at the best tf·idf of its selected pieces
        for position in chosen[row].nonzero().flatten().tolist()[1:]:  # [CLS] aside
            pieces = [i for i, word in enumerate(words) if word is not None and word == words[position]]
            span = (int(offsets[row, pieces[0], 0]), int(offsets[row, pieces[-1], 1]))
            token = int(batch["input_ids"][row, position])
            expected[span] = max(expected.get(span, 0.0), counted.count(token) / len(counted) * float(idf[token]))
        assert len({(p["start"], p["end"]) for p in passages}) == len(passages)  # a word is one passage
        for passage in passages:
            assert document[passage["start"]:passage["end"]] == passage["text"]
            assert passage["weight"] == pytest.approx(expected[(passage["start"], passage["end"])])
            assert not any(c.isspace() for c in passage["text"])  # a word, never a piece of one
    assert evidence[2][0]["weight"] > 0  # the rare words of the third document count
    config.global_selector = "first_n"
    with pytest.raises(ValueError, match=r"global_selector='first_n' .*'tfidf' or 'pmi'"):
        check_explainable(model)


def test_passages_are_whole_words_never_pieces_of_one(saved_bert):
    """The pieces a selector picks inside one word (`class`, `##ro`, `##om`) are one passage: the word."""
    from hf_longdoc.inference.explaining import _whole_words

    _, tokenizer = saved_bert
    text = "zirconiumcoolant quietlyhot"
    encoding = tokenizer(text, return_offsets_mapping=True)
    words = encoding.word_ids()
    assert len(words) > 4  # the tiny vocabulary cuts these words into pieces
    for position in range(1, len(words) - 1):
        first, stop = _whole_words(words, position, position + 1)
        start, end = encoding["offset_mapping"][first][0], encoding["offset_mapping"][stop - 1][1]
        assert text[start:end] in ("zirconiumcoolant", "quietlyhot")
    assert _whole_words(words, 0, 1) == (0, 1)  # [CLS] stays itself


def test_predict_help_says_what_the_weight_means_for_each_family(capsys):
    from hf_longdoc.cli import main
    from hf_longdoc.inference.explaining import weight_meanings

    assert set(weight_meanings()) == {"contextualizer", "segment_lm", "sparse_longformer"}
    assert all(weight_meanings().values())
    assert main(["predict", "--help"]) == 0
    shown = " ".join(capsys.readouterr().out.split())
    assert "segment_lm: a segment's attention weight α (Eq. 4)" in shown and "not how much each moved" in shown


def test_predict_explain_on_a_saved_segment_lm_points_at_the_documents_text(segment_lm, tmp_path, capsys):
    """End to end, as a user runs it: `hf-longdoc predict --explain 2` on a saved segment LM writes, per row, passages
    whose offsets point at their text in the document as given, weighed by the model's own α."""
    import json

    from hf_longdoc.cli import main

    model, tokenizer = segment_lm
    model.save_pretrained(tmp_path / "model")
    tokenizer.save_pretrained(tmp_path / "model")
    documents = [*DOCUMENTS, "   "]
    with open(tmp_path / "docs.jsonl", "w", encoding="utf-8") as f:
        f.writelines(json.dumps({"id": f"doc-{i}", "text": text}) + "\n" for i, text in enumerate(documents))
    assert main(["predict", str(tmp_path / "model"), "--dataset", str(tmp_path / "docs.jsonl"), "--output",
                 str(tmp_path / "labels.jsonl"), "--explain", "2"]) == 0
    rows = [json.loads(line) for line in (tmp_path / "labels.jsonl").read_text(encoding="utf-8").splitlines()]
    assert [row["id"] for row in rows] == [f"doc-{i}" for i in range(len(documents))]
    (alpha_rows,) = _plain_forward(model, tokenizer, DOCUMENTS)[2].attentions  # (b, m), Eq. 4
    for row, document, alpha in zip(rows, DOCUMENTS, alpha_rows):
        assert 1 <= len(row["evidence"]) <= 2
        for passage in row["evidence"]:
            assert document[passage["start"]:passage["end"]] == passage["text"] and passage["text"].strip()
        weights = [passage["weight"] for passage in row["evidence"]]
        assert weights == sorted(weights, reverse=True)
        assert weights[0] == pytest.approx(alpha[alpha > 0].max().item(), abs=1e-6)
    assert rows[-1]["label"] is None and rows[-1]["evidence"] in (None, [])
