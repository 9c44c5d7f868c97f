"""The HTTP API (FastAPI): OpenAI- and TEI-style embeddings, predictions, fill-mask, tokenize, health, info and
Prometheus metrics, all in front of one `ServedModel` and its dynamic batchers.

Errors are JSON `{"error": ..., "type": ..., "request_id": ...}`; a 500 never carries a traceback (it is logged
with the request id instead).
"""
from __future__ import annotations

import contextlib
import gc
import hmac
import json
import logging
import re
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.concurrency import run_in_threadpool

from bertforge.serving.batcher import Batcher
from bertforge.serving.limits import RequestError, ServeSettings
from bertforge.serving.metrics import ServerMetrics
from bertforge.serving.served_model import ServedModel

log = logging.getLogger("bertforge.serve")
MODEL_ENDPOINTS = ("/v1/embeddings", "/embed", "/predict", "/fill-mask")
OPEN_ENDPOINTS = ("/health",)
_REQUEST_ID = re.compile(r"[A-Za-z0-9._-]{1,64}")


def create_app(model: ServedModel, settings: ServeSettings | None = None, *, own_process: bool = False) -> FastAPI:
    """The app for `model`. `own_process`: the server is the whole process (`bertforge serve`), so what is
    alive once it has warmed up is frozen out of the garbage collector's passes (`gc.freeze`)."""
    settings = settings or ServeSettings()
    metrics = ServerMetrics()
    executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="bertforge-model")
    batchers: dict[str, Batcher] = {}
    model_name = settings.model_name or model.path.name

    def batcher(kind: str, run) -> Batcher:
        return Batcher(kind, run, executor, settings.max_batch_tokens, settings.max_wait_ms, metrics)

    if model.encoder is not None:
        batchers["embed"] = batcher("embed", model.embed_batch)
    if model.predictor is not None:
        batchers["predict"] = batcher("predict", model.predict_batch)
    if model.mlm is not None:
        batchers["fill-mask"] = batcher("fill-mask", model.fill_mask_batch)

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI):
        import asyncio
        await asyncio.get_running_loop().run_in_executor(executor, model.warm_up)  # before the first request
        if own_process:
            # Everything alive now (modules, the model, the app) lives as long as the server: keep it out of the
            # cyclic collector, whose first full pass over it would otherwise stall the event loop for ~150 ms
            # in the first burst of requests.
            gc.collect()
            gc.freeze()
        for b in batchers.values():
            b.start()
        yield
        for b in batchers.values():
            await b.stop()
        executor.shutdown(wait=True)

    app = FastAPI(title="bertforge", lifespan=lifespan, docs_url=None, redoc_url=None)
    app.state.metrics, app.state.settings, app.state.model = metrics, settings, model

    @app.exception_handler(RequestError)
    async def refused(request: Request, err: RequestError):
        return _error(err.status, err.message, err.kind, request.state.request_id)

    async def body(request: Request) -> dict[str, Any]:
        chunks, size = [], 0
        async for chunk in request.stream():  # counted as it arrives: a chunked body has no Content-Length
            size += len(chunk)
            if size > settings.payload_limit:
                raise RequestError(413, f"request body is over {settings.payload_limit:,} bytes "
                                        "(--payload-limit)", "payload_too_large")
            chunks.append(chunk)
        raw = b"".join(chunks)
        try:
            data = json.loads(raw)
        except (json.JSONDecodeError, UnicodeDecodeError) as err:
            raise RequestError(422, f"body: not valid JSON ({err})") from None
        if not isinstance(data, dict):
            raise RequestError(422, f"body: expected a JSON object, got {type(data).__name__}")
        return data

    async def run(kind: str, payloads: list[Any], tokens: list[int], endpoint: str) -> list[Any]:
        if kind not in batchers:
            what = {"encoder": "an encoder", "mlm": "a masked LM", "predictor": "a fine-tuned predictor"}.get(
                model.kind, model.kind)
            raise RequestError(404, f"{endpoint} is not served by this model ({what}); it serves "
                                    f"{', '.join('/' + e for e in model.endpoints)}", "not_found")
        try:
            results = await batchers[kind].submit(payloads, tokens)
        except Exception as err:
            raise _ModelError() from err
        metrics.tokens.labels(endpoint).inc(sum(tokens))
        return results

    async def checked_lengths(texts: list[str], pairs: list[str | None] | None, field: str) -> list[int]:
        counts = model.token_counts(texts, pairs)
        if not settings.auto_truncate:
            for i, n in enumerate(counts):
                if n > model.max_length:
                    raise RequestError(413, f"{field}[{i}] has {n} tokens; this model takes at most "
                                            f"{model.max_length} (or start the server with --auto-truncate)",
                                       "input_too_long")
        return [min(n, model.max_length) for n in counts]

    def texts_of(data: dict[str, Any], field: str, allow_string: bool = True) -> list[str]:
        if field not in data:
            raise RequestError(422, f"{field}: missing (expected a string or a list of strings)")
        value = data[field]
        if isinstance(value, str) and allow_string:
            value = [value]
        if not isinstance(value, list):
            raise RequestError(422, f"{field}: expected a string or a list of strings, got {type(value).__name__}")
        _check_count(value, field, settings)
        for i, text in enumerate(value):
            if not isinstance(text, str):
                raise RequestError(422, f"{field}[{i}]: expected a string, got {type(text).__name__}")
            if not text.strip():
                raise RequestError(422, f"{field}[{i}]: empty text")
        return value

    def flag(data: dict[str, Any], field: str, default: bool) -> bool:
        value = data.get(field, default)
        if not isinstance(value, bool):
            raise RequestError(422, f"{field}: expected true or false, got {json.dumps(value)}")
        return value

    async def embeddings(texts: list[str], field: str, endpoint: str, normalize: bool):
        import numpy as np
        tokens = await checked_lengths(texts, None, field)
        vectors = await run("embed", texts, tokens, endpoint)
        if normalize:
            vectors = [v / max(float(np.linalg.norm(v)), 1e-12) for v in vectors]
        return vectors, tokens

    # ---- endpoints --------------------------------------------------------------------------------------------
    @app.post("/v1/embeddings")
    async def openai_embeddings(request: Request):
        data = await body(request)
        texts = texts_of(data, "input")
        if data.get("encoding_format", "float") != "float":
            raise RequestError(422, "encoding_format: only \"float\" is supported")
        vectors, tokens = await embeddings(texts, "input", "/v1/embeddings", model.embed_normalizes)
        return {"object": "list", "model": data.get("model") or model_name,
                "data": [{"object": "embedding", "index": i, "embedding": v.tolist()} for i, v in enumerate(vectors)],
                "usage": {"prompt_tokens": sum(tokens), "total_tokens": sum(tokens)}}

    @app.post("/embed")
    async def tei_embed(request: Request):
        data = await body(request)
        texts = texts_of(data, "inputs")
        vectors, _ = await embeddings(texts, "inputs", "/embed", flag(data, "normalize", True))
        return [v.tolist() for v in vectors]

    @app.post("/predict")
    async def predict(request: Request):
        data = await body(request)
        if model.predictor is None:
            await run("predict", [], [], "/predict")  # answers 404 with what this model serves
        items = data.get("inputs")
        if not isinstance(items, list) and not isinstance(items, (str, dict)):
            raise RequestError(422, "inputs: missing or not a list (expected a list of inputs)"
                               if items is None else f"inputs: expected a list, got {type(items).__name__}")
        items = items if isinstance(items, list) else [items]
        _check_count(items, "inputs", settings)
        parsed = [_predict_input(model.predictor.head, item, f"inputs[{i}]") for i, item in enumerate(items)]
        texts, pairs = _length_texts(model.predictor.head, parsed)
        if texts is not None:
            tokens = await checked_lengths(texts, pairs, "inputs")
        else:  # QA and multiple choice split or cut long inputs themselves
            tokens = [min(model.max_length, n) for n in await run_in_threadpool(
                model.token_counts, [_flatten(p) for p in parsed], None)]
        return await run("predict", parsed, tokens, "/predict")

    @app.post("/fill-mask")
    async def fill_mask(request: Request):
        data = await body(request)
        texts = texts_of(data, "inputs")
        top_k = data.get("top_k", 5)
        if not isinstance(top_k, int) or isinstance(top_k, bool) or not 1 <= top_k <= 100:
            raise RequestError(422, f"top_k: expected a whole number from 1 to 100, got {json.dumps(top_k)}")
        mask = model.tokenizer.mask_token
        for i, text in enumerate(texts):
            if "[MASK]" not in text and mask not in text:
                raise RequestError(422, f"inputs[{i}]: no [MASK] in the text")
        tokens = await checked_lengths(texts, None, "inputs")
        return await run("fill-mask", [(t, top_k) for t in texts], tokens, "/fill-mask")

    @app.post("/tokenize")
    async def tokenize(request: Request):
        data = await body(request)
        texts = texts_of(data, "inputs")
        return await run_in_threadpool(model.tokenize, texts)

    @app.get("/health")
    async def health():
        return {"status": "ok"}

    @app.get("/info")
    async def info():
        return {**model.info(), "model": model_name, "max_batch_tokens": settings.max_batch_tokens,
                "max_client_batch_size": settings.max_client_batch_size,
                "max_concurrent_requests": settings.max_concurrent_requests, "auto_truncate": settings.auto_truncate}

    @app.get("/metrics")
    async def prometheus():
        return Response(generate_latest(metrics.registry), media_type=CONTENT_TYPE_LATEST)

    app_paths = {route.path for route in app.routes}
    app.add_middleware(Guard, settings=settings, metrics=metrics, app_paths=app_paths)
    app.add_middleware(AdmissionLimit, settings=settings, metrics=metrics)  # outermost: sees requests first
    return app


