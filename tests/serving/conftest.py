"""Serving fixtures: predictor folders built from the real MiniLM weights (their heads freshly initialised)."""
from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from needs import require_module

TOKENIZER_FILES = ("vocab.txt", "tokenizer_config.json", "special_tokens_map.json")
TASKS = {"sequence_classification": ("sst2", ["negative", "positive"], 128),
         "question_answering": ("squad", None, 384),
         "token_classification": ("conll2003", ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"], 128),
         "regression": ("stsb", None, 128),
         "multiple_choice": ("swag", ["0", "1", "2", "3"], 128)}


def make_task_folder(minilm_dir: Path, target: Path, head: str) -> Path:
    """A predictor folder: MiniLM's encoder with a seeded random `head` (parity tests need no training)."""
    import torch

    from bertforge.model.auto import model_class_for
    from bertforge.tasks.heads import HEADS
    task, labels, length = TASKS[head]
    torch.manual_seed(0)
    extra = {"id2label": dict(enumerate(labels))} if labels else {}
    if head == "regression":  # one output, as `finetune` makes it
        extra = {"id2label": {0: "score"}, "problem_type": "regression"}
    model = model_class_for(minilm_dir, HEADS[head].model_role).from_pretrained(minilm_dir, **extra)
    model.save_pretrained(target)
    for name in TOKENIZER_FILES:
        shutil.copy2(minilm_dir / name, target / name)
    task_json = {"task": task, "head": head, "labels": labels, "max_seq_length": length}
    (target / "task.json").write_text(json.dumps(task_json), encoding="utf-8")
    return target


@pytest.fixture(scope="session")
def sst2_folder(minilm_dir, tmp_path_factory) -> Path:
    return make_task_folder(minilm_dir, tmp_path_factory.mktemp("sst2-predictor"), "sequence_classification")


@pytest.fixture(scope="session")
def mlm_folder(minilm_dir, tmp_path_factory) -> Path:
    """MiniLM's encoder with a seeded random MLM head, saved in the HF layout (transformers loads it too)."""
    import torch

    from bertforge.model.auto import AutoModelForMaskedLM
    target = tmp_path_factory.mktemp("mlm")
    torch.manual_seed(0)
    AutoModelForMaskedLM.from_pretrained(minilm_dir).save_pretrained(target)
    for name in TOKENIZER_FILES:
        shutil.copy2(minilm_dir / name, target / name)
    return target


@contextlib.contextmanager
def running(app, timeout: float = 30.0):
    """A real uvicorn server for `app` on a free loopback port, in a thread; yields its base URL."""
    import uvicorn

    from bertforge.serving.server import server_config
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(server_config(app, graceful_timeout=5))  # the connection bounds `bertforge serve` has
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + timeout
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the test server did not start")
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout)
        sock.close()


@contextlib.contextmanager
def serve_process(folder: Path, *flags: str, timeout: float = 120.0):
    """`bertforge serve` in its own process on a free loopback port; yields (base URL, process). On leaving, the
    process gets SIGTERM (and SIGKILL if it has not ended 60 s later)."""
    import httpx
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    src = Path(__file__).resolve().parents[2] / "src"
    env = {**os.environ, "PYTHONPATH": str(src), "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "bertforge", "serve", "--model", str(folder), "--device", "cpu",
                             "--port", str(port), *flags], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + timeout
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"the server exited: {proc.communicate()[1][-2000:]}")
            try:
                if httpx.get(url + "/health", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("the server did not come up")
            time.sleep(0.2)
        yield url, proc
    finally:
        if proc.poll() is None:
            proc.terminate()
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


@pytest.fixture(scope="session")
def st_model(minilm_dir):
    """The reference: sentence-transformers' own pipeline on the same folder."""
    st = require_module("sentence_transformers")
    return st.SentenceTransformer(str(minilm_dir), device="cpu")
