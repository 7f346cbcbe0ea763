"""A saved folder in others' tools: its stock tokenizer loads in Transformers 4 and 5 and without
hf_longdoc, with the same ids and no remote-code question (UX-23), and a saved model given a whole document (a
`pipeline` without `truncation=True`) reads the length it was trained to read, cut as `truncation=True` cuts it."""

import json
import os
import subprocess
import sys
import textwrap

import pytest
import torch
from transformers import AutoTokenizer, pipeline
from transformers.testing_utils import CaptureLogger
from transformers.utils import logging

from families import FAMILY_CASES
from fresh_process import HIDE_HF_LONGDOC
from hf_longdoc.cli import main
from hf_longdoc.data import fit_wordpiece_tokenizer, save_tokenizer
from hf_longdoc.inference.reading import reading_length, saved_reading_length, trained_length
from hf_longdoc.modeling.elementwise.tokenization_elementwise import ElementwiseTokenizer
from hf_longdoc.modeling.sparse_longformer.modeling_sparse_longformer import keep_what_the_model_reads

CORPUS = [f"report {i} on reactors, valves and {'pumps ' * (i % 4)}with a closing remark." for i in range(20)]
LONG = " ".join(CORPUS) * 4  # some 1,500 ids: far past what the tiny models read
READS = 40  # the length the tiny models are "trained" at (ids; elementwise: bytes, a multiple of its v = 4)
ONE_PER_FAMILY = [case for case in FAMILY_CASES if case.name in (
    "contextualizer", "slstm", "sparse_longformer", "sparse_bigbird", "elementwise-bert", "segment_lm")]


def save_trained_at(case, folder, reads=READS):
    """A tiny classifier of `case` and its tokenizer saved as `hf-longdoc train --max-length reads` saves them: the
    tokenizer's `model_max_length` and the config's `max_input_length` are the length read (`reading_length`)."""
    registered = case.registered
    config = case.config()
    tokenizer = registered.tokenizer_for(config, CORPUS, vocab_size=90, max_length=reads)
    if not registered.has_own_tokenizer:
        config = case.config(vocab_size=len(tokenizer), pad_token_id=tokenizer.pad_token_id,
                             **registered.token_settings(tokenizer))
    length = reading_length(config, reads)
    tokenizer.model_max_length = length
    config.max_input_length = length
    torch.manual_seed(0)
    case.classification_class(config).eval().save_pretrained(folder)
    save_tokenizer(tokenizer, folder)
    return str(folder), tokenizer, length


def scores(predictions):
    """{label: score} of one document's `top_k=None` predictions (a pipeline may wrap them in a list of one)."""
    if predictions and isinstance(predictions[0], list):
        (predictions,) = predictions
    return {p["label"]: p["score"] for p in predictions}


def assert_same_scores(got, expected):
    got, expected = scores(got), scores(expected)
    assert got.keys() == expected.keys()
    for label in expected:
        assert got[label] == pytest.approx(expected[label], abs=1e-6), (label, got, expected)


# -- (a) the tokenizer's files ----------------------------------------------------------------------------------------
def test_a_saved_wordpiece_tokenizer_names_a_class_transformers_4_and_5_both_load(tmp_path):
    """Transformers 5 writes `TokenizersBackend`, which Transformers 4 (Optimum's) cannot resolve; `save_tokenizer`
    writes `PreTrainedTokenizerFast`, which 5 loads as the same class with the same ids, truncation included."""
    tokenizer = fit_wordpiece_tokenizer(CORPUS, vocab_size=90, model_max_length=READS)
    save_tokenizer(tokenizer, tmp_path)
    saved = json.loads((tmp_path / "tokenizer_config.json").read_text())
    assert saved["tokenizer_class"] == "PreTrainedTokenizerFast" and "auto_map" not in saved
    assert saved["model_max_length"] == READS
    loaded = AutoTokenizer.from_pretrained(tmp_path)
    assert type(loaded) is type(tokenizer)
    for truncation in (False, True):
        assert loaded(LONG, truncation=truncation)["input_ids"] == tokenizer(LONG, truncation=truncation)["input_ids"]
    assert len(loaded(LONG, truncation=True)["input_ids"]) == READS


