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


def test_library_errors_name_settings_that_the_verb_shows_as_its_flags(tmp_path):
    """An output, a device and a process-group error each name settings, not flags: mapped to other flags, the
    message follows; unmapped, it reads as before (--output, --device, --dist-timeout)."""
    import pytest
    import torch

    from bertforge.device import Precision
    from bertforge.outputs import claim_output_file
    from bertforge.training.distributed import DistInfo, _timed_out

    taken = tmp_path / "a{b}.txt"  # braces in a path are text, not a template field
    taken.write_text("x", encoding="utf-8")
    with pytest.raises(ValueError) as caught:
        claim_output_file(taken, overwrite=False)
    assert caught.value.settings == ("overwrite", "output")
    assert str(caught.value) == f"output file {taken} exists; use --overwrite to replace it, or choose another --output"
    assert describe(caught.value, flags={"output": "--out", "overwrite": "--force"}).message == \
        f"output file {taken} exists; use --force to replace it, or choose another --out"
    with pytest.raises(ValueError) as caught:
        Precision.resolve("fp16", torch.device("cpu"))
    assert describe(caught.value, flags={"precision": "--dtype"}).message.startswith("--dtype fp16 needs a CUDA device")
    info = DistInfo(rank=1, world_size=2, local_rank=1, device=torch.device("cpu"), timeout=5.0)
    lost = _timed_out(": rank 0 did not open the group at h:1", info)
    assert isinstance(lost, RuntimeError) and str(lost) == \
        "rank 1 of 2: rank 0 did not open the group at h:1 within 5 s (--dist-timeout)"
    assert describe(lost, flags={"dist_timeout": "--timeout"}).message.endswith("within 5 s (--timeout)")
