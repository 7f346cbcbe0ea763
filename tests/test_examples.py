"""The example scripts run end to end offline on data they make themselves."""

import json
import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "examples"))


@pytest.mark.slow
def test_patents_multilabel_example_runs_offline(tmp_path):
    import patents_multilabel

    sample = patents_multilabel.make_sample(str(tmp_path / "patents.jsonl"), count=40)
    first = json.loads(open(sample).readline())
    assert len(first["claims"]) >= 3 and all(code[:4].isalnum() for code in first["cpc_codes"])
    metrics = patents_multilabel.main([sample, "--max-steps", "2", "--batch-size", "4",
                                       "--output-dir", str(tmp_path / "out")])
    assert {"test_micro_precision", "test_micro_recall", "test_micro_f1"} <= set(metrics)
    config = json.loads((tmp_path / "out" / "config.json").read_text())
    assert config["problem_type"] == "multi_label_classification"
    assert all(label.startswith(("First-", "Later-")) for label in config["id2label"].values())
    assert len(config["id2label"]) % 2 == 0  # First- and Later- of every subclass


def test_first_twenty_claims():
    import patents_multilabel

    claims = [f"{i}. claim {i}" for i in range(1, 30)]
    assert patents_multilabel.first_claims(claims).endswith("20. claim 20")
    assert patents_multilabel.first_claims("1. a\n\n2. b\n3. c", count=2) == "1. a 2. b"


def _write_jsonl(path, rows):
    with open(path, "w") as f:
        for row in rows:
            f.write(json.dumps(row) + "\n")
    return str(path)


def test_late_evidence_puts_enough_filler_in_front_of_every_document(tmp_path, capsys):
    import late_evidence

    from hf_longdoc.data import fit_wordpiece_tokenizer

    documents = [{"text": f"article {i} about topic {i % 3}", "label": f"t{i % 3}"} for i in range(12)]
    filler = [{"text": " ".join(["some neutral words"] * (5 + i)), "label": "x"} for i in range(6)]
    tokenizer = fit_wordpiece_tokenizer([row["text"] for row in documents + filler], vocab_size=60)
    tokenizer.save_pretrained(tmp_path / "tokenizer")
    args = [_write_jsonl(tmp_path / "docs.jsonl", documents), "--filler", _write_jsonl(tmp_path / "f.jsonl", filler),
            "--tokenizer", str(tmp_path / "tokenizer"), "--min-prefix", "40", "--size", "8", "--seed", "3"]
    rows = late_evidence.main(args)
    printed = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert printed == rows and len(rows) == 8 and rows == late_evidence.main(args)  # seeded
    by_text = {row["text"]: row["label"] for row in documents}
    for row in rows:
        filler_text, _, document = row["text"].rpartition("\n\n")
        assert by_text[document] == row["label"]  # the document whole, last, with its own label
        assert row["filler_tokens"] >= 40
        assert len(tokenizer(filler_text, add_special_tokens=False)["input_ids"]) >= 40


