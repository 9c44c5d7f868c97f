"""Faults a user can cause, end to end through `bertforge.cli.main`: each ends as ONE line
`bertforge <verb>: error: ...` naming the right thing, a non-zero exit, no traceback and no half-written output.
"""
from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bertforge.cli import main

import warm_cli
from needs import skip_as_root, skip_privileged

# `bertforge vocab` without a progress bar (its lines would mix with the error line) and a small vocabulary
VOCAB = ("vocab", "--no-progress", "--vocab-size", "200")
CORPUS = "\n".join(f"the cat number {i} sat on the mat and looked at the dog ." for i in range(300)) + "\n"


def run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    """Exit status (argparse's SystemExit included), stdout and stderr of one `bertforge` call."""
    capsys.readouterr()
    try:
        code = main([str(a) for a in argv])
    except SystemExit as exit_:
        code = exit_.code
    out, err = capsys.readouterr()
    return code, out, err


def one_error_line(err: str, verb: str) -> str:
    """The single line the boundary prints; fails on a traceback or more than one line."""
    assert "Traceback" not in err, err
    lines = [line for line in err.splitlines() if line.strip() and not line.startswith("usage:")
             and not line.startswith("  ")]
    assert len(lines) == 1, err
    assert lines[0].startswith(f"bertforge {verb}: error: "), err
    return lines[0]


