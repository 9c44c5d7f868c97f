"""`bertforge serve`: an HTTP server (FastAPI + uvicorn) for an encoder, a fine-tuned predictor or an MLM."""
from __future__ import annotations

import argparse
import logging
import signal

from bertforge.commands import add_common
from bertforge.commands.options import non_negative_float, positive_float
from bertforge.commands.flags import add_settings_arguments
from bertforge.device import DeviceOptions
from bertforge.serving.limits import MAX_WAIT_MS_LIMIT
from bertforge.commands.options import MAX_BATCH_TOKENS, at_most, positive_int
from bertforge.settings import MAX_BATCH


def _port(text: str) -> int:
    if not text.strip().isdigit() or not 1 <= int(text) <= 65535:
        raise argparse.ArgumentTypeError(f"expected a port number from 1 to 65535, got {text!r}")
    return int(text)


_port.upper_bound = 65535  # type: ignore[attr-defined] # the bound --help shows


def _up_to(limit: float, unit: str, zero_ok: bool = True):
    """A finite number from 0 (or above 0) to `limit`."""
    def check(text: str) -> float:
        value = non_negative_float(text) if zero_ok else positive_float(text)
        if value > limit:
            raise argparse.ArgumentTypeError(f"expected at most {limit:g} {unit}, got {text!r}")
        return value
    check.upper_bound = limit  # type: ignore[attr-defined] # the bound --help shows
    return check


def register(sub) -> None:
    p = sub.add_parser("serve", help="serve a model folder over HTTP (embeddings, predictions, fill-mask)",
                       description="Serve a folder over HTTP: an encoder answers /v1/embeddings (OpenAI), "
                                   "/embed, /similarity and /rerank (TEI), a fine-tuned folder answers /predict "
                                   "(and /rerank when it scores pairs), an MLM /fill-mask and the embedding "
                                   "endpoints; all answer /tokenize, /health, /info and /metrics (Prometheus). "
                                   "Concurrent requests are batched together under a token budget.")
    p.add_argument("--model", required=True, metavar="DIR", help="model folder (HF layout; task.json for a "
                   "predictor; model.onnx for --backend onnx)")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default: loopback only)")
    p.add_argument("--port", type=_port, default=8080, help="TCP port to listen on")
    p.add_argument("--backend", choices=("torch", "onnx"), default="torch",
                   help="run the model with PyTorch, or the model.onnx of an exported folder with ONNX Runtime")
    add_settings_arguments(p, DeviceOptions)
    p.add_argument("--max-batch-tokens", type=at_most(positive_int, MAX_BATCH_TOKENS), default=16384,
                   help="padded tokens (longest input x inputs) per model call")
    p.add_argument("--max-wait-ms", type=_up_to(MAX_WAIT_MS_LIMIT, "milliseconds"), default=0.0,
                   help="how long a batch waits for more requests once it has one (0: it takes what is queued; "
                        "requests that arrive while the model runs join the next batch anyway)")
    p.add_argument("--max-client-batch-size", type=at_most(positive_int, MAX_BATCH), default=64,
                   help="inputs per request (texts, sentences, pairs)")
    p.add_argument("--max-concurrent-requests", type=at_most(positive_int, 100_000), default=512,
                   help="requests waiting for or inside the model; more are answered 429")
    p.add_argument("--payload-limit", type=at_most(positive_int, 100_000_000), default=2_000_000,
                   help="request body bytes (413 above)")
    p.add_argument("--max-input-chars", type=at_most(positive_int, 10_000_000), default=20_000,
                   help="characters of one input text (413 above), checked before tokenizing")
    p.add_argument("--body-timeout", type=_up_to(3600, "seconds", zero_ok=False), default=10.0,
                   help="seconds a request body may take to arrive (408 after)")
    p.add_argument("--idle-timeout", type=_up_to(3600, "seconds", zero_ok=False), default=5.0,
                   help="seconds a connection may stay open without sending a whole request head")
    p.add_argument("--auto-truncate", action="store_true", help="cut over-long inputs instead of answering 413")
    p.add_argument("--api-key", default=None, help="require `Authorization: Bearer KEY` (not for /health)")
    p.add_argument("--model-name", default=None, help="the `model` field in answers (default: folder name)")
    p.add_argument("--graceful-timeout", type=_up_to(3600, "seconds"), default=30.0,
                   help="seconds SIGTERM waits for in-flight requests (0: no limit)")
    add_common(p)
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from bertforge.serving.app import create_app
    from bertforge.serving.limits import ServeSettings
    from bertforge.serving.served_model import ServedModel
    from bertforge.serving.server import serve
    settings = ServeSettings(max_batch_tokens=args.max_batch_tokens, max_wait_ms=args.max_wait_ms,
                             max_client_batch_size=args.max_client_batch_size,
                             max_concurrent_requests=args.max_concurrent_requests, payload_limit=args.payload_limit,
                             max_input_chars=args.max_input_chars, body_timeout=args.body_timeout,
                             idle_timeout=args.idle_timeout, auto_truncate=args.auto_truncate, api_key=args.api_key,
                             model_name=args.model_name)
    serving = {"on": False}

    def stop(signum, frame) -> None:
        if not serving["on"]:
            raise SystemExit(128 + signum)

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, stop)
    model = ServedModel(args.model, device=args.device, precision=args.precision, backend=args.backend)
    app = create_app(model, settings, own_process=True)
    logging.getLogger("bertforge.serve").info("serving %s (%s, %s backend) on http://%s:%d", args.model,
                                              model.kind, args.backend, args.host, args.port)
    # uvicorn stops accepting on SIGTERM/SIGINT, finishes in-flight requests, then re-raises the signal to the
    # handler that was there before: ours, which by then only has to let `serve` return 0
    serving["on"] = True
    serve(app, args.host, args.port, graceful_timeout=args.graceful_timeout)
    logging.getLogger("bertforge.serve").info("stopped after finishing in-flight requests")
    return 0
