"""`data.sources`: the text blocks the workers split give exactly the documents a line-by-line read gives."""
from __future__ import annotations

import gzip
import lzma

import pytest

from bertforge.data.corpus import LineCounts, iter_raw_documents, read_lines
from bertforge.data.sources import block_documents, text_blocks

TRICKY = (b"\xef\xbb\xbfFirst line with a BOM\r\nsecond line\r\n\r\n"        # CRLF, a CRLF blank line
          b"a line with a stray \r inside\n \t \nafter a tab-and-space blank line\n"
          b"\xe3\x80\x80\n"                                                   # U+3000 only: blank to str.strip
          b"bad bytes \xff\xfe here\n\n\n\n"                                  # not UTF-8; blank lines in a row
          + b"".join(b"long document line %d without a blank line\n" % i for i in range(400))
          + b"\nlast document without a final line end\r")


def line_by_line(path, max_document_bytes):
    counts = LineCounts()
    documents = list(iter_raw_documents(read_lines(path), counts, max_document_bytes))
    return [d for d, _ in documents if d], sum(n for _, n in documents), counts


def by_ranges(path, chunk_bytes, max_document_bytes):
    docs, total, counts = [], 0, LineCounts()
    spans = list(text_blocks(path, chunk_bytes, max_document_bytes))
    for span in spans:
        got, nbytes, span_counts = block_documents(span, max_document_bytes)
        docs += got
        total += nbytes
        counts.add(span_counts)
    return docs, total, counts, spans


@pytest.mark.parametrize("chunk_bytes", [1, 7, 64, 500, 1 << 20])
@pytest.mark.parametrize("suffix", [".txt", ".txt.xz"])
def test_blocks_cover_the_file_at_line_ends_and_give_the_line_by_line_documents(tmp_path, chunk_bytes, suffix):
    path = tmp_path / f"tricky{suffix}"
    path.write_bytes(lzma.compress(TRICKY) if suffix.endswith(".xz") else TRICKY)
    docs, total, counts, spans = by_ranges(path, chunk_bytes, 1 << 24)
    assert b"".join(s.data for s in spans) == TRICKY and [s.first for s in spans] == [True] + [False] * (len(spans) - 1)
    assert all(s.data.endswith(b"\n") for s in spans[:-1])  # never inside a line
    want_docs, want_total, want_counts = line_by_line(path, 1 << 24)
    assert docs == want_docs and total == want_total and counts == want_counts
    assert docs[0][0] == "First line with a BOM" and "a line with a stray \r inside" in docs[1]
    assert docs[2] == ["after a tab-and-space blank line"]  # the U+3000 line ends it although it is not ASCII
    assert docs[3] == ["bad bytes \udcff\udcfe here"] and docs[-1] == ["last document without a final line end\r"]
    if chunk_bytes < 500:
        assert len(spans) >= 3


def test_a_document_with_no_blank_line_is_cut_and_counted(tmp_path):
    path = tmp_path / "one.txt"
    path.write_bytes(b"".join(b"line %d of one endless document\n" % i for i in range(2000)))
    docs, _, counts, spans = by_ranges(path, 100, max_document_bytes=4000)
    assert len(spans) > 5 and all(s.cut for s in spans[:-1]) and not spans[-1].cut
    assert [line for d in docs for line in d] == [line for d in line_by_line(path, 1 << 30)[0] for line in d]
    assert max(sum(len(x) + 1 for x in d) for d in docs) < 2 * 4000 + 100  # memory per document stays bounded
    assert counts.documents_cut >= len(spans) - 1


def test_plain_and_gzip_inputs_give_byte_identical_shards(tmp_path, tokenizer, wiki_articles):
    """Compressed or not, in the main process or in workers: the same shards."""
    from bertforge.data import prepare_corpus
    text = ("\r\n\r\n".join("\r\n".join(a) for a in wiki_articles[:60]) + "\n").encode()
    (tmp_path / "c.txt").write_bytes(text)
    (tmp_path / "c.txt.gz").write_bytes(gzip.compress(text))
    manifests = [prepare_corpus([tmp_path / name], tokenizer, tmp_path / out, show_progress=False, workers=workers,
                                heldout_fraction=0.1, chunk_bytes=4000, shard_tokens=5000)
                 for name, out, workers in (("c.txt.gz", "gz", 0), ("c.txt", "plain", 2))]
    digests = [[(m["file"], m["sha256"]) for split in ("train", "heldout") for shard in man["splits"][split]["shards"]
                for m in shard["files"].values()] for man in manifests]
    assert digests[0] == digests[1] and len(digests[0]) > 4
    assert manifests[0]["counts"] == manifests[1]["counts"]
    assert manifests[0]["splits"]["train"]["documents"] == manifests[1]["splits"]["train"]["documents"] > 40
