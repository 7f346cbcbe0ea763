"""The segment LM's z_1 read as the head + tail window (`first_segment="head_tail"`, Eq. 5's z_1 = LM(x_1) with x_1
the first H and the last W - 2 - H document tokens, one pass with full attention): the window against a reference
written from that definition, z_1 against the backbone's own pass over it, the gradient it carries, and every path
(the pipelines, `predict` on both backends, `--explain`, the server, the Hub copy without hf_longdoc) reading a
document as `train` does (the tokenizer with `truncation=True`, then the model)."""

import json

import datasets
import pytest
import torch
from fastapi.testclient import TestClient
from transformers import AutoModelForSequenceClassification, AutoTokenizer, pipeline

import hf_longdoc
from fresh_process import run_without_hf_longdoc
from hf_longdoc import FAMILIES, SegmentLMConfig
from hf_longdoc.data import fit_wordpiece_tokenizer
from hf_longdoc.inference.explaining import explain
from hf_longdoc.modeling.segment_lm.family import head_tail_parts, segment_of_positions
from hf_longdoc.modeling.segment_lm.modeling_segment import (
    SegmentLMForSequenceClassification,
    cut_into_segments,
    head_tail_window,
)
from hf_longdoc.serving import create_app
from tiny_bert import save_tiny_bert

SENTENCES = ["The club won the cup final on Sunday.", "The minister spoke about taxes and the budget.",
             "Shares fell on Monday after the report.", "The band played a new song at the festival."]
LONG = " ".join(SENTENCES[i % 4] for i in range(30))  # about 300 ids: past the window and the segments
LABELS = {0: "sport", 1: "politics", 2: "business"}


def reference_window(document_ids, length, head):
    """x_1 from the definition: [CLS], the first `head` ids, the last `length` - 2 - `head`, [SEP] (all of a document
    of at most `length` - 2 ids)."""
    width = length - 2
    kept = document_ids if len(document_ids) <= width else document_ids[:head] + document_ids[-(width - head):]
    return [101] + kept + [102]


@pytest.mark.parametrize("packed", [False, True])
@pytest.mark.parametrize("tokens", [0, 1, 9, 14, 15, 40, 70])
def test_the_window_holds_the_first_and_last_document_ids_the_segments_read(tokens, packed):
    generator = torch.Generator().manual_seed(tokens)
    document = torch.randint(5, 99, (tokens,), generator=generator).tolist()
    if packed and tokens > 9:  # a packed layout: the first segment's rest is [PAD] ids inside the document
        document[5:8] = [0, 0, 0]
    ids = torch.tensor([[101] + document + [102]])
    segments, mask, _ = cut_into_segments(ids, torch.ones_like(ids), 8, 10, 101, 102, 0, packed)
    window, window_mask = head_tail_window(segments, mask, 16, 4, 101, 102, 0)
    read = [t for t in document[:64] if not (packed and t == 0)]  # what 8 segments of 8 document ids hold
    assert window.shape == (1, 16) and window[0][window_mask[0]].tolist() == reference_window(read, 16, 4)
    assert (window[0][~window_mask[0]] == 0).all()
    # the explanation's map of the same positions (head part, tail part)
    segment = segment_of_positions(ids, torch.ones_like(ids), 8, 10, 101, 102, 0, packed)
    in_head, in_tail = head_tail_parts(segment, 16, 4)
    assert ids[0][in_head[0] | in_tail[0]].tolist() == reference_window(read, 16, 4)[1:-1]
    assert not (in_head & in_tail).any()


def reference_kept(ids, limit, width, tail, pad):
    """What a reading of `limit` keeps of a document's ids with the window's `tail`, by search over every cut: the
    first `head` and the ids from `start` on, both multiples of `width` (whole segments of the document's own), at
    most `limit` ids, at least `tail` non-[PAD] ids from `start` on; the latest such `start`, then the longest head."""
    if len(ids) <= limit:
        return list(ids)
    cuts = [(start, head) for start in range(0, len(ids), width) for head in range(width, start + 1, width)
            if head + len(ids) - start <= limit and sum(t != pad for t in ids[start:]) >= tail]
    if not cuts:  # the tail alone fills the reading: the last whole segments that fit
        return ids[min(start for start in range(0, len(ids) + width, width) if len(ids) - start <= limit):]
    start, head = max(cuts)
    return ids[:head] + ids[start:]


