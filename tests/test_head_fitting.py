"""A new head trained on features a frozen pretrained backbone computes once (`--freeze-backbone`), and the same stage
as the warm start of fine-tuning (linear probing, then fine-tuning). Tiny random BERT checkpoints; nothing is
downloaded."""

import json
import math
import sys
from types import SimpleNamespace

import pytest
import torch
from safetensors.torch import load_file
from transformers import AutoModelForSequenceClassification, AutoTokenizer, pipeline

from backbone_models import build_from_backbone
from hf_longdoc import FAMILIES
from hf_longdoc.cli import main
from hf_longdoc.data import fit_wordpiece_tokenizer, make_long_document_task
from hf_longdoc.modeling.segment_lm.modeling_segment import window_tail_length
from hf_longdoc.publishing.hub import make_model_card
from hf_longdoc.training.head_fitting import (
    FitPlan,
    HeadStage,
    cached_features,
    fit_head,
    labels_of,
    new_parameter_names,
)
from hf_longdoc.training.recipe import training_arguments
from hf_longdoc.utils.parsing import settings_text
from tiny_bert import save_tiny_bert


@pytest.fixture(scope="module")
def pretrained(tmp_path_factory):
    folder = tmp_path_factory.mktemp("tiny-bert")
    texts = make_long_document_task(train_size=16, validation_size=4, test_size=8, min_words=40, max_words=80,
                                    seed=1)["train"]["text"]
    tokenizer = fit_wordpiece_tokenizer(texts, vocab_size=300, model_max_length=256)
    save_tiny_bert(folder, tokenizer, max_positions=256)
    return folder


@pytest.mark.parametrize("family, pooling", [("segment_lm", None), ("sparse_longformer", None),
                                             ("sparse_longformer", "gated")])
def test_head_logits_on_cached_features_equal_the_whole_model(pretrained, family, pooling):
    """The cache is exactly what the model computes: the head over it gives the model's own logits (the gated
    readout caches every state, padded so that batches of different lengths stack)."""
    from datasets import Dataset

    selector = {"global_selector": "first_n", "num_global_tokens": 4} if family == "sparse_longformer" else None
    if pooling:
        selector["classifier_pooling"] = pooling
    model, tokenizer = build_from_backbone(family, str(pretrained), ["a", "b", "c"], False, selector, max_length=200)
    model.eval()
    if pooling == "gated":  # gates that differ between tokens (they start equal)
        torch.nn.init.normal_(model.token_gate.weight, std=1.0)
    texts = ["markets rallied " * 60, "the match ended " * 20, "a film about rain " * 35]
    dataset = Dataset.from_dict(dict(tokenizer(texts, truncation=True)))
    features = cached_features(model, FAMILIES[family], dataset, tokenizer, batch_size=2, progress=False)
    with torch.no_grad():
        from_cache = FAMILIES[family].head_logits(model, *features)
        whole = model(**tokenizer(texts, truncation=True, padding=True, return_tensors="pt")).logits
    torch.testing.assert_close(from_cache, whole, rtol=1e-5, atol=1e-5)


def test_a_cache_larger_than_its_memory_holds_documents_spread_over_the_split_and_says_so(pretrained, monkeypatch,
                                                                                          caplog, tmp_path):
    """The gated sparse Longformer caches every final state: when a split's features would pass the memory set aside
    (half of what is free), the head stage reads as many documents as fit, spread evenly over the split (a split
    sorted by label keeps both labels), with their labels, and warns; when they fit, it reads them all."""
    from datasets import Dataset

    import hf_longdoc.training.head_fitting as head_fitting
    from hf_longdoc.training.head_fitting import cached_split

    family = FAMILIES["sparse_longformer"]
    model, tokenizer = build_from_backbone("sparse_longformer", str(pretrained), ["a", "b"], False,
                                           {"global_selector": "first_n", "classifier_pooling": "gated"},
                                           max_length=200)
    texts = [f"document {i} " + "words in it " * (5 + i) for i in range(7)]
    split = Dataset.from_dict({**tokenizer(texts, truncation=True), "label": [0, 0, 0, 0, 1, 1, 1]})  # sorted
    every = cached_features(model, family, split, tokenizer, batch_size=2, progress=False)
    per_document = sum(feature.nbytes for feature in every) / 7
    encoded = []  # documents encoded, call by call: none twice
    monkeypatch.setattr(head_fitting, "cached_features",
                        lambda model, family, dataset, *args: encoded.append(len(dataset)) or cached_features(
                            model, family, dataset, *args))
    features, labels, documents = cached_split(model, family, split, tokenizer, 2, None, 7 * per_document, False,
                                               False)
    assert encoded == [2, 5] and documents == list(range(7))
    for whole, part in zip(every, features):
        torch.testing.assert_close(part, whole)
    assert labels.tolist() == [0, 0, 0, 0, 1, 1, 1] and "set aside" not in caplog.text
    with caplog.at_level("WARNING", logger="hf_longdoc"):
        features, labels, documents = cached_split(model, family, split, tokenizer, 2, None, 4.5 * per_document,
                                                   False, False)
    assert features[0].shape[0] == features[1].shape[0] == 4 and labels.tolist() == [0, 0, 1, 1]
    assert documents == [0, 2, 4, 6]
    assert encoded[2:] == [2, 3]  # the first batch measures; 0 is read from it, and 2, 4 and 6 are encoded
    kept = [0, 2, 4, 6]  # the real tokens' states (padding depends on the batch)
    assert torch.equal(features[1], every[1][kept])
    torch.testing.assert_close(features[0] * features[1][..., None], every[0][kept] * every[1][kept][..., None])
    assert "reads 4 of them, spread evenly" in caplog.text and "--head-epochs 0" in caplog.text
    tiny, _, _ = cached_split(model, family, split, tokenizer, 2, None, 1.0, False, False)
    assert tiny[0].shape[0] == 2  # at least one batch
    monkeypatch.setattr(head_fitting, "free_memory", lambda device: 2 * 6 * per_document)  # the cache gets half
    stage = HeadStage(epochs=2, freeze_backbone=True)
    plan = FitPlan(training_arguments(str(tmp_path), batch_size=2), stage, family,
                   tuple(new_parameter_names(model, family)), 1e-3)
    report, _ = stage.run(model, plan, {"train": split, "validation": split.select(range(3))}, tokenizer)
    assert report["epochs_run"] == 2


