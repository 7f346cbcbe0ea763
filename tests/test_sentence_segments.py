"""Segments of whole sentences (`sentence_packing`): the segment LM's tokenizer packs a document's sentences into
segments of L - 2 ids and pads each segment's rest; the model reads those pads as places without a token. Every path
reads a document the same way: the tokenizer, Transformers' pipeline, the long-document pipeline, `predict`,
`--explain` (whole sentences), and the Hub copy without hf_longdoc."""

import json

import pytest
import torch
from transformers import AutoModelForSequenceClassification, AutoTokenizer, pipeline

import hf_longdoc
from fresh_process import run_without_hf_longdoc
from hf_longdoc import FAMILIES
from hf_longdoc.data import fit_wordpiece_tokenizer
from hf_longdoc.inference.explaining import explain
from hf_longdoc.inference.reading import reading_length
from hf_longdoc.modeling.segment_lm.modeling_segment import cut_into_segments
from hf_longdoc.modeling.segment_lm.tokenization_segment import SegmentLMTokenizer, pack_sentences, sentence_spans
from tiny_bert import save_tiny_bert

SENTENCES = [
    "The reactor core ran hot on Monday.",
    "Dr. Smith checked the pumps at 3 p.m. and found them quiet.",
    "Short one.",
    "A very long sentence follows here that keeps going past the end of one segment because it lists pumps, "
    "valves, pipes, gauges, coolant, alloys and every other part of the plant.",
    "The end.",
]
DOCUMENT = " ".join(SENTENCES)
SEGMENT_LENGTH = 24  # 22 ids of text a segment: only the long sentence takes more


@pytest.fixture(scope="module")
def backbone(tmp_path_factory):
    folder = tmp_path_factory.mktemp("backbone")
    tokenizer = fit_wordpiece_tokenizer([DOCUMENT] * 10 + ["pumps valves quiet reactor"] * 5, vocab_size=200,
                                        model_max_length=64)
    return save_tiny_bert(folder, tokenizer, max_positions=64), tokenizer


def reference_segments(offsets, spans, width):
    """Packing written from the rule: walk the sentences; a sentence joins the current segment when it fits, else
    starts the next; one longer than `width` fills whole segments, and its rest starts the next segment."""
    sentence_of = [max(i for i, (start, _) in enumerate(spans) if start <= token_start) for token_start, _ in offsets]
    groups = []
    for position, sentence in enumerate(sentence_of):
        if groups and groups[-1][0] == sentence:
            groups[-1][1].append(position)
        else:
            groups.append((sentence, [position]))
    segments = [[]]
    for _, positions in groups:
        while len(positions) > width:
            if segments[-1]:
                segments.append([])
            segments[-1] = positions[:width]
            segments.append([])
            positions = positions[width:]
        if len(segments[-1]) + len(positions) > width:
            segments.append([])
        segments[-1] += positions
    return [segment for segment in segments if segment]


def test_sentences_are_packed_whole_and_only_a_longer_one_is_split(backbone):
    _, tokenizer = backbone
    encoded = tokenizer(DOCUMENT, add_special_tokens=False, return_offsets_mapping=True)
    spans = sentence_spans(DOCUMENT)
    assert [DOCUMENT[start:end].strip() for start, end in spans] == SENTENCES
    segments = pack_sentences(encoded["offset_mapping"], spans, SEGMENT_LENGTH - 2)
    assert segments == reference_segments(encoded["offset_mapping"], spans, SEGMENT_LENGTH - 2)
    assert [p for segment in segments for p in segment] == list(range(len(encoded["input_ids"])))  # nothing lost
    assert all(len(segment) <= SEGMENT_LENGTH - 2 for segment in segments)
    long_sentence = len(tokenizer(SENTENCES[3], add_special_tokens=False)["input_ids"])
    assert long_sentence > SEGMENT_LENGTH - 2  # the case the rule splits
    # a sentence that fits in a segment is never cut: its tokens are in one segment
    starts = [start for start, _ in spans]
    for number, (start, end) in enumerate(spans):
        inside = [i for i, (s, _) in enumerate(encoded["offset_mapping"]) if start <= s < end]
        homes = {k for k, segment in enumerate(segments) for i in inside if i in segment}
        assert len(homes) == 1 or len(inside) > SEGMENT_LENGTH - 2, (number, starts)


