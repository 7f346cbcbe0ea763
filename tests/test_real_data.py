"""Sanity check on real long documents from ../shared/data (skipped where that folder is absent, as for users)."""

import os

import pytest

from hf_longdoc.training.run import train

SHARED = os.path.join(os.path.dirname(__file__), "..", "..", "shared", "data")
BBC = os.path.join(SHARED, "bbc_news", "data.jsonl")


@pytest.mark.slow
@pytest.mark.skipif(not os.path.isfile(BBC), reason="../shared/data/bbc_news is not available")
def test_contextualizer_learns_bbc_news_topics(tmp_path):
    """Trained through the library the CLI calls, scored on held-out articles it never saw (5 topics, chance 0.24)."""
    metrics = train(model="contextualizer", output_dir=str(tmp_path / "bbc"), dataset=BBC, epochs=3,
                    max_length=2048, batch_size=16, seed=0)
    assert metrics["test"]["accuracy"] > 0.85, metrics["test"]
