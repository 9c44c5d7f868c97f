"""`bertforge lr-find` end to end: it prints the suggestion and a finetune command that parses; a bad flag or an
output that would destroy the model is one line, with nothing written."""
from __future__ import annotations

import json
import shlex

import pytest

from bertforge.cli import build_parser, main
from predictor_folders import tiny_encoder

ROWS = [("a gripping , funny film", "pos"), ("it 's a bore", "neg"), ("not bad at all", "pos"),
        ("the plot goes nowhere", "neg"), ("an unexpected delight", "pos"), ("flat and dull", "neg"),
        ("a joy to watch", "pos"), ("two hours lost", "neg")]


@pytest.fixture(scope="module")
def encoder(tmp_path_factory, minilm_dir):
    return tiny_encoder(tmp_path_factory.mktemp("tiny"), minilm_dir)


@pytest.fixture
def train_csv(tmp_path):
    path = tmp_path / "train.csv"
    path.write_text("text,label\n" + "".join(f'"{t}",{lab}\n' for t, lab in ROWS * 4), encoding="utf-8")
    return path


def exit_code(argv: list[str]) -> int:
    """`bertforge`'s exit status, argparse's SystemExit included."""
    try:
        return main(argv)
    except SystemExit as exit_:
        return exit_.code


def error_line(capsys) -> str:
    err = capsys.readouterr().err
    assert "Traceback" not in err, err
    lines = [line for line in err.splitlines() if line.strip() and "newly initialised" not in line]
    assert len(lines) == 1, err
    return lines[0]


def test_it_prints_the_suggestion_and_a_finetune_command_at_it(encoder, train_csv, tmp_path, capsys):
    out = tmp_path / "find"
    assert main(["lr-find", "--model", str(encoder), "--train", str(train_csv), "--output", str(out),
                 "--steps", "20", "--batch-size", "8", "--split-seed", "7", "--no-progress",
                 "--device", "cpu"]) == 0
    printed = capsys.readouterr().out.strip().splitlines()
    saved = json.loads((out / "lr_find.json").read_text())
    assert f"suggested lr {saved['suggested_lr']:.2g}" in printed[-2]
    words = shlex.split(printed[-1])
    assert printed[-1] == saved["command"] and words[:2] == ["bertforge", "finetune"]
    args = build_parser().parse_args(words[1:])  # the command is one finetune accepts
    assert args.learning_rates == [float(f"{saved['suggested_lr']:.2g}")] and args.schedule == "onecycle"
    assert (args.model, args.train_file, args.batch_size, args.split_seed) == (str(encoder), str(train_csv), 8, 7)
    assert args.task == "classification"


@pytest.mark.parametrize("flags, message", [
    (["--start-lr", "1e-2", "--end-lr", "1e-3"], "--end-lr must be above --start-lr, got 0.001 <= 0.01"),
    (["--steps", "1"], "--steps must be at least 2 for a curve, got 1"),
    (["--steps", "0"], "--steps"),
    (["--smoothing", "1.5"], "--smoothing"),
    (["--end-lr", "-1"], "--end-lr"),
], ids=["end-below-start", "one-step", "no-steps", "smoothing", "negative-lr"])
def test_a_bad_flag_is_one_line_and_writes_nothing(encoder, train_csv, tmp_path, capsys, flags, message):
    out = tmp_path / "find"
    code = exit_code(["lr-find", "--model", str(encoder), "--train", str(train_csv), "--output", str(out),
                      "--no-progress", "--device", "cpu", *flags])
    assert code != 0
    line = error_line(capsys)
    assert line.startswith("bertforge lr-find: error: ") and message in line, line
    assert not out.exists()


def test_an_output_that_holds_the_model_is_refused_even_with_overwrite(encoder, train_csv, tmp_path, capsys):
    before = sorted(p.name for p in encoder.iterdir())
    for extra in ([], ["--overwrite"]):
        assert main(["lr-find", "--model", str(encoder), "--train", str(train_csv), "--output", str(encoder),
                     "--no-progress", "--device", "cpu", *extra]) == 1
        line = error_line(capsys)
        assert line.startswith("bertforge lr-find: error: ") and str(encoder) in line, line
    assert sorted(p.name for p in encoder.iterdir()) == before
