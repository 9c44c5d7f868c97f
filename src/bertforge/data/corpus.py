"""Reading raw pre-training text: documents out of files, and the per-line repairs we count.

Both input layouts separate documents by a blank line. In the ``sentences`` layout (BERT's original input)
every other line is one sentence; in the ``paragraphs`` layout (Wikipedia dumps) every line is a paragraph
that `split_sentences` cuts. For the shared Wikipedia file the first line of a block is the article title:
we keep it as the first "sentence" of the document. It is a short, real piece of the article (like the
section headings that stay in the body), and keeping it means no layout needs a special case.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Callable, Iterable, Iterator

from bertforge.data.sentences import split_sentences
from bertforge.textio import iter_lines

FORMATS = ("sentences", "paragraphs")

# Undecodable bytes come out of `surrogateescape` as lone surrogates (and JSON may spell one out as "\ud800");
# C0/C1 controls (but tab) are garbage.
_BAD_CHARS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff]")
_SURROGATES = re.compile("[\ud800-\udfff]+")
_CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]+")
# `prepare` refuses an input in which more than this share of the non-blank lines is damage (undecodable, or
# nothing left after cleaning): such a file is binary, in another encoding or mislabelled, not a corpus.
MAX_DAMAGED_SHARE = 0.5


@dataclass
class LineCounts:
    """What was repaired or dropped while reading; stored in the manifest under ``bad_lines``."""
    invalid_utf8: int = 0          # lines with bytes that are not UTF-8 (each bad byte run became U+FFFD)
    control_chars: int = 0         # lines from which control characters were removed
    empty_documents: int = 0       # documents with no text left (skipped)
    documents_cut: int = 0         # documents over `max_document_bytes` (no blank line for too long), cut up
    long_sentences_split: int = 0  # sentences longer than a sequence, cut into pieces that fit
    bad_rows: int = 0              # records skipped (--skip-bad-rows): a missing or non-string text, bad JSON
    # totals for the damage threshold, kept out of `bad_lines` (the manifest has them under `damaged_lines`)
    emptied_lines: int = field(default=0, metadata={"total": True})  # nothing left after cleaning (skipped)
    lines: int = field(default=0, metadata={"total": True})          # non-blank lines cleaned
    damaged_lines: int = field(default=0, metadata={"total": True})  # of which undecodable or emptied

    def add(self, other: "LineCounts") -> None:
        for f in fields(self):
            setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))

    def take(self) -> "LineCounts":
        """A copy of the counts so far, which start again from zero: what one chunk of reading did."""
        taken = LineCounts(**{f.name: getattr(self, f.name) for f in fields(self)})
        for f in fields(self):
            setattr(self, f.name, 0)
        return taken

    def as_dict(self) -> dict[str, int]:
        return {f.name: getattr(self, f.name) for f in fields(self) if not f.metadata.get("total")}

    @property
    def damaged_share(self) -> float:
        return self.damaged_lines / self.lines if self.lines else 0.0


def clean_line(line: str, counts: LineCounts) -> str:
    """Repair one line (undecodable bytes -> U+FFFD, control characters removed) and count what was done."""
    counts.lines += 1
    if _BAD_CHARS.search(line) is None:  # the common case costs one regex scan
        return line.strip()
    damaged = False
    if _SURROGATES.search(line):
        counts.invalid_utf8 += 1
        damaged = True
        line = _SURROGATES.sub("\ufffd", line)
    if _CONTROLS.search(line):
        counts.control_chars += 1
        line = _CONTROLS.sub(" ", line)
    line = line.strip()
    if not line:
        counts.emptied_lines += 1
        damaged = True
    counts.damaged_lines += damaged
    return line


def read_lines(path: str | Path, progress: Callable[[int], object] | None = None) -> Iterator[str]:
    """Lines of a plain / .gz / .xz / .bz2 file without terminators. Bytes that are not UTF-8 come through as
    lone surrogates, for `clean_line` to count and repair; `progress` receives on-disk byte counts."""
    return iter_lines(path, errors="surrogateescape", progress=progress)


def iter_raw_documents(lines: Iterable[str], counts: LineCounts | None = None,
                       max_document_bytes: int = 1 << 24, strip_bom: bool = True) -> Iterator[tuple[list[str], int]]:
    """Yield (lines, bytes) per blank-line-separated document; lines are raw (uncleaned) and `bytes` counts
    the UTF-8 bytes read for it, one per line end, blank lines included. A document growing past
    `max_document_bytes` (a file with no blank lines at all, say) is cut there, so memory stays bounded
    whatever the input. `strip_bom`: the lines begin a file, whose byte-order mark is dropped."""
    doc: list[str] = []
    nbytes = doc_bytes = 0
    first = strip_bom
    for line in lines:
        size = len(line.encode("utf-8", "surrogateescape")) + 1
        nbytes += size
        if first:
            line = line.lstrip("\ufeff")  # a byte-order mark is not text
            first = False
        if line.strip():
            doc.append(line)
            doc_bytes += size
            if doc_bytes < max_document_bytes:
                continue
            if counts is not None:
                counts.documents_cut += 1
        if doc:
            yield doc, nbytes
            doc, nbytes, doc_bytes = [], 0, 0
    if doc or nbytes:
        yield doc, nbytes


def document_sentences(lines: list[str], fmt: str, counts: LineCounts) -> list[str]:
    """The sentences of one document, after cleaning, in the given layout."""
    out: list[str] = []
    for line in lines:
        line = clean_line(line, counts)
        if not line:
            continue
        if fmt == "paragraphs":
            out.extend(split_sentences(line))
        else:
            out.append(line)
    return out


def detect_format(path: str | Path, sample_lines: int = 2000) -> tuple[str, str]:
    """Guess the layout of a file from its first lines; returns (format, a one-line reason).

    Sentence-per-line text rarely has a line that our splitter cuts (a few % at most, from its mistakes);
    paragraph-per-line text has many.
    """
    lines = read_lines(path)
    try:
        return detect_layout(lines, sample_lines)
    finally:
        lines.close()


def detect_layout(lines: Iterable[str], sample_lines: int = 2000) -> tuple[str, str]:
    """`detect_format` for lines from anywhere (the text column of a record file)."""
    n = multi = chars = 0
    for line in lines:
        line = line.strip()
        if not line:
            continue
        n += 1
        chars += len(line)
        multi += len(split_sentences(line)) > 1
        if n >= sample_lines:
            break
    if n == 0:
        return "sentences", "no text to sample"
    share = multi / n
    fmt = "paragraphs" if share >= 0.15 else "sentences"
    return fmt, f"{share:.0%} of {n} sampled lines hold several sentences (mean {chars / n:.0f} characters)"
