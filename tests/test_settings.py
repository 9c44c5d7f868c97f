"""Settings composed of parts: keywords routed to the part that owns them, ranges checked by the fields' metadata,
and the record a run folder keeps, which compares with the flat records of earlier runs by setting name."""
from __future__ import annotations

from dataclasses import replace

import pytest

from bertforge.outputs import settings_differences
from bertforge.settings import check_settings, flatten, settings_record
from bertforge.tasks.finetune import FinetuneSettings
from bertforge.tasks.task_data import DataOptions
from bertforge.tasks.distill import TaskDistillSettings
from bertforge.training.options import TrainOptions, finetune_defaults
from bertforge.pretraining.pretrain import PretrainConfig


def test_keywords_go_to_the_part_that_owns_them():
    s = FinetuneSettings(model="m", output="o", task="sst2", data="glue/SST-2", seed=3, grad_accum=2, epochs=1)
    assert s.data_options == DataOptions(task="sst2", data="glue/SST-2")
    assert s.train == replace(finetune_defaults(), seed=3, grad_accum=2)
    assert s.epochs == 1
    # a part given whole, and one of its settings by name on top
    s = FinetuneSettings(model="m", output="o", data_options=DataOptions(task="rte"), train=TrainOptions(seed=1),
                         keep="last")
    assert (s.train.seed, s.train.keep, s.train.save_every) == (1, "last", 1000)
    # a verb's own setting wins over a part's of the same name: task distillation's seed defaults to the teacher's
    t = TaskDistillSettings(teacher="t", student="s", unlabeled=["u"], output="o", seed=5, lr=1e-3)
    assert (t.seed, t.train.lr) == (5, 1e-3)
    assert PretrainConfig(data="d", output="o", max_steps=9).train.max_steps == 9


def test_settings_a_verb_derives_or_does_not_have_are_refused():
    with pytest.raises(TypeError, match="FinetuneSettings sets train.max_steps itself"):
        FinetuneSettings(model="m", output="o", task="sst2", max_steps=100)
    with pytest.raises(TypeError, match="FinetuneSettings has no setting 'epoch'"):
        FinetuneSettings(model="m", output="o", task="sst2", epoch=1)


def test_ranges_are_checked_by_the_fields_metadata_in_every_part():
    check_settings(TaskDistillSettings(teacher="t", student="s", unlabeled=["u"], output="o"))
    with pytest.raises(ValueError, match="--timing-rounds must be positive, got 0"):
        check_settings(TaskDistillSettings(teacher="t", student="s", unlabeled=["u"], output="o", timing_rounds=0))
    with pytest.raises(ValueError, match="--grad-accum must be positive, got 0"):
        check_settings(FinetuneSettings(model="m", output="o", task="sst2", grad_accum=0))
    with pytest.raises(ValueError, match="--optimizer must be one of adamw, lamb, got 'sgd'"):
        check_settings(FinetuneSettings(model="m", output="o", task="sst2", optimizer="sgd"))


def test_the_record_holds_what_the_user_sets_by_part():
    record = settings_record(FinetuneSettings(model="m", output="o", task="sst2", seed=4))
    assert record["train"]["seed"] == 4 and record["data_options"]["task"] == "sst2"
    for derived in ("max_steps", "time_budget", "lr", "warmup_steps"):
        assert derived not in record["train"]
    assert flatten(record)["seed"] == 4 and flatten(record)["task"] == "sst2"


def test_a_flat_record_of_an_earlier_run_compares_by_setting_name():
    """A fine-tuning folder written when the settings were one flat object is the same run as these settings,
    and another seed or task is still named."""
    now = FinetuneSettings(model="m", output="o", task="sst2", data="glue/SST-2", max_train_samples=16)
    earlier = {"task": "sst2", "model": "m", "output": "o", "data": "glue/SST-2", "train_file": None, "epochs": 3.0,
               "batch_size": 32, "learning_rates": [2e-5], "max_train_samples": 16, "seed": 42,
               "warmup_fraction": 0.1, "weight_decay": 0.01, "grad_accum": 1, "keep": "best",
               "data_options": {"task": "sst2", "data": "glue/SST-2", "eval_fraction": 0.1, "split_seed": 42}}
    assert settings_differences(earlier, settings_record(now)) == []
    changed = replace(now, train=replace(now.train, seed=43), data_options=replace(now.data_options, task="mrpc"))
    assert settings_differences(earlier, settings_record(changed)) == ["seed: 42 there, 43 now",
                                                                       "task: 'sst2' there, 'mrpc' now"]
