"""Every verb's flags come from its settings dataclasses: each training verb takes every engine setting it does not
derive itself, its command-line defaults are its library defaults, and every verb runs on `--device auto`."""
from __future__ import annotations

import argparse
import functools
from dataclasses import fields

import pytest

from bertforge.cli import build_parser as build_every_verb
from bertforge.commands.flags import settings_from_args
from bertforge.commands.pretrain import config_from_args
from bertforge.device import DEVICES, PRECISIONS
from bertforge.tasks.finetune import FinetuneSettings
from bertforge.pretraining.distill import DistillConfig
from bertforge.tasks.distill import TaskDistillSettings
from bertforge.training.options import TrainOptions
from bertforge.pretraining.pretrain import PretrainConfig
from bertforge.tasks.embedding.train import EmbeddingSettings
from bertforge.tasks.seq2seq import Seq2SeqConfig

TRAINING_VERBS = {("pretrain",): PretrainConfig, ("finetune",): FinetuneSettings, ("seq2seq",): Seq2SeqConfig,
                  ("train-embeddings",): EmbeddingSettings, ("distill", "pretrain"): DistillConfig,
                  ("distill", "task"): TaskDistillSettings}


@functools.cache
def build_parser() -> argparse.ArgumentParser:
    """One parser for the module: building it imports every verb (parsing leaves it as it was)."""
    return build_every_verb()


def sub_parser(parser: argparse.ArgumentParser, name: str) -> argparse.ArgumentParser:
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return action.choices[name]


def verb_parser(*path: str) -> argparse.ArgumentParser:
    parser = build_parser()
    for name in path:
        parser = sub_parser(parser, name)
    return parser


def every_verb_parser() -> dict[str, argparse.ArgumentParser]:
    found: dict[str, argparse.ArgumentParser] = {}

    def walk(parser: argparse.ArgumentParser, path: str) -> None:
        subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        if path:
            found[path] = parser
        for action in subs:
            for name, child in action.choices.items():
                walk(child, f"{path} {name}".strip())

    walk(build_parser(), "")
    return found


def actions(parser: argparse.ArgumentParser) -> dict[str, argparse.Action]:
    return {a.dest: a for a in parser._actions}


def hidden(cls: type) -> set[str]:
    return set(next(f for f in fields(cls) if f.name == "train").metadata["hide"])


@pytest.mark.parametrize("path", list(TRAINING_VERBS), ids=" ".join)
def test_every_training_verb_takes_every_engine_setting_it_does_not_derive(path):
    """A setting added to TrainOptions is a flag of every training verb: nothing lists the engine's flags by hand."""
    cls = TRAINING_VERBS[path]
    by_dest = actions(verb_parser(*path))
    own = {f.name for f in fields(cls)}
    for f in fields(TrainOptions):
        if f.name in hidden(cls):
            assert f.name in own or f.name not in by_dest, f"{f.name}: derived by {' '.join(path)}, yet a flag"
            continue
        assert f.name in by_dest, f"{' '.join(path)} has no flag for the engine setting {f.name}"
        flag = f.metadata.get("flag") or "--" + f.name.replace("_", "-")
        assert by_dest[f.name].option_strings == [flag]


@pytest.mark.parametrize("path, argv, library", [
    (("pretrain",), ["--data", "d", "--output", "o"], lambda tmp: PretrainConfig.from_options(data="d", output="o")),
    (("finetune",), ["--model", "m", "--output", "o", "--task", "sst2"],
     lambda tmp: FinetuneSettings(model="m", output="o", task="sst2")),
    (("distill", "pretrain"), ["--teacher", "t", "--student", "s", "--data", "d", "--output", "o"],
     lambda tmp: DistillConfig(teacher="t", student="s", data="d", output="o")),
    (("distill", "task"), ["--teacher", "t", "--student", "s", "--unlabeled", "u.txt", "--output", "o"],
     lambda tmp: TaskDistillSettings(teacher="t", student="s", unlabeled=["u.txt"], output="o")),
    (("seq2seq",), ["--train", "{tmp}/pairs.jsonl", "--output", "o"],
     lambda tmp: Seq2SeqConfig(train_file=f"{tmp}/pairs.jsonl", output="o")),
    (("train-embeddings",), ["--model", "{tmp}", "--train", "{tmp}/pairs.jsonl", "--output", "o"],
     lambda tmp: EmbeddingSettings(model=f"{tmp}", train_file=f"{tmp}/pairs.jsonl", output="o")),
], ids=lambda value: " ".join(value) if isinstance(value, tuple) else None)
def test_command_line_defaults_are_the_library_defaults(path, argv, library, tmp_path):
    """One default per verb: what a verb runs with when no flag is given is what its settings class says."""
    (tmp_path / "pairs.jsonl").write_text('{"source": "a", "target": "b"}\n')
    args = build_parser().parse_args([*path, *(a.replace("{tmp}", str(tmp_path)) for a in argv)])
    cls = TRAINING_VERBS[path]
    parsed = config_from_args(args) if cls is PretrainConfig else settings_from_args(cls, args)
    assert parsed == library(tmp_path)


