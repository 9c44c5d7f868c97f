"""`bertforge prepare` refuses its own output given back as --input (it would tokenize the binary shards)."""
from __future__ import annotations

import json

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


def test_record_inputs_by_glob_and_one_line_errors(tmp_path, minilm_dir, capsys):
    for i in range(2):
        (tmp_path / f"part-{i}.jsonl").write_text(
            "".join(json.dumps({"body": f"Document {i}-{j}. It has two sentences."}) + "\n" for j in range(3)))
    common = ["--vocab", str(minilm_dir), "--workers", "0", "--no-progress", "--heldout-fraction", "0"]
    assert main(["prepare", "--input", str(tmp_path / "part-*.jsonl"), "--text-column", "body",
                 "--output", str(tmp_path / "out"), *common]) == 0
    assert "prepared 6 documents" in capsys.readouterr().out
    assert main(["prepare", "--input", str(tmp_path / "part-*.jsonl"), "--output", str(tmp_path / "bad"), *common]) == 1
    assert capsys.readouterr().err == (f"bertforge prepare: error: {tmp_path / 'part-0.jsonl'}, line 1, field 'text': "
                                       "expected a string, got nothing (null or missing)\n")
    assert not (tmp_path / "bad").exists()
    (tmp_path / "more.jsonl").write_text('{"body": "Fine text here."}\n{"body": ["a", "list"]}\n')
    assert main(["prepare", "--input", str(tmp_path / "*.jsonl"), "--text-column", "body", "--skip-bad-rows",
                 "--output", str(tmp_path / "skipped"), *common]) == 0
    out = capsys.readouterr().out
    assert "prepared 7 documents" in out and '"bad_rows": 1' in out
    assert f"first bad row skipped: {tmp_path / 'more.jsonl'}, line 2, field 'body': expected a string, got list" in out
