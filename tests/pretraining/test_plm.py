"""`pretrain --objective plm`: XLNet's permutation LM in the engine, against transformers' XLNetLMHeadModel.

The step's loss is transformers' on the same batch and weights (our query stream runs only at the predicted
positions, theirs at every position through `target_mapping`); a tiny XLNet trained on real Wikipedia lowers
its held-out loss, which transformers reproduces from the saved folder; and a run resumed from a checkpoint
ends with the same weights, bit for bit, as one that was never interrupted.
"""
from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import load_file

from bertforge.data import PretrainingDataset
from bertforge.data.permutation import PermutationConfig
from bertforge.model.xlnet import XLNetConfig, XLNetLMHeadModel
from bertforge.pretraining.plm import plm_batch, plm_forward
from bertforge.pretraining.pretrain import pretrain
from bertforge.tokenization import BertTokenizer

from needs import require_module
from run_folders import copy_as_interrupted

transformers = require_module("transformers")

FAST = dict(model="tiny", objective="plm", batch_size=4, lr=1e-3, seq_len_schedule="64:1", progress=False,
            log_every=1)
HF_INPUTS = ("input_ids", "token_type_ids", "attention_mask", "perm_mask", "target_mapping", "labels")


def heldout_plm_batches(data, vocab_dir, n: int, k: int = 6, batch_size: int = 4) -> list[dict[str, torch.Tensor]]:
    """The first `n` held-out PLM batches, as the run's evaluation builds them."""
    held = PretrainingDataset(data, str(vocab_dir), objective="ltr", max_seq_length=64, batch_size=batch_size,
                              seed=0, split="heldout")
    out = []
    for batch in held:
        out.append(plm_batch(batch, held, PermutationConfig(k=k)))
        if len(out) == n:
            return out
    raise AssertionError("not enough held-out batches")


def test_the_step_loss_is_transformers_on_the_same_batch(train_data, vocab_dir, tmp_path):
    torch.manual_seed(0)
    vocab = BertTokenizer.from_pretrained(vocab_dir).vocab_size
    config = XLNetConfig(vocab_size=vocab, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                         intermediate_size=128, pad_token_id=0, hidden_dropout_prob=0.0, initializer_range=0.1)
    ours = XLNetLMHeadModel(config).eval()
    ours.save_pretrained(tmp_path / "xlnet")
    theirs = transformers.XLNetLMHeadModel.from_pretrained(tmp_path / "xlnet").eval()
    for batch in heldout_plm_batches(train_data, vocab_dir, 2, k=4):
        assert batch["attention_mask"][:, 0].min() == 0, "a padded batch (left padding)"
        with torch.no_grad():
            mine = plm_forward(ours, batch, torch.device("cpu"))
            ref = theirs(**{name: batch[name] for name in HF_INPUTS})
        assert float(mine.loss) == pytest.approx(float(ref.loss), abs=1e-5)
        real = batch["labels"] != -100
        assert torch.allclose(mine.logits, ref.logits[real], atol=1e-5)


def test_with_memory_the_loss_is_transformers_given_its_own_mems(train_data, vocab_dir, tmp_path):
    """Segment recurrence: the first tokens of each row are encoded into each layer's memory (transformers'
    `mems`, which it computes itself here) and the predictions of the rest read them."""
    torch.manual_seed(0)
    vocab = BertTokenizer.from_pretrained(vocab_dir).vocab_size
    ours = XLNetLMHeadModel(XLNetConfig(vocab_size=vocab, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                                        intermediate_size=128, pad_token_id=0, hidden_dropout_prob=0.0,
                                        initializer_range=0.1)).eval()
    ours.save_pretrained(tmp_path / "xlnet")
    theirs = transformers.XLNetLMHeadModel.from_pretrained(tmp_path / "xlnet", mem_len=64).eval()
    held = PretrainingDataset(train_data, str(vocab_dir), objective="ltr", max_seq_length=64, batch_size=4,
                              seed=0, split="heldout")
    corpus = next(iter(held))
    batch = plm_batch(corpus, held, PermutationConfig(k=4, memory=16))
    assert batch["memory_ids"].shape == (4, 16) and batch["input_ids"].shape[1] == corpus["input_ids"].shape[1] - 16
    with torch.no_grad():
        mine = plm_forward(ours, batch, torch.device("cpu"))
        mems = theirs.transformer(batch["memory_ids"], use_mems=True).mems
        ref = theirs(**{name: batch[name] for name in HF_INPUTS}, mems=mems)
        alone = theirs(**{name: batch[name] for name in HF_INPUTS})
    assert float(mine.loss) == pytest.approx(float(ref.loss), abs=1e-5)
    assert float(mine.loss) != pytest.approx(float(alone.loss), abs=1e-3), "the memory changes the predictions"