def test_pretrain_slstm_mlm_lowers_perplexity_and_fine_tunes_with_init_from(tmp_path):
    import random

    import pretrain_slstm_mlm
    import torch

    from hf_longdoc import SLSTMForMaskedLM
    from hf_longdoc.cli import main as cli
    from hf_longdoc.training.recipe import build_model

    rng = random.Random(0)
    subjects, verbs, objects = ["the cat", "a dog", "my bird"], ["sees", "chases", "likes"], ["the ball", "a hat"]
    corpus = [{"text": " . ".join(f"{rng.choice(subjects)} {rng.choice(verbs)} {rng.choice(objects)}"
                                  for _ in range(12))} for _ in range(60)]
    corpus_file = _write_jsonl(tmp_path / "corpus.jsonl", corpus)
    out = tmp_path / "mlm"
    metrics = pretrain_slstm_mlm.main([corpus_file, "--output-dir", str(out), "--vocab-size", "60",
                                       "--block-size", "32", "--hidden-size", "24", "--num-recurrent-steps", "2",
                                       "--max-position-embeddings", "64", "--max-steps", "80", "--batch-size", "8",
                                       "--learning-rate", "3e-3"])
    assert metrics["heldout_perplexity_after"] < 0.5 * metrics["heldout_perplexity_before"]
    assert not (out / "training_args.bin").exists()

    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(out)
    classifier = build_model("slstm", tokenizer, ["no", "yes"], False, init_from=str(out))
    pretrained = SLSTMForMaskedLM.from_pretrained(out)
    assert torch.equal(classifier.slstm.step.token_W.weight, pretrained.slstm.step.token_W.weight)
    assert classifier.config.id2label == {0: "no", 1: "yes"}
    with pytest.raises(ValueError, match="not 'contextualizer'"):
        build_model("contextualizer", tokenizer, ["no", "yes"], False, init_from=str(out))

    labelled = [{"text": row["text"], "label": "yes" if "dog" in row["text"][:20] else "no"} for row in corpus]
    dataset = _write_jsonl(tmp_path / "labelled.jsonl", labelled)
    assert cli(["train", "--model", "slstm", "--init-from", str(out), "--dataset", dataset, "--epochs", "1",
                "--max-length", "128", "--output-dir", str(tmp_path / "fine")]) == 0
    assert json.loads((tmp_path / "fine" / "metrics.json").read_text())["max_length"] == 64  # the model's positions
    assert cli(["train", "--model", "slstm", "--init-from", str(tmp_path / "missing"), "--dataset", dataset,
                "--output-dir", str(tmp_path / "x")]) == 2


@pytest.mark.slow
def test_sparse_longformer_example_runs_every_selector_from_a_local_longformer_checkpoint(tmp_path):
    """The thesis' script on a tiny Longformer checkpoint made here (in place of allenai/longformer-base-4096)."""
    import sparse_longformer_patents
    import torch
    from transformers import LongformerConfig, LongformerForMaskedLM

    from hf_longdoc.data import fit_wordpiece_tokenizer

    sample = sparse_longformer_patents.make_sample(str(tmp_path / "patents.jsonl"), count=48)
    texts = [json.loads(line)["description"] for line in open(sample)]
    tokenizer = fit_wordpiece_tokenizer(texts, vocab_size=300, model_max_length=512)
    torch.manual_seed(0)
    checkpoint = LongformerForMaskedLM(LongformerConfig(
        vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
        attention_window=32, max_position_embeddings=514, pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.cls_token_id, eos_token_id=tokenizer.sep_token_id, type_vocab_size=1))
    checkpoint.save_pretrained(tmp_path / "longformer")
    tokenizer.save_pretrained(tmp_path / "longformer")
    results = sparse_longformer_patents.main([sample, "--from-pretrained", str(tmp_path / "longformer"),
                                              "--backbones", "longformer", "--max-length", "256", "--num-global", "8",
                                              "--max-steps", "2", "--batch-size", "4",
                                              "--output-dir", str(tmp_path / "out")])
    assert list(results["longformer"]) == list(sparse_longformer_patents.SELECTORS)
    assert all(0.0 <= scores["accuracy"] <= 1.0 for scores in results["longformer"].values())


@pytest.mark.slow
def test_sparse_longformer_example_runs_the_ten_cell_grid_and_draws_figure_6_1(tmp_path):
    """Both backbones from scratch (--small) with every selector: ten results, results.json and the bar chart."""
    import sparse_longformer_patents

    sample = sparse_longformer_patents.make_sample(str(tmp_path / "patents.jsonl"), count=48)
    results = sparse_longformer_patents.main([sample, "--small", "--max-length", "1024", "--window", "64",
                                              "--num-global", "16", "--max-steps", "1", "--batch-size", "4",
                                              "--output-dir", str(tmp_path / "grid")])
    assert {backbone: list(cells) for backbone, cells in results.items()} == {
        backbone: list(sparse_longformer_patents.SELECTORS) for backbone in ("longformer", "bigbird")}
    assert json.loads((tmp_path / "grid" / "results.json").read_text()) == results
    assert (tmp_path / "grid" / "figure_6_1.png").stat().st_size > 5000


