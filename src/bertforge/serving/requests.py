"""The request of each endpoint as a typed value, read from its JSON object. Every field is checked here, before
any tokenizing or model work, and every refusal is a RequestError whose message starts with the field at fault
(`inputs[3]: empty text`). Fields a request does not know are ignored, as OpenAI and TEI clients expect."""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from bertforge.serving.limits import MAX_GENERATE_STEPS, RequestError, ServeSettings
from bertforge.tasks.heads import HEADS


# ---- fields ---------------------------------------------------------------------------------------------------------
def text(value: Any, field: str, settings: ServeSettings) -> str:
    """One input text: a non-blank string of valid Unicode, at most --max-input-chars characters."""
    if not isinstance(value, str):
        raise RequestError(422, f"{field}: expected a string, got {_type(value)}")
    if not value.strip():
        raise RequestError(422, f"{field}: empty text")
    if len(value) > settings.max_input_chars:
        raise RequestError(413, f"{field} has {len(value):,} characters; --max-input-chars is "
                                f"{settings.max_input_chars:,}", "input_too_long")
    if not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise RequestError(422, f"{field}: not valid Unicode (a lone surrogate escape)") from None
    return value


def texts(data: dict[str, Any], key: str, settings: ServeSettings, allow_string: bool = True,
          prefix: str = "") -> list[str]:
    """`data[key]`: a list of input texts (or one text, when `allow_string`), at most --max-client-batch-size of
    them. `prefix` names the object `data` sits in (`inputs.` for `inputs.sentences`)."""
    field = prefix + key
    expected = "a string or a list of strings" if allow_string else "a list of strings"
    if key not in data:
        raise RequestError(422, f"{field}: missing (expected {expected})")
    value = data[key]
    if isinstance(value, str) and allow_string:
        value = [value]
    if not isinstance(value, list):
        raise RequestError(422, f"{field}: expected {expected}, got {_type(value)}")
    check_count(value, field, settings)
    return [text(item, f"{field}[{i}]", settings) for i, item in enumerate(value)]


def check_count(items: list, field: str, settings: ServeSettings) -> None:
    if not items:
        raise RequestError(422, f"{field}: empty list (send at least one input)")
    if len(items) > settings.max_client_batch_size:
        raise RequestError(422, f"{field}: {len(items)} inputs; --max-client-batch-size is "
                                f"{settings.max_client_batch_size}")


def flag(data: dict[str, Any], field: str, default: bool) -> bool:
    value = data.get(field, default)
    if not isinstance(value, bool):
        raise RequestError(422, f"{field}: expected true or false, got {json.dumps(value)[:40]}")
    return value


def _object(data: dict[str, Any], field: str) -> dict[str, Any]:
    value = data.get(field)
    if not isinstance(value, dict):
        raise RequestError(422, f"{field}: expected an object, got {_type(value) if field in data else 'nothing'}")
    return value


def _type(value: Any) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "true or false", int: "a number",
            float: "a number", type(None): "null"}.get(type(value), type(value).__name__)


# ---- one type per endpoint ------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class OpenAIEmbeddingsRequest:
    """POST /v1/embeddings: `{"input": text or [texts], "model": name, "encoding_format": "float"}`."""

    texts: list[str]
    model: str | None

    @classmethod
    def parse(cls, data: dict[str, Any], settings: ServeSettings) -> OpenAIEmbeddingsRequest:
        if data.get("encoding_format", "float") != "float":
            raise RequestError(422, "encoding_format: only \"float\" is supported")
        model = data.get("model")
        if model is not None and not isinstance(model, str):
            raise RequestError(422, f"model: expected a string, got {_type(model)}")
        return cls(texts(data, "input", settings), (model or None) and model[:256])


