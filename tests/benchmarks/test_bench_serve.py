"""bench_serve's `ratio`: the sides' order rotates round by round, and each round's ratio pairs its own ceiling."""
import os

import pytest

import bench_serve  # noqa: E402


@pytest.mark.parametrize("sides", [["ceiling", "served"], ["ceiling", "served", "baseline"]])
def test_every_side_goes_first_and_last_equally_often(sides):
    orders = [bench_serve.round_order(sides, r) for r in range(2 * len(sides))]
    assert all(sorted(order) == sorted(sides) for order in orders)
    for side in sides:
        assert [order[0] for order in orders].count(side) == 2
        assert [order[-1] for order in orders].count(side) == 2
    if len(sides) == 2:
        assert orders[0] != orders[1]  # two sides alternate


def test_ratios_pair_each_round_with_its_own_ceiling():
    served, ceiling = [50.0, 90.0, 60.0], [100.0, 100.0, 120.0]
    report = bench_serve.paired_ratios(served, ceiling)
    assert report["per_round"] == [0.5, 0.9, 0.5]
    assert (report["median"], report["min"], report["max"]) == (0.5, 0.5, 0.9)
    # the ratio of the medians (60 / 100) is not what is reported
    with pytest.raises(ValueError):
        bench_serve.paired_ratios(served, ceiling[:2])


def test_thread_cpu_seconds_agree_with_the_threads_own_clock_and_the_busiest_thread_is_the_model():
    import threading
    import time
    ids, own, measured = [], [], threading.Event()

    def burn():
        ids.append(threading.get_native_id())
        start = time.thread_time()
        while time.thread_time() - start < 0.3:
            pass
        own.append(time.thread_time())
        measured.wait(10)  # alive until /proc has been read

    before = bench_serve.thread_cpu_seconds(os.getpid())
    worker = threading.Thread(target=burn)
    worker.start()
    while not own:  # read /proc while the thread is still alive
        time.sleep(0.01)
    after = bench_serve.thread_cpu_seconds(os.getpid())
    measured.set()
    worker.join()
    assert abs(after[ids[0]] - before.get(ids[0], 0.0) - own[0]) < 0.05  # clock ticks are 10 ms
    split = bench_serve.cpu_split(before, after, client_seconds=0.1, requests=10)
    others = sum(after.values()) - sum(before.get(t, 0.0) for t in after) - (after[ids[0]] - before.get(ids[0], 0.0))
    assert split["server_model_ms"] == pytest.approx(100 * (after[ids[0]] - before.get(ids[0], 0.0)), abs=1e-3)
    assert split["server_other_ms"] == pytest.approx(100 * others, abs=1e-3)
    assert split["client_ms"] == pytest.approx(10.0)


def test_the_second_core_bound_is_the_rate_client_and_loop_can_share_one_core():
    bound = bench_serve.feeding_bound({"client_ms": 4.0, "server_other_ms": 6.0, "server_model_ms": 7.0},
                                      ceiling_ms=8.0)
    assert bound == {"per_s": 100.0, "of_ceiling": 0.8}  # 10 ms per request on the shared core; 125/s alone


def test_the_raw_client_sends_every_request_on_keep_alive_connections_and_counts_each_status():
    import asyncio
    import json

    seen: list[str] = []
    connections = 0

    async def handle(reader, writer):  # a keep-alive HTTP/1.1 server: every third request refused
        nonlocal connections
        connections += 1
        while True:
            try:
                head = await reader.readuntil(b"\r\n\r\n")
            except asyncio.IncompleteReadError:  # the client closed the connection
                return
            length = int(next(h for h in head.split(b"\r\n") if h.lower().startswith(b"content-length")).split(b":")[1])
            seen.append(json.loads(await reader.readexactly(length))["inputs"][0])
            status, body = (429, b'{"error":"busy"}') if len(seen) % 3 == 0 else (200, b'{"embeddings":[[0.5]]}')
            writer.write(f"HTTP/1.1 {status} X\r\nContent-Length: {len(body)}\r\n\r\n".encode() + body)
            await writer.drain()

    async def main():
        server = await asyncio.start_server(handle, bench_serve.HOST, 0)
        port = server.sockets[0].getsockname()[1]
        try:
            return await bench_serve.load_raw(f"http://{bench_serve.HOST}:{port}", ["a", "b", "c"], 4, 30, 60)
        finally:
            server.close()

    try:
        row = asyncio.run(main())
    except OSError as err:
        pytest.skip(f"no loopback sockets here: {err}")
    assert row["requests"] == 30 and row["concurrency"] == 4
    assert len(seen) == 31 and connections == 4  # the warm-up, then 30 on the same 4 connections
    assert sorted(seen[1:]) == sorted(["a", "b", "c"][i % 3] for i in range(30))  # request i carries text i % 3
    assert row["statuses"] == {200: 20, 429: 10}


def test_the_ratio_records_replace_the_earlier_measurement_and_render_its_table(tmp_path):
    import argparse

    from bertforge.results_store import Record, read_store, render, write_records
    stale = Record(id="bench-serve/ratio-idle/raw-client/served-model-alone-per-round-5", value=0.5, unit="",
                   what="an earlier round", command="c", cpu="cpu", threads=1, date="2026-01-01", seeds=5, data="d")
    kept = Record(id="bench-serve/load/kept", value=1.0, unit="", what="another table's", command="c", cpu="cpu",
                  threads=1, date="2026-01-01", seeds=1, data="d")
    write_records("bench-serve", [stale, kept], tmp_path)
    report = {"rounds": {"ceiling": [100.0, 90.0, 110.0], "bertforge serve": [95.0, 90.0, 88.0]},
              "paired_ratio": {"bertforge serve": bench_serve.paired_ratios([95.0, 90.0, 88.0], [100.0, 90.0, 110.0])},
              "cpu_ms_per_request": {"bertforge serve": {"client_ms": 0.3, "server_model_ms": 11.4,
                                                         "server_other_ms": 1.1}},
              "ceiling_ms_per_sentence": 10.0}
    args = argparse.Namespace(concurrency=32, requests=256, rounds=3, client="raw", records=str(tmp_path))
    bench_serve.write_ratio_records(report, args)
    store = read_store(tmp_path)
    assert stale.id not in store.records and kept.id in store.records
    median = store.records["bench-serve/ratio-idle/raw-client/median"]
    assert median.value == 0.95 and median.spread == (0.8, 1.0) and median.seeds == 3
    assert store.records["bench-serve/ratio-idle/model-alone/requests-s"].value == 100.0
    row = store.tables["bench-serve-ratio-idle"]["rows"][1]
    assert row[2] == "0.95, 1.00, 0.80" and render(store, row[3].strip("*{}")) == "0.95 (0.80-1.00)"
    assert render(store, store.tables["bench-serve-ratio-idle"]["rows"][0][5].split("}")[0][1:]) == "10.00 ms"