def test_fit_head_runs_while_the_validation_loss_falls_after_the_score_stops_rising(pretrained):
    """Accuracy on a small validation split stops rising long before the head converges: a linear head (the
    segment LM's `base`) stopped there is underfit, and scored over folds it loses a choice it should win (bbc-late,
    seed 42: `base` .895 over the folds stopped on accuracy, .936 run until neither improves). The stage stops after
    `patience` epochs in which neither the score nor the loss improved, and keeps the best score's epoch."""
    model, _ = build_from_backbone("segment_lm", str(pretrained), ["a", "b"], False, {"variant": "base"},
                                   max_length=200)
    family = FAMILIES["segment_lm"]
    head = new_parameter_names(model, family)
    torch.manual_seed(0)
    z = torch.randn(200, model.config.num_segments, model.config.hidden_size)
    labels = (z[:, 0, 0] > 0).long()
    z[:, 0, 0] += torch.where(labels.bool(), 3.0, -3.0)  # a wide margin: every document right within an epoch or two
    present = torch.ones(200, model.config.num_segments, dtype=torch.bool)
    report, _ = fit_head(model, family, head, ((z[:160], present[:160]), labels[:160]),
                         ((z[160:], present[160:]), labels[160:]), epochs=60, learning_rate=1e-2, batch_size=16,
                         patience=3)
    assert report["validation_accuracy"] == 1.0 and report["best_epoch"] <= 3
    assert report["lowest_validation_loss_epoch"] > report["best_epoch"] + 3  # the loss went on falling
    assert report["epochs_run"] == min(60, max(report["best_epoch"], report["lowest_validation_loss_epoch"]) + 3)


def test_fit_head_learns_a_separable_task_and_keeps_the_best_epoch(pretrained):
    model, _ = build_from_backbone("segment_lm", str(pretrained), ["a", "b"], False, max_length=200)
    family = FAMILIES["segment_lm"]
    head = new_parameter_names(model, family)
    torch.manual_seed(0)
    z = torch.randn(200, model.config.num_segments, model.config.hidden_size)
    labels = (z[:, 0, 0] > 0).long()  # readable from segment 1
    present = torch.ones(200, model.config.num_segments, dtype=torch.bool)
    backbone_before = {n: p.clone() for n, p in model.named_parameters() if n not in head}
    report, calibrated = fit_head(model, family, head, ((z[:160], present[:160]), labels[:160]),
                                  ((z[160:], present[160:]), labels[160:]), epochs=15, learning_rate=1e-2,
                                  batch_size=16)
    assert report["validation_accuracy"] >= 0.85 and 1 <= report["best_epoch"] <= report["epochs_run"]
    assert 1 <= report["lowest_validation_loss_epoch"] <= report["epochs_run"] and set(calibrated) == set(head)
    with torch.no_grad():
        predicted = family.head_logits(model, z[160:], present[160:]).argmax(-1)
    assert (predicted == labels[160:]).float().mean().item() == pytest.approx(report["validation_accuracy"])
    assert all(torch.equal(p, backbone_before[n]) for n, p in model.named_parameters() if n not in head)


@pytest.mark.parametrize("omp", [None, "2"])
def test_the_head_stage_runs_on_one_thread_and_restores_the_users_count(pretrained, monkeypatch, omp):
    """Small operations on shared cores wait for every thread (`threads.small_op_phase`): the head stage runs on one,
    and gives the count back after; a count the user chose with OMP_NUM_THREADS is kept."""
    model, _ = build_from_backbone("segment_lm", str(pretrained), ["a", "b"], False, max_length=200)
    family = FAMILIES["segment_lm"]
    if omp is None:
        monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    else:
        monkeypatch.setenv("OMP_NUM_THREADS", omp)
    seen, head_logits = [], family.head_logits

    def counting(*args):
        seen.append(torch.get_num_threads())
        return head_logits(*args)

    monkeypatch.setattr(family, "head_logits", counting)
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        z = torch.randn(16, model.config.num_segments, model.config.hidden_size)
        present = torch.ones(16, model.config.num_segments, dtype=torch.bool)
        labels = torch.randint(0, 2, (16,))
        fit_head(model, family, new_parameter_names(model, family), ((z, present), labels), ((z, present), labels),
                 epochs=1)
        assert set(seen) == ({1} if omp is None else {2}) and torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)


def test_freeze_backbone_trains_only_the_head_and_saves_a_whole_model(pretrained, tmp_path, caplog):
    output = tmp_path / "frozen"
    with caplog.at_level("WARNING"):
        assert main(["train", "--model", "segment_lm", "--backbone", str(pretrained), "--max-length", "200",
                     "--task-size", "24", "--task-words", "60,150", "--freeze-backbone", "--head-epochs", "5",
                     "--epochs", "3", "--output-dir", str(output)]) == 0
    assert "`epochs` (--epochs) 3 has no effect here" in caplog.text  # only the head trained, for --head-epochs
    metrics = json.loads((output / "metrics.json").read_text())
    assert metrics["freeze_backbone"] is True and metrics["head_stage"]["epochs_run"] <= 5
    # the card describes what trained: the head stage, not Trainer's unused epochs and learning rate
    card = str(make_model_card(str(output)))
    assert "Only a new head trained" in card and "transformers.Trainer" not in card
    assert f"epochs run | {metrics['head_stage']['epochs_run']} " in card and "| epochs |" not in card
    assert "preparation_time" not in card
    saved, source = load_file(output / "model.safetensors"), load_file(pretrained / "model.safetensors")
    for name, weight in source.items():  # the backbone is exactly the checkpoint's (its pooler is not used)
        assert name.startswith("pooler.") or torch.equal(saved[f"segment_lm.backbone.{name}"], weight), name
    classifier = pipeline("text-classification", model=str(output))
    assert classifier("markets rallied as the bank held rates " * 30)[0]["label"].startswith("topic_")
    assert AutoModelForSequenceClassification.from_pretrained(output).config.model_type == "segment_lm"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["frozen"]  # no cache or staging left beside it


