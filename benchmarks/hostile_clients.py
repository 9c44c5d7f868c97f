"""Hostile clients beside healthy ones, against a bertforge server on 127.0.0.1.

While healthy clients embed sentences and check every answer against the one the server gave in quiet, hostile
ones: drip request heads a byte at a time (slowloris), open connections and send nothing, announce bodies and
send them slowly, send bodies over the payload limit (announced and chunked), malformed HTTP, JSON nested 100,000
deep, 5,000-digit numbers, NaN, lone surrogates, wrong types and fields, unknown paths and methods, and texts at and
past the length bounds to /embed and /tokenize. Every loop is bounded in count and in time; traffic goes to
127.0.0.1 only. `bench_serve.py hostile` runs it at scale; `tests/serving/test_hostile.py` at CI scale.
"""
from __future__ import annotations

import asyncio
import json
import time
from collections import Counter
from dataclasses import dataclass, field

HOST = "127.0.0.1"  # never anything else


@dataclass(frozen=True)
class Scale:
    seconds: float = 3.0          # how long hostile clients keep coming: each repeats its attack until then
    healthy_clients: int = 4      # concurrent healthy clients
    healthy_requests: int = 40    # healthy requests in all (they also stop at `seconds` if `healthy_for_seconds`)
    healthy_for_seconds: bool = False
    slow_heads: int = 10          # connections dripping a request head at once
    silent: int = 30              # connections that send nothing
    slow_bodies: int = 10         # requests whose body crawls in, at once
    bad_clients: int = 1          # clients going through every malformed request
    long_text_clients: int = 1    # clients sending the largest texts the bounds allow to /tokenize, /embed, /similarity
    max_rounds: int = 10_000      # no hostile client repeats more often than this


@dataclass
class Report:
    statuses: dict[str, Counter] = field(default_factory=dict)  # client kind -> status (or error name) -> count
    healthy_latencies: list[float] = field(default_factory=list)
    healthy_wrong: int = 0            # 200 answers that differ from the quiet answer
    closed_by_server: Counter = field(default_factory=Counter)  # slow heads and silent connections the server closed

    def count(self, kind: str, status: int | str) -> None:
        self.statuses.setdefault(kind, Counter())[str(status)] += 1

    @property
    def server_errors(self) -> int:
        return sum(n for c in self.statuses.values() for s, n in c.items() if s.isdigit() and int(s) >= 500)


# ---- raw HTTP on a socket (what httpx will not send) ---------------------------------------------------------------
async def _status_of(reader: asyncio.StreamReader, timeout: float) -> int | str:
    """The status of the next response on the connection, or how it ended without one."""
    try:
        line = await asyncio.wait_for(reader.readline(), timeout)
    except asyncio.TimeoutError:
        return "no answer"
    except ConnectionError:
        return "reset"
    return int(line.split()[1]) if line.startswith(b"HTTP/1.1 ") else "closed"


async def _raw(port: int, data: bytes, timeout: float) -> int | str:
    reader, writer = await asyncio.open_connection(HOST, port)
    try:
        writer.write(data)
        await writer.drain()
        return await _status_of(reader, timeout)
    finally:
        writer.close()


def _head(path: str, length: int | None, extra: str = "") -> bytes:
    size = f"Content-Length: {length}\r\n" if length is not None else "Transfer-Encoding: chunked\r\n"
    return f"POST {path} HTTP/1.1\r\nHost: {HOST}\r\nContent-Type: application/json\r\n{size}{extra}\r\n".encode()


def _post(path: str, body: bytes) -> bytes:
    return _head(path, len(body)) + body