@dataclass(frozen=True)
class EmbedRequest:
    """POST /embed (TEI): `{"inputs": text or [texts], "normalize": true}`."""

    texts: list[str]
    normalize: bool

    @classmethod
    def parse(cls, data: dict[str, Any], settings: ServeSettings) -> EmbedRequest:
        return cls(texts(data, "inputs", settings), flag(data, "normalize", True))


@dataclass(frozen=True)
class PredictRequest:
    """POST /predict: `{"inputs": [input, ...]}`; what one input may be depends on the model's head and is
    checked by the handler (`predict_input`)."""

    inputs: list[Any]

    @classmethod
    def parse(cls, data: dict[str, Any], settings: ServeSettings) -> PredictRequest:
        items = data.get("inputs")
        if items is None:
            raise RequestError(422, "inputs: missing or not a list (expected a list of inputs)")
        if not isinstance(items, (list, str, dict)):
            raise RequestError(422, f"inputs: expected a list, got {_type(items)}")
        items = items if isinstance(items, list) else [items]
        check_count(items, "inputs", settings)
        return cls(items)


@dataclass(frozen=True)
class FillMaskRequest:
    """POST /fill-mask: `{"inputs": [texts with [MASK]], "top_k": 5}`."""

    texts: list[str]
    top_k: int

    @classmethod
    def parse(cls, data: dict[str, Any], settings: ServeSettings) -> FillMaskRequest:
        found = texts(data, "inputs", settings)
        top_k = data.get("top_k", 5)
        if not isinstance(top_k, int) or isinstance(top_k, bool) or not 1 <= top_k <= 100:
            raise RequestError(422, f"top_k: expected a whole number from 1 to 100, got {json.dumps(top_k)[:40]}")
        return cls(found, top_k)


def number(data: dict[str, Any], field: str, default: float, low: float, high: float, whole: bool = False,
           open_low: bool = False) -> Any:
    """`data[field]` (or `default`): a number from `low` (excluded with `open_low`) to `high`."""
    value = data.get(field, default)
    kind = int if whole else (int, float)
    inside = isinstance(value, kind) and not isinstance(value, bool) and (low < value if open_low else low <= value)
    if not inside or not value <= high:
        what = "a whole number" if whole else "a number"
        raise RequestError(422, f"{field}: expected {what} from {low}{' (excluded)' if open_low else ''} to "
                                f"{high}, got {json.dumps(value)[:40]}")
    return value


@dataclass(frozen=True)
class GenerateRequest:
    """POST /generate: `{"inputs": [texts with [MASK] spans], "steps": 10, "top_k": 0, "top_p": 1.0,
    "temperature": 1.0, "seed": 0}`: each text's masks filled by the mdlm sampler."""

    texts: list[str]
    steps: int
    top_k: int
    top_p: float
    temperature: float
    seed: int

    @classmethod
    def parse(cls, data: dict[str, Any], settings: ServeSettings) -> GenerateRequest:
        found = texts(data, "inputs", settings)
        return cls(found, number(data, "steps", 10, 1, MAX_GENERATE_STEPS, whole=True),
                   number(data, "top_k", 0, 0, 1_000_000, whole=True),
                   float(number(data, "top_p", 1.0, 0, 1, open_low=True)),
                   float(number(data, "temperature", 1.0, 0, 100)), number(data, "seed", 0, 0, 2**31 - 1, whole=True))


@dataclass(frozen=True)
class TokenizeRequest:
    """POST /tokenize: `{"inputs": text or [texts]}`."""

    texts: list[str]

    @classmethod
    def parse(cls, data: dict[str, Any], settings: ServeSettings) -> TokenizeRequest:
        return cls(texts(data, "inputs", settings))


@dataclass(frozen=True)
class SimilarityRequest:
    """POST /similarity (TEI): `{"inputs": {"source_sentence": text, "sentences": [texts]}}`."""

    source: str
    sentences: list[str]

    @classmethod
    def parse(cls, data: dict[str, Any], settings: ServeSettings) -> SimilarityRequest:
        inputs = _object(data, "inputs")
        source = text(inputs.get("source_sentence"), "inputs.source_sentence", settings)
        return cls(source, texts(inputs, "sentences", settings, allow_string=False, prefix="inputs."))


