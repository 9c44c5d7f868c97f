"""`bertforge vocab`: a --vocab-size the reserved ids fill is refused with the flags that decide it."""
from __future__ import annotations

import shutil

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


def test_vocab_makes_an_xlnet_sentencepiece_folder_transformers_reads_alike(tmp_path, capsys):
    transformers = pytest.importorskip("transformers")
    corpus = tmp_path / "corpus.txt"
    lines = [f"the {w} cat sat on {v} mat number {i} ." for i, (w, v) in
             enumerate(zip(["black", "white", "old", "small"] * 40, ["a", "the", "my", "her"] * 40))]
    corpus.write_text("\n".join(lines) + "\n")
    out = tmp_path / "xlnet"
    assert main(["vocab", "--type", "sentencepiece", "--family", "xlnet", "--vocab-size", "60", "--cased",
                 "--input", str(corpus), "--output", str(out), "--no-progress"]) == 0
    assert "(sentencepiece, xlnet, cased)" in capsys.readouterr().out
    assert (out / "spiece.model").is_file() and (out / "tokenizer.json").is_file()
    from bertforge.tokenization import load_tokenizer
    ours = load_tokenizer(out)
    only = tmp_path / "spiece-only"  # what transformers builds its own tokenizer from
    only.mkdir()
    shutil.copy(out / "spiece.model", only / "spiece.model")
    theirs = transformers.XLNetTokenizer.from_pretrained(str(only))
    texts, pairs = ["The black cat sat .", "a mat", "number 7 sat"], ["on my mat", "the old", "her cat ."]
    a = ours(texts, pairs, padding=True)
    b = theirs(texts, pairs, padding=True)
    assert a["input_ids"] == b["input_ids"] and a["attention_mask"] == b["attention_mask"]
    assert a["input_ids"][1][0] == theirs.pad_token_id and a["input_ids"][0][-2:] == [4, 3], "left pad, <sep> <cls>"


def test_the_xlnet_family_s_reserved_ids_are_named(tmp_path, capsys):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("the cat sat on the mat .\n" * 50)
    code = main(["vocab", "--input", str(corpus), "--output", str(tmp_path / "v"), "--no-progress", "--type",
                 "sentencepiece", "--family", "xlnet", "--vocab-size", "9"])
    err = capsys.readouterr().err.strip()
    assert code == 1 and err == ("bertforge vocab: error: --vocab-size 9 leaves no room for learned pieces after the "
                                 "9 reserved ids of --type sentencepiece (9 special tokens of --family xlnet); give "
                                 "more than 9")