def test_inverted_document_reverses_sentence_order():
    from hf_longdoc.data import invert_sentences

    text = "Title line\n\nFirst sentence. Second one! Third?\nLast paragraph."
    assert invert_sentences(text) == "Last paragraph. Third? Second one! First sentence. Title line"


@pytest.mark.slow
def test_segment_lm_example_compares_variants_on_original_and_inverted_documents(tmp_path):
    import segment_lm

    results, profiles = segment_lm.main(["builtin", "--small", "--train-size", "24", "--num-segments", "4",
                                         "--segment-length", "32", "--max-steps", "2", "--batch-size", "8",
                                         "--variants", "base,att", "--output-dir", str(tmp_path)])
    assert set(results) == {(reading, variant) for reading in ("original", "inverted") for variant in ("base", "att")}
    assert set(profiles) == {"att (original)", "att (inverted)"}
    assert all(len(alpha) == 4 for alpha in profiles.values())
    assert (tmp_path / "alpha_per_segment.png").stat().st_size > 1000


@pytest.mark.slow
def test_segment_lm_example_runs_table_4s_shuffling_with_and_without_x1_gradients(tmp_path):
    import segment_lm

    results, _ = segment_lm.main(["builtin", "--small", "--experiment", "shuffle", "--train-size", "24",
                                  "--num-segments", "4", "--segment-length", "32", "--max-steps", "2",
                                  "--batch-size", "8", "--variants", "base,att", "--output-dir", str(tmp_path)])
    assert set(results) == {(row, variant) for row in segment_lm.GRADIENTS for variant in ("base", "att")}
    assert all(0.0 <= score <= 1.0 for score in results.values())


def test_the_shuffling_collator_permutes_only_the_first_segments():
    import segment_lm
    import torch

    from hf_longdoc import SegmentLMConfig

    config = SegmentLMConfig(backbone_config={"model_type": "bert", "hidden_size": 8, "num_hidden_layers": 1,
                                              "num_attention_heads": 2, "intermediate_size": 8,
                                              "max_position_embeddings": 16},
                             num_segments=3, segment_length=6, cls_token_id=1, sep_token_id=2, pad_token_id=0)

    class Pad:  # what DataCollatorWithPadding needs of a tokenizer
        pad_token_id, padding_side, model_input_names = 0, "right", ["input_ids", "attention_mask"]

        def pad(self, features, **kwargs):
            n = max(len(f["input_ids"]) for f in features)
            ids = torch.tensor([f["input_ids"] + [0] * (n - len(f["input_ids"])) for f in features])
            return {"input_ids": ids, "attention_mask": (ids != 0).long(),
                    "labels": torch.tensor([f["labels"] for f in features])}

    documents = [[1] + list(range(10 * k + 3, 10 * k + 13)) + [2] for k in range(4)]  # 10 tokens: 3 segments
    collator = segment_lm.ShuffledFirstSegments(Pad(), config, seed=0)
    collator.pad = lambda features: Pad().pad(features)
    batch = collator([{"input_ids": d, "labels": k} for k, d in enumerate(documents)])
    assert batch["input_ids"].shape == (4, 3, 6)
    firsts = [tuple(row[0].tolist()) for row in batch["input_ids"]]
    expected_firsts = [(1, *d[1:5], 2) for d in documents]
    assert sorted(firsts) == sorted(expected_firsts) and firsts != expected_firsts  # permuted between documents
    for k, row in enumerate(batch["input_ids"]):
        assert row[1].tolist() == [1, *documents[k][5:9], 2]  # later segments stay with their document
    assert batch["labels"].tolist() == [0, 1, 2, 3]


