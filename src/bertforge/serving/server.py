"""uvicorn around an app, with the connection bounds the app itself cannot see.

uvicorn closes a keep-alive connection that stays silent after an answer, but a connection that sends nothing at
all, or drips its request head a byte at a time, would stay open for ever. Here every connection must deliver a
whole request head within --idle-timeout seconds of opening or of its last answer; the body then has
--body-timeout (enforced by the app).
"""
from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

from bertforge.serving.settings import ServerSettings


def protocol_class(idle_timeout: float, base: type[asyncio.Protocol] | None = None) -> type[asyncio.Protocol]:
    """uvicorn's HTTP protocol (`base`; by default httptools when installed, else h11) with the request-head
    deadline."""
    if base is None:
        from uvicorn.protocols.http.auto import AutoHTTPProtocol as base

    class HeadDeadline(base):  # type: ignore[misc, valid-type]
        _deadline: asyncio.TimerHandle | None = None
        _waiting_after: Any = None  # the request cycle that was current when the deadline was set

        def connection_made(self, transport) -> None:
            super().connection_made(transport)
            self._arm()

        def data_received(self, data: bytes) -> None:
            super().data_received(data)
            if self._deadline is not None and self.cycle is not self._waiting_after:
                self._disarm()  # a whole request head arrived: a new cycle started

        def on_response_complete(self) -> None:
            cycle = self.cycle
            super().on_response_complete()
            if self.cycle is cycle:  # no pipelined request started: wait for the next head
                self._arm()

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            super().connection_lost(exc)

        def _arm(self) -> None:
            self._disarm()
            self._waiting_after = self.cycle
            self._deadline = self.loop.call_later(idle_timeout, self._head_too_slow)

        def _disarm(self) -> None:
            if self._deadline is not None:
                self._deadline.cancel()
                self._deadline = None

        def send_400_response(self, msg: str) -> None:
            """A request uvicorn cannot parse, answered in the server's one error format."""
            request_id = uuid.uuid4().hex[:16]
            body = json.dumps({"error": f"invalid HTTP request ({msg.rstrip('.')})", "type": "bad_request",
                               "request_id": request_id}).encode()
            self.transport.write(b"HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\n"
                                 b"content-length: %d\r\nx-request-id: %s\r\nconnection: close\r\n\r\n"
                                 % (len(body), request_id.encode()) + body)
            self.transport.close()

        def _head_too_slow(self) -> None:
            self._deadline = None
            if self.cycle is self._waiting_after and not self.transport.is_closing():
                self.transport.close()

    return HeadDeadline


_DEFAULT = ServerSettings(model="")  # the defaults `bertforge serve` has, for callers that leave some out


def server_config(app, host: str = _DEFAULT.host, port: int = _DEFAULT.port,
                  graceful_timeout: float | None = _DEFAULT.graceful_timeout, log_level: str = "warning"):
    """A `uvicorn.Config` for an app made by `create_app`, with its idle timeout on every connection."""
    import uvicorn
    idle = app.state.settings.idle_timeout
    return uvicorn.Config(app, host=host, port=port, http=protocol_class(idle), timeout_keep_alive=idle,
                          timeout_graceful_shutdown=graceful_timeout or None, log_level=log_level)


def serve(app, host: str, port: int, graceful_timeout: float | None = _DEFAULT.graceful_timeout) -> None:
    """Serve until SIGTERM or SIGINT, then stop accepting, finish the requests in flight (at most
    `graceful_timeout` seconds) and return."""
    import uvicorn
    uvicorn.Server(server_config(app, host, port, graceful_timeout)).run()


def serve_folder(settings: ServerSettings) -> None:
    """`bertforge serve`: load `settings.model` (a `ServerSettings`), serve it until SIGTERM or SIGINT, then
    finish the requests in flight and return. A signal that arrives while the model is still loading ends the
    process at once (status 128 + signal)."""
    import logging
    import signal

    from bertforge.serving.app import create_app
    from bertforge.serving.served_model import ServedModel
    from bertforge.settings import check_settings
    check_settings(settings)  # before the model loads
    serving = {"on": False}

    def stop(signum, frame) -> None:
        if not serving["on"]:
            raise SystemExit(128 + signum)

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, stop)
    model = ServedModel(settings.model, device=settings.device, precision=settings.precision, backend=settings.backend)
    app = create_app(model, settings.limits, own_process=True)
    log = logging.getLogger("bertforge.serve")
    log.info("serving %s (%s, %s backend) on http://%s:%d", settings.model, model.kind, settings.backend,
             settings.host, settings.port)
    # uvicorn stops accepting on SIGTERM/SIGINT, finishes in-flight requests, then re-raises the signal to the
    # handler that was there before: ours, which by then only has to let `serve` return
    serving["on"] = True
    serve(app, settings.host, settings.port, graceful_timeout=settings.graceful_timeout)
    log.info("stopped after finishing in-flight requests")
