"""Reader for a user's own extractive QA data: SQuAD-format JSON, or records of questions.

Records are JSON Lines, Parquet, Arrow or a `datasets` save_to_disk folder (`readers.rows`), one question
per record, in the flat layout of `datasets`' squad: `question`, `context` and `answers`, either
`{"text": [...], "answer_start": [...]}` (the `datasets` layout) or SQuAD style
(`[{"text": ..., "answer_start": ...}]`); `id`, `title` and `is_impossible` are optional. An
empty answer list (or `is_impossible: true`) makes the question unanswerable (SQuAD 2.0 style).
Answers are checked against the context the same way as in SQuAD files (`AnswerCheck`).
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from bertforge.tasks.readers.base import BadRows, finish, iter_lines, split_name
from bertforge.tasks.readers.errors import DataError, show
from bertforge.tasks.readers.rows import COLUMNAR, file_format, read_records
from bertforge.tasks.readers.squad import AnswerCheck, SquadAnswer, SquadExample, SquadReadResult, read_squad

RECORD_FORMATS = ("jsonl",) + COLUMNAR


def read_qa(path: str | Path, *, format: str | None = None, skip_bad_rows: bool = False) -> SquadReadResult:
    """Read QA examples from SQuAD JSON (`format="squad"`) or records (`"jsonl"`, `"parquet"`, `"arrow"`,
    `"datasets"`).

    Without `format`: `.jsonl`, `.parquet`, `.arrow` and `datasets` folders are records; `.json` is
    SQuAD JSON unless its first line is already a whole JSON object without a `data` key (JSON
    Lines saved as `.json`).
    `article_index` groups questions on the same context (SQuAD: the same article), so a held-out
    split never puts one paragraph on both sides.
    """
    path = Path(path)
    fmt = format or _guess_format(path)
    if fmt == "squad":
        return read_squad(path, skip_bad_rows=skip_bad_rows)
    if fmt not in RECORD_FORMATS:
        raise ValueError(f"QA format must be one of squad, {', '.join(RECORD_FORMATS)}; got {fmt!r}")
    records = read_records(path, fmt)
    for key in ("question", "context", "answers"):
        records.require("SQuAD's flat layout: question, context, answers{text, answer_start}", [key])
    bad = BadRows(skip_bad_rows, unit="questions")
    check = AnswerCheck()
    split = split_name(path)
    examples: list[SquadExample] = []
    groups: dict[str, int] = {}
    seen: set[str] = set()
    saw_rows = False
    for lineno, record in records.rows:
        saw_rows = True
        try:
            if isinstance(record, DataError):
                raise record
            ex = _example(record, path, lineno, f"{split}-{lineno}", seen)
            ex = check.anchor(ex, path, f"question id {ex.qid!r}", lineno)
        except DataError as err:
            bad.handle(err)
            continue
        seen.add(ex.qid)
        group = groups.setdefault(ex.context, len(groups))
        examples.append(SquadExample(ex.qid, ex.question, ex.context, ex.answers, ex.is_impossible,
                                     title=ex.title, article_index=group))
    v2 = any(ex.is_impossible for ex in examples)
    return finish(path, examples, None, bad, saw_rows=saw_rows,  # type: ignore[return-value]
                  result_type=SquadReadResult, version="2.0" if v2 else "1.1", n_articles=len(groups),
                  n_paragraphs=len(groups),
                  answer_mismatches=check.mismatches, answers_reanchored=check.reanchored,
                  mismatch_samples=check.samples)


def _guess_format(path: Path) -> str:
    suffix = Path(path.name.removesuffix(".gz")).suffix.lower()
    fmt = file_format(path)
    if fmt in RECORD_FORMATS and suffix != ".json":
        return fmt
    if suffix != ".json":
        raise ValueError(f"{path}: QA data must be SQuAD-format .json, or records: .jsonl, .parquet, .arrow or a "
                         "`datasets` folder")
    for _, line in iter_lines(path):
        if line.strip():
            try:
                first = json.loads(line)
            except json.JSONDecodeError:
                return "squad"  # a pretty-printed or single-line document: parsed (and blamed) as a whole
            return "jsonl" if isinstance(first, dict) and "data" not in first else "squad"
    return "squad"


def _example(obj: dict[str, Any], path: Path, lineno: int, default_id: str, seen: set[str]) -> SquadExample:
    qid = obj.get("id")
    qid = default_id if qid is None else qid
    if not isinstance(qid, (str, int)) or isinstance(qid, bool):
        raise DataError(path, lineno, "id", "a string or integer id", show(qid))
    qid = str(qid)
    if qid in seen:
        raise DataError(path, lineno, "id", "a question id not used before", show(qid))
    texts = {}
    for key in ("question", "context"):
        value = obj.get(key)
        if not isinstance(value, str) or not value.strip():
            raise DataError(path, lineno, key, "non-empty text", "nothing" if value is None else show(value))
        texts[key] = value
    answers = _answers(obj.get("answers"), path, lineno)
    impossible = obj.get("is_impossible", not answers)
    if not isinstance(impossible, bool):
        raise DataError(path, lineno, "is_impossible", "true or false", show(impossible))
    if impossible and answers:
        raise DataError(path, lineno, "answers", "no answers for an is_impossible question", str(len(answers)))
    if not impossible and not answers:
        raise DataError(path, lineno, "answers", "at least one answer", "an empty list")
    title = obj.get("title", "")
    return SquadExample(qid, texts["question"], texts["context"], answers, impossible,
                        title=title if isinstance(title, str) else "")


def _answers(value: Any, path: Path, lineno: int) -> tuple[SquadAnswer, ...]:
    expected = 'a list of {"text", "answer_start"} or {"text": [...], "answer_start": [...]}'
    if value is None:
        raise DataError(path, lineno, "answers", expected, "nothing")
    if isinstance(value, dict):  # Hugging Face datasets layout: parallel lists
        texts, starts = value.get("text"), value.get("answer_start")
        if not isinstance(texts, list) or not isinstance(starts, list) or len(texts) != len(starts):
            raise DataError(path, lineno, "answers", expected + " of equal length", show(value))
        pairs = list(zip(texts, starts))
    elif isinstance(value, list):
        if not all(isinstance(a, dict) for a in value):
            raise DataError(path, lineno, "answers", expected, show(value))
        pairs = [(a.get("text"), a.get("answer_start")) for a in value]
    else:
        raise DataError(path, lineno, "answers", expected, show(value))
    out = []
    for k, (text, start) in enumerate(pairs):
        if not isinstance(text, str) or not text.strip():
            raise DataError(path, lineno, f"answers[{k}].text", "non-empty answer text", show(text))
        if not isinstance(start, int) or isinstance(start, bool) or start < 0:
            raise DataError(path, lineno, f"answers[{k}].answer_start", "a character offset >= 0", show(start))
        out.append(SquadAnswer(text, start))
    return tuple(out)
