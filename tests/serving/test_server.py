"""A real server on a loopback port and a real HTTP client: every endpoint and status code.

Traffic goes only to 127.0.0.1; every loop is bounded in count and time.
"""
from __future__ import annotations

import asyncio
import re

import httpx
import numpy as np
import pytest

from bertforge.serving.app import create_app
from bertforge.serving.limits import ServeSettings
from bertforge.serving.served_model import ServedModel

from .conftest import running

from needs import require_module

pytestmark = pytest.mark.slow
KEY = "test-key"
AUTH = {"Authorization": f"Bearer {KEY}"}
TEXTS = ["A man is playing a guitar.", "The new movie is awesome!", "dull", "Paris is the capital of France."]


@pytest.fixture(scope="module")
def encoder_model(minilm_dir):
    return ServedModel(minilm_dir, device="cpu", precision="fp32")


@pytest.fixture(scope="module")
def encoder_url(encoder_model):
    settings = ServeSettings(api_key=KEY, payload_limit=20_000, max_client_batch_size=40, max_wait_ms=30,
                             max_batch_tokens=4096)
    with running(create_app(encoder_model, settings)) as url:
        yield url


def post(url: str, path: str, payload, headers=AUTH, **kw) -> httpx.Response:
    return httpx.post(url + path, json=payload, headers=headers, timeout=60, **kw)


def metric(text: str, name: str, **labels: str) -> float:
    """The value of one Prometheus sample in a /metrics page."""
    want = ",".join(f'{k}="{v}"' for k, v in labels.items())
    pattern = re.escape(name) + (r"\{" + re.escape(want) + r"\}" if want else r"(\{[^}]*\})?") + r" (\S+)"
    values = [float(m.group(m.lastindex)) for m in re.finditer(pattern, text)]
    return sum(values)


# ---- 200s: answers match the references ----------------------------------------------------------------------
def test_openai_embeddings_match_sentence_transformers(encoder_url, st_model, minilm_dir):
    r = post(encoder_url, "/v1/embeddings", {"input": TEXTS, "model": "minilm"})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["object"] == "list" and body["model"] == "minilm"
    assert [d["index"] for d in body["data"]] == list(range(len(TEXTS)))
    ours = np.array([d["embedding"] for d in body["data"]])
    np.testing.assert_allclose(ours, st_model.encode(TEXTS), atol=1e-5)
    transformers = require_module("transformers")
    tok = transformers.AutoTokenizer.from_pretrained(str(minilm_dir))
    assert body["usage"]["prompt_tokens"] == body["usage"]["total_tokens"] == sum(
        len(ids) for ids in tok(TEXTS)["input_ids"])
    single = post(encoder_url, "/v1/embeddings", {"input": "dull"}).json()
    np.testing.assert_allclose(single["data"][0]["embedding"], st_model.encode(["dull"])[0], atol=1e-5)


def test_tei_embed_normalize_flag(encoder_url, st_model):
    r = post(encoder_url, "/embed", {"inputs": TEXTS[:2], "normalize": True})
    assert r.status_code == 200
    np.testing.assert_allclose(np.array(r.json()), st_model.encode(TEXTS[:2]), atol=1e-5)
    raw = np.array(post(encoder_url, "/embed", {"inputs": TEXTS[:2], "normalize": False}).json())
    ref_raw = st_model[1](st_model[0](st_model.tokenize(TEXTS[:2])))["sentence_embedding"].detach().numpy()
    np.testing.assert_allclose(raw, ref_raw, atol=1e-5)
    assert np.linalg.norm(raw, axis=1).min() > 1.5  # really not unit length


def test_tokenize_health_info_metrics(encoder_url, minilm_dir):
    transformers = require_module("transformers")
    tok = transformers.AutoTokenizer.from_pretrained(str(minilm_dir))
    r = post(encoder_url, "/tokenize", {"inputs": ["Hello, world!"]})
    assert r.status_code == 200
    assert [t["id"] for t in r.json()[0]] == tok("Hello, world!")["input_ids"]
    assert [t["text"] for t in r.json()[0]] == tok.convert_ids_to_tokens(tok("Hello, world!")["input_ids"])
    assert httpx.get(encoder_url + "/health", timeout=10).json() == {"status": "ok"}  # no key needed
    info = httpx.get(encoder_url + "/info", headers=AUTH, timeout=10).json()
    assert info["kind"] == "encoder" and info["embedding_dimension"] == 384 and info["max_input_length"] == 256
    page = httpx.get(encoder_url + "/metrics", headers=AUTH, timeout=10).text
    assert metric(page, "bertforge_requests_total", endpoint="/tokenize", status="200") >= 1
    assert metric(page, "bertforge_request_duration_seconds_count", endpoint="/tokenize") >= 1
    assert "bertforge_queue_depth" in page


# ---- refusals -----------------------------------------------------------------------------------------------
def test_401_without_or_with_a_wrong_key(encoder_url):
    for headers in ({}, {"Authorization": "Bearer nope"}, {"Authorization": KEY}):
        r = post(encoder_url, "/embed", {"inputs": ["x"]}, headers=headers)
        assert r.status_code == 401 and "Authorization" in r.json()["error"]


