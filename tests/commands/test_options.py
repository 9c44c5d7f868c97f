"""The shared argparse checks: what each accepts, and that a refusal is argparse's one line naming the flag."""
from __future__ import annotations

import argparse

import pytest

from bertforge.commands import options


def _parser(**kwargs) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="bertforge x")
    parser.add_argument("--value", **kwargs)
    return parser


@pytest.mark.parametrize("check, good, bad", [
    (options.positive_int, {"1": 1, "32": 32, " 7 ": 7}, ["0", "-3", "1.5", "abc", "", "1e3"]),
    (options.non_negative_int, {"0": 0, "5": 5}, ["-1", "0.5", "x"]),
    (options.positive_float, {"1e-4": 1e-4, "3": 3.0}, ["0", "-1e-5", "nan", "inf", "fast"]),
    (options.non_negative_float, {"0": 0.0, "0.01": 0.01}, ["-0.1", "nan", "x"]),
    (options.probability, {"0": 0.0, "0.1": 0.1, "0.999": 0.999}, ["1", "1.5", "-0.1", "nan"]),
    (options.fraction, {"1": 1.0, "0.15": 0.15}, ["0", "1.01", "-1", "inf"]),
    (options.duration, {"90": 90.0, "90s": 90.0, "30m": 1800.0, "1.5h": 5400.0, "1h30m": 5400.0, "2H": 7200.0},
     ["0", "0s", "-5m", "10 minutes", "h", "1x", ""]),
])
def test_numbers_accept_and_refuse(check, good, bad):
    for text, value in good.items():
        assert check(text) == pytest.approx(value)
    for text in bad:
        with pytest.raises(argparse.ArgumentTypeError) as err:
            check(text)
        assert repr(text) in str(err.value)


def test_refusal_is_one_line_naming_the_flag(capsys):
    parser = _parser(type=options.positive_int)
    with pytest.raises(SystemExit) as exit_:
        parser.parse_args(["--value", "0"])
    assert exit_.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err == "bertforge x: error: argument --value: expected a whole number of at least 1, got '0'"


def test_paths(tmp_path):
    f = tmp_path / "a.txt"
    f.write_text("x\n")
    assert options.existing_file(str(f)) == f
    assert options.existing_dir(str(tmp_path)) == tmp_path
    assert options.input_path(str(f)) == str(f)
    assert options.input_path("-") == "-"
    cases = [(options.existing_file, tmp_path, "is a folder; expected a file"),
             (options.input_path, tmp_path, "is a folder; expected a file"),
             (options.existing_file, tmp_path / "missing.txt", "does not exist"),
             (options.existing_dir, f, "is a file; expected a folder"),
             (options.existing_dir, tmp_path / "nope", "does not exist")]
    for check, path, words in cases:
        with pytest.raises(argparse.ArgumentTypeError, match=words) as err:
            check(str(path))
        assert str(path) in str(err.value)


def test_bounded_int_takes_both_ends_and_names_the_range():
    from bertforge.commands.options import bounded_int
    parse = bounded_int(1, 1_000)
    assert parse("1") == 1 and parse(" 1000 ") == 1_000
    for text in ("0", "1001", "1e3", "10.0", "many"):
        with pytest.raises(argparse.ArgumentTypeError, match=rf"expected a whole number from 1 to 1,000, got '{text}'"):
            parse(text)