def files_in(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*")) if folder.exists() else []


@pytest.fixture
def corpus(tmp_path) -> Path:
    path = tmp_path / "corpus.txt"
    path.write_text(CORPUS, encoding="utf-8")
    return path


# ---- the boundary itself -------------------------------------------------------------------------------------

def test_internal_error_is_one_line_with_a_hint(monkeypatch, capsys):
    from bertforge.commands import info
    monkeypatch.setattr(info, "load_config", lambda spec: None)  # a bug: None has no model_type
    code, _, err = run_cli(capsys, "info", "--model", "tiny")
    line = one_error_line(err, "info")
    assert code == 1 and "internal error (AttributeError" in line and "--debug" in line


@pytest.mark.parametrize("where", ["global", "after-verb"])
def test_debug_shows_the_traceback(monkeypatch, capsys, where):
    from bertforge.commands import info
    monkeypatch.setattr(info, "load_config", lambda spec: None)
    argv = ["--debug", "info", "--model", "tiny"] if where == "global" else ["info", "--model", "tiny", "--debug"]
    with pytest.raises(AttributeError):
        main(argv)


@pytest.mark.slow
def test_a_real_process_exits_non_zero_without_traceback(tmp_path):
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[1] / "src"), OMP_NUM_THREADS="1")
    proc = subprocess.run([sys.executable, "-m", "bertforge", "info", "--model", str(tmp_path / "config.json")],
                          check=False, capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 1
    assert one_error_line(proc.stderr, "info").endswith("config.json: no such file or folder; expected a preset "
                                                        "(tiny, mini, small, medium, base, large, or e.g. "
                                                        "albert-base), a config.json or a checkpoint folder")


def test_flag_mistake_is_exactly_one_line(capsys):
    code, _, err = run_cli(capsys, "info", "--model", "tiny", "--seq-len", "0")
    assert code == 2 and err == ("bertforge info: error: argument --seq-len: expected a whole number of at least 1, "
                                 "got '0' (see bertforge info --help)\n")


@pytest.mark.parametrize("make, expected", [
    (lambda p: FileNotFoundError(errno.ENOENT, "No such file or directory", str(p / "a.txt")),
     "{p}/a.txt: no such file or folder"),
    (lambda p: IsADirectoryError(errno.EISDIR, "Is a directory", str(p)), "{p} is a folder; expected a file"),
    (lambda p: NotADirectoryError(errno.ENOTDIR, "Not a directory", str(p / "f.txt" / "x")),
     "{p}/f.txt/x: a part of this path is a file; expected a folder"),
    (lambda p: PermissionError(errno.EACCES, "Permission denied", str(p / "new.bin")),
     "cannot write {p}/new.bin: permission denied"),
    (lambda p: OSError(errno.EROFS, "Read-only file system", str(p / "x")),
     "cannot write {p}/x: read-only file system"),
    (lambda p: OSError(errno.ENOSPC, "No space left on device", str(p / ".model.safetensors.abc123.tmp")),
     "no space left on device while writing {p}/model.safetensors"),
    (lambda p: RuntimeError("[enforce fail at inline_container.cc:664] . unexpected pos\nerror: No space left on "
                            "device"), "no space left on device"),
    (lambda p: ValueError("first line\n  second line"), "first line second line"),
    (lambda p: ModuleNotFoundError("No module named 'onnxruntime'", name="onnxruntime"),
     "this needs the Python package 'onnxruntime', which is not installed (pip install onnxruntime)"),
])
def test_os_and_library_errors_are_reworded(tmp_path, make, expected):
    from bertforge.commands.errors import describe
    described = describe(make(tmp_path))
    assert described.message == expected.format(p=tmp_path) and not described.internal


def test_raw_json_error_names_the_file_and_line(tmp_path):
    from bertforge.commands.errors import describe
    path = tmp_path / "labels.json"
    path.write_text('{\n  "a": 1,\n  "b": \n}\n')

    def read_labels(file: Path):
        return json.loads(file.read_text())
    with pytest.raises(json.JSONDecodeError) as err:
        read_labels(path)
    assert describe(err.value).message == f"{path}: not valid JSON (line 4, column 1: Expecting value)"


# ---- config.json validation ----------------------------------------------------------------------------------

GOOD = {"model_type": "bert", "vocab_size": 100, "hidden_size": 32, "num_hidden_layers": 1,
        "num_attention_heads": 2, "intermediate_size": 64, "max_position_embeddings": 64}


@pytest.mark.parametrize("change, field, expected", [
    ({"layer_norm_eps": "tiny"}, "layer_norm_eps", "a small positive number"),
    ({"hidden_size": 32.5}, "hidden_size", "a whole number"),
    ({"hidden_size": "32"}, "hidden_size", "a whole number"),
    ({"hidden_size": 30, "num_attention_heads": 4}, "hidden_size", "divisible by 'num_attention_heads'"),
    ({"pad_token_id": 100}, "pad_token_id", "must be below 'vocab_size' (100)"),
    ({"num_hidden_layers": -2}, "num_hidden_layers", "at least 1"),
    ({"intermediate_size": 0}, "intermediate_size", "at least 1"),
    ({"hidden_dropout_prob": "0.1"}, "hidden_dropout_prob", "a probability in [0, 1)"),
    ({"attention_probs_dropout_prob": 1.5}, "attention_probs_dropout_prob", "a probability in [0, 1)"),
    ({"id2label": {"x": "POS"}}, "id2label", "label ids"),
])
def test_bad_config_field_is_named(tmp_path, capsys, change, field, expected):
    from bertforge.config import BertConfig, ConfigError
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**GOOD, **change}))
    with pytest.raises(ConfigError) as err:
        BertConfig.from_json_file(path)
    message = str(err.value)
    assert message.startswith(f"{path}: config field '{field}'") and expected in message, message
    code, _, stderr = run_cli(capsys, "info", "--model", str(path))
    assert code == 1 and f"'{field}'" in one_error_line(stderr, "info")


def test_good_config_still_loads(tmp_path):
    from bertforge.config import BertConfig
    path = tmp_path / "config.json"
    path.write_text(json.dumps(GOOD))
    assert BertConfig.from_json_file(path).hidden_size == 32


def test_config_that_is_not_json_names_file_and_line(tmp_path, capsys):
    path = tmp_path / "config.json"
    path.write_text('{\n  "model_type": "bert",\n  "hidden_size": 32,,\n}\n')
    code, _, err = run_cli(capsys, "info", "--model", str(path))
    line = one_error_line(err, "info")
    assert code == 1 and str(path) in line and "line 3" in line


# ---- output folders ------------------------------------------------------------------------------------------

def test_output_that_is_a_file(corpus, tmp_path, capsys):
    target = tmp_path / "model.bin"
    target.write_bytes(b"precious")
    code, _, err = run_cli(capsys, *VOCAB, "--input", corpus, "--output", target)
    line = one_error_line(err, "vocab")
    assert code == 1 and f"output {target} is a file; expected a folder" in line
    assert target.read_bytes() == b"precious"


def test_output_below_a_file(corpus, tmp_path, capsys):
    target = tmp_path / "model.bin"
    target.write_bytes(b"x")
    code, _, err = run_cli(capsys, *VOCAB, "--input", corpus, "--output", target / "sub")
    assert code == 1 and "a part of that path is a file" in one_error_line(err, "vocab")


