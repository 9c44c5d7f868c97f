"""Documents out of every input `prepare` reads, cut into chunks for the tokenising workers.

A plain text file holds documents separated by blank lines (`corpus`). A record file (JSON Lines, CSV/TSV,
Parquet, Arrow, a `datasets` folder) holds one document per row in its text column, or, with a document
column, one per run of consecutive rows sharing an id (a corpus stored a paragraph per row); the lines of a
record's text are the lines of a text file, so the same text gives the same documents in every format.

Chunks are cut by text bytes, in input order, and carry what reading them counted: the sequence of chunks
depends on the inputs and `chunk_bytes` only, which is what makes the output independent of the number of
workers, and what lets an interrupted run skip the chunks it had finished.

A text file's chunks are blocks of its bytes (`text_blocks`: about `chunk_bytes` each, ending before a blank
line), found by scanning the bytes for blank lines; the worker that tokenises a block decodes it and splits it
into lines and documents (`block_documents`). Decoding and splitting lines is a third of `prepare`'s CPU time
on text of short lines; done in the main process it would cap what more workers give.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

from bertforge.data.corpus import FORMATS, LineCounts, detect_format, detect_layout, iter_raw_documents
from bertforge.data.records import RecordError, arrow_files, expand_inputs, iter_rows, show

MAX_DOCUMENT_BYTES = 1 << 24  # a document growing past this (no blank line, or one id for ever) is cut
_BLANK_LINE = re.compile(rb"\n[ \t\r\f\v]*\n")  # a line end, then a line of ASCII white space and its end
_SCAN_BYTES = 1 << 20


@dataclass(frozen=True)
class Columns:
    """Which fields of a record file hold the text and the document id, and what to do with a bad row."""
    text: str = "text"
    document: str | None = None
    skip_bad_rows: bool = False


@dataclass
class Source:
    """One input: a text file or a record file, with the layout of its text (sentences or paragraphs)."""
    path: Path
    kind: str
    fmt: str = "sentences"
    reason: str = "given"

    def bytes_on_disk(self) -> int:
        if self.kind == "datasets":
            return sum(p.stat().st_size for p in arrow_files(self.path))
        return self.path.stat().st_size


@dataclass
class Chunk:
    """Documents (raw lines) of one input, with what reading them counted."""
    docs: list[list[str]]
    fmt: str
    text_bytes: int                # UTF-8 bytes of text read for these documents (and the blank lines between)
    counts: LineCounts             # repairs made while reading: documents cut, bad rows skipped
    on_disk: int                   # on-disk bytes of all inputs read when the chunk was complete
    bad_rows: list[str] = field(default_factory=list)  # the first bad rows skipped, as messages
    block: TextBlock | None = None  # bytes of a text file its worker splits (`docs` empty, `text_bytes` 0 until then)


@dataclass(frozen=True)
class TextBlock:
    """Whole lines of a text file, as bytes; `first`: they begin the file (a byte-order mark there is dropped);
    `cut`: they end inside a document that ran past `MAX_DOCUMENT_BYTES` without a blank line."""
    data: bytes
    first: bool
    cut: bool = False


def open_sources(inputs: Any, input_format: str, columns: Columns) -> list[Source]:
    """Expand the inputs and decide each one's layout: given, or guessed from its first lines."""
    sources = [Source(path, kind) for path, kind in expand_inputs(inputs)]
    for source in sources:
        if input_format != "auto":
            source.fmt, source.reason = input_format, "given"
        elif source.kind == "text":
            source.fmt, source.reason = detect_format(source.path)
        else:
            source.fmt, source.reason = detect_layout(_sample_lines(source, columns))
        assert source.fmt in FORMATS
    return sources


def _sample_lines(source: Source, columns: Columns) -> Iterator[str]:
    rows = iter_rows(source.path, source.kind, [columns.text])
    for _, row in rows:
        text = None if isinstance(row, RecordError) else row.get(columns.text)
        if isinstance(text, str):
            yield from text.split("\n")


def iter_chunks(sources: list[Source], columns: Columns, chunk_bytes: int,
                progress: Callable[[int], object] | None = None) -> Iterator[Chunk]:
    """The documents of every source, in order, in chunks of about `chunk_bytes` of text."""
    on_disk = 0

    def advance(nbytes: int) -> None:
        nonlocal on_disk
        on_disk += nbytes
        if progress is not None:
            progress(nbytes)

    for source in sources:
        if source.kind == "text":
            found = False
            for block in text_blocks(source.path, chunk_bytes, progress=advance):
                found = True
                yield Chunk([], source.fmt, 0, LineCounts(), on_disk, block=block)
            if not found:  # an empty file is a chunk of nothing
                yield Chunk([], source.fmt, 0, LineCounts(), on_disk)
            continue
        counts = LineCounts()
        bad: list[str] = []
        docs: list[list[str]] = []
        size = text_bytes = 0
        documents = record_documents(source, columns, counts, bad, advance)
        for lines, nbytes in documents:
            text_bytes += nbytes
            if lines:
                docs.append(lines)
                size += nbytes
            if size >= chunk_bytes:
                yield Chunk(docs, source.fmt, text_bytes, counts.take(), on_disk, bad[:])
                docs, size, text_bytes = [], 0, 0
                bad.clear()
        yield Chunk(docs, source.fmt, text_bytes, counts.take(), on_disk, bad[:])