@pytest.mark.parametrize("seed", range(40))
def test_a_cut_document_keeps_its_first_segments_and_the_last_that_hold_its_tail(seed):
    from hf_longdoc.modeling.segment_lm.modeling_segment import kept_positions

    generator = torch.Generator().manual_seed(seed)
    width = int(torch.randint(3, 9, (1,), generator=generator))
    n, limit = (int(v) for v in torch.randint(1, 90, (2,), generator=generator))
    tail = int(torch.randint(0, limit + 1, (1,), generator=generator))
    ids = torch.randint(1, 20, (n,), generator=generator).tolist()
    if seed % 2:  # a packed layout's [PAD] fill (id 0) inside
        ids = [0 if (i % width) > width - 3 else t for i, t in enumerate(ids)]
    kept = [ids[p] for p in kept_positions(ids, limit, width, tail, 0)]
    expected = reference_kept(ids, limit, width, tail, 0) if tail else ids[:limit]
    assert kept == expected and len(kept) <= max(limit, 0)


def test_the_tokenizer_and_the_model_read_a_long_documents_true_end(saved_reading_model):
    """Train's tokenizer (truncation=True) keeps a cut document's first segments and the last ones, which hold its
    last T ids; the model given the whole text cuts it alike; the window's tail is the document's own last T ids."""
    tokenizer = AutoTokenizer.from_pretrained(saved_reading_model)
    model = AutoModelForSequenceClassification.from_pretrained(saved_reading_model).eval()
    config = model.config
    whole = tokenizer(LONG)["input_ids"]
    cut = tokenizer(LONG, truncation=True)["input_ids"]
    tail = config.first_segment_length - 2 - config.first_segment_head
    assert tokenizer.kept_tail == tail and len(whole) > tokenizer.model_max_length >= len(cut)
    assert cut == whole[:1] + reference_kept(whole[1:-1], tokenizer.model_max_length - 2, config.segment_length - 2,
                                             tail, tokenizer.pad_token_id) + whole[-1:]
    segments, mask, _ = model.segment_lm.segments(torch.tensor([whole]), None)
    window, window_mask = model.segment_lm.first_window(segments, mask, "head_tail")
    assert window[0][window_mask[0]].tolist()[-tail - 1:-1] == whole[-tail - 1:-1]  # the document's last T ids
    with torch.no_grad():
        read_whole = model(input_ids=torch.tensor([whole])).logits
        read_cut = model(input_ids=torch.tensor([cut])).logits
    torch.testing.assert_close(read_whole, read_cut)
    config.max_input_length = 120  # as `train` records its --max-length: the model cuts there, as the tokenizer did
    shorter = tokenizer(LONG, truncation=True, max_length=120)["input_ids"]
    with torch.no_grad():
        torch.testing.assert_close(model(input_ids=torch.tensor([whole])).logits,
                                   model(input_ids=torch.tensor([shorter])).logits)
    with TestClient(create_app(saved_reading_model)) as client:
        coverage = client.post("/classify", json={"inputs": [LONG]}).json()[0]["coverage"]
    assert coverage["cut"] and coverage["part_read"] == "start and end"


def test_with_sentence_packing_a_cut_document_keeps_whole_segments_of_its_own_layout(tmp_path):
    tokenizer = fit_wordpiece_tokenizer([LONG] * 5, vocab_size=150, model_max_length=64)
    backbone = save_tiny_bert(tmp_path, tokenizer, max_positions=64)
    model, tokenizer = FAMILIES["segment_lm"].from_backbone(backbone, None, 200, num_labels=3, segment_length=16,
                                                            first_segment="head_tail", sentence_packing=True)
    model.eval()
    tail = model.config.first_segment_length - 2 - model.config.first_segment_head
    assert tokenizer.sentence_packing and tokenizer.kept_tail == tail
    whole = tokenizer(LONG)["input_ids"]  # laid out: every segment but the last padded to 14 ids
    cut = tokenizer(LONG, truncation=True, max_length=120)["input_ids"]
    assert cut == whole[:1] + reference_kept(whole[1:-1], 118, 14, tail, tokenizer.pad_token_id) + whole[-1:]
    text_ids = [t for t in whole[1:-1] if t != tokenizer.pad_token_id]
    assert [t for t in cut[1:-1] if t != tokenizer.pad_token_id][-tail:] == text_ids[-tail:]
    model.config.max_input_length = 120
    with torch.no_grad():
        torch.testing.assert_close(model(input_ids=torch.tensor([whole])).logits,
                                   model(input_ids=torch.tensor([cut])).logits)