def bad_requests(max_input_chars: int, max_client_batch_size: int) -> list[tuple[str, bytes]]:
    """(name, raw request) for every malformed request the soak sends; each must be answered 4xx."""
    deep = b"[" * 100_000 + b"]" * 100_000
    return [
        ("deep JSON", _post("/embed", deep)),
        ("deep JSON in a field", _post("/embed", b'{"inputs": ["x"], "x": ' + deep + b"}")),
        ("5,000-digit integer", _post("/embed", b'{"inputs": ["x"], "n": ' + b"9" * 5000 + b"}")),
        ("long float", _post("/fill-mask", b'{"inputs": ["x"], "top_k": 0.' + b"1" * 5000 + b"}")),
        ("NaN", _post("/embed", b'{"inputs": ["x"], "n": NaN}')),
        ("1e999", _post("/embed", b'{"inputs": ["x"], "n": 1e999}')),
        ("lone surrogate", _post("/embed", b'{"inputs": ["\\ud800"]}')),
        ("not JSON", _post("/embed", b"{inputs: x")),
        ("invalid UTF-8", _post("/embed", b'{"inputs": ["\xff\xfe"]}')),
        ("JSON array", _post("/v1/embeddings", b"[1, 2, 3]")),
        ("wrong type", _post("/embed", b'{"inputs": {"a": 1}}')),
        ("empty list", _post("/embed", b'{"inputs": []}')),
        ("blank text", _post("/tokenize", b'{"inputs": ["   "]}')),
        ("too many inputs", _post("/embed", json.dumps({"inputs": ["x"] * (max_client_batch_size + 1)}).encode())),
        ("text past --max-input-chars", _post("/embed", json.dumps({"inputs": ["y" * (max_input_chars + 1)]}).encode())),
        ("huge top_k", _post("/fill-mask", b'{"inputs": ["a [MASK]"], "top_k": 1000000000000}')),
        ("similarity without sentences", _post("/similarity", b'{"inputs": {"source_sentence": "a"}}')),
        ("rerank with numbers", _post("/rerank", b'{"query": "q", "texts": [1, 2]}')),
        ("unknown path", _post("/admin", b"{}")),
        ("wrong method", f"DELETE /embed HTTP/1.1\r\nHost: {HOST}\r\n\r\n".encode()),
        ("garbage request line", b"\x16\x03\x01 garbage\r\n\r\n"),
        ("announced body past the limit", _head("/embed", 50_000_000) + b'{"inputs": ["'),
        ("negative length", f"POST /embed HTTP/1.1\r\nHost: {HOST}\r\nContent-Length: -5\r\n\r\n".encode()),
    ]


# ---- the clients ----------------------------------------------------------------------------------------------------
async def _healthy(url: str, expected: dict[str, list[float]], report: Report, todo: list[int],
                   stop_at: float | None) -> None:
    import httpx
    import numpy as np
    texts = list(expected)
    async with httpx.AsyncClient(timeout=60) as client:
        while todo and (stop_at is None or time.monotonic() < stop_at):
            i = todo.pop()
            text = texts[i % len(texts)]
            start = time.perf_counter()
            try:
                r = await client.post(url + "/embed", json={"inputs": [text]})
            except httpx.HTTPError as err:
                report.count("healthy", type(err).__name__)
                continue
            report.healthy_latencies.append(time.perf_counter() - start)
            report.count("healthy", r.status_code)
            if r.status_code == 200 and not np.allclose(r.json()[0], expected[text], atol=1e-5):
                report.healthy_wrong += 1


async def _slow_head(port: int, stop_at: float, report: Report) -> None:
    """A request head dripped a byte every 0.2 s; the server should close the connection."""
    reader, writer = await asyncio.open_connection(HOST, port)
    closed = False
    try:
        writer.write(f"POST /embed HTTP/1.1\r\nHost: {HOST}\r\n".encode())
        while not closed and time.monotonic() < stop_at:
            await asyncio.sleep(0.2)
            closed = reader.at_eof()
            try:
                writer.write(b"X")
                await writer.drain()
            except ConnectionError:
                closed = True
        report.closed_by_server["slow head"] += closed
        report.count("slow head", "closed" if closed else "still open")
    finally:
        writer.close()


async def _silent(port: int, wait: float, report: Report) -> None:
    reader, writer = await asyncio.open_connection(HOST, port)
    try:
        ended = await asyncio.wait_for(reader.read(1), wait)
        report.closed_by_server["silent"] += ended == b""
        report.count("silent", "closed" if ended == b"" else "answered")
    except asyncio.TimeoutError:
        report.count("silent", "still open")
    except ConnectionError:
        report.closed_by_server["silent"] += 1
        report.count("silent", "reset")
    finally:
        writer.close()