def test_slot_byte_histogram_counts_each_byte_in_its_slot():
    import elementwise_vs_subword

    histogram = elementwise_vs_subword.slot_byte_histograms(["ab a"], elements_per_material=4, max_materials=8)
    v, size = 4, 260
    expected = np.zeros(v * size)
    expected[0 * size + ord("a") + 4] = 2 / 3  # "a" first in both words
    expected[1 * size + ord("b") + 4] = 1 / 3
    np.testing.assert_allclose(histogram[0], expected)


def test_probe_scores_both_representations(tmp_path):
    import elementwise_vs_subword

    rows = [{"text": f"{word} match {word} game {i}", "label": "sport"} for i, word in enumerate(["goal"] * 30)]
    rows += [{"text": f"{word} vote {word} poll {i}", "label": "politics"} for i, word in enumerate(["party"] * 30)]
    result = elementwise_vs_subword.probe(_write_jsonl(tmp_path / "d.jsonl", rows), seed=0, regularisation=(10.0,))
    assert set(result) == {"slot_byte_histogram_C10", "bag_of_words_C10"}
    assert result["bag_of_words_C10"] == 1.0 and 0.0 <= result["slot_byte_histogram_C10"] <= 1.0


def _tiny_bert_and_documents(tmp_path):
    """40 documents whose label is the last word, and a tiny random BERT with its tokenizer in `tmp_path / "bert"`:
    the path of the documents' JSONL."""
    import torch
    from transformers import BertConfig, BertModel

    from hf_longdoc.data import fit_wordpiece_tokenizer

    rows = [{"text": " ".join(["filler words here"] * 20 + [f"verdict {'good' if i % 2 else 'bad'}"]),
             "label": "pos" if i % 2 else "neg"} for i in range(40)]
    tokenizer = fit_wordpiece_tokenizer([row["text"] for row in rows], vocab_size=60, model_max_length=64)
    torch.manual_seed(0)
    config = BertConfig(vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=1, num_attention_heads=4,
                        intermediate_size=37, max_position_embeddings=64, pad_token_id=tokenizer.pad_token_id)
    BertModel(config).save_pretrained(tmp_path / "bert")
    tokenizer.save_pretrained(tmp_path / "bert")
    return _write_jsonl(tmp_path / "docs.jsonl", rows)


def test_segment_length_probe_fits_a_head_per_length_and_seed(tmp_path, capsys):
    import segment_length_probe

    dataset = _tiny_bert_and_documents(tmp_path)
    results, tfidf = segment_length_probe.main([dataset, "--backbone", str(tmp_path / "bert"), "--max-length", "80",
                                                "--lengths", "16,40", "--seeds", "2"])
    assert set(results) == {16, 40} and all(len(scores) == 2 for scores in results.values())
    assert all(0.0 <= score <= 1.0 for scores in results.values() for score in scores) and 0.0 <= tfidf <= 1.0
    printed = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [row.get("segment_length") for row in printed] == [16, 40, None]


