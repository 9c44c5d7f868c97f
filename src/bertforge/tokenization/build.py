"""`VocabSettings` and `train_vocab`: one call that trains any of bertforge's tokenizer kinds into a folder.

The settings are what `bertforge vocab` derives its flags from (`commands/flags.py`): WordPiece (BERT),
byte-level BPE (RoBERTa) or SentencePiece unigram with ALBERT's or XLNet's special tokens and layout.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from bertforge.settings import MAX_SAMPLES, SettingError, setting

__all__ = ["DEFAULT_SIZES", "KINDS", "SENTENCEPIECE_FAMILIES", "VocabSettings", "check_size", "train_vocab"]

# the vocabulary size of the original model of each kind, used when --vocab-size is not given
DEFAULT_SIZES = {"wordpiece": 30522, "bpe": 50265, "sentencepiece": 30000}
KINDS = tuple(sorted(DEFAULT_SIZES))
XLNET_SIZE = 32000  # xlnet-base-cased's
SENTENCEPIECE_FAMILIES = ("albert", "xlnet")


@dataclass
class VocabSettings:
    """A vocabulary to train: from which text files, of which kind and size, into which folder."""

    input: list[str] = setting(help="text files (.txt, .gz, .xz, .bz2)", nargs="+", metavar="FILE",
                               kind="existing_file")
    output: str = setting(help="folder for the tokenizer files (new or empty, unless --overwrite)", metavar="DIR")
    overwrite: bool = setting(False, "empty an existing, non-empty --output folder first (default: refuse it)")
    kind: str = setting("wordpiece", "tokenizer kind", flag="--type", choices=KINDS)
    family: str = setting("albert", "sentencepiece: whose special tokens and layout: albert (<pad> <unk> [CLS] "
                          "[SEP] [MASK] ...; [CLS] A [SEP]) or xlnet (<unk> <s> </s> <cls> <sep> <pad> <mask> "
                          "<eod> <eop>; A <sep> <cls>, padded on the left)", choices=SENTENCEPIECE_FAMILIES)
    vocab_size: int | None = setting(None, "default: the original's (" + ", ".join(
        f"{k} {v}" for k, v in DEFAULT_SIZES.items()) + f"; xlnet {XLNET_SIZE})", positive=True, maximum=1_000_000)
    cased: bool = setting(False, "keep case and accents (wordpiece, sentencepiece; default: lowercase as uncased "
                          "BERT and ALBERT). Byte-level BPE is always cased")
    min_frequency: int = setting(2, "wordpiece and bpe", non_negative=True, maximum=MAX_SAMPLES)
    unused: int = setting(99, "wordpiece: [unusedN] placeholders before [UNK] (99 gives the original ids "
                          "0/100/101/102/103)", metavar="N", non_negative=True, maximum=10_000)
    skip_bad_lines: bool = setting(False, "leave out (and count) lines that are not UTF-8; by default the first "
                                   "one stops the run, naming its file and line")
    progress: bool = setting(True, "no progress bar", flag="--no-progress")

    @property
    def size(self) -> int:
        if self.vocab_size is not None:
            return self.vocab_size
        return XLNET_SIZE if self.xlnet else DEFAULT_SIZES[self.kind]

    @property
    def xlnet(self) -> bool:
        return self.kind == "sentencepiece" and self.family == "xlnet"

    def record(self) -> dict:
        """What the output folder records of the run (the family only where it decides something)."""
        out = {"input": [str(p) for p in self.input], "kind": self.kind, "vocab_size": self.size,
               "cased": self.cased, "min_frequency": self.min_frequency, "unused": self.unused,
               "skip_bad_lines": self.skip_bad_lines}
        return {**out, "family": self.family} if self.xlnet else out


def check_size(settings: VocabSettings) -> None:
    """Refuse a --vocab-size that the reserved ids fill up, naming the settings (before any file is read)."""
    if settings.kind == "wordpiece":
        from bertforge.tokenization.train import SPECIAL_TOKENS
        reserved = len(SPECIAL_TOKENS) + settings.unused
        what = f"{len(SPECIAL_TOKENS)} special tokens and {{unused}} {settings.unused}"
    elif settings.kind == "bpe":
        from bertforge.tokenization.bpe import LEADING_SPECIALS
        reserved, what = 256 + len(LEADING_SPECIALS) + 1, f"256 byte symbols and {len(LEADING_SPECIALS) + 1} special tokens"
    elif settings.xlnet:
        from bertforge.tokenization.xlnet import XLNET_SPECIALS
        reserved, what = 3 + len(XLNET_SPECIALS), f"{3 + len(XLNET_SPECIALS)} special tokens of {{family}} xlnet"
    else:
        reserved, what = 5, "5 special tokens"
    if settings.size <= reserved:
        raise SettingError("{vocab_size} " + f"{settings.size} leaves no room for learned pieces after the {reserved} "
                           "reserved ids of {kind} " + f"{settings.kind} ({what}); give more than {reserved}",
                           owner=VocabSettings)


def train_vocab(settings: VocabSettings, output: Path) -> Path:
    """Train the vocabulary `settings` ask for into `output` (an existing, empty folder); returns the folder."""
    files, size, progress = settings.input, settings.size, settings.progress
    if settings.kind == "bpe":
        from bertforge.tokenization.bpe import train_bpe
        return train_bpe(files, output, vocab_size=size, min_frequency=settings.min_frequency,
                         skip_bad_lines=settings.skip_bad_lines, show_progress=progress)
    if settings.xlnet:
        from bertforge.tokenization.xlnet import train_xlnet_sentencepiece
        return train_xlnet_sentencepiece(files, output, vocab_size=size, do_lower_case=not settings.cased,
                                         skip_bad_lines=settings.skip_bad_lines)
    if settings.kind == "sentencepiece":
        from bertforge.tokenization.sentencepiece import train_sentencepiece
        return train_sentencepiece(files, output, vocab_size=size, do_lower_case=not settings.cased,
                                   keep_accents=settings.cased, skip_bad_lines=settings.skip_bad_lines,
                                   show_progress=progress)
    from bertforge.tokenization.train import train_wordpiece
    return train_wordpiece(files, output, vocab_size=size, lowercase=not settings.cased,
                           min_frequency=settings.min_frequency, num_unused=settings.unused,
                           skip_bad_lines=settings.skip_bad_lines, show_progress=progress)
