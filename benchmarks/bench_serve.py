"""Load test of `bertforge serve` (torch and onnx backends) against a plain FastAPI + transformers pipeline
server that handles one request at a time, on the same model and the same requests. Loopback only, bounded.

    python benchmarks/bench_serve.py load --model MODEL_DIR [--concurrency 1,8,32,128] [--requests 400]
    python benchmarks/bench_serve.py int8 --model FINETUNED_SST2_DIR [--threads 1] [--records DIR]  # fp32 vs int8 ONNX
    python benchmarks/bench_serve.py hostile --model MODEL_DIR [--seconds 60]  # healthy clients beside hostile ones
    python benchmarks/bench_serve.py ratio --model MODEL_DIR [--concurrency 32]   # served / model alone, interleaved

`load` starts every server at once (an idle one costs no CPU) and measures them in turn, interleaved: for each
round, each concurrency level, each server. It reports the median over rounds of requests/s and p50/p99
latency, and the model alone (`embed_batch` on batches of 32, no HTTP): the most any server can answer.
Then the soak: the torch server offered 70 % of its saturation throughput (its best requests/s) at a fixed
arrival rate for --soak-seconds, every failure counted; then the overload check: 10x the server's
--max-concurrent-requests at once; the excess must be answered 429 within 100 ms, the server must still
answer /health, and its memory must stay bounded. Requests are single SST-2 dev sentences
(../shared/data/glue/SST-2/dev.tsv next to the checkout) sent to POST /embed.

`hostile` starts `bertforge serve` (torch, default limits), measures healthy clients alone, then beside the hostile
clients of hostile_clients.py (slowloris heads, silent connections, crawling and oversized bodies, malformed and
maximal requests) for --seconds, and reports the healthy clients' p50/p99 in both phases, every status each kind of
client got (no 5xx allowed), and the server's RSS before, at its peak and after.
"""
from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import multiprocessing
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from contextlib import contextmanager
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SST2_DEV = REPO.parent / "shared" / "data" / "glue" / "SST-2" / "dev.tsv"
HOST = "127.0.0.1"  # never anything else


# ---- hostile clients beside healthy ones ------------------------------------------------------------------------
class RssSampler:
    """The RSS of a process every `every` seconds, in a thread, while in its `with` block."""

    def __init__(self, pid: int, every: float = 0.25) -> None:
        self.pid, self.every, self.samples = pid, every, []
        self._stop = threading.Event()

    def __enter__(self) -> RssSampler:
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.wait(self.every):
            self.samples.append(rss_mib(self.pid))

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()


def cmd_hostile(args) -> dict:
    import hostile_clients
    import httpx
    texts = read_texts(Path(args.data))[:64]
    flags = ["--max-concurrent-requests", str(args.max_concurrent_requests)]
    with server("torch", args.model, flags, threads=args.threads) as (url, proc):
        expected = {t: httpx.post(url + "/embed", json={"inputs": [t]}, timeout=60).json()[0] for t in texts}
        info = httpx.get(url + "/info", timeout=10).json()
        limits = {"max_input_chars": info["max_input_chars"], "max_client_batch_size": info["max_client_batch_size"],
                  "payload_limit": info["payload_limit"], "idle_timeout": info["idle_timeout"]}
        quiet_scale = hostile_clients.Scale(seconds=args.quiet_seconds, healthy_clients=args.healthy_clients,
                                            healthy_requests=10**6, healthy_for_seconds=True, slow_heads=0, silent=0,
                                            slow_bodies=0, bad_clients=0, long_text_clients=0, max_rounds=0)
        attack = hostile_clients.Scale(seconds=args.seconds, healthy_clients=args.healthy_clients,
                                       healthy_requests=10**6, healthy_for_seconds=True, slow_heads=args.slow_heads,
                                       silent=args.silent, slow_bodies=args.slow_bodies, bad_clients=args.bad_clients,
                                       long_text_clients=args.long_text_clients)
        rss_before = rss_mib(proc.pid)
        with RssSampler(proc.pid) as rss:
            quiet = asyncio.run(hostile_clients.soak(url, expected, quiet_scale, **limits))
            # the attackers in a process of their own: the healthy clients' latency is the server's, not the
            # load generator's
            context = multiprocessing.get_context("spawn")
            queue = context.Queue()
            attacker = context.Process(target=hostile_clients.attack_in_process, args=(url, attack, limits, queue))
            attacker.start()
            healthy = asyncio.run(hostile_clients.soak(url, expected, quiet_scale.__class__(
                **{**quiet_scale.__dict__, "seconds": args.seconds}), **limits))
            hostile = queue.get(timeout=args.seconds + 900)
            attacker.join(60)
        alive = httpx.get(url + "/health", timeout=10).status_code == 200
        rss_after = rss_mib(proc.pid)

    def latency(report) -> dict:
        values = report.healthy_latencies
        return {"requests": len(values), "p50_ms": round(1000 * percentile(values, 50), 1),
                "p99_ms": round(1000 * percentile(values, 99), 1), "wrong_answers": report.healthy_wrong,
                "statuses": dict(report.statuses.get("healthy", {}))}
    result = {"quiet": latency(quiet), "hostile": latency(healthy), "seconds": args.seconds,
              "hostile_statuses": {k: dict(v) for k, v in hostile.statuses.items() if k != "healthy"},
              "closed_by_server": dict(hostile.closed_by_server),
              "server_errors": hostile.server_errors + healthy.server_errors + quiet.server_errors,
              "healthy_after": alive, "rss_mib": {"before": round(rss_before, 1), "peak": round(max(rss.samples), 1),
                                                  "after": round(rss_after, 1)}}
    print(json.dumps(result, indent=1), flush=True)
    return result


