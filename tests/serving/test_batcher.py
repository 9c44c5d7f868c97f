"""The dynamic batcher, the settings and the pooling declaration, without a model (fast)."""
from __future__ import annotations

import asyncio
import json
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from bertforge.serving.batcher import Batcher
from bertforge.serving.embeddings import Pooling
from bertforge.serving.limits import ServeSettings
from bertforge.serving.metrics import ServerMetrics


def run_with_batcher(run_batch, requests, max_batch_tokens=100, max_wait_ms=50):
    """Submit `requests` ([(payloads, token counts)]) concurrently; return their results."""
    async def main():
        with ThreadPoolExecutor(1) as pool:
            batcher = Batcher("t", run_batch, pool, max_batch_tokens, max_wait_ms, ServerMetrics())
            batcher.start()
            try:
                return await asyncio.wait_for(asyncio.gather(*(batcher.submit(p, n) for p, n in requests),
                                                             return_exceptions=True), 10)
            finally:
                await batcher.stop()
    return asyncio.run(main())


def test_concurrent_requests_share_length_sorted_batches_within_the_budget():
    calls, threads = [], set()

    def run_batch(payloads):
        calls.append(list(payloads))
        threads.add(threading.current_thread().name)
        return [p.upper() for p in payloads]

    lengths = {"a": 10, "bb": 30, "ccc": 20, "dddd": 40, "e": 5}
    requests = [([p], [n]) for p, n in lengths.items()]
    results = run_with_batcher(run_batch, requests, max_batch_tokens=100)
    assert results == [[p.upper()] for p in lengths]                # each request gets its own answers
    assert sorted(p for call in calls for p in call) == sorted(lengths)
    assert len(calls) < len(lengths)                                 # shared model calls
    for call in calls:
        n = [lengths[p] for p in call]
        assert n == sorted(n, reverse=True)                          # longest first
        assert max(n) * len(n) <= 100 or len(call) == 1              # padded size within the budget
    assert threading.current_thread().name not in threads           # never on the event loop's thread


def test_an_input_over_the_budget_runs_alone():
    calls = []
    results = run_with_batcher(lambda p: calls.append(p) or list(p), [(["big"], [500]), (["small"], [3])],
                               max_batch_tokens=100)
    assert results == [["big"], ["small"]] and ["big"] in calls


def test_a_failing_batch_fails_its_requests_and_the_batcher_keeps_going():
    def run_batch(payloads):
        if "bad" in payloads:
            raise RuntimeError("model failed")
        return payloads

    async def main():
        with ThreadPoolExecutor(1) as pool:
            batcher = Batcher("t", run_batch, pool, 1000, 0, ServerMetrics())
            batcher.start()
            with pytest.raises(RuntimeError, match="model failed"):
                await batcher.submit(["bad"], [1])
            assert await batcher.submit(["good"], [1]) == ["good"]
            await batcher.stop()
    asyncio.run(main())


@pytest.mark.parametrize("field, value", [("max_batch_tokens", 0), ("max_client_batch_size", 0),
                                          ("max_concurrent_requests", -1), ("payload_limit", 0),
                                          ("max_wait_ms", -1.0)])
def test_settings_name_the_bad_flag(field, value):
    with pytest.raises(ValueError, match="--" + field.replace("_", "-")):
        ServeSettings(**{field: value})


def _st_folder(tmp_path, pooling: dict, normalize: bool):
    modules = [{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
               {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}]
    if normalize:
        modules.append({"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"})
    (tmp_path / "modules.json").write_text(json.dumps(modules))
    (tmp_path / "1_Pooling").mkdir()
    (tmp_path / "1_Pooling" / "config.json").write_text(json.dumps(pooling))
    return tmp_path


def test_pooling_declarations(tmp_path):
    assert Pooling.from_folder(tmp_path) == Pooling("mean", False, None)  # a plain folder
    folder = _st_folder(tmp_path, {"pooling_mode_cls_token": True, "pooling_mode_mean_tokens": False}, False)
    assert Pooling.from_folder(folder) == Pooling("cls", False, None)


@pytest.mark.parametrize("declared, mode", [("max", "max"), (["cls"], "cls")])
def test_pooling_declared_by_name_as_sentence_transformers_6_writes_it(tmp_path, declared, mode):
    folder = _st_folder(tmp_path, {"embedding_dimension": 8, "pooling_mode": declared, "include_prompt": True}, True)
    assert Pooling.from_folder(folder) == Pooling(mode, True, None)
    (folder / "1_Pooling" / "config.json").write_text(json.dumps({"pooling_mode": ["mean", "lasttoken"]}))
    with pytest.raises(ValueError, match=r"1_Pooling/config.json.*mean, pooling_mode 'lasttoken'"):
        Pooling.from_folder(folder)


def test_unsupported_pooling_names_the_file(tmp_path):
    folder = _st_folder(tmp_path, {"pooling_mode_mean_sqrt_len_tokens": True}, True)
    with pytest.raises(ValueError, match=r"1_Pooling/config.json.*pooling_mode_mean_sqrt_len_tokens"):
        Pooling.from_folder(folder)
