"""`hf-longdoc serve` / `serving.create_app`: TEI's `/predict`, `/classify` with coverage and evidence, the limits, the
API key, the metrics, and a document scored exactly as `predict` scores it offline."""

import asyncio
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time

import httpx
import pytest
import torch
from fastapi.testclient import TestClient

from hf_longdoc import ContextualizerConfig, ContextualizerForSequenceClassification
from hf_longdoc.cli import main
from hf_longdoc.data import fit_wordpiece_tokenizer, make_long_document_task
from hf_longdoc.predicting import predict
from hf_longdoc.serving import ServeSettings, create_app

TEXTS = list(make_long_document_task(train_size=12, validation_size=2, test_size=2, min_words=20, max_words=160,
                                     seed=3)["train"]["text"])
READS = 48  # input ids the tiny model reads: most documents above are longer
LABELS = {0: "business", 1: "sport", 2: "tech"}


def save_contextualizer(folder):
    """A tiny 3-label Contextualizer (its weights say which passages decided) reading READS ids, with its WordPiece
    tokenizer."""
    tokenizer = fit_wordpiece_tokenizer(TEXTS, vocab_size=300, model_max_length=READS)
    torch.manual_seed(0)
    config = ContextualizerConfig(vocab_size=len(tokenizer), hidden_size=16, rank=8, num_hidden_layers=1,
                                  num_labels=3, id2label=LABELS, label2id={v: k for k, v in LABELS.items()},
                                  pad_token_id=tokenizer.pad_token_id, hidden_dropout_prob=0.0)
    ContextualizerForSequenceClassification(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return str(folder)


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return save_contextualizer(tmp_path_factory.mktemp("served"))


@pytest.fixture(scope="module")
def client(model_dir):
    with TestClient(create_app(model_dir)) as client:
        yield client


def write_jsonl(path, texts):
    path.write_text("".join(json.dumps({"text": text}) + "\n" for text in texts))
    return str(path)


# -- TEI's /predict ---------------------------------------------------------------------------------------------------
def check_tei_predictions(predictions):
    """TEI's `Prediction` list, field by field: every class once, `label` a string, `score` a number, best first."""
    assert isinstance(predictions, list) and len(predictions) == len(LABELS)
    for prediction in predictions:
        assert set(prediction) == {"label", "score"}
        assert isinstance(prediction["label"], str) and isinstance(prediction["score"], float)
    assert sorted(p["label"] for p in predictions) == sorted(LABELS.values())
    scores = [p["score"] for p in predictions]
    assert scores == sorted(scores, reverse=True)


def test_predict_answers_a_tei_client_unchanged(client):
    single = client.post("/predict", json={"inputs": TEXTS[0]})
    assert single.status_code == 200
    check_tei_predictions(single.json())
    assert abs(sum(p["score"] for p in single.json()) - 1) < 1e-5
    batch = client.post("/predict", json={"inputs": TEXTS[:3], "truncate": True})
    assert batch.status_code == 200 and len(batch.json()) == 3
    for predictions in batch.json():
        check_tei_predictions(predictions)
    assert batch.json()[0] == single.json()
    tei_batch = client.post("/predict", json={"inputs": [[TEXTS[0]], [TEXTS[1]]]})  # TEI's batch of one-string lists
    assert tei_batch.json() == batch.json()[:2]
    pair = client.post("/predict", json={"inputs": [["a question", "a passage"]]})
    assert pair.status_code == 422 and "sequence pair" in pair.json()["error"]


def test_raw_scores_are_the_logits(client, model_dir):
    raw = client.post("/predict", json={"inputs": TEXTS[0], "raw_scores": True}).json()
    probabilities = {p["label"]: p["score"] for p in client.post("/predict", json={"inputs": TEXTS[0]}).json()}
    logits = torch.tensor([next(p["score"] for p in raw if p["label"] == name) for name in LABELS.values()])
    softmax = logits.softmax(-1)
    for index, name in LABELS.items():
        assert abs(softmax[index].item() - probabilities[name]) < 1e-6


# -- /classify: the same reading as predict --------------------------------------------------------------------------
@pytest.mark.parametrize("long", ["truncate", "chunks"])
def test_classify_gives_predicts_numbers_byte_for_byte(model_dir, tmp_path, long):
    """Documents longer than the model reads, sent in one request and in several: the labels and the JSON numbers of
    the scores are `predict`'s, to the last digit; with `explain`, the same passages at the same offsets."""
    documents = write_jsonl(tmp_path / "docs.jsonl", TEXTS)
    output = tmp_path / "labels.jsonl"
    explain = 2 if long == "truncate" else None
    predict(model_dir, documents, str(output), long=long, explain=explain)
    offline = [json.loads(line) for line in output.read_text().splitlines()]
    with TestClient(create_app(model_dir, long=long)) as client:
        body = {"inputs": TEXTS, **({"explain": explain} if explain else {})}
        together = client.post("/classify", json=body).json()
        alone = [client.post("/classify", json={**body, "inputs": text}).json()[0] for text in TEXTS[:4]]
    assert any(answer["coverage"]["cut"] for answer in together) == (long == "truncate")
    for row, answer in zip(offline, together):
        assert answer["label"] == row["label"] and answer["score"] == row["score"]
        assert json.dumps(answer["scores"]) == json.dumps(row["scores"])  # the same float32 values, the same digits
        if explain:
            assert answer["evidence"] == row["evidence"]
            for passage in answer["evidence"]:
                assert TEXTS[offline.index(row)][passage["start"]: passage["end"]] == passage["text"]
    assert [answer["scores"] for answer in alone] == [answer["scores"] for answer in together[:4]]
    if long == "chunks":
        assert all(answer["coverage"]["ids_read"] == answer["coverage"]["document_ids"] for answer in together)
        assert max(answer["coverage"]["chunks"] for answer in together) > 1


def test_coverage_says_how_much_was_read(client, model_dir):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    (answer,) = client.post("/classify", json={"inputs": TEXTS[0], "top_k": 2}).json()
    ids = len(tokenizer(TEXTS[0], add_special_tokens=False)["input_ids"])
    assert answer["coverage"] == {"document_ids": ids, "ids_read": min(ids, READS - 2), "cut": ids > READS - 2,
                                  "part_read": "start" if ids > READS - 2 else "all", "chunks": 1}
    assert len(answer["scores"]) == 2 and answer["label"] in answer["scores"]


# -- limits and errors ------------------------------------------------------------------------------------------------
def test_bad_requests_get_a_status_and_a_message_and_the_server_keeps_serving(model_dir):
    with TestClient(create_app(model_dir, max_input_chars=500, max_client_batch_size=3)) as client:
        cases = [
            (client.post("/predict", json={"inputs": ["short", "x" * 501]}), 422,
             "`inputs[1]` must have less than 500 characters (--max-input-chars). Given: 501"),
            (client.post("/classify", json={"inputs": ["a"] * 4}), 422, "--max-client-batch-size"),
            (client.post("/classify", json={"inputs": ["fine text", "   "]}), 400, "`inputs[1]`"),
            (client.post("/classify", json={"inputs": "\u200b\u200b"}), 400, "`inputs[0]`"),
            (client.post("/classify", json={"inputs": []}), 422, "empty list"),
            (client.post("/classify", content=b"{not json", headers={"content-type": "application/json"}), 422,
             "not valid JSON"),
            (client.post("/classify", json={"inputs": "text", "colour": "red"}), 422, "`colour`"),
            (client.post("/classify", json={"inputs": "text", "explain": 0}), 422, "`explain`"),
            (client.post("/classify", json={"inputs": "text", "explain": 11}), 422, "--max-explain"),
            (client.post("/classify", content=b"x" * 80_000, headers={"content-type": "application/json"}), 413,
             "bytes"),
        ]
        for response, status, message in cases:
            assert response.status_code == status, response.text
            answer = response.json()
            assert set(answer) == {"error", "error_type"} and message in answer["error"]
            assert "Traceback" not in response.text
        assert client.post("/classify", json={"inputs": "a fine document"}).status_code == 200


def test_a_full_queue_answers_429(model_dir):
    app = create_app(model_dir, max_concurrent_requests=1)

    async def burst():
        service = app.state.service
        service.batcher.start()
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://serve") as client:
            responses = await asyncio.gather(*[client.post("/predict", json={"inputs": TEXTS[i]}) for i in range(6)])
        await service.batcher.stop()
        return responses

    responses = asyncio.run(burst())
    statuses = sorted(response.status_code for response in responses)
    assert 200 in statuses and 429 in statuses, statuses
    refused = next(response for response in responses if response.status_code == 429).json()
    assert refused["error_type"] == "Overloaded" and "--max-concurrent-requests" in refused["error"]


def test_the_api_key_is_required_compared_and_never_logged(model_dir, tmp_path, caplog):
    key_file = tmp_path / "key"
    key_file.write_text("s3cret-key\n")
    with caplog.at_level("DEBUG"), TestClient(create_app(model_dir, api_key_file=str(key_file))) as client:
        assert client.post("/classify", json={"inputs": "text"}).status_code == 401
        wrong = client.post("/classify", json={"inputs": "text"}, headers={"Authorization": "Bearer nope"})
        assert wrong.status_code == 401 and wrong.json()["error_type"] == "Validation"
        assert client.post("/classify", json={"inputs": "text"},
                           headers={"Authorization": "Bearer s3cret-key"}).status_code == 200
        assert client.post("/predict", json={"inputs": "text"}, headers={"X-API-Key": "s3cret-key"}).status_code == 200
        for open_path in ("/health", "/ping", "/metrics", "/", "/ui", "/info"):  # probes, scraping, the page
            assert client.get(open_path).status_code == 200
        for predict_path in ("/", "/invocations"):  # GET / is open; TEI's POST / predicts, behind the key
            assert client.post(predict_path, json={"inputs": "text"}).status_code == 401
        assert client.get("/info").json()["api_key_required"] is True
    assert "s3cret-key" not in caplog.text


def test_a_folder_that_cannot_be_served_is_refused_before_the_port_opens(tmp_path, capsys):
    with pytest.raises(ValueError, match="config.json|saved model"):
        create_app(str(tmp_path))
    assert main(["serve", str(tmp_path), "--port", "1"]) == 2
    assert "saved model folder" in capsys.readouterr().err


def test_health_info_and_metrics(client):
    client.post("/predict", json={"inputs": TEXTS[:2]})
    health = client.get("/health")
    assert health.status_code == 200 and health.content == b""  # TEI's health probe: an empty 200
    info = client.get("/info").json()
    assert info["labels"] == list(LABELS.values()) and info["reading_length"] == READS
    assert info["family"] == "contextualizer" and info["explainable"] and info["long"] == "truncate"
    assert info["max_client_batch_size"] == ServeSettings().max_client_batch_size
    metrics = client.get("/metrics").text
    assert 'hf_longdoc_requests_total{endpoint="/predict",status="200"}' in metrics
    for name in ("hf_longdoc_request_duration_seconds_bucket", "hf_longdoc_queue_depth", "hf_longdoc_batch_documents",
                 "hf_longdoc_input_ids_total"):
        assert name in metrics


# -- a real server: SIGTERM and the page ------------------------------------------------------------------------------
def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(model_dir, *flags):
    """`hf-longdoc serve` in a process of its own, once /health answers: (process, base url)."""
    port = free_port()
    command = [sys.executable, "-m", "hf_longdoc", "serve", model_dir, "--port", str(port), *flags]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               env=dict(os.environ, HF_HUB_OFFLINE="1"))
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}/health", timeout=1).status_code == 200:
                return process, url
        except httpx.HTTPError:
            time.sleep(0.2)
        if process.poll() is not None:
            raise AssertionError(process.stdout.read())
    process.kill()
    raise AssertionError("the server did not start")


