"""Fixtures for the data pipeline: the real tokenizer and a prepared slice of the real Wikipedia corpus."""
from __future__ import annotations

import lzma
from pathlib import Path

import pytest

from needs import require_path

WIKI = Path("corpus") / "wikipedia-en-2018" / "wiki_en.txt.xz"
SLICE_ARTICLES = 600


@pytest.fixture(scope="session")
def tokenizer(minilm_dir):
    from bertforge.tokenization import BertTokenizer
    return BertTokenizer.from_pretrained(minilm_dir)


@pytest.fixture(scope="session")
def wiki_path(shared_data) -> Path:
    return require_path(shared_data / WIKI, f"the Wikipedia slice ../shared/data/{WIKI}")


def read_articles(path: Path, n: int, skip: int = 0) -> list[list[str]]:
    """The first `n` articles (after `skip`) of the shared corpus, as lists of lines (title first)."""
    articles: list[list[str]] = []
    lines: list[str] = []
    seen = 0
    with lzma.open(path, "rt", encoding="utf-8") as handle:
        for line in handle:
            line = line.rstrip("\n")
            if line:
                lines.append(line)
                continue
            if lines:
                if seen >= skip:
                    articles.append(lines)
                seen += 1
                lines = []
                if len(articles) == n:
                    break
    return articles


@pytest.fixture(scope="session")
def wiki_articles(wiki_path) -> list[list[str]]:
    return read_articles(wiki_path, SLICE_ARTICLES)


@pytest.fixture(scope="session")
def wiki_slice_file(wiki_articles, tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("wiki") / "wiki_slice.txt"
    path.write_text("\n\n".join("\n".join(a) for a in wiki_articles) + "\n", encoding="utf-8")
    return path


@pytest.fixture(scope="session")
def wiki_data(wiki_slice_file, tokenizer, tmp_path_factory) -> Path:
    """A few hundred real articles prepared with the real vocab (1% held out, several shards)."""
    from bertforge.data import prepare_corpus
    out = tmp_path_factory.mktemp("prepared") / "wiki"
    prepare_corpus([wiki_slice_file], tokenizer, out, workers=2, shard_tokens=60_000, heldout_fraction=0.02,
                   show_progress=False)
    return out