def test_non_empty_output_needs_overwrite(corpus, tmp_path, capsys):
    out = tmp_path / "out"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    argv = ["vocab", "--no-progress", "--input", corpus, "--output", out, "--vocab-size", "200", "--unused", "0"]
    code, _, err = run_cli(capsys, *argv)
    line = one_error_line(err, "vocab")
    assert code == 1 and str(out) in line and "use --overwrite, or choose another --output" in line
    assert files_in(out) == ["notes.txt"]
    code, out_text, _ = run_cli(capsys, *argv, "--overwrite")
    assert code == 0 and "vocabulary:" in out_text
    assert "notes.txt" not in files_in(out) and "vocab.txt" in files_in(out)


@skip_as_root("root writes into read-only folders")
def test_read_only_output_folder(corpus, tmp_path, capsys):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    try:
        if os.access(ro, os.W_OK):
            skip_privileged("this user can write into a chmod 555 folder")
        code, _, err = run_cli(capsys, *VOCAB, "--input", corpus, "--output", ro)
        assert code == 1 and f"cannot write {ro}: permission denied" in one_error_line(err, "vocab")
        code, _, err = run_cli(capsys, *VOCAB, "--input", corpus, "--output", ro / "new")
        assert code == 1 and "permission denied" in one_error_line(err, "vocab")
    finally:
        ro.chmod(0o755)


def test_read_only_file_system(corpus, tmp_path, capsys, monkeypatch):
    """A read-only mount, simulated: creating any file in the output fails with EROFS."""
    from bertforge import outputs

    def erofs(*args, **kwargs):
        raise OSError(errno.EROFS, os.strerror(errno.EROFS))
    monkeypatch.setattr(outputs.tempfile, "mkstemp", erofs)
    out = tmp_path / "out"
    code, _, err = run_cli(capsys, "vocab", "--no-progress", "--input", corpus, "--output", out, "--vocab-size", "200")
    assert code == 1 and f"cannot write {out}: read-only file system" in one_error_line(err, "vocab")
    assert not out.exists()  # the folder it created is removed again