@pytest.mark.slow
def test_sigterm_answers_every_accepted_request_then_exits(model_dir):
    """Requests in flight when SIGTERM arrives are answered (200), then the server exits as uvicorn exits on SIGTERM;
    a request sent after it is refused at the connection, never taken and dropped."""
    process, url = start_server(model_dir, "--long", "chunks")
    finished, errors = [], []

    def client(number):
        texts = [TEXTS[(number + i) % len(TEXTS)] * 6 for i in range(32)]  # long: read in many chunks each
        try:
            response = httpx.post(f"{url}/classify", json={"inputs": texts}, timeout=300)
            finished.append((time.monotonic(), response.status_code))
        except httpx.HTTPError as error:
            errors.append(repr(error))

    threads = [threading.Thread(target=client, args=(number,)) for number in range(12)]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + 120  # every request connected and queued, the first ones being read
    while time.monotonic() < deadline and queue_depth(url) < len(threads):
        time.sleep(0.05)
    signalled = time.monotonic()
    process.send_signal(signal.SIGTERM)
    for thread in threads:
        thread.join()
    output, _ = process.communicate(timeout=120)
    assert process.returncode in (0, -signal.SIGTERM), output  # uvicorn re-raises the signal once it has shut down
    assert not errors, errors
    assert [status for _, status in finished] == [200] * 12
    assert any(when > signalled for when, _ in finished), "no request was in flight at SIGTERM: make them longer"
    assert "Shutting down" in output and "Finished server process" in output
    try:
        httpx.post(f"{url}/classify", json={"inputs": "after"}, timeout=5)
        raise AssertionError("the server took a request after SIGTERM")
    except httpx.ConnectError:
        pass


