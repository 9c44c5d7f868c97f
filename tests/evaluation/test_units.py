"""A unit's fine-tuning settings come from its protocol; its step count is the one the fine-tuning loop takes."""
from __future__ import annotations

import math

import pytest
import torch

from bertforge.evaluation.protocols import get_protocol
from bertforge.evaluation.units import NO_MID_RUN_EVAL, Unit, UnitContext, finetune_settings, planned_steps


def test_finetune_settings_follow_the_protocol(tmp_path):
    protocol = get_protocol("sane", max_train_samples=300, max_eval_samples=50)
    unit = Unit("rte", 43, 4e-5, str(tmp_path / "u"), 300, planned_steps(300, protocol))
    s = finetune_settings(unit, UnitContext(model="m", data="d", protocol=protocol, save_every=7))
    d, t = s.data_options, s.train
    assert (d.task, s.model, d.data, s.output) == ("rte", "m", "d", str(tmp_path / "u" / "run"))
    assert list(s.learning_rates) == [4e-5] and s.restarts == 1 and t.seed == 43
    assert (s.epochs, s.batch_size, s.max_seq_length) == (5.0, 16, 128)
    assert (s.warmup_fraction, t.weight_decay) == (0.1, 0.0)
    assert (s.max_train_samples, s.max_eval_samples) == (300, 50)
    assert t.keep == "last" and t.eval_every == NO_MID_RUN_EVAL and t.save_every == 7 and t.progress is False
    assert t.max_grad_norm == math.inf  # sane: no clipping
    assert finetune_settings(unit, UnitContext("m", "d", get_protocol("bert"))).train.max_grad_norm == 1.0


def test_no_clipping_leaves_gradients_as_they_are():
    torch.manual_seed(0)
    grads = [torch.randn(5, 5) * 100, torch.randn(7) * 100]
    params = [torch.nn.Parameter(torch.zeros_like(g)) for g in grads]
    for p, g in zip(params, grads):
        p.grad = g.clone()
    norm = torch.nn.utils.clip_grad_norm_(params, math.inf)
    assert all(torch.equal(p.grad, g) for p, g in zip(params, grads)) and norm > 1


@pytest.mark.parametrize("n, batch, epochs", [(1, 32, 3.0), (64, 8, 1.0), (100, 32, 3.0), (2490, 16, 5.0),
                                              (2000, 32, 0.5), (5, 8, 2.5)])
def test_planned_steps_match_the_fine_tuning_loop(n, batch, epochs):
    """The fine-tuning loop's own count (EpochBatches over n features, ceil of batches x epochs)."""
    from bertforge.tasks.finetune import EpochBatches
    features = [{"input_ids": [1] * (3 + i % 5), "token_type_ids": [0] * (3 + i % 5), "labels": 0} for i in range(n)]
    per_epoch = EpochBatches(features, batch, seed=0, pad_id=0).per_epoch
    protocol = get_protocol("bert", batch_size=batch, epochs=epochs)
    assert planned_steps(n, protocol) == max(1, math.ceil(per_epoch * epochs))