def test_plm_lowers_the_heldout_loss_as_transformers_measures_it(train_data, vocab_dir, tmp_path):
    out = tmp_path / "run"
    result = pretrain(train_data, out, vocab=str(vocab_dir), max_steps=40, eval_every=5, eval_batches=2,
                      warmup_steps=4, dropout=0.0, **{**FAST, "lr": 3e-3})
    assert result.step == 40 and result.skipped_steps == 0
    evals = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    evals = [r for r in evals if r["split"] == "eval"]
    assert evals[-1]["mlm_loss"] < evals[0]["mlm_loss"] - 1.0
    # the final number is the saved model's, as transformers computes it on the same held-out batches
    model = transformers.XLNetLMHeadModel.from_pretrained(out).eval()
    total, count = 0.0, 0
    for batch in heldout_plm_batches(train_data, vocab_dir, 2):
        with torch.no_grad():
            loss = model(**{name: batch[name] for name in HF_INPUTS}).loss
        n = int((batch["labels"] != -100).sum())
        total, count = total + float(loss) * n, count + n
    assert result.final_eval["mlm_loss"] == pytest.approx(total / count, abs=1e-4)


@pytest.mark.parametrize("memory", [0, 16])
def test_a_resumed_plm_run_is_bitwise_the_uninterrupted_one(train_data, vocab_dir, tmp_path, memory):
    """With dropout on (the memory's pass draws from the RNG too): orders, spans and dropout all come back."""
    settings = dict(vocab=str(vocab_dir), max_steps=4, save_every=2, keep_checkpoints=5,
                    keep_checkpoints_at_end=True, eval_batches=0, warmup_steps=1, plm_memory=memory, **FAST)
    ref = pretrain(train_data, tmp_path / "ref", **settings)
    assert ref.step == 4
    resumed = copy_as_interrupted(tmp_path / "ref", tmp_path / "resumed", 2)
    torch.manual_seed(12345)  # whatever the global RNG holds now, the checkpoint's state wins
    again = pretrain(train_data, resumed, **settings)
    assert again.resumed_from is not None and again.step == 4
    a, b = load_file(str(tmp_path / "ref" / "model.safetensors")), load_file(str(resumed / "model.safetensors"))
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_plm_refuses_a_model_of_another_family(train_data, vocab_dir, tmp_path):
    with pytest.raises(ValueError, match="--objective plm trains XLNet's two-stream attention; --model roberta-tiny"):
        pretrain(train_data, tmp_path / "run", vocab=str(vocab_dir), max_steps=1, **{**FAST, "model": "roberta-tiny"})


def test_a_k_below_two_is_one_line_naming_the_flag(train_data, vocab_dir, tmp_path, capsys):
    from bertforge.cli import main
    code = main(["pretrain", "--data", str(train_data), "--vocab", str(vocab_dir), "--output", str(tmp_path / "r"),
                 "--objective", "plm", "--plm-k", "1", "--max-steps", "1", "--no-progress"])
    err = capsys.readouterr().err.strip()
    assert code == 1 and err == ("bertforge pretrain: error: --plm-k must be at least 2 (the last 1/K of each "
                                 "order is predicted), got 1")
    assert not (tmp_path / "r").exists()


def test_every_parameter_gets_a_gradient(train_data, vocab_dir):
    """DDP reduces the gradient of every parameter that requires one and waits for each: a PLM step must reach
    them all (the query stream's `mask_emb`, the segment terms, the LM bias...)."""
    torch.manual_seed(0)
    model = XLNetLMHeadModel(XLNetConfig(vocab_size=BertTokenizer.from_pretrained(vocab_dir).vocab_size,
                                         hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                                         intermediate_size=64, pad_token_id=0))
    batch = heldout_plm_batches(train_data, vocab_dir, 1)[0]
    plm_forward(model, batch, torch.device("cpu")).loss.backward()
    assert [n for n, p in model.named_parameters() if p.grad is None or not p.grad.abs().sum() > 0] == []