class Guard:
    """Around every request: its id (the client's own if sane), the API key, the body size, status and latency
    metrics, and a 500 with the request id (never a traceback) for anything that fails inside.

    A plain ASGI layer: an `@app.middleware("http")` would run each request in its own task with its body
    relayed through a memory stream."""

    def __init__(self, app, settings: ServeSettings, metrics: ServerMetrics, app_paths: set[str]) -> None:
        self.app, self.settings, self.metrics, self.app_paths = app, settings, metrics, app_paths

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request = Request(scope)
        given = request.headers.get("x-request-id", "")
        request_id = given if _REQUEST_ID.fullmatch(given) else uuid.uuid4().hex[:16]
        scope.setdefault("state", {})["request_id"] = request_id  # what `request.state.request_id` reads
        path = scope["path"]
        endpoint = path if path in self.app_paths else "other"
        start = time.perf_counter()
        answered: dict[str, int] = {}

        async def send_with_id(message) -> None:
            if message["type"] == "http.response.start":
                answered["status"] = message["status"]
                message = {**message, "headers": [*message.get("headers", []),
                                                  (b"x-request-id", request_id.encode())]}
            await send(message)

        try:
            _check_key(request, self.settings, path)
            length = request.headers.get("content-length")
            if length is not None and length.isdigit() and int(length) > self.settings.payload_limit:
                raise RequestError(413, f"request body is {int(length):,} bytes; --payload-limit is "
                                        f"{self.settings.payload_limit:,}", "payload_too_large")
            await self.app(scope, receive, send_with_id)
        except RequestError as err:
            if "status" not in answered:
                await _error(err.status, err.message, err.kind, request_id)(scope, receive, send_with_id)
        except Exception:
            log.exception("request %s to %s failed", request_id, path)
            if "status" not in answered:
                await _error(500, "internal error while running the model; see the server log for request "
                                  f"{request_id}", "internal", request_id)(scope, receive, send_with_id)
        self.metrics.requests.labels(endpoint, str(answered.get("status", 500))).inc()
        self.metrics.latency.labels(endpoint).observe(time.perf_counter() - start)


