"""One plain async function per endpoint: a typed request in, JSON-ready data out, refusals as RequestError.

Every handler receives the `Service` (the model, the settings, the batchers) and its request; none of them knows
about HTTP, which `app.py` wires around them.
"""
from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np

from bertforge.serving.batcher import Batcher
from bertforge.serving.limits import (
    INLINE_TOKENIZE_CHARS,
    MAX_FILL_MASK_PREDICTIONS,
    MAX_GENERATE_STEP_TOKENS,
    RequestError,
    ServeSettings,
)
from bertforge.serving.metrics import ServerMetrics
from bertforge.serving.requests import (
    EmbedRequest,
    FillMaskRequest,
    GenerateRequest,
    OpenAIEmbeddingsRequest,
    PredictRequest,
    RerankRequest,
    SimilarityRequest,
    TokenizeRequest,
    predict_input,
)
from bertforge.serving.served_model import ServedModel
from bertforge.tasks.heads import HEADS


class ModelError(Exception):
    """The model failed on a batch: the request is answered 500 and the cause logged."""


@dataclass
class Service:
    """What every handler works with: the model, the server's settings and metrics, one batcher per kind of model
    call, and a thread for tokenizing long requests off the event loop."""

    model: ServedModel
    settings: ServeSettings
    metrics: ServerMetrics
    batchers: dict[str, Batcher]
    model_name: str
    tokenizer_thread: ThreadPoolExecutor

    def __post_init__(self) -> None:
        """The app's settings say how its model reads inputs longer than it takes."""
        self.model.read_long_inputs(self.settings.long)

    async def run(self, kind: str, payloads: list[Any], tokens: list[int], endpoint: str) -> list[Any]:
        """The model's results for `payloads`, batched with other requests' inputs."""
        try:
            results = await self.batchers[kind].submit(payloads, tokens)
            _check_finite(results)
        except Exception as err:
            raise ModelError() from err
        self.metrics.tokens.labels(endpoint).inc(sum(tokens))
        return results

    async def off_loop(self, chars: int, func: Callable, *args: Any) -> Any:
        """`func(*args)` inline when its texts are short, else in the tokenizer thread, so that a request with
        long texts never stalls the event loop (and /health with it)."""
        if chars <= INLINE_TOKENIZE_CHARS:
            return func(*args)
        return await asyncio.get_running_loop().run_in_executor(self.tokenizer_thread, func, *args)

    async def checked_lengths(self, texts: Sequence[str], pairs: Sequence[str | None] | None,
                              fields: Sequence[str], long: str | None = None) -> list[int]:
        """Tokens per input (pairs counted together), each within the model's length or cut to it with
        --auto-truncate; 413 naming the field otherwise. `long` is how the model call reads a longer input
        (`ServedModel.long_mode`): with chunk it reads it whole (its whole count is returned), with refuse it is
        answered 413 even with --auto-truncate."""
        chars = sum(map(len, texts)) + sum(len(p) for p in pairs or () if p)
        longest = self.model.max_length
        if long == "chunk":  # read whole, in windows that each hold the second text of a pair whole
            if pairs is not None and any(p is not None for p in pairs):
                taken = await self.off_loop(chars, self.model.requests.pair_tokens, pairs)
                for field, n in zip(fields, taken):
                    if n >= longest:
                        raise RequestError(413, f"{field}: its second text takes {n} of the {longest} tokens of a "
                                                "window (with the special tokens), leaving none for the first",
                                           "input_too_long")
            return await self.off_loop(chars, self.model.requests.token_counts, texts, pairs)
        counts = await self.off_loop(chars, self.model.requests.token_counts, texts, pairs, longest + 1)
        if long == "refuse" or not self.settings.auto_truncate:
            hint = "" if long == "refuse" else " (or start the server with --auto-truncate)"
            for field, n in zip(fields, counts):
                if n > longest:
                    raise RequestError(413, f"{field} has more than {longest} tokens; this model takes at most "
                                            f"{longest}{hint}", "input_too_long")
        return [min(n, longest) for n in counts]

    async def embed(self, texts: list[str], fields: Sequence[str], endpoint: str,
                    normalize: bool) -> tuple[np.ndarray, list[int]]:
        """[len(texts), dim] float32 sentence vectors, and the tokens each text took."""
        tokens = await self.checked_lengths(texts, None, fields, self.model.long_mode("embed"))
        vectors = np.stack(await self.run("embed", texts, tokens, endpoint))
        if normalize:
            vectors = vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
        return np.ascontiguousarray(vectors, dtype=np.float32), tokens


