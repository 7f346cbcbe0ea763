"""`predict` and the pipelines: one decision from scores to labels on every path (a score exactly at the
multi-label threshold is labelled everywhere), output columns that never stand twice, and ids that name every row."""

import csv
import json

import numpy as np
import pandas as pd
import pytest
import torch
from datasets import Dataset
from transformers import AutoModelForSequenceClassification, pipeline

import hf_longdoc
from hf_longdoc.cli import main
from hf_longdoc.inference.reading import chosen_classes, decide, decision_threshold
from hf_longdoc.training.evaluation import evaluate_model
from test_predict import TEXTS, save_classifier

# logits 0, 2, -2 whatever the text: sigmoid scores 0.5 (exactly), 0.88, 0.12
BIAS = [0.0, 2.0, -2.0]


def fixed_scores_model(folder, threshold):
    """A multi-label classifier whose scores are the sigmoid of BIAS for every document, saved with `threshold`."""
    save_classifier(folder, problem_type="multi_label_classification", multi_label_threshold=threshold)
    model = AutoModelForSequenceClassification.from_pretrained(folder)
    with torch.no_grad():
        model.classifier.weight.zero_()
        model.classifier.bias.copy_(torch.tensor(BIAS))
    model.save_pretrained(folder)
    return str(folder)


def test_the_decision_is_at_least_the_threshold_compared_in_double_precision():
    assert chosen_classes([0.5, 0.88, 0.12], 0.5) == [1, 0]  # best first; the score at the threshold is in
    assert chosen_classes([0.49, 0.2], 0.5) == []
    assert chosen_classes([0.6, 0.6, 0.1], 0.5) == [0, 1]  # ties in class order
    # float32(0.7) is below 0.7: the same "no" whether the score comes as a tensor, an array or a list
    score = torch.tensor([0.7])
    assert chosen_classes(score, 0.7) == chosen_classes(score.numpy(), 0.7) == chosen_classes(score.tolist(), 0.7) == []
    assert decide(np.float32([0.7, 0.5]), 0.5).tolist() == [True, True]


def test_predict_the_pipeline_and_evaluate_give_the_same_labels_at_the_saved_threshold(tmp_path, capsys):
    folder = fixed_scores_model(tmp_path / "model", threshold=0.5)
    expected = ["b", "a"]  # 0.88 and 0.5 (at the threshold), best first; "c" (0.12) is below
    rows = [{"id": f"d{i}", "text": text, "gold": expected} for i, text in enumerate(TEXTS[:4])]
    data = tmp_path / "docs.jsonl"
    data.write_text("".join(json.dumps(row) + "\n" for row in rows))

    truncated = hf_longdoc.predict(folder, str(data))
    assert truncated["label"] == [expected] * 4
    assert truncated["score"][0] == pytest.approx([0.8808, 0.5], abs=1e-4)
    output = tmp_path / "chunks.jsonl"
    assert main(["predict", folder, "--dataset", str(data), "--output", str(output), "--long", "chunks"]) == 0
    assert [json.loads(line)["label"] for line in output.read_text().splitlines()] == [expected] * 4

    classify = pipeline("long-document-classification", model=folder)
    for text in TEXTS[:4]:
        result = classify(text)
        assert result["label"] == result["labels"] == expected
        assert result["score"] == pytest.approx([0.8808, 0.5], abs=1e-4)
    assert classify(TEXTS[0], threshold=0.6)["label"] == ["b"]
    assert classify(TEXTS[0], threshold=0.9)["label"] == []  # never the best class below the threshold

    metrics = evaluate_model(folder, str(data), label_column="gold")
    assert metrics["threshold"] == 0.5 and metrics["micro_f1"] == 1.0 and metrics["exact_match"] == 1.0
    assert evaluate_model(folder, str(data), label_column="gold", threshold=0.6)["exact_match"] == 0.0


def test_a_threshold_below_the_best_score_labels_nothing_on_every_path(tmp_path):
    folder = fixed_scores_model(tmp_path / "model", threshold=0.9)
    assert hf_longdoc.predict(folder, Dataset.from_dict({"text": TEXTS[:2]}))["label"] == [[], []]
    result = pipeline("long-document-classification", model=folder)(TEXTS[0])
    assert result["label"] == [] and result["score"] == []
    assert decision_threshold(AutoModelForSequenceClassification.from_pretrained(folder).config) == 0.9


