"""Fixtures for the tokenizer tests: our tokenizers, the reference oracle, real text.

The oracle is ``transformers.BertTokenizerLegacy``, the Python port of Google's
original tokenizer. Its vocab path must be passed positionally: as a keyword
(``vocab_file=...``) it silently builds a 5-token vocabulary, which is why every
oracle fixture asserts its vocabulary size.
"""

from __future__ import annotations

import csv
import gzip
import json
import lzma
from pathlib import Path

import pytest

from bertforge.tokenization import BertTokenizer, train_wordpiece

from needs import require_module

MINILM_VOCAB_SIZE = 30522
CASED_VOCAB_SIZE = 8000
WIKI = "corpus/wikipedia-en-2018/wiki_en.txt.xz"


def make_reference(vocab_dir: Path, do_lower_case: bool, expected_size: int):
    legacy = require_module("transformers").BertTokenizerLegacy
    ref = legacy(str(vocab_dir / "vocab.txt"), do_lower_case=do_lower_case)  # positional on purpose
    assert ref.vocab_size == expected_size, "the reference did not load the real vocabulary"
    return ref


@pytest.fixture(scope="session")
def reference_for():
    """``reference_for(folder, do_lower_case, vocab_size)`` builds (and checks) an oracle."""
    return make_reference


@pytest.fixture(scope="session")
def uncased(minilm_dir: Path) -> BertTokenizer:
    tok = BertTokenizer.from_pretrained(minilm_dir)
    assert tok.vocab_size == MINILM_VOCAB_SIZE and tok.do_lower_case
    return tok


@pytest.fixture(scope="session")
def uncased_ref(minilm_dir: Path):
    return make_reference(minilm_dir, True, MINILM_VOCAB_SIZE)


@pytest.fixture(scope="session")
def wiki_lines(shared_data: Path) -> list[str]:
    """The first 40,000 non-blank lines (titles, headings, paragraphs) of the Wikipedia slice."""
    out: list[str] = []
    with lzma.open(shared_data / WIKI, "rt", encoding="utf-8") as f:
        for line in f:
            line = line.rstrip("\n")
            if line.strip():
                out.append(line)
                if len(out) == 40_000:
                    break
    return out


@pytest.fixture(scope="session")
def cased_dir(wiki_lines: list[str], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A cased vocabulary trained with our trainer on 20,000 Wikipedia lines."""
    root = tmp_path_factory.mktemp("cased_vocab")
    text = root / "wiki_slice.txt"
    text.write_text("\n".join(wiki_lines[:20_000]) + "\n", encoding="utf-8")
    out = train_wordpiece([text], root / "tok", vocab_size=CASED_VOCAB_SIZE, lowercase=False, show_progress=False)
    return out


@pytest.fixture(scope="session")
def cased(cased_dir: Path) -> BertTokenizer:
    tok = BertTokenizer.from_pretrained(cased_dir)
    assert not tok.do_lower_case and tok.vocab_size == CASED_VOCAB_SIZE
    return tok


@pytest.fixture(scope="session")
def cased_ref(cased_dir: Path):
    return make_reference(cased_dir, False, CASED_VOCAB_SIZE)


@pytest.fixture(scope="session", params=["uncased", "cased"])
def pair_under_test(request: pytest.FixtureRequest):
    """(ours, reference) for both casings."""
    name = request.param
    return request.getfixturevalue(name), request.getfixturevalue(f"{name}_ref")


def _tsv_column(path: Path, column: int, header: bool) -> list[str]:
    with open(path, encoding="utf-8", newline="") as f:
        rows = list(csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE))
    return [row[column] for row in rows[1 if header else 0 :] if len(row) > column]


@pytest.fixture(scope="session")
def real_texts(shared_data: Path, wiki_lines: list[str]) -> dict[str, list[str]]:
    """Real single texts by source (Wikipedia, SST-2, CoLA, CoNLL-2003, SQuAD)."""
    conll: list[str] = []
    words: list[str] = []
    with open(shared_data / "conll2003/train.txt", encoding="utf-8") as f:
        for line in f:
            parts = line.split()
            if not parts or parts[0] == "-DOCSTART-":
                if words:
                    conll.append(" ".join(words))
                    words = []
                continue
            words.append(parts[0])
    squad = json.load(gzip.open(shared_data / "squad/dev-v1.1.json.gz", "rt", encoding="utf-8"))
    contexts, questions = [], []
    for article in squad["data"]:
        for para in article["paragraphs"]:
            contexts.append(para["context"])
            questions.extend(qa["question"] for qa in para["qas"])
    return {
        "wikipedia": wiki_lines,
        "sst2": _tsv_column(shared_data / "glue/SST-2/train.tsv", 0, header=True),
        "cola": _tsv_column(shared_data / "glue/CoLA/train.tsv", 3, header=False),
        "conll": conll,
        "squad_context": contexts,
        "squad_question": questions,
    }


@pytest.fixture(scope="session")
def real_pairs(shared_data: Path) -> list[tuple[str, str]]:
    """Real sentence pairs: SQuAD (question, context), RTE, MRPC, QNLI."""
    squad = json.load(gzip.open(shared_data / "squad/dev-v1.1.json.gz", "rt", encoding="utf-8"))
    pairs = [
        (qa["question"], para["context"])
        for article in squad["data"]
        for para in article["paragraphs"]
        for qa in para["qas"][:1]
    ]
    for task, a, b in (("RTE", 1, 2), ("MRPC", 3, 4), ("QNLI", 1, 2)):
        split = "train" if task != "QNLI" else "dev"
        first = _tsv_column(shared_data / f"glue/{task}/{split}.tsv", a, header=True)
        second = _tsv_column(shared_data / f"glue/{task}/{split}.tsv", b, header=True)
        pairs.extend(zip(first, second))
    return pairs