def test_readout_probe_fits_every_head_on_each_layout_and_split(tmp_path):
    import readout_probe
    from safetensors.torch import load_file

    dataset = _tiny_bert_and_documents(tmp_path)
    rows = readout_probe.main([dataset, "--backbone", str(tmp_path / "bert"), "--modes", "fixed:80,packed:80",
                               "--variants", "att,rnn", "--save-features", str(tmp_path / "features"),
                               "--head-tail-first-segment"])
    assert [row.get("reader") for row in rows[:2]] == ["tfidf", "frozen head+tail mean, logistic regression"]
    pooled = [row for row in rows[2:] if "reader" in row]
    assert [row["reader"].split(" on the ")[1] for row in pooled] == ["mean of all segments",
                                                                      "mean of the last 16 segments"] * 2
    rows = rows[:2] + [row for row in rows[2:] if "reader" not in row]
    heads = [(row["segments"], row["read"], row["variant"]) for row in rows[2:]]
    assert heads == [(segments, first, variant) for segments in ("fixed", "packed")
                     for first in ("z_1", "head+tail window") for variant in ("att", "rnn")]
    assert all(len(row["test"]["splits"]) == 3 and 0 <= row["test"]["mean"] <= 1 for row in rows)
    assert rows[6]["fill"] <= rows[2]["fill"]  # whole sentences may leave padding in their segments
    saved = load_file(tmp_path / "features" / "packed-80.safetensors")
    assert len(saved["z"]) == len(saved["labels"]) == 40 and len(saved["rows_42_train"]) < 40
    # z_1 the model's own window, and the heads fitted again on the segments outside it
    rows = readout_probe.main([dataset, "--backbone", str(tmp_path / "bert"), "--modes", "fixed:80",
                               "--variants", "att", "--first-segment", "head_tail", "--partition", "--no-head-tail"])
    heads = [(row["first_segment"], row["read"]) for row in rows if "variant" in row]
    assert heads == [("head_tail", "z_1"), ("head_tail", "x_2..x_m outside the window")]


def test_frozen_longformer_probe_reads_out_every_state_it_names(tmp_path, capsys):
    import frozen_longformer_probe

    dataset = _tiny_bert_and_documents(tmp_path)
    results, tfidf = frozen_longformer_probe.main([dataset, "--backbone", str(tmp_path / "bert"), "--max-length",
                                                   "96"])
    assert set(results) == set(frozen_longformer_probe.READOUTS)
    assert all(0.0 <= score <= 1.0 for scores in results.values() for score in scores) and 0.0 <= tfidf <= 1.0
    printed = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [row.get("readout") for row in printed] == [*frozen_longformer_probe.READOUTS, None]
    # with [CLS] the only global token, the global tokens' mean is the [CLS] state: the same probe, the same scores
    only_cls, _ = frozen_longformer_probe.main([dataset, "--backbone", str(tmp_path / "bert"), "--max-length", "96",
                                                "--global-selector", "cls"])
    assert only_cls["global_mean"] == only_cls["cls"]


def test_frozen_longformer_probe_never_scores_test_documents_it_trained_on():
    """Features that say nothing about the labels score near chance on test: the 5-fold refits (which train on test
    documents) must not touch the model the test accuracy comes from."""
    import frozen_longformer_probe

    generator = np.random.default_rng(0)
    sizes = {"train": 60, "validation": 20, "test": 40}
    features = {split: generator.normal(size=(n, 300)) for split, n in sizes.items()}  # enough to memorise
    labels = {split: generator.integers(0, 2, n) for split, n in sizes.items()}
    tested, folded = frozen_longformer_probe.probe_readout(features, labels)
    assert tested < 0.75 and folded < 0.75


def _zip(entries):
    import io
    import zipfile

    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zipped:
        for name, data in entries.items():
            zipped.writestr(name, data)
    return buffer.getvalue()


