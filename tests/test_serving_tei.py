"""`hf-longdoc serve` held against text embeddings inference's API (`docs/openapi.json` and `router/src/http/` in
huggingface/text-embeddings-inference), difference by difference: its routes, its request fields (others ignored),
`truncate` and `truncation_direction`, `/info`'s fields, its metric names and `x-*` headers, its error types; and the
real `huggingface_hub.InferenceClient` against a real server."""

import json
import logging
import re

import pytest
import torch
from fastapi.testclient import TestClient
from transformers import AutoModelForSequenceClassification, AutoTokenizer

from hf_longdoc.predicting import predict
from hf_longdoc.serving import create_app
from test_serving import LABELS, READS, TEXTS, save_contextualizer, start_server

# TEI's `ErrorType`, as it sends it (the Rust variant names)
TEI_ERROR_TYPES = {"Unhealthy", "Backend", "Overloaded", "Validation", "Tokenizer", "Empty"}
LONG = " ".join(TEXTS[:4])  # far more ids than the model reads
SHORT = "the match ended in a draw"


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return save_contextualizer(tmp_path_factory.mktemp("tei"))


@pytest.fixture(scope="module")
def client(model_dir):
    with TestClient(create_app(model_dir)) as client:
        yield client


@pytest.fixture(scope="module")
def reference(model_dir):
    """The model and tokenizer through Transformers' Auto classes: what a document's logits are, independently of the
    server."""
    model = AutoModelForSequenceClassification.from_pretrained(model_dir).eval()
    return model, AutoTokenizer.from_pretrained(model_dir)


def logits_of(reference, text, side="right"):
    model, tokenizer = reference
    tokenizer.truncation_side = side
    try:
        inputs = tokenizer(text, truncation=True, max_length=READS, return_tensors="pt")
    finally:
        tokenizer.truncation_side = "right"
    with torch.no_grad():
        return model(**inputs).logits[0]


def by_label(predictions):
    return {prediction["label"]: prediction["score"] for prediction in predictions}


# -- routes ------------------------------------------------------------------------------------------------------------
def test_tei_routes_predict_and_probe(client):
    """TEI's router for a classifier: `POST /` and `POST /invocations` predict; `GET /health`, `/ping` and `/` are
    its health probe (an empty 200). The page lives at /ui, a path no TEI route uses."""
    answer = client.post("/predict", json={"inputs": SHORT}).json()
    for path in ("/", "/invocations"):
        assert client.post(path, json={"inputs": SHORT}).json() == answer
    for path in ("/health", "/ping", "/"):
        probe = client.get(path)
        assert probe.status_code == 200 and probe.content == b"", path
    page = client.get("/ui")
    assert page.status_code == 200 and "<html" in page.text.lower()
    assert client.get("/info").json()["page"] == "/ui"


# -- fields TEI does not know, and InferenceClient's `parameters` ------------------------------------------------------
def test_unknown_fields_are_ignored_as_tei_ignores_them_and_logged_once(client, caplog):
    plain = client.post("/predict", json={"inputs": SHORT}).json()
    with caplog.at_level(logging.INFO, logger="hf_longdoc.serving.app"):
        for _ in range(2):
            for extra in ({"parameters": {}}, {"prompt_name": "query"}, {"parameters": {"truncation": True}}):
                response = client.post("/predict", json={"inputs": SHORT, **extra})
                assert response.status_code == 200 and response.json() == plain, extra
    logged = [record.getMessage() for record in caplog.records if "ignores the field" in record.getMessage()]
    assert sorted(logged) == sorted(f"/predict ignores the field {name}, as text embeddings inference does (logged "
                                    "once)." for name in ("`prompt_name`", "`parameters.truncation`"))
    # /classify is this package's own: a misspelt field there is refused, never ignored
    assert client.post("/classify", json={"inputs": SHORT, "explian": 2}).status_code == 422


