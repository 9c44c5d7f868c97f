"""`bertforge embed`, `export` and `serve` as users run them; SIGTERM drains in-flight requests."""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import numpy as np
import pytest

from bertforge.cli import main
from bertforge.serving.limits import ServeSettings

TEXTS = ["A man is playing a guitar.", "The new movie is awesome!"]
SRC = Path(__file__).resolve().parents[2] / "src"


@pytest.mark.slow
def test_embed_cli_matches_sentence_transformers(minilm_dir, st_model, tmp_path):
    source = tmp_path / "texts.txt"
    source.write_text("\n".join(TEXTS) + "\n", encoding="utf-8")
    assert main(["embed", "--model", str(minilm_dir), "--input", str(source), "--output", str(tmp_path / "e.npy"),
                 "--device", "cpu"]) == 0
    ref = st_model.encode(TEXTS)
    np.testing.assert_allclose(np.load(tmp_path / "e.npy"), ref, atol=1e-5)
    assert main(["embed", "--model", str(minilm_dir), "--text", TEXTS[0], "--no-normalize", "--pooling", "cls",
                 "--output", str(tmp_path / "e.jsonl"), "--device", "cpu"]) == 0
    row = json.loads((tmp_path / "e.jsonl").read_text().splitlines()[0])
    assert row["index"] == 0 and row["text"] == TEXTS[0] and len(row["embedding"]) == 384


def test_embed_cli_bad_input_is_one_line(minilm_dir, tmp_path, capsys):
    source = tmp_path / "texts.csv"
    source.write_text("text,label\nfine,1\n", encoding="utf-8")
    assert main(["embed", "--model", str(minilm_dir), "--input", str(source), "--output", str(tmp_path / "e.npy")]) == 1
    assert f"--input {source}: embed reads plain text, one text per line" in capsys.readouterr().err
    assert main(["embed", "--model", str(minilm_dir), "--text", "x", "--output", str(tmp_path / "e.txt")]) == 1
    err = capsys.readouterr().err
    assert "--output" in err and ".npy" in err and "Traceback" not in err


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_export_then_serve_onnx_and_sigterm_drains(sst2_folder, tmp_path):
    from bertforge.tasks.predictor import Predictor
    onnx_dir = tmp_path / "onnx"
    assert main(["export", "--model", str(sst2_folder), "--format", "onnx", "--output", str(onnx_dir)]) == 0
    port = _free_port()
    env = {**os.environ, "PYTHONPATH": str(SRC), "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "bertforge", "serve", "--model", str(onnx_dir), "--backend",
                             "onnx", "--port", str(port), "--max-wait-ms", "1500"], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while True:
            assert proc.poll() is None, proc.communicate()[1]
            try:
                if httpx.get(url + "/health", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:  # a guard against a hang, not a claim about speed
                raise TimeoutError("the server did not answer /health within 90 s")
            time.sleep(0.2)
        assert httpx.get(url + "/info", timeout=5).json()["backend"] == "onnx"
        texts = ["a gorgeous, witty film", "flat and dull"]
        answer = {}
        thread = threading.Thread(target=lambda: answer.update(
            r=httpx.post(url + "/predict", json={"inputs": texts}, timeout=60)))
        thread.start()
        waiting_in_batcher(url)  # --max-wait-ms 1500 holds it there
        proc.send_signal(signal.SIGTERM)
        thread.join(60)
        assert proc.wait(60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    r = answer["r"]
    assert r.status_code == 200, r.text
    expected = Predictor.load(sst2_folder).predict(texts)
    assert [x["label"] for x in r.json()] == [x["label"] for x in expected]
    np.testing.assert_allclose([x["score"] for x in r.json()], [x["score"] for x in expected], atol=1e-4)
    assert "Traceback" not in proc.stderr.read()


def waiting_in_batcher(url: str, seconds: float = 60) -> None:
    """Until the server's metrics show inputs queued for a batch (a hang guard, not a claim about speed)."""
    deadline = time.monotonic() + seconds
    while True:
        text = httpx.get(url + "/metrics", timeout=5).text
        queued = [line for line in text.splitlines() if line.startswith("bertforge_queued_inputs ")]
        if queued and float(queued[0].split()[1]) > 0:
            return
        if time.monotonic() > deadline:
            raise TimeoutError("the request never reached the batcher")
        time.sleep(0.05)


@pytest.mark.parametrize("flag, value, expected", [
    ("--max-wait-ms", "inf", "a number of at least 0"), ("--max-wait-ms", "nan", "a number of at least 0"),
    ("--max-wait-ms", "1e9", "expected at most 60,000, got '1e9'"), ("--port", "99999", "a port number from 1 to 65535"),
    ("--port", "-1", "a port number"), ("--body-timeout", "0", "greater than 0"),
    ("--idle-timeout", "inf", "greater than 0"), ("--graceful-timeout", "-3", "at least 0"),
    ("--max-input-chars", "0", "at least 1"), ("--max-concurrent-requests", "1.5", "whole number"),
])
def test_bad_server_flags_stop_at_parse_time_in_one_line(flag, value, expected, tmp_path, capsys):
    """Before any model is loaded: argparse's one line naming the flag, exit 2, no traceback."""
    with pytest.raises(SystemExit) as stopped:
        main(["serve", "--model", str(tmp_path / "never-read"), flag, value])
    assert stopped.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) <= 2 and flag in err[-1] and expected in err[-1], err  # usage line + the error
    assert "Traceback" not in "\n".join(err)


@pytest.mark.parametrize("key, expected", [("", "--api-key is empty"), ("  \t", "--api-key is empty"),
                                           (" secret", "--api-key starts or ends with whitespace")])
def test_a_key_no_request_can_pass_is_refused_before_the_model_loads(key, expected, tmp_path, capsys):
    """`--api-key "$KEY"` with KEY unset gives an empty key: a server that would answer 401 to every request.
    Refused in one line naming the flag, status 1, before the (here unreadable) model folder is opened."""
    not_a_model = tmp_path / "not-a-model"
    not_a_model.mkdir()
    assert main(["serve", "--model", str(not_a_model), "--api-key", key]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("bertforge serve: error: " + expected) and "\n" not in err, err
    with pytest.raises(ValueError, match="--api-key is empty"):
        ServeSettings(api_key="")