def test_a_tokenizer_with_a_class_of_its_own_is_saved_as_it_is(tmp_path):
    """The elementwise tokenizer is hf_longdoc's own class: its name and `auto_map` (its remote code) stay."""
    save_tokenizer(ElementwiseTokenizer(elements_per_material=4, max_materials=10), tmp_path)
    saved = json.loads((tmp_path / "tokenizer_config.json").read_text())
    assert saved["tokenizer_class"] == "ElementwiseTokenizer" and "AutoTokenizer" in saved["auto_map"]


# -- (b) a saved model reads the length it was trained to read --------------------------------------------------------
@pytest.mark.parametrize("case", FAMILY_CASES, ids=lambda case: case.name)
def test_a_pipeline_without_truncation_reads_what_training_read(case, tmp_path):
    """`pipeline(...)(document)` passes the whole document: the model cuts it where `truncation=True` would (its
    first ids and the closing special token, or the closing material), says so, and scores it the same."""
    folder, tokenizer, length = save_trained_at(case, tmp_path)
    classify = pipeline("text-classification", model=folder, device="cpu", top_k=None)
    assert saved_reading_length(classify.model.config, classify.tokenizer) == length
    assert len(tokenizer(LONG)["input_ids"]) > 10 * length
    truncated = classify(LONG, truncation=True)
    module_logger = logging.get_logger(type(classify.model).__module__)
    type(module_logger).warning_once.cache_clear()  # Transformers warns once per message and process
    with CaptureLogger(module_logger) as captured:
        whole = classify(LONG)
    assert_same_scores(whole, truncated)
    assert f"the model reads {length}, the length it was trained to read" in captured.out, captured.out
    # a document it reads whole is read as it is, with or without truncation
    assert_same_scores(classify(CORPUS[3]), classify(CORPUS[3], truncation=True))


def test_the_cut_keeps_each_rows_first_ids_and_its_last_whole_positions_and_moves_them_to_the_front():
    """The index work on hand-made rows: a left-padded long row, a short row, and v = 2 ids a position."""
    ids = torch.tensor([[0, 0, 5, 6, 7, 8, 9], [5, 6, 0, 0, 0, 0, 0]])
    mask = (ids != 0).long()
    cut_mask, cut_ids = keep_what_the_model_reads(None, 3, "tokens", mask, ids)
    assert cut_ids.tolist() == [[5, 6, 9], [5, 6, 0]] and cut_mask.tolist() == [[1, 1, 1], [1, 1, 0]]
    assert keep_what_the_model_reads(None, 7, "tokens", mask, ids)[1] is ids  # read whole: untouched
    assert keep_what_the_model_reads(None, None, "tokens", mask, ids)[1] is ids  # no limit
    materials = torch.tensor([[1, 0, 5, 6, 7, 0, 8, 9, 2, 0]])  # [CLS] "56" "7" "89" [SEP], v = 2
    _, cut = keep_what_the_model_reads(8, 6, "elements", (materials != 0).long(), materials, width=2)
    assert cut.tolist() == [[1, 0, 5, 6, 2, 0]]  # the first two materials and the closing one: 6 ids


@pytest.mark.parametrize("case", [case for case in ONE_PER_FAMILY if case.name != "segment_lm"],
                         ids=lambda case: case.name)
def test_a_padded_batch_is_cut_row_by_row(case):
    """In a padded batch only the rows longer than the model reads are cut, each as it would be alone; a row read
    whole keeps its logits."""
    g = case.granularity
    torch.manual_seed(0)
    model = case.classification_class(case.config(max_input_length=12 * g)).eval()
    input_ids, attention_mask = case.batch([30 * g, 7 * g, 12 * g])
    with torch.no_grad():
        batch = model(input_ids, attention_mask=attention_mask).logits
        for row, length in enumerate((30 * g, 7 * g, 12 * g)):
            ids = input_ids[row, :length]
            read = torch.cat([ids[: 11 * g], ids[-g:]]) if length > 12 * g else ids  # what truncation=True keeps
            torch.testing.assert_close(batch[row], model(read[None]).logits[0], rtol=0, atol=1e-5)


def test_the_reading_length_of_a_saved_model_is_the_fewer_of_its_config_and_its_tokenizer():
    config = FAMILY_CASES[0].config(max_input_length=300)
    assert trained_length(config) == 300 and trained_length(config, 200) == 200 and trained_length(config, 10**30) \
        == 300
    assert trained_length(FAMILY_CASES[0].config()) is None  # saved before the setting: the tokenizer's, else none
    assert reading_length(config) == 300 and reading_length(config, requested=500) == 500  # a request is read
    with pytest.raises(ValueError, match="max_input_length"):
        FAMILY_CASES[0].config(max_input_length=0)


