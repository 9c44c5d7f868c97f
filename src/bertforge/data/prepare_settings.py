"""`PrepareSettings`: what one `bertforge prepare` run reads, writes and how it cuts the corpus, each setting
declared once (default, range, help) for `prepare`, `prepare_corpus`'s defaults and the verb's flags."""
from __future__ import annotations

from dataclasses import MISSING, dataclass, fields
from typing import Any, Sequence

from bertforge.data.corpus import FORMATS
from bertforge.settings import MAX_LENGTH, MAX_SAMPLES, setting

__all__ = ["PREPARE_DEFAULTS", "PrepareSettings", "recorded_settings"]

INPUT_FORMATS = ("auto", *FORMATS)
MIN_SEQ_LENGTH = 8  # [CLS], two [SEP] and room for a few tokens of each segment


@dataclass
class PrepareSettings:
    """A corpus into memory-mapped pre-training shards."""

    input: Sequence[str] = setting(
        help="files, folders or glob patterns (quoted): text (.txt/.gz/.xz/.bz2), JSON Lines (.jsonl), .csv/.tsv, "
        ".parquet, .arrow, or a `datasets` save_to_disk folder", kind="path_or_glob", nargs="+", metavar="PATH")
    vocab: str = setting(help="tokenizer folder: vocab.txt (WordPiece), vocab.json + merges.txt (byte BPE), "
                         "spiece.model (SentencePiece) or a transformers tokenizer.json", kind="existing_dir",
                         metavar="DIR")
    output: str = setting(help="folder for the shards (new or empty, unless --overwrite)", metavar="DIR")
    text_column: str = setting("text", "the field holding the text in JSONL/CSV/TSV/Parquet/Arrow inputs",
                               metavar="NAME")
    document_column: str | None = setting(None, "a document id field: consecutive rows with the same id are one "
                                          "document (default: each row is one)", metavar="NAME")
    skip_bad_rows: bool = setting(False, "skip and count rows with a missing or non-string text instead of stopping "
                                  "at the first")
    max_seq_length: int = setting(128, "tokens per pre-training example, [CLS] and [SEP] included", kind="range",
                                  minimum=MIN_SEQ_LENGTH, maximum=MAX_LENGTH)
    workers: int | None = setting(None, "tokenizer processes (default: all cores; 0: tokenize in this process)",
                                  non_negative=True, maximum=1_024)
    input_format: str = setting("auto", "what a line of the corpus holds: one sentence, or a paragraph to split into "
                                "sentences (auto: decided from a sample of the lines)", flag="--format",
                                choices=INPUT_FORMATS)
    heldout_fraction: float = setting(0.01, "documents kept for evaluation", kind="probability", minimum=0)
    heldout_documents: int | None = setting(None, "exact number of held-out documents", non_negative=True,
                                            maximum=MAX_SAMPLES)
    progress: bool = setting(True, "no progress bar", flag="--no-progress")
    overwrite: bool = setting(False, "empty an existing, non-empty --output folder first (default: refuse it)")


# what `prepare_corpus` takes when a caller leaves a setting out: the settings' own defaults
PREPARE_DEFAULTS: dict[str, Any] = {f.name: f.default for f in fields(PrepareSettings) if f.default is not MISSING}

# settings that do not change the shards: left out of the record a re-run is compared with
_NOT_RECORDED = ("output", "workers", "progress", "overwrite")


def recorded_settings(settings: PrepareSettings) -> dict[str, Any]:
    """What run_config.json keeps of a prepare run: the settings the shards depend on."""
    values = {f.name: getattr(settings, f.name) for f in fields(settings) if f.name not in _NOT_RECORDED}
    values["input"] = [str(p) for p in settings.input]
    values["vocab"] = str(settings.vocab)
    return values