@dataclass(frozen=True)
class RerankRequest:
    """POST /rerank (TEI): `{"query": text, "texts": [texts], "raw_scores": false, "return_text": false}`."""

    query: str
    texts: list[str]
    raw_scores: bool
    return_text: bool

    @classmethod
    def parse(cls, data: dict[str, Any], settings: ServeSettings) -> RerankRequest:
        query = text(data.get("query"), "query", settings)
        return cls(query, texts(data, "texts", settings, allow_string=False), flag(data, "raw_scores", False),
                   flag(data, "return_text", False))


# ---- /predict inputs by head ------------------------------------------------------------------------------------------
def predict_input(head: str, item: Any, field: str, settings: ServeSettings) -> Any:
    """One JSON input -> what `Predictor.predict` takes for this head, or a RequestError naming the field."""
    kind = HEADS[head].inputs if head in HEADS else None
    if kind == "text":
        if _is_text(item, field, settings):
            return item
        if isinstance(item, dict) and _is_text(item.get("text"), field + ".text", settings):
            pair = item.get("text_pair")
            if pair is None:
                return item["text"]
            if _is_text(pair, field + ".text_pair", settings):
                return (item["text"], pair)
        if _is_text_list(item, field, settings) and len(item) == 2:
            return tuple(item)
        raise RequestError(422, f"{field}: expected a text, [text, text_pair] or {{\"text\", \"text_pair\"}}")
    if kind == "words":
        if _is_text(item, field, settings):
            return item
        if _is_text_list(item, field, settings):
            if sum(len(word) for word in item) > settings.max_input_chars:
                raise RequestError(413, f"{field}: the words have over {settings.max_input_chars:,} characters in "
                                        "all (--max-input-chars)", "input_too_long")
            return item
        raise RequestError(422, f"{field}: expected a text or a list of words")
    if kind == "question":
        if isinstance(item, dict) and _is_text(item.get("question"), field + ".question", settings) \
                and _is_text(item.get("context"), field + ".context", settings):
            return (item["question"], item["context"])
        if _is_text_list(item, field, settings) and len(item) == 2:
            return tuple(item)
        raise RequestError(422, f"{field}: expected {{\"question\": text, \"context\": text}}")
    if kind == "choices":
        return _multiple_choice(item, field, settings)
    raise RequestError(422, f"{field}: this model's head {head!r} is not served")


def _multiple_choice(item: Any, field: str, settings: ServeSettings) -> tuple[str, str, list[str]]:
    if isinstance(item, dict) and _is_text(item.get("context"), field + ".context", settings) \
            and _is_text_list(item.get("endings"), field + ".endings", settings):
        if len(item["endings"]) > settings.max_client_batch_size:
            raise RequestError(422, f"{field}.endings: {len(item['endings'])} endings; --max-client-batch-size is "
                                    f"{settings.max_client_batch_size}")
        start = item.get("start", "")
        if not isinstance(start, str):
            raise RequestError(422, f"{field}.start: expected a string, got {_type(start)}")
        if start:
            text(start, field + ".start", settings)
        return (item["context"], start, list(item["endings"]))
    raise RequestError(422, f"{field}: expected {{\"context\": text, \"endings\": [text, ...]}}")


def _is_text(value: Any, field: str, settings: ServeSettings) -> bool:
    """Whether `value` is a non-blank string; one that is too long or not valid Unicode is refused outright."""
    if not isinstance(value, str) or not value.strip():
        return False
    text(value, field, settings)
    return True


def _is_text_list(value: Any, field: str, settings: ServeSettings) -> bool:
    if not isinstance(value, list) or not value or len(value) > settings.max_input_chars:
        return False
    return all(_is_text(x, f"{field}[{i}]", settings) for i, x in enumerate(value))