def tiny_config(**settings):
    return SegmentLMConfig(backbone_config={"model_type": "bert", "hidden_size": 32, "num_hidden_layers": 2,
                                            "num_attention_heads": 2, "intermediate_size": 64,
                                            "max_position_embeddings": 40, "vocab_size": 300},
                           num_segments=6, segment_length=12, num_labels=3, first_segment="head_tail",
                           segment_pooling="mean", **settings)


def test_the_config_sizes_the_window_from_the_backbone_and_refuses_what_does_not_fit():
    config = tiny_config()
    assert (config.first_segment_length, config.first_segment_head) == (40, 10)  # 512 / 128, in proportion
    assert SegmentLMConfig.from_dict(config.to_dict()).first_segment == "head_tail"
    with pytest.raises(ValueError, match="first_segment"):
        tiny_config().__class__(first_segment="middle")
    with pytest.raises(ValueError, match="first_segment_length"):
        tiny_config(first_segment_length=41)
    with pytest.raises(ValueError, match="first_segment_head"):
        tiny_config(first_segment_head=39)


def test_z1_is_the_backbones_pooled_pass_over_the_window_with_its_gradient():
    torch.manual_seed(0)
    model = SegmentLMForSequenceClassification(tiny_config(gradient_mode="paper", variant="rnn"))
    ids = torch.cat([torch.tensor([[101]]), torch.randint(200, 300, (1, 60)), torch.tensor([[102]])], dim=1)
    window = torch.tensor([reference_window(ids[0, 1:-1].tolist(), 40, 10)])
    backbone = model.segment_lm.backbone
    model.eval()
    with torch.no_grad():
        z, present, _ = model.segment_lm.encode_document(ids, torch.ones_like(ids))
        states = backbone(input_ids=window).last_hidden_state
        segment = ids[:, 1 + 10:1 + 20]  # segment 2: document ids 10..19
        second = backbone(input_ids=torch.cat([ids[:, :1], segment, ids[:, -1:]], dim=1)).last_hidden_state
    assert z[0, 0].tolist() == pytest.approx(states[0].mean(dim=0).tolist(), abs=1e-5)  # z_1 = LM(x_1), the window
    assert z[0, 1].tolist() == pytest.approx(second[0].mean(dim=0).tolist(), abs=1e-5)  # z_2 as before
    # paper mode (Eq. 3): the LM's gradient comes through z_1, the window; the other segments are stop-gradient
    model.train()
    out = model(input_ids=ids, labels=torch.tensor([1]))
    out.loss.backward()
    embedding = backbone.embeddings.word_embeddings.weight.grad
    middle = sorted(set(ids[0, 1 + 10:1 + 50].tolist()) - set(window[0].tolist()))  # ids only in the middle
    assert embedding.abs().sum() > 0
    assert all(embedding[i].abs().sum() == 0 for i in middle)  # no gradient through a segment the window skips


@pytest.mark.parametrize("mode", ["full", "paper", "selected"])
def test_the_window_pass_trains_without_dropout_unless_asked(mode):
    """In training the window's pass runs without the backbone's dropout (`first_segment_dropout=False`: its CPU
    attention keeps the fused kernel), with its gradient; the segments keep theirs in `full` mode; True restores
    it."""
    ids = torch.cat([torch.tensor([[101]] * 2), torch.randint(200, 300, (2, 60)), torch.tensor([[102]] * 2)], dim=1)
    for dropout in (False, True):
        torch.manual_seed(0)
        model = SegmentLMForSequenceClassification(tiny_config(gradient_mode=mode, first_segment_dropout=dropout))
        for module in model.segment_lm.backbone.modules():
            if isinstance(module, torch.nn.Dropout):
                module.p = 0.5
        model.eval()
        with torch.no_grad():
            evaluated, _, _ = model.segment_lm.encode_document(ids, torch.ones_like(ids))
        model.train()
        trained, _, encode_selected = model.segment_lm.encode_document(ids, torch.ones_like(ids))
        if mode != "selected":  # (there z is stop-gradient, without dropout as every stopped pass)
            assert torch.allclose(trained[:, 0], evaluated[:, 0], atol=1e-6) is not dropout
            assert trained[:, 0].requires_grad
        if mode == "full":
            assert not torch.allclose(trained[:, 1], evaluated[:, 1], atol=1e-6)  # the segments' dropout stays
        if mode == "selected":  # z_M re-encoded with gradient where M = 1: the window, as above
            again = encode_selected(torch.zeros(2, dtype=torch.long))
            assert again.requires_grad and torch.allclose(again, evaluated[:, 0], atol=1e-6) is not dropout
    assert SegmentLMConfig.from_dict(tiny_config(first_segment_dropout=True).to_dict()).first_segment_dropout