# ---- the baseline: FastAPI + a transformers pipeline, one request at a time ---------------------------------------
def baseline_app(model_dir: str):
    """POST /embed {"inputs": [...]} -> mean-pooled unit vectors, computed under a lock (no batching)."""
    import numpy as np
    from fastapi import FastAPI
    from transformers import pipeline
    pipe = pipeline("feature-extraction", model=model_dir, device="cpu")
    lock = threading.Lock()
    app = FastAPI()

    @app.post("/embed")
    def embed(payload: dict):  # sync: FastAPI runs it in its thread pool; the lock serializes the model
        with lock:
            out = []
            for text in payload["inputs"]:
                hidden = np.asarray(pipe(text, truncation=True, max_length=256))[0]
                vector = hidden.mean(0)
                out.append((vector / np.linalg.norm(vector)).tolist())
        return out

    @app.get("/health")
    def health():
        return {"status": "ok"}

    return app


def run_baseline(model_dir: str, port: int) -> None:
    import uvicorn
    uvicorn.run(baseline_app(model_dir), host=HOST, port=port, log_level="warning")


# ---- servers as subprocesses --------------------------------------------------------------------------------------
def free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


@contextmanager
def server(kind: str, model_dir: str, extra: list[str] = (), threads: int = 1, src: Path = REPO / "src"):
    import httpx
    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(src), "OMP_NUM_THREADS": str(threads)}
    if kind == "baseline":
        cmd = [sys.executable, __file__, "baseline-server", "--model", model_dir, "--port", str(port)]
    else:
        cmd = [sys.executable, "-m", "bertforge", "serve", "--model", model_dir, "--port", str(port),
               "--host", HOST, "--device", "cpu", "--backend", kind, *extra]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    url = f"http://{HOST}:{port}"
    try:
        deadline = time.monotonic() + 180
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"{kind} server exited: {proc.stderr.read()[-2000:]}")
            try:
                if httpx.get(url + "/health", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"{kind} server did not start within 180 s")
            time.sleep(0.25)
        yield url, proc
    finally:
        proc.terminate()
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


def rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status", encoding="ascii") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


# ---- load generation ----------------------------------------------------------------------------------------------
def percentile(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, round(q / 100 * (len(values) - 1)))] if values else float("nan")


async def load(url: str, texts: list[str], concurrency: int, requests: int, time_limit: float) -> dict:
    import httpx
    latencies: list[float] = []
    statuses: dict[int, int] = {}
    counter = iter(range(requests))
    stop_at = time.monotonic() + time_limit

    async def worker(client):
        for i in counter:
            if time.monotonic() > stop_at:
                return
            start = time.perf_counter()
            try:
                r = await client.post(url + "/embed", json={"inputs": [texts[i % len(texts)]]})
            except httpx.TransportError as err:  # counted, not fatal: the report shows it
                statuses[type(err).__name__] = statuses.get(type(err).__name__, 0) + 1
                continue
            latencies.append(time.perf_counter() - start)
            statuses[r.status_code] = statuses.get(r.status_code, 0) + 1

    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(timeout=120, limits=limits) as client:
        await client.post(url + "/embed", json={"inputs": [texts[0]]})  # warm-up
        start = time.perf_counter()
        await asyncio.gather(*(worker(client) for _ in range(concurrency)))
        wall = time.perf_counter() - start
    return {"concurrency": concurrency, "requests": len(latencies), "rps": round(len(latencies) / wall, 2),
            "p50_ms": round(1000 * percentile(latencies, 50), 1), "p99_ms": round(1000 * percentile(latencies, 99), 1),
            "statuses": statuses}


