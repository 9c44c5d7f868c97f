"""A run's inputs are known by their content, not their path: the same command on changed data is refused
(naming the input) instead of answering "nothing to do" with the old result; on unchanged data it still is."""
from __future__ import annotations

import hashlib
import json
import os
import time

import pytest

from bertforge.cli import main
from bertforge.data import identity
from bertforge.data.identity import INPUT_CONTENT, check_input_content, content_identity
from bertforge.outputs import OutputError, write_run_config
from predictor_folders import tiny_encoder


def rewrite_keeping_size_and_mtime(path, text: str) -> None:
    """Other bytes of the same length, with the old modification time put back (what `cp -p` or `touch -r` do)."""
    st = path.stat()
    time.sleep(0.02)  # past the file system's timestamp granularity, so that the kernel's ctime moves on
    assert len(text.encode()) == st.st_size
    path.write_text(text)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert path.stat().st_mtime_ns == st.st_mtime_ns and path.stat().st_size == st.st_size


def test_digest_is_sha256_of_the_bytes_and_a_folder_covers_every_file(tmp_path):
    file = tmp_path / "a.txt"
    file.write_bytes(b"the cat sat\n")
    [[path, digest, _]] = content_identity([file])
    assert path == str(file.resolve()) and digest == "sha256:" + hashlib.sha256(b"the cat sat\n").hexdigest()
    folder = tmp_path / "model"
    (folder / "sub").mkdir(parents=True)
    (folder / "config.json").write_text("{}")
    (folder / "sub" / "w.bin").write_bytes(b"123")
    (folder / "checkpoints").mkdir()
    (folder / "checkpoints" / "step-1").write_text("a training checkpoint")
    (folder / ".lock").write_text("")
    before = content_identity([folder])[0][1]
    (folder / "checkpoints" / "step-1").write_text("another checkpoint")  # not part of the model
    (folder / ".lock").write_text("x")
    assert content_identity([folder])[0][1] == before
    (folder / "sub" / "w.bin").write_bytes(b"124")
    assert content_identity([folder])[0][1] != before
    (folder / "sub" / "w.bin").write_bytes(b"123")
    (folder / "sub" / "w.bin").rename(folder / "w.bin")  # the same bytes under another name: another model
    assert content_identity([folder])[0][1] != before


def test_missing_paths_and_presets_are_skipped_and_globs_expand(tmp_path):
    (tmp_path / "a.txt").write_text("a")
    (tmp_path / "b.txt").write_text("b")
    rows = content_identity([None, "-", "bert-base-uncased", str(tmp_path / "*.txt")])
    assert [r[0] for r in rows] == [str((tmp_path / n).resolve()) for n in ("a.txt", "b.txt")]


def test_a_large_input_with_the_same_stat_key_is_not_read_again_but_any_write_is_seen(tmp_path, monkeypatch):
    monkeypatch.setattr(identity, "REHASH_BELOW", 0)  # every input counts as large
    file = tmp_path / "weights.bin"
    file.write_text("abcdef")
    first = content_identity([file])
    reads = []
    real = identity.content_digest
    monkeypatch.setattr(identity, "content_digest", lambda *a: reads.append(a) or real(*a))
    assert content_identity([file], first) == first and reads == []  # the recorded digest is reused
    rewrite_keeping_size_and_mtime(file, "abcdeg")
    again = content_identity([file], first)
    assert len(reads) == 1 and again[0][1] == "sha256:" + hashlib.sha256(b"abcdeg").hexdigest()


def test_check_refuses_changed_content_of_the_same_verb_only(tmp_path):
    data = tmp_path / "train.csv"
    data.write_text("text,label\nx,1\n")
    out = tmp_path / "out"
    out.mkdir()
    write_run_config(out, "vocab", {"input": str(data), INPUT_CONTENT: check_input_content(out, "vocab", [data],
                                                                                          False)})
    assert check_input_content(out, "vocab", [data], False)  # unchanged: no complaint
    rewrite_keeping_size_and_mtime(data, "text,label\ny,1\n")
    with pytest.raises(OutputError) as err:
        check_input_content(out, "vocab", [data], False)
    message = str(err.value)
    assert f"{data.resolve()} changed since that run" in message and "--overwrite" in message and "\n" not in message
    check_input_content(out, "vocab", [data], True)  # --overwrite starts again: not compared
    check_input_content(out, "prepare", [data], False)  # another verb's folder is claim_output's business


