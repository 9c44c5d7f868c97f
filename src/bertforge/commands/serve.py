"""`bertforge serve`: an HTTP server (FastAPI + uvicorn) for an encoder, a fine-tuned predictor or an MLM."""
from __future__ import annotations

import argparse

from bertforge.commands import add_common
from bertforge.commands.flags import add_settings_arguments, settings_from_args


def register(sub) -> None:
    from bertforge.serving.settings import ServerSettings
    p = sub.add_parser("serve", help="serve a model folder over HTTP (embeddings, predictions, fill-mask)",
                       description="Serve a folder over HTTP: an encoder answers /v1/embeddings (OpenAI), "
                                   "/embed, /similarity and /rerank (TEI), a fine-tuned folder answers /predict "
                                   "(and /rerank when it scores pairs), an MLM /fill-mask and the embedding "
                                   "endpoints; all answer /tokenize, /health, /info and /metrics (Prometheus). "
                                   "Concurrent requests are batched together under a token budget.")
    add_settings_arguments(p, ServerSettings)
    add_common(p)
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from bertforge.serving.server import serve_folder
    from bertforge.serving.settings import ServerSettings
    serve_folder(settings_from_args(ServerSettings, args))
    return 0