async def _http_post(reader, writer, path: str, body: bytes) -> int:
    """One HTTP/1.1 request on an open keep-alive connection; returns the status."""
    writer.write(f"POST {path} HTTP/1.1\r\nHost: {HOST}\r\nContent-Type: application/json\r\n"
                 f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
    await writer.drain()
    head = await reader.readuntil(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length"))
    await reader.readexactly(length)
    return status


async def load_raw(url: str, texts: list[str], concurrency: int, requests: int, time_limit: float) -> dict:
    """`load` with a lighter client: HTTP/1.1 written and read on `concurrency` open keep-alive connections by
    hand, no client library. On a machine where the client shares a core with the server, httpx's per-request
    CPU is taken from the server; this client takes a fraction of it."""
    port = int(url.rsplit(":", 1)[1])
    latencies: list[float] = []
    statuses: dict[int | str, int] = {}
    counter = iter(range(requests))
    stop_at = time.monotonic() + time_limit
    bodies = [json.dumps({"inputs": [t]}).encode() for t in texts]

    async def worker(reader, writer):
        for i in counter:
            if time.monotonic() > stop_at:
                return
            start = time.perf_counter()
            status = await _http_post(reader, writer, "/embed", bodies[i % len(bodies)])
            latencies.append(time.perf_counter() - start)
            statuses[status] = statuses.get(status, 0) + 1

    connections = [await asyncio.open_connection(HOST, port) for _ in range(concurrency)]
    try:
        await _http_post(*connections[0], "/embed", bodies[0])  # warm-up
        start = time.perf_counter()
        await asyncio.gather(*(worker(r, w) for r, w in connections))
        wall = time.perf_counter() - start
    finally:
        for _, writer in connections:
            writer.close()
    return {"concurrency": concurrency, "requests": len(latencies), "rps": round(len(latencies) / wall, 2),
            "p50_ms": round(1000 * percentile(latencies, 50), 1), "p99_ms": round(1000 * percentile(latencies, 99), 1),
            "statuses": statuses}


async def overload(url: str, texts: list[str], limit: int, factor: int = 10) -> dict:
    """factor x limit requests at once on already-open connections (so connection setup is not timed): the
    excess must come back 429 fast."""
    port = int(url.rsplit(":", 1)[1])
    n = factor * limit
    connections = [await asyncio.open_connection(HOST, port) for _ in range(n)]
    results: list[tuple[int, float]] = []

    async def one(i, reader, writer):
        body = json.dumps({"inputs": [texts[i % len(texts)]]}).encode()
        start = time.perf_counter()
        status = await _http_post(reader, writer, "/embed", body)
        results.append((status, time.perf_counter() - start))

    try:
        await asyncio.wait_for(asyncio.gather(*(one(i, r, w) for i, (r, w) in enumerate(connections))), 300)
    finally:
        for _, writer in connections:
            writer.close()
    refused = [t for s, t in results if s == 429]
    return {"sent": n, "ok": sum(s == 200 for s, _ in results), "refused_429": len(refused),
            "other": sorted({s for s, _ in results} - {200, 429}),
            "refused_p50_ms": round(1000 * percentile(refused, 50), 1) if refused else None,
            "refused_p99_ms": round(1000 * percentile(refused, 99), 1) if refused else None,
            "refused_max_ms": round(1000 * max(refused), 1) if refused else None}


async def soak(url: str, texts: list[str], rate: float, seconds: float) -> dict:
    """Open loop: one request every 1/rate seconds for `seconds`, each on its own task, whatever the answers
    take; counts every status that is not 200 (and every transport error) as a failure."""
    import httpx
    latencies: list[float] = []
    statuses: dict[str, int] = {}

    async def one(client, i):
        start = time.perf_counter()
        try:
            r = await client.post(url + "/embed", json={"inputs": [texts[i % len(texts)]]})
            key = str(r.status_code)
        except httpx.HTTPError as err:
            key = type(err).__name__
        latencies.append(time.perf_counter() - start)
        statuses[key] = statuses.get(key, 0) + 1

    limits = httpx.Limits(max_connections=1000, max_keepalive_connections=200)
    async with httpx.AsyncClient(timeout=60, limits=limits) as client:
        tasks, start, i = [], time.perf_counter(), 0
        while (now := time.perf_counter() - start) < seconds:
            while i < rate * now:  # catch up if the client itself fell behind
                tasks.append(asyncio.create_task(one(client, i)))
                i += 1
            await asyncio.sleep(min(0.005, 1 / rate))
        await asyncio.gather(*tasks)
    return {"offered_rps": round(rate, 1), "seconds": seconds, "sent": i,
            "failed": sum(n for k, n in statuses.items() if k != "200"), "statuses": statuses,
            "p50_ms": round(1000 * percentile(latencies, 50), 1), "p99_ms": round(1000 * percentile(latencies, 99), 1)}


def read_texts(path: Path, limit: int = 872) -> list[str]:
    if not path.is_file():
        raise SystemExit(f"{path}: SST-2 dev not found (expected ../shared/data next to the checkout)")
    rows = path.read_text(encoding="utf-8").splitlines()[1:]
    return [row.split("\t")[0] for row in rows if row.strip()][:limit]


def median_row(rows: list[dict]) -> dict:
    import statistics
    out = {k: statistics.median(r[k] for r in rows) for k in ("rps", "p50_ms", "p99_ms")}
    return {"concurrency": rows[0]["concurrency"], **out, "rounds": len(rows),
            "errors": sum(n for r in rows for code, n in r["statuses"].items() if code != 200)}


def cmd_load(args) -> dict:
    from bertforge.serving.onnx_export import export_onnx
    texts = read_texts(Path(args.data))
    levels = [int(c) for c in args.concurrency.split(",")]
    kinds = args.servers.split(",")
    report: dict = {"model": Path(args.model).name, "requests_per_level": args.requests, "threads": args.threads,
                    "rounds": args.rounds, "results": {}}
    with tempfile.TemporaryDirectory() as tmp, contextlib.ExitStack() as stack:
        onnx_dir = args.onnx or str(Path(tmp) / "onnx")
        if not args.onnx and "onnx" in kinds:
            export_onnx(args.model, onnx_dir)
        urls = {kind: stack.enter_context(server(kind, onnx_dir if kind == "onnx" else args.model,
                                                 threads=args.threads))[0] for kind in kinds}
        runs: dict[str, dict[int, list[dict]]] = {kind: {c: [] for c in levels} for kind in kinds}
        for r in range(args.rounds):
            for c in levels:
                for kind in kinds:  # interleaved: the servers take turns at every level of every round
                    row = asyncio.run(load(urls[kind], texts, c, args.requests, args.time_limit))
                    runs[kind][c].append(row)
                    print(f"round {r + 1} {kind:9s} c={c:<4d} {row['rps']:8.1f} req/s  p50 {row['p50_ms']:8.1f} ms  "
                          f"p99 {row['p99_ms']:8.1f} ms  {row['statuses']}", flush=True)
        report["results"] = {kind: [median_row(runs[kind][c]) for c in levels] for kind in kinds}
        report["model_alone_per_s"] = round(measure_ceiling(args.model, args.threads, 32), 1)
        print(f"the model alone (embed_batch, batches of 32, {args.threads} thread(s)): "
              f"{report['model_alone_per_s']} sentences/s", flush=True)
        for kind, rows in report["results"].items():
            print(f"median {kind:9s} " + "  ".join(f"c={r['concurrency']}: {r['rps']:.1f} req/s p99 {r['p99_ms']:.0f} ms"
                                                   for r in rows), flush=True)
        if "torch" in urls and args.soak_seconds > 0:
            saturation = max(r["rps"] for r in report["results"]["torch"])
            report["soak"] = asyncio.run(soak(urls["torch"], texts, 0.7 * saturation, args.soak_seconds))
            report["soak"]["saturation_rps"] = saturation
            print("soak", json.dumps(report["soak"]), flush=True)
    limit = args.overload_limit
    with server("torch", args.model, ["--max-concurrent-requests", str(limit)], threads=args.threads) as (url, proc):
        before = rss_mib(proc.pid)
        rounds = [asyncio.run(overload(url, texts, limit)) for _ in range(args.overload_rounds)]
        after = rss_mib(proc.pid)
        import httpx
        alive = httpx.get(url + "/health", timeout=5).status_code == 200
    check = {"max_concurrent_requests": limit, "rounds": rounds, "rss_mib_before": round(before, 1),
             "rss_mib_after": round(after, 1), "healthy_after": alive,
             "passed": alive and after - before < args.memory_growth_mib
             and all(r["refused_429"] > 0 and not r["other"] and r["refused_max_ms"] < 100 for r in rounds)}
    report["overload"] = check
    print(json.dumps(check, indent=1), flush=True)
    return report


def ceiling(model_dir: str, texts: list[str], batch: int, rounds: int = 3) -> float:
    """Sentences/s of the served model alone (no HTTP, no event loop): `embed_batch` on batches of `batch`
    texts, best of `rounds` passes. No server around this model can answer more requests of one text."""
    from bertforge.serving.served_model import ServedModel
    model = ServedModel(model_dir, device="cpu", precision="fp32")
    model.warm_up()
    best = float("inf")
    for _ in range(rounds):
        start = time.perf_counter()
        for i in range(0, len(texts), batch):
            model.embed_batch(texts[i:i + batch])
        best = min(best, time.perf_counter() - start)
    return len(texts) / best


def ceiling_worker(model_dir: str, texts: list[str], batch: int) -> None:
    """`ceiling` on request: one pass over `texts` (batches of `batch`) per line read on stdin, its sentences/s
    printed; so that the ceiling can be measured between the servers' turns, in the same conditions."""
    from bertforge.serving.served_model import ServedModel
    model = ServedModel(model_dir, device="cpu", precision="fp32")
    model.warm_up()
    print("ready", flush=True)
    for _ in sys.stdin:
        start = time.perf_counter()
        for i in range(0, len(texts), batch):
            model.embed_batch(texts[i:i + batch])
        print(len(texts) / (time.perf_counter() - start), flush=True)


def round_order(sides: list[str], r: int) -> list[str]:
    """The sides in the order round `r` measures them: rotated by one every round, so that over len(sides) rounds
    each side goes first, and last, equally often (with two sides, they alternate)."""
    k = r % len(sides)
    return sides[k:] + sides[:k]


def paired_ratios(side: list[float], ceiling: list[float]) -> dict:
    """Round-by-round ratios of a side to the ceiling measured in the same round, their median and spread."""
    import statistics
    ratios = [a / c for a, c in zip(side, ceiling, strict=True)]
    return {"per_round": [round(x, 3) for x in ratios], "median": round(statistics.median(ratios), 3),
            "min": round(min(ratios), 3), "max": round(max(ratios), 3)}


def thread_cpu_seconds(pid: int) -> dict[int, float]:
    """CPU seconds (user + system) of each thread of process `pid`, from /proc (Linux)."""
    tick = os.sysconf("SC_CLK_TCK")
    seconds = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            fields = (task / "stat").read_text(encoding="ascii").rsplit(")", 1)[1].split()
        except (FileNotFoundError, ProcessLookupError):  # a thread that ended meanwhile
            continue
        seconds[int(task.name)] = (int(fields[11]) + int(fields[12])) / tick  # utime, stime: stat fields 14, 15
    return seconds


def cpu_split(before: dict[int, float], after: dict[int, float], client_seconds: float, requests: int) -> dict:
    """Where one pass's CPU went, in ms per request: the load client, the server's busiest thread (the model's:
    with one torch thread the model runs on the thread that calls it) and the server's other threads (event
    loop, HTTP, JSON, tokenizer). On two cores the model has one and everything else shares the other, so the
    other core saturates at 1000 / (client + server other) requests/s."""
    deltas = {tid: after[tid] - before.get(tid, 0.0) for tid in after}
    model = max(deltas.values(), default=0.0)
    per_request = 1000 / max(requests, 1)
    return {"client_ms": round(client_seconds * per_request, 3), "server_model_ms": round(model * per_request, 3),
            "server_other_ms": round((sum(deltas.values()) - model) * per_request, 3)}


def cmd_ratio(args) -> dict:
    """bertforge serve's requests/s at one concurrency against the model alone, interleaved round by round: each
    round measures the ceiling pass and each server once, in an order that rotates every round (`round_order`),
    so that neither side always runs first on a warming or cooling machine. Reports the per-round paired ratios
    served / ceiling, their median and spread, and where each request's CPU went (`cpu_split`). With
    `--client raw,httpx` each load client is a side of its own."""
    import statistics
    clients = {"raw": load_raw, "httpx": load}
    names = [c for c in args.client.split(",") if c]
    if not names or set(names) - set(clients):
        raise SystemExit(f"--client {args.client}: expected raw, httpx or both (comma-separated)")
    texts = read_texts(Path(args.data))
    env = {**os.environ, "PYTHONPATH": str(REPO / "src"), "OMP_NUM_THREADS": str(args.threads)}
    worker = subprocess.Popen([sys.executable, __file__, "ceiling", "--model", args.model, "--batch", str(args.batch),
                               "--data", args.data, "--serve-stdin"], env=env, stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    sources = {"bertforge serve": REPO / "src", **({"baseline src": Path(args.baseline_src)} if args.baseline_src
                                                    else {})}
    # one side per server and load client: "bertforge serve" alone when there is one client
    sides = {(f"{name} [{c}]" if len(names) > 1 else name): (name, clients[c]) for name in sources for c in names}
    rows: dict[str, list[float]] = {"ceiling": [], **{side: [] for side in sides}}
    cpu: dict[str, list[dict]] = {side: [] for side in sides}
    orders = []
    try:
        assert worker.stdout.readline().strip() == "ready"
        with contextlib.ExitStack() as stack:
            servers = {name: stack.enter_context(server("torch", args.model, threads=args.threads, src=src))
                       for name, src in sources.items()}
            for r in range(args.rounds):
                orders.append(round_order(list(rows), r))
                for name in orders[-1]:
                    if name == "ceiling":
                        worker.stdin.write("go\n")
                        worker.stdin.flush()
                        rows["ceiling"].append(float(worker.stdout.readline()))
                        continue
                    source, client = sides[name]
                    url, proc = servers[source]
                    before, client_start = thread_cpu_seconds(proc.pid), time.process_time()
                    row = asyncio.run(client(url, texts, args.concurrency, args.requests, 600))
                    cpu[name].append(cpu_split(before, thread_cpu_seconds(proc.pid),
                                               time.process_time() - client_start, row["requests"]))
                    rows[name].append(row["rps"])
                    if set(row["statuses"]) != {200}:
                        print(f"round {r + 1}: {name} answered {row['statuses']}", flush=True)
                print(f"round {r + 1} ({' -> '.join(orders[-1])}): "
                      + "  ".join(f"{k} {v[-1]:.1f}/s" for k, v in rows.items())
                      + "  " + "  ".join(f"{name}/ceiling {rows[name][-1] / rows['ceiling'][-1]:.1%}"
                                         for name in sides), flush=True)
    finally:
        worker.stdin.close()
        worker.wait(60)
    cpu_ms = {name: {part: round(statistics.median(p[part] for p in passes), 3) for part in passes[0]}
              for name, passes in cpu.items()}
    ceiling_ms = 1000 / statistics.median(rows["ceiling"])
    report = {"concurrency": args.concurrency, "requests": args.requests, "threads": args.threads,
              "client": args.client, "rounds": rows, "orders": orders, "cpu_per_round": cpu,
              "median_per_s": {k: round(statistics.median(v), 1) for k, v in rows.items()},
              "paired_ratio": {name: paired_ratios(rows[name], rows["ceiling"]) for name in sides},
              "cpu_ms_per_request": cpu_ms, "ceiling_ms_per_sentence": round(ceiling_ms, 3),
              "second_core_bound": {name: feeding_bound(ms, ceiling_ms) for name, ms in cpu_ms.items()}}
    print(json.dumps({k: report[k] for k in ("median_per_s", "paired_ratio", "cpu_ms_per_request",
                                             "ceiling_ms_per_sentence", "second_core_bound")}), flush=True)
    if args.records:
        print("records:", write_ratio_records(report, args))
    return report


def write_ratio_records(report: dict, args) -> Path:
    """The ratio table as records of the results store (group bench-serve, ids bench-serve/ratio-idle/...,
    replacing the earlier measurement's), and its table `bench-serve-ratio-idle`."""
    import statistics
    from bertforge.results_store import Record, write_records
    base, n = "bench-serve/ratio-idle", len(report["rounds"]["ceiling"])
    command = (f"python benchmarks/bench_serve.py ratio --model \"$MINILM\" --concurrency {args.concurrency} "
               f"--requests {args.requests} --rounds {args.rounds} --client {args.client}")
    data = (f"single SST-2 dev sentences to POST /embed, {args.concurrency} keep-alive clients, {args.requests} "
            "requests per pass")
    records = []

    def add(key: str, value: float, unit: str, what: str, digits: int = 2, style: str = "bare", **extra) -> str:
        records.append(Record.measured(f"{base}/{key}", value, unit, what, data, seeds=n, command=command,
                                       digits=digits, **extra))
        return "{" + f"{base}/{key}" + (f"|{style}}}" if style else "}")

    ceiling = report["rounds"]["ceiling"]
    rows = [["model alone (`embed_batch`, batches of 32)",
             add("model-alone/requests-s", statistics.median(ceiling), "",
                 f"sentences/s of the model alone, median of {n} rounds", 1, style="full",
                 spread=(min(ceiling), max(ceiling))),
             "—", "—", "—",
             add("model-alone/ms-per-sentence", report["ceiling_ms_per_sentence"], "ms",
                 "the model alone's ms per sentence", style="") + " / sentence", "—"]]
    for side, ratio in report["paired_ratio"].items():
        key = "raw-client" if "httpx" not in side else "httpx-client"
        label = "bertforge serve, " + ("httpx client" if key == "httpx-client" else "raw HTTP client")
        cpu, per_s = report["cpu_ms_per_request"][side], report["rounds"][side]
        rows.append([label,
                     add(f"{key}/requests-s", statistics.median(per_s), "req/s", f"{label}: requests/s, median", 1),
                     ", ".join(f"{r:.2f}" for r in ratio["per_round"]),
                     "**" + add(f"{key}/median", ratio["median"], "",
                                f"{label}: requests/s over the model alone's in the same round, median of {n}",
                                style="full", spread=(ratio["min"], ratio["max"])) + "**",
                     add(f"{key}/client-cpu-ms", cpu["client_ms"], "ms", f"{label}: load client CPU ms per request"),
                     add(f"{key}/server-model-thread", cpu["server_model_ms"], "ms",
                         f"{label}: the server's model thread, CPU ms per request"),
                     add(f"{key}/server-other-threads", cpu["server_other_ms"], "ms",
                         f"{label}: the server's other threads, CPU ms per request")])
    spec = {"header": ["side", f"requests/s, median of {n} rounds (range)", "served / model alone, per round",
                       "median (range)", "client CPU ms / request", "server: model thread", "server: other threads"],
            "align": ["---", "---:", "---", "---:", "---:", "---:", "---:"], "rows": rows}
    return write_records("bench-serve", records, args.records, tables={"bench-serve-ratio-idle": spec},
                         replace=f"{base}/")


def feeding_bound(cpu_ms: dict, ceiling_ms: float) -> dict:
    """The requests/s the core left to the client and the server's loop can sustain, and that as a fraction of the
    model alone: the most the served / ceiling ratio can reach while the two share one core."""
    per_s = 1000 / max(cpu_ms["client_ms"] + cpu_ms["server_other_ms"], 1e-9)
    return {"per_s": round(per_s, 1), "of_ceiling": round(per_s * ceiling_ms / 1000, 3)}


def measure_ceiling(model_dir: str, threads: int, batch: int) -> float:
    """`ceiling` in a fresh process with the servers' thread count."""
    env = {**os.environ, "PYTHONPATH": str(REPO / "src"), "OMP_NUM_THREADS": str(threads)}
    done = subprocess.run([sys.executable, __file__, "ceiling", "--model", model_dir, "--batch", str(batch)],
                          env=env, capture_output=True, text=True, check=True)
    return float(done.stdout.strip().splitlines()[-1])


INT8_SIDES = {"torch": ("pytorch", "PyTorch"), "onnx-fp32": ("onnx-fp32", "ONNX fp32"),
              "onnx-int8": ("onnx-int8", "ONNX int8 (per-channel)")}  # name -> (record id part, table label)
INT8_GROUP, INT8_BASE = "serve-int8", "serve-int8/sst2"
INT8_TABLE = {"header": ["model", "dev accuracy", "throughput vs PyTorch"], "align": ["---", "---", "---"],
              "rows": [[label, f"{{{INT8_BASE}/{key}/dev-accuracy}}", f"{{{INT8_BASE}/{key}/throughput-vs-pytorch}}"]
                       for key, label in INT8_SIDES.values()]}


def export_per_matrix(fp32: Path, output: Path) -> None:
    """The int8 export with one scale per weight matrix (per-tensor) instead of the export's per-channel scales:
    the fp32 export's folder with its graph quantized by the same dynamic quantizer, `per_channel=False`."""
    import shutil

    from onnxruntime.quantization import QuantType, quantize_dynamic

    from bertforge.serving.onnx_backend import ONNX_FILE, read_info
    from bertforge.serving.onnx_export import quantizer_errors_only, write_info
    shutil.copytree(fp32, output)
    with quantizer_errors_only():
        quantize_dynamic(str(fp32 / ONNX_FILE), str(output / ONNX_FILE), weight_type=QuantType.QInt8,
                         per_channel=False)
    write_info(output, {**read_info(output), "quantize": "int8", "per_channel": False})


def dev_score(predictor, data: str, warmup: int = 8) -> tuple[float, int, float]:
    """(accuracy, examples, seconds) of one pass of `predictor` over the dev set of folder `data`, timed after an
    untimed pass over its first `warmup` examples (the process's first evaluation imports and sets up for seconds:
    without it, the first model measured would pay for that)."""
    predictor.evaluate(data=data, max_samples=warmup)
    start = time.perf_counter()
    metrics = predictor.evaluate(data=data)
    seconds = time.perf_counter() - start
    scores = next(v for k, v in metrics.items() if isinstance(v, dict) and "accuracy" in v)
    return scores["accuracy"], scores["n_examples"], seconds


def cmd_int8(args, argv: list[str] | None = None) -> dict:
    """SST-2 dev accuracy and time of the torch predictor, ONNX fp32, ONNX int8 (per-channel scales, as `export
    --quantize int8` writes it) and ONNX int8 with one scale per matrix, all on --threads threads."""
    import torch

    from bertforge.serving.onnx_backend import OnnxModel
    from bertforge.serving.onnx_export import export_onnx
    from bertforge.tasks.predictor import Predictor
    from bertforge.tokenization import load_tokenizer
    torch.set_num_threads(args.threads)  # ONNX Runtime's sessions take torch's thread count
    data = str(Path(args.data).parent)
    from bertforge.tasks.predictor import read_task_file
    task = read_task_file(Path(args.model))
    report, measured = {}, {}
    with tempfile.TemporaryDirectory() as tmp:
        for q in ("fp32", "int8"):
            export_onnx(args.model, Path(tmp) / q, quantize=None if q == "fp32" else q)
        export_per_matrix(Path(tmp) / "fp32", Path(tmp) / "int8-per-matrix")
        makers = {"torch": lambda: Predictor.load(args.model)}
        for q in ("fp32", "int8", "int8-per-matrix"):
            folder = Path(tmp) / q
            makers[f"onnx-{q}"] = lambda folder=folder: Predictor(OnnxModel.from_pretrained(folder),
                                                                  load_tokenizer(folder), task, folder)
        for name, make in makers.items():
            accuracy, examples, seconds = measured[name] = dev_score(make(), data)
            report[name] = {"accuracy": round(accuracy, 4), "seconds": round(seconds, 2),
                            "examples_per_second": round(examples / seconds, 1),
                            "throughput_vs_torch": round(measured["torch"][2] / seconds, 2)}
            print(name, report[name], flush=True)
    if args.records:
        from bertforge.measuring import portable_command
        from bertforge.results_store import write_records
        command = portable_command("benchmarks/bench_serve.py", list(sys.argv[1:] if argv is None else argv))
        print("records:", write_records(INT8_GROUP, make_int8_records(measured, args, command), args.records,
                                        tables={"serve-int8-sst2": INT8_TABLE}))
    return report


def make_int8_records(measured: dict[str, tuple[float, int, float]], args, command: str) -> list:
    """The int8 table's records: each model's dev accuracy (%) and its throughput (examples/s of the same dev
    pass) over the torch predictor's; and the dev accuracy of the per-matrix int8 export."""
    import dataclasses

    from bertforge.results_store import Record
    examples = measured["torch"][1]
    data = f"SST-2 dev, {examples:,} sentences ({shown(args.data)}); the predictor folder {shown(args.model)}"
    threads = "one thread" if args.threads == 1 else f"{args.threads} threads"
    what = f"bench_serve int8, a fine-tuned SST-2 classifier in ONNX Runtime, {threads}"
    per_second = {name: n / seconds for name, (_, n, seconds) in measured.items()}
    records = []
    for name, (key, label) in INT8_SIDES.items():
        records += [Record.measured(f"{INT8_BASE}/{key}/dev-accuracy", 100 * measured[name][0], "%",
                                    f"{what}: {label}, dev accuracy", data, command=command, note="one fine-tuning seed"),
                    Record.measured(f"{INT8_BASE}/{key}/throughput-vs-pytorch", per_second[name] / per_second["torch"],
                                    "x", f"{what}: {label}, throughput vs PyTorch", data, command=command,
                                    note="one fine-tuning seed; one pass over the dev set per model")]
    records.append(Record.measured(
        f"{INT8_BASE}/onnx-int8-per-matrix/dev-accuracy", 100 * measured["onnx-int8-per-matrix"][0], "%",
        "SST-2 dev accuracy of the int8 export with one scale per matrix (per-tensor) instead of per channel", data,
        command=command, note="one fine-tuning seed; one int8 scale per matrix instead of per channel"))
    return [dataclasses.replace(record, threads=args.threads) for record in records]


def shown(path: str | Path) -> str:
    """`path` as a record names it (`bertforge.measuring.portable_path`)."""
    from bertforge.measuring import portable_path
    return portable_path(path)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("load")
    p.add_argument("--model", required=True, help="encoder folder (e.g. all-MiniLM-L6-v2)")
    p.add_argument("--onnx", default=None, help="its ONNX export (default: exported to a temporary folder)")
    p.add_argument("--servers", default="torch,onnx,baseline")
    p.add_argument("--concurrency", default="1,8,32,128")
    p.add_argument("--requests", type=int, default=400, help="requests per concurrency level")
    p.add_argument("--time-limit", type=float, default=120.0, help="seconds per level at most")
    p.add_argument("--threads", type=int, default=1, help="OMP threads per server")
    p.add_argument("--rounds", type=int, default=3, help="interleaved rounds; the report gives their medians")
    p.add_argument("--soak-seconds", type=float, default=60.0, help="the soak at 70 %% of saturation (0: skip)")
    p.add_argument("--overload-limit", type=int, default=32, help="--max-concurrent-requests of the overload check")
    p.add_argument("--overload-rounds", type=int, default=3)
    p.add_argument("--memory-growth-mib", type=float, default=256.0,
                   help="how much the server's RSS may grow over the overload rounds")
    p.add_argument("--data", default=str(SST2_DEV))
    p.add_argument("--json", default=None, help="also write the report here")
    q = sub.add_parser("int8")
    q.add_argument("--model", required=True, help="a predictor folder fine-tuned on SST-2")
    q.add_argument("--data", default=str(SST2_DEV))
    q.add_argument("--threads", type=int, default=1, help="torch's and ONNX Runtime's threads")
    q.add_argument("--json", default=None)
    q.add_argument("--records", default=None, metavar="DIR",
                   help=f"also write the table as results-store records (group {INT8_GROUP}) into DIR")
    b = sub.add_parser("baseline-server")
    b.add_argument("--model", required=True)
    b.add_argument("--port", type=int, required=True)
    h = sub.add_parser("hostile")
    h.add_argument("--model", required=True, help="encoder folder (e.g. all-MiniLM-L6-v2)")
    h.add_argument("--seconds", type=float, default=60.0, help="how long the hostile clients attack")
    h.add_argument("--quiet-seconds", type=float, default=20.0, help="healthy clients alone first, for comparison")
    h.add_argument("--healthy-clients", type=int, default=4)
    h.add_argument("--slow-heads", type=int, default=200)
    h.add_argument("--silent", type=int, default=500)
    h.add_argument("--slow-bodies", type=int, default=200)
    h.add_argument("--bad-clients", type=int, default=4)
    h.add_argument("--long-text-clients", type=int, default=10)
    h.add_argument("--max-concurrent-requests", type=int, default=512)
    h.add_argument("--threads", type=int, default=1, help="OMP threads of the server")
    h.add_argument("--data", default=str(SST2_DEV))
    h.add_argument("--json", default=None)
    c = sub.add_parser("ceiling")
    c.add_argument("--model", required=True)
    c.add_argument("--batch", type=int, default=32)
    c.add_argument("--data", default=str(SST2_DEV))
    c.add_argument("--serve-stdin", action="store_true", help="one pass per line on stdin (used by `ratio`)")
    q = sub.add_parser("ratio")
    q.add_argument("--model", required=True, help="encoder folder (e.g. all-MiniLM-L6-v2)")
    q.add_argument("--concurrency", type=int, default=32)
    q.add_argument("--requests", type=int, default=872, help="requests per server per round")
    q.add_argument("--rounds", type=int, default=5)
    q.add_argument("--batch", type=int, default=32, help="batch of the model-alone ceiling")
    q.add_argument("--threads", type=int, default=1)
    q.add_argument("--baseline-src", default=None, help="another checkout's src/ to serve beside this one")
    q.add_argument("--client", default="raw",
                   help="the load client: raw (hand-written HTTP/1.1 on keep-alive connections, light), httpx, or "
                        "raw,httpx (both, interleaved as sides of their own)")
    q.add_argument("--data", default=str(SST2_DEV))
    q.add_argument("--json", default=None)
    q.add_argument("--records", default=None, help="write the table as records of this results store (docs/results)")
    args = parser.parse_args(argv)
    if args.command == "baseline-server":
        run_baseline(args.model, args.port)
        return
    if args.command == "ceiling":
        if args.serve_stdin:
            ceiling_worker(args.model, read_texts(Path(args.data)), args.batch)
        else:
            print(ceiling(args.model, read_texts(Path(args.data)), args.batch))
        return
    if args.command == "int8":
        report = cmd_int8(args, argv)
    else:
        report = {"load": cmd_load, "hostile": cmd_hostile, "ratio": cmd_ratio}[args.command](args)
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
