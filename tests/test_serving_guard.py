"""What `hf-longdoc serve` lets in and how it answers what it refuses: the body limit counted on the bytes received,
the `Host` check against DNS rebinding, no path of the server's disk on an open endpoint, the API key file's rules,
the app mounted in another, explain asked of the model, and the errors of a body that is not JSON text."""

import asyncio
import json
import os
import time

import httpx
import pytest
import torch
from fastapi import FastAPI
from fastapi.testclient import TestClient

from hf_longdoc import FAMILIES
from hf_longdoc.cli import main
from hf_longdoc.data import fit_wordpiece_tokenizer
from hf_longdoc.serving import ServeSettings, create_app
from test_serving import TEXTS, save_contextualizer
from tiny_bert import save_tiny_bert

JSON = {"content-type": "application/json"}


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return save_contextualizer(tmp_path_factory.mktemp("guarded"))


def asgi_post(app, path, *, host="127.0.0.1", **request):
    """One request through httpx's ASGI transport: no lifespan runs, as for an app mounted in another, and the body is
    streamed to the app as the client sends it."""

    async def send():
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url=f"http://{host}") as client:
            return await client.post(path, **request)

    return asyncio.run(send())


# -- the body limit counts the bytes received --------------------------------------------------------------------------
def test_a_chunked_body_stops_being_read_past_the_limit(model_dir):
    app = create_app(model_dir, max_client_batch_size=2, max_input_chars=2000)
    limit = app.state.service.max_body
    sent = []

    async def chunked():  # no Content-Length: httpx sends it chunked
        yield b'{"inputs": "a b"'
        for _ in range(10_000):
            sent.append(1)
            yield b" " * 1000
        yield b"}"

    response = asgi_post(app, "/predict", content=chunked(), headers=JSON)
    assert response.status_code == 413 and response.json()["error_type"] == "Validation"
    assert f"more than {limit} bytes" in response.json()["error"]
    assert len(sent) * 1000 < limit + 2000  # read up to the limit, not the 10 MB the client had to send
    async def small_body():
        yield b'{"inputs": '
        yield b'"a b"}'

    small = asgi_post(app, "/predict", content=small_body(), headers=JSON)
    assert small.status_code == 200  # a chunked body within the limit is read whole


