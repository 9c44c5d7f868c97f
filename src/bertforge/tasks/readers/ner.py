"""Reader for a user's own NER data: CoNLL-style column text, or records of tokens and tags.

Records are JSON Lines, Parquet, Arrow or a `datasets` save_to_disk folder (`readers.rows`), one sentence per
record: a list of tokens and a list of tags of the same length, as `datasets`' conll2003 has them (`tokens`,
`ner_tags`). Tags are names (`"B-PER"`) or integer ids whose names the file's features give (a `datasets`
ClassLabel, which Parquet and Arrow files written by `datasets` carry in their schema); ids without names are
refused, since nothing says which id is which tag. Either way the tags are names once read: the same sentences
give the same examples, label list and features in every format.

Any BIO/BIOES tag set works (`B-DRUG`, `S-GENE`, ...); the train file defines it (`ner_label_list`)
and an eval file must use tags of that set.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from bertforge.tasks.readers.base import BadRows, ReadResult, finish, split_name
from bertforge.tasks.readers.conll import NerSentence, ner_label_list, read_conll, tag_problem
from bertforge.tasks.readers.errors import DataError, show
from bertforge.tasks.readers.labels import clean_label, refuse_case_variants, unknown_label
from bertforge.tasks.readers.rows import COLUMNAR, file_format, read_records

TOKEN_KEYS = ("tokens", "words")
TAG_KEYS = ("tags", "ner_tags", "labels")
RECORD_FORMATS = ("jsonl",) + COLUMNAR


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
    """Read NER sentences: column text, or records (`.jsonl`/`.json`, `.parquet`, `.arrow`, a `datasets` folder).

    Column text: word in the first column, tag in the last, blank line between sentences,
    `-DOCSTART-` lines optional. Records: one per sentence with a token list (column or key
    `text_column`, default `tokens` or `words`) and a tag list of the same length (`label_column`,
    default `tags`, `ner_tags` or `labels`). Without `label_list` the tag set is taken from this
    file; with it (the train file's set, from `label_source`) a tag outside it is a bad sentence.
    `format` ("conll", "jsonl", "parquet", "arrow", "datasets") overrides the guess from the name.
    """
    path = Path(path)
    fmt = format or _guess_format(path)
    if fmt == "conll":
        return read_conll(path, label_list=label_list, skip_bad_rows=skip_bad_rows, any_tags=True,
                          label_source=label_source)
    if fmt not in RECORD_FORMATS:
        raise ValueError(f"NER format must be one of conll, {', '.join(RECORD_FORMATS)}; got {fmt!r}")
    records = read_records(path, fmt)
    token_keys = records.require("the tokens of each sentence", [text_column] if text_column else list(TOKEN_KEYS))
    tag_keys = records.require("the tag of each token", [label_column] if label_column else list(TAG_KEYS))
    bad = BadRows(skip_bad_rows, unit="sentences")
    split = split_name(path)
    allowed = set(label_list) if label_list is not None else None
    sentences: list[NerSentence] = []
    saw_rows = False
    for lineno, record in records.rows:
        saw_rows = True
        try:
            if isinstance(record, DataError):
                raise record
            words, tags = _sentence(record, path, lineno, token_keys, tag_keys, records.class_names)
            for tag in tags:
                problem = tag_problem(tag) if allowed is None else None
                if problem:
                    raise DataError(path, lineno, tag_keys[0], problem, show(tag))
                if allowed is not None and tag not in allowed:
                    raise unknown_label(path, lineno, tag_keys[0], tag, list(label_list or []), label_source,
                                        what="tag")
        except DataError as err:
            bad.handle(err)
            continue
        sentences.append(NerSentence(f"{split}-{len(sentences) + bad.count}", words, tags, lineno, 0))
    if label_list is None:
        refuse_case_variants(path, tag_keys[0], ((t, s.line) for s in sentences for t in s.tags), "tag")
    labels = list(label_list) if label_list is not None else ner_label_list(
        t for s in sentences for t in s.tags)
    return finish(path, sentences, labels, bad, saw_rows=saw_rows)


def _guess_format(path: Path) -> str:
    fmt = file_format(path)
    if fmt == "csv":
        raise DataError(path, None, None, "NER data: CoNLL columns (one word per line, its tag last; .txt, .conll, "
                        ".tsv) or records of tokens and tags (.jsonl, .parquet, .arrow, a `datasets` folder)",
                        "a .csv table")
    return fmt if fmt in RECORD_FORMATS else "conll"


def _sentence(record: dict[str, Any], path: Path, lineno: int, token_keys: list[str], tag_keys: list[str],
              class_names: dict[str, list[str]]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    words = _field(record, token_keys, path, lineno)
    tags_key, tags = _present(record, tag_keys, path, lineno)
    names = class_names.get(tags_key)
    if names is not None and isinstance(tags, list) and all(_is_id(t) for t in tags):
        if not all(0 <= t < len(names) for t in tags):
            raise DataError(path, lineno, tags_key, f"tag ids 0-{len(names) - 1} (the file's {len(names)} tag names)",
                            show(tags))
        tags = [names[t] for t in tags]
    elif isinstance(tags, list) and tags and all(_is_id(t) for t in tags):
        raise DataError(path, lineno, tags_key, "tag names (integer tag ids need their names in the file's "
                        "features: a `datasets` ClassLabel)", show(tags))
    tags = [clean_label(tag) for tag in _strings(tags_key, tags, path, lineno)]
    if not words:
        raise DataError(path, lineno, token_keys[0], "at least one token", "an empty list")
    if len(words) != len(tags):
        raise DataError(path, lineno, tags_key, f"one tag per token ({len(words)})", str(len(tags)))
    return tuple(words), tuple(tags)


def _is_id(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _present(record: dict[str, Any], keys: list[str], path: Path, lineno: int) -> tuple[str, Any]:
    found = next((k for k in keys if k in record), None)
    if found is None:
        raise DataError(path, lineno, keys[0], f"a key named one of {keys}", show(list(record)))
    return found, record[found]


def _field(record: dict[str, Any], keys: list[str], path: Path, lineno: int) -> list[str]:
    return _strings(*_present(record, keys, path, lineno), path, lineno)


def _strings(key: str, value: Any, path: Path, lineno: int) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
        raise DataError(path, lineno, key, "a list of non-empty strings", "nothing" if value is None else show(value))
    return value
