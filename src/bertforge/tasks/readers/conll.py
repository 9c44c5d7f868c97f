"""Reader for CoNLL-2003 column files (`token POS chunk NER`, blank line between sentences)."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from bertforge.tasks.readers.base import BadRows, ReadResult, finish, iter_lines, split_name
from bertforge.tasks.readers.errors import DataError, show

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
    label_list: list[str] | None = None,
    skip_bad_rows: bool = False,
) -> ReadResult[NerSentence]:
    """Read a CoNLL-2003 file: the first column is the word, the last the (IOB2) NER tag.

    `-DOCSTART-` lines are dropped (they also end a sentence). A tag outside `label_list`
    (default: the CoNLL-2003 set) or a line with fewer than two columns raises DataError; with
    `skip_bad_rows=True` the whole sentence holding it is skipped (a sentence with a hole in it
    would be mislabeled) and counted, in sentences.
    """
    path = Path(path)
    labels = list(label_list) if label_list is not None else list(CONLL2003_LABELS)
    allowed = set(labels)
    bad = BadRows(skip_bad_rows)
    split = split_name(path)
    sentences: list[NerSentence] = []
    words: list[str] = []
    tags: list[str] = []
    start = 0
    error: DataError | None = None
    document = -1
    saw_rows = False

    def close() -> None:
        nonlocal error
        if error is not None:
            bad.handle(error)
        elif words:
            sentences.append(NerSentence(f"{split}-{len(sentences) + bad.count}", tuple(words), tuple(tags),
                                         start, max(document, 0)))
        words.clear()
        tags.clear()
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
        elif cols[-1] not in allowed:
            error = DataError(path, lineno, "NER tag", f"one of {labels}", show(cols[-1]))
        else:
            words.append(cols[0])
            tags.append(cols[-1])
    close()
    return finish(path, sentences, labels, bad, saw_rows=saw_rows)
