"""Every popular encoder as a backbone, or a clear refusal before any work: the families that start from a pretrained
checkpoint (segment_lm, sparse_longformer, elementwise) around tiny random checkpoints of eleven architectures saved
with `save_pretrained`. Each pair either trains one step, saves, and classifies through `pipeline`, or is refused by
`check_backbone` (what `train` and `compare` call before any data is read) with a ValueError that names the
architecture and the families that take it. Nothing is downloaded."""

import pytest
import torch
from transformers import CONFIG_MAPPING, AutoModel, pipeline

from backbone_models import build_from_backbone
from hf_longdoc.cli import main
from hf_longdoc.data import fit_wordpiece_tokenizer, make_long_document_task
from hf_longdoc.modeling import get_family
from hf_longdoc.training.recipe import fit_statistics
from hf_longdoc.training.settings import check_backbone

LAYERS = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=37)
# model_type -> its tiny sizes; RoBERTa-numbered encoders get a table whose last rows a careless reader would index
# past (positions start after the pad id; MPNet fixes that id at 1)
ARCHITECTURES = {
    "bert": dict(**LAYERS, max_position_embeddings=128),
    "roberta": dict(**LAYERS, max_position_embeddings=130),
    "xlm-roberta": dict(**LAYERS, max_position_embeddings=130),
    "camembert": dict(**LAYERS, max_position_embeddings=130),
    "distilbert": dict(dim=32, n_layers=2, n_heads=4, hidden_dim=37, max_position_embeddings=128),
    "electra": dict(**LAYERS, embedding_size=32, max_position_embeddings=128),
    "deberta-v2": dict(**LAYERS, max_position_embeddings=128),
    "albert": dict(**LAYERS, embedding_size=16, max_position_embeddings=128),
    "mpnet": dict(**LAYERS, max_position_embeddings=128),
    "modernbert": dict(**LAYERS, max_position_embeddings=512, local_attention=16),
    "eurobert": dict(**LAYERS, max_position_embeddings=512),
}
FAMILIES = ("segment_lm", "sparse_longformer", "elementwise")
# (family, model_type) pairs refused: the sparse conversion needs BERT's layers under BERT's names
REFUSED = {("sparse_longformer", model_type) for model_type in
           ("distilbert", "deberta-v2", "albert", "mpnet", "modernbert", "eurobert")}
TEXTS = list(make_long_document_task(train_size=16, validation_size=4, test_size=8, min_words=40, max_words=80,
                                     seed=1)["train"]["text"])


def save_checkpoint(folder, model_type, **changes):
    """A tiny random `model_type` encoder and a WordPiece tokenizer, saved as a user's checkpoint folder is."""
    tokenizer = fit_wordpiece_tokenizer(TEXTS, vocab_size=300, model_max_length=128)
    ids = dict(pad_token_id=tokenizer.pad_token_id, cls_token_id=tokenizer.cls_token_id,
               sep_token_id=tokenizer.sep_token_id, bos_token_id=tokenizer.cls_token_id,
               eos_token_id=tokenizer.sep_token_id, mask_token_id=tokenizer.mask_token_id)
    config = CONFIG_MAPPING[model_type](vocab_size=len(tokenizer), **ids, **{**ARCHITECTURES[model_type], **changes})
    torch.manual_seed(0)
    AutoModel.from_config(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return str(folder)


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    root = tmp_path_factory.mktemp("grid")
    return {model_type: save_checkpoint(root / model_type, model_type) for model_type in ARCHITECTURES}


@pytest.mark.parametrize("model_type", sorted(ARCHITECTURES))
@pytest.mark.parametrize("family_name", FAMILIES)
def test_every_family_trains_a_step_and_classifies_or_refuses_before_any_work(checkpoints, family_name, model_type,
                                                                               tmp_path):
    family, backbone = get_family(family_name), checkpoints[model_type]
    if (family_name, model_type) in REFUSED:
        with pytest.raises(ValueError, match=rf"--model {family_name} cannot start from .*'{model_type}'.*works with "
                                             r"--model elementwise, segment_lm"):
            check_backbone(family, backbone)
        return
    check_backbone(family, backbone)
    model, tokenizer = build_from_backbone(family, backbone, ["no", "yes"], False, max_length=256)
    ids = tokenizer(TEXTS, truncation=True)["input_ids"]
    fit_statistics(family, model, ids, tokenizer)
    batch = tokenizer([" ".join(TEXTS[:4]), TEXTS[5][:40]], truncation=True, padding=True, return_tensors="pt")
    model.train()
    loss = model(**batch, labels=torch.tensor([0, 1])).loss
    loss.backward()
    torch.optim.AdamW(model.parameters(), lr=1e-3).step()
    assert torch.isfinite(loss)
    model.save_pretrained(tmp_path / "model")
    tokenizer.save_pretrained(tmp_path / "model")
    classify = pipeline("text-classification", model=str(tmp_path / "model"))
    got = classify([" ".join(TEXTS * 3), ""] if family_name != "sparse_longformer" else [" ".join(TEXTS * 3)])
    assert all(result["label"] in ("no", "yes") and 0 <= result["score"] <= 1 for result in got)


@pytest.mark.parametrize("model_type", ["xlm-roberta", "camembert", "electra"])
def test_the_sparse_conversion_takes_every_checkpoint_with_bert_layers(checkpoints, model_type):
    """XLM-R and CamemBERT are RoBERTa under another name, ELECTRA's discriminator is BERT: their layers copy."""
    model, _ = build_from_backbone("sparse_longformer", checkpoints[model_type], ["a", "b"], False, max_length=256)
    source = AutoModel.from_pretrained(checkpoints[model_type]).state_dict()
    ours = model.longformer.state_dict()
    for name in ("encoder.layer.1.attention.self.query.weight", "encoder.layer.1.output.dense.weight",
                 "embeddings.word_embeddings.weight"):
        assert torch.equal(ours[name], source[name])


def test_an_electra_with_projected_embeddings_is_refused_with_the_reason(tmp_path):
    backbone = save_checkpoint(tmp_path / "electra-small", "electra", embedding_size=16)
    with pytest.raises(ValueError, match=r"embeds tokens in 16 dimensions.*works with --model elementwise, "
                                         r"segment_lm"):
        check_backbone(get_family("sparse_longformer"), backbone)


def test_train_refuses_an_architecture_before_reading_the_data(checkpoints, tmp_path, capsys):
    missing = tmp_path / "nowhere.jsonl"  # never read: the refusal comes first
    assert main(["train", "--model", "sparse_longformer", "--backbone", checkpoints["modernbert"], "--dataset",
                 str(missing), "--output-dir", str(tmp_path / "out")]) == 2
    error = capsys.readouterr().err
    assert "'modernbert' checkpoint" in error and "--model elementwise, segment_lm" in error
    assert not (tmp_path / "out").exists()


def test_elementwise_over_mpnet_trains_through_the_cli_without_running_past_its_positions(checkpoints, tmp_path):
    """MPNet numbers positions after its fixed padding index 1: u must leave those rows, or training crashes."""
    assert main(["train", "--model", "elementwise", "--backbone", checkpoints["mpnet"], "--task-size", "16",
                 "--epochs", "1", "--max-length", "2048", "--output-dir", str(tmp_path / "out")]) == 0
    classify = pipeline("text-classification", model=str(tmp_path / "out"))
    assert classify(" ".join(TEXTS * 20))[0]["score"] > 0
