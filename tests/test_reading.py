"""`hf_longdoc.inference.reading`, the one place that says how a saved model is read: the decision rule, the threshold
every config declares, the chunk plan, a score exactly at the threshold labelled alike by `evaluate`, the pipeline and
`predict`, and a scan that fails when another module computes any of these itself."""

import inspect
import json
import re
from pathlib import Path

import numpy as np
import pytest
import torch
from transformers import AutoConfig, BertConfig, PretrainedConfig, pipeline

import hf_longdoc
from families import FAMILY_CASES
from hf_longdoc.data import fit_wordpiece_tokenizer
from hf_longdoc.inference.reading import (
    DEFAULT_THRESHOLD,
    chosen_classes,
    chunk_plan,
    decide,
    decision_threshold,
    special_frame,
)
from hf_longdoc.training.evaluation import evaluate_model
from test_predict import READS, TEXTS

SRC = Path(hf_longdoc.__file__).parent
CONFIG_CLASSES = sorted({case.config_class for case in FAMILY_CASES}, key=lambda cls: cls.__name__)


def test_decide_is_the_best_class_or_every_class_at_least_the_threshold():
    scores = np.float32([[0.2, 0.5, 0.3], [0.4, 0.4, 0.2]])
    assert decide(scores).tolist() == [[False, True, False], [True, False, False]]  # the first of equal ones
    assert decide(scores, 0.4).tolist() == [[False, True, False], [True, True, False]]  # at the threshold: in
    assert chosen_classes([0.2, 0.5, 0.3]) == [1]
    assert chosen_classes([0.5, 0.88, 0.12], 0.5) == [1, 0]  # best first
    score = np.float32(0.7)  # float32(0.7) < 0.7: compared in float64, the same "no" on every path
    assert chosen_classes(torch.tensor([score]), 0.7) == chosen_classes([score], 0.7) == []
    assert chosen_classes([score], float(score)) == [0]


@pytest.mark.parametrize("config_class", CONFIG_CLASSES, ids=lambda cls: cls.__name__)
def test_every_config_declares_the_threshold_with_one_default(config_class):
    """Declared in `__init__` (default None: hf_longdoc's default), documented, checked, and set by the shared tail
    (`_finish_init`, a marked copy in each config)."""
    parameter = inspect.signature(config_class.__init__).parameters["multi_label_threshold"]
    assert parameter.default is None
    assert "multi_label_threshold" in config_class.__doc__
    assert "_finish_init" in vars(config_class)
    case = next(case for case in FAMILY_CASES if case.config_class is config_class)
    assert case.config().multi_label_threshold is None
    assert case.config(multi_label_threshold=0.5).multi_label_threshold == 0.5
    for bad in (0, 1, 1.5, True, "0.5"):
        with pytest.raises(ValueError, match="`multi_label_threshold` must be a number in"):
            case.config(multi_label_threshold=bad)


def test_a_config_saved_before_the_setting_loads_and_decides_at_the_default(tmp_path):
    case = next(case for case in FAMILY_CASES if case.family == "contextualizer")
    saved = case.config(problem_type="multi_label_classification").to_dict()
    saved.pop("multi_label_threshold")  # as written before the configs declared it
    (tmp_path / "config.json").write_text(json.dumps(saved))
    config = AutoConfig.from_pretrained(tmp_path)
    assert config.multi_label_threshold is None and decision_threshold(config) == DEFAULT_THRESHOLD
    config.multi_label_threshold = 0.45  # as `train --threshold 0.45` sets it
    config.save_pretrained(tmp_path)
    assert decision_threshold(AutoConfig.from_pretrained(tmp_path)) == 0.45
    assert decision_threshold(PretrainedConfig()) == DEFAULT_THRESHOLD  # a Transformers checkpoint's config
    assert decision_threshold(BertConfig(multi_label_threshold=0.6)) == 0.6


