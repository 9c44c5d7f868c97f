"""Reading raw text: compressions, document boundaries, repairs that are counted, format detection."""
from __future__ import annotations

import bz2
import gzip
import lzma

import pytest

from bertforge.data.corpus import (LineCounts, clean_line, detect_format, document_sentences, iter_raw_documents,
                                   read_lines)
from bertforge.data.sentences import split_sentences

TEXT = "\ufeffTitle one\nFirst paragraph. Second sentence.\n\n\n\nTitle two\r\nOnly line.\r\n\n"


@pytest.mark.parametrize("suffix, opener", [(".txt", open), (".txt.gz", gzip.open), (".txt.xz", lzma.open),
                                            (".txt.bz2", bz2.open)])
def test_compressions_give_the_same_documents(tmp_path, suffix, opener):
    path = tmp_path / f"corpus{suffix}"
    with opener(path, "wb") as handle:
        handle.write(TEXT.encode("utf-8"))
    on_disk = []
    docs = list(iter_raw_documents(read_lines(path, on_disk.append)))
    assert [[line.strip() for line in lines] for lines, _ in docs] == [
        ["Title one", "First paragraph. Second sentence."], ["Title two", "Only line."]]
    # Every text byte is accounted for, blank lines too (a "\r\n" line end counts as one byte).
    assert sum(n for _, n in docs) == len(TEXT.encode("utf-8")) - TEXT.count("\r\n")
    assert sum(on_disk) == path.stat().st_size  # progress reaches 100% in on-disk bytes


def test_a_file_without_blank_lines_is_cut_into_bounded_documents(tmp_path):
    path = tmp_path / "one_block.txt"
    path.write_text("".join(f"Sentence number {i}.\n" for i in range(1000)), encoding="utf-8")
    counts = LineCounts()
    docs = list(iter_raw_documents(read_lines(path), counts, max_document_bytes=5000))
    assert sum(len(lines) for lines, _ in docs) == 1000
    assert all(sum(len(line) for line in lines) <= 5000 + 30 for lines, _ in docs)
    assert counts.documents_cut == len(docs) - 1 > 0


def test_clean_line_repairs_and_counts():
    counts = LineCounts()
    assert clean_line("plain text  \n", counts) == "plain text"
    bad = b"caf\xe9 ok".decode("utf-8", "surrogateescape")
    assert clean_line(bad, counts) == "caf\ufffd ok"
    assert clean_line("a\x00b\x1bc\x85d\tstays", counts) == "a b c d\tstays"
    assert clean_line("\x07\x08", counts) == ""
    assert counts.invalid_utf8 == 1 and counts.control_chars == 2


def test_document_sentences_per_format():
    counts = LineCounts()
    lines = ["Title\n", "One. Two.\n", "\x01\n"]
    assert document_sentences(lines, "paragraphs", counts) == ["Title", "One.", "Two."]
    assert document_sentences(lines, "sentences", counts) == ["Title", "One. Two."]


def test_detect_format_on_real_text(wiki_articles, tmp_path):
    paragraphs = tmp_path / "paragraphs.txt"
    paragraphs.write_text("\n\n".join("\n".join(a) for a in wiki_articles[:200]) + "\n", encoding="utf-8")
    sentences = tmp_path / "sentences.txt"  # BERT's layout: one sentence per line, blank line between documents
    sentences.write_text("\n\n".join("\n".join(s for line in a for s in split_sentences(line))
                                     for a in wiki_articles[:200]) + "\n", encoding="utf-8")
    assert detect_format(paragraphs)[0] == "paragraphs"
    fmt, reason = detect_format(sentences)
    assert fmt == "sentences" and "sampled lines" in reason


def test_detect_format_on_the_shared_corpus(wiki_path):
    assert detect_format(wiki_path)[0] == "paragraphs"