def test_parameters_top_k_and_function_to_apply_are_read(client, reference):
    logits = logits_of(reference, LONG)
    names = [LABELS[index] for index in range(len(LABELS))]
    top = client.post("/predict", json={"inputs": LONG, "parameters": {"top_k": 2}}).json()
    full = client.post("/predict", json={"inputs": LONG}).json()
    assert top == full[:2] and len(top) == 2
    cases = {"none": logits, "softmax": logits.softmax(-1), "sigmoid": logits.sigmoid(), "NONE": logits}
    for function, expected in cases.items():
        answer = by_label(client.post("/predict", json={"inputs": LONG,
                                                        "parameters": {"function_to_apply": function}}).json())
        for index, name in enumerate(names):
            assert abs(answer[name] - expected[index].item()) < 1e-5, (function, name)
    raw = client.post("/predict", json={"inputs": LONG, "raw_scores": True}).json()
    assert raw == client.post("/predict", json={"inputs": LONG, "parameters": {"function_to_apply": "none"}}).json()
    clash = client.post("/predict", json={"inputs": LONG, "raw_scores": True,
                                          "parameters": {"function_to_apply": "softmax"}})
    assert clash.status_code == 422 and "function_to_apply" in clash.json()["error"]
    bad = client.post("/predict", json={"inputs": LONG, "parameters": {"function_to_apply": "tanh"}})
    assert bad.status_code == 422 and bad.json()["error_type"] == "Validation"


# -- truncate and truncation_direction ---------------------------------------------------------------------------------
def test_truncate_false_refuses_a_document_the_server_would_cut(client, reference):
    _, tokenizer = reference
    given = len(tokenizer(LONG)["input_ids"])
    refused = client.post("/predict", json={"inputs": [SHORT, LONG], "truncate": False})
    assert refused.status_code == 422 and refused.json()["error_type"] == "Validation"
    assert f"`inputs[1]` must have less than {READS} tokens. Given: {given}" in refused.json()["error"]
    assert client.post("/predict", json={"inputs": SHORT, "truncate": False}).status_code == 200
    for truncate in (None, True):  # null (TEI's Option<bool>): the server's auto_truncate, which is on
        assert client.post("/predict", json={"inputs": LONG, "truncate": truncate}).status_code == 200
    assert client.post("/classify", json={"inputs": LONG, "truncate": False}).status_code == 422


def test_truncate_false_is_taken_when_the_server_reads_all_of_a_document(model_dir):
    with TestClient(create_app(model_dir, long="chunks")) as chunked:
        assert chunked.post("/predict", json={"inputs": LONG, "truncate": False}).status_code == 200


@pytest.mark.parametrize("direction", ["left", "Left", "right", "Right"])
def test_truncation_direction_chooses_the_part_read(client, reference, direction):
    """`left` cuts from the left, as a tokenizer with `truncation_side="left"` does: the document's end is read."""
    side = direction.lower()
    expected = logits_of(reference, LONG, side).softmax(-1)
    answer = by_label(client.post("/predict", json={"inputs": LONG, "truncation_direction": direction}).json())
    for index, name in LABELS.items():
        assert abs(answer[name] - expected[index].item()) < 1e-5, name
    coverage = client.post("/classify", json={"inputs": [LONG, SHORT],
                                              "truncation_direction": direction}).json()
    assert [c["coverage"]["part_read"] for c in coverage] == [{"right": "start", "left": "end"}[side], "all"]
    assert coverage[0]["coverage"]["cut"] and not coverage[1]["coverage"]["cut"]


def test_predict_reads_the_same_end_offline(client, model_dir, tmp_path):
    """`predict --truncation-side left` gives the numbers the server gives `truncation_direction: "left"`."""
    dataset = tmp_path / "docs.jsonl"
    dataset.write_text("".join(json.dumps({"text": text}) + "\n" for text in (LONG, SHORT)))
    rows = list(predict(model_dir, str(dataset), truncation_side="left"))
    served = client.post("/classify", json={"inputs": [LONG, SHORT], "truncation_direction": "left"}).json()
    assert [row["scores"] for row in rows] == [answer["scores"] for answer in served]
    with pytest.raises(ValueError, match="truncation_side"):
        predict(model_dir, str(dataset), truncation_side="middle")