@pytest.mark.slow
def test_two_ranks_equal_one_process_replaying_both(train_data, vocab_dir, tmp_path):
    """DDP: two torchrun ranks (gloo) train as one process backpropagating both ranks' PLM batches at half weight."""
    import subprocess
    import sys
    from pathlib import Path

    from bertforge.pretraining.pretrain import PretrainConfig, build_model
    from bertforge.tokenization import load_tokenizer
    from bertforge.training.optim import build_optimizer, linear_warmup_decay
    options = dict(model="tiny", objective="plm", batch_size=4, seq_len_schedule="64:1", eval_batches=0,
                   dropout=0.0, max_steps=3, lr=1e-3, seed=5, log_every=1, save_every=0, plm_memory=8)
    out = tmp_path / "ddp"
    argv = ["pretrain", "--data", str(train_data), "--vocab", str(vocab_dir), "--output", str(out), "--no-progress",
            "--device", "cpu"]
    for key, value in options.items():
        argv += [f"--{key.replace('_', '-')}", str(value)]
    (tmp_path / "commands.json").write_text(json.dumps([argv]), encoding="utf-8")
    runner = Path(__file__).resolve().parents[1] / "training" / "run_many.py"
    done = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
                           str(runner), str(tmp_path / "commands.json")], capture_output=True, text=True,
                          timeout=600, env={**__import__("os").environ, "OMP_NUM_THREADS": "1"})
    assert done.returncode == 0, done.stderr[-3000:]
    cfg = PretrainConfig.from_options(data=str(train_data), output=str(tmp_path / "replay"), vocab=str(vocab_dir),
                                      **options)
    tokenizer = load_tokenizer(vocab_dir)
    torch.manual_seed(cfg.train.seed)
    model = build_model(cfg, tokenizer, 64)
    optimizer = build_optimizer(model, cfg.train.lr, weight_decay=cfg.train.weight_decay, kind=cfg.train.optimizer)
    scheduler = linear_warmup_decay(optimizer, cfg.train.warmup_steps, cfg.train.max_steps)
    data = [PretrainingDataset(train_data, tokenizer, objective="ltr", max_seq_length=64, batch_size=4, seed=5,
                               rank=rank, world_size=2) for rank in range(2)]
    plm = PermutationConfig(k=cfg.plm_k, max_span=cfg.plm_span, memory=cfg.plm_memory)
    losses = []
    for _ in range(cfg.train.max_steps):
        step = 0.0
        for rank in range(2):
            batch = next(iter(data[rank]))
            loss = plm_forward(model, plm_batch(batch, data[rank], plm), torch.device("cpu")).loss
            (loss / 2).backward()
            step += float(loss) / 2
        torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.train.max_grad_norm)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        scheduler.step()
        losses.append(step)
    logged = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["loss"] for r in logged if r["split"] == "train"] == pytest.approx(losses, rel=1e-5)
    from bertforge.checkpoint import internal_to_hf_state_dict
    got, want = load_file(str(out / "model.safetensors")), internal_to_hf_state_dict(model)
    assert set(got) == set(want)
    for key, tensor in want.items():
        assert torch.allclose(got[key], tensor, atol=2e-6, rtol=0), key


def test_bf16_autocast_keeps_the_step_s_loss(train_data, vocab_dir, tmp_path):
    """`--precision bf16`: the step under CPU autocast gives the fp32 loss to bf16's precision (8 mantissa
    bits: a fraction of a percent), and a bf16 run trains and evaluates through the engine."""
    torch.manual_seed(0)
    vocab = BertTokenizer.from_pretrained(vocab_dir).vocab_size
    model = XLNetLMHeadModel(XLNetConfig(vocab_size=vocab, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                                         intermediate_size=128, pad_token_id=0, hidden_dropout_prob=0.0,
                                         initializer_range=0.1)).eval()
    batch = heldout_plm_batches(train_data, vocab_dir, 1)[0]
    with torch.no_grad():
        fp32 = float(plm_forward(model, batch, torch.device("cpu")).loss)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            bf16 = float(plm_forward(model, batch, torch.device("cpu")).loss)
    assert bf16 == pytest.approx(fp32, rel=1e-2)
    result = pretrain(train_data, tmp_path / "bf16", vocab=str(vocab_dir), max_steps=2, eval_batches=1,
                      precision="bf16", device="cpu", **FAST)
    assert result.step == 2 and result.skipped_steps == 0 and "mlm_loss" in result.final_eval
