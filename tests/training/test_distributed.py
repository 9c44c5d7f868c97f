"""Two CPU processes under torchrun: gradients are averaged over disjoint data slices; rank 0 alone writes."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import torch
from safetensors.torch import load_file

from bertforge.checkpoint import internal_to_hf_state_dict
from bertforge.config import BertConfig
from bertforge.data import PretrainingDataset
from bertforge.model import BertForPreTraining
from bertforge.training.checkpointing import load_training_state
from bertforge.training.optim import build_optimizer

SEED, BATCH, LR = 5, 4, 1e-3


def test_rank_slices_are_disjoint_and_cover_the_epoch(train_data, vocab_dir):
    slices = [PretrainingDataset(train_data, str(vocab_dir), batch_size=BATCH, max_seq_length=64, seed=SEED,
                                 rank=r, world_size=2).example_indices(0) for r in range(2)]
    single = PretrainingDataset(train_data, str(vocab_dir), batch_size=BATCH, max_seq_length=64, seed=SEED)
    assert len(slices[0]) == len(slices[1])
    assert not set(slices[0].tolist()) & set(slices[1].tolist())
    union = np.sort(np.concatenate(slices))
    assert len(union) >= len(single.example_indices(0)) - 1  # at most one example dropped to keep lockstep


@pytest.mark.slow
def test_two_ranks_average_gradients_like_one_process_on_the_union(train_data, vocab_dir, tmp_path):
    # No dropout, so one process can replay both ranks' step exactly.
    config = BertConfig.preset("tiny", vocab_size=30522, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    config.save_pretrained(tmp_path / "model")
    out = tmp_path / "ddp"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
           "-m", "bertforge", "pretrain", "--data", str(train_data), "--vocab", str(vocab_dir),
           "--model", str(tmp_path / "model"), "--output", str(out), "--batch-size", str(BATCH),
           "--max-steps", "1", "--lr", str(LR), "--seq-len-schedule", "64:1", "--seed", str(SEED),
           "--eval-batches", "1", "--keep-checkpoints-at-end", "--no-progress", "--device", "cpu", "--debug"]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-4000:]
    assert done.stdout.count("final model and tokenizer") == 1, "only rank 0 reports and writes"

    # The same step in one process: mean of the two ranks' losses on their own batches.
    torch.set_num_threads(1)
    torch.manual_seed(SEED)
    model = BertForPreTraining(config)
    initial = {k: v.clone() for k, v in internal_to_hf_state_dict(model).items()}
    optimizer = build_optimizer(model, LR)
    seen, loss = [], 0.0
    for rank in range(2):
        data = PretrainingDataset(train_data, str(vocab_dir), batch_size=BATCH, max_seq_length=64, seed=SEED,
                                  rank=rank, world_size=2)
        batch = next(iter(data))
        seen.append({tuple(row.tolist()) for row in batch["input_ids"]})
        rank_loss = model(**batch).loss / 2
        rank_loss.backward()
        loss += float(rank_loss.detach())
    assert not seen[0] & seen[1], "the ranks trained on different examples"
    grad_norm = float(torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0))
    optimizer.step()
    # Clipping and Adam undo a gradient's scale, so the weights alone cannot tell an average over ranks from a
    # sum: the logged norm (before clipping) and loss can.
    logged = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()][0]
    assert logged["split"] == "train" and logged["step"] == 1
    assert logged["grad_norm"] == pytest.approx(grad_norm, rel=1e-4) and grad_norm > 1.0, "norm of the mean gradient"
    assert logged["loss"] == pytest.approx(loss, rel=1e-5), "the mean of both ranks' losses"

    expected = internal_to_hf_state_dict(model)
    got = load_file(str(out / "model.safetensors"))
    for key, tensor in expected.items():
        assert torch.allclose(got[key], tensor, atol=1e-6, rtol=0), key
    key = "bert.encoder.layer.0.attention.self.query.weight"
    assert (got[key] - initial[key]).abs().max() > LR / 2, "the step moved the weights"

    state = load_training_state(out / "checkpoints" / "step-1")
    assert state["world_size"] == 2 and len(state["rng"]) == 2 and state["stage"]["index"] == BATCH
