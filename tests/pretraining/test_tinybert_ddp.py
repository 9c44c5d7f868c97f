"""TinyBERT's distillation under torchrun (two CPU ranks, gloo) equals one process replaying both ranks' batches as
two accumulated micro-batches: the same losses step by step through both stages (layer-wise, then soft targets),
the same grad norm, and the same student weights at the end. So W_h, the projection that lives only in the
trained module, is averaged across ranks like every other parameter, and the step where the MLM head is unused
(and the one where W_h is) does not hang or drift."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch
from safetensors.torch import load_file

from distill_folders import tiny_teacher
from bertforge.config import BertConfig
from bertforge.model.bert import BertForMaskedLM

SEED, BATCH, STEPS, LENGTH = 5, 4, 4, 32
TORCHRUN = [sys.executable, "-m", "torch.distributed.run"]
OPTIONS = {"loss": "tinybert", "batch_size": BATCH, "max_seq_length": LENGTH, "max_steps": STEPS, "lr": 3e-3,
           "seed": SEED, "log_every": 1, "eval_batches": 0, "save_every": 0, "temperature": 1.0,
           "tinybert_intermediate_fraction": 0.5, "device": "cpu"}


def student_folder(folder, teacher_dir):
    """A narrower BERT student without dropout (so the replay needs no rank's random stream)."""
    from bertforge.tokenization import load_tokenizer
    tok = load_tokenizer(teacher_dir)
    config = BertConfig(vocab_size=len(tok.vocab), hidden_size=16, num_hidden_layers=2, num_attention_heads=4,
                        intermediate_size=32, max_position_embeddings=64, hidden_dropout_prob=0.0,
                        attention_probs_dropout_prob=0.0)
    torch.manual_seed(1)
    BertForMaskedLM(config).save_pretrained(folder)
    tok.save_pretrained(folder)


def replay(teacher_dir, student_dir, data, out):
    """One process: the run's own set-up (seed, teacher, student, stage), then STEPS steps of the engine with two
    micro-batches each, rank 0's batch and then rank 1's; returns the per-step log and the student."""
    from bertforge.data import MaskingConfig, PretrainingDataset
    from bertforge.pretraining.distill import DistillConfig, load_masked_lm, load_student
    from bertforge.pretraining.pretrain import next_batch
    from bertforge.pretraining.tinybert import TinyBertStage
    from bertforge.tokenization import load_tokenizer
    from bertforge.training.engine import Session, Stepper
    cfg = DistillConfig(teacher=str(teacher_dir), student=str(student_dir), data=str(data), output=str(out),
                        **{k: v for k, v in OPTIONS.items() if k not in ("device",)})
    tokenizer = load_tokenizer(teacher_dir)
    torch.manual_seed(SEED)
    teacher, _ = load_masked_lm(cfg.teacher)
    student = load_student(cfg.student, tokenizer)
    ranks = [PretrainingDataset(cfg.data, tokenizer, objective="mlm", max_seq_length=LENGTH, batch_size=BATCH,
                                masking=MaskingConfig(rate=cfg.mask_rate, mode="dynamic"), seed=SEED, rank=rank,
                                world_size=2) for rank in range(2)]
    turn = iter(range(10 ** 9))
    with Session("cpu") as session:
        stage = TinyBertStage(cfg, teacher.eval(), student, tokenizer, ranks[0], None, session.precision("fp32"))
        stage.next_batch = lambda: next_batch(ranks[next(turn) % 2])
        opts = cfg.train
        opts.grad_accum = 2
        stepper = Stepper(stage, opts, session, out)
        for _ in range(STEPS):
            stepper()
    log = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    return [r for r in log if r["split"] == "train"], stage.model.student


@pytest.mark.slow
def test_two_ranks_equal_one_process_replaying_both(train_data, vocab_dir, tmp_path):
    tiny_teacher(tmp_path / "teacher", layers=4, vocab_dir=vocab_dir, hidden_dropout_prob=0.0,
                 attention_probs_dropout_prob=0.0)
    student_folder(tmp_path / "student", tmp_path / "teacher")
    flags = [f"--{k.replace('_', '-')}={v}" for k, v in OPTIONS.items()]
    done = subprocess.run([*TORCHRUN, "--standalone", "--nproc_per_node", "2", "-m", "bertforge", "distill", "pretrain",
                           "--teacher", str(tmp_path / "teacher"), "--student", str(tmp_path / "student"), "--data",
                           str(train_data), "--output", str(tmp_path / "ddp"), "--no-progress", *flags],
                          env={**os.environ, "OMP_NUM_THREADS": "1"}, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-4000:]
    got = [json.loads(line) for line in (tmp_path / "ddp" / "metrics.jsonl").read_text().splitlines()]
    got = [r for r in got if r["split"] == "train"]
    want, student = replay(tmp_path / "teacher", tmp_path / "student", train_data, tmp_path / "replay")
    assert [r["step"] for r in got] == [r["step"] for r in want] == list(range(1, STEPS + 1))
    assert ["loss_attn" in r for r in got] == [True, True, False, False], "half the run on each stage"
    for a, b in zip(got, want):
        for key in ("loss", "grad_norm", *(k for k in ("loss_attn", "loss_hidden", "loss_emb", "loss_pred") if k in b)):
            assert a[key] == pytest.approx(b[key], rel=1e-5), (a["step"], key)
    saved = load_file(str(tmp_path / "ddp" / "model.safetensors"))
    student.save_pretrained(tmp_path / "replayed")
    mine = load_file(str(tmp_path / "replayed" / "model.safetensors"))
    assert saved.keys() == mine.keys() and not any("projection" in k for k in saved)
    for name, tensor in saved.items():
        assert torch.allclose(tensor, mine[name], atol=2e-6, rtol=0), name