def test_the_base_variant_over_the_window_is_head_and_tail():
    """Eq. 1 with x_1 the window reads what `bert-512-headtail` reads: C(LM(first H + last W - 2 - H))."""
    torch.manual_seed(0)
    model = SegmentLMForSequenceClassification(tiny_config(variant="base")).eval()
    ids = torch.cat([torch.tensor([[101]]), torch.randint(200, 300, (1, 60)), torch.tensor([[102]])], dim=1)
    window = torch.tensor([reference_window(ids[0, 1:-1].tolist(), 40, 10)])
    with torch.no_grad():
        states = model.segment_lm.backbone(input_ids=window).last_hidden_state.mean(dim=1)
        expected = model.head.classifier(states)[0].tolist()
        assert model(input_ids=ids).logits[0].tolist() == pytest.approx(expected, abs=1e-5)


def save_window_model(folder, **settings):
    """A segment LM around a tiny backbone, with `settings` (the head + tail window, or the cut that keeps the
    document's end for it), saved in `folder` as `train` saves it."""
    tokenizer = fit_wordpiece_tokenizer([LONG] * 5, vocab_size=150, model_max_length=64)
    backbone = save_tiny_bert(folder / "backbone", tokenizer, max_positions=64)
    model, tokenizer = FAMILIES["segment_lm"].from_backbone(backbone, None, 200, num_labels=3, segment_length=16,
                                                            **settings)
    assert model.config.keep_document_end and tokenizer.kept_tail == 64 - 2 - 16  # W - 2 - H
    tokenizer.model_max_length = FAMILIES["segment_lm"].reading_length(model.config)
    torch.manual_seed(0)
    with torch.no_grad():
        model.head.context.mul_(20)  # an uneven α
    model.config.id2label, model.config.label2id = LABELS, {v: k for k, v in LABELS.items()}
    model.save_pretrained(folder / "model")
    tokenizer.save_pretrained(folder / "model")
    return str(folder / "model")


@pytest.fixture(scope="module")
def saved_window_model(tmp_path_factory):
    return save_window_model(tmp_path_factory.mktemp("window"), first_segment="head_tail")


# z_1 as the window; and a model whose head stage weighed `base` on the window against `att` with segment 1 and kept
# `att`: it reads a cut document's true end as the window would have (`keep_document_end`)
READINGS = {"window": {"first_segment": "head_tail"}, "end kept": {"variant_candidates": "att,base:head_tail"}}


@pytest.fixture(scope="module", params=list(READINGS))
def saved_reading_model(tmp_path_factory, request):
    return save_window_model(tmp_path_factory.mktemp("reading"), **READINGS[request.param])


DOCUMENTS = [LONG, SENTENCES[0], " ".join(SENTENCES * 3)]


def trained_reading(folder):
    """Scores as `train` reads a document: the tokenizer with truncation=True, then the model."""
    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForSequenceClassification.from_pretrained(folder).eval()
    assert model.config.keep_document_end
    with torch.no_grad():
        return [model(**tokenizer(text, truncation=True, return_tensors="pt")).logits.softmax(-1)[0].tolist()
                for text in DOCUMENTS]


