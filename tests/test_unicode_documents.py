"""Property tests over arbitrary Unicode documents: every family's tokenizer + model gives finite logits of the right
shape (alone and inside a padded batch), and the CLI's data loading either loads the file or says what is wrong."""

import json

import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hf_longdoc.data import DatasetError, fit_wordpiece_tokenizer, load_text_classification_dataset, tokenize
from test_conformance import _tokenizer_and_model

AWKWARD = ["", " ", "\t\n\r", "\u200b", "\u200d", "\ufeff", "\u00ad", "\x00", "\x1b", "\u0301", "e\u0301",
           "😀", "👩‍👩‍👧", "🇩🇪", "\u202e", "吾輩は猫である", "Donaudampfschifffahrtsgesellschaft", "\U0001F600" * 3]

WORDPIECE = fit_wordpiece_tokenizer(["plain words here", "and a few more words"] * 4, vocab_size=60,
                                    model_max_length=32)
pieces = st.one_of(st.sampled_from(AWKWARD), st.text(max_size=40),
                   st.text(alphabet=st.characters(categories=("Cc", "Cf", "Mn", "Zs", "So")), max_size=20))
documents = st.one_of(
    st.lists(pieces, max_size=12).map("".join),
    st.tuples(pieces, st.integers(1, 4000)).map(lambda part: ((part[0] or "x") * part[1])[:100_000]),  # to 100 kB
)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=documents)
def test_any_document_gets_finite_logits(family, text):
    tokenizer, model = _tokenizer_and_model(family, max_length=min(family.max_length, 64))
    with torch.no_grad():
        alone = model(**tokenizer([text], truncation=True, return_tensors="pt")).logits
        batch = model(**tokenizer([text, "plain words here"], padding=True, truncation=True,
                                  return_tensors="pt")).logits
    assert alone.shape == (1, 3) and batch.shape == (2, 3)
    assert torch.isfinite(alone).all() and torch.isfinite(batch).all()
    torch.testing.assert_close(alone, batch[:1], atol=1e-4, rtol=0)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(texts=st.lists(documents, min_size=1, max_size=12))
def test_data_loading_never_crashes_on_any_text(tmp_path_factory, texts):
    """A JSONL file of arbitrary texts loads (blank ones dropped and counted) or is a DatasetError saying why."""
    path = tmp_path_factory.mktemp("unicode") / "docs.jsonl"
    path.write_text("\n".join(json.dumps({"text": text, "label": "ab"[i % 2]}) for i, text in enumerate(texts * 3)),
                    encoding="utf-8")
    try:
        data, names, _ = load_text_classification_dataset(str(path))
    except DatasetError:
        return
    encoded = tokenize(data, WORDPIECE, 32)
    assert all(len(ids) <= 32 for split in encoded.values() for ids in split["input_ids"])
    assert set(names) <= {"a", "b"}