class AdmissionLimit:
    """Counts the requests to model endpoints that are waiting or running, and answers 429 beyond
    `--max-concurrent-requests` before anything else happens (no body read, no tokenizing, no per-request
    task): under overload the refusals must stay fast while the model is busy.

    A plain ASGI layer rather than an `@app.middleware`, which costs a task and a stream per request.
    A request without a valid key is let through to be answered 401 instead."""

    def __init__(self, app, settings: ServeSettings, metrics: ServerMetrics) -> None:
        self.app, self.settings, self.metrics = app, settings, metrics
        self.in_flight = 0

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http" or scope["path"] not in MODEL_ENDPOINTS:
            await self.app(scope, receive, send)
            return
        if self.in_flight >= self.settings.max_concurrent_requests and self._key_ok(scope):
            await self._refuse(scope, send)
            return
        self.in_flight += 1
        self.metrics.queue_depth.set(self.in_flight)
        try:
            await self.app(scope, receive, send)
        finally:
            self.in_flight -= 1
            self.metrics.queue_depth.set(self.in_flight)

    def _key_ok(self, scope) -> bool:
        if self.settings.api_key is None:
            return True
        headers = dict(scope.get("headers") or [])
        expected = f"Bearer {self.settings.api_key}".encode()
        return hmac.compare_digest(headers.get(b"authorization", b"").strip(), expected)

    async def _refuse(self, scope, send) -> None:
        request_id = uuid.uuid4().hex[:16]
        body = json.dumps({"error": f"server busy: {self.in_flight} requests in flight "
                                    f"(--max-concurrent-requests {self.settings.max_concurrent_requests}); "
                                    "retry later", "type": "overloaded", "request_id": request_id}).encode()
        await send({"type": "http.response.start", "status": 429,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                                (b"retry-after", b"1"), (b"x-request-id", request_id.encode())]})
        await send({"type": "http.response.body", "body": body})
        self.metrics.requests.labels(scope["path"], "429").inc()