def test_every_path_reads_a_document_as_train_does(saved_reading_model, tmp_path):
    expected = trained_reading(saved_reading_model)
    names = [LABELS[i] for i in range(3)]
    classify = pipeline("text-classification", model=saved_reading_model, top_k=None, truncation=True)
    untruncated = pipeline("text-classification", model=saved_reading_model, top_k=None)  # the model cuts it
    long_classify = pipeline("long-document-classification", model=saved_reading_model)
    corpus = datasets.Dataset.from_dict({"text": DOCUMENTS})
    predicted = hf_longdoc.predict(saved_reading_model, corpus)
    onnx = hf_longdoc.predict(saved_reading_model, corpus, backend="onnxruntime", graph_dir=str(tmp_path / "onnx"))
    with TestClient(create_app(saved_reading_model)) as client:
        served = client.post("/classify", json={"inputs": DOCUMENTS}).json()
    for text, scores, row, graph_row, answer in zip(DOCUMENTS, expected, predicted, onnx, served):
        for piped in (classify, untruncated):
            shown = {entry["label"]: entry["score"] for entry in piped([text])[0]}
            assert [shown[name] for name in names] == pytest.approx(scores, abs=1e-5)
        read_whole = long_classify(text)
        if read_whole["chunks"] == 1:  # a longer one is read in chunks of what the model reads, their logits averaged
            assert [read_whole["scores"][name] for name in names] == pytest.approx(scores, abs=1e-5)
        assert [row["scores"][name] for name in names] == pytest.approx(scores, abs=1e-5)
        assert [graph_row["scores"][name] for name in names] == pytest.approx(scores, abs=1e-4)
        assert [answer["scores"][name] for name in names] == pytest.approx(scores, abs=1e-5)


def test_the_hub_copy_reads_the_window_without_hf_longdoc(saved_reading_model, tmp_path):
    expected = trained_reading(saved_reading_model)
    code = """
        import json, sys
        import torch
        from transformers import AutoModelForSequenceClassification, AutoTokenizer
        folder, texts = sys.argv[1], json.loads(sys.argv[2])
        tokenizer = AutoTokenizer.from_pretrained(folder, trust_remote_code=True)
        model = AutoModelForSequenceClassification.from_pretrained(folder, trust_remote_code=True).eval()
        with torch.no_grad():
            scores = [model(**tokenizer(text, truncation=True, return_tensors="pt")).logits.softmax(-1)[0].tolist()
                      for text in texts]
        print(json.dumps(scores))
    """
    result = run_without_hf_longdoc(code, saved_reading_model, json.dumps(DOCUMENTS), workdir=tmp_path)
    for got, scores in zip(json.loads(result.stdout.strip().splitlines()[-1]), expected):
        assert got == pytest.approx(scores, abs=1e-5)


def test_explain_gives_the_window_as_its_head_and_tail_in_whole_sentences(saved_window_model):
    tokenizer = AutoTokenizer.from_pretrained(saved_window_model)
    model = AutoModelForSequenceClassification.from_pretrained(saved_window_model).eval()
    _, evidence = explain(model, tokenizer, [LONG], k=50, max_length=None)
    with torch.no_grad():
        alpha = model(**tokenizer(LONG, truncation=True, return_tensors="pt"), output_attentions=True).attentions[0]
    window_weight = float(alpha[0, 0])
    at_window = [passage for passage in evidence[0] if passage["weight"] == pytest.approx(window_weight)]
    assert at_window and at_window[0]["start"] == 0  # the head starts the document
    for passage in evidence[0]:
        assert LONG[passage["start"]:passage["end"]] == passage["text"]
        assert passage["text"].startswith(tuple(SENTENCES)) and passage["text"].endswith(".")  # whole sentences


def test_explain_of_a_cut_document_points_at_its_own_sentences(saved_reading_model):
    """Whatever x_1 is, the evidence of a document cut to its first and last segments is whole sentences of the
    text, its offsets pointing at them, some from the document's end (read past the segments left out)."""
    tokenizer = AutoTokenizer.from_pretrained(saved_reading_model)
    model = AutoModelForSequenceClassification.from_pretrained(saved_reading_model).eval()
    _, evidence = explain(model, tokenizer, [LONG], k=50, max_length=None)
    assert evidence[0] and max(passage["end"] for passage in evidence[0]) == len(LONG)
    for passage in evidence[0]:
        assert LONG[passage["start"]:passage["end"]] == passage["text"]
        assert passage["text"].startswith(tuple(SENTENCES)) and passage["text"].endswith(".")


def sentences_held(document, start, end):
    """The characters [start, end) widened or trimmed to the sentences of `document` (SENTENCES joined by spaces) at
    least half inside them: the rule `--explain` shows a passage by."""
    spans, first = [], 0
    for sentence in document.split(". "):
        length = len(sentence.rstrip(".")) + 1
        spans.append((first, first + length))
        first += length + 1
    held = [(s, e) for s, e in spans if 2 * max(0, min(end, e) - max(start, s)) >= e - s]
    return held[0][0], held[-1][1]


