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
    import bertforge.commands.info as info
    monkeypatch.setattr(info, "load_config", lambda spec: None)  # a bug: None has no model_type
    code, _, err = run_cli(capsys, "info", "--model", "tiny")
    line = one_error_line(err, "info")
    assert code == 1 and "internal error (AttributeError" in line and "--debug" in line


@pytest.mark.parametrize("where", ["global", "after-verb"])
def test_debug_shows_the_traceback(monkeypatch, capsys, where):
    import bertforge.commands.info as info
    monkeypatch.setattr(info, "load_config", lambda spec: None)
    argv = ["--debug", "info", "--model", "tiny"] if where == "global" else ["info", "--model", "tiny", "--debug"]
    with pytest.raises(AttributeError):
        main(argv)


def test_a_real_process_exits_non_zero_without_traceback(tmp_path):
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[1] / "src"), OMP_NUM_THREADS="1")
    proc = subprocess.run([sys.executable, "-m", "bertforge", "info", "--model", str(tmp_path / "config.json")],
                          capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 1
    assert one_error_line(proc.stderr, "info").endswith("nor an existing path")


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
