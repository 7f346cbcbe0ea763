"""The baselines every method is measured against: Transformers' BERT, RoBERTa, Longformer, and TF-IDF + LR.

The Transformers models are built at a given size; the TF-IDF + logistic-regression reader reads the first 512 words
or the whole text.
"""

import re
from dataclasses import dataclass

import numpy as np
from transformers import (
    BertConfig,
    BertForSequenceClassification,
    LongformerConfig,
    LongformerForSequenceClassification,
    RobertaConfig,
    RobertaForSequenceClassification,
)


@dataclass(frozen=True)
class Baseline:
    config_class: type
    model_class: type
    position_offset: int = 0  # RoBERTa-style position ids start after the pad id: 2 more positions
    sparse: bool = False  # window attention with global tokens (its time and memory are the sparse models' reference)


BASELINES = {
    "bert": Baseline(BertConfig, BertForSequenceClassification),
    "roberta": Baseline(RobertaConfig, RobertaForSequenceClassification, position_offset=2),
    "longformer": Baseline(LongformerConfig, LongformerForSequenceClassification, position_offset=2, sparse=True),
}


def parse_baseline(name):
    """`bert`, `roberta`, `longformer`, or `bert-<N>` (a BERT reading the first N tokens) -> (baseline, N or None),
    or None when `name` is not a baseline."""
    kind, dash, tokens = name.partition("-")
    if kind not in BASELINES or (dash and not (kind == "bert" and tokens.isdigit() and int(tokens) >= 8)):
        return None
    return kind, int(tokens) if dash else None


def build_baseline(name, hidden_size, num_layers, num_heads, max_length, attention_window=512,
                   attention_dropout=None, **settings):
    """Transformers' `name` model (bert | roberta | longformer) for sequence classification: that width, depth and
    heads, intermediate 4·h, positions for `max_length` tokens; `attention_window` for the Longformer,
    `attention_dropout` the attention-probability dropout, `settings` any other config value (vocab, labels, ids)."""
    baseline = BASELINES[name]
    sizes = dict(hidden_size=hidden_size, num_hidden_layers=num_layers, num_attention_heads=num_heads,
                 intermediate_size=4 * hidden_size, max_position_embeddings=max_length + baseline.position_offset)
    if baseline.sparse:
        sizes["attention_window"] = attention_window
    if attention_dropout is not None:
        sizes["attention_probs_dropout_prob"] = attention_dropout
    return baseline.model_class(baseline.config_class(**sizes, **settings))


def truncating_baseline(data, multi_label=False, max_tokens=512):
    """TF-IDF + logistic regression on the first `max_tokens` word tokens of each document, and on the full text.

    This is the "reads only the first 512 tokens" reference of the built-in task; returns test accuracies (or micro-F1
    for multi-label data) for both readings.
    """
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import accuracy_score, f1_score
    from sklearn.multiclass import OneVsRestClassifier

    token_pattern = r"(?u)\b\w+\b"

    def first_tokens(text):
        return " ".join(re.findall(token_pattern, text)[:max_tokens])

    scores = {}
    for name, view in (("first_512", first_tokens), ("full_text", lambda text: text)):
        vectorizer = TfidfVectorizer(token_pattern=token_pattern, sublinear_tf=True, min_df=2)
        x_train = vectorizer.fit_transform([view(t) for t in data["train"]["text"]])
        x_test = vectorizer.transform([view(t) for t in data["test"]["text"]])
        y_train, y_test = np.asarray(data["train"]["label"]), np.asarray(data["test"]["label"])
        classifier = LogisticRegression(max_iter=2000, C=10.0)
        if multi_label:
            classifier = OneVsRestClassifier(classifier)
        classifier.fit(x_train, y_train)
        predicted = classifier.predict(x_test)
        scores[name] = float(f1_score(y_test, predicted, average="micro") if multi_label
                             else accuracy_score(y_test, predicted))
    return scores