def test_the_default_recipe_warms_the_head_up_before_fine_tuning(pretrained, tmp_path, monkeypatch):
    """With a backbone, the head first trains on cached features (LP), then everything fine-tunes (FT); the kept
    model's validation pass, made for the paired test, is the one metrics.json records (not run twice)."""
    from transformers import Trainer

    passes, loop = [], Trainer.evaluation_loop

    def counted(self, *args, **kwargs):
        output = loop(self, *args, **kwargs)
        passes.append(output.metrics)
        return output

    monkeypatch.setattr(Trainer, "evaluation_loop", counted)
    output = tmp_path / "lpft"
    assert main(["train", "--model", "segment_lm", "--backbone", str(pretrained), "--max-length", "200",
                 "--task-size", "24", "--task-words", "60,150", "--epochs", "1", "--output-dir", str(output)]) == 0
    metrics = json.loads((output / "metrics.json").read_text())
    assert metrics["head_stage"]["epochs_run"] >= 1 and metrics["freeze_backbone"] is False
    saved, source = load_file(output / "model.safetensors"), load_file(pretrained / "model.safetensors")
    name = "encoder.layer.0.attention.self.query.weight"
    # fine-tuned after the warm-up, unless the warm start scored better on validation (then it is what was kept)
    kept = metrics["head_stage"]["kept"]
    assert torch.equal(saved[f"segment_lm.backbone.{name}"], source[name]) == kept
    card = str(make_model_card(str(output)))  # the card says which of the two the saved weights are
    assert ("| weights saved | the warm start" in card) == kept
    assert ("| weights saved | the fine-tuned model" in card) != kept and "(kept: epoch" not in card
    stage = metrics["head_stage"]  # what the paired test weighed, on every validation document
    counts = stage["validation_right_only_warm_start"], stage["validation_right_only_fine_tuned"]
    assert f"right: the warm start {counts[0]}, the fine-tuned model {counts[1]})" in card
    assert 0 <= stage["validation_decisions_right_fine_tuned"] <= 1
    assert stage["validation_decisions_right_warm_start"] == pytest.approx(stage["validation_accuracy"])
    validation_passes = [metrics for metrics in passes if "validation_accuracy" in metrics]
    assert len(validation_passes) == 1 + kept  # the paired test's, and again only for the warm start put back
    assert metrics["validation"]["accuracy"] == validation_passes[-1]["validation_accuracy"]
    if not kept:
        assert metrics["validation"]["accuracy"] == pytest.approx(stage["validation_decisions_right_fine_tuned"])
    tokenizer = AutoTokenizer.from_pretrained(output)
    assert tokenizer.model_max_length <= 200


def test_head_stage_settings_that_cannot_apply_are_refused(pretrained, tmp_path, capsys):
    assert HeadStage.resolve(FAMILIES["segment_lm"], True).epochs == HeadStage.DEFAULT_EPOCHS
    assert HeadStage.resolve(FAMILIES["segment_lm"], False).epochs == 0  # from scratch: nothing pretrained to probe
    assert HeadStage.resolve(FAMILIES["elementwise"], True, freeze_backbone=True).trains_end_to_end
    cases = [(["--model", "contextualizer", "--freeze-backbone"], "--freeze-backbone"),
             (["--model", "contextualizer", "--head-epochs", "3"], "--head-epochs"),
             (["--model", "segment_lm", "--backbone", str(pretrained), "--freeze-backbone", "--head-epochs", "0"],
              "train nothing"),
             (["--model", "elementwise", "--backbone", str(pretrained), "--head-epochs", "3"], "--head-epochs")]
    for argv, message in cases:
        assert main(["train", *argv, "--output-dir", str(tmp_path / "out")]) == 2
        err = capsys.readouterr().err
        assert message in err and "Traceback" not in err and not (tmp_path / "out").exists()


@pytest.mark.parametrize("family", ["segment_lm", "sparse_longformer"])
def test_bf16_trains_in_mixed_precision_and_saves_float32_weights(pretrained, tmp_path, family):
    """`--bf16` reaches Trainer and the head stage's frozen encoding (autocast; the cached features and the head in
    float32); the saved weights are float32 and the model classifies through `pipeline`."""
    output = tmp_path / family
    assert main(["train", "--model", family, "--backbone", str(pretrained), "--max-length", "200", "--task-size",
                 "24", "--task-words", "60,150", "--epochs", "1", "--head-epochs", "3", "--bf16",
                 "--output-dir", str(output)]) == 0
    metrics = json.loads((output / "metrics.json").read_text())
    assert metrics["mixed_precision"] == "bf16" and metrics["head_stage"]["epochs_run"] >= 1
    assert json.loads((output / "training_args.json").read_text())["bf16"] is True
    assert "| mixed precision | bf16 |" in (output / "README.md").read_text()
    assert {tensor.dtype for tensor in load_file(output / "model.safetensors").values()} <= {torch.float32,
                                                                                             torch.int64}
    classifier = pipeline("text-classification", model=str(output))
    assert classifier("markets rallied as the bank held rates " * 30)[0]["label"].startswith("topic_")


def test_cached_features_under_autocast_are_float32_and_near_the_float32_ones(pretrained):
    from datasets import Dataset

    model, tokenizer = build_from_backbone("segment_lm", str(pretrained), ["a", "b"], False, max_length=200)
    dataset = Dataset.from_dict(dict(tokenizer(["markets rallied " * 60, "a film about rain " * 35],
                                               truncation=True)))
    exact = cached_features(model, FAMILIES["segment_lm"], dataset, tokenizer, progress=False)
    mixed = cached_features(model, FAMILIES["segment_lm"], dataset, tokenizer, progress=False,
                            autocast_dtype=torch.bfloat16)
    assert mixed[0].dtype == torch.float32 and mixed[1].dtype == torch.bool  # the segment mask is left alone
    torch.testing.assert_close(mixed[0], exact[0], rtol=0.05, atol=0.05)
    assert torch.equal(mixed[1], exact[1])


