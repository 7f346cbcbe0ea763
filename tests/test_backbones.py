"""Families built around a pretrained language model (`hf-longdoc train --backbone`): the backbone's weights and its
own tokenizer are used, and the saved tokenizer truncates where the model stops reading. Tests build a tiny random
BERT, save it with its tokenizer and load it back as the "pretrained" checkpoint; nothing is downloaded."""

import json
import os
import shutil

import pytest
import torch
from transformers import AutoTokenizer, BertModel

from backbone_models import build_from_backbone
from hf_longdoc import ElementwiseForSequenceClassification, ElementwiseTokenizer
from hf_longdoc.cli import main
from hf_longdoc.data import fit_wordpiece_tokenizer, make_long_document_task
from hf_longdoc.modeling import get_family
from hf_longdoc.training.settings import RunSettings
from tiny_bert import save_tiny_bert


@pytest.fixture(scope="module")
def pretrained(tmp_path_factory):
    """A folder holding a tiny random BertModel and a WordPiece tokenizer that returns token_type_ids, as BERT's do."""
    folder = tmp_path_factory.mktemp("tiny-bert")
    texts = make_long_document_task(train_size=16, validation_size=4, test_size=8, min_words=40, max_words=80,
                                    seed=1)["train"]["text"]
    tokenizer = fit_wordpiece_tokenizer(texts, vocab_size=200, model_max_length=256)
    tokenizer.model_input_names = ["input_ids", "token_type_ids", "attention_mask"]
    return save_tiny_bert(folder, tokenizer, max_positions=256)


@pytest.mark.parametrize("family, encoder", [("segment_lm", "segment_lm.backbone"),
                                             ("sparse_longformer", "longformer")])
def test_the_backbone_weights_are_used(pretrained, family, encoder):
    tokenizer = AutoTokenizer.from_pretrained(pretrained)
    model, _ = build_from_backbone(family, pretrained, ["a", "b"], False, max_length=128, tokenizer=tokenizer)
    source = BertModel.from_pretrained(pretrained).state_dict()
    built = dict(model.named_parameters())
    query = source["encoder.layer.0.attention.self.query.weight"]
    assert torch.equal(built[f"{encoder}.encoder.layer.0.attention.self.query.weight"], query)
    assert model.config.num_labels == 2


