"""What a server accepts and how it batches: one settings object, and the error a request is refused with."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ServeSettings:
    """Server knobs (the `bertforge serve` flags). Defaults suit a laptop serving a base-size encoder."""

    max_batch_tokens: int = 16384        # padded tokens (longest input x inputs) one model call may take
    max_wait_ms: float = 0.0             # how long a batch waits for company once its first input arrived
    max_client_batch_size: int = 64      # inputs one request may carry
    max_concurrent_requests: int = 512   # requests waiting or running; beyond this the answer is 429
    payload_limit: int = 2_000_000       # request body bytes; beyond this the answer is 413
    auto_truncate: bool = False          # cut inputs longer than the model instead of answering 413
    api_key: str | None = None           # when set, requests need `Authorization: Bearer <key>`
    model_name: str | None = None        # the `model` field of OpenAI-style answers (default: folder name)

    def __post_init__(self) -> None:
        for name in ("max_batch_tokens", "max_client_batch_size", "max_concurrent_requests", "payload_limit"):
            if getattr(self, name) < 1:
                raise ValueError(f"--{name.replace('_', '-')} must be at least 1, got {getattr(self, name)}")
        if self.max_wait_ms < 0:
            raise ValueError(f"--max-wait-ms must be 0 or more, got {self.max_wait_ms}")


class RequestError(Exception):
    """A request the server refuses: HTTP status + a one-line message naming the field at fault."""

    def __init__(self, status: int, message: str, kind: str = "validation") -> None:
        super().__init__(message)
        self.status, self.message, self.kind = status, message, kind