def test_the_two_ends_of_a_document_differ(client):
    start = client.post("/predict", json={"inputs": LONG, "raw_scores": True}).json()
    end = client.post("/predict", json={"inputs": LONG, "raw_scores": True, "truncation_direction": "left"}).json()
    assert by_label(start) != by_label(end)  # else the direction test above could not fail


def test_left_truncation_cannot_be_explained(client):
    refused = client.post("/classify", json={"inputs": LONG, "explain": 2, "truncation_direction": "left"})
    assert refused.status_code == 422 and "truncation_direction" in refused.json()["error"]


# -- what a flat list means: a batch (this package's choice) ----------------------------------------------------------
def test_a_flat_list_of_two_strings_is_a_batch_not_a_pair(client):
    """TEI reads `["a", "b"]` as one sequence pair and `["a"]` as one input; these models read one document, and
    docs/models.md documents a list as a batch of documents."""
    one, two = (client.post("/predict", json={"inputs": text}).json() for text in (SHORT, LONG))
    assert client.post("/predict", json={"inputs": [SHORT, LONG]}).json() == [one, two]
    assert client.post("/predict", json={"inputs": [SHORT]}).json() == [one]
    assert client.post("/predict", json={"inputs": [SHORT, LONG, SHORT]}).json() == [one, two, one]


# -- /info, metrics, headers -------------------------------------------------------------------------------------------
def test_info_carries_teis_fields(client, model_dir):
    info = client.get("/info").json()
    for field in ("model_id", "model_sha", "model_dtype", "served_model_name", "model_type", "max_concurrent_requests",
                  "max_input_length", "max_batch_tokens", "max_batch_requests", "max_client_batch_size",
                  "auto_truncate", "tokenization_workers", "version", "sha", "docker_label"):
        assert field in info, field
    names = [LABELS[index] for index in range(len(LABELS))]
    assert info["model_type"] == {"classifier": {"id2label": {str(i): name for i, name in enumerate(names)},
                                                 "label2id": {name: i for i, name in enumerate(names)}}}
    assert info["model_id"] == info["served_model_name"] and "/" not in info["model_id"]
    assert info["max_input_length"] == READS and info["auto_truncate"] is True
    assert info["model_dtype"] == "float32" and isinstance(info["tokenization_workers"], int)
    assert info["family"] == "contextualizer"


def test_metrics_carry_teis_names(client):
    client.post("/predict", json={"inputs": SHORT})
    client.post("/predict", json={"inputs": [SHORT, LONG]})
    client.post("/predict", json={"inputs": [SHORT] * 33})
    metrics = client.get("/metrics").text
    count = dict(re.findall(r'^(te_request_\w+\{\w+="\w+"\}) (\S+)$', metrics, re.M))
    assert float(count['te_request_count{method="single"}']) >= 1
    assert float(count['te_request_count{method="batch"}']) >= 2
    assert float(count['te_request_success{method="batch"}']) >= 1
    assert float(count['te_request_failure{err="batch_size"}']) >= 1
    for name in ("te_request_duration_bucket", "te_request_tokenization_duration_count",
                 "te_request_queue_duration_sum", "te_request_inference_duration_count",
                 "te_request_input_length_bucket", "te_batch_next_size_count",
                 "te_batch_next_tokens_count", "te_queue_size", "hf_longdoc_requests_total"):
        assert re.search(rf"^{name}[{{ ]", metrics, re.M), name


