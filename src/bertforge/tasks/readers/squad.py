"""Reader for SQuAD v1.1 / v2.0 JSON (plain or gzipped), plus the by-article split helper.

Only the v1.1 *dev* set is available offline here, so CPU-sized experiments train on some of
its articles and evaluate on the others (`split_squad_by_article`); any number obtained that
way must say it comes from a dev-set split, not from the official train/dev protocol.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Iterable

from bertforge.tasks.readers.base import MAX_SKIP_SAMPLES, BadRows, ReadResult, finish, open_text
from bertforge.tasks.readers.errors import DataError, show


@dataclass(frozen=True)
class SquadAnswer:
    text: str
    answer_start: int  # character offset into the context


@dataclass(frozen=True)
class SquadExample:
    """One question. Dev sets keep *all* gold answers (the metric takes the max over them)."""

    qid: str
    question: str
    context: str
    answers: tuple[SquadAnswer, ...]
    is_impossible: bool = False
    plausible_answers: tuple[SquadAnswer, ...] = ()  # v2.0: what an annotator might wrongly give
    title: str = ""
    article_index: int = 0
    paragraph_index: int = 0


@dataclass
class SquadReadResult(ReadResult[SquadExample]):
    """SQuAD examples plus file-level facts: version, article count, answer-offset mismatches and fixes."""

    version: str = "1.1"
    n_articles: int = 0
    n_paragraphs: int = 0
    answer_mismatches: int = 0  # answers whose text is not at their answer_start
    answers_reanchored: int = 0  # ... of which were found nearby and moved there
    mismatch_samples: list[str] = field(default_factory=list)


def load_squad_json(path: str | Path) -> dict[str, Any]:
    """The raw SQuAD JSON object, with decode problems turned into a DataError naming the file."""
    path = Path(path)
    with open_text(path) as handle:
        try:
            text = handle.read()
        except UnicodeDecodeError as exc:
            raise DataError(path, None, None, "UTF-8 text", exc.reason) from exc
    if not text.strip():
        raise DataError(path, None, None, "a SQuAD JSON object", "an empty file")
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as exc:
        raise DataError(path, exc.lineno, None, "valid JSON", f"{exc.msg} (column {exc.colno})") from exc
    if not isinstance(obj, dict) or not isinstance(obj.get("data"), list):
        raise DataError(path, None, "data", "a JSON object with a 'data' list of articles",
                        show(type(obj.get("data") if isinstance(obj, dict) else obj).__name__))
    return obj


def read_squad(
    path: str | Path,
    *,
    version: str | None = None,
    skip_bad_rows: bool = False,
) -> SquadReadResult:
    """Read SQuAD v1.1 or v2.0 into SquadExamples, one per question.

    `version` is taken from the file ("1.1" / "v2.0", or the presence of `is_impossible`) unless
    given. Every answer is checked against its context: an answer whose text is not at its
    `answer_start` but occurs within `NEARBY_CHARS` of it is re-anchored to the nearest occurrence
    (counted in `answer_mismatches`/`answers_reanchored`); one that cannot be found there makes its
    question a bad row, because training on it would teach the model a wrong span (or [CLS]).
    Bad questions, paragraphs and articles raise DataError naming the JSON path and question id,
    or with `skip_bad_rows=True` are skipped and counted (in questions where they can be counted).
    """
    path = Path(path)
    obj = load_squad_json(path)
    articles = obj["data"]
    v2 = _is_v2(obj, version)
    bad = BadRows(skip_bad_rows, unit="questions")
    examples: list[SquadExample] = []
    seen: set[str] = set()
    check = AnswerCheck()
    n_paragraphs = 0
    for a, article in enumerate(articles):
        where_a = f"data[{a}]"
        try:
            paragraphs = _get(article, "paragraphs", list, path, where_a)
        except DataError as err:
            bad.handle(err)
            continue
        title = article.get("title", "") if isinstance(article.get("title", ""), str) else ""
        for p, paragraph in enumerate(paragraphs):
            where_p = f"{where_a}.paragraphs[{p}]"
            try:
                context = _get(paragraph, "context", str, path, where_p)
                qas = _get(paragraph, "qas", list, path, where_p)
            except DataError as err:
                qas_guess = paragraph.get("qas") if isinstance(paragraph, dict) else None
                bad.handle(err, units=len(qas_guess) if isinstance(qas_guess, list) and qas_guess else 1)
                continue
            n_paragraphs += 1
            for q, qa in enumerate(qas):
                where_q = f"{where_p}.qas[{q}]"
                try:
                    ex = _example(qa, context, title, a, p, v2, path, where_q, seen)
                    ex = check.anchor(ex, path, where_q, None)
                except DataError as err:
                    bad.handle(err)
                    continue
                seen.add(ex.qid)
                examples.append(ex)
    return finish(path, examples, None, bad, saw_rows=bool(articles), result_type=SquadReadResult,
                  version="2.0" if v2 else "1.1", n_articles=len(articles), n_paragraphs=n_paragraphs,
                  answer_mismatches=check.mismatches, answers_reanchored=check.reanchored,
                  mismatch_samples=check.samples)  # type: ignore[return-value]


#: How far (in characters, either side) from its `answer_start` an answer's text is looked for.
NEARBY_CHARS = 100


def locate_answer(context: str, text: str, start: int, window: int = NEARBY_CHARS) -> int | None:
    """Where `text` really starts in `context`: `start` itself if it is there, else the nearest
    occurrence starting within `window` characters of `start`, else None."""
    if text and context[start:start + len(text)] == text:
        return start
    if not text:
        return None
    lo = max(0, start - window)
    hi = min(len(context), start + window + len(text))
    best: int | None = None
    at = context.find(text, lo, hi)
    while at != -1:
        if best is None or abs(at - start) < abs(best - start):
            best = at
        at = context.find(text, at + 1, hi)
    return best


class AnswerCheck:
    """Checks answers against their context, re-anchors near misses, counts both kinds."""

    def __init__(self) -> None:
        self.mismatches = 0      # answers whose text is not at answer_start
        self.reanchored = 0      # ... of which were found nearby and moved
        self.samples: list[str] = []

    def anchor(self, ex: SquadExample, path: Path, where: str, line: int | None) -> SquadExample:
        fixed = []
        for k, ans in enumerate(ex.answers):
            found = locate_answer(ex.context, ans.text, ans.answer_start)
            if found == ans.answer_start:
                fixed.append(ans)
                continue
            self.mismatches += 1
            at = ex.context[ans.answer_start: ans.answer_start + len(ans.text)]
            if len(self.samples) < MAX_SKIP_SAMPLES:
                self.samples.append(f"{where}.answers[{k}] (id {ex.qid}): text {show(ans.text)} "
                                    f"but context has {show(at)} at {ans.answer_start}"
                                    + (f"; re-anchored to {found}" if found is not None else ""))
            if found is None:
                raise DataError(path, line, f"answers[{k}]",
                                f"the answer text in the context at answer_start {ans.answer_start} or within "
                                f"{NEARBY_CHARS} characters of it", f"{show(ans.text)}, not found there",
                                where=f"{where} (question id {ex.qid!r})")
            self.reanchored += 1
            fixed.append(SquadAnswer(ans.text, found))
        return replace(ex, answers=tuple(fixed)) if fixed != list(ex.answers) else ex


def _is_v2(obj: dict[str, Any], version: str | None) -> bool:
    if version is not None:
        if version.lstrip("v") not in ("1.1", "2.0"):
            raise ValueError(f"SQuAD version must be '1.1' or '2.0', got {version!r}")
        return version.lstrip("v") == "2.0"
    declared = str(obj.get("version", "")).lstrip("v")
    if declared.startswith("2"):
        return True
    if declared.startswith("1"):
        return False
    return any("is_impossible" in qa for art in obj["data"] if isinstance(art, dict)
               for par in art.get("paragraphs", []) if isinstance(par, dict)
               for qa in par.get("qas", []) if isinstance(qa, dict))


_KIND = {str: "a string", int: "an integer", list: "a list", bool: "true or false"}


def _get(obj: Any, key: str, kind: type, path: Path, where: str) -> Any:
    if not isinstance(obj, dict):
        raise DataError(path, None, None, "a JSON object", type(obj).__name__, where=where)
    if key not in obj:
        raise DataError(path, None, key, _KIND[kind], "nothing (key missing)", where=where)
    value = obj[key]
    if not isinstance(value, kind) or isinstance(value, bool) and kind is int:
        raise DataError(path, None, key, _KIND[kind], show(value), where=where)
    return value


def _answers(qa: dict[str, Any], key: str, path: Path, where: str) -> tuple[SquadAnswer, ...]:
    out = []
    for k, ans in enumerate(_get(qa, key, list, path, where)):
        at = f"{where}.{key}[{k}]"
        text = _get(ans, "text", str, path, at)
        start = _get(ans, "answer_start", int, path, at)
        if start < 0:
            raise DataError(path, None, "answer_start", "a character offset >= 0", show(start), where=at)
        out.append(SquadAnswer(text, start))
    return tuple(out)


def _example(qa: Any, context: str, title: str, a: int, p: int, v2: bool, path: Path, where: str,
             seen: set[str]) -> SquadExample:
    qid = _get(qa, "id", str, path, where)
    if qid in seen:
        raise DataError(path, None, "id", "a question id not used before", show(qid), where=where)
    question = _get(qa, "question", str, path, where)
    answers = _answers(qa, "answers", path, where)
    impossible = False
    plausible: tuple[SquadAnswer, ...] = ()
    if v2:
        impossible = _get(qa, "is_impossible", bool, path, where)
        if impossible and answers:
            raise DataError(path, None, "answers", "no answers for an is_impossible question",
                            f"{len(answers)}", where=where)
        if "plausible_answers" in qa:
            plausible = _answers(qa, "plausible_answers", path, where)
    if not impossible and not answers:
        raise DataError(path, None, "answers", "at least one answer", "an empty list", where=where)
    return SquadExample(qid, question, context, answers, impossible, plausible, title, a, p)


def split_squad_by_article(
    examples_or_data: Any,
    train_articles: Iterable[int] = range(0, 38),
    eval_articles: Iterable[int] = range(38, 48),
) -> tuple[Any, Any]:
    """Split SQuAD into two disjoint sets of *articles* (no paragraph leaks across the split).

    Needed because only the dev set is available here; results on the eval part are
    "SQuAD v1.1 dev, articles 38-47, trained on articles 0-37", not official dev numbers.
    Accepts a list of SquadExample / a SquadReadResult (returns two example lists), the raw JSON
    object (returns two such objects) or its `data` list (returns two lists).
    """
    train_ids, eval_ids = set(train_articles), set(eval_articles)
    overlap = train_ids & eval_ids
    if overlap:
        raise ValueError(f"train and eval articles overlap: {sorted(overlap)}")
    if isinstance(examples_or_data, dict):
        train, dev = split_squad_by_article(examples_or_data["data"], train_ids, eval_ids)
        return {**examples_or_data, "data": train}, {**examples_or_data, "data": dev}
    items = list(examples_or_data)
    if items and isinstance(items[0], SquadExample):
        n_articles = max(ex.article_index for ex in items) + 1
        _check_range(train_ids | eval_ids, n_articles)
        return ([ex for ex in items if ex.article_index in train_ids],
                [ex for ex in items if ex.article_index in eval_ids])
    _check_range(train_ids | eval_ids, len(items))
    return ([art for i, art in enumerate(items) if i in train_ids],
            [art for i, art in enumerate(items) if i in eval_ids])


def _check_range(wanted: set[int], n_articles: int) -> None:
    outside = sorted(i for i in wanted if not 0 <= i < n_articles)
    if outside:
        raise ValueError(f"article indices {outside} do not exist (the data has {n_articles} articles)")