def test_get_data_reads_the_public_archives_into_the_documented_rows(tmp_path):
    import get_data

    reviews = get_data.movie_reviews(_zip({
        "movie_reviews/README": "about",
        "movie_reviews/neg/cv000_29416.txt": "plot : two teen couples .\n",
        "movie_reviews/pos/cv912_5562.txt": "a fine film .\n",
    }))
    assert reviews == [
        {"id": "mr-neg-cv000_29416", "text": "plot : two teen couples .\n", "label": "neg", "fold": 0},
        {"id": "mr-pos-cv912_5562", "text": "a fine film .\n", "label": "pos", "fold": 9},
    ]
    stories = {f"bbc/{label}/{i:03d}.txt": f"{label} title {i}\n\nBody of story {i}.".encode()
               for label in ("sport", "tech") for i in range(1, 6)}
    stories["bbc/sport/006.txt"] = b"sport title 1\n\nBody   of story 1."  # a duplicate up to whitespace: dropped
    stories["bbc/tech/007.txt"] = "Price \u00a3600m\n\nIn pounds.".encode("latin-1")  # a Latin-1 original
    news = get_data.bbc_news(_zip(stories), folds=5)
    assert len(news) == 11 and "bbc-sport-006" not in {row["id"] for row in news}
    assert news[0]["title"] == "sport title 1" and news[0]["text"].endswith("Body of story 1.")
    assert any(row["text"].startswith("Price \u00a3600m") for row in news)
    assert sorted({row["fold"] for row in news}) == [0, 1, 2, 3, 4]
    with pytest.raises(ValueError, match="no bbc"):
        get_data.bbc_news(_zip({"other/file.txt": b"x"}))
    out = tmp_path / "reviews.jsonl"
    get_data.write_jsonl(reviews, out)
    with pytest.raises(FileExistsError, match="--overwrite"):
        get_data.write_jsonl(reviews, out)
    assert [json.loads(line) for line in out.read_text().splitlines()] == reviews


def test_half_precision_check_prints_every_mode(tmp_path, capsys, monkeypatch):
    import half_precision_check

    from families import FAMILY_CASES
    from test_conformance import CORPUS, _tokenizer_and_model

    tokenizer, model = _tokenizer_and_model(FAMILY_CASES[0], max_length=64)
    model.save_pretrained(tmp_path / "model")
    tokenizer.save_pretrained(tmp_path / "model")
    data = tmp_path / "texts.jsonl"
    data.write_text("".join(json.dumps({"text": CORPUS[i][: 15 + 8 * i]}) + "\n" for i in range(6)))  # 6 lengths
    monkeypatch.setattr("sys.argv", ["half_precision_check.py", str(tmp_path / "model"), str(data), "--documents", "6"])
    half_precision_check.main()
    out = capsys.readouterr().out
    assert "6 documents, 5 of them padded" in out
    for mode in ("autocast-bf16", "autocast-fp16", "bf16 weights", "fp16 .half()"):
        assert f"{mode}: finite True" in out


@pytest.mark.slow
def test_cli_help_speed_times_every_command(capsys):
    import cli_help_speed

    rows = cli_help_speed.main(["--repeats", "1", "--commands-only"])  # the imports: seconds each, not tested here
    names = [name for name, _, _ in rows]
    assert "hf-longdoc train --help" in names and "hf-longdoc --help" in names
    assert len(rows) == len(cli_help_speed.COMMANDS)
    assert all(wall > 0 and cpu >= 0 for _, wall, cpu in rows)


@pytest.mark.slow
def test_serve_load_runs_clients_against_a_real_server_and_compares_with_predict(tmp_path):
    import serve_load

    from test_serving import TEXTS, save_contextualizer

    model = save_contextualizer(tmp_path / "model")
    dataset = tmp_path / "docs.jsonl"
    dataset.write_text("".join(json.dumps({"text": text}) + "\n" for text in TEXTS))
    result = serve_load.main([model, "--dataset", str(dataset), "--documents", "12", "--clients", "4",
                              "--seconds", "3"])
    assert result["errors"] == 0 and result["requests"] > 0
    assert result["documents_per_second"] > 0 and result["offline_documents_per_second"] > 0
    assert result["server_peak_memory_mib"] > 0 and result["latency_p50_s"] <= result["latency_p99_s"]


@pytest.mark.slow
def test_serve_small_beside_large_times_a_small_request_beside_a_large_one(tmp_path):
    import serve_small_beside_large

    from test_serving import save_contextualizer

    model = save_contextualizer(tmp_path / "model")
    result = serve_small_beside_large.main([model, "--documents", "2", "--characters", "20000", "--repeats", "1",
                                            "--delay", "0"])
    assert 0 < result["small_alone_s"] and 0 < result["small_beside_large_s"] and result["large_s"] > 0
