"""What a server runs and accepts, each setting declared once (default, range, help): `ServeSettings`, the
knobs an app made by `create_app` batches and bounds requests by (and how its model reads inputs longer than it
takes, `LongInputOptions`), and `ServerSettings`, the whole of `bertforge serve` (the folder, the address, the
backend, and those knobs), whose flags are derived from these fields."""
from __future__ import annotations

from dataclasses import dataclass

from bertforge.device import device_setting, precision_setting
from bertforge.settings import MAX_BATCH, SettingError, check_settings, flat_keywords, part, setting
from bertforge.tasks.inference_options import MAX_BATCH_TOKENS
from bertforge.tasks.long_inputs import LongInputOptions

__all__ = ["MAX_WAIT_MS_LIMIT", "UPLOAD_BUDGET_BODIES", "ServeSettings", "ServerSettings", "port_number"]

# The longest a batch may wait for company.
MAX_WAIT_MS_LIMIT = 60_000.0
# Bodies still arriving hold at most this many times --payload-limit bytes in all: a slow upload holds the bytes
# it has sent, never a request slot, so slow clients cannot lock out fast ones.
UPLOAD_BUDGET_BODIES = 32
MAX_TIMEOUT = 3600.0            # seconds


def port_number(text: str) -> int:
    """A TCP port, 1 to 65535."""
    if not text.strip().isdigit() or not 1 <= int(text) <= 65535:
        raise ValueError(f"expected a port number from 1 to 65535, got {text!r}")
    return int(text)


#: What the long-input settings mean for a server (their help elsewhere speaks of one run).
LONG_HELP = {
    "max_seq_length": "tokens the model reads per input, up to the model's positions",
    "long_inputs": "an input longer than --max-seq-length, for /predict and the embedding endpoints: truncate "
                   "(answered 413 unless --auto-truncate), refuse (answered 413 naming the input, with or without "
                   "--auto-truncate), or chunk: read whole in windows --chunk-stride tokens apart, as predict and "
                   "embed read them: classification and regression average the windows' logits, question "
                   "answering takes the best span of any window, token classification tags each word in the "
                   "window where it is most central, an embedding is the token-weighted mean of the windows' "
                   "vectors",
}


@flat_keywords
@dataclass(frozen=True)
class ServeSettings:
    """Server knobs: how requests are batched and bounded, and how the model reads inputs longer than it takes.
    Defaults suit a laptop serving a base-size encoder. Takes the long-input settings by their own names too:
    `ServeSettings(long_inputs="chunk")`."""

    max_batch_tokens: int = setting(16384, "padded tokens (longest input x inputs) per model call", positive=True,
                                    maximum=MAX_BATCH_TOKENS)
    max_wait_ms: float = setting(0.0, "milliseconds a batch waits for more requests once it has one (0: it takes what "
                                 "is queued; requests that arrive while the model runs join the next batch anyway)",
                                 non_negative=True, maximum=MAX_WAIT_MS_LIMIT)
    max_client_batch_size: int = setting(64, "inputs per request (texts, sentences, pairs)", positive=True,
                                         maximum=MAX_BATCH)
    max_concurrent_requests: int = setting(512, "requests waiting for or inside the model; more are answered 429",
                                           positive=True, maximum=100_000)
    payload_limit: int = setting(2_000_000, "request body bytes (413 above)", positive=True, maximum=100_000_000)
    max_input_chars: int = setting(20_000, "characters of one input text (413 above), checked before tokenizing",
                                   positive=True, maximum=10_000_000)
    body_timeout: float = setting(10.0, "seconds a request body may take to arrive (408 after)", positive=True,
                                  maximum=MAX_TIMEOUT)
    idle_timeout: float = setting(5.0, "seconds a connection may stay open without sending a whole request head",
                                  positive=True, maximum=MAX_TIMEOUT)
    auto_truncate: bool = setting(False, "cut over-long inputs instead of answering 413")
    api_key: str | None = setting(None, "require `Authorization: Bearer KEY` (not for /health)")
    model_name: str | None = setting(None, "the `model` field in answers (default: folder name)")
    long: LongInputOptions = part(LongInputOptions, LongInputOptions, title="long inputs", help=LONG_HELP,
                                  deferred={"max_seq_length": "default: the predictor's task.json, the "
                                                              "encoder's sentence-transformers settings or its "
                                                              "positions"})

    def __post_init__(self) -> None:
        """Checked when made, so an app never runs with knobs out of range; a whole number is one (a knob of
        1.5 requests is a slip, not a setting)."""
        for name in ("max_batch_tokens", "max_client_batch_size", "max_concurrent_requests", "payload_limit",
                     "max_input_chars"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int):
                raise SettingError("{" + name + "} must be a whole number, got {got!r}", owner=ServeSettings,
                                   got=value)
        check_settings(self)
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


@flat_keywords
@dataclass(frozen=True)
class ServerSettings:
    """`bertforge serve`: one folder served on one address by one backend, under `limits`. Takes the limits'
    settings by their own names too: `ServerSettings(model="m", max_wait_ms=5)`."""

    model: str = setting(help="model folder (HF layout; task.json for a predictor; model.onnx for --backend onnx)",
                         metavar="DIR")
    host: str = setting("127.0.0.1", "address to bind (127.0.0.1: loopback only)")
    port: int = setting(8080, "TCP port to listen on", parse=port_number, maximum=65535)
    backend: str = setting("torch", "run the model with PyTorch, or the model.onnx of an exported folder with ONNX "
                           "Runtime", choices=("torch", "onnx"))
    device: str = device_setting()
    precision: str = precision_setting()
    graceful_timeout: float = setting(30.0, "seconds SIGTERM waits for in-flight requests (0: no limit)",
                                      non_negative=True, maximum=MAX_TIMEOUT)
    limits: ServeSettings = part(ServeSettings, ServeSettings, title="limits")
