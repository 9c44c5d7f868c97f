"""What wraps every request: its id, the API key, the body size, metrics, admission (429) and the one error format
`{"error": message, "type": kind, "request_id": id}` that every refusal and failure is answered with.

The layers are plain ASGI classes: an `@app.middleware("http")` would run each request in its own task with its
body relayed through a memory stream.
"""
from __future__ import annotations

import hmac
import json
import logging
import re
import time
import uuid

from fastapi import Request
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException

from bertforge.serving.limits import RequestError, ServeSettings
from bertforge.serving.metrics import ServerMetrics

log = logging.getLogger("bertforge.serve")
OPEN_ENDPOINTS = ("/health",)
_REQUEST_ID = re.compile(r"[A-Za-z0-9._-]{1,64}")
# A 408 or 413 may be sent before the whole body arrived: the connection stays open so that the client, still
# sending, reads the answer instead of a reset; uvicorn drops the rest of the body, and a connection that sends no
# new request head within --idle-timeout is closed (server.py).
_STATUS_HEADERS = {401: {"WWW-Authenticate": "Bearer"}, 429: {"Retry-After": "1"}}


def error_response(status: int, message: str, kind: str, request_id: str,
                   headers: dict[str, str] | None = None) -> JSONResponse:
    headers = {**(headers or {}), **_STATUS_HEADERS.get(status, {})}
    return JSONResponse({"error": message, "type": kind, "request_id": request_id}, status_code=status,
                        headers=headers or None)


async def refused(request: Request, err: RequestError) -> JSONResponse:
    """The exception handler for RequestError."""
    return error_response(err.status, err.message, err.kind, request.state.request_id)


def http_error_handler(paths: list[str]):
    """The exception handler for the router's own errors (unknown path, wrong method): the same format as ours,
    naming what the server does answer."""
    async def handler(request: Request, err: HTTPException) -> JSONResponse:
        path, method = request.url.path, request.method
        if err.status_code == 404:
            message, kind = f"no endpoint {path[:100]}; this server answers {', '.join(paths)}", "not_found"
        elif err.status_code == 405:
            allowed = (err.headers or {}).get("Allow", "")
            message, kind = f"{method} {path}: method not allowed; use {allowed or 'another method'}", \
                "method_not_allowed"
        else:
            message, kind = str(err.detail), "http_error"
        return error_response(err.status_code, message, kind, request.state.request_id, err.headers)
    return handler


class Guard:
    """Around every request: its id (the client's own if sane), the API key, the body size announced by
    Content-Length, status and latency metrics, and a 500 with the request id (never a traceback) for anything
    that fails inside."""

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
                await error_response(err.status, err.message, err.kind, request_id)(scope, receive, send_with_id)
        except Exception:
            log.exception("request %s to %s failed", request_id, path)
            if "status" not in answered:
                await error_response(500, "internal error while running the model; see the server log for request "
                                          f"{request_id}", "internal", request_id)(scope, receive, send_with_id)
        self.metrics.requests.labels(endpoint, str(answered.get("status", 500))).inc()
        self.metrics.latency.labels(endpoint).observe(time.perf_counter() - start)


class Admission:
    """Counts the requests that hold a slot: body received, waiting for or inside the model. Beyond
    --max-concurrent-requests the answer is 429."""

    def __init__(self, settings: ServeSettings, metrics: ServerMetrics) -> None:
        self.settings, self.metrics = settings, metrics
        self.in_flight = 0

    @property
    def full(self) -> bool:
        return self.in_flight >= self.settings.max_concurrent_requests

    def busy_message(self) -> str:
        return (f"server busy: {self.in_flight} requests in flight (--max-concurrent-requests "
                f"{self.settings.max_concurrent_requests}); retry later")

    def enter(self) -> None:
        if self.full:
            raise RequestError(429, self.busy_message(), "overloaded")
        self.in_flight += 1
        self.metrics.queue_depth.set(self.in_flight)

    def leave(self) -> None:
        self.in_flight -= 1
        self.metrics.queue_depth.set(self.in_flight)


class AdmissionLimit:
    """Answers 429 to a model endpoint while every slot is taken, before anything else happens (no body read, no
    tokenizing): under overload the refusals stay fast while the model is busy. A request without a valid key
    is let through to be answered 401 instead."""

    def __init__(self, app, admission: Admission, model_paths: set[str]) -> None:
        self.app, self.admission, self.model_paths = app, admission, model_paths

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] == "http" and scope["path"] in self.model_paths and self.admission.full \
                and self._key_ok(scope):
            await self._refuse(scope, send)
            return
        await self.app(scope, receive, send)

    def _key_ok(self, scope) -> bool:
        api_key = self.admission.settings.api_key
        if api_key is None:
            return True
        headers = dict(scope.get("headers") or [])
        return hmac.compare_digest(headers.get(b"authorization", b"").strip(), f"Bearer {api_key}".encode())

    async def _refuse(self, scope, send) -> None:
        request_id = uuid.uuid4().hex[:16]
        body = json.dumps({"error": self.admission.busy_message(), "type": "overloaded",
                           "request_id": request_id}).encode()
        await send({"type": "http.response.start", "status": 429,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                                (b"retry-after", b"1"), (b"x-request-id", request_id.encode())]})
        await send({"type": "http.response.body", "body": body})
        self.admission.metrics.requests.labels(scope["path"], "429").inc()


def _check_key(request: Request, settings: ServeSettings, path: str) -> None:
    if settings.api_key is None or path in OPEN_ENDPOINTS:
        return
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not token:
        raise RequestError(401, "Authorization: expected \"Bearer <api key>\"", "unauthorized")
    if not hmac.compare_digest(token.strip().encode(), settings.api_key.encode()):
        raise RequestError(401, "Authorization: wrong API key", "unauthorized")