def test_mixed_precision_that_cannot_run_is_refused_before_any_data(pretrained, tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    for flags, message in ((["--bf16", "--fp16"], "not both"), (["--fp16"], "--bf16 instead")):
        assert main(["train", "--model", "segment_lm", "--backbone", str(pretrained), *flags,
                     "--output-dir", str(tmp_path / "out")]) == 2
        err = capsys.readouterr().err
        assert message in err and "Traceback" not in err and not (tmp_path / "out").exists()


def test_labels_of_reads_single_and_multi_label_splits():
    from datasets import Dataset

    assert labels_of(Dataset.from_dict({"label": [1, 0]}), False).dtype == torch.long
    assert labels_of(Dataset.from_dict({"label": [[1.0, 0.0]]}), True).dtype == torch.float32


def test_compare_with_a_frozen_backbone_trains_only_heads(pretrained, tmp_path):
    import csv

    output = tmp_path / "compare"
    assert main(["compare", "--backbone", str(pretrained), "--models", "segment_lm:att", "--baselines",
                 "bert-128,tfidf", "--freeze-backbone", "--head-epochs", "3", "--task-size", "24", "--task-words",
                 "60,150", "--epochs", "1", "--max-length", "200", "--evidence", "none", "--output-dir",
                 str(output)]) == 0
    rows = {row["model"]: row for row in csv.DictReader((output / "summary.csv").open())}
    assert set(rows) == {"segment_lm:att", "bert-128", "tfidf"}
    assert all(0.0 <= float(row["accuracy"]) <= 1.0 for row in rows.values())


def test_compare_trains_every_model_in_bf16_when_asked(pretrained, tmp_path, capsys):
    import csv

    output = tmp_path / "compare"
    assert main(["compare", "--backbone", str(pretrained), "--models", "segment_lm:att", "--baselines",
                 "bert-128", "--bf16", "--head-epochs", "2", "--task-size", "24", "--task-words", "60,150",
                 "--epochs", "1", "--max-length", "200", "--evidence", "none", "--bench-lengths", "none",
                 "--output-dir", str(output)]) == 0
    rows = {row["model"]: row for row in csv.DictReader((output / "summary.csv").open())}
    assert set(rows) == {"segment_lm:att", "bert-128"}
    assert "bf16 mixed precision" in (output / "report.md").read_text()
    assert main(["compare", "--backbone", str(pretrained), "--bf16", "--fp16", "--output-dir",
                 str(tmp_path / "both")]) == 2
    assert "not both" in capsys.readouterr().err and not (tmp_path / "both").exists()


def _logits_right_on(right, labels, classes=2):
    """Logits that decide each document's label where `right` is True, and the next class elsewhere."""
    chosen = torch.where(torch.as_tensor(right), torch.as_tensor(labels), (torch.as_tensor(labels) + 1) % classes)
    return torch.nn.functional.one_hot(chosen, classes).float() * 4.0


def test_the_warm_start_is_kept_only_when_a_paired_test_says_fine_tuning_ends_below_it():
    """McNemar's count on the validation decisions, written from its definition: b documents only the warm start gets
    right, c only the fine-tuned model; the warm start returns when b - c > 2 sqrt(b + c). The case that made the rule:
    79 of 80 against 77 of 80 is no evidence (b <= 3, c >= 1), where the older rule kept the warm start."""
    from hf_longdoc.training.head_fitting import WarmStart, keep_the_better, state_copy

    model = torch.nn.Linear(3, 2)
    warm_weights = state_copy(model)
    with torch.no_grad():
        model.weight.add_(1.0)  # "fine-tuned"
    tuned_weights = state_copy(model)
    labels = torch.arange(80) % 2

    def case(warm_wrong, tuned_wrong):
        """keep_the_better when the warm start is wrong on the documents `warm_wrong`, fine-tuning on `tuned_wrong`."""
        model.load_state_dict(tuned_weights)
        warm_right = torch.ones(80, dtype=torch.bool)
        warm_right[list(warm_wrong)] = False
        tuned_right = torch.ones(80, dtype=torch.bool)
        tuned_right[list(tuned_wrong)] = False
        warm = WarmStart(warm_weights, _logits_right_on(warm_right, labels), list(range(80)))
        return keep_the_better(model, warm, _logits_right_on(tuned_right, labels).numpy(), labels.numpy())

    kept, counts = case([0], [1, 2, 3])  # bbc-late seed 42: .9875 against .9625
    assert not kept and torch.equal(model.weight, tuned_weights["weight"])
    assert counts == {"validation_right_only_warm_start": 3, "validation_right_only_fine_tuned": 1,
                      "validation_decisions_right_fine_tuned": 77 / 80,
                      "validation_decisions_right_warm_start": 79 / 80}
    assert not case([], [0, 1, 2, 3])[0]  # 4 > 2 sqrt(4) is false: four documents are not enough
    kept, _ = case([], [0, 1, 2, 3, 4])  # 5 > 2 sqrt(5) = 4.47
    assert kept and torch.equal(model.weight, warm_weights["weight"])
    assert not case(range(5), range(5, 10))[0]  # a tie, however many disagree
    assert case([], range(10))[0]  # b = 10, c = 0: 10 > 6.3
    assert not case(range(10, 14), range(10))[0]  # b = 10, c = 4: 6 < 2 sqrt(14) = 7.5
    assert not case([], [])[0]  # the same decisions: nothing to choose


def test_the_paired_test_reads_the_documents_the_warm_start_read_and_multi_label_decisions():
    """When the head stage cached only some validation documents (memory), only their rows are paired; multi-label
    data pairs each document's each label, decided at the threshold."""
    from hf_longdoc.training.head_fitting import WarmStart, keep_the_better, state_copy

    model = torch.nn.Linear(3, 2)
    labels = torch.arange(10) % 2
    right = torch.ones(10, dtype=torch.bool)
    tuned = _logits_right_on(right, labels)
    tuned[[1, 3, 5, 7, 9]] *= -1  # wrong on the odd documents, which the warm start did not read
    warm = WarmStart(state_copy(model), _logits_right_on(torch.ones(5, dtype=torch.bool), labels[::2]), [0, 2, 4, 6, 8])
    kept, counts = keep_the_better(model, warm, tuned.numpy(), labels.numpy())
    assert not kept and counts["validation_right_only_warm_start"] == 0
    assert counts["validation_decisions_right_fine_tuned"] == 1.0
    multi = torch.tensor([[1.0, 0.0, 1.0]] * 4)
    warm = WarmStart(state_copy(model), (multi * 2 - 1) * 3, list(range(4)))  # every label decided right
    tuned = (multi * 2 - 1) * 3
    tuned[:, 1] = 3.0  # the second label decided present in all four documents, where it is absent
    kept, counts = keep_the_better(model, warm, tuned.numpy(), multi.numpy(), multi_label=True)
    assert counts["validation_right_only_warm_start"] == 4 and counts["validation_decisions_right_warm_start"] == 1.0
    assert not kept  # 4 > 2 sqrt(4) is false
    assert counts["validation_decisions_right_fine_tuned"] == 8 / 12


def test_fine_tuning_starts_from_the_lowest_loss_head_and_returns_to_the_best_score_head(monkeypatch, tmp_path):
    """`HeadStage.run` before fine-tuning: the model leaves with the head of the lowest validation loss, and the warm
    start it returns holds the head of the best validation score (what `keep_the_better` goes back to)."""
    import hf_longdoc.training.head_fitting as head_fitting

    model = torch.nn.Sequential(torch.nn.Linear(3, 3), torch.nn.Linear(3, 2))  # "0": the backbone, "1": the head
    head = ["1.weight", "1.bias"]
    backbone = model[0].weight.detach().clone()

    def fake_fit(model, family, head_parameters, *args, **kwargs):
        with torch.no_grad():
            model[1].weight.fill_(1.0)  # fit_head leaves the best-score head in the model
        calibrated = {"1.weight": torch.full((2, 3), -1.0), "1.bias": torch.zeros(2)}
        return {"best_epoch": 9, "lowest_validation_loss_epoch": 3}, calibrated

    monkeypatch.setattr(head_fitting, "cached_split",
                        lambda *args, **kwargs: head_fitting.CachedSplit([torch.zeros(1, 3)], torch.zeros(1), [0]))
    monkeypatch.setattr(head_fitting, "fit_head", fake_fit)
    encoded = {"train": [0], "validation": [0]}
    args = training_arguments(str(tmp_path))
    model.config = None
    family = SimpleNamespace(head_logits=lambda model, features: model[1](features),  # the head reads the cache
                             readout_choices=lambda config: [])
    report, warm = HeadStage(epochs=5).run(model, FitPlan(args, HeadStage(epochs=5), family, head), encoded, None)
    assert report["lowest_validation_loss_epoch"] == 3
    assert torch.equal(model[1].weight, torch.full((2, 3), -1.0))  # fine-tuning starts here
    assert torch.equal(warm.state["1.weight"], torch.ones(2, 3)) and torch.equal(warm.state["0.weight"], backbone)
    assert warm.validation_documents == [0]
    assert torch.equal(warm.validation_logits, warm.state["1.bias"][None])  # the best-score head on zero features
    frozen = HeadStage(epochs=5, freeze_backbone=True)
    report, warm = frozen.run(model, FitPlan(args, frozen, None, head), encoded, None)
    assert warm is None and torch.equal(model[1].weight, torch.ones(2, 3))  # only the head trains: the best score
    assert HeadStage(epochs=0).run(model, FitPlan(args, HeadStage(epochs=0), None, head), encoded, None) == (None, None)


def test_a_half_precision_checkpoint_trains_with_float32_weights(caplog):
    """Transformers loads a checkpoint in the dtype it was saved in; training keeps float32 weights (mixed precision
    computes in half from them) and says so."""
    import logging

    from transformers import BertConfig, BertForSequenceClassification

    from hf_longdoc.training.recipe import master_weights_in_float32

    model = BertForSequenceClassification(BertConfig(hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                                                     intermediate_size=32, vocab_size=50)).to(torch.bfloat16)
    with caplog.at_level(logging.WARNING, logger="hf_longdoc.training.recipe"):
        master_weights_in_float32(model)
    assert {parameter.dtype for parameter in model.parameters()} == {torch.float32}
    assert "bfloat16" in caplog.text and "float32" in caplog.text
    caplog.clear()
    master_weights_in_float32(model)  # already float32: nothing to say
    assert caplog.text == ""



def test_a_time_budget_the_head_stage_alone_would_exceed_is_refused_after_one_batch(pretrained, tmp_path, capsys,
                                                                                    monkeypatch):
    """`--time-budget` covers the head stage: the first batch's encoding time says how long the stage will take, and a
    stage that cannot end within the budget is refused then (it ran to the end and overran 130x before)."""
    import hf_longdoc.training.head_fitting as head_fitting

    encoded_batches, encode, check = [], head_fitting.cached_features, head_fitting.check_encoding_fits

    def counted(model, family, dataset, *args, **kwargs):
        encoded_batches.append(len(dataset))
        return encode(model, family, dataset, *args, **kwargs)

    monkeypatch.setattr(head_fitting, "cached_features", counted)
    # as if each document took a minute to encode: the 1-minute budget cannot hold the stage
    monkeypatch.setattr(head_fitting, "check_encoding_fits", lambda deadline, _, documents: check(deadline, 60.0,
                                                                                                  documents))
    argv = ["train", "--model", "segment_lm", "--backbone", str(pretrained), "--max-length", "200", "--task-size",
            "24", "--task-words", "60,150", "--time-budget", "1", "--output-dir", str(tmp_path / "out")]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "--time-budget" in err and "head stage alone" in err and "Traceback" not in err
    assert encoded_batches == [8]  # only the first batch was encoded
    assert not (tmp_path / "out").exists()


def test_the_head_stage_stops_its_epochs_at_the_deadline(pretrained, caplog):
    import time

    data = make_long_document_task(train_size=12, validation_size=4, test_size=4, min_words=40, max_words=80, seed=2)
    model, tokenizer = build_from_backbone("segment_lm", str(pretrained), data["train"].features["label"].names,
                                           False, max_length=200)
    family = FAMILIES["segment_lm"]
    train = data["train"].map(lambda b: tokenizer(b["text"], truncation=True), batched=True)
    features = cached_features(model, family, train, tokenizer)
    labels = labels_of(train, False)
    report, _ = fit_head(model, family, new_parameter_names(model, family), (features, labels), (features, labels),
                         epochs=50, patience=50, deadline=time.monotonic() - 1)
    assert report["epochs_run"] == 1
    assert "time budget is spent" in caplog.text


def test_the_head_stage_keeps_the_readout_validation_prefers(pretrained, monkeypatch):
    """`variant_candidates`: every head is fitted on the same cache; the best score over the folds wins (not the
    validation split's), a tie goes to the head of fewer parameters (then the configured variant); the kept head is
    the very module that was fitted."""
    from hf_longdoc.training import head_fitting

    model, _ = build_from_backbone("segment_lm", str(pretrained), ["a", "b"], False,
                                   {"variant_candidates": "att,base,rnn"}, max_length=200)
    family = FAMILIES["segment_lm"]
    plan = FitPlan(SimpleNamespace(per_device_train_batch_size=4, seed=3, bf16=False, fp16=False), family=family,
                   head_parameters=tuple(new_parameter_names(model, family)))
    outcomes = {"att": (0.75, 0.95), "base": (0.875, 0.40), "rnn": (0.875, 0.30)}  # (over the folds, validation)
    fitted = {}

    def fake_folds(model, plan, names, *args, alongside=None, workers=1):
        return [outcomes[model.config.variant][0]] * head_fitting.CHOICE_FOLDS, alongside()

    def fake_fit(model, family, names, *args, **kwargs):
        variant = model.config.variant
        assert names and all(name in dict(model.named_parameters()) for name in names)  # the head now in the model
        in_head = {f"head.{name}" for name, _ in model.head.named_parameters()}
        assert {name for name in names if name.startswith("head.")} == in_head
        fitted[variant] = model.head
        return {"validation_accuracy": outcomes[variant][1], "lowest_validation_loss": 0.5, "epochs_run": 1,
                "best_epoch": 1,
                "lowest_validation_loss_epoch": 1}, {name: None for name in names}

    monkeypatch.setattr(head_fitting, "fit_head", fake_fit)
    monkeypatch.setattr(head_fitting, "cross_validated_score", fake_folds)
    report, calibrated = head_fitting.fit_readouts(model, plan, None, None, 5)
    assert list(fitted) == ["att", "base", "rnn"]
    assert model.config.variant == "base" and model.head is fitted["base"]  # .875 twice: the smaller head
    assert report["readout"] == {"variant": "base"} and [fit["variant"] for fit in report["readouts"]] == list(fitted)
    assert [fit["cross_validated_score"] for fit in report["readouts"]] == [0.75, 0.875, 0.875]
    assert [fit["standard_error"] for fit in report["readouts"]] == [0.0, 0.0, 0.0]
    assert report["readouts"][0]["fold_scores"] == [0.75] * head_fitting.CHOICE_FOLDS
    assert [fit["validation_score"] for fit in report["readouts"]] == [0.95, 0.40, 0.30]
    sizes = [fit["head_parameters"] for fit in report["readouts"]]
    assert sizes[1] < sizes[2] < sizes[0] and sizes[1] == sum(p.numel() for p in fitted["base"].parameters())
    assert set(calibrated) == set(head_fitting.head_parameter_names(model, plan))
    outcomes.update(att=(0.9, 0.3), base=(0.8, 0.1), rnn=(0.85, 0.1))  # no tie: the best score, whatever its size
    fitted.clear()
    family.set_readout(model, {"variant": "att"})
    report, _ = head_fitting.fit_readouts(model, plan, None, None, 5)
    assert model.config.variant == "att" and model.head is fitted["att"] and report["readout"] == {"variant": "att"}


def test_the_choice_keeps_the_smallest_head_within_one_standard_error_of_the_best():
    """The one-standard-error rule (Hastie, Tibshirani & Friedman, Sec. 7.10), checked against its statement: the
    standard error is the fold scores' sample standard deviation over sqrt(folds), of the best mean's head; among the
    heads whose mean is at least the best mean minus it, the one of fewest parameters, then the configured order."""
    from hf_longdoc.training.head_fitting import FoldScores, one_standard_error_choice

    att = FoldScores([0.90, 0.95, 0.85, 0.90, 0.90])  # mean .90, sd sqrt(.005 / 4) = .0354, SE .0158
    assert att.mean == pytest.approx(0.90) and att.standard_error == pytest.approx(math.sqrt(0.005 / 4 / 5))
    within, outside = FoldScores([0.89] * 5), FoldScores([0.88] * 5)
    assert one_standard_error_choice([(att, 1_000_000), (within, 2_000)]) == 1  # .89 >= .90 - .0158
    assert one_standard_error_choice([(att, 1_000_000), (outside, 2_000)]) == 0  # .88 < .8842
    assert one_standard_error_choice([(within, 2_000), (att, 1_000_000)]) == 0  # the order does not matter
    assert one_standard_error_choice([(att, 1_000_000), (within, 2_000), (FoldScores([0.885] * 5), 2_000)]) == 1
    assert one_standard_error_choice([(within, 2_000), (att, 500)]) == 1  # the best is also the smallest
    exact = FoldScores([0.9] * 5)  # no spread: only a tie is within reach
    assert exact.standard_error == 0.0
    assert one_standard_error_choice([(exact, 1_000_000), (FoldScores([0.8999] * 5), 2_000)]) == 0
    assert one_standard_error_choice([(exact, 1_000_000), (FoldScores([0.9] * 5), 2_000)]) == 1


def test_the_choice_scores_each_fold_by_a_head_that_never_saw_it(pretrained, monkeypatch):
    """`cross_validated_score`: the training and validation documents together in `CHOICE_FOLDS` folds; each fold
    scored by the head fitted on the others (stopped on an eighth of them), from the same starting head, which is
    left as it came."""
    from hf_longdoc.training import head_fitting

    model, _ = build_from_backbone("segment_lm", str(pretrained), ["a", "b"], False, {}, max_length=200)
    family = FAMILIES["segment_lm"]
    plan = FitPlan(SimpleNamespace(per_device_train_batch_size=4, seed=3, bf16=False, fp16=False), family=family,
                   head_parameters=tuple(new_parameter_names(model, family)))
    documents = torch.arange(50.0)  # a document's features say which document it is
    train = ([documents[:40, None]], torch.zeros(40, dtype=torch.long))
    validation = ([documents[40:, None]], torch.zeros(10, dtype=torch.long))
    names = set(plan.head_parameters)
    start = {name: p.detach().clone() for name, p in model.named_parameters() if name in names}
    fits, folds = [], []

    def fake_fit(model, family, names, fit_split, stop_split, *args, **kwargs):
        head = {name: p for name, p in model.named_parameters() if name in names}
        assert all(torch.equal(head[name], start[name]) for name in head)  # each fold from the same head
        fits.append((set(fit_split[0][0].flatten().tolist()), set(stop_split[0][0].flatten().tolist())))
        with torch.no_grad():
            next(iter(head.values())).add_(1.0)  # the fit moves the head
        return {}, {}

    def fake_score(model, family, features, labels, *args):
        folds.append(set(features[0].flatten().tolist()))
        return len(folds) / 10

    monkeypatch.setattr(head_fitting, "fit_head", fake_fit)
    monkeypatch.setattr(head_fitting, "split_score", fake_score)
    scores, nothing = head_fitting.cross_validated_score(model, plan, names, train, validation, 5)
    assert nothing is None and len(folds) == head_fitting.CHOICE_FOLDS
    assert scores == pytest.approx([k / 10 for k in range(1, 6)])
    assert set().union(*folds) == set(range(50)) and sum(len(fold) for fold in folds) == 50  # a partition
    for fold, (fitted, stopped) in zip(folds, fits):
        assert fitted | stopped == set(range(50)) - fold and not fitted & stopped
        assert len(stopped) == len(fitted | stopped) // 8
    assert all(torch.equal(p, start[name]) for name, p in model.named_parameters() if name in names)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the folds fork only on Linux")
def test_folds_fitted_in_forked_processes_score_as_in_one(pretrained, monkeypatch):
    """The choice's folds shared with a forked copy of the process (`workers=2`) give the same score, to the bit, as
    all fitted here, and the head's own fit done alongside is the same fit; a copy that fails leaves its folds to
    this process (logged), with the same score."""
    from hf_longdoc.training import head_fitting

    model, _ = build_from_backbone("segment_lm", str(pretrained), ["a", "b", "c"], False, {"segment_length": 50},
                                   max_length=200)
    family = FAMILIES["segment_lm"]
    plan = FitPlan(SimpleNamespace(per_device_train_batch_size=4, seed=3, bf16=False, fp16=False), family=family,
                   head_parameters=tuple(new_parameter_names(model, family)))
    generator = torch.Generator().manual_seed(0)
    m, d = model.config.num_segments, model.config.hidden_size
    labels = torch.randint(0, 3, (40,), generator=generator)
    z = torch.randn(40, m, d, generator=generator) + labels[:, None, None]  # separable, not trivially
    present = torch.ones(40, m, dtype=torch.bool)
    present[::3, m // 2:] = False
    train, validation = ([z[:32], present[:32]], labels[:32]), ([z[32:], present[32:]], labels[32:])
    names = set(plan.head_parameters)

    def head():
        return {name: p.detach().clone() for name, p in model.named_parameters() if name in names}

    start = head()

    def own_fit():
        torch.manual_seed(plan.seed)
        return fit_head(model, family, names, train, validation, 4, 1e-3, 4, plan.seed)[0]["best_epoch"]

    results = {}
    for workers in (1, 2):
        model.load_state_dict(start, strict=False)
        results[workers] = head_fitting.cross_validated_score(model, plan, names, train, validation, 4,
                                                              alongside=own_fit, workers=workers), head()
    (scores, best_epoch), fitted = results[1]
    assert results[2][0] == (scores, best_epoch)
    assert all(torch.equal(fitted[name], results[2][1][name]) for name in names)
    assert any(not torch.equal(fitted[name], start[name]) for name in names)  # left as the head's own fit left it

    def failing(work):  # a copy that dies before it sends anything
        return SimpleNamespace(results=lambda: None)

    monkeypatch.setattr(head_fitting, "ForkedWork", failing)
    model.load_state_dict(start, strict=False)
    assert head_fitting.cross_validated_score(model, plan, names, train, validation, 4, workers=2) == (scores, None)
    assert all(torch.equal(p, start[name]) for name, p in model.named_parameters() if name in names)


@pytest.mark.parametrize("settings, candidates", [
    (["first_segment=head_tail", "variant_candidates=att,base"], ["att", "base"]),  # both read the window
    (["variant_candidates=att,base:head_tail"], ["att", "base:head_tail"]),  # att on segment 1, base on the window
])
def test_variant_candidates_train_end_to_end_and_the_card_says_which_head_was_kept(pretrained, tmp_path, settings,
                                                                                   candidates):
    output = tmp_path / "choice"
    assert main(["train", "--model", "segment_lm", "--backbone", str(pretrained), "--max-length", "200",
                 "--task-size", "24", "--task-words", "60,150", "--epochs", "1", "--head-epochs", "3",
                 "--config", *settings, "--output-dir", str(output)]) == 0
    metrics = json.loads((output / "metrics.json").read_text())
    stage = metrics["head_stage"]
    assert [fit["variant"] for fit in stage["readouts"]] == ["att", "base"]
    best = max(stage["readouts"], key=lambda fit: fit["cross_validated_score"])
    chosen = stage["readout"]
    kept = next(fit for fit in stage["readouts"] if fit["variant"] == chosen["variant"])
    assert kept["cross_validated_score"] >= best["cross_validated_score"] - best["standard_error"]
    assert all(fit["head_parameters"] >= kept["head_parameters"] for fit in stage["readouts"]
               if fit["cross_validated_score"] >= best["cross_validated_score"] - best["standard_error"])
    assert all(len(fit["fold_scores"]) == 5 for fit in stage["readouts"])
    config = json.loads((output / "config.json").read_text())
    assert config["variant_candidates"] == candidates and config["keep_document_end"]
    assert {key: config[key] for key in chosen} == chosen
    assert config["first_segment"] == ("segment" if chosen == {"variant": "att", "first_segment": "segment"}
                                       else "head_tail")
    fitted = ", ".join(f"{settings_text({key: fit[key] for key in chosen})} {fit['cross_validated_score']:.4f}"
                       for fit in stage["readouts"])
    assert (f"| head on the frozen backbone's features: chosen over folds of the training and validation documents "
            f"(the smallest within one standard error of the best) | {settings_text(chosen)} (of {fitted}) |") \
        in str(make_model_card(str(output)))
    reloaded = AutoModelForSequenceClassification.from_pretrained(output)
    assert reloaded.config.variant == chosen["variant"] and reloaded.head.config.variant == chosen["variant"]
    assert AutoTokenizer.from_pretrained(output).kept_tail == window_tail_length(reloaded.config) > 0
    classifier = pipeline("text-classification", model=str(output))
    assert classifier("markets rallied as the bank held rates " * 30)[0]["label"].startswith("topic_")


def test_resume_rebuilds_the_head_the_interrupted_run_kept(pretrained, tmp_path):
    """A run whose head stage kept `base` checkpointed a `base` head: the same command with --resume builds that
    head (Trainer then loads its weights), where another variant would still be refused by name."""
    from hf_longdoc.training.run import check_resume_matches, resume_readout

    family = FAMILIES["segment_lm"]

    def built():
        return build_from_backbone("segment_lm", str(pretrained), ["a", "b"], False,
                                   {"variant_candidates": "att,base"}, max_length=200)[0]

    interrupted = built()
    family.set_readout(interrupted, {"variant": "base"})
    interrupted.save_pretrained(tmp_path)
    resumed = built()
    assert resumed.config.variant == "att"
    resume_readout(family, resumed, str(tmp_path))
    check_resume_matches(str(tmp_path), resumed.config)
    assert resumed.config.variant == "base"
    assert resumed.head.state_dict().keys() == interrupted.head.state_dict().keys()
    resumed.load_state_dict(interrupted.state_dict())  # the checkpoint's weights fit the head built
    interrupted.config.variant = "rnn"  # not a candidate: no head is swapped, and the check names the difference
    interrupted.config.save_pretrained(tmp_path)
    other = built()
    resume_readout(family, other, str(tmp_path))
    with pytest.raises(ValueError, match="variant: 'rnn' there, 'att' here"):
        check_resume_matches(str(tmp_path), other.config)


def test_variant_candidates_are_checked():
    from hf_longdoc.modeling.segment_lm.configuration_segment import SegmentLMConfig

    assert SegmentLMConfig(variant_candidates="att, base").variant_candidates == ["att", "base"]
    for wrong in (["att", "mean"], ["att", "base:window"], ["att:"], [3]):
        with pytest.raises(ValueError, match="`variant_candidates` must hold variants"):
            SegmentLMConfig(variant_candidates=wrong)
    assert not SegmentLMConfig(variant_candidates="att,base").keep_document_end
    assert SegmentLMConfig(variant_candidates="att,base:head_tail").keep_document_end  # a cut keeps the window's tail
    assert not SegmentLMConfig(variant_candidates="att,base:head_tail", keep_document_end=False).keep_document_end
    with pytest.raises(ValueError, match="`keep_document_end` must be True, False or None"):
        SegmentLMConfig(keep_document_end="yes")


@pytest.mark.parametrize("candidates, choices", [
    ("att,base,att", [{"variant": "base"}]),
    ("att,base:head_tail,rnn", [{"variant": "base", "first_segment": "head_tail"},
                                {"variant": "rnn", "first_segment": "segment"}]),  # each says what x_1 is
    ("att:segment,att:head_tail,base:segment", [{"variant": "att", "first_segment": "head_tail"},
                                                {"variant": "base", "first_segment": "segment"}]),
])
def test_the_heads_to_weigh_are_the_candidates_other_than_the_configured_one(candidates, choices):
    from hf_longdoc.modeling.segment_lm.configuration_segment import SegmentLMConfig

    assert FAMILIES["segment_lm"].readout_choices(SegmentLMConfig(variant_candidates=candidates)) == choices


def test_the_cache_holds_segment_one_and_the_window_for_heads_that_read_either(pretrained):
    """With `att` on segment 1 weighed against `base` on the head + tail window, the cache holds z with z_1 = LM
    (segment 1) and the window's vector apart; each head's logits on it are the logits of the model that reads as
    that head does."""
    family = FAMILIES["segment_lm"]
    model, tokenizer = build_from_backbone("segment_lm", str(pretrained), ["a", "b"], False,
                                           {"variant_candidates": "att,base:head_tail", "segment_length": 16},
                                           max_length=200)
    model.eval()
    texts = ["markets rallied as the bank held rates " * 40, "the club won the final"]
    batch = tokenizer(texts, truncation=True, padding=True, return_tensors="pt")
    features = family.frozen_features(model, batch["input_ids"], batch["attention_mask"])
    assert len(features) == 3 and features[2].shape == (2, model.config.hidden_size)
    for readout in ({"variant": "att", "first_segment": "segment"},
                    {"variant": "base", "first_segment": "head_tail"}):
        family.set_readout(model, readout)
        model.eval()  # the new head too
        with torch.no_grad():
            torch.testing.assert_close(family.head_logits(model, *features), model(**batch).logits)
    z, _, _ = model.segment_lm.encode_document(batch["input_ids"], batch["attention_mask"], gradient_mode="none")
    torch.testing.assert_close(features[2], z[:, 0])  # the window's vector: z_1 of the model reading x_1 as it
    single = FAMILIES["segment_lm"].frozen_features(
        build_from_backbone("segment_lm", str(pretrained), ["a", "b"], False, {"segment_length": 16},
                            max_length=200)[0].eval(), batch["input_ids"], batch["attention_mask"])
    assert len(single) == 2  # one way of reading x_1: no window apart

@pytest.mark.parametrize("candidates", [None, "base,att"])
def test_a_base_head_stage_caches_every_segment_when_another_variant_may_be_fitted(pretrained, candidates):
    model, tokenizer = build_from_backbone("segment_lm", str(pretrained), ["a", "b"], False,
                                           {"variant": "base", "variant_candidates": candidates, "segment_length": 16},
                                           max_length=200)
    text = "markets rallied as the bank held rates " * 40
    batch = tokenizer([text], truncation=True, return_tensors="pt")
    z, present = FAMILIES["segment_lm"].frozen_features(model.eval(), batch["input_ids"], batch["attention_mask"])
    encoded = int((z.abs().sum(-1) > 0).sum())
    assert present.sum() >= 3 and encoded == (int(present.sum()) if candidates else 1)


def test_compare_records_the_head_each_seed_chose(pretrained, tmp_path):
    import csv

    assert main(["compare", "--backbone", str(pretrained), "--models", "segment_lm:att", "--baselines", "",
                 "--task-size", "24", "--epochs", "1", "--max-length", "200", "--segment-length", "16",
                 "--head-epochs", "2", "--evidence", "none", "--bench-lengths", "none",
                 "--config", "segment_lm.variant_candidates=att,base", "--output-dir", str(tmp_path / "cmp")]) == 0
    with open(tmp_path / "cmp" / "results.csv") as rows:
        assert [row["readout"] for row in csv.DictReader(rows)] in (["variant=att"], ["variant=base"])