def text_blocks(path: Path, chunk_bytes: int, max_document_bytes: int = MAX_DOCUMENT_BYTES,
                progress: Callable[[int], object] | None = None) -> Iterator[TextBlock]:
    """The (decompressed) bytes of a text file in blocks that cover it in order: each about `chunk_bytes` long
    and ending just before a blank line, so no document spans two. Where no blank line comes within
    `max_document_bytes` past that size, the block ends at a line end instead (`cut`). `progress` receives
    on-disk byte counts."""
    from bertforge.textio import open_binary
    with open_binary(path) as (raw, stream):
        pending, first, eof, reported = b"", True, False, 0
        while pending or not eof:
            end, cut = _block_end(pending, chunk_bytes, max_document_bytes, eof)
            if end is None:  # not enough read yet to place the end
                block = stream.read(max(_SCAN_BYTES, chunk_bytes - len(pending)))
                eof = not block
                pending += block
                if progress is not None:
                    progress(raw.tell() - reported)
                    reported = raw.tell()
                continue
            yield TextBlock(pending[:end], first, cut)
            pending, first = pending[end:], False


def _block_end(pending: bytes, chunk_bytes: int, max_document_bytes: int, eof: bool) -> tuple[int | None, bool]:
    """Where the next block of `pending` ends: the start of the first blank line at or past `chunk_bytes`, else
    (once `max_document_bytes` further were read) the first line end there, with cut=True; None: read more."""
    if len(pending) <= chunk_bytes:
        return (len(pending), False) if eof else (None, False)
    found = _BLANK_LINE.search(pending, chunk_bytes - 1)  # a line end just before the size still counts
    if found:
        return found.start() + 1, False
    if len(pending) - chunk_bytes >= max_document_bytes:
        line_end = pending.find(b"\n", chunk_bytes - 1)
        if line_end >= 0 and line_end + 1 < len(pending):
            return line_end + 1, True
    return (len(pending), False) if eof else (None, False)


def block_documents(block: TextBlock, max_document_bytes: int = MAX_DOCUMENT_BYTES
                    ) -> tuple[list[list[str]], int, LineCounts]:
    """(documents, text bytes, counts) of one block: its lines exactly as `read_lines` gives them for the whole
    file (split on "\\n" only, a "\\r" before it dropped, bytes that are not UTF-8 kept as surrogates), cut
    into documents as `iter_raw_documents` cuts them."""
    text = block.data.decode("utf-8", "surrogateescape")
    lines = text.split("\n")
    last = lines.pop()  # "" when the block ends with a line end, which it does except at the end of a file
    lines = [line[:-1] if line.endswith("\r") else line for line in lines]
    if last:
        lines.append(last)
    counts = LineCounts()
    docs, text_bytes = [], 0
    for doc, nbytes in iter_raw_documents(lines, counts, max_document_bytes, strip_bom=block.first):
        text_bytes += nbytes
        if doc:
            docs.append(doc)
    if block.cut:
        counts.documents_cut += 1
    return docs, text_bytes, counts


def record_documents(source: Source, columns: Columns, counts: LineCounts, bad: list[str],
                     progress: Callable[[int], object] | None = None) -> Iterator[tuple[list[str], int]]:
    """(lines, bytes) per document of a record file: a row's text split into lines (blank ones dropped), rows
    with the same document id in a row joined. A bad row raises `RecordError`, or with `skip_bad_rows` is
    counted and its message kept in `bad` (the first few)."""
    wanted = [columns.text] + ([columns.document] if columns.document else [])
    doc: list[str] = []
    nbytes = 0
    current: Any = None
    for place, row in iter_rows(source.path, source.kind, wanted, progress):
        try:
            text, ident = _row_values(source.path, place, row, columns)
        except RecordError as err:
            if not columns.skip_bad_rows:
                raise
            counts.bad_rows += 1
            if len(bad) < 5:
                bad.append(str(err))
            continue
        if nbytes and (ident is None or ident != current or nbytes >= MAX_DOCUMENT_BYTES):
            if ident is not None and ident == current:
                counts.documents_cut += 1
            yield _finished(doc, counts), nbytes
            doc, nbytes = [], 0
        current = ident
        doc.extend(line for line in text.split("\n") if line.strip())
        nbytes += len(text.encode("utf-8", "surrogatepass")) + 1
    if nbytes:
        yield _finished(doc, counts), nbytes


def _finished(doc: list[str], counts: LineCounts) -> list[str]:
    if not doc:
        counts.empty_documents += 1  # a record with an empty text
    return doc


def _row_values(path: Path, place: str, row: dict[str, Any] | RecordError, columns: Columns) -> tuple[str, Any]:
    """(text, document id or None) of one row, or the RecordError that says what is wrong with it."""
    if isinstance(row, RecordError):
        raise row
    text = row.get(columns.text)
    if not isinstance(text, str):
        got = "nothing (null or missing)" if text is None else f"{type(text).__name__} {show(text)}"
        raise RecordError(path, place, columns.text, "a string", got)
    if columns.document is None:
        return text, None
    ident = row.get(columns.document)
    if ident is None or isinstance(ident, (list, dict)):
        got = "nothing (null or missing)" if ident is None else f"{type(ident).__name__} {show(ident)}"
        raise RecordError(path, place, columns.document, "a document id (string or number)", got)
    return text, ident

