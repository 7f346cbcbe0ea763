"""One way to open a saved model for reading (`inference.reader`): `predict`, the server, `evaluate` and the pipeline
share its reader and rules, a model that cannot explain says so in the same words everywhere, and the server's answers
match the response models its OpenAPI page shows."""

import json

import datasets
import pytest
from fastapi.testclient import TestClient
from transformers import pipeline

import hf_longdoc
from hf_longdoc import FAMILIES
from hf_longdoc.data import fit_wordpiece_tokenizer
from hf_longdoc.inference.explaining import explain_refusal
from hf_longdoc.inference.reader import SavedModel, load_reader
from hf_longdoc.inference.reading import best_first
from hf_longdoc.inference.settings import ReadSettings
from hf_longdoc.predicting import PredictSettings
from hf_longdoc.serving import ServeSettings, create_app
from hf_longdoc.serving.schemas import Classification, Info, Prediction
from test_serving import LABELS, TEXTS, save_contextualizer
from tiny_bert import save_tiny_bert


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return save_contextualizer(tmp_path_factory.mktemp("reader"))


@pytest.fixture(scope="module")
def segment_cat(tmp_path_factory):
    """A tiny segment LM of `variant="cat"` (Eq. 2): no weight per segment, so nothing to explain with."""
    documents = ["The club won the cup final. The minister spoke. Shares fell on Monday."] * 10
    tokenizer = fit_wordpiece_tokenizer(documents, vocab_size=120, model_max_length=64)
    backbone = save_tiny_bert(tmp_path_factory.mktemp("backbone"), tokenizer, max_positions=64)
    model, saved_tokenizer = FAMILIES["segment_lm"].from_backbone(backbone, None, 200, num_labels=2,
                                                                  segment_length=24, variant="cat")
    saved_tokenizer.model_max_length = FAMILIES["segment_lm"].reading_length(model.config)
    folder = str(tmp_path_factory.mktemp("cat"))
    model.save_pretrained(folder)
    saved_tokenizer.save_pretrained(folder)
    return folder


def test_predict_and_serve_share_their_reading_settings():
    shared = {f for f in ReadSettings.__dataclass_fields__}
    assert shared <= set(PredictSettings.__dataclass_fields__) and shared <= set(ServeSettings.__dataclass_fields__)
    for name in ("batch_size", "long", "stride", "aggregation", "dtype", "device", "truncation_side"):
        assert PredictSettings.__dataclass_fields__[name].metadata["help"]
        assert (ServeSettings.__dataclass_fields__[name].metadata
                is ReadSettings.__dataclass_fields__[name].metadata), name
    with pytest.raises(ValueError, match="--long"):
        ServeSettings(long="sideways")
    with pytest.raises(ValueError, match="--long"):
        PredictSettings(long="sideways")


def test_a_folder_is_checked_before_the_model_loads(model_dir, tmp_path, monkeypatch):
    monkeypatch.setattr("hf_longdoc.inference.reader.load_model", lambda *a, **k: pytest.fail("the model loaded"))
    saved = SavedModel(model_dir, ReadSettings())
    assert saved.labels == [LABELS[index] for index in range(3)]
    with pytest.raises(ValueError, match="config_overrides"):
        SavedModel(model_dir, ReadSettings(config_overrides={"hidden_size": 8}))
    with pytest.raises(ValueError, match="model_dir"):
        SavedModel(str(tmp_path), ReadSettings())


def test_predict_serve_and_the_pipeline_give_the_same_numbers(model_dir):
    documents = TEXTS[:6]
    rows = hf_longdoc.predict(model_dir, datasets.Dataset.from_dict({"text": documents}))
    classifier = pipeline("long-document-classification", model=model_dir)
    with TestClient(create_app(model_dir)) as client:
        served = client.post("/classify", json={"inputs": documents}).json()
    reader = load_reader(model_dir, ReadSettings())
    for row, answer, piped in zip(rows, served, classifier(documents)):
        assert row["label"] == answer["label"] == piped["label"]
        assert row["scores"] == answer["scores"] == pytest.approx(piped["scores"], abs=1e-6)
        assert answer["coverage"]["ids_read"] <= reader.length


def test_top_k_is_best_first_everywhere(model_dir, tmp_path):
    documents = TEXTS[:3]
    dataset = datasets.Dataset.from_dict({"text": documents})
    hf_longdoc.predict(model_dir, dataset, tmp_path / "out.jsonl", top_k=2)
    written = [json.loads(line)["scores"] for line in open(tmp_path / "out.jsonl", encoding="utf-8")]
    classifier = pipeline("long-document-classification", model=model_dir)
    with TestClient(create_app(model_dir)) as client:
        classified = client.post("/classify", json={"inputs": documents, "top_k": 2}).json()
        predicted = client.post("/predict", json={"inputs": documents}).json()
    for scores, answer, ranked, piped in zip(written, classified, predicted, classifier(documents, top_k=2)):
        assert list(scores) == list(answer["scores"]) == [item["label"] for item in ranked][:2]
        assert [item["label"] for item in piped] == list(scores)
        values = [item["score"] for item in ranked]
        assert best_first(values) == list(range(len(values)))


def test_a_model_that_cannot_explain_says_so_in_the_same_words_everywhere(segment_cat, tmp_path):
    reason = explain_refusal(load_reader(segment_cat, ReadSettings()).model)
    assert reason and "variant 'cat'" in reason
    dataset = datasets.Dataset.from_dict({"text": ["The club won the cup final."]})
    with pytest.raises(ValueError) as refused:
        hf_longdoc.predict(segment_cat, dataset, explain=2)
    assert reason in str(refused.value)
    with TestClient(create_app(segment_cat)) as client:
        info = client.get("/info").json()
        answer = client.post("/classify", json={"inputs": "The club won the cup final.", "explain": 2})
    assert info["explainable"] is False and info["explain_refusal"] == reason
    assert answer.status_code == 422 and reason in answer.json()["error"]


def test_the_answers_match_the_response_models_the_openapi_page_shows(model_dir):
    with TestClient(create_app(model_dir)) as client:
        schema = client.get("/openapi.json").json()
        Info.model_validate(client.get("/info").json())
        for answer in client.post("/classify", json={"inputs": TEXTS[:2]}).json():
            Classification.model_validate(answer)
        for ranked in client.post("/predict", json={"inputs": TEXTS[:2]}).json():
            [Prediction.model_validate(item) for item in ranked]
        [Prediction.model_validate(item) for item in client.post("/predict", json={"inputs": TEXTS[0]}).json()]
        refused = client.post("/classify", json={"inputs": ""})
    assert refused.status_code == 400 and set(refused.json()) == {"error", "error_type"}
    paths = schema["paths"]
    for path, model in (("/classify", "Classification"), ("/predict", "Prediction"), ("/info", "Info")):
        method = "get" if path == "/info" else "post"
        response = json.dumps(paths[path][method]["responses"]["200"])
        assert model in response, path
    assert "ErrorResponse" in json.dumps(paths["/classify"]["post"]["responses"]["422"])
