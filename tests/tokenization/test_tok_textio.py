"""bertforge.textio: plain and compressed text, line iteration, progress in bytes, clear errors."""

from __future__ import annotations

import bz2
import gzip
import lzma

import pytest

from bertforge.textio import iter_lines, open_text, total_bytes

TEXT = "first line\nsecond \u00e9t\u00e9 line\r\n\nafter a blank\rstill the same line\nlast without newline"
LINES = ["first line", "second \u00e9t\u00e9 line", "", "after a blank\rstill the same line", "last without newline"]
WRITERS = {
    ".txt": lambda p, data: p.write_bytes(data),
    ".gz": lambda p, data: p.write_bytes(gzip.compress(data)),
    ".xz": lambda p, data: p.write_bytes(lzma.compress(data)),
    ".bz2": lambda p, data: p.write_bytes(bz2.compress(data)),
}


@pytest.fixture(params=sorted(WRITERS))
def text_file(request, tmp_path):
    path = tmp_path / f"sample{request.param}"
    WRITERS[request.param](path, TEXT.encode("utf-8"))
    return path


def test_open_text_reads_every_codec(text_file):
    with open_text(text_file) as f:
        assert f.read() == TEXT


def test_iter_lines_strips_only_terminators(text_file):
    assert list(iter_lines(text_file)) == LINES
    assert list(iter_lines([text_file, text_file])) == LINES + LINES


def test_progress_adds_up_to_total_bytes(tmp_path):
    path = tmp_path / "big.txt.gz"
    with gzip.open(path, "wt", encoding="utf-8") as f:
        for i in range(20_000):
            f.write(f"line number {i} with some words\n")
    plain = tmp_path / "plain.txt"
    plain.write_text("a\nb\n", encoding="utf-8")
    reported = []
    lines = list(iter_lines([path, plain], progress=reported.append))
    assert len(lines) == 20_002
    assert len(reported) > 2  # reports while reading, not only at the end
    assert sum(reported) == total_bytes([path, plain]) == path.stat().st_size + plain.stat().st_size


def test_real_corpus_streams(shared_data):
    lines = iter_lines(shared_data / "corpus/wikipedia-en-2018/wiki_en.txt.xz")
    first = [next(lines) for _ in range(3)]
    assert all(isinstance(line, str) and "\n" not in line for line in first)
    lines.close()


def test_missing_file_is_named_before_reading(tmp_path):
    good = tmp_path / "good.txt"
    good.write_text("x\n", encoding="utf-8")
    with pytest.raises(FileNotFoundError, match="nope.txt.gz"):
        open_text(tmp_path / "nope.txt.gz")
    with pytest.raises(FileNotFoundError, match="nope.txt"):
        next(iter_lines([good, tmp_path / "nope.txt"]))  # fails before yielding anything
    with pytest.raises(FileNotFoundError, match="nope.txt"):
        total_bytes(tmp_path / "nope.txt")
    with pytest.raises(ValueError, match="directory"):
        open_text(tmp_path)


def test_bad_bytes_name_the_file(tmp_path):
    bad = tmp_path / "latin1.txt"
    bad.write_bytes("caf\u00e9\n".encode("latin-1"))
    with pytest.raises(ValueError, match="latin1.txt is not valid UTF-8"):
        list(iter_lines(bad))
    assert list(iter_lines(bad, errors="replace")) == ["caf\ufffd"]
    corrupt = tmp_path / "corrupt.gz"
    corrupt.write_bytes(b"\x1f\x8b\x08\x00garbage")
    with pytest.raises(ValueError, match="corrupt.gz"):
        list(iter_lines(corrupt))