def test_the_chunk_plan_frames_cuts_and_overlaps():
    tokenizer = fit_wordpiece_tokenizer(TEXTS, vocab_size=300, model_max_length=12)
    config = BertConfig(max_position_embeddings=64)
    prefix, suffix = special_frame(tokenizer)
    plan = chunk_plan(config, tokenizer, stride=3)
    assert (plan.prefix, plan.suffix, plan.content, plan.step) == (prefix, suffix, 10, 7)  # 12 less [CLS] [SEP]
    ids = list(range(100, 125))
    chunks = plan.chunks(ids)
    assert all(chunk[:1] == prefix and chunk[-1:] == suffix and len(chunk) == 12 for chunk in chunks)
    assert [chunk[1] for chunk in chunks] == [100, 107, 114, 115]  # the last chunk ends at the document's end
    assert plan.truncated(ids) == [prefix + ids[:10] + suffix] and plan.is_cut(ids) and not plan.is_cut(ids[:10])
    with pytest.raises(ValueError, match=r"`chunk_length` \(13\) exceeds the 12 ids the model reads"):
        chunk_plan(config, tokenizer, chunk_length=13)
    with pytest.raises(ValueError, match=r"`stride` \(10\) must be smaller"):
        chunk_plan(config, tokenizer, stride=10)


def at_threshold_model(folder):
    """A tiny multi-label Contextualizer whose logits are (0.3, 2, -2) for every document, saved with the threshold
    equal to sigmoid(0.3) in float32: class `a` scores exactly at the threshold."""
    tokenizer = fit_wordpiece_tokenizer(TEXTS, vocab_size=300, model_max_length=READS)
    torch.manual_seed(0)
    config = hf_longdoc.ContextualizerConfig(vocab_size=len(tokenizer), hidden_size=32, rank=37, num_hidden_layers=2,
                                             num_labels=3, id2label={0: "a", 1: "b", 2: "c"},
                                             label2id={"a": 0, "b": 1, "c": 2},
                                             problem_type="multi_label_classification")
    model = hf_longdoc.ContextualizerForSequenceClassification(config)
    with torch.no_grad():
        model.classifier.weight.zero_()
        model.classifier.bias.copy_(torch.tensor([0.3, 2.0, -2.0]))
    threshold = float(torch.tensor(0.3).sigmoid())  # the float32 score, exactly
    model.config.multi_label_threshold = threshold
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return str(folder), threshold


def test_a_score_exactly_at_the_threshold_gets_one_answer_from_evaluate_the_pipeline_and_predict(tmp_path):
    folder, threshold = at_threshold_model(tmp_path / "model")
    assert json.loads((tmp_path / "model" / "config.json").read_text())["multi_label_threshold"] == threshold
    texts = [text for text in TEXTS if len(text.split()) < 20][:3]  # one chunk each: no mean of chunk logits
    expected = ["b", "a"]  # 0.88, and `a` at the threshold; `c` (0.12) below it
    data = tmp_path / "docs.jsonl"
    data.write_text("".join(json.dumps({"text": text, "gold": expected}) + "\n" for text in texts))

    predicted = hf_longdoc.predict(folder, str(data))
    assert predicted["label"] == [expected] * len(texts)
    assert predicted["score"][0][1] == threshold
    assert hf_longdoc.predict(folder, str(data), long="chunks")["label"] == [expected] * len(texts)

    classify = pipeline("long-document-classification", model=folder)
    assert [classify(text)["label"] for text in texts] == [expected] * len(texts)
    above = float(np.nextafter(threshold, 1.0))  # the next double: the score is now below it
    assert classify(texts[0], threshold=above)["label"] == ["b"]

    metrics = evaluate_model(folder, str(data), label_column="gold")
    assert metrics["threshold"] == threshold and metrics["exact_match"] == 1.0
    assert evaluate_model(folder, str(data), label_column="gold", threshold=above)["exact_match"] == 0.0