def test_413_payload_and_input_length(encoder_url):
    r = post(encoder_url, "/embed", {"inputs": ["word " * 5000]})
    assert r.status_code == 413 and "--payload-limit" in r.json()["error"]

    def chunked():  # no Content-Length: the limit is enforced while the body streams in
        yield b'{"inputs": ["'
        yield b"word " * 5000
        yield b'"]}'
    r = httpx.post(encoder_url + "/embed", content=chunked(), headers={**AUTH, "content-type": "application/json"},
                   timeout=30)
    assert r.status_code == 413 and "--payload-limit" in r.json()["error"]
    r = post(encoder_url, "/embed", {"inputs": ["short", "word " * 300]})
    assert r.status_code == 413 and "inputs[1]" in r.json()["error"] and "256" in r.json()["error"]


@pytest.mark.parametrize("payload, field", [
    (b"{not json", "body"), (b"[1, 2]", "body"), ({"inputs": []}, "inputs"), ({"inputs": 3}, "inputs"),
    ({"inputs": ["ok", 5]}, "inputs[1]"), ({"inputs": ["ok", "  "]}, "inputs[1]"), ({}, "inputs"),
    ({"inputs": ["x"] * 41}, "--max-client-batch-size"), ({"inputs": ["x"], "normalize": "yes"}, "normalize")])
def test_422_names_the_field(encoder_url, payload, field):
    if isinstance(payload, bytes):
        r = httpx.post(encoder_url + "/embed", content=payload, headers={**AUTH, "content-type": "application/json"},
                       timeout=30)
    else:
        r = post(encoder_url, "/embed", payload)
    assert r.status_code == 422, r.text
    assert r.json()["error"].startswith(field) or field in r.json()["error"]
    assert "Traceback" not in r.text


def test_404_for_an_endpoint_this_model_does_not_serve(encoder_url):
    r = post(encoder_url, "/predict", {"inputs": ["x"]})
    assert r.status_code == 404 and "/embed" in r.json()["error"] and "(an encoder folder)" in r.json()["error"]


# ---- batching across concurrent requests -----------------------------------------------------------------------
def test_concurrent_requests_are_batched_and_answers_unchanged(encoder_url, st_model):
    texts = [f"sentence number {i} about {'cats' if i % 2 else 'the weather today'}" for i in range(24)]
    before = httpx.get(encoder_url + "/metrics", headers=AUTH, timeout=10).text

    async def fire():
        async with httpx.AsyncClient(timeout=60, headers=AUTH) as client:
            return await asyncio.gather(*(client.post(encoder_url + "/embed", json={"inputs": [t]}) for t in texts))

    responses = asyncio.run(asyncio.wait_for(fire(), 120))
    assert all(r.status_code == 200 for r in responses)
    np.testing.assert_allclose(np.array([r.json()[0] for r in responses]), st_model.encode(texts), atol=1e-5)
    after = httpx.get(encoder_url + "/metrics", headers=AUTH, timeout=10).text
    calls = metric(after, "bertforge_batch_size_count", kind="embed") - metric(before, "bertforge_batch_size_count",
                                                                                kind="embed")
    inputs = metric(after, "bertforge_batch_size_sum", kind="embed") - metric(before, "bertforge_batch_size_sum",
                                                                               kind="embed")
    assert inputs == len(texts)
    assert calls < len(texts), "24 concurrent one-input requests should share model calls"


# ---- 429 and 500 -----------------------------------------------------------------------------------------------
def test_429_when_too_many_requests_wait(encoder_model):
    settings = ServeSettings(max_concurrent_requests=2, max_wait_ms=400)
    with running(create_app(encoder_model, settings)) as url:
        before = httpx.get(url + "/metrics", timeout=10).text
        async def fire():
            async with httpx.AsyncClient(timeout=60) as client:
                return await asyncio.gather(*(client.post(url + "/embed", json={"inputs": [f"text {i}"]})
                                              for i in range(10)))
        responses = asyncio.run(asyncio.wait_for(fire(), 60))
        codes = sorted(r.status_code for r in responses)
        assert codes.count(200) >= 2 and codes.count(429) >= 1 and set(codes) <= {200, 429}
        refused = [r for r in responses if r.status_code == 429]
        assert all("--max-concurrent-requests" in r.json()["error"] for r in refused)
        after = httpx.get(url + "/metrics", timeout=10).text
        batched = metric(after, "bertforge_batch_size_sum", kind="embed") - metric(before, "bertforge_batch_size_sum",
                                                                                   kind="embed")
        assert batched == codes.count(200), "a refused request is answered at admission: it never joins a batch"


