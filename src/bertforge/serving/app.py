"""The HTTP API (FastAPI): OpenAI- and TEI-style embeddings, similarity and rerank, predictions, fill-mask,
generate (mdlm infilling), tokenize, health, info and Prometheus metrics, all in front of one `ServedModel` and
its dynamic batchers.

This module only wires: the handlers are plain functions in `handlers.py`, the requests typed in `requests.py`,
the bounds on bodies in `body.py`, and what wraps every request in `middleware.py`. Errors are JSON
`{"error": ..., "type": ..., "request_id": ...}`; a 500 never carries a traceback (it is logged with the request
id instead).
"""
from __future__ import annotations

import asyncio
import contextlib
import gc
import sys
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import orjson
from fastapi import FastAPI, Request
from fastapi.responses import Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.exceptions import HTTPException

from bertforge.serving import handlers, requests
from bertforge.serving.batcher import Batcher
from bertforge.serving.body import UploadBudget, parse_json, read_body
from bertforge.serving.handlers import Service
from bertforge.serving.limits import RequestError, ServeSettings
from bertforge.serving.metrics import ServerMetrics
from bertforge.serving.middleware import Admission, AdmissionLimit, Guard, http_error_handler, refused
from bertforge.serving.served_model import KIND_NAMES, ServedModel

# path -> (its typed request, its handler); the model answers the ones its folder serves (`model.endpoints`)
MODEL_ROUTES = {
    "/v1/embeddings": (requests.OpenAIEmbeddingsRequest, handlers.openai_embeddings),
    "/embed": (requests.EmbedRequest, handlers.embed),
    "/similarity": (requests.SimilarityRequest, handlers.similarity),
    "/rerank": (requests.RerankRequest, handlers.rerank),
    "/predict": (requests.PredictRequest, handlers.predict),
    "/fill-mask": (requests.FillMaskRequest, handlers.fill_mask),
    "/generate": (requests.GenerateRequest, handlers.generate),
    "/tokenize": (requests.TokenizeRequest, handlers.tokenize),
}
MODEL_ENDPOINTS = tuple(MODEL_ROUTES)


class JSONAnswer(Response):
    """JSON written by orjson, numpy arrays included: a 384-float vector takes ~30 us instead of the standard
    library's ~600 us (`tolist` then `json.dumps`), which the event loop would otherwise spend on every answer.
    float32 values are written in their shortest form that reads back to the same float32."""

    media_type = "application/json"

    def render(self, content: Any) -> bytes:
        return orjson.dumps(content, option=orjson.OPT_SERIALIZE_NUMPY)


def create_app(model: ServedModel, settings: ServeSettings | None = None, *, own_process: bool = False) -> FastAPI:
    """The app for `model`. `own_process`: the server is the whole process (`bertforge serve`), so what is
    alive once it has warmed up is frozen out of the garbage collector's passes (`gc.freeze`), and the GIL is
    handed over every 1 ms while it runs."""
    settings = settings or ServeSettings()
    metrics = ServerMetrics()
    executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="bertforge-model")
    svc = _service(model, settings, metrics, executor)
    admission, uploads = Admission(settings, metrics), UploadBudget(settings.upload_budget)

    app = FastAPI(title="bertforge", lifespan=_lifespan(svc, executor, own_process), docs_url=None, redoc_url=None)
    app.state.metrics, app.state.settings, app.state.model = metrics, settings, model
    for path, (request_type, handler) in MODEL_ROUTES.items():
        app.add_route(path, _endpoint(svc, admission, uploads, path, request_type, handler), methods=["POST"])

    async def info(request: Request) -> Response:
        return JSONAnswer(handlers.info(svc))

    async def prometheus(request: Request) -> Response:
        return Response(generate_latest(metrics.registry), media_type=CONTENT_TYPE_LATEST)

    app.add_route("/health", _health, methods=["GET"])
    app.add_route("/info", info, methods=["GET"])
    app.add_route("/metrics", prometheus, methods=["GET"])
    paths = sorted(route.path for route in app.routes)
    app.add_exception_handler(RequestError, refused)
    app.add_exception_handler(HTTPException, http_error_handler(paths))
    app.add_middleware(Guard, settings=settings, metrics=metrics, app_paths=set(paths))
    app.add_middleware(AdmissionLimit, admission=admission, model_paths=set(MODEL_ROUTES))  # outermost
    return app


def _service(model: ServedModel, settings: ServeSettings, metrics: ServerMetrics,
             executor: ThreadPoolExecutor) -> Service:
    """The model with one batcher per kind of model call it makes, all running in `executor`'s one thread."""
    runs = {"embed": model.embed_batch if model.encoder else None,
            "fill-mask": model.fill_mask_batch if model.mlm else None,
            "generate": model.generate_batch if model.mlm else None,
            "predict": model.predict_batch if model.predictor else None}
    batchers = {kind: Batcher(kind, run, executor, settings.max_batch_tokens, settings.max_wait_ms, metrics)
                for kind, run in runs.items() if run is not None}
    return Service(model, settings, metrics, batchers, settings.model_name or model.path.name,
                   ThreadPoolExecutor(max_workers=1, thread_name_prefix="bertforge-tokenize"))


def _endpoint(svc: Service, admission: Admission, uploads: UploadBudget, path: str, request_type, handler):
    """The HTTP side of one handler: the body read under its bounds, the typed request, a slot, the answer."""
    name = path.lstrip("/")

    async def endpoint(request: Request) -> Response:
        if name not in svc.model.endpoints:
            raise RequestError(404, f"{path} is not served by this model ({KIND_NAMES[svc.model.kind]} folder); it "
                                    f"serves {', '.join('/' + e for e in svc.model.endpoints)}", "not_found")
        typed = request_type.parse(parse_json(await read_body(request.receive, svc.settings, uploads)), svc.settings)
        admission.enter()  # only now: a slow upload never holds a slot
        try:
            return JSONAnswer(await handler(svc, typed))
        finally:
            admission.leave()

    return endpoint


async def _health(request: Request) -> Response:
    return JSONAnswer({"status": "ok"})


def _lifespan(svc: Service, executor: ThreadPoolExecutor, own_process: bool):
    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI):
        await asyncio.get_running_loop().run_in_executor(executor, svc.model.warm_up)  # before the first request
        if own_process:
            # Everything alive now (modules, the model, the app) lives as long as the server: keep it out of the
            # cyclic collector, whose first full pass over it would otherwise stall the event loop for ~150 ms
            # in the first burst of requests.
            gc.collect()
            gc.freeze()
            # The model thread needs the GIL back after every operation; the default 5 ms switch interval lets
            # the event loop keep it that long while it parses and answers requests. 1 ms: measured 12.9 -> 14.8
            # requests/s at 32 concurrent clients, median of 3 interleaved rounds on a shared machine.
            switch_interval = sys.getswitchinterval()
            sys.setswitchinterval(0.001)
        for b in svc.batchers.values():
            b.start()
        yield
        for b in svc.batchers.values():
            await b.stop()
        executor.shutdown(wait=True)
        svc.tokenizer_thread.shutdown(wait=True)
        if own_process:
            sys.setswitchinterval(switch_interval)
    return lifespan