@pytest.mark.parametrize("body", [
    lambda n: b'{"inputs": "' + b"x" * n + b'"}',  # one huge document
    lambda n: json.dumps({"inputs": ["word"] * (n // 8)}).encode(),  # many small ones
    lambda n: b'{"inputs": "a"' + b" " * n + b"}",  # whitespace
])
def test_the_limit_holds_whatever_the_json_holds(model_dir, body):
    with TestClient(create_app(model_dir, max_client_batch_size=2, max_input_chars=2000)) as client:
        limit = client.app.state.service.max_body
        response = client.post("/predict", content=body(limit + 10), headers=JSON)
    assert response.status_code == 413 and "bytes" in response.json()["error"]


def test_a_document_within_the_limits_sent_as_json_escapes_is_read(model_dir):
    """Python's json.dumps escapes every non-ASCII character (6 bytes a character of the BMP): a document within
    --max-input-chars is read; emoji (12 bytes each) past the body limit are told to send UTF-8."""
    with TestClient(create_app(model_dir, max_client_batch_size=2, max_input_chars=20_000)) as client:
        cjk = client.post("/predict", content=json.dumps({"inputs": ["漢字" * 10_000, "é" * 20_000]}), headers=JSON)
        assert cjk.status_code == 200, cjk.text
        emoji = client.post("/predict", content=json.dumps({"inputs": ["😀" * 19_990] * 2}), headers=JSON)
        assert emoji.status_code == 413 and "UTF-8" in emoji.json()["error"]
        as_utf8 = json.dumps({"inputs": ["😀" * 19_990] * 2}, ensure_ascii=False).encode()
        assert client.post("/predict", content=as_utf8, headers=JSON).status_code == 200


# -- no path of the server's disk --------------------------------------------------------------------------------------
def test_no_open_path_discloses_a_path_of_the_disk(model_dir, tmp_path):
    key = tmp_path / "key"
    key.write_text("k3y")
    key.chmod(0o600)
    parent = os.path.dirname(os.path.abspath(model_dir))
    with TestClient(create_app(model_dir, api_key_file=str(key))) as client:
        client.post("/predict", json={"inputs": "text"}, headers={"X-API-Key": "k3y"})
        answers = {path: client.get(path).text for path in ("/info", "/health", "/metrics", "/ui")}
        assert client.get("/info").json()["model_id"] == os.path.basename(model_dir)
    for path, text in answers.items():
        assert parent not in text and str(tmp_path) not in text, path
    with TestClient(create_app(model_dir, served_model_name="news-topics")) as client:
        assert client.get("/info").json()["model_id"] == "news-topics"


# -- the Host ----------------------------------------------------------------------------------------------------------
def test_the_server_refuses_a_host_it_does_not_serve(model_dir):
    app = create_app(model_dir, allowed_hosts=())  # as `hf-longdoc serve` builds it: the loopback names and --host
    for host in ("evil.example", "evil.example:8080", "127.0.0.1.evil.example", "10.1.2.3"):
        refused = asgi_post(app, "/predict", json={"inputs": "text"}, headers={"host": host})
        assert refused.status_code == 400 and "--allowed-hosts" in refused.json()["error"], host
    for host in ("127.0.0.1:8080", "localhost", "LOCALHOST:80", "[::1]:8080"):
        assert asgi_post(app, "/predict", json={"inputs": "text"}, headers={"host": host}).status_code == 200, host
    added = create_app(model_dir, allowed_hosts=("clf.internal",))
    assert asgi_post(added, "/predict", json={"inputs": "text"}, headers={"host": "clf.internal:80"}).status_code == 200
    assert asgi_post(added, "/predict", json={"inputs": "t"}, headers={"host": "evil.example"}).status_code == 400
    anyone = create_app(model_dir, allowed_hosts=("*",))
    assert asgi_post(anyone, "/predict", json={"inputs": "text"}, headers={"host": "evil.example"}).status_code == 200
    every_interface = create_app(model_dir, host="0.0.0.0", allowed_hosts=())
    assert asgi_post(every_interface, "/predict", json={"inputs": "t"}, headers={"host": "10.1.2.3"}).status_code == 200
    assert asgi_post(every_interface, "/predict", json={"inputs": "t"}, headers={"host": "evil.example"}
                     ).status_code == 400


def test_the_command_checks_hosts_and_a_mounted_app_leaves_them_to_its_parent(model_dir, monkeypatch):
    built = {}

    def run(app, **options):
        built["app"] = app

    monkeypatch.setattr("uvicorn.run", run)
    assert main(["serve", model_dir, "--port", "18099"]) == 0
    assert asgi_post(built["app"], "/predict", json={"inputs": "t"}, headers={"host": "evil.example"}
                     ).status_code == 400
    parent = FastAPI()
    parent.mount("/clf", create_app(model_dir))
    with TestClient(parent, base_url="http://any.example") as client:
        assert client.post("/clf/predict", json={"inputs": "text"}).status_code == 200


@pytest.mark.parametrize("flags, message", [
    (["--port", "70000"], "--port"),
    (["--port", "0"], "--port"),
    (["--host", "999.1.1.1"], "--host"),
])
def test_a_port_or_host_no_server_can_take_is_refused_before_the_model_loads(model_dir, flags, message, capsys,
                                                                             monkeypatch):
    monkeypatch.setattr("hf_longdoc.inference.reader.load_model", lambda *a, **k: pytest.fail("the model loaded"))
    assert main(["serve", model_dir, *flags]) == 2
    error = capsys.readouterr().err
    assert message in error and "Traceback" not in error


# -- the API key file --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("key, kind", [
    ("line-one\nline-two\n", "line break"),
    ("tab\there", "control character"),
    ("clé-secrète-ü", "non-ASCII"),
])
def test_a_key_a_client_cannot_send_is_refused_at_start_up(model_dir, tmp_path, key, kind):
    path = tmp_path / "key"
    path.write_text(key, encoding="utf-8")
    path.chmod(0o600)
    with pytest.raises(ValueError, match=f"--api-key-file.*{kind}"):
        create_app(model_dir, api_key_file=str(path))


def test_a_key_file_others_can_read_is_warned_about(model_dir, tmp_path, caplog):
    path = tmp_path / "key"
    path.write_text("s3cret\n")
    path.chmod(0o644)
    with caplog.at_level("WARNING"):
        ServeSettings(api_key_file=str(path)).api_key()
    assert "other users" in caplog.text and "chmod 600" in caplog.text and "s3cret" not in caplog.text
    caplog.clear()
    path.chmod(0o600)
    ServeSettings(api_key_file=str(path)).api_key()
    assert "other users" not in caplog.text


# -- mounted in an app of one's own ------------------------------------------------------------------------------------
def test_a_mounted_app_answers_with_its_open_paths_and_metrics_under_the_prefix(model_dir, tmp_path):
    key = tmp_path / "key"
    key.write_text("k3y")
    key.chmod(0o600)
    parent = FastAPI()
    parent.mount("/clf", create_app(model_dir, api_key_file=str(key)))
    # no `with`: the parent's lifespan does not run the mounted app's, as under uvicorn
    client = TestClient(parent)
    for path in ("/clf/health", "/clf/info", "/clf/metrics", "/clf/"):
        assert client.get(path).status_code == 200, path
    answer = client.post("/clf/classify", json={"inputs": TEXTS[0], "explain": 1}, headers={"X-API-Key": "k3y"})
    assert answer.status_code == 200 and answer.json()[0]["evidence"]
    assert client.post("/clf/predict", json={"inputs": TEXTS[0]}).status_code == 401
    metrics = client.get("/clf/metrics").text
    assert 'hf_longdoc_requests_total{endpoint="/classify",status="200"}' in metrics
    assert 'endpoint="other"' not in metrics


def test_health_is_503_once_nothing_can_be_answered(model_dir):
    app = create_app(model_dir)
    with TestClient(app) as client:
        assert client.get("/health").status_code == 200
    asyncio.run(app.state.service.batcher.stop())
    client = TestClient(app)
    down = client.get("/health")
    assert down.status_code == 503 and set(down.json()) == {"error", "error_type"}
    assert client.post("/predict", json={"inputs": "text"}).status_code == 503


# -- explain asked of the model and of the server's settings -----------------------------------------------------------
@pytest.fixture(scope="module")
def segment_models(tmp_path_factory):
    """Two tiny segment LMs: `variant="cat"` (Eq. 2: no weight per segment) and the sentence-packing `att`."""
    documents = ["The club won the cup final. The minister spoke. Shares fell on Monday."] * 10
    tokenizer = fit_wordpiece_tokenizer(documents, vocab_size=120, model_max_length=64)
    backbone = save_tiny_bert(tmp_path_factory.mktemp("backbone"), tokenizer, max_positions=64)
    folders = {}
    for name, settings in (("cat", dict(variant="cat")), ("packed", dict(sentence_packing=True))):
        model, saved_tokenizer = FAMILIES["segment_lm"].from_backbone(backbone, None, 200, num_labels=2,
                                                                      segment_length=24, **settings)
        saved_tokenizer.model_max_length = FAMILIES["segment_lm"].reading_length(model.config)
        folders[name] = str(tmp_path_factory.mktemp(name))
        model.save_pretrained(folders[name])
        saved_tokenizer.save_pretrained(folders[name])
    return folders


def test_a_model_that_cannot_explain_says_why_on_info_and_classify(segment_models, model_dir):
    for app, reason in ((create_app(segment_models["cat"]), "variant 'cat'"),
                        (create_app(model_dir, long="chunks"), "--long chunks")):
        with TestClient(app) as client:
            info = client.get("/info").json()
            assert info["explainable"] is False and reason in info["explain_refusal"]
            refused = client.post("/classify", json={"inputs": "The club won the cup final.", "explain": 2})
            assert refused.status_code == 422 and reason in refused.json()["error"]
            assert client.post("/classify", json={"inputs": "The club won the cup final."}).status_code == 200
    with TestClient(create_app(model_dir)) as client:
        assert client.get("/info").json()["explain_refusal"] is None


def test_coverage_counts_the_documents_tokens_not_the_packings_fill(segment_models):
    from transformers import AutoTokenizer

    from hf_longdoc.modeling.segment_lm.tokenization_segment import SegmentLMTokenizer

    folder = segment_models["packed"]
    plain = AutoTokenizer.from_pretrained(folder)
    assert isinstance(plain, SegmentLMTokenizer) and plain.sentence_packing
    text = " ".join(["The club won the cup final.", "The minister spoke.", "Shares fell on Monday."] * 4)
    with TestClient(create_app(folder)) as client:
        short, long = client.post("/classify", json={"inputs": ["Shares fell on Monday.", text]}).json()
    for answer, document in ((short, "Shares fell on Monday."), (long, text)):
        real = len(plain.backend_tokenizer.encode(document, add_special_tokens=False).ids)
        assert answer["coverage"]["document_ids"] == real
        assert answer["coverage"]["ids_read"] <= real
    assert not short["coverage"]["cut"] and short["coverage"]["ids_read"] == short["coverage"]["document_ids"]


# -- what is not a document of JSON text -------------------------------------------------------------------------------
@pytest.mark.parametrize("path, body", [
    ("/predict", '{"inputs": "abc \\ud800 def"}'),
    ("/predict", '{"inputs": ["fine", "abc \\udc00"]}'),
    ("/classify", '{"inputs": "abc \\ud800 def"}'),
    ("/classify", '{"inputs": "abc \\ud800 def", "explain": 1}'),
])
def test_a_lone_surrogate_is_422_naming_the_document_and_the_character(client_app, path, body):
    response = client_app.post(path, content=body, headers=JSON)
    assert response.status_code == 422, response.text
    assert "unpaired surrogate" in response.json()["error"] and "U+D" in response.json()["error"]
    assert "`inputs[" in response.json()["error"]


@pytest.fixture(scope="module")
def client_app(model_dir):
    with TestClient(create_app(model_dir)) as client:
        yield client


@pytest.mark.parametrize("content, headers, status, message", [
    (b'{"inputs": "caf\xe9"}', JSON, 422, "not valid UTF-8 JSON"),
    (b'{"inputs": ' + b"[" * 1000 + b"]" * 1000 + b"}", JSON, 422, "nests too deeply"),
    (b'{"inputs": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", JSON, 422, "nests too deeply"),
    (b'{"inputs": "abc"}', {"content-type": "application/x-www-form-urlencoded"}, 415, "application/json"),
    (b'{"inputs": "abc"}', {"content-type": "text/plain"}, 415, "Content-Type: application/json"),
    (b'{"inputs": [[]]}', JSON, 422, "`inputs[0]` is an empty list"),
])
def test_a_body_that_is_not_a_json_document_gets_the_error_shape(client_app, content, headers, status, message):
    response = client_app.post("/predict", content=content, headers=headers)
    assert response.status_code == status, response.text
    assert set(response.json()) == {"error", "error_type"} and message in response.json()["error"]


def test_routing_errors_are_in_the_error_shape(client_app):
    for method, path, status in (("GET", "/predict", 405), ("PUT", "/classify", 405), ("DELETE", "/health", 405),
                                 ("GET", "/nope", 404)):
        response = client_app.request(method, path)
        assert response.status_code == status and set(response.json()) == {"error", "error_type"}, (method, path)


def test_the_page_slices_code_points_not_utf16_units():
    """The page's `highlighted` marks text by code point (Array.from), as the server's offsets count."""
    from hf_longdoc.serving import app

    with open(app.PAGE, encoding="utf-8") as f:
        page = f.read()
    body = page[page.index("function highlighted"): page.index("$(\"classify\")")]
    assert "Array.from(text)" in body and "text.slice" not in body
    assert "info.explain_refusal" in page


def test_a_large_request_does_not_hold_a_small_one_behind_its_tokenization(model_dir):
    """Requests are tokenized on several threads: a small request sent while a large one is being tokenized is
    answered long before the large one (on one tokenizing thread it waited for the large one's tokenization)."""
    app = create_app(model_dir)
    large = (" ".join(TEXTS) * 10)[:1000] * 1000  # a million characters

    async def both():
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1", timeout=300) as client:
            took = {}

            async def post(name, inputs, delay):
                await asyncio.sleep(delay)
                started = time.perf_counter()
                response = await client.post("/predict", json={"inputs": inputs})
                took[name] = (response.status_code, time.perf_counter() - started)

            await asyncio.gather(post("large", [large] * 2, 0), post("small", "football", 0.3))
        await app.state.service.batcher.stop()
        return took

    took = asyncio.run(both())
    assert took["large"][0] == took["small"][0] == 200
    assert took["small"][1] < 0.25 * took["large"][1], took


def test_torch_threads_are_restored_when_the_server_stops(model_dir):
    before = torch.get_num_threads()
    with TestClient(create_app(model_dir)) as client:
        client.post("/predict", json={"inputs": "text"})
    assert torch.get_num_threads() == before


def test_a_request_cut_by_the_shutdown_gets_503_in_the_error_shape(model_dir):
    """uvicorn cancels what is still running when --shutdown-timeout passes: the request is answered 503, in JSON."""
    app = create_app(model_dir)
    started = []

    async def never_answered(*arguments):
        started.append(True)
        await asyncio.sleep(3600)

    app.state.service.batcher.submit = never_answered
    body = json.dumps({"inputs": "text"}).encode()
    scope = {"type": "http", "method": "POST", "path": "/predict", "raw_path": b"/predict", "root_path": "",
             "scheme": "http", "query_string": b"", "server": ("127.0.0.1", 8080), "client": ("127.0.0.1", 5000),
             "headers": [(b"host", b"127.0.0.1"), (b"content-type", b"application/json"),
                         (b"content-length", str(len(body)).encode())],
             "http_version": "1.1", "asgi": {"version": "3.0"}}
    sent = []

    async def cut():
        messages = iter([{"type": "http.request", "body": body, "more_body": False}])

        async def receive():
            return next(messages, None) or await asyncio.sleep(3600)

        async def send(message):
            sent.append(message)

        task = asyncio.get_running_loop().create_task(app(scope, receive, send))
        while not started:
            await asyncio.sleep(0.01)
        task.cancel(msg="Task cancelled, timeout graceful shutdown exceeded")  # what uvicorn does
        await asyncio.gather(task, return_exceptions=True)

    asyncio.run(cut())
    assert sent[0]["type"] == "http.response.start" and sent[0]["status"] == 503
    answer = json.loads(b"".join(message.get("body", b"") for message in sent[1:]))
    assert answer["error_type"] == "Unhealthy" and "--shutdown-timeout" in answer["error"]
