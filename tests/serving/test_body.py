"""Request bodies under bounds: JSON depth and number size, --payload-limit while streaming, --body-timeout, and
the byte budget of bodies still arriving. Plain asyncio, no server, no model."""
from __future__ import annotations

import asyncio
import json

import pytest

from bertforge.serving.body import UploadBudget, parse_json, read_body
from bertforge.serving.limits import MAX_JSON_DEPTH, MAX_NUMBER_CHARS, RequestError, ServeSettings


def refusal(raw: bytes) -> RequestError:
    with pytest.raises(RequestError) as caught:
        parse_json(raw)
    return caught.value


def test_a_plain_request_parses_unchanged():
    body = {"inputs": ["a", "b"], "top_k": 5, "normalize": False, "score": -1.5e-3, "x": None,
            "nested": {"endings": ["c"]}}
    assert parse_json(json.dumps(body).encode()) == body


@pytest.mark.parametrize("depth", [MAX_JSON_DEPTH + 1, 900, 100_000])
def test_nesting_beyond_the_bound_is_a_422_at_any_depth(depth):
    """Just past the bound (parsed, then walked), deep (still parsed) and far past what the parser can recurse."""
    err = refusal(b"[" * depth + b"]" * depth)
    assert err.status == 422 and f"more than {MAX_JSON_DEPTH} levels" in err.message
    inside = b'{"inputs": ["x"], "extra": ' + b"[" * depth + b"]" * depth + b"}"
    assert refusal(inside).status == 422


def test_nesting_at_the_bound_is_accepted():
    value = parse_json(b'{"a": ' + b"[" * (MAX_JSON_DEPTH - 1) + b"]" * (MAX_JSON_DEPTH - 1) + b"}")
    assert list(value) == ["a"]


@pytest.mark.parametrize("number", ["9" * 5000, "-" + "1" * 4000, "0." + "1" * 5000, "1" * (MAX_NUMBER_CHARS + 1)])
def test_long_numbers_are_refused_before_conversion(number):
    err = refusal(b'{"inputs": ["x"], "n": ' + number.encode() + b"}")
    assert err.status == 422 and f"at most {MAX_NUMBER_CHARS}" in err.message and f"{len(number):,}" in err.message


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity", "1e999", "-1e400"])
def test_non_finite_numbers_are_refused(literal):
    err = refusal(b'{"top_k": ' + literal.encode() + b"}")
    assert err.status == 422 and err.message.startswith("body:")


@pytest.mark.parametrize("raw, expected", [(b"{not json", "not valid JSON"), (b"[1, 2]", "got an array"),
                                           (b"\xff\xfe\x00", "not valid JSON"), (b'"text"', "got a string")])
def test_what_is_not_a_json_object(raw, expected):
    err = refusal(raw)
    assert err.status == 422 and err.message.startswith("body:") and expected in err.message


# ---- read_body ------------------------------------------------------------------------------------------------------
def messages(*chunks: bytes, delay: float = 0.0, end: bool = True):
    """An ASGI `receive` that delivers `chunks` (`delay` seconds apart), the last one closing the body if `end`."""
    queue = list(chunks)

    async def receive():
        if not queue:
            await asyncio.sleep(3600)  # a client that stopped sending
        await asyncio.sleep(delay)
        chunk = queue.pop(0)
        return {"type": "http.request", "body": chunk, "more_body": bool(queue) or not end}
    return receive


def read(receive, settings: ServeSettings, budget: UploadBudget | None = None) -> bytes:
    budget = budget or UploadBudget(settings.upload_budget)
    return asyncio.run(asyncio.wait_for(read_body(receive, settings, budget), 30))


def test_chunks_are_joined_and_the_budget_given_back():
    budget = UploadBudget(10_000)
    assert read(messages(b'{"inputs": ', b'["x"]}'), ServeSettings(), budget) == b'{"inputs": ["x"]}'
    assert budget.held == 0


def test_payload_limit_counts_a_streamed_body():
    with pytest.raises(RequestError) as caught:
        read(messages(*[b"x" * 400] * 5), ServeSettings(payload_limit=1000))
    assert caught.value.status == 413 and "--payload-limit" in caught.value.message


def test_a_body_that_stops_arriving_is_a_408_after_body_timeout():
    budget = UploadBudget(10_000)
    with pytest.raises(RequestError) as caught:
        read(messages(b'{"inputs": [', end=False), ServeSettings(body_timeout=0.2), budget)
    assert caught.value.status == 408 and "--body-timeout" in caught.value.message
    assert budget.held == 0  # what it had sent is released


def test_a_slow_drip_is_cut_at_body_timeout_even_while_bytes_keep_coming():
    with pytest.raises(RequestError) as caught:
        read(messages(*[b" "] * 50, delay=0.02), ServeSettings(body_timeout=0.3))
    assert caught.value.status == 408


def test_uploads_past_the_budget_are_a_429_and_release_their_bytes():
    budget = UploadBudget(1000)
    budget.take(900)  # other bodies still arriving
    with pytest.raises(RequestError) as caught:
        read(messages(b"x" * 50, b"x" * 100), ServeSettings(), budget)
    assert caught.value.status == 429 and "retry later" in caught.value.message
    assert budget.held == 900


def test_a_client_that_disconnects_mid_body():
    async def receive():
        return {"type": "http.disconnect"}
    with pytest.raises(RequestError) as caught:
        read(receive, ServeSettings())
    assert caught.value.status == 400
