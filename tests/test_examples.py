"""The example scripts run end to end offline on data they make themselves."""

import json
import os
import sys

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
