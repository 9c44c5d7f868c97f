"""`bertforge prepare` refuses its own output given back as --input (it would tokenize the binary shards)."""
from __future__ import annotations

from bertforge.cli import main


def test_a_prepared_folder_as_input_is_refused(tmp_path, minilm_dir, capsys):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("The cat sat on the mat.\nIt looked at the dog.\n\nA second document.\nIt is short.\n")
    shards = tmp_path / "shards"
    assert main(["prepare", "--input", str(corpus), "--vocab", str(minilm_dir), "--output", str(shards),
                 "--workers", "0", "--no-progress"]) == 0
    capsys.readouterr()
    assert main(["prepare", "--input", str(shards), "--vocab", str(minilm_dir), "--output", str(tmp_path / "again"),
                 "--workers", "0", "--no-progress"]) == 1
    assert capsys.readouterr().err.strip() == (
        f"bertforge prepare: error: --input {shards} is a folder written by `bertforge prepare` (it has "
        "manifest.json): give it to `bertforge pretrain --data`; prepare reads raw text files")
    assert not (tmp_path / "again").exists()
