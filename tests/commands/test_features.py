"""`bertforge features`: texts from --text and a file, and the inputs it refuses (with the flag that is wrong)."""
from __future__ import annotations

import pytest
from safetensors import safe_open

from bertforge.cli import main
from predictor_folders import tiny_predictor


@pytest.fixture(scope="module")
def encoder(tmp_path_factory, minilm_dir):
    return tiny_predictor(tmp_path_factory.mktemp("enc"), minilm_dir, "sst2", "sequence_classification", ["0", "1"])


def test_text_flags_then_file_lines_blank_lines_skipped(encoder, tmp_path, capsys):
    """--text texts come first, then the file's non-blank lines; the same words as a file with all of them."""
    (tmp_path / "part.txt").write_text("EU rejects German call .\n\n", encoding="utf-8")
    (tmp_path / "all.txt").write_text("Peter Blackburn\nBRUSSELS 1996-08-22\nEU rejects German call .\n")
    common = ["--model", str(encoder), "--layers", "-1", "--device", "cpu"]
    assert main(["features", *common, "--text", "Peter Blackburn", "--text", "BRUSSELS 1996-08-22", "--input",
                 str(tmp_path / "part.txt"), "--output", str(tmp_path / "a.safetensors")]) == 0
    assert main(["features", *common, "--input", str(tmp_path / "all.txt"), "--output",
                 str(tmp_path / "b.safetensors")]) == 0
    with safe_open(tmp_path / "a.safetensors", "pt") as a, safe_open(tmp_path / "b.safetensors", "pt") as b:
        assert a.metadata()["words"] == b.metadata()["words"]
        assert sorted(a.keys()) == sorted(b.keys()) == ["text_0", "text_1", "text_2"]
        for key in a.keys():
            assert a.get_tensor(key).equal(b.get_tensor(key))


@pytest.mark.parametrize("argv, message", [
    (["--input", "{dir}/t.csv", "--output", "{dir}/o.safetensors"],
     "--input {dir}/t.csv: features reads plain text, one text per line; this is a table"),
    (["--text", "a b", "--output", "{dir}/o.npy"], "--output {dir}/o.npy: expected a file name ending in .safetensors"),
    (["--text", "a b", "--output", "{dir}/o.safetensors"],
     "the default --layers -1,-2,-3,-4 needs 4 layers and the model has 2: give --layers with hidden-state indices "
     "0..2 or -3..-1"),
    (["--output", "{dir}/o.safetensors"], "nothing to read: give --input FILE or --text"),
], ids=["table-input", "npy-output", "default-layers", "no-input"])
def test_refusals_name_the_flag(encoder, tmp_path, capsys, argv, message):
    (tmp_path / "t.csv").write_text("text,label\nfine,1\n")
    argv = [a.format(dir=tmp_path) for a in argv]
    assert main(["features", "--model", str(encoder), *argv]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"bertforge features: error: {message.format(dir=tmp_path)}") and "\n" not in err
    assert not list(tmp_path.glob("o.*"))