# -- nothing else computes how a model is read ------------------------------------------------------------------------
# (pattern, what it computes): anywhere in the package but the reading module and the family folders, whose registry
# hooks (`Family.reading_length`, `ids_per_position`) are what the reading module asks
EVERYWHERE = [
    (r">=?\s*(?:float\()?\s*(?:self\.)?threshold\b|\bthreshold\s*<=?\s*(?:float\()?\s*\w*scores?\b",
     "a threshold decision (`reading.decide`)"),
    (r"max_position_embeddings\s*-", "a reading length from the positions (`reading.reading_length`)"),
    (r"\b10\s*\*\*\s*\d|\b1e30\b", "an 'unset tokenizer limit' cut-off (`reading.UNBOUNDED`)"),
    (r"\bDEFAULT_THRESHOLD\s*=|\bthreshold\s*(?::\s*float\s*)?=\s*0?\.\d", "a default threshold (`DEFAULT_THRESHOLD`)"),
    (r"\bdef (?:special_frame|chunk_plan|decide|reading_length|decision_threshold)\b", "a second definition"),
]
# in the modules that read a saved model
READERS = ["inference/pipelines.py", "predicting/run.py", "inference/reader.py", "predicting/inputs.py",
           "serving/app.py", "predicting/writing.py", "predicting/resuming.py", "training/evaluation.py",
           "training/run.py", "inference/explaining.py", "inference/export.py", "publishing/hub.py",
           "inference/attention_map.py", "metrics/__init__.py"]
IN_READERS = [
    (r"\.model_max_length\b(?!\s*=[^=])", "a read of the tokenizer's limit (`reading.saved_reading_length`)"),
    (r"(?:logits|scores?)\S*\.argmax\(", "a best-class decision (`reading.decide`)"),
    (r"num_special_tokens|len\(frame|add_special_tokens=False\)\[", "a special-token frame (`reading.special_frame`)"),
    (r"len\((?:ids|tokens)\)\s*-\s*content", "a chunk plan (`reading.chunk_plan`)"),
]
# a metric script `evaluate` loads by path, standalone: it thresholds what it is given (already decided 0/1 by
# `compute_metrics_fn`, so its threshold of 0.5 keeps them)
# numbers.py: the one default threshold, beside the rule a threshold obeys, where the light settings (`run_settings`,
# the CLI's flags) read it without importing torch; `reading` re-exports it
EXEMPT = {"metrics/multilabel/multilabel.py", "utils/rules.py"}


def reading_computations(relative, source):
    """`path:line: what` for each computation of how a model is read in `source`, the module at `relative`."""
    rules = list(EVERYWHERE) + (IN_READERS if relative in READERS else [])
    return [f"{relative}:{number}: {what}: {line.strip()}" for number, line in enumerate(source.splitlines(), 1)
            for pattern, what in rules if re.search(pattern, line.split("#")[0])]


def test_nothing_outside_the_reading_module_computes_how_a_model_is_read():
    found = []
    for path in sorted(SRC.rglob("*.py")):
        relative = path.relative_to(SRC).as_posix()
        if relative == "inference/reading.py" or relative in EXEMPT or relative.startswith("modeling/"):
            continue
        found += reading_computations(relative, path.read_text(encoding="utf-8"))
    assert not found, "ask `hf_longdoc.inference.reading` instead:\n" + "\n".join(found)
    assert all(module in {p.relative_to(SRC).as_posix() for p in SRC.rglob("*.py")} for module in READERS)


@pytest.mark.parametrize(("module", "line"), [
    ("inference/reader.py", "chosen = [i for i, s in enumerate(scores) if s > threshold]"),
    ("publishing/hub.py", "labels = probabilities >= float(threshold)"),
    ("inference/attention_map.py", "max_length = min(tokenizer.model_max_length, config.max_position_embeddings - 2)"),
    ("inference/export.py", "reads = limit if limit < 10**9 else 4096"),
    ("training/settings.py", "    threshold: float = 0.3"),
    ("inference/pipelines.py", "best = int(scores.argmax())"),
    ("inference/reader.py", "special = tokenizer.num_special_tokens_to_add()"),
    ("inference/reader.py", "starts = list(range(0, len(tokens) - content, step))"),
    ("inference/explaining.py", "limit = tokenizer.model_max_length"),
])
def test_the_scan_catches_each_kind(module, line):
    assert reading_computations(module, line)


def test_the_scan_lets_validation_and_assignments_pass():
    for line in ("if not 0 < threshold < 1:", "tokenizer.model_max_length = length", "THRESHOLD.check(threshold)",
                 "decided.argmax(axis=-1)", "threshold = decision_threshold(config, threshold)"):
        assert not reading_computations("inference/reader.py", line), line