def test_predictor_predict_and_500_without_traceback(sst2_folder, monkeypatch):
    from bertforge.tasks.predictor import Predictor
    served = ServedModel(sst2_folder, device="cpu", precision="fp32")
    inputs = ["a gorgeous, witty film", ["the plot", "is thin"], {"text": "flat and dull"}]
    expected = Predictor.load(sst2_folder).predict(["a gorgeous, witty film", ("the plot", "is thin"),
                                                    "flat and dull"])
    with running(create_app(served)) as url:
        r = post(url, "/predict", {"inputs": inputs}, headers={})
        assert r.status_code == 200, r.text
        for ours, ref in zip(r.json(), expected):
            assert ours["label"] == ref["label"]
            assert abs(ours["score"] - ref["score"]) < 1e-5
        assert post(url, "/predict", {"inputs": [{"question": "x"}]}, headers={}).status_code == 422

        def broken(*args, **kwargs):
            raise RuntimeError("secret internal detail")
        monkeypatch.setattr(served.predictor.model, "forward", broken)
        r = post(url, "/predict", {"inputs": ["anything"]}, headers={})
        assert r.status_code == 500
        body = r.json()
        assert body["request_id"] == r.headers["x-request-id"] and body["request_id"] in body["error"]
        assert "secret" not in r.text and "Traceback" not in r.text
        monkeypatch.undo()
        assert post(url, "/predict", {"inputs": ["still serving"]}, headers={}).status_code == 200
        page = httpx.get(url + "/metrics", timeout=10).text
        assert metric(page, "bertforge_requests_total", endpoint="/predict", status="500") == 1


def test_fill_mask_matches_transformers(mlm_folder):
    transformers = require_module("transformers")
    served = ServedModel(mlm_folder, device="cpu", precision="fp32")
    pipe = transformers.pipeline("fill-mask", model=str(mlm_folder), device="cpu", top_k=3)
    text = "paris is the [MASK] of france."
    with running(create_app(served)) as url:
        r = post(url, "/fill-mask", {"inputs": [text], "top_k": 3}, headers={})
        assert r.status_code == 200, r.text
        assert post(url, "/fill-mask", {"inputs": ["no mask here"]}, headers={}).status_code == 422
        emb = post(url, "/embed", {"inputs": ["an mlm folder embeds too"]}, headers={})
        assert emb.status_code == 200 and len(emb.json()[0]) == 384
    (mask,) = r.json()[0]
    ref = pipe(text)
    assert [t["token"] for t in mask["top"]] == [x["token_str"] for x in ref]
    np.testing.assert_allclose([t["score"] for t in mask["top"]], [x["score"] for x in ref], atol=1e-5)


def test_auto_truncate_embeds_long_inputs_like_sentence_transformers(encoder_model, st_model):
    long_text = "the quick brown fox jumps over the lazy dog " * 40  # ~360 tokens > 256
    with running(create_app(encoder_model, ServeSettings(auto_truncate=True))) as url:
        r = post(url, "/v1/embeddings", {"input": [long_text]}, headers={})
    assert r.status_code == 200, r.text
    np.testing.assert_allclose(r.json()["data"][0]["embedding"], st_model.encode([long_text])[0], atol=1e-5)
    assert r.json()["usage"]["prompt_tokens"] == 256


def test_a_server_that_owns_its_process_freezes_its_heap_after_warm_up(encoder_model):
    """`bertforge serve` keeps what lives at start-up out of the garbage collector (its first full pass
    stalled the first burst of requests); an app embedded in another process leaves the collector alone."""
    import gc
    gc.unfreeze()
    with running(create_app(encoder_model)) as url:
        assert httpx.get(url + "/health", timeout=10).status_code == 200
        assert gc.get_freeze_count() == 0
    try:
        with running(create_app(encoder_model, own_process=True)) as url:
            assert post(url, "/embed", {"inputs": ["warm"]}, headers={}).status_code == 200
            assert gc.get_freeze_count() > 1000  # the model, the modules, the app
    finally:
        gc.unfreeze()


def test_router_errors_use_the_servers_format(encoder_url):
    """An unknown path, a wrong method and a malformed body are answered in bertforge's one error format, never
    FastAPI's `{"detail": ...}`."""
    for r, status, kind, says in [
            (httpx.get(encoder_url + "/nope", headers=AUTH, timeout=10), 404, "not_found", "/v1/embeddings"),
            (httpx.post(encoder_url + "/health", headers=AUTH, timeout=10), 405, "method_not_allowed", "GET"),
            (httpx.get(encoder_url + "/embed", headers=AUTH, timeout=10), 405, "method_not_allowed", "use POST"),
            (httpx.post(encoder_url + "/embed", content=b'{"inputs": ["x"], "n": ' + b"9" * 5000 + b"}", headers=AUTH,
                        timeout=10), 422, "validation", "body:")]:
        assert r.status_code == status, r.text
        body = r.json()
        assert set(body) == {"error", "type", "request_id"} and body["type"] == kind and says in body["error"]
        assert body["request_id"] == r.headers["x-request-id"]
    assert httpx.get(encoder_url + "/embed", headers=AUTH, timeout=10).headers["allow"] == "POST"
