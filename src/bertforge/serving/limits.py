"""What a server accepts: the fixed bounds on request bodies, and the error a request is refused with (the
settings, `ServeSettings`, are in `bertforge.serving.settings`)."""
from __future__ import annotations

from bertforge.serving.settings import MAX_WAIT_MS_LIMIT, UPLOAD_BUDGET_BODIES, ServeSettings

__all__ = ["INLINE_TOKENIZE_CHARS", "MAX_FILL_MASK_PREDICTIONS", "MAX_GENERATE_STEPS", "MAX_GENERATE_STEP_TOKENS",
           "MAX_JSON_DEPTH", "MAX_NUMBER_CHARS", "MAX_WAIT_MS_LIMIT", "UPLOAD_BUDGET_BODIES", "RequestError",
           "ServeSettings"]

# Fixed bounds on what any JSON body may hold. The deepest body an endpoint takes is four levels
# ({"inputs": [{"endings": [...]}]}); the longest number a client has reason to send is a float's 17 digits with
# sign and exponent. Python's parser would otherwise recurse into any depth and convert any number of digits.
MAX_JSON_DEPTH = 16
MAX_NUMBER_CHARS = 48
# /fill-mask answers at most this many (mask, candidate) pairs per request: masks in all texts x top_k.
MAX_FILL_MASK_PREDICTIONS = 10_000
# /generate (the mdlm sampler): at most this many reverse steps, and steps x the request's tokens (each step is
# one model call over the request's texts) at most MAX_GENERATE_STEP_TOKENS.
MAX_GENERATE_STEPS = 256
MAX_GENERATE_STEP_TOKENS = 1 << 18
# Requests whose texts hold more characters than this are tokenized in a worker thread, not in the event loop.
INLINE_TOKENIZE_CHARS = 2_000


class RequestError(Exception):
    """A request the server refuses: HTTP status + a one-line message naming the field at fault."""

    def __init__(self, status: int, message: str, kind: str = "validation") -> None:
        super().__init__(message)
        self.status, self.message, self.kind = status, message, kind