def _check_finite(results: list[Any]) -> None:
    """A NaN or infinity from the model is a failure (answered 500), never a number in an answer."""
    stack: list[Any] = list(results)
    while stack:
        item = stack.pop()
        if isinstance(item, np.ndarray):
            if item.dtype.kind == "f" and not np.isfinite(item).all():
                raise ValueError("the model produced a value that is not finite")
        elif isinstance(item, float):
            if item != item or item in (float("inf"), float("-inf")):
                raise ValueError("the model produced a value that is not finite")
        elif isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, (list, tuple)):
            stack.extend(item)


def indexed(field: str, n: int) -> list[str]:
    return [f"{field}[{i}]" for i in range(n)]


# ---- endpoints ------------------------------------------------------------------------------------------------------
async def openai_embeddings(svc: Service, req: OpenAIEmbeddingsRequest) -> dict[str, Any]:
    vectors, tokens = await svc.embed(req.texts, indexed("input", len(req.texts)), "/v1/embeddings",
                                      svc.model.embed_normalizes)
    return {"object": "list", "model": req.model or svc.model_name,
            "data": [{"object": "embedding", "index": i, "embedding": v} for i, v in enumerate(vectors)],
            "usage": {"prompt_tokens": sum(tokens), "total_tokens": sum(tokens)}}


async def embed(svc: Service, req: EmbedRequest) -> np.ndarray:
    """[texts, dim]: the answer is written from the array itself (no Python floats in between)."""
    vectors, _ = await svc.embed(req.texts, indexed("inputs", len(req.texts)), "/embed", req.normalize)
    return vectors


async def similarity(svc: Service, req: SimilarityRequest) -> np.ndarray:
    """Cosine similarity of the source sentence with each sentence (TEI's /similarity)."""
    fields = ["inputs.source_sentence", *indexed("inputs.sentences", len(req.sentences))]
    vectors, _ = await svc.embed([req.source, *req.sentences], fields, "/similarity", normalize=True)
    return vectors[1:] @ vectors[0]


async def rerank(svc: Service, req: RerankRequest) -> list[dict[str, Any]]:
    """The texts by relevance to the query, best first (TEI's /rerank): a cross-encoder's score of each (query,
    text) pair when the folder is one, else the cosine similarity of their embeddings."""
    if svc.model.encoder is not None:
        fields = ["query", *indexed("texts", len(req.texts))]
        vectors, _ = await svc.embed([req.query, *req.texts], fields, "/rerank", normalize=True)
        scores = (vectors[1:] @ vectors[0]).tolist()
    else:
        queries = [req.query] * len(req.texts)
        tokens = await svc.checked_lengths(queries, req.texts, indexed("texts", len(req.texts)),
                                           svc.model.long_mode("predict"))
        results = await svc.run("predict", list(zip(queries, req.texts)), tokens, "/rerank")
        scores = [svc.model.pair_score(r, raw=req.raw_scores) for r in results]
    order = sorted(range(len(scores)), key=lambda i: -scores[i])
    return [{"index": i, "score": scores[i], **({"text": req.texts[i]} if req.return_text else {})} for i in order]


