"""`bertforge embed` in a pipe: texts from stdin, JSON lines to stdout, blank lines skipped and counted."""
from __future__ import annotations

import io
import json

import numpy as np

from bertforge.cli import main
from needs import require_module

TEXTS = ["A man is playing a guitar.", "The new movie is awesome!", "It rains."]


def test_stdin_to_stdout_skips_blank_lines_and_counts_them(minilm_dir, monkeypatch, capsys):
    """Vectors follow the non-blank lines in order and equal sentence-transformers' on those lines; the count of
    skipped lines is on stderr, and stdout holds nothing but the records."""
    st = require_module("sentence_transformers", hint="pip install sentence-transformers")
    piped = f"{TEXTS[0]}\n\n{TEXTS[1]}\n   \n{TEXTS[2]}\n\n"
    monkeypatch.setattr("sys.stdin", io.StringIO(piped))
    assert main(["embed", "--model", str(minilm_dir), "--input", "-", "--output", "-", "--device", "cpu"]) == 0
    out, err = capsys.readouterr()
    rows = [json.loads(line) for line in out.splitlines()]
    assert [(r["index"], r["text"]) for r in rows] == list(enumerate(TEXTS))
    reference = st.SentenceTransformer(str(minilm_dir), device="cpu").encode(TEXTS)
    np.testing.assert_allclose(np.array([r["embedding"] for r in rows]), reference, atol=1e-5)
    assert "wrote 3 embeddings of dimension 384 to standard output (skipped 3 blank lines of -)" in err


def test_text_flags_come_first_and_a_blank_text_is_refused(minilm_dir, tmp_path, capsys):
    source = tmp_path / "in.txt"
    source.write_text(f"{TEXTS[2]}\n", encoding="utf-8")
    assert main(["embed", "--model", str(minilm_dir), "--text", TEXTS[0], "--text", TEXTS[1], "--input", str(source),
                 "--output", "-", "--device", "cpu"]) == 0
    assert [json.loads(line)["text"] for line in capsys.readouterr().out.splitlines()] == TEXTS
    assert main(["embed", "--model", str(minilm_dir), "--text", TEXTS[0], "--text", " ", "--output", "-"]) == 1
    out, err = capsys.readouterr()
    assert out == "" and err.strip() == "bertforge embed: error: --text #2 is empty; every --text is one text to embed"