def test_the_layout_puts_each_segment_of_sentences_in_its_own_window(backbone):
    _, tokenizer = backbone
    packed = SegmentLMTokenizer.from_backbone(tokenizer, SEGMENT_LENGTH, sentence_packing=True)
    encoded = packed(DOCUMENT, return_offsets_mapping=True, return_tensors="pt")
    ids, mask = encoded["input_ids"], encoded["attention_mask"]
    assert mask.all()  # the padding inside is in the ids, not the mask: a mask rebuilt from the ids is the same
    segments, segment_mask, present = cut_into_segments(ids, mask, 8, SEGMENT_LENGTH, tokenizer.cls_token_id,
                                                        tokenizer.sep_token_id, tokenizer.pad_token_id, packed=True)
    plain = tokenizer(DOCUMENT, add_special_tokens=False, return_offsets_mapping=True)
    expected = pack_sentences(plain["offset_mapping"], sentence_spans(DOCUMENT), SEGMENT_LENGTH - 2)
    assert int(present[0].sum()) == len(expected)
    for k, positions in enumerate(expected):
        real = segments[0, k][segment_mask[0, k]].tolist()
        assert real == [tokenizer.cls_token_id, *[plain["input_ids"][p] for p in positions], tokenizer.sep_token_id]
    # without packing the same ids fill fixed windows, and the tokenizer gives the backbone's ids
    unpacked = SegmentLMTokenizer.from_backbone(tokenizer, SEGMENT_LENGTH, sentence_packing=False)
    assert unpacked(DOCUMENT)["input_ids"] == tokenizer(DOCUMENT)["input_ids"]
    assert [i for i in ids[0].tolist() if i != tokenizer.pad_token_id] == tokenizer(DOCUMENT)["input_ids"]


def test_truncation_padding_and_batches_behave_as_transformers_users_expect(backbone):
    _, tokenizer = backbone
    packed = SegmentLMTokenizer.from_backbone(tokenizer, SEGMENT_LENGTH, sentence_packing=True)
    batch = packed([DOCUMENT, "Tiny."], truncation=True, max_length=30, padding=True, return_tensors="pt",
                   return_offsets_mapping=True)
    assert batch["input_ids"].shape == batch["attention_mask"].shape == batch["offset_mapping"].shape[:2]
    assert batch["input_ids"].shape[1] <= 30 and batch["input_ids"][0, -1] == tokenizer.sep_token_id
    assert batch["attention_mask"][1].sum() == len(packed("Tiny.")["input_ids"])  # padding added on the right: 0
    fixed = packed([DOCUMENT, "Tiny."], truncation=True, max_length=40, padding="max_length")
    assert all(len(ids) == 40 for ids in fixed["input_ids"])
    overflow = packed([DOCUMENT, "Tiny."], truncation=True, max_length=20, return_overflowing_tokens=True)
    assert overflow["overflow_to_sample_mapping"] == [0, 0, 1]  # the first text was cut, the second was not
    assert packed("Tiny.", add_special_tokens=False)["input_ids"] == tokenizer("Tiny.", add_special_tokens=False)[
        "input_ids"]