async def predict(svc: Service, req: PredictRequest) -> list[dict[str, Any]]:
    head = svc.model.predictor.head
    parsed = [predict_input(head, item, f"inputs[{i}]", svc.settings) for i, item in enumerate(req.inputs)]
    texts, pairs = _length_texts(head, parsed)
    long = svc.model.long_mode("predict")
    if texts is not None:
        tokens = await svc.checked_lengths(texts, pairs, indexed("inputs", len(texts)), long)
    else:  # QA and multiple choice split or cut long inputs themselves
        flat = [_flatten(p) for p in parsed]
        chars = sum(map(len, flat))
        if long == "refuse":  # refused here, naming the input, not inside a batch shared with other requests
            refused = await svc.off_loop(chars, svc.model.requests.refused_input, svc.model.predictor, parsed)
            if refused is not None:
                raise RequestError(413, f"inputs[{refused[0]}]: {refused[1]}", "input_too_long")
        counts = await svc.off_loop(chars, svc.model.requests.token_counts, flat, None, svc.model.max_length)
        tokens = [min(svc.model.max_length, n) for n in counts]
    return await svc.run("predict", parsed, tokens, "/predict")


async def fill_mask(svc: Service, req: FillMaskRequest) -> list[list[dict[str, Any]]]:
    mask = svc.model.tokenizer.mask_token
    masks = [t.replace("[MASK]", mask).count(mask) for t in req.texts]
    for i, n in enumerate(masks):
        if n == 0:
            raise RequestError(422, f"inputs[{i}]: no [MASK] in the text")
    if sum(masks) * req.top_k > MAX_FILL_MASK_PREDICTIONS:
        raise RequestError(422, f"inputs: {sum(masks)} masks x top_k {req.top_k} = {sum(masks) * req.top_k:,} "
                                f"predictions; a request may ask for at most {MAX_FILL_MASK_PREDICTIONS:,}")
    tokens = await svc.checked_lengths(req.texts, None, indexed("inputs", len(req.texts)))
    return await svc.run("fill-mask", [(t, req.top_k) for t in req.texts], tokens, "/fill-mask")


async def generate(svc: Service, req: GenerateRequest) -> list[dict[str, Any]]:
    """Each text's [MASK] spans filled by the mdlm sampler; its other tokens are kept as they are."""
    mask = svc.model.tokenizer.mask_token
    for i, t in enumerate(req.texts):
        if mask not in t.replace("[MASK]", mask):
            raise RequestError(422, f"inputs[{i}]: no [MASK] in the text")
    tokens = await svc.checked_lengths(req.texts, None, indexed("inputs", len(req.texts)))
    if req.steps * sum(tokens) > MAX_GENERATE_STEP_TOKENS:
        raise RequestError(422, f"steps: {req.steps} steps x {sum(tokens):,} tokens = {req.steps * sum(tokens):,}; "
                                f"a request may ask for at most {MAX_GENERATE_STEP_TOKENS:,}")
    items = [(t, req.steps, req.top_k, req.top_p, req.temperature, req.seed) for t in req.texts]
    return await svc.run("generate", items, tokens, "/generate")


async def tokenize(svc: Service, req: TokenizeRequest) -> list[list[dict[str, Any]]]:
    """Tokens with their character offsets; inputs longer than the model are refused (or cut with
    --auto-truncate), so an answer is never larger than the model's length allows."""
    await svc.checked_lengths(req.texts, None, indexed("inputs", len(req.texts)))
    return await svc.off_loop(sum(map(len, req.texts)), svc.model.requests.tokenize, req.texts, svc.model.max_length)


def info(svc: Service) -> dict[str, Any]:
    s = svc.settings
    return {**svc.model.info(), "model": svc.model_name, "max_batch_tokens": s.max_batch_tokens,
            "max_client_batch_size": s.max_client_batch_size, "max_concurrent_requests": s.max_concurrent_requests,
            "max_input_chars": s.max_input_chars, "payload_limit": s.payload_limit, "body_timeout": s.body_timeout,
            "idle_timeout": s.idle_timeout, "auto_truncate": s.auto_truncate}


def _length_texts(head: str, parsed: list[Any]) -> tuple[list[str] | None, list[str | None] | None]:
    kind = HEADS[head].inputs
    if kind == "text":
        return ([p[0] if isinstance(p, tuple) else p for p in parsed],
                [p[1] if isinstance(p, tuple) else None for p in parsed])
    if kind == "words":
        return [p if isinstance(p, str) else " ".join(p) for p in parsed], None
    return None, None


def _flatten(item: Any) -> str:
    return " ".join(_flatten(x) for x in item) if isinstance(item, (tuple, list)) else str(item)