def save_single_label(folder):
    return save_classifier(folder, id2label={0: "sport", 1: "tech", 2: "label"},
                           label2id={"sport": 0, "tech": 1, "label": 2})


@pytest.mark.parametrize("extension", [".csv", ".jsonl", ".parquet"])
def test_kept_columns_named_like_output_columns_are_renamed_in_every_format(tmp_path, caplog, extension):
    folder = save_single_label(tmp_path / "model")
    data = tmp_path / "docs.csv"
    pd.DataFrame({"text": TEXTS[:3], "score_sport": ["mine"] * 3, "label": ["gold"] * 3,
                  "error": ["e"] * 3}).to_csv(data, index=False)
    output = tmp_path / f"out{extension}"
    with caplog.at_level("WARNING"):
        hf_longdoc.predict(folder, str(data), output, keep_columns="score_sport,label,error")
    assert "score_sport -> input_score_sport" in caplog.text and "label -> input_label" in caplog.text
    if extension == ".csv":
        with open(output, newline="", encoding="utf-8") as f:
            header = next(csv.reader(f))
        table = pd.read_csv(output)
        assert len(header) == len(set(header)) and not any(name.endswith(".1") for name in table.columns)
        assert list(table["input_score_sport"]) == ["mine"] * 3 and list(table["input_label"]) == ["gold"] * 3
        assert table["score_sport"].dtype == float
    else:
        table = pd.read_json(output, lines=True) if extension == ".jsonl" else pd.read_parquet(output)
        assert list(table["input_score_sport"]) == ["mine"] * 3 and "score_sport" not in table.columns
        assert list(table["input_error"]) == ["e"] * 3 and table["error"].isna().all()


@pytest.mark.parametrize("id_name", ["score_tech", "label", "score", "evidence"])
def test_an_id_column_named_like_an_output_column_is_refused_naming_both(tmp_path, capsys, id_name):
    folder = save_single_label(tmp_path / "model")
    data = tmp_path / "docs.csv"
    pd.DataFrame({"text": TEXTS[:2], id_name: ["a", "b"]}).to_csv(data, index=False)
    assert main(["predict", folder, "--dataset", str(data), "--output", str(tmp_path / "out.csv"),
                 "--id-column", id_name]) == 2
    err = capsys.readouterr().err
    assert f"Input column {id_name!r}, the id column, has the name of the output column" in err
    assert "Traceback" not in err and not (tmp_path / "out.csv").exists()


def test_a_kept_column_whose_new_name_is_taken_is_refused(tmp_path):
    folder = save_single_label(tmp_path / "model")
    documents = Dataset.from_dict({"text": TEXTS[:2], "score_tech": [1, 2], "input_score_sport": [3, 4],
                                   "score_sport": [5, 6]})
    with pytest.raises(ValueError, match="'input_score_sport', where it would be kept, is a column of the input"):
        hf_longdoc.predict(folder, documents, keep_columns="score_sport")


@pytest.mark.parametrize("ids", [["a", None, "c"], [None, "b", "c"], [None, None, "c"]])
def test_null_ids_are_refused_naming_the_row(tmp_path, capsys, ids):
    folder = save_single_label(tmp_path / "model")
    data = tmp_path / "docs.jsonl"
    data.write_text("".join(json.dumps({"id": value, "text": text}) + "\n" for value, text in zip(ids, TEXTS)))
    assert main(["predict", folder, "--dataset", str(data), "--output", str(tmp_path / "out.jsonl")]) == 2
    err = capsys.readouterr().err
    assert f"has no value in row {ids.index(None)} (counting from 0)" in err and "duplicate" not in err
    assert "Traceback" not in err


def test_duplicate_ids_name_the_row_of_the_repeat(tmp_path):
    folder = save_single_label(tmp_path / "model")
    with pytest.raises(ValueError, match=r"duplicate values, e.g. 'a' \(again in row 2"):
        hf_longdoc.predict(folder, Dataset.from_dict({"text": TEXTS[:3], "id": ["a", "b", "a"]}))