async def _slow_body(port: int, stop_at: float, report: Report) -> None:
    """A body announced as 100 kB that arrives ten bytes at a time: answered 408 after --body-timeout."""
    reader, writer = await asyncio.open_connection(HOST, port)
    stop_at = max(stop_at, time.monotonic() + 0.5)
    try:
        writer.write(_head("/embed", 100_000) + b'{"inputs": ["')
        answer = asyncio.ensure_future(_status_of(reader, max(0.5, stop_at - time.monotonic()) + 30))
        while not answer.done() and time.monotonic() < stop_at:
            try:
                writer.write(b"aaaaaaaaaa")
                await writer.drain()
            except ConnectionError:
                break
            await asyncio.sleep(0.1)
        report.count("slow body", await answer)
    finally:
        writer.close()


async def _chunked_oversize(port: int, payload_limit: int, report: Report) -> None:
    """A chunked body (no Content-Length) that keeps growing past --payload-limit."""
    reader, writer = await asyncio.open_connection(HOST, port)
    try:
        writer.write(_head("/embed", None))
        chunk = b"x" * 65536
        sent = 0
        answer = asyncio.ensure_future(_status_of(reader, 60))
        while not answer.done() and sent <= 2 * payload_limit:
            try:
                writer.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                await writer.drain()
            except ConnectionError:
                break
            sent += len(chunk)
            await asyncio.sleep(0)
        report.count("chunked past the limit", await answer)
    finally:
        writer.close()


async def repeat(attack, stop_at: float, max_rounds: int) -> None:
    """`attack()` once, then again until `stop_at` (at most `max_rounds` times)."""
    for i in range(max_rounds):
        if i and time.monotonic() >= stop_at:
            return
        await attack()


async def _bad(port: int, requests: list[tuple[str, bytes]], report: Report) -> None:
    for name, raw in requests:
        report.count(f"bad: {name}", await _raw(port, raw, 60))


async def _long_texts(url: str, max_input_chars: int, max_client_batch_size: int, report: Report) -> None:
    """The largest requests the bounds allow (every text at --max-input-chars, as many as allowed)."""
    import httpx
    words = ("tokens " * (max_input_chars // 7 + 1))[:max_input_chars]
    async with httpx.AsyncClient(timeout=120) as client:
        for path in ("/tokenize", "/embed", "/similarity"):
            inputs = [words] * max_client_batch_size
            body = {"inputs": {"source_sentence": words, "sentences": inputs}} if path == "/similarity" \
                else {"inputs": inputs}
            try:
                r = await client.post(url + path, json=body)
                report.count(f"long texts {path}", r.status_code)
            except httpx.HTTPError as err:
                report.count(f"long texts {path}", type(err).__name__)


async def soak(url: str, expected: dict[str, list[float]], scale: Scale, *, max_input_chars: int,
               max_client_batch_size: int, payload_limit: int, idle_timeout: float) -> Report:
    """Healthy and hostile clients at once; returns what each kind of client got."""
    port = int(url.rsplit(":", 1)[1])
    report = Report()
    stop_at = time.monotonic() + scale.seconds
    todo = list(range(scale.healthy_requests))
    bad = bad_requests(max_input_chars, max_client_batch_size)
    rounds = scale.max_rounds
    hostile = [*(repeat(lambda: _slow_head(port, time.monotonic() + 3 * idle_timeout, report), stop_at, rounds)
                 for _ in range(scale.slow_heads)),
               *(_silent(port, scale.seconds + 5 * idle_timeout, report) for _ in range(scale.silent)),
               *(repeat(lambda: _slow_body(port, stop_at, report), stop_at, rounds) for _ in range(scale.slow_bodies)),
               repeat(lambda: _chunked_oversize(port, payload_limit, report), stop_at, rounds),
               *(repeat(lambda: _bad(port, bad, report), stop_at, rounds) for _ in range(scale.bad_clients)),
               *(repeat(lambda: _long_texts(url, max_input_chars, max_client_batch_size, report), stop_at, rounds)
                 for _ in range(scale.long_text_clients))]
    healthy = [_healthy(url, expected, report, todo, stop_at if scale.healthy_for_seconds else None)
               for _ in range(scale.healthy_clients)]
    await asyncio.wait_for(asyncio.gather(*hostile, *healthy), scale.seconds + 10 * idle_timeout + 600)
    return report


def attack_in_process(url: str, scale: Scale, limits: dict, queue) -> None:
    """The hostile clients alone (`scale.healthy_clients` ignored), in a process of their own, so that their own
    work does not slow down the healthy clients measured in another; the report goes into `queue`."""
    queue.put(asyncio.run(soak(url, {}, Scale(**{**scale.__dict__, "healthy_clients": 0}), **limits)))
