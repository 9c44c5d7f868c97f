"""Hostile clients beside healthy ones (benchmarks/hostile_clients.py at CI scale, a few seconds), the connection
bounds of `server.py`, and the bound on what /tokenize answers. Traffic goes to 127.0.0.1 only; every loop is
bounded in count and time."""
from __future__ import annotations

import asyncio
import signal
import socket
import threading
import time

import httpx
import pytest

from bertforge.serving.app import create_app
from bertforge.serving.limits import ServeSettings
from bertforge.serving.served_model import ServedModel

from needs import require_module

from .conftest import running, serve_process

import hostile_clients

pytestmark = pytest.mark.slow
HEALTHY = ["A man is playing a guitar.", "The new movie is awesome!", "Paris is the capital of France.",
           "dull", "Stocks fell sharply on Monday after the report.", "She reads a book in the garden."]
# Fewer slots than slow uploads: if a slow upload held a slot, healthy clients would be answered 429.
SOAK_FLAGS = {"--max-concurrent-requests": 6, "--body-timeout": 1, "--idle-timeout": 2, "--payload-limit": 200_000,
              "--max-input-chars": 2_000, "--max-client-batch-size": 16}


@pytest.fixture(scope="module")
def encoder_model(minilm_dir):
    return ServedModel(minilm_dir, device="cpu", precision="fp32")


def test_hostile_clients_get_4xx_and_healthy_ones_their_answers(minilm_dir, st_model):
    """`bertforge serve` in its own process, as users run it; at the end SIGTERM stops it cleanly."""
    expected = dict(zip(HEALTHY, st_model.encode(HEALTHY).tolist()))  # the reference: sentence-transformers
    scale = hostile_clients.Scale(seconds=3.0, healthy_clients=4, healthy_requests=40, slow_heads=8, silent=30,
                                  slow_bodies=10, bad_clients=1, long_text_clients=1)
    flags = [str(x) for flag in SOAK_FLAGS.items() for x in flag]
    with serve_process(minilm_dir, *flags) as (url, proc):
        report = asyncio.run(hostile_clients.soak(
            url, expected, scale, max_input_chars=SOAK_FLAGS["--max-input-chars"],
            max_client_batch_size=SOAK_FLAGS["--max-client-batch-size"], payload_limit=SOAK_FLAGS["--payload-limit"],
            idle_timeout=SOAK_FLAGS["--idle-timeout"]))
        assert httpx.get(url + "/health", timeout=10).json() == {"status": "ok"}
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(60) == 0
        log = proc.stderr.read()
    statuses = {kind: dict(counts) for kind, counts in report.statuses.items()}
    assert report.server_errors == 0, statuses
    assert statuses["healthy"] == {"200": scale.healthy_requests} and report.healthy_wrong == 0
    for name, _ in hostile_clients.bad_requests(SOAK_FLAGS["--max-input-chars"], SOAK_FLAGS["--max-client-batch-size"]):
        assert all(s.isdigit() and 400 <= int(s) < 500 for s in statuses[f"bad: {name}"]), (name, statuses)
    assert set(statuses["slow body"]) == {"408"} and sum(statuses["slow body"].values()) >= scale.slow_bodies
    assert set(statuses["chunked past the limit"]) == {"413"}
    for path in ("/tokenize", "/embed", "/similarity"):  # ~290 tokens each: more than MiniLM's 256
        assert set(statuses[f"long texts {path}"]) == {"413"}
    assert statuses["slow head"] == {"closed": report.closed_by_server["slow head"]}  # every one, each round
    assert report.closed_by_server["slow head"] >= scale.slow_heads
    assert report.closed_by_server["silent"] == scale.silent
    assert "Traceback" not in log and "failed" not in log, log[-3000:]


def test_a_connection_without_a_whole_request_head_is_closed_and_others_are_served(encoder_model):
    settings = ServeSettings(idle_timeout=0.5)
    with running(create_app(encoder_model, settings)) as url:
        port = int(url.rsplit(":", 1)[1])
        silent = socket.create_connection(("127.0.0.1", port))
        dripping = socket.create_connection(("127.0.0.1", port))
        dripping.sendall(b"POST /embed HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        for s in (silent, dripping):
            s.settimeout(30)
        assert httpx.post(url + "/embed", json={"inputs": ["still served"]}, timeout=30).status_code == 200
        assert silent.recv(1) == b"" and dripping.recv(1) == b""  # closed by the server, nothing answered
        with httpx.Client(timeout=30) as client:  # a keep-alive connection serves requests one after another
            assert [client.post(url + "/embed", json={"inputs": [f"t{i}"]}).status_code for i in range(3)] == [200] * 3
        silent.close()
        dripping.close()


def test_garbage_http_is_answered_in_the_servers_error_format(encoder_model):
    with running(create_app(encoder_model)) as url:
        port = int(url.rsplit(":", 1)[1])
        with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
            s.sendall(b"\x16\x03\x01 not http\r\n\r\n")
            answer = b""
            while chunk := s.recv(4096):
                answer += chunk
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 400") and b"application/json" in head
    assert set(httpx.Response(400, content=body).json()) == {"error", "type", "request_id"}


def test_tokenize_answers_at_most_the_models_length_per_text(encoder_model, minilm_dir):
    """The largest /tokenize request the bounds allow (64 texts of --max-input-chars) answers 64 rows of at most
    256 tokens, equal to transformers' tokenizer cut at 256; without --auto-truncate it is a 413."""
    transformers = require_module("transformers")
    tok = transformers.AutoTokenizer.from_pretrained(str(minilm_dir))
    text = ("tokenizers split words into pieces " * 600)[:20_000]
    with running(create_app(encoder_model, ServeSettings(auto_truncate=True))) as url:
        r = httpx.post(url + "/tokenize", json={"inputs": [text] * 64}, timeout=300)
        assert r.status_code == 200, r.text
        rows = r.json()
    assert len(rows) == 64
    assert all([t["id"] for t in row] == tok(text, truncation=True, max_length=256)["input_ids"] for row in rows)
    with running(create_app(encoder_model)) as url:
        r = httpx.post(url + "/tokenize", json={"inputs": ["ok", text]}, timeout=300)
    assert r.status_code == 413 and r.json()["error"].startswith("inputs[1] has")


def test_a_long_request_is_tokenized_off_the_event_loop(encoder_model):
    """While a large request is being counted, /health is answered: it does not wait for the tokenizer."""
    text = ("a long request keeps the tokenizer busy " * 600)[:20_000]
    order: list[str] = []
    with running(create_app(encoder_model, ServeSettings(auto_truncate=True))) as url:
        def big():
            httpx.post(url + "/tokenize", json={"inputs": [text] * 64}, timeout=300)
            order.append("tokenize")
        thread = threading.Thread(target=big)
        thread.start()
        while not encoder_model.requests.tokenizer._engine.lock.locked() and thread.is_alive():
            time.sleep(0.001)  # until the tokenizer thread holds the request tokenizer
        assert httpx.get(url + "/health", timeout=60).status_code == 200
        order.append("health")
        thread.join(300)
    assert order == ["health", "tokenize"]