def test_explain_gives_the_base_variants_window_whole_at_weight_one(saved_window_model):
    """Eq. 1 reads z_1 alone: with z_1 the window, the evidence is the window's head and tail, all of the weight."""
    tokenizer = AutoTokenizer.from_pretrained(saved_window_model)
    model = AutoModelForSequenceClassification.from_pretrained(saved_window_model).eval()
    FAMILIES["segment_lm"].set_readout(model, {"variant": "base"})  # as the head stage keeps a chosen head
    _, evidence = explain(model, tokenizer, [LONG], k=50, max_length=None)
    offsets = tokenizer(LONG, truncation=True, return_offsets_mapping=True)["offset_mapping"][1:-1]  # the ids read
    length, head = model.config.first_segment_length, model.config.first_segment_head
    tail = offsets[-(length - 2 - head):]
    expected = {sentences_held(LONG, offsets[0][0], offsets[head - 1][1]): 1.0,
                sentences_held(LONG, tail[0][0], tail[-1][1]): 1.0}
    assert {(p["start"], p["end"]): p["weight"] for p in evidence[0]} == expected
    assert all(LONG[p["start"]:p["end"]] == p["text"] for p in evidence[0])
    assert evidence[0][0]["start"] == 0 and evidence[0][-1]["end"] == len(LONG)  # the document's own end


def test_a_model_saved_before_the_setting_reads_segment_one_as_before():
    config = SegmentLMConfig(num_segments=4, segment_length=16)
    saved = config.to_dict()
    for name in ("first_segment", "first_segment_length", "first_segment_head", "keep_document_end"):
        saved.pop(name)
    assert SegmentLMConfig.from_dict(saved).first_segment == "segment"
    assert not SegmentLMConfig.from_dict(saved).keep_document_end  # its first ids, as it was cut
    assert SegmentLMConfig.from_dict({**saved, "first_segment": "head_tail"}).keep_document_end
    torch.manual_seed(0)
    model = SegmentLMForSequenceClassification(config).eval()
    assert model.segment_lm.first_window(*model.segment_lm.segments(torch.tensor([[101, 7, 8, 102]]), None)[:2]) \
        is None


@pytest.fixture(scope="module")
def tiny_backbone(tmp_path_factory):
    from hf_longdoc.data import make_long_document_task

    texts = make_long_document_task(train_size=16, validation_size=1, test_size=1, min_words=40, max_words=60,
                                    seed=1)["train"]["text"]
    tokenizer = fit_wordpiece_tokenizer(texts, vocab_size=200, model_max_length=64)
    return save_tiny_bert(tmp_path_factory.mktemp("tiny-bert"), tokenizer, max_positions=64)


@pytest.mark.slow
def test_train_and_compare_read_z1_as_the_window_and_evaluate_reads_as_train_did(tiny_backbone, tmp_path,
                                                                                  monkeypatch):
    from hf_longdoc.cli import main
    from hf_longdoc.modeling.segment_lm import modeling_segment
    from hf_longdoc.training.evaluation import evaluate_model

    windows = []
    original = modeling_segment.head_tail_window
    monkeypatch.setattr(modeling_segment, "head_tail_window",
                        lambda *args: windows.append(args[2:4]) or original(*args))
    out = tmp_path / "train"
    assert main(["train", "--model", "segment_lm", "--backbone", tiny_backbone, "--task-size", "16", "--epochs", "1",
                 "--max-length", "200", "--head-epochs", "2", "--config", "segment_length=16",
                 "first_segment=head_tail", "--output-dir", str(out)]) == 0
    config = json.loads((out / "config.json").read_text())
    assert (config["first_segment"], config["first_segment_length"], config["first_segment_head"]) == \
        ("head_tail", 64, 16)
    assert windows and set(windows) == {(64, 16)}  # the head stage and fine-tuning read the window
    metrics = json.loads((out / "metrics.json").read_text())
    assert evaluate_model(str(out))["accuracy"] == pytest.approx(metrics["test"]["accuracy"])
    windows.clear()
    assert main(["compare", "--backbone", tiny_backbone, "--models", "segment_lm:att", "--baselines", "",
                 "--task-size", "16", "--epochs", "1", "--max-length", "200", "--segment-length", "16",
                 "--head-epochs", "2", "--evidence", "none", "--bench-lengths", "none",
                 "--config", "segment_lm.first_segment=head_tail",
                 "--output-dir", str(tmp_path / "compare")]) == 0
    assert windows
