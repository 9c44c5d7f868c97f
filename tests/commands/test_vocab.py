"""`bertforge vocab`: a --vocab-size the reserved ids fill is refused with the flags that decide it."""
from __future__ import annotations

import pytest

from bertforge.cli import main


@pytest.mark.parametrize("argv, message", [
    (["--vocab-size", "50"], "--vocab-size 50 leaves no room for learned pieces after the 104 reserved ids of --type "
                             "wordpiece (5 special tokens and --unused 99); give more than 104"),
    (["--vocab-size", "50", "--unused", "0"], None),
    (["--vocab-size", "200", "--type", "bpe"], "--vocab-size 200 leaves no room for learned pieces after the 261 "
                                               "reserved ids of --type bpe (256 byte symbols and 5 special tokens)"),
])
def test_vocab_size_against_the_reserved_ids(tmp_path, capsys, argv, message):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("the cat sat on the mat .\n" * 50)
    out = tmp_path / "vocab"
    code = main(["vocab", "--input", str(corpus), "--output", str(out), "--no-progress", *argv])
    err = capsys.readouterr().err.strip()
    if message is None:  # 5 special tokens and no [unused]: 50 leaves room
        assert code == 0 and (out / "vocab.txt").is_file()
        return
    assert code == 1 and err.startswith(f"bertforge vocab: error: {message}") and "\n" not in err
    assert not out.exists()
