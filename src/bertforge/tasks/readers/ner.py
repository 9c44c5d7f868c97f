"""Reader for a user's own NER data: CoNLL-style column text, or JSON Lines of tokens and tags.

Any BIO/BIOES tag set works (`B-DRUG`, `S-GENE`, ...); the train file defines it (`ner_label_list`)
and an eval file must use tags of that set.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Sequence

from bertforge.tasks.readers.base import BadRows, ReadResult, finish, iter_lines, split_name
from bertforge.tasks.readers.conll import NerSentence, ner_label_list, read_conll, tag_problem
from bertforge.tasks.readers.errors import DataError, show
from bertforge.tasks.readers.labels import clean_label, refuse_case_variants, unknown_label

TOKEN_KEYS = ("tokens", "words")
TAG_KEYS = ("tags", "ner_tags", "labels")


def read_ner(
    path: str | Path,
    *,
    label_list: Sequence[str] | None = None,
    label_source: str | None = None,
    text_column: str | None = None,
    label_column: str | None = None,
    format: str | None = None,
    skip_bad_rows: bool = False,
) -> ReadResult[NerSentence]:
    """Read NER sentences; `.jsonl`/`.json` are JSON Lines, anything else column text.

    Column text: word in the first column, tag in the last, blank line between sentences,
    `-DOCSTART-` lines optional. JSON Lines: one object per sentence with a token list (key
    `text_column`, default `tokens` or `words`) and a tag list of the same length (key
    `label_column`, default `tags`, `ner_tags` or `labels`). Without `label_list` the tag set is
    taken from this file; with it (the train file's set, from `label_source`) a tag outside it
    is a bad sentence.
    """
    path = Path(path)
    suffix = Path(path.name.removesuffix(".gz")).suffix.lower()
    if format is None and suffix == ".csv":
        raise DataError(path, None, None, "NER data: CoNLL columns (one word per line, its tag last; .txt, .conll, "
                        ".tsv) or JSON Lines of tokens and tags (.jsonl)", "a .csv table")
    fmt = format or ("jsonl" if suffix in (".jsonl", ".json") else "conll")
    if fmt not in ("conll", "jsonl"):
        raise ValueError(f"NER format must be 'conll' or 'jsonl', got {fmt!r}")
    if fmt == "conll":
        return read_conll(path, label_list=label_list, skip_bad_rows=skip_bad_rows, any_tags=True,
                          label_source=label_source)
    bad = BadRows(skip_bad_rows, unit="sentences")
    split = split_name(path)
    allowed = set(label_list) if label_list is not None else None
    sentences: list[NerSentence] = []
    saw_rows = False
    for lineno, line in iter_lines(path):
        if not line.strip():
            continue
        saw_rows = True
        try:
            words, tags = _sentence(line, path, lineno, text_column, label_column)
            for tag in tags:
                problem = tag_problem(tag) if allowed is None else None
                if problem:
                    raise DataError(path, lineno, label_column or "tags", problem, show(tag))
                if allowed is not None and tag not in allowed:
                    raise unknown_label(path, lineno, label_column or "tags", tag, list(label_list or []),
                                        label_source, what="tag")
        except DataError as err:
            bad.handle(err)
            continue
        sentences.append(NerSentence(f"{split}-{len(sentences) + bad.count}", words, tags, lineno, 0))
    if label_list is None:
        refuse_case_variants(path, label_column or "tags", ((t, s.line) for s in sentences for t in s.tags), "tag")
    labels = list(label_list) if label_list is not None else ner_label_list(
        t for s in sentences for t in s.tags)
    return finish(path, sentences, labels, bad, saw_rows=saw_rows)


def _sentence(line: str, path: Path, lineno: int, text_key: str | None,
              tag_key: str | None) -> tuple[tuple[str, ...], tuple[str, ...]]:
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as exc:
        raise DataError(path, lineno, None, "one JSON object per line", f"invalid JSON ({exc.msg})") from exc
    if not isinstance(obj, dict):
        raise DataError(path, lineno, None, "a JSON object", type(obj).__name__)
    words = _strings(obj, text_key, TOKEN_KEYS, path, lineno)
    tags = [clean_label(tag) for tag in _strings(obj, tag_key, TAG_KEYS, path, lineno)]
    if not words:
        raise DataError(path, lineno, text_key or "tokens", "at least one token", "an empty list")
    if len(words) != len(tags):
        raise DataError(path, lineno, tag_key or "tags", f"one tag per token ({len(words)})", str(len(tags)))
    return tuple(words), tuple(tags)


def _strings(obj: dict[str, Any], key: str | None, aliases: Sequence[str], path: Path, lineno: int) -> list[str]:
    names = [key] if key else list(aliases)
    found = next((k for k in names if k in obj), None)
    if found is None:
        raise DataError(path, lineno, names[0], f"a key named one of {names}", show(list(obj)))
    value = obj[found]
    if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
        raise DataError(path, lineno, found, "a list of non-empty strings", show(value))
    return value