def sentence_transformers_copy(pretrained, tmp_path, modes):
    """A copy of the checkpoint in `pretrained` that declares a sentence-transformers Pooling module with `modes`
    (None: no module, a plain checkpoint)."""
    folder = tmp_path / "checkpoint"
    shutil.copytree(pretrained, folder)
    if modes is not None:
        (folder / "modules.json").write_text(json.dumps([
            {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
            {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}]))
        (folder / "1_Pooling").mkdir()
        (folder / "1_Pooling" / "config.json").write_text(json.dumps(
            {"word_embedding_dimension": 32, "pooling_mode_cls_token": False, "pooling_mode_mean_tokens": False,
             "pooling_mode_max_tokens": False, **modes}))
    return folder


@pytest.mark.parametrize("modes, expected", [(None, "cls"), ({"pooling_mode_mean_tokens": True}, "mean"),
                                             ({"pooling_mode_cls_token": True}, "cls"),
                                             ({"pooling_mode_max_tokens": True}, "cls")])
def test_the_segment_lm_pools_segments_as_a_sentence_transformers_checkpoint_declares(pretrained, tmp_path, modes,
                                                                                       expected, caplog):
    """A checkpoint with a sentence-transformers Pooling module gets its own pooling for z_i; one it cannot compute
    (max) falls back to the paper's [CLS] with a warning; a plain checkpoint gets [CLS]."""
    folder = sentence_transformers_copy(pretrained, tmp_path, modes)
    with caplog.at_level("INFO"):
        model, _ = build_from_backbone("segment_lm", str(folder), ["a", "b"], False, max_length=128)
    assert model.config.segment_pooling == expected
    # a sentence embedding reads sentence-length segments, enough of them for max_length; others the paper's 256
    length = 32 if expected == "mean" or (modes or {}).get("pooling_mode_cls_token") else 256
    assert model.config.segment_length == length
    assert model.config.num_segments == -(-(128 - 2) // (length - 2))
    # the LM learns through every sentence-length segment; through segment 1 and the attended one of 256 (the paper)
    assert model.config.gradient_mode == ("full" if length == 32 else "paper")
    assert model.config.checkpoint_segment_passes == (length != 32)  # sentence segments keep their activations
    if modes and expected == "mean":
        assert "the paper reads [CLS]" in caplog.text and "a sentence's length" in caplog.text
    if modes and "pooling_mode_max_tokens" in modes:
        assert "cannot compute" in caplog.text
    chosen, _ = build_from_backbone("segment_lm", str(folder), ["a", "b"], False, max_length=128,
                                    config_overrides={"segment_pooling": "last"})
    assert chosen.config.segment_pooling == "last"  # an explicit choice always wins
    paper, _ = build_from_backbone("segment_lm", str(folder), ["a", "b"], False, max_length=128,
                                   config_overrides={"segment_length": 64, "num_segments": 3})
    assert (paper.config.segment_length, paper.config.num_segments) == (64, 3)
    assert paper.config.gradient_mode == "paper"
    kept, _ = build_from_backbone("segment_lm", str(folder), ["a", "b"], False, max_length=128,
                                  config_overrides={"segment_length": 16, "gradient_mode": "paper"})
    assert kept.config.gradient_mode == "paper"  # an explicit choice always wins


@pytest.mark.parametrize("modes, expected", [(None, "cls"), ({"pooling_mode_mean_tokens": True}, "gated"),
                                             ({"pooling_mode_cls_token": True}, "cls")])
def test_the_sparse_longformer_classifies_as_a_sentence_transformers_checkpoint_embeds(pretrained, tmp_path, modes,
                                                                                      expected):
    """A checkpoint trained to embed text by its token mean gets a classifier over a gated mean, which starts as that
    mean; any other the thesis' [CLS]; `--config classifier_pooling=...` always wins. The head stage's cached
    features are what the head reads."""
    folder = sentence_transformers_copy(pretrained, tmp_path, modes)
    model, tokenizer = build_from_backbone("sparse_longformer", str(folder), ["a", "b"], False, max_length=128)
    assert model.config.classifier_pooling == expected
    chosen, _ = build_from_backbone("sparse_longformer", str(folder), ["a", "b"], False, max_length=128,
                                    config_overrides={"classifier_pooling": "cls"})
    assert chosen.config.classifier_pooling == "cls"
    family = get_family("sparse_longformer")
    batch = tokenizer(["a short one", "and a longer document than the first of these"], padding=True,
                      return_tensors="pt")
    model.config.global_selector = "first_n"  # no statistics fitted here
    with torch.no_grad():
        features = family.frozen_features(model, batch["input_ids"], batch["attention_mask"])
        logits = model(**batch).logits
    torch.testing.assert_close(family.head_logits(model, *features), logits)


def test_the_sparse_longformer_fine_tunes_without_attention_dropout_unless_asked(pretrained, caplog):
    """Attention-probability dropout keeps PyTorch's CPU attention off its fused kernel (3-4x the step time), so
    `train` turns it off, says so, and `--config` gives it back."""
    with caplog.at_level("INFO", logger="hf_longdoc"):
        model, _ = build_from_backbone("sparse_longformer", pretrained, ["a", "b"], False, max_length=128)
    assert model.config.attention_probs_dropout_prob == 0.0
    assert model.config.hidden_dropout_prob == BertModel.from_pretrained(pretrained).config.hidden_dropout_prob
    assert "without attention-probability dropout" in caplog.text
    model, _ = build_from_backbone("sparse_longformer", pretrained, ["a", "b"], False, max_length=128,
                                   config_overrides={"attention_probs_dropout_prob": 0.1})
    assert model.config.attention_probs_dropout_prob == 0.1


def test_train_from_a_backbone_saves_its_tokenizer_cut_where_the_model_stops_reading(pretrained, tmp_path, caplog):
    out = tmp_path / "segment"
    assert main(["train", "--model", "segment_lm", "--backbone", pretrained, "--task-size", "16", "--epochs", "1",
                 "--max-length", "200", "--config", "segment_length=34", "num_segments=2", "variant=rnn",
                 "--lr-scheduler", "constant_with_warmup", "--output-dir", str(out)]) == 0
    saved = AutoTokenizer.from_pretrained(out)
    assert saved.model_max_length == 2 * (34 - 2) + 2  # m·(L − 2) content tokens plus [CLS] and [SEP]
    assert "reads at most 66 tokens" in caplog.text
    assert json.loads((out / "metrics.json").read_text())["max_length"] == 66
    assert saved.get_vocab() == AutoTokenizer.from_pretrained(pretrained).get_vocab()  # no WordPiece fitted
    arguments = json.loads((out / "training_args.json").read_text())
    assert arguments["lr_scheduler_type"] == "constant_with_warmup"  # --lr-scheduler reaches Trainer
    card = (out / "README.md").read_text()
    # the backbone by its folder's name: the card is uploaded, the local path is nobody else's business
    assert "| schedule | constant_with_warmup |" in card
    assert f"Fine-tuned from the pretrained `{os.path.basename(pretrained)}`" in card
    assert str(pretrained) not in card


def test_bad_backbones_fail_before_any_data_is_made(pretrained, tmp_path, capsys):
    assert main(["train", "--model", "contextualizer", "--backbone", pretrained, "--output-dir", str(tmp_path)]) == 2
    assert "--backbone" in capsys.readouterr().err
    assert main(["train", "--model", "segment_lm", "--backbone", str(tmp_path), "--output-dir", str(tmp_path)]) == 2
    assert "config.json" in capsys.readouterr().err


def test_elementwise_embeddings_go_in_front_of_the_pretrained_body(pretrained):
    model, tokenizer = build_from_backbone("elementwise", pretrained, ["a", "b"], False, max_length=4 * 32)
    source = BertModel.from_pretrained(pretrained).state_dict()
    body = model.elementwise.backbone.state_dict()
    assert "embeddings.word_embeddings.weight" not in body  # the byte elements replace the subword table
    for name in ("encoder.layer.0.attention.self.query.weight", "embeddings.position_embeddings.weight",
                 "embeddings.LayerNorm.weight"):
        assert torch.equal(body[name], source[name])
    assert model.config.elements_per_material == 4  # v = the backbone's heads (h = v, Section 4.1)
    assert tokenizer.model_max_length == 4 * 32 and model.config.max_materials == 32
    logits = model(**tokenizer(["one short text", "another one, a bit longer"], padding=True,
                               return_tensors="pt")).logits
    assert logits.shape == (2, 2) and torch.isfinite(logits).all()


def test_elementwise_backbone_errors_name_the_class(tmp_path):
    from transformers import DistilBertConfig, DistilBertModel, GPT2Config, GPT2Model

    GPT2Model(GPT2Config(n_embd=32, n_head=4, n_layer=1, n_positions=64)).save_pretrained(tmp_path / "gpt2")
    with pytest.raises(ValueError, match="GPT2Model"):
        ElementwiseForSequenceClassification.from_backbone_pretrained(tmp_path / "gpt2", num_labels=2)
    DistilBertModel(DistilBertConfig(dim=32, n_heads=4, n_layers=1, hidden_dim=37,
                                     max_position_embeddings=64)).save_pretrained(tmp_path / "distilbert")
    with pytest.raises(ValueError, match="DistilBertModel has no pooler.*first_material"):
        ElementwiseForSequenceClassification.from_backbone_pretrained(tmp_path / "distilbert", num_labels=2,
                                                                      pooling="pooler")
    model = ElementwiseForSequenceClassification.from_backbone_pretrained(tmp_path / "distilbert", num_labels=2)
    assert model.config.pooling == "first_material"  # DistilBERT has no pooler: the head reads the first material
    tokenizer = ElementwiseTokenizer(elements_per_material=4, max_materials=64)
    assert model(**tokenizer(["a document"], return_tensors="pt")).logits.shape == (1, 2)


def test_train_elementwise_from_a_backbone_uses_bytes(pretrained, tmp_path):
    out = tmp_path / "elementwise"
    assert main(["train", "--model", "elementwise", "--backbone", pretrained, "--task-size", "16", "--epochs", "1",
                 "--max-length", "128", "--output-dir", str(out)]) == 0
    saved = AutoTokenizer.from_pretrained(out)
    assert isinstance(saved, ElementwiseTokenizer) and saved.model_max_length == 128
    card = (out / "README.md").read_text()
    assert "reads the first 128 input ids" in card and os.path.basename(pretrained) in card and pretrained not in card


def test_compare_fine_tunes_every_model_and_the_pretrained_baselines_from_the_backbone(pretrained, tmp_path):
    from hf_longdoc.experiments.compare import compare
    from hf_longdoc.experiments.settings import CompareSettings

    settings = CompareSettings(max_length=256, epochs=1, batch_size=4, segment_length=34, backbone=pretrained,
                               learning_rate=None, head_learning_rate=1e-3)  # every model's new head at its own rate
    rows = compare(models=["segment_lm:att", "sparse_longformer:first_n", "elementwise"],
                   baselines=["bert-256", "bert-256-headtail", "tfidf"], settings=settings, evidence=(), task_size=16,
                   task_words=(150, 250), output_dir=str(tmp_path), progress=lambda line: None)
    by_name = {row["model"]: row for row in rows}
    assert set(by_name) == {"segment_lm:att", "sparse_longformer:first_n", "elementwise", "bert-256",
                            "bert-256-headtail", "tfidf"}
    assert by_name["bert-256"]["max_tokens"] == by_name["bert-256-headtail"]["max_tokens"] == 256
    # the byte model reads its full u = the body's 256 positions of v = 4 bytes, as compare's from-scratch model does
    assert by_name["elementwise"]["max_tokens"] == 256 * 4
    # the pretrained body's sizes, not the compare defaults: hidden size 32 as the backbone
    assert by_name["bert-256"]["parameters"] == by_name["bert-256-headtail"]["parameters"]
    assert all(0.0 <= row["accuracy"] <= 1.0 for row in rows)
    report = (tmp_path / "report.md").read_text()
    assert "fine-tuned from the pretrained" in report and "(0.001 for the parameters the checkpoint" in report


def test_compare_with_a_backbone_refuses_what_cannot_start_from_it(pretrained, tmp_path):
    from hf_longdoc.experiments.compare import compare
    from hf_longdoc.experiments.settings import CompareSettings

    settings = CompareSettings(backbone=pretrained)
    for models, baselines, message in ((["slstm"], [], "slstm does not start from a pretrained backbone"),
                                       ([], ["longformer"], "sparse_longformer:cls"),
                                       ([], ["bert-512"], "256 positions; use bert-256")):
        with pytest.raises(ValueError, match=message):
            compare(models=models, baselines=baselines, settings=settings, output_dir=str(tmp_path))
    with pytest.raises(ValueError, match="config.json"):
        compare(baselines=["bert-256"], settings=CompareSettings(backbone=str(tmp_path)), output_dir=str(tmp_path))


def test_head_and_tail_keeps_the_first_128_and_the_last_tokens(pretrained):
    from datasets import Dataset, DatasetDict

    from hf_longdoc.data import tokenize

    tokenizer = AutoTokenizer.from_pretrained(pretrained)
    text = " ".join(f"w{i}" for i in range(400))
    data = DatasetDict(test=Dataset.from_dict({"text": [text, "short"], "label": [0, 1]}))
    whole = tokenizer(text)["input_ids"]
    kept = tokenize(data, tokenizer, 256, head=128)["test"]["input_ids"]
    assert kept[0] == whole[:129] + whole[-127:]  # [CLS] + 128 head tokens, then 126 tail tokens + [SEP]
    assert kept[1] == tokenizer("short")["input_ids"]


@pytest.mark.parametrize("family", ["segment_lm", "sparse_longformer", "elementwise"])
def test_the_new_parameters_are_exactly_those_the_checkpoint_does_not_name(pretrained, family):
    """`new_parameter_names` (what --head-learning-rate trains faster) against the checkpoint itself: a parameter is
    supplied when its name ends with a name in the checkpoint (a converted Longformer's `*_global` projections are
    copies of the local ones); every other parameter is new."""
    from hf_longdoc.modeling import get_family
    from hf_longdoc.training.head_fitting import new_parameter_names

    model, _ = build_from_backbone(family, pretrained, ["a", "b"], False, max_length=128)
    source = BertModel.from_pretrained(pretrained).state_dict()
    new = set(new_parameter_names(model, get_family(family)))
    for name, _ in model.named_parameters():
        supplied = any(name.replace("_global", "").endswith("." + key) for key in source)
        assert (name in new) != supplied, name
    assert new  # every family has a new head


def test_new_parameters_learn_at_the_head_learning_rate(pretrained, tmp_path):
    """The head's optimizer groups start at --head-learning-rate and the pretrained ones at --learning-rate, both
    under the same schedule; the rate reaches metrics.json and the card, and a model from scratch refuses it."""
    from hf_longdoc.modeling import get_family
    from hf_longdoc.training.head_fitting import new_parameter_names
    from hf_longdoc.training.recipe import HeadRateTrainer, training_arguments

    model, _ = build_from_backbone("segment_lm", pretrained, ["a", "b"], False, max_length=128,
                                   config_overrides={"segment_length": 34, "variant": "att"})
    head = new_parameter_names(model, get_family("segment_lm"))
    assert head and all(name.startswith("head.") for name in head)
    trainer = HeadRateTrainer(model=model, args=training_arguments(str(tmp_path / "t"), learning_rate=1e-4),
                              head_parameters=head, head_learning_rate=3e-3)
    optimizer = trainer.create_optimizer()
    rate = {id(p): group["lr"] for group in optimizer.param_groups for p in group["params"]}
    by_name = dict(model.named_parameters())
    assert {rate[id(by_name[name])] for name in head} == {3e-3}
    assert {rate[id(p)] for name, p in by_name.items() if name not in head} == {1e-4}
    assert sum(len(group["params"]) for group in optimizer.param_groups) == len(by_name)  # each once

    out = tmp_path / "run"
    assert main(["train", "--model", "segment_lm", "--backbone", pretrained, "--task-size", "16", "--epochs", "1",
                 "--max-length", "128", "--config", "segment_length=34", "--head-learning-rate", "3e-3",
                 "--output-dir", str(out)]) == 0
    assert json.loads((out / "metrics.json").read_text())["head_learning_rate"] == 3e-3
    assert "| learning rate of the new parameters (head, new embeddings) | 0.003 |" in (out / "README.md").read_text()
    with pytest.raises(ValueError, match="head_learning_rate.*from scratch"):
        from hf_longdoc.training.run import train

        train(model="segment_lm", output_dir=str(tmp_path / "scratch"), head_learning_rate=1e-3)


def test_a_family_fine_tunes_a_backbone_at_its_own_rate_and_epochs_unless_the_user_sets_them(pretrained):
    def resolved(**settings):
        run = RunSettings.of(**settings).resolve()
        return run.learning_rate, run.epochs

    assert resolved(model="sparse_longformer", backbone=pretrained) == (2e-5, 2)  # its fine-tuning policy
    assert resolved(model="sparse_longformer") == (1e-4, 4)  # from scratch: the family's rate, train's epochs
    assert resolved(model="sparse_longformer", backbone=pretrained, learning_rate=5e-5, epochs=3) == (5e-5, 3)
    assert resolved(model="segment_lm", backbone=pretrained) == (1e-4, 4)  # no policy of its own: its rate
