"""experiments/budget_calibration.py: each timed call is exactly one optimizer step of its contender."""
from __future__ import annotations

import time

import numpy as np
import pytest

from needs import require_module

import budget_calibration as cal  # noqa: E402


def test_stepped_trainer_runs_one_trainer_step_per_call(train_data, vocab_dir, tmp_path):
    require_module("transformers")
    require_module("accelerate", hint="transformers' Trainer needs it: pip install 'bertforge[test]'")
    import torch
    from transformers import BertForMaskedLM

    import hf_pretrain_mlm as hf
    tokenizer = hf.load_hf_tokenizer(str(vocab_dir))
    settings = hf.parse_args(["--data", str(train_data), "--output", str(tmp_path), "--max-steps", "1000",
                              "--batch-size", "4", "--lr", "1e-3", "--no-progress"])
    blocks = np.random.default_rng(0).integers(1000, 2000, size=(64, 16)).astype(np.int32)
    torch.manual_seed(0)
    model = BertForMaskedLM(hf.hf_config("tiny", tokenizer))
    trainer = hf.build_trainer(settings, model, tokenizer, blocks, tmp_path, save_strategy="no", disable_tqdm=True)
    stepped = cal.SteppedTrainer(trainer)   # runs the first step (the Trainer's set-up) before it returns
    try:
        assert trainer.state.global_step == 1
        before = model.bert.embeddings.word_embeddings.weight.detach().clone()
        for expected in (2, 3, 4):
            stepped()
            assert trainer.state.global_step == expected
        assert not torch.equal(before, model.bert.embeddings.word_embeddings.weight)
    finally:
        stepped.close()
    assert not stepped.thread.is_alive()
    assert trainer.state.global_step == 4  # closing stops the loop without another step


@pytest.mark.parametrize("recipe, objective", [("fast", "mlm"), ("bert", "mlm+nsp")])
def test_bertforge_step_is_one_engine_step_of_the_recipe(train_data, tmp_path, recipe, objective):
    step = cal.bertforge_step(recipe, str(train_data), "tiny", 4, tmp_path)
    step()
    step()
    assert step.steps == 2
    assert step.stage.cfg.objective == objective
    assert step.optimizer.defaults.get("fused") is True  # the fused AdamW both sides are timed with


def test_a_step_is_charged_its_cpu_time_not_its_waiting():
    def waits_then_works() -> None:
        time.sleep(0.3)  # the core is someone else's: wall-clock passes, this process's CPU time does not
        end = time.process_time() + 0.05
        while time.process_time() < end:
            pass

    charged = cal.cpu_timed(waits_then_works)()
    assert 0.05 <= charged < 0.2