def test_disk_full_while_writing_names_the_file_and_leaves_nothing(corpus, tmp_path, capsys, monkeypatch):
    """ENOSPC half-way through writing vocab.txt (simulated: half the text reaches the file, then write() fails
    the way the kernel's does, without a file name)."""
    import bertforge.tokenization.vocab as vocab_module

    class FullDisk:
        def __init__(self, handle):
            self.handle = handle

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.handle.close()

        def write(self, data):
            self.handle.write(data[: len(data) // 2])
            self.handle.flush()
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(vocab_module, "open", lambda *a, **k: FullDisk(open(*a, **k)), raising=False)  # noqa: SIM115
    out = tmp_path / "out"
    code, _, err = run_cli(capsys, "vocab", "--no-progress", "--input", corpus, "--output", out, "--vocab-size", "200")
    line = one_error_line(err, "vocab")
    assert code == 1 and line.endswith(f"no space left on device while writing {out / 'vocab.txt'}")
    assert not out.exists()  # no half-written vocab.txt left behind


def test_disk_full_inside_safetensors_is_named(tmp_path, monkeypatch):
    """safetensors reports ENOSPC as a SafetensorError with Rust's text; the message still names the file."""
    import safetensors.torch
    import torch
    from safetensors import SafetensorError

    from bertforge.atomic import atomic_save_safetensors
    from bertforge.commands.errors import describe

    def full(tensors, filename, metadata=None):
        raise SafetensorError('Error while serializing: IoError(Os { code: 28, kind: StorageFull, message: '
                              '"No space left on device" })')
    monkeypatch.setattr(safetensors.torch, "save_file", full)
    target = tmp_path / "model.safetensors"
    with pytest.raises(SafetensorError) as err:
        atomic_save_safetensors({"w": torch.zeros(2)}, target)
    assert describe(err.value).message == f"no space left on device while writing {target}"
    assert files_in(tmp_path) == []  # the temporary file is gone too


# ---- inputs ---------------------------------------------------------------------------------------------------

def test_folder_given_as_input_file(tmp_path, capsys):
    code, _, err = run_cli(capsys, "vocab", "--no-progress", "--input", tmp_path, "--output", tmp_path / "out")
    assert code == 2 and f"argument --input: {tmp_path} is a folder; expected a file" in err
    assert "Traceback" not in err and not (tmp_path / "out").exists()


def test_file_given_as_folder(corpus, tmp_path, capsys):
    code, _, err = run_cli(capsys, "prepare", "--input", corpus, "--vocab", corpus, "--output", tmp_path / "o")
    assert code == 2 and f"argument --vocab: {corpus} is a file; expected a folder" in err


def test_folder_where_a_json_file_is_read(tmp_path, capsys):
    (tmp_path / "config.json").mkdir()
    code, _, err = run_cli(capsys, "info", "--model", tmp_path)
    assert code == 1 and f"{tmp_path / 'config.json'} is a folder; expected a regular file" in one_error_line(err, "info")


def test_undecodable_config_names_file_and_line(tmp_path, capsys):
    path = tmp_path / "config.json"
    path.write_bytes(b'{\n  "model_type": "bert",\n  "name": "caf\xe9"\n}\n')  # Latin-1, not UTF-8
    code, _, err = run_cli(capsys, "info", "--model", path)
    line = one_error_line(err, "info")
    assert code == 1 and f"{path}: not valid UTF-8 at line 3 (byte 0xe9" in line


@skip_as_root("root reads unreadable files")
def test_unreadable_input(corpus, tmp_path, capsys):
    corpus.chmod(0)
    try:
        code, _, err = run_cli(capsys, *VOCAB, "--input", corpus, "--output", tmp_path / "o")
        assert code == 1 and f"cannot read {corpus}: permission denied" in one_error_line(err, "vocab")
    finally:
        corpus.chmod(0o644)


def test_vocab_names_file_and_line_of_undecodable_text(tmp_path, capsys):
    path = tmp_path / "mixed.txt"
    path.write_bytes(CORPUS.encode() + b"a line in latin-1: caf\xe9\n" + CORPUS.encode())
    out = tmp_path / "out"
    for kind in ("wordpiece", "bpe", "sentencepiece"):
        code, _, err = run_cli(capsys, "vocab", "--no-progress", "--type", kind,
                               "--input", path, "--output", out, "--vocab-size", "300")
        line = one_error_line(err, "vocab")
        assert code == 1 and f"{path}, line 301: not valid UTF-8 (byte 0xe9)" in line and "--skip-bad-lines" in line
        assert not out.exists()


def test_vocab_skips_bad_lines_when_asked(tmp_path, capsys, caplog):
    path = tmp_path / "mixed.txt"
    path.write_bytes(CORPUS.encode() + b"caf\xe9 \xff\n" + b"zzqx \xfe\n")
    code, _, _ = run_cli(capsys, "vocab", "--no-progress", "--input", path, "--output", tmp_path / "v",
                         "--vocab-size", "200", "--unused", "0", "--skip-bad-lines")
    assert code == 0 and "skipped 2 lines that are not valid UTF-8" in caplog.text
    vocab = (tmp_path / "v" / "vocab.txt").read_text(encoding="utf-8").split("\n")
    assert "zzqx" not in vocab and not any("\ufffd" in t for t in vocab)


def damaged_corpus(path: Path, good: int, bad: int) -> Path:
    """`good` documents of 2 clean lines, then `bad` documents of 2 damaged lines: one of control characters
    only (nothing left after cleaning), one with bytes that are not UTF-8."""
    docs = [f"sentence number {i} of the corpus is here .\nand one more line .".encode() for i in range(good)]
    docs += [b"\x00\x01\x02\n\xff\xfe garbage %d \xff" % i for i in range(bad)]
    path.write_bytes(b"\n\n".join(docs) + b"\n")
    return path


def test_prepare_refuses_mostly_damaged_input(minilm_dir, tmp_path, capsys):
    path = damaged_corpus(tmp_path / "binary.txt", good=5, bad=20)  # 10 good lines, 40 damaged
    out = tmp_path / "shards"
    code, _, err = run_cli(capsys, "prepare", "--input", path, "--vocab", minilm_dir, "--output", out, "--workers", "0",
                           "--format", "sentences", "--no-progress")
    line = one_error_line(err, "prepare")
    assert code == 1 and f"{path}: 40 of 50 non-blank lines (80%)" in line and "more than 50%" in line
    assert not out.exists()


def test_prepare_reports_damage_below_the_threshold(minilm_dir, tmp_path, capsys):
    path = damaged_corpus(tmp_path / "text.txt", good=20, bad=5)  # 40 good lines, 10 damaged
    code, out, _ = run_cli(capsys, "prepare", "--input", path, "--vocab", minilm_dir, "--output", tmp_path / "s",
                           "--workers", "0", "--format", "sentences", "--no-progress", "--heldout-fraction", "0")
    assert code == 0 and "damaged lines: 10 of 50 non-blank lines (5 with nothing left after cleaning)" in out
    manifest = json.loads((tmp_path / "s" / "manifest.json").read_text())
    assert manifest["damaged_lines"] == {"count": 10, "of": 50, "emptied": 5}


def test_fill_mask_refuses_a_model_without_mlm_head(minilm_dir, capsys):
    """all-MiniLM-L6-v2 is an encoder without cls.predictions weights: a random head would rank the tokens."""
    code, _, err = run_cli(capsys, "fill-mask", "--model", minilm_dir, "the cat [MASK] on the mat")
    line = one_error_line(err, "fill-mask")
    assert code == 1 and "has no trained masked-LM head" in line and str(minilm_dir) in line


def test_fill_mask_caps_characters_before_tokenizing(minilm_dir, capsys):
    code, _, err = run_cli(capsys, "fill-mask", "--model", minilm_dir, "--max-chars", "50", "short [MASK]",
                           "a [MASK] " + "x" * 60)
    assert code == 1 and "text #2 has 69 characters; the limit is --max-chars 50" in one_error_line(err, "fill-mask")


def test_corrupt_tokenizer_file_from_rust_is_one_line(tmp_path):
    from tokenizers import Tokenizer

    from bertforge.commands.errors import describe
    path = tmp_path / "tokenizer.json"
    path.write_text('{"version": "1.0", "model": {"type": "Nope"}}')
    with pytest.raises(Exception) as err:
        Tokenizer.from_file(str(path))
    described = describe(err.value)
    assert not described.internal and described.message.startswith(f"{path}: data did not match")


def test_missing_field_of_a_user_file_is_named(tmp_path):
    from bertforge.commands.errors import describe
    path = tmp_path / "task.json"
    path.write_text('{"labels": ["a", "b"]}')

    def read_task(file: Path):
        return json.loads(file.read_text())["num_labels"]
    with pytest.raises(KeyError) as err:
        read_task(path)
    assert describe(err.value).message.startswith(f"{path}: missing field 'num_labels'")


# ---- bad flags are parse errors -----------------------------------------------------------------------------

@pytest.mark.parametrize("argv, flag", [
    (["vocab", "--input", "{corpus}", "--output", "{out}", "--vocab-size", "0"], "--vocab-size"),
    (["vocab", "--input", "{corpus}", "--output", "{out}", "--min-frequency", "-1"], "--min-frequency"),
    (["vocab", "--input", "{missing}", "--output", "{out}"], "--input"),
    (["prepare", "--input", "{corpus}", "--vocab", "{tmp}", "--output", "{out}", "--heldout-fraction", "1.5"],
     "--heldout-fraction"),
    (["prepare", "--input", "{corpus}", "--vocab", "{tmp}", "--output", "{out}", "--workers", "-1"], "--workers"),
    (["prepare", "--input", "{corpus}", "--vocab", "{tmp}", "--output", "{out}", "--max-seq-length", "0"],
     "--max-seq-length"),
    (["prepare", "--input", "{missing}", "--vocab", "{tmp}", "--output", "{out}"], "--input"),
    (["fill-mask", "--model", "{tmp}", "--top-k", "0", "a [MASK]"], "--top-k"),
    (["fill-mask", "--model", "{tmp}", "--max-chars", "ten", "a [MASK]"], "--max-chars"),
    (["info", "--model", "tiny", "--seq-len", "0"], "--seq-len"),
    (["ablate", "bert-objectives", "--data", "{tmp}", "--output", "{out}", "--batch-size", "0"], "--batch-size"),
    (["ablate", "bert-objectives", "--data", "{tmp}", "--output", "{out}", "--budget", "ten minutes"], "--budget"),
    (["ablate", "bert-objectives", "--data", "{tmp}", "--output", "{out}", "--lr", "-1e-3"], "--lr"),
    (["ablate", "bert-objectives", "--data", "{tmp}", "--output", "{out}", "--eval-batches", "0"], "--eval-batches"),
])
def test_bad_flags_stop_at_parse_time(argv, flag, corpus, tmp_path, capsys):
    from bertforge.ablation.tables import TABLES
    if argv[0] == "ablate" and argv[1] not in TABLES:
        argv = [argv[0], next(iter(TABLES)), *argv[2:]]
    values = {"{corpus}": str(corpus), "{out}": str(tmp_path / "out"), "{tmp}": str(tmp_path),
              "{missing}": str(tmp_path / "missing.txt")}
    code, _, err = run_cli(capsys, *[values.get(a, a) for a in argv])
    assert code == 2 and f"error: argument {flag}: " in err and "Traceback" not in err
    assert not (tmp_path / "out").exists()


# ---- untrusted model folders, through every verb that loads one ---------------------------------------------------
def _hostile_folder(tiny_model, tmp_path, fault: str) -> tuple[Path, str]:
    """A copy of the tiny model (a predictor: it has task.json) with one fault; what the error line must say."""
    import shutil
    folder = Path(shutil.copytree(tiny_model, tmp_path / "model"))
    (folder / "task.json").write_text(json.dumps({"task": "classification", "head": "sequence_classification",
                                                  "labels": ["a", "b"], "max_seq_length": 32}))
    config = json.loads((folder / "config.json").read_text())
    if fault == "layers":
        (folder / "config.json").write_text(json.dumps({**config, "num_hidden_layers": 10 ** 6}))
        return folder, "'num_hidden_layers' is 1,000,000"  # against the weights, or the bound a config check knows
    if fault == "vocab":
        (folder / "config.json").write_text(json.dumps({**config, "vocab_size": config["vocab_size"] + 1}))
        return folder, f"'vocab_size' is {config['vocab_size'] + 1:,} but the weights"
    if fault == "pickle":
        from safetensors.torch import load_file
        import torch
        torch.save(load_file(folder / "model.safetensors"), folder / "pytorch_model.bin")
        (folder / "model.safetensors").unlink()
        return folder, "pytorch_model.bin, a pickle, which bertforge never loads"
    outside = tmp_path / "outside.json"  # config.json: a link out of the folder
    (folder / "config.json").rename(outside)
    (folder / "config.json").symlink_to(outside)
    return folder, "outside the folder"


VERB_ARGS = {"embed": ["--text", "hello", "--output", "{out}/x.jsonl"], "predict": ["--text", "hello"],
             "export": ["--output", "{out}/onnx"], "fill-mask": ["hello [MASK]"],
             "finetune": ["--task", "classification", "--train", "{out}/train.tsv", "--output", "{out}/run",
                          "--no-progress"]}


@pytest.mark.parametrize(("verb", "fault"), [(verb, "layers") for verb in sorted(VERB_ARGS)]
                         + [(verb, fault) for verb in ("predict", "export") for fault in ("vocab", "pickle", "link_out")])
def test_untrusted_model_folder_is_one_line_through_every_verb(tiny_model, tmp_path, capsys, verb, fault):
    folder, expected = _hostile_folder(tiny_model, tmp_path, fault)
    out = tmp_path / "out"
    out.mkdir()
    (out / "train.tsv").write_text("text\tlabel\n" + "".join(f"{'good' if i % 2 else 'bad'} film number {i}\t{i % 2}\n"
                                                              for i in range(40)))
    args = [a.format(out=out) for a in VERB_ARGS[verb]]
    code, _, err = run_cli(capsys, verb, "--model", folder, *args, *(["--device", "cpu"] if verb != "export" else []))
    line = one_error_line(err, verb)
    assert code == 1 and expected in line, line
    assert files_in(out) == ["train.tsv"]  # nothing written


def test_untrusted_model_folder_is_one_line_through_serve(tiny_model, tmp_path):
    folder, expected = _hostile_folder(tiny_model, tmp_path, "layers")
    done = warm_cli.run(["serve", "--model", str(folder), "--port", "8999"], timeout=300)
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.startswith("bertforge serve: error: ")]
    assert len(lines) == 1 and expected in lines[0], done.stderr