class _ModelError(Exception):
    """The model failed on a batch: the middleware answers 500 and logs the cause."""


def _error(status: int, message: str, kind: str, request_id: str) -> JSONResponse:
    headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
    return JSONResponse({"error": message, "type": kind, "request_id": request_id}, status_code=status,
                        headers=headers)


def _check_key(request: Request, settings: ServeSettings, path: str) -> None:
    if settings.api_key is None or path in OPEN_ENDPOINTS:
        return
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not token:
        raise RequestError(401, "Authorization: expected \"Bearer <api key>\"", "unauthorized")
    if not hmac.compare_digest(token.strip().encode(), settings.api_key.encode()):
        raise RequestError(401, "Authorization: wrong API key", "unauthorized")


def _check_count(items: list, field: str, settings: ServeSettings) -> None:
    if not items:
        raise RequestError(422, f"{field}: empty list (send at least one input)")
    if len(items) > settings.max_client_batch_size:
        raise RequestError(422, f"{field}: {len(items)} inputs; --max-client-batch-size is "
                                f"{settings.max_client_batch_size}")


def _is_text(x: Any) -> bool:
    return isinstance(x, str) and bool(x.strip())


def _predict_input(head: str, item: Any, field: str) -> Any:
    """One JSON input -> what `Predictor.predict` takes for this head, or a 422 naming the field."""
    if head in ("sequence_classification", "regression"):
        if _is_text(item):
            return item
        if isinstance(item, dict) and _is_text(item.get("text")):
            pair = item.get("text_pair")
            if pair is None:
                return item["text"]
            if _is_text(pair):
                return (item["text"], pair)
        if isinstance(item, list) and len(item) == 2 and all(map(_is_text, item)):
            return tuple(item)
        raise RequestError(422, f"{field}: expected a text, [text, text_pair] or {{\"text\", \"text_pair\"}}")
    if head == "token_classification":
        if _is_text(item) or (isinstance(item, list) and item and all(map(_is_text, item))):
            return item
        raise RequestError(422, f"{field}: expected a text or a list of words")
    if head == "question_answering":
        if isinstance(item, dict) and _is_text(item.get("question")) and _is_text(item.get("context")):
            return (item["question"], item["context"])
        if isinstance(item, list) and len(item) == 2 and all(map(_is_text, item)):
            return tuple(item)
        raise RequestError(422, f"{field}: expected {{\"question\": text, \"context\": text}}")
    if head == "multiple_choice":
        if isinstance(item, dict) and _is_text(item.get("context")) and isinstance(item.get("endings"), list) \
                and item["endings"] and all(map(_is_text, item["endings"])):
            return (item["context"], item.get("start", ""), list(item["endings"]))
        raise RequestError(422, f"{field}: expected {{\"context\": text, \"endings\": [text, ...]}}")
    raise RequestError(422, f"{field}: this model's head {head!r} is not served")


def _length_texts(head: str, parsed: list[Any]) -> tuple[list[str] | None, list[str | None] | None]:
    if head in ("sequence_classification", "regression"):
        return ([p[0] if isinstance(p, tuple) else p for p in parsed],
                [p[1] if isinstance(p, tuple) else None for p in parsed])
    if head == "token_classification":
        return [p if isinstance(p, str) else " ".join(p) for p in parsed], None
    return None, None


def _flatten(item: Any) -> str:
    return " ".join(_flatten(x) for x in item) if isinstance(item, (tuple, list)) else str(item)
