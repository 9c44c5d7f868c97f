"""`InferenceOptions`: the settings every verb that runs a saved model shares (predict, evaluate, embed, features,
generate, score), composed by each verb's settings as a part, as the training verbs compose `TrainOptions`.

Where and in which precision the model runs (it is a `DeviceOptions`), how many inputs and padded tokens one
model call takes, and how much of one input text is read. A verb gives its own defaults as the part's default
instance (`part(InferenceOptions, lambda: InferenceOptions(batch_size=32), ...)`) and hides what it has no use
for, so each default is written once and a setting added here is a flag of every such verb.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from bertforge.device import DeviceOptions
from bertforge.settings import MAX_BATCH, SettingError, setting

__all__ = ["DEFAULT_MAX_BATCH_TOKENS", "DEFAULT_MAX_CHARS", "MAX_BATCH_TOKENS", "MAX_CHARS", "InferenceOptions",
           "check_plain_text",
           "text_setting"]

# Bounds of the inference settings (the training settings' are in bertforge.settings): far beyond any real use
MAX_BATCH_TOKENS = 1 << 20     # padded tokens in one model call
MAX_CHARS = 100_000_000        # characters of one input text
#: Characters kept of each input text before tokenization: far beyond what 512 tokens can hold, small
#: enough that one pathological line (a 50 MB log dump) costs milliseconds, not minutes and gigabytes.
DEFAULT_MAX_CHARS = 100_000
#: Padded tokens per batch (rows x longest row): 128 rows of 128 tokens, 42 SQuAD windows of 384.
DEFAULT_MAX_BATCH_TOKENS = 16_384


@dataclass
class InferenceOptions(DeviceOptions):
    """How a saved model runs: `device` and `precision` (from `DeviceOptions`), then the batch limits and the
    characters read of each input."""

    batch_size: int = setting(64, "most inputs per batch", positive=True, maximum=MAX_BATCH)
    max_batch_tokens: int = setting(DEFAULT_MAX_BATCH_TOKENS, "most padded tokens per batch: rows x longest row",
                                    positive=True, maximum=MAX_BATCH_TOKENS)
    max_chars: int = setting(DEFAULT_MAX_CHARS, "characters kept of each input text before tokenization; longer "
                             "inputs are cut and their record says \"truncated\": true", positive=True, maximum=MAX_CHARS)


def text_setting(help: str) -> Any:
    """The `text` setting (`--text TEXT [TEXT ...]`, repeatable): the one way every verb that reads sentences takes
    them on the command line (`--text a --text b` and `--text a b` mean the same)."""
    return setting(None, help, nargs="+", repeatable=True, metavar="TEXT")


def check_plain_text(path: str | None, verb: str, owner: type | None = None) -> None:
    """Refuse a table (.csv/.tsv/.jsonl) given as the `input` of a verb that reads one text per line: its header
    and every other column would be read as text. `owner` is the verb's settings class (for the flags' names)."""
    from bertforge.tasks.prediction_io import TABLE_SUFFIXES
    if path and path != "-" and str(path).lower().removesuffix(".gz").endswith(TABLE_SUFFIXES):
        raise SettingError("{input} {path}: {verb} reads plain text, one text per line; this is a table "
                           "(.csv/.tsv/.jsonl/.parquet/.arrow): give its text column as a .txt file, or the texts with "
                           "{text}", owner=owner, path=path, verb=verb)
