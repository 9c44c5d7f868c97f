"""Fine-tuning through the engine: torchrun (one output, gradients averaged over the ranks' batches), resume."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from run_folders import copy_as_interrupted
from bertforge import BertConfig, BertModel
from bertforge.tasks.finetune import EpochBatches, FinetuneSettings, build_model, finetune
from bertforge.tasks.evaluation import encode, model_inputs
from bertforge.tasks.registry import get_task
from bertforge.tasks.task_data import load_task_data, subset
from bertforge.training.optim import build_optimizer

SEED, LR, ROWS = 7, 1e-3, 8


@pytest.fixture(scope="module")
def no_dropout_model(tmp_path_factory, minilm_dir) -> Path:
    """A 2-layer random BERT without dropout (so one process can replay a step exactly), MiniLM's vocabulary."""
    from bertforge.tokenization import BertTokenizer
    out = tmp_path_factory.mktemp("tiny")
    tok = BertTokenizer.from_pretrained(minilm_dir)
    config = BertConfig(vocab_size=tok.vocab_size, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=512, hidden_dropout_prob=0.0,
                        attention_probs_dropout_prob=0.0)
    BertModel(config).save_pretrained(out)
    tok.save_pretrained(out)
    return out


def test_epoch_batches_split_the_epoch_between_ranks_and_resume():
    features = [{"input_ids": [1] * (3 + i % 7), "token_type_ids": [0] * (3 + i % 7), "labels": i % 2}
                for i in range(40)]
    one = EpochBatches(features, 4, seed=3, pad_id=0)
    ranks = [EpochBatches(features, 4, seed=3, pad_id=0, rank=r, world_size=2) for r in range(2)]
    assert ranks[0].per_epoch == ranks[1].per_epoch == one.per_epoch // 2
    seen = [set(int(i) for _ in range(b.per_epoch) for i in b.next()["idx"]) for b in ranks]
    assert not seen[0] & seen[1] and len(seen[0] | seen[1]) == 40
    # the position is all a resumed run needs
    a = EpochBatches(features, 4, seed=3, pad_id=0)
    for _ in range(13):
        a.next()
    b = EpochBatches(features, 4, seed=3, pad_id=0)
    b.load_state_dict(a.state_dict())
    assert torch.equal(a.next()["idx"], b.next()["idx"])


def test_random_batch_order_mixes_lengths_and_still_covers_every_example_once_per_epoch():
    """`order="random"` is the Trainer's sampler: batches ignore lengths; the default groups them."""
    lengths = [2 if i % 2 else 60 for i in range(64)]
    features = [{"input_ids": [1] * n, "token_type_ids": [0] * n, "labels": 0} for n in lengths]
    by_length, shuffled = (EpochBatches(features, 8, seed=3, order=o) for o in ("length", "random"))
    for batches in (by_length, shuffled):
        for _ in range(2):  # two epochs, each every example once
            assert sorted(int(i) for _ in range(batches.per_epoch) for i in batches.next()["idx"]) == list(range(64))
    mixed = [len({lengths[i] for i in b}) > 1 for b in shuffled._epoch_batches(0)]
    assert sum(mixed) >= 6, "random batches mix short and long examples"
    assert not any(len({lengths[i] for i in b}) > 1 for b in by_length._epoch_batches(0))
    assert shuffled._epoch_batches(0) != shuffled._epoch_batches(1)
    with pytest.raises(ValueError, match="batch order 'sorted'"):
        EpochBatches(features, 8, seed=3, order="sorted")


def settings(model: Path, out: Path, data: Path, **kw) -> FinetuneSettings:
    return FinetuneSettings(**{"task": "sst2", "model": str(model), "output": str(out), "data": str(data),
                               "epochs": 1, "batch_size": ROWS, "learning_rates": [LR], "max_train_samples": 64,
                               "max_eval_samples": 16, "seed": SEED, "progress": False, "warmup_fraction": 0.0,
                               "device": "cpu", **kw})


def test_resume_by_running_the_same_command_again_is_bitwise(no_dropout_model, shared_data, tmp_path):
    data = shared_data / "glue" / "SST-2"
    ref = tmp_path / "ref"
    finetune(settings(no_dropout_model, ref, data, save_every=3, keep_checkpoints=3, keep="last",
                      keep_checkpoints_at_end=True), say=lambda _msg: None)
    from bertforge.training.checkpointing import list_checkpoints
    assert [s for s, _ in list_checkpoints(ref)][-1] == 8
    resumed = tmp_path / "resumed"
    copy_as_interrupted(ref, resumed, 3)
    finetune(settings(no_dropout_model, resumed, data, save_every=3, keep_checkpoints=3, keep="last",
                      keep_checkpoints_at_end=True), say=lambda _msg: None)
    a, b = load_file(str(ref / "model.safetensors")), load_file(str(resumed / "model.safetensors"))
    assert all(torch.equal(a[k], b[k]) for k in a)
    with pytest.raises(ValueError, match="other settings"):
        finetune(settings(no_dropout_model, resumed, data, save_every=3, keep="last", batch_size=4),
                 say=lambda _msg: None)


@pytest.mark.slow
def test_torchrun_two_ranks_average_gradients_and_rank0_writes(no_dropout_model, shared_data, tmp_path):
    data = shared_data / "glue" / "SST-2"
    out = tmp_path / "ddp"
    # 64 examples in batches of 8 per rank: 4 steps per epoch; 0.25 epochs = exactly one step
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
           "-m", "bertforge", "finetune", "--task", "sst2", "--model", str(no_dropout_model), "--data", str(data),
           "--output", str(out), "--epochs", "0.25", "--batch-size", str(ROWS), "--lr", str(LR), "--warmup", "0",
           "--max-train-samples", "64", "--max-eval-samples", "16", "--seed", str(SEED), "--keep", "last",
           "--device", "cpu", "--no-progress", "--debug"]
    done = subprocess.run(cmd, env={**os.environ, "OMP_NUM_THREADS": "1"}, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-4000:]
    assert done.stdout.count("saved predictor to") == 1, "only rank 0 reports"

    # the same step in one process: the mean of both ranks' losses on their own batches
    spec = get_task("sst2")
    task_data = load_task_data(spec, str(data))
    train = subset(task_data.train, 64, SEED)
    from bertforge.tokenization import load_tokenizer
    tokenizer = load_tokenizer(no_dropout_model)
    s = settings(no_dropout_model, out, data)
    features = encode(spec, tokenizer, train, s, task_data.labels, training=True)
    torch.manual_seed(SEED)
    model = build_model(spec, no_dropout_model, task_data.labels)
    optimizer = build_optimizer(model, LR)
    seen = []
    for rank in range(2):
        batch = EpochBatches(features, ROWS, SEED, tokenizer.pad_token_id, rank, 2).next()
        seen.append(set(batch["idx"].tolist()))
        (model(**model_inputs(batch, with_labels=True)).loss / 2).backward()
    assert not seen[0] & seen[1]
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    from bertforge.checkpoint import internal_to_hf_state_dict
    expected, got = internal_to_hf_state_dict(model), load_file(str(out / "model.safetensors"))
    for key, tensor in expected.items():
        assert torch.allclose(got[key], tensor, atol=1e-6, rtol=0), key