def test_vocab_on_changed_input_is_refused_and_unchanged_has_nothing_to_do(tmp_path, capsys):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("the cat sat on the mat .\nthe dog sat on the log .\n" * 50)
    out = tmp_path / "vocab"
    args = ["vocab", "--input", str(corpus), "--output", str(out), "--vocab-size", "120", "--no-progress"]
    assert main(args) == 0
    vocab = (out / "vocab.txt").read_bytes()
    capsys.readouterr()
    assert main(args) == 0 and "already holds this finished vocab run" in capsys.readouterr().out
    rewrite_keeping_size_and_mtime(corpus, "THE CAT SAT ON THE MAT .\nthe dog sat on the log .\n" * 50)
    assert main(args) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and f"{corpus.resolve()} changed since that run" in err, err
    assert (out / "vocab.txt").read_bytes() == vocab  # the refused run touched nothing
    assert main([*args, "--overwrite"]) == 0
    assert json.loads((out / "run_config.json").read_text())["status"] == "finished"
    capsys.readouterr()
    assert main(args) == 0 and "already holds this finished vocab run" in capsys.readouterr().out


ROWS = [("a gripping , funny film", "pos"), ("it 's a bore", "neg"), ("not bad at all", "pos"),
        ("the plot goes nowhere", "neg")] * 2


@pytest.fixture(scope="module")
def encoder(tmp_path_factory, minilm_dir):
    return tiny_encoder(tmp_path_factory.mktemp("tiny"), minilm_dir)


def test_finetune_on_changed_data_is_refused_finished_or_interrupted(encoder, tmp_path, capsys):
    train = tmp_path / "train.csv"
    train.write_text("text,label\n" + "".join(f'"{t}",{lab}\n' for t, lab in ROWS))
    out = tmp_path / "out"
    args = ["finetune", "--model", str(encoder), "--task", "classification", "--train", str(train), "--output",
            str(out), "--epochs", "1", "--batch-size", "8", "--max-seq-length", "16", "--no-progress", "--device",
            "cpu"]
    assert main(args) == 0
    capsys.readouterr()
    assert main(args) == 0 and "already holds this finished finetune run" in capsys.readouterr().out
    flipped = "text,label\n" + "".join(f'"{t}",{"neg" if lab == "pos" else "pos"}\n' for t, lab in ROWS)
    rewrite_keeping_size_and_mtime(train, flipped)
    assert main(args) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and f"{train.resolve()} changed since that run" in err, err
    config = json.loads((out / "run_config.json").read_text())
    config.pop("status")  # an interrupted run is not resumed on other data either
    (out / "run_config.json").write_text(json.dumps(config))
    assert main(args) == 1 and "changed since that run" in capsys.readouterr().err
    assert main([*args, "--overwrite"]) == 0


def test_evaluate_on_a_changed_file_is_refused(minilm_dir, tmp_path, capsys):
    from predictor_folders import tiny_predictor
    model = tiny_predictor(tmp_path / "p", minilm_dir, "sst2", "sequence_classification", ["0", "1"])
    dev = tmp_path / "dev.tsv"
    dev.write_text("sentence\tlabel\n" + "".join(f"{t}\t{int(lab == 'pos')}\n" for t, lab in ROWS))
    out = tmp_path / "eval"
    args = ["evaluate", "--model", str(model), "--eval", str(dev), "--output", str(out), "--device", "cpu"]
    assert main(args) == 0
    capsys.readouterr()
    assert main(args) == 0 and "already holds this finished evaluate run" in capsys.readouterr().out
    rewrite_keeping_size_and_mtime(dev, dev.read_text().replace("\t1\n", "\t2\n").replace("\t0\n", "\t1\n")
                                   .replace("\t2\n", "\t0\n"))
    assert main(args) == 1 and f"{dev.resolve()} changed since that run" in capsys.readouterr().err
