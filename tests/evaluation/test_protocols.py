"""The protocol table: each preset says what its source says, overrides are checked and recorded."""
from __future__ import annotations

import math

import pytest

from bertforge.evaluation.protocols import PROTOCOLS, changed_settings, get_protocol


def test_bert_is_the_papers_grid():
    p = PROTOCOLS["bert"]
    assert p.learning_rates == (5e-5, 4e-5, 3e-5, 2e-5) and p.batch_size == 32 and p.epochs == 3
    assert p.select == "best" and p.seeds == 1 and p.max_seq_length == 128
    assert p.warmup_fraction == 0.1 and p.weight_decay == 0.01 and p.max_train_samples is None


def test_sane_is_crammings_glue_sane():
    """cramming/config/eval/GLUE_sane.yaml: lr 4e-5, batch 16, 5 epochs, warmup 0.1, no clipping, AdamW weight decay
    0 (optim/adam.yaml), max length 128; the paper's median of 5 fine-tunings."""
    p = PROTOCOLS["sane"]
    assert p.learning_rates == (4e-5,) and p.batch_size == 16 and p.epochs == 5
    assert p.seeds == 5 and p.select == "median" and p.warmup_fraction == 0.1
    assert p.weight_decay == 0.0 and p.max_grad_norm is None and p.max_seq_length == 128
    assert "cosine" in p.source and "0.98" in p.source  # the two differences are stated


def test_every_preset_is_documented_and_keeps_wnli_out():
    assert set(PROTOCOLS) == {"bert", "sane", "cpu"}
    for p in PROTOCOLS.values():
        p.check()
        assert p.description and p.source and p.wnli == "majority"
    cpu = PROTOCOLS["cpu"]
    assert cpu.max_train_samples == 2000 and cpu.seeds == 1 and len(cpu.learning_rates) == 1


def test_overrides_are_applied_checked_and_listed():
    p = get_protocol("sane", epochs=1.0, max_train_samples=300, seeds=None)
    assert p.epochs == 1.0 and p.max_train_samples == 300 and p.seeds == 5
    assert changed_settings(p) == {"epochs": 1.0, "max_train_samples": 300}
    assert get_protocol("bert", learning_rates=[3e-5, 2e-5, 3e-5]).learning_rates == (3e-5, 2e-5)
    with pytest.raises(ValueError, match="epochs"):
        get_protocol("sane", epochs=0.0)
    with pytest.raises(ValueError, match="weight_decay"):
        get_protocol("sane", weight_decay=0.1)
    with pytest.raises(ValueError, match="unknown GLUE protocol 'glue'.*bert, sane, cpu"):
        get_protocol("glue")


def test_record_is_plain_json():
    import json
    record = PROTOCOLS["sane"].record()
    assert json.loads(json.dumps(record, allow_nan=False)) == record
    assert record["learning_rates"] == [4e-5] and record["max_grad_norm"] is None
    assert not math.isnan(record["epochs"])