# -- both, where hf_longdoc is not installed --------------------------------------------------------------------------
WITHOUT_HF_LONGDOC = """
    import json, os
    from transformers import AutoTokenizer, PreTrainedTokenizerFast, pipeline
    output, text, *folders = sys.argv[1:]
    found = {}
    for folder in folders:
        tokenizer = AutoTokenizer.from_pretrained(folder, trust_remote_code=True)
        entry = {"class": type(tokenizer).__name__, "ids": tokenizer(text)["input_ids"]}
        if os.path.isfile(os.path.join(folder, "tokenizer.json")):  # a stock tokenizer: no remote code at all
            entry["stock_ids"] = PreTrainedTokenizerFast.from_pretrained(folder)(text)["input_ids"]
        classify = pipeline("text-classification", model=folder, trust_remote_code=True, device="cpu", top_k=None)
        assert "transformers_modules" in type(classify.model).__module__
        entry["whole"], entry["truncated"] = classify(text), classify(text, truncation=True)
        found[os.path.basename(folder)] = entry
    with open(output, "w") as f:
        json.dump(found, f)
"""


@pytest.mark.slow
def test_without_hf_longdoc_the_tokenizer_loads_unasked_and_the_pipeline_reads_what_training_read(tmp_path):
    """A fresh process that cannot import hf_longdoc, its stdin closed (a remote-code question would show in its
    output): each family's tokenizer gives the package's ids (a stock one also as `PreTrainedTokenizerFast`, no
    remote code), and the remote-code pipeline without truncation gives the scores of `truncation=True`."""
    folders, expected = [], {}
    for case in ONE_PER_FAMILY:
        folder, tokenizer, _ = save_trained_at(case, tmp_path / case.name)
        folders.append(folder)
        expected[case.name] = (tokenizer(LONG)["input_ids"], pipeline(
            "text-classification", model=folder, device="cpu", top_k=None)(LONG, truncation=True))
    script = tmp_path / "without_hf_longdoc.py"
    script.write_text(HIDE_HF_LONGDOC + textwrap.dedent(WITHOUT_HF_LONGDOC))
    env = dict(os.environ, HF_MODULES_CACHE=str(tmp_path / "modules"), HF_HUB_OFFLINE="1", PYTHONPATH="")
    result = subprocess.run([sys.executable, str(script), str(tmp_path / "out.json"), LONG, *folders], cwd=tmp_path,
                            env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "[y/N]" not in result.stdout + result.stderr
    found = json.loads((tmp_path / "out.json").read_text())
    for name, (ids, package_scores) in expected.items():
        entry = found[name]
        assert entry["ids"] == ids, name
        assert entry.get("stock_ids", ids) == ids, name
        assert_same_scores(entry["whole"], entry["truncated"])
        assert_same_scores(entry["whole"], package_scores)
    assert found["elementwise-bert"]["class"] == "ElementwiseTokenizer" and "stock_ids" not in found["elementwise-bert"]
    assert found["contextualizer"]["class"] == "TokenizersBackend"


# -- what `hf-longdoc train` saves ------------------------------------------------------------------------------------
@pytest.mark.slow
def test_train_saves_the_length_it_read_in_the_config_and_a_portable_tokenizer(tmp_path):
    output = tmp_path / "model"
    assert main(["train", "--model", "contextualizer", "--output-dir", str(output), "--task-size", "16",
                 "--epochs", "1", "--max-length", "64", "--vocab-size", "400",
                 "--config", "hidden_size=16", "rank=8", "num_hidden_layers=1"]) == 0
    config = json.loads((output / "config.json").read_text())
    tokenizer_config = json.loads((output / "tokenizer_config.json").read_text())
    assert config["max_input_length"] == tokenizer_config["model_max_length"] == 64
    assert tokenizer_config["tokenizer_class"] == "PreTrainedTokenizerFast"
    assert "reads the first 64 input ids" in (output / "README.md").read_text()
    classify = pipeline("text-classification", model=str(output), device="cpu", top_k=None)
    document = " ".join(["the reactor valve report"] * 200)
    assert_same_scores(classify(document), classify(document, truncation=True))
