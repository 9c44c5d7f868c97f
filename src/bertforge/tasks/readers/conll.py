"""Reader for CoNLL-2003 column files (`token POS chunk NER`, blank line between sentences)."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Sequence

from bertforge.tasks.readers.base import BadRows, ReadResult, finish, iter_lines, split_name
from bertforge.tasks.readers.errors import DataError, show
from bertforge.tasks.readers.labels import refuse_case_variants, unknown_label

#: Fixed id order, so a checkpoint's label ids mean the same thing whatever file it was trained on.
CONLL2003_LABELS: list[str] = ["O", "B-PER", "I-PER", "B-ORG", "I-ORG", "B-LOC", "I-LOC", "B-MISC", "I-MISC"]


@dataclass(frozen=True)
class NerSentence:
    """Words of one sentence with their word-level NER tags; `line` is where the sentence starts."""

    guid: str
    words: tuple[str, ...]
    tags: tuple[str, ...]
    line: int
    document: int  # index of the -DOCSTART- document it belongs to (0 if the file has none)


def read_conll(
    path: str | Path,
    *,
    label_list: Sequence[str] | None = None,
    skip_bad_rows: bool = False,
    any_tags: bool = False,
    label_source: str | None = None,
) -> ReadResult[NerSentence]:
    """Read a CoNLL-style column file: the first column is the word, the last the NER tag.

    `-DOCSTART-` lines are dropped (they also end a sentence). A tag outside `label_list`
    (default: the CoNLL-2003 set; `label_source` names the file it came from, for the message) or
    a line with fewer than two columns raises DataError; with `skip_bad_rows=True` the whole
    sentence holding it is skipped (a sentence with a hole in it would be mislabeled) and counted,
    in sentences. `any_tags=True` (and no `label_list`) takes the tag set from the file: any
    BIO/BIOES tags, see `ner_label_list`.
    """
    path = Path(path)
    infer = any_tags and label_list is None
    labels = list(label_list) if label_list is not None else list(CONLL2003_LABELS)
    allowed = set(labels)
    bad = BadRows(skip_bad_rows, unit="sentences")
    split = split_name(path)
    sentences: list[NerSentence] = []
    words: list[str] = []
    tags: list[str] = []
    start = 0
    error: DataError | None = None
    document = -1
    saw_rows = False
    tag_lines: list[tuple[str, int]] = []  # (tag, line) of every word kept, for the spelling check
    lines: list[int] = []

    def close() -> None:
        nonlocal error
        if error is not None:
            bad.handle(error)
        elif words:
            sentences.append(NerSentence(f"{split}-{len(sentences) + bad.count}", tuple(words), tuple(tags),
                                         start, max(document, 0)))
            tag_lines.extend(zip(tags, lines))
        words.clear()
        tags.clear()
        lines.clear()
        error = None

    for lineno, line in iter_lines(path):
        cols = line.split()
        if not cols:
            close()
            continue
        saw_rows = True
        if cols[0] == "-DOCSTART-":
            close()
            document += 1
            continue
        if not words and error is None:
            start = lineno
        if error is not None:
            continue  # already broken; skip to the end of the sentence
        if len(cols) < 2:
            error = DataError(path, lineno, "NER tag", "at least 2 space-separated columns (token ... NER)",
                              show(line))
        elif infer and tag_problem(cols[-1]):
            error = DataError(path, lineno, "NER tag", tag_problem(cols[-1]), show(cols[-1]))
        elif not infer and cols[-1] not in allowed:
            error = unknown_label(path, lineno, "NER tag", cols[-1], labels, label_source, what="tag")
        else:
            words.append(cols[0])
            tags.append(cols[-1])
            lines.append(lineno)
    close()
    if infer:
        refuse_case_variants(path, "NER tag", tag_lines, "tag")
        labels = ner_label_list(tag for s in sentences for tag in s.tags)
    return finish(path, sentences, labels, bad, saw_rows=saw_rows)


#: Tag prefixes understood: IOB1/IOB2 use B and I; BIOES (IOBES) adds E (end) and S (single).
SCHEME_PREFIXES = ("B", "I", "E", "S")


def tag_problem(tag: str) -> str | None:
    """None for a usable BIO/BIOES tag (`O`, `B-X`, `I-X`, `E-X`, `S-X`), else what was expected."""
    if tag == "O":
        return None
    prefix, dash, kind = tag.partition("-")
    if dash and prefix in SCHEME_PREFIXES and kind:
        return None
    return "a BIO/BIOES tag: O, or B-, I-, E-, S- followed by an entity type"


def ner_label_list(tags: Iterable[str]) -> list[str]:
    """The label list for a tag set read from data: `O`, then per entity type (sorted) every prefix
    of the scheme in use (B, I; plus E, S when any E-/S- tag occurs).

    Filling in the scheme means a type seen only as `B-DRUG` in train still has `I-DRUG`, so eval
    data with a longer entity of a known type does not fail; ids are stable for a given tag set.
    """
    seen = set(tags)
    kinds = sorted({t.partition("-")[2] for t in seen if t != "O"})
    prefixes = SCHEME_PREFIXES if any(t[:2] in ("E-", "S-") for t in seen) else SCHEME_PREFIXES[:2]
    return ["O"] + [f"{p}-{k}" for k in kinds for p in prefixes]
