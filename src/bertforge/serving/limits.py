"""What a server accepts and how it batches: one settings object, the fixed bounds on request bodies, and the
error a request is refused with."""
from __future__ import annotations

import math
from dataclasses import dataclass

from bertforge.settings import SettingError

# Fixed bounds on what any JSON body may hold. The deepest body an endpoint takes is four levels
# ({"inputs": [{"endings": [...]}]}); the longest number a client has reason to send is a float's 17 digits with
# sign and exponent. Python's parser would otherwise recurse into any depth and convert any number of digits.
MAX_JSON_DEPTH = 16
MAX_NUMBER_CHARS = 48
# Bodies still arriving hold at most this many times --payload-limit bytes in all: a slow upload holds the bytes
# it has sent, never a request slot, so slow clients cannot lock out fast ones.
UPLOAD_BUDGET_BODIES = 32
# /fill-mask answers at most this many (mask, candidate) pairs per request: masks in all texts x top_k.
MAX_FILL_MASK_PREDICTIONS = 10_000
# Requests whose texts hold more characters than this are tokenized in a worker thread, not in the event loop.
INLINE_TOKENIZE_CHARS = 2_000
# The longest a batch may wait for company.
MAX_WAIT_MS_LIMIT = 60_000.0


@dataclass(frozen=True)
class ServeSettings:
    """Server knobs (the `bertforge serve` flags). Defaults suit a laptop serving a base-size encoder."""

    max_batch_tokens: int = 16384        # padded tokens (longest input x inputs) one model call may take
    max_wait_ms: float = 0.0             # how long a batch waits for company once its first input arrived
    max_client_batch_size: int = 64      # inputs one request may carry
    max_concurrent_requests: int = 512   # requests waiting or running; beyond this the answer is 429
    payload_limit: int = 2_000_000       # request body bytes; beyond this the answer is 413
    max_input_chars: int = 20_000        # characters of one input text; beyond this the answer is 413
    body_timeout: float = 10.0           # seconds a request body may take to arrive; beyond this the answer is 408
    idle_timeout: float = 5.0            # seconds a connection may stay open without a whole request head
    auto_truncate: bool = False          # cut inputs longer than the model instead of answering 413
    api_key: str | None = None           # when set, requests need `Authorization: Bearer <key>`
    model_name: str | None = None        # the `model` field of OpenAI-style answers (default: folder name)

    def __post_init__(self) -> None:
        for name in ("max_batch_tokens", "max_client_batch_size", "max_concurrent_requests", "payload_limit",
                     "max_input_chars"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise SettingError("{" + name + "} must be a whole number of at least 1, got {got!r}",
                                   owner=ServeSettings, got=value)
        if not _finite(self.max_wait_ms) or not 0 <= self.max_wait_ms <= MAX_WAIT_MS_LIMIT:
            raise SettingError("{max_wait_ms} must be from 0 to {limit:g} milliseconds, got {got!r}",
                               owner=ServeSettings, limit=MAX_WAIT_MS_LIMIT, got=self.max_wait_ms)
        for name in ("body_timeout", "idle_timeout"):
            value = getattr(self, name)
            if not _finite(value) or not 0 < value <= 3600:
                raise SettingError("{" + name + "} must be more than 0 and at most 3600 seconds, got {got!r}",
                                   owner=ServeSettings, got=value)
        _check_api_key(self.api_key)

    @property
    def upload_budget(self) -> int:
        """Bytes that bodies still arriving may hold in all."""
        return UPLOAD_BUDGET_BODIES * self.payload_limit


def _check_api_key(key: object) -> None:
    """A key no request can present is refused before the model loads: an empty one (`--api-key "$KEY"` with KEY
    unset), or one with spaces around it (a request's token is read without them)."""
    if key is None:
        return
    if not isinstance(key, str) or not key.strip():
        raise SettingError("{api_key} is empty, so no request could pass it (is the variable in {api_key} \"$KEY\" "
                           "unset?); give the key, or leave {api_key} out to serve without one", owner=ServeSettings)
    if key != key.strip():
        raise SettingError("{api_key} starts or ends with whitespace, which no request's Bearer token can carry; "
                           "give the key without it", owner=ServeSettings)


def _finite(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


class RequestError(Exception):
    """A request the server refuses: HTTP status + a one-line message naming the field at fault."""

    def __init__(self, status: int, message: str, kind: str = "validation") -> None:
        super().__init__(message)
        self.status, self.message, self.kind = status, message, kind
