"""The data of embedding training and evaluation: pairs, triplets and scored pairs from CSV/TSV/JSONL, and
retrieval sets in the BEIR layout.

Columns are found by the names sentence-transformers' datasets use (anchor/positive/negative, sentence1/
sentence2/score, query/document) unless named with the column options. Every bad row stops the read naming
the file, line and field.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bertforge.settings import SettingError
from bertforge.tasks.readers.base import iter_lines
from bertforge.tasks.readers.errors import DataError, show
from bertforge.tasks.readers.generic import _text
from bertforge.tasks.readers.rows import FORMATS, read_records

ANCHOR_NAMES = ("anchor", "query", "question", "sentence1", "text")
POSITIVE_NAMES = ("positive", "document", "passage", "sentence2", "text_pair")
NEGATIVE_NAMES = ("negative",)
SCORE_NAMES = ("score", "label")


@dataclass(frozen=True)
class PairExample:
    """Two texts that belong together (and a text that does not), or two texts with a similarity score."""

    anchor: str
    positive: str
    negative: str | None = None
    score: float | None = None
    line: int | None = None


def read_pairs(path: str | Path, *, anchor_column: str | None = None, positive_column: str | None = None,
               negative_column: str | None = None, score_column: str | None = None) -> list[PairExample]:
    """(anchor, positive[, negative]) or (sentence1, sentence2, score) rows of a CSV, TSV or JSONL file (.gz too).
    A score column makes scored pairs; the file may not have both a score and a negative."""
    path = Path(path)
    fmt = FORMATS.get(Path(path.name.removesuffix(".gz")).suffix.lower())
    if fmt is None:
        raise ValueError(f"{path}: expected a .csv, .tsv or .jsonl file of text pairs, got a "
                         f"{path.suffix or 'suffix-less'} file")
    if not path.is_file():
        raise ValueError(f"{path}: no such file")
    examples: list[PairExample] = []
    keys: tuple[str, str, str | None, str | None] | None = None
    records = read_records(path, fmt)
    if records.columns is not None:  # a header or schema: the columns are chosen from it
        keys = _pick(dict.fromkeys(records.columns), path, records.header_line, anchor_column, positive_column,
                     negative_column, score_column)
    for line, record in records.rows:
        if isinstance(record, DataError):
            raise record
        if keys is None:
            keys = _pick(record, path, line, anchor_column, positive_column, negative_column, score_column)
        anchor, positive, negative, score = keys
        examples.append(PairExample(
            _text(record, anchor, path, line), _text(record, positive, path, line),
            _text(record, negative, path, line) if negative else None,
            _score(record, score, path, line) if score else None, line))
    if not examples:
        raise ValueError(f"{path}: no pairs (expected rows with an anchor and a positive text, or two sentences "
                         "and a score)")
    return examples


def _pick(record: dict[str, Any], path: Path, line: int | None, anchor: str | None, positive: str | None,
          negative: str | None, score: str | None) -> tuple[str, str, str | None, str | None]:
    """The columns of each role: the ones named, or the first usual name the header/first object has."""
    def find(given: str | None, names: tuple[str, ...], role: str, required: bool) -> str | None:
        if given is not None:
            if given not in record:
                raise DataError(path, line, given, f"a {role} column {given!r}", f"columns {show(list(record))}")
            return given
        hit = next((n for n in names if n in record), None)
        if hit is None and required:
            raise DataError(path, line, None, f"a {role} column named one of {list(names)} (or name it with "
                            f"--{role}-column)", f"columns {show(list(record))}")
        return hit

    a = find(anchor, ANCHOR_NAMES, "anchor", True)
    p = find(positive, tuple(n for n in POSITIVE_NAMES if n != a), "positive", True)
    n = find(negative, NEGATIVE_NAMES, "negative", False)
    s = find(score, SCORE_NAMES, "score", False)
    if n is not None and s is not None:
        raise DataError(path, line, None, "pairs with a negative, or pairs with a score, not both",
                        f"columns {n!r} and {s!r}")
    return a, p, n, s  # type: ignore[return-value]


def _score(record: dict[str, Any], key: str, path: Path, line: int) -> float:
    value = record.get(key)
    try:
        score = float(value) if not isinstance(value, bool) else float("nan")  # type: ignore[arg-type]
    except (TypeError, ValueError):
        score = float("nan")
    if score != score or score in (float("inf"), float("-inf")):
        raise DataError(path, line, key, "a finite number", "nothing" if value is None else show(value))
    return score


# ---- retrieval sets (BEIR layout) ----------------------------------------------------------------------------
@dataclass
class RetrievalSet:
    """A corpus, queries and their relevant documents (qrels: query id -> {document id: relevance})."""

    corpus: dict[str, str]
    queries: dict[str, str]
    qrels: dict[str, dict[str, int]]


def read_beir(folder: str | Path, split: str = "test") -> RetrievalSet:
    """`corpus.jsonl` ({"_id", "title", "text"}), `queries.jsonl` ({"_id", "text"}) and `qrels/<split>.tsv`
    (query-id, corpus-id, score with a header), as BEIR lays a dataset out. A document's title, when it has one,
    comes before its text. Only the queries with a relevant document are kept."""
    root = Path(folder)
    if not root.is_dir():
        raise ValueError(f"{root}: expected a folder with corpus.jsonl, queries.jsonl and qrels/ (BEIR layout)")
    corpus = {doc_id: (f"{rec['title']} {text}".strip() if rec.get("title") else text)
              for doc_id, text, rec in _jsonl_texts(_file(root, "corpus.jsonl"))}
    queries = {qid: text for qid, text, _ in _jsonl_texts(_file(root, "queries.jsonl"))}
    qrels = _read_qrels(_qrels_file(root, split), corpus, queries)
    return RetrievalSet(corpus, {q: queries[q] for q in qrels}, qrels)


def _file(root: Path, name: str) -> Path:
    for candidate in (root / name, root / (name + ".gz")):
        if candidate.is_file():
            return candidate
    raise ValueError(f"{root}: no {name} (a BEIR folder has corpus.jsonl, queries.jsonl and qrels/<split>.tsv)")


def _qrels_file(root: Path, split: str) -> Path:
    wanted = root / "qrels" / f"{split}.tsv"
    if wanted.is_file():
        return wanted
    have = sorted(p.stem for p in (root / "qrels").glob("*.tsv")) if (root / "qrels").is_dir() else []
    raise SettingError("{root}: no qrels/{name}.tsv" + ("; it has the splits {have} ({split})" if have
                                                        else " (BEIR layout: qrels/<split>.tsv)"),
                       root=root, name=split, have=", ".join(have))


def _jsonl_texts(path: Path):
    """(id, text, record) per object of a BEIR corpus or queries file; an id given twice is refused (the later
    document would silently replace the earlier one)."""
    first: dict[str, int] = {}
    for line, text in iter_lines(path):
        if not text.strip():
            continue
        try:
            record = json.loads(text)
        except json.JSONDecodeError as err:
            raise DataError(path, line, None, "one JSON object per line", f"invalid JSON ({err.msg})") from None
        if not isinstance(record, dict):
            raise DataError(path, line, None, "a JSON object", type(record).__name__)
        doc_id = record.get("_id")
        if not isinstance(doc_id, (str, int)) or isinstance(doc_id, bool) or str(doc_id) == "":
            raise DataError(path, line, "_id", "a string or integer id", show(doc_id))
        value = record.get("text")
        if not isinstance(value, str) or not (value.strip() or record.get("title")):
            raise DataError(path, line, "text", "non-empty text", "nothing" if value is None else show(value))
        if first.setdefault(str(doc_id), line) != line:
            raise DataError(path, line, "_id", "each id once", f"{show(doc_id)} again (first on line "
                            f"{first[str(doc_id)]})")
        yield str(doc_id), value, record


def _read_qrels(path: Path, corpus: dict[str, str], queries: dict[str, str]) -> dict[str, dict[str, int]]:
    qrels: dict[str, dict[str, int]] = {}
    for line, text in iter_lines(path):
        fields = text.split("\t")
        if line == 1 and fields[:2] == ["query-id", "corpus-id"]:
            continue
        if not text.strip():
            continue
        if len(fields) != 3:
            raise DataError(path, line, None, "3 tab-separated fields (query-id, corpus-id, score)", str(len(fields)))
        qid, doc_id, score = fields
        try:
            relevance = int(float(score))
        except (ValueError, OverflowError):  # not a number, nan; inf
            raise DataError(path, line, "score", "an integer relevance", show(score)) from None
        if qid not in queries:
            raise DataError(path, line, "query-id", "an id of queries.jsonl", show(qid))
        if doc_id not in corpus:
            raise DataError(path, line, "corpus-id", "an id of corpus.jsonl", show(doc_id))
        if relevance > 0:
            qrels.setdefault(qid, {})[doc_id] = relevance
    if not qrels:
        raise ValueError(f"{path}: no relevant (score > 0) query-document pairs")
    return qrels


def split_file(folder: str | Path, split: str) -> Path:
    """`folder/<split>.tsv` (or .csv, .jsonl, with .gz): a split of scored pairs such as GLUE's STS-B folder."""
    root = Path(folder)
    for suffix in (".tsv", ".csv", ".jsonl"):
        for candidate in (root / f"{split}{suffix}", root / f"{split}{suffix}.gz"):
            if candidate.is_file():
                return candidate
    raise SettingError("{root}: no {name}.tsv, {name}.csv or {name}.jsonl ({split} names the file)", root=root,
                       name=split)