def queue_depth(url):
    """The requests the server at `url` holds (its `hf_longdoc_queue_depth` metric)."""
    for line in httpx.get(f"{url}/metrics", timeout=10).text.splitlines():
        if line.startswith("hf_longdoc_queue_depth "):
            return float(line.split()[1])
    return 0


def browser():
    """A headless Chromium driven by Selenium, or a skip naming what is missing (never in CI)."""
    chromium, driver = shutil.which("chromium") or shutil.which("chromium-browser"), shutil.which("chromedriver")
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        chromium = None
    if not (chromium and driver):
        reason = "headless Chromium, chromedriver and selenium are needed (apt-get install chromium chromium-driver)"
        if os.environ.get("HF_LONGDOC_REQUIRE_BROWSER"):
            pytest.fail(reason)
        pytest.skip(reason)
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"):
        options.add_argument(flag)
    return webdriver.Chrome(service=Service(driver), options=options)


@pytest.mark.slow
def test_the_page_shows_the_label_and_highlights_the_deciding_passage(model_dir):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions
    from selenium.webdriver.support.ui import WebDriverWait

    driver = browser()
    process, url = start_server(model_dir)
    try:
        document = TEXTS[1]
        (expected,) = httpx.post(f"{url}/classify", json={"inputs": document, "explain": 3}, timeout=60).json()
        driver.get(url + "/ui")
        field = driver.find_element(By.ID, "document")
        driver.execute_script("arguments[0].value = arguments[1];", field, document)  # pasted
        driver.find_element(By.ID, "classify").click()
        WebDriverWait(driver, 60).until(expected_conditions.visibility_of_element_located((By.ID, "result")))
        assert driver.find_element(By.ID, "label").text == expected["label"]
        marks = [mark.text for mark in driver.find_elements(By.CSS_SELECTOR, "#highlighted mark")]
        assert marks and marks[0] in [passage["text"] for passage in expected["evidence"]]
        shown = driver.find_element(By.ID, "highlighted").text
        assert " ".join(shown.split()) == " ".join(document.split())  # the whole text, passages marked in place
        rows = driver.find_elements(By.CSS_SELECTOR, "#scores tbody tr")
        assert len(rows) == len(LABELS) and rows[0].text.startswith(expected["label"])
        # characters outside the BMP before the passages: the offsets count code points, JavaScript UTF-16 units
        astral = "😀🎉 𝔘𝔫𝔦𝔠𝔬𝔡𝔢 " * 5 + TEXTS[2]
        (expected,) = httpx.post(f"{url}/classify", json={"inputs": astral, "explain": 3}, timeout=60).json()
        driver.execute_script("arguments[0].value = arguments[1];", field, astral)
        driver.find_element(By.ID, "classify").click()
        WebDriverWait(driver, 60).until(lambda _: driver.find_element(By.ID, "highlighted").text.startswith("😀"))
        marks = [mark.text for mark in driver.find_elements(By.CSS_SELECTOR, "#highlighted mark")]
        shown, at = [], 0
        for passage in sorted(expected["evidence"], key=lambda passage: passage["start"]):
            if passage["start"] >= at:  # the page marks passages that do not overlap the one before
                shown.append(" ".join(passage["text"].split()))
                at = passage["end"]
        assert [" ".join(mark.split()) for mark in marks] == shown
    finally:
        driver.quit()
        process.terminate()
        process.wait(timeout=60)