def test_responses_carry_teis_compute_headers(client, reference):
    _, tokenizer = reference
    response = client.post("/predict", json={"inputs": [SHORT, LONG]})
    headers = response.headers
    assert headers["x-compute-type"] == "cpu"
    assert int(headers["x-compute-characters"]) == len(SHORT) + len(LONG)
    assert int(headers["x-compute-tokens"]) == len(tokenizer(SHORT)["input_ids"]) + READS
    parts = ("compute", "total", "tokenization", "queue", "inference")
    times = {name: int(headers[f"x-{name}-time"]) for name in parts}
    assert all(value >= 0 for value in times.values())
    assert times["total"] >= times["inference"]
    assert "x-compute-tokens" in client.post("/classify", json={"inputs": SHORT}).headers


# -- errors in TEI's shape and spelling -------------------------------------------------------------------------------
@pytest.mark.parametrize("request_, status, kind, message", [
    (("POST", "/predict", {"json": {"inputs": ""}}), 400, "Empty", "`inputs[0]` cannot be empty"),
    (("POST", "/predict", {"json": {"inputs": "   "}}), 400, "Empty", "nothing to classify"),
    (("POST", "/predict", {"json": {"inputs": [SHORT] * 33}}), 422, "Validation",
     "batch size 33 > maximum allowed batch size 32"),
    (("POST", "/predict", {"json": {"inputs": []}}), 422, "Validation", "empty list"),
    (("POST", "/predict", {"json": {"input": SHORT}}), 422, "Validation", "`inputs`"),
    (("POST", "/predict", {"content": b'{"inputs": "caf\xe9"}', "headers": {"content-type": "application/json"}}),
     422, "Validation", "UTF-8"),
    (("POST", "/predict", {"content": b"inputs=abc", "headers": {"content-type": "text/plain"}}), 415, "Validation",
     "Content-Type"),
    (("GET", "/predict", {}), 405, "Validation", "does not take GET"),
    (("GET", "/nope", {}), 404, "Validation", "no endpoint /nope"),
    (("POST", "/classify", {"json": {"inputs": SHORT, "explain": 99}}), 422, "Validation", "--max-explain"),
])
def test_every_error_is_teis_shape_with_teis_error_type(client, request_, status, kind, message):
    method, path, keywords = request_
    response = client.request(method, path, **keywords)
    assert response.status_code == status
    body = response.json()
    assert set(body) == {"error", "error_type"} and body["error_type"] == kind and kind in TEI_ERROR_TYPES
    assert message in body["error"]


# -- the real InferenceClient against a real server ------------------------------------------------------------------
@pytest.mark.slow
def test_huggingface_hubs_inference_client_gets_predicts_labels_and_scores(model_dir, tmp_path, monkeypatch):
    """huggingface_hub's `InferenceClient.text_classification`, both ways users point it at a TEI server, against
    `hf-longdoc serve` in a process of its own: the label and score `predict` gives each document. (The client keeps
    the first class of TEI's flat answer, against TEI as here.)"""
    from huggingface_hub import InferenceClient, constants

    # the suite runs with HF_HUB_OFFLINE=1, which blocks the client's every request, to this machine too; the server
    # is on 127.0.0.1, and nothing here reaches the Hub
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    texts = [LONG, SHORT, TEXTS[5]]
    dataset = tmp_path / "docs.jsonl"
    dataset.write_text("".join(json.dumps({"text": text}) + "\n" for text in texts))
    offline = list(predict(model_dir, str(dataset)))
    process, url = start_server(model_dir)
    try:
        for client in (InferenceClient(base_url=url), InferenceClient(model=url)):
            for text, row in zip(texts, offline):
                best = client.text_classification(text)
                assert best.label == row["label"] and abs(best.score - row["score"]) < 1e-6
                assert client.text_classification(text, top_k=2).label == row["label"]
                raw = client.text_classification(text, function_to_apply="none")
                assert raw.label == row["label"] and raw.score != pytest.approx(row["score"])  # a logit
    finally:
        process.terminate()
        process.wait(timeout=60)