def test_flags_land_in_the_part_they_belong_to():
    args = build_parser().parse_args(["finetune", "--model", "m", "--output", "o", "--task", "SST-2", "--seed", "7",
                                      "--grad-accum", "2", "--lr", "3e-5,2e-5", "--eval-every", "5", "--no-progress",
                                      "--warmup", "0.2", "--train", "t.csv", "--keep", "last"])
    s = settings_from_args(FinetuneSettings, args)
    assert (s.data_options.task, s.data_options.train_file) == ("sst2", "t.csv")
    assert (s.train.seed, s.train.grad_accum, s.train.eval_every, s.train.progress, s.train.keep) == \
        (7, 2, 5, False, "last")
    assert (s.learning_rates, s.warmup_fraction) == ([3e-5, 2e-5], 0.2)
    grid = settings_from_args(FinetuneSettings, build_parser().parse_args(
        ["finetune", "--model", "m", "--output", "o", "--task", "rte", "--lr", "grid"]))
    assert grid.learning_rates == [5e-5, 4e-5, 3e-5, 2e-5]
    task = settings_from_args(TaskDistillSettings, build_parser().parse_args(
        ["distill", "task", "--teacher", "t", "--student", "s", "--unlabeled", "a.txt", "b.txt", "--output", "o",
         "--no-train-texts", "--lr", "1e-3", "--seed", "3", "--save-every", "5"]))
    assert (task.unlabeled, task.include_train, task.seed) == (["a.txt", "b.txt"], False, 3)
    assert (task.train.lr, task.train.save_every) == (1e-3, 5)


def test_every_verb_runs_where_auto_says_and_in_auto_precision():
    """--device and --precision are declared once: the same choices and the same default (auto) on every verb."""
    with_device = 0
    for name, parser in every_verb_parser().items():
        by_dest = actions(parser)
        if "device" not in by_dest:
            continue
        with_device += 1
        assert (by_dest["device"].default, tuple(by_dest["device"].choices)) == ("auto", DEVICES), name
        if "precision" in by_dest:  # fill-mask has none: it ranks in fp32
            assert (by_dest["precision"].default, tuple(by_dest["precision"].choices)) == ("auto", PRECISIONS), name
    assert with_device >= 13  # the training verbs, and every verb that runs a model


def test_help_shows_each_default_and_what_the_verb_does(capsys):
    for name, parser in every_verb_parser().items():
        text = parser.format_help()
        assert "%%" not in text and "%(" not in text, name
    for path, cls in TRAINING_VERBS.items():
        for action in verb_parser(*path)._actions:
            shows_default = action.default not in (None, argparse.SUPPRESS) and not isinstance(action.default, bool) \
                and action.option_strings and action.dest not in ("help", "debug")
            if shows_default:
                assert "(default: " in action.help or "; default: " in action.help, \
                    f"{' '.join(path)} {action.option_strings[0]}"
    assert "0: after every epoch" in actions(verb_parser("finetune"))["eval_every"].help
    assert "0: at the end only" in actions(verb_parser("pretrain"))["eval_every"].help
    assert "(default: best)" in actions(verb_parser("finetune"))["keep"].help
    assert "10% warmup" in verb_parser("finetune").format_help()


@pytest.mark.parametrize("argv, message", [
    (["--warmup", "1"], "argument --warmup: expected a number in [0, 1), got '1'"),
    (["--lr", "fast"], "argument --lr: --lr takes a number, a comma list or 'grid', not 'fast'"),
    (["--grad-accum", "0"], "argument --grad-accum: expected a whole number of at least 1, got '0'"),
    (["--keep", "worst"], "argument --keep: invalid choice: 'worst'"),
])
def test_a_bad_value_stops_at_parse_time_naming_the_flag(argv, message, capsys):
    with pytest.raises(SystemExit) as exit_:
        build_parser().parse_args(["finetune", "--model", "m", "--output", "o", "--task", "sst2", *argv])
    assert exit_.value.code == 2
    assert message in capsys.readouterr().err


def test_help_says_the_default_and_the_bound_in_one_parenthetical(capsys):
    """`(default: 100; at most 100,000)`, not two parentheticals; a "range" field's refusal names the whole range."""
    from dataclasses import dataclass as settings_class

    from bertforge.commands.flags import add_settings_arguments
    from bertforge.settings import setting

    @settings_class
    class Toy:
        size: int = setting(100, "how many", positive=True, maximum=100_000)
        later: int | None = setting(None, "decided later", positive=True, maximum=50, deferred="default: the recipe's")
        count: int = setting(3, "a count", kind="range", positive=True, maximum=1_000)
        names: list[str] | None = setting(None, "names", nargs="+", repeatable=True)
        one: list[str] | None = setting(None, "one at a time", repeatable=True)
        gloss: int = setting(20, "batches (0: none)", non_negative=True, maximum=1_000)
        nested: int = setting(5, "spans (1: single tokens (no span))", positive=True, maximum=9)
        inner: int = setting(7, "an (aside) then more", positive=True, maximum=9)

    parser = argparse.ArgumentParser(prog="toy")
    add_settings_arguments(parser, Toy)
    helps = {a.dest: a.help for a in parser._actions}
    assert helps["size"] == "how many (default: 100; at most 100,000)"
    assert helps["later"] == "decided later (default: the recipe's; at most 50)"
    assert helps["count"] == "a count (default: 3; from 1 to 1,000)"
    assert helps["gloss"] == "batches (0: none; default: 20; at most 1,000)"   # its own gloss takes the notes
    assert helps["nested"] == "spans (1: single tokens (no span); default: 5; at most 9)"
    assert helps["inner"] == "an (aside) then more (default: 7; at most 9)"
    args = parser.parse_args(["--names", "a", "b", "--names", "c", "--one", "x y", "--one", "z"])
    assert (args.names, args.one) == (["a", "b", "c"], ["x y", "z"])
    for value in ("0", "1001"):
        with pytest.raises(SystemExit):
            parser.parse_args(["--count", value])
        assert f"argument --count: expected a whole number from 1 to 1,000, got '{value}'" in capsys.readouterr().err