def test_a_packed_model_reads_max_length_document_tokens(backbone):
    """`--max-length N` with packing reads about N document tokens: the model has a third more segments than fixed
    windows (their padding takes room; before, it counted toward N and a document was cut a quarter earlier)."""
    folder, plain = backbone
    long_document = " ".join([DOCUMENT] * 12)
    for packing in (False, True):
        model, tokenizer = FAMILIES["segment_lm"].from_backbone(folder, None, 202, num_labels=2,
                                                                segment_length=SEGMENT_LENGTH,
                                                                sentence_packing=packing)
        tokenizer.model_max_length = reading_length(model.config, 202)  # as `train` sets it for --max-length 202
        ids = tokenizer(long_document, truncation=True)["input_ids"]
        text = [i for i in ids if i not in (tokenizer.cls_token_id, tokenizer.sep_token_id, tokenizer.pad_token_id)]
        assert len(text) >= 200 and len(ids) <= tokenizer.model_max_length
        assert model.config.num_segments == (14 if packing else 10)
        assert text == plain(long_document, add_special_tokens=False)["input_ids"][:len(text)]


@pytest.fixture(scope="module")
def saved_packed_model(backbone, tmp_path_factory):
    """A segment LM around the tiny backbone with `sentence_packing=True`, saved as `train` saves it."""
    folder, _ = backbone
    model, tokenizer = FAMILIES["segment_lm"].from_backbone(folder, None, 400, num_labels=3,
                                                            segment_length=SEGMENT_LENGTH, sentence_packing=True)
    assert isinstance(tokenizer, SegmentLMTokenizer) and tokenizer.sentence_packing
    tokenizer.model_max_length = FAMILIES["segment_lm"].reading_length(model.config)
    torch.manual_seed(0)
    with torch.no_grad():
        model.head.context.mul_(20)  # an uneven α, so that the best passage means something
    output = tmp_path_factory.mktemp("packed")
    model.config.id2label, model.config.label2id = {0: "a", 1: "b", 2: "c"}, {"a": 0, "b": 1, "c": 2}
    model.save_pretrained(output)
    tokenizer.save_pretrained(output)
    return str(output)


def test_every_path_reads_a_document_as_the_tokenizer_lays_it_out(saved_packed_model, backbone, tmp_path):
    tokenizer = AutoTokenizer.from_pretrained(saved_packed_model)
    assert isinstance(tokenizer, SegmentLMTokenizer) and tokenizer.sentence_packing
    assert set(tokenizer(DOCUMENT)) == set(backbone[1](DOCUMENT))  # the backbone's inputs, not the base class's
    model = AutoModelForSequenceClassification.from_pretrained(saved_packed_model).eval()
    documents = [DOCUMENT, "Short one. The end.", SENTENCES[3] + " " + SENTENCES[0]]
    with torch.no_grad():
        expected = [model(**tokenizer(text, truncation=True, return_tensors="pt")).logits.softmax(-1)[0]
                    for text in documents]
    classify = pipeline("text-classification", model=saved_packed_model, top_k=None, truncation=True)
    long_classify = pipeline("long-document-classification", model=saved_packed_model)
    predicted = hf_longdoc.predict(saved_packed_model, hf_longdoc_dataset(documents))
    for text, scores, row in zip(documents, expected, predicted):
        shown = {entry["label"]: entry["score"] for entry in classify([text])[0]}
        assert [shown[label] for label in "abc"] == pytest.approx(scores.tolist(), abs=1e-5)
        assert list(long_classify(text)["scores"].values()) == pytest.approx(scores.tolist(), abs=1e-5)
        assert [row["scores"][label] for label in "abc"] == pytest.approx(scores.tolist(), abs=1e-5)


def hf_longdoc_dataset(texts):
    from datasets import Dataset

    return Dataset.from_dict({"text": texts})


