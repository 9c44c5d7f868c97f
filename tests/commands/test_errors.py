"""A library error names settings; the command line shows each as the flag its verb has for it."""
from __future__ import annotations

from bertforge.cli import build_parser
from bertforge.commands.errors import describe, verb_flags
from bertforge.settings import SettingError
from bertforge.tasks.finetune import FinetuneSettings


def test_a_setting_error_reads_as_the_fields_flag_and_renders_the_verbs_flag():
    err = SettingError("{learning_rates} must be {expected}, got {got}", owner=FinetuneSettings,
                       expected="above 0", got=-1)
    assert err.setting == "learning_rates" and err.settings == ("learning_rates",)
    assert str(err) == "--lr must be above 0, got -1"  # the field's metadata says its flag is --lr
    assert describe(err, flags={"learning_rates": "--learning-rate"}).message == \
        "--learning-rate must be above 0, got -1"
    assert describe(err).message == "--lr must be above 0, got -1"


def test_the_verbs_flags_come_from_its_parser_and_its_sub_command():
    parser = build_parser()
    finetune = verb_flags(parser, ["finetune", "--task", "sst2"])
    assert finetune["learning_rates"] == "--lr" and finetune["eval_file"] == "--eval"
    assert finetune["warmup_fraction"] == "--warmup" and finetune["progress"] == "--no-progress"
    task = verb_flags(parser, ["distill", "task", "--teacher", "t"])
    assert task["include_train"] == "--no-train-texts"
    corpus = verb_flags(parser, ["distill", "pretrain"])
    assert corpus["alpha_ce"] == "--alpha-ce" and "include_train" not in corpus
