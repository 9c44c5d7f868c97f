"""A request body read under bounds: its size (--payload-limit), the time it takes to arrive (--body-timeout), the
bytes all arriving bodies hold together, and what the JSON in it may be (depth, number length, no NaN)."""
from __future__ import annotations

import asyncio
import json
from typing import Any

from bertforge.serving.limits import MAX_JSON_DEPTH, MAX_NUMBER_CHARS, RequestError, ServeSettings


class UploadBudget:
    """Bytes held by bodies that are still arriving, across all requests. A slow upload holds what it has sent
    so far and nothing else; many large uploads at once are answered 429 instead of filling memory."""

    def __init__(self, limit: int) -> None:
        self.limit, self.held = limit, 0

    def take(self, n: int) -> None:
        if self.held + n > self.limit:
            raise RequestError(429, f"server busy: request bodies still arriving already hold {self.held:,} bytes "
                                    f"(at most {self.limit:,}); retry later", "overloaded")
        self.held += n

    def give_back(self, n: int) -> None:
        self.held -= n


async def read_body(receive, settings: ServeSettings, budget: UploadBudget) -> bytes:
    """The whole body, or a RequestError: 413 past --payload-limit, 408 past --body-timeout, 429 past the budget."""
    held = [0]
    try:
        if hasattr(asyncio, "timeout"):  # Python 3.11+: no extra task per request
            async with asyncio.timeout(settings.body_timeout):
                return await _receive_all(receive, settings, budget, held)
        return await asyncio.wait_for(_receive_all(receive, settings, budget, held), settings.body_timeout)
    except asyncio.TimeoutError:
        raise RequestError(408, f"the request body did not arrive within {settings.body_timeout:g} s "
                                "(--body-timeout)", "timeout") from None
    finally:
        budget.give_back(held[0])


async def _receive_all(receive, settings: ServeSettings, budget: UploadBudget, held: list[int]) -> bytes:
    chunks, size = [], 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise RequestError(400, "the client closed the connection before its body arrived", "disconnected")
        chunk = message.get("body", b"")
        if chunk:
            size += len(chunk)  # counted as it arrives: a chunked body has no Content-Length
            if size > settings.payload_limit:
                raise RequestError(413, f"request body is over {settings.payload_limit:,} bytes (--payload-limit)",
                                   "payload_too_large")
            budget.take(len(chunk))
            held[0] += len(chunk)
            chunks.append(chunk)
        if not message.get("more_body", False):
            return chunks[0] if len(chunks) == 1 else b"".join(chunks)


def parse_json(raw: bytes) -> dict[str, Any]:
    """A JSON object with at most MAX_JSON_DEPTH levels and numbers of at most MAX_NUMBER_CHARS characters."""
    try:
        data = json.loads(raw, parse_int=_integer, parse_float=_float, parse_constant=_constant)
    except RecursionError:
        data = None
        depth_error = True
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise RequestError(422, f"body: not valid JSON ({err})") from None
    else:
        depth_error = _deeper_than(data, MAX_JSON_DEPTH)
    if depth_error:
        raise RequestError(422, f"body: JSON nested more than {MAX_JSON_DEPTH} levels deep")
    if not isinstance(data, dict):
        raise RequestError(422, f"body: expected a JSON object, got {_json_type(data)}")
    return data


def _number_text(text: str) -> None:
    if len(text) > MAX_NUMBER_CHARS:
        raise RequestError(422, f"body: a number of {len(text):,} characters; numbers may have at most "
                                f"{MAX_NUMBER_CHARS}")


def _integer(text: str) -> int:
    _number_text(text)
    return int(text)


def _float(text: str) -> float:
    _number_text(text)
    value = float(text)
    if value in (float("inf"), float("-inf")):
        raise RequestError(422, f"body: the number {text} is out of range")
    return value


def _constant(name: str) -> float:
    raise RequestError(422, f"body: {name} is not a JSON number")


def _deeper_than(value: Any, limit: int) -> bool:
    """Whether containers nest more than `limit` levels (walked with a list, not recursion)."""
    stack = [(value, 1)] if isinstance(value, (dict, list)) else []
    while stack:
        item, depth = stack.pop()
        if depth > limit:
            return True
        children = item.values() if isinstance(item, dict) else item
        stack.extend((child, depth + 1) for child in children if isinstance(child, (dict, list)))
    return False


def _json_type(value: Any) -> str:
    return {dict: "an object", list: "an array", str: "a string", bool: "true or false", int: "a number",
            float: "a number", type(None): "null"}.get(type(value), type(value).__name__)