def test_explain_gives_whole_sentences_with_their_offsets(saved_packed_model):
    tokenizer = AutoTokenizer.from_pretrained(saved_packed_model)
    model = AutoModelForSequenceClassification.from_pretrained(saved_packed_model).eval()
    _, evidence = explain(model, tokenizer, [DOCUMENT], k=10, max_length=None)
    starts = {DOCUMENT.index(sentence) for sentence in SENTENCES}
    ends = {DOCUMENT.index(sentence) + len(sentence) for sentence in SENTENCES}
    long_start = DOCUMENT.index(SENTENCES[3])
    long_end = long_start + len(SENTENCES[3])
    assert len(evidence[0]) >= 3
    for passage in evidence[0]:
        assert DOCUMENT[passage["start"]:passage["end"]] == passage["text"]
        inside_long = long_start <= passage["start"] < long_end or long_start < passage["end"] <= long_end
        if not inside_long:  # only the sentence longer than a segment is given in pieces
            assert passage["start"] in starts and passage["end"] in ends, passage


def test_the_hub_copy_lays_documents_out_without_hf_longdoc(saved_packed_model, tmp_path):
    tokenizer = AutoTokenizer.from_pretrained(saved_packed_model)
    model = AutoModelForSequenceClassification.from_pretrained(saved_packed_model).eval()
    with torch.no_grad():
        expected = model(**tokenizer(DOCUMENT, return_tensors="pt")).logits[0].tolist()
    code = """
        import json, sys
        import torch
        from transformers import AutoModelForSequenceClassification, AutoTokenizer
        folder, text = sys.argv[1], sys.argv[2]
        tokenizer = AutoTokenizer.from_pretrained(folder, trust_remote_code=True)
        model = AutoModelForSequenceClassification.from_pretrained(folder, trust_remote_code=True).eval()
        encoded = tokenizer(text, return_tensors="pt")
        with torch.no_grad():
            logits = model(**encoded).logits[0].tolist()
        print(json.dumps({"class": type(tokenizer).__name__, "ids": encoded["input_ids"][0].tolist(),
                          "logits": logits}))
    """
    result = json.loads(run_without_hf_longdoc(code, saved_packed_model, DOCUMENT, workdir=tmp_path).stdout
                        .strip().splitlines()[-1])
    assert result["class"] == "SegmentLMTokenizer"
    assert result["ids"] == tokenizer(DOCUMENT)["input_ids"]
    assert result["logits"] == pytest.approx(expected, abs=1e-5)


def test_a_config_without_packing_reads_pads_as_before(backbone):
    """Models saved before `sentence_packing` (and fixed windows) read every id the mask lets through, as before."""
    folder, tokenizer = backbone
    model, plain_tokenizer = FAMILIES["segment_lm"].from_backbone(folder, None, 200, num_labels=2,
                                                                  segment_length=SEGMENT_LENGTH)
    assert not model.config.sentence_packing and not isinstance(plain_tokenizer, SegmentLMTokenizer)
    with pytest.raises(ValueError, match="`sentence_packing` must be True or False"):
        type(model.config)(sentence_packing="yes")


@pytest.mark.slow
def test_the_onnx_graph_reads_the_sentence_layout_as_pytorch_does(saved_packed_model, tmp_path):
    import onnxruntime

    from hf_longdoc.inference.export import export_onnx

    export_onnx(saved_packed_model, str(tmp_path / "onnx"))
    tokenizer = AutoTokenizer.from_pretrained(saved_packed_model)
    model = AutoModelForSequenceClassification.from_pretrained(saved_packed_model).eval()
    session = onnxruntime.InferenceSession(str(tmp_path / "onnx" / "model.onnx"), providers=["CPUExecutionProvider"])
    encoded = tokenizer([DOCUMENT, "Short one. The end."], padding=True, truncation=True, return_tensors="pt")
    assert (encoded["input_ids"][0] == tokenizer.pad_token_id).sum() > 0  # padding inside the first document
    with torch.no_grad():
        expected = model(input_ids=encoded["input_ids"], attention_mask=encoded["attention_mask"]).logits
    (got,) = session.run(["logits"], {"input_ids": encoded["input_ids"].numpy(),
                                      "attention_mask": encoded["attention_mask"].numpy()})
    torch.testing.assert_close(torch.from_numpy(got), expected, rtol=0, atol=1e-4)
