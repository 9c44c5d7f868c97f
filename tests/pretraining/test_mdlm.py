"""`pretrain --objective mdlm | causal-then-masked | hybrid` and `--mask-rate-schedule` in the engine.

The MDLM step's loss is a hand-written NELBO (per masked token -log p / t, summed, over the tokens that
could be masked) on the model's full logits; the mixed objectives train ltr batches in their causal part and
masked ones after; a tiny MDLM on real Wikipedia lowers its held-out bound; resumed runs are bitwise the
uninterrupted ones.
"""
from __future__ import annotations

import json
import math

import pytest
import torch
from safetensors.torch import load_file

from bertforge.data import MaskingConfig, PretrainingDataset
from bertforge.data.objectives import OBJECTIVE_TABLE
from bertforge import BertConfig, BertForPreTraining
from bertforge.pretraining.mdlm import CorruptingStep, mdlm_batch
from bertforge.pretraining.pretrain import PretrainConfig, PretrainStage, pretrain
from bertforge.tokenization import BertTokenizer

from run_folders import copy_as_interrupted

FAST = dict(model="tiny", batch_size=4, lr=1e-3, seq_len_schedule="64:1", progress=False, log_every=1)
CPU = torch.device("cpu")


def corpus(data, vocab_dir, objective: str = "ltr", split: str = "heldout", rate: float = 0.15) -> PretrainingDataset:
    return PretrainingDataset(data, str(vocab_dir), objective=objective, max_seq_length=64, batch_size=4, seed=0,
                              split=split, masking=MaskingConfig(rate=rate))


def tiny_model(vocab_dir) -> BertForPreTraining:
    torch.manual_seed(0)
    return BertForPreTraining(BertConfig(vocab_size=BertTokenizer.from_pretrained(vocab_dir).vocab_size,
                                         hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                                         intermediate_size=64, hidden_dropout_prob=0.0,
                                         attention_probs_dropout_prob=0.0)).eval()


def test_the_mdlm_loss_is_the_hand_written_nelbo(train_data, vocab_dir):
    held = corpus(train_data, vocab_dir)
    batch = mdlm_batch(next(iter(held)), held)
    model = tiny_model(vocab_dir)
    with torch.no_grad():
        out = CorruptingStep(OBJECTIVE_TABLE["mdlm"], 0.5, 0.15).forward(model, batch, CPU)
        full = model(input_ids=batch["input_ids"], token_type_ids=batch["token_type_ids"],
                     attention_mask=batch["attention_mask"]).prediction_logits.log_softmax(-1)
    total, tokens = 0.0, 0
    special = set(BertTokenizer.from_pretrained(vocab_dir).all_special_ids)
    source = next(iter(corpus(train_data, vocab_dir)))["input_ids"]  # the rows before masking
    for b in range(source.shape[0]):
        t = float(batch["diffusion_t"][b])
        for i in range(source.shape[1]):
            if batch["attention_mask"][b, i] and int(source[b, i]) not in special:
                tokens += 1
                if int(batch["labels"][b, i]) != -100:
                    assert int(batch["input_ids"][b, i]) == held.tables.mask_id
                    total -= float(full[b, i, int(source[b, i])]) / t
    assert float(out.loss) == pytest.approx(total / tokens, rel=1e-4)
    assert out.nelbo_tokens == tokens


def test_a_mdlm_step_reaches_every_trained_parameter(train_data, vocab_dir):
    """DDP waits for the gradient of every parameter that requires one (the sentence head is frozen)."""
    from bertforge.pretraining.pretrain import freeze_sentence_head
    model = tiny_model(vocab_dir).train()
    freeze_sentence_head(model)
    held = corpus(train_data, vocab_dir)
    CorruptingStep(OBJECTIVE_TABLE["mdlm"], 0.5, 0.15).forward(model, mdlm_batch(next(iter(held)), held),
                                                               CPU).loss.backward()
    assert [n for n, p in model.named_parameters() if p.requires_grad and (p.grad is None or not p.grad.any())] == []


def test_causal_then_masked_trains_ltr_batches_then_masked_ones(train_data, vocab_dir):
    step = CorruptingStep(OBJECTIVE_TABLE["causal-then-masked"], causal_fraction=0.3, rate=0.15)
    rows = corpus(train_data, vocab_dir, split="train")
    ltr = next(iter(corpus(train_data, vocab_dir, split="train")))
    seen = []
    for progress in (0.0, 0.29, 0.3, 0.9):
        rows.load_state_dict({**rows.state_dict(), "epoch": 0, "index": 0})
        step.progress = progress
        seen.append(step(next(iter(rows)), rows))
    for batch in seen[:2]:  # the ltr batch itself, trained under the causal mask
        assert "causal" in batch and torch.equal(batch["labels"], ltr["labels"])
        assert torch.equal(batch["input_ids"], ltr["input_ids"])
    for batch in seen[2:]:  # masked: labels are the tokens themselves, about 15 % of them
        masked = batch["labels"] != -100
        assert "causal" not in batch and torch.equal(batch["labels"][masked], ltr["input_ids"][masked])
        assert (batch["input_ids"][masked] == rows.tables.mask_id).float().mean() > 0.6  # 80/10/10
        real = int(batch["attention_mask"].sum()) - 2 * batch["attention_mask"].shape[0]
        assert abs(int(masked.sum()) - 0.15 * real) <= batch["attention_mask"].shape[0]


def test_the_causal_batch_s_loss_is_the_ltr_objective_s(train_data, vocab_dir):
    model = tiny_model(vocab_dir)
    step = CorruptingStep(OBJECTIVE_TABLE["hybrid"], causal_fraction=1.0, rate=0.15)  # every batch causal
    rows = corpus(train_data, vocab_dir)
    batch = step(next(iter(rows)), rows)
    with torch.no_grad():
        ours = step.forward(model, batch, CPU).loss
        ltr = model(**{k: v for k, v in next(iter(corpus(train_data, vocab_dir))).items()}, causal=True).loss
        leaky = model(**{k: v for k, v in next(iter(corpus(train_data, vocab_dir))).items()}).loss
    assert float(ours) == pytest.approx(float(ltr), abs=1e-6) and float(ours) != pytest.approx(float(leaky))
    rows.load_state_dict({**rows.state_dict(), "epoch": 0, "index": 0})
    held = step(next(iter(rows)), rows, heldout=True)  # held-out batches are masked ones, whatever the fraction
    assert "causal" not in held and (held["input_ids"] == rows.tables.mask_id).any()


def test_hybrid_draws_causal_batches_at_the_fraction(train_data, vocab_dir):
    step = CorruptingStep(OBJECTIVE_TABLE["hybrid"], causal_fraction=0.25, rate=0.15)
    rows = corpus(train_data, vocab_dir, split="train")

    def draws() -> list[bool]:
        out = []
        for index in range(0, 1600, 4):  # the positions of 400 steps' batches
            rows.index = index
            out.append(step.causal(rows))
        return out

    causal = draws()
    assert 0.18 < sum(causal) / 400 < 0.32  # binomial(400, 0.25): 3 standard deviations
    assert draws() == causal  # a function of the position: a resumed run draws the same
    rows.seed = 1
    assert draws() != causal  # and of the seed


def test_a_mask_rate_schedule_masks_each_phase_at_its_rate(train_data, vocab_dir):
    cfg = PretrainConfig(data=str(train_data), output="unused", objective="mlm", mask_rate=0.15,
                         mask_rate_schedule="0.4:0.5,0.1:0.5")
    rows = corpus(train_data, vocab_dir, objective="mlm", split="train")
    stage = PretrainStage(cfg, tiny_model(vocab_dir), None, rows, None, None)
    for progress, rate in ((0.1, 0.4), (0.6, 0.1)):
        stage.set_progress(progress)
        rows.load_state_dict({**rows.state_dict(), "epoch": 0, "index": 0})
        batch = stage.next_batch()
        lengths = batch["attention_mask"].sum(1)
        assert (batch["labels"] != -100).sum(1).tolist() == [max(1, round(float(n) * rate)) for n in lengths]


def test_a_schedule_for_an_objective_without_a_rate_is_one_line(train_data, vocab_dir, tmp_path, capsys):
    from bertforge.cli import main
    code = main(["pretrain", "--data", str(train_data), "--vocab", str(vocab_dir), "--output", str(tmp_path / "r"),
                 "--objective", "mdlm", "--mask-rate-schedule", "0.3:1", "--max-steps", "1", "--no-progress"])
    err = capsys.readouterr().err.strip()
    assert code == 1 and err == ("bertforge pretrain: error: --mask-rate-schedule needs an objective that masks at "
                                 "a rate; --objective mdlm has none")


def test_mdlm_lowers_the_heldout_bound(train_data, vocab_dir, tmp_path):
    out = tmp_path / "run"
    result = pretrain(train_data, out, vocab=str(vocab_dir), objective="mdlm", max_steps=40, eval_every=5,
                      eval_batches=2, warmup_steps=4, dropout=0.0, **{**FAST, "lr": 3e-3})
    assert result.step == 40 and result.skipped_steps == 0
    evals = [r for r in map(json.loads, (out / "metrics.jsonl").read_text().splitlines()) if r["split"] == "eval"]
    assert evals[-1]["nelbo"] < evals[0]["nelbo"] - 1.0
    assert evals[-1]["perplexity_bound"] == pytest.approx(math.exp(evals[-1]["nelbo"]), rel=1e-6)


@pytest.mark.parametrize("objective", ["mdlm", "hybrid", "causal-then-masked", "mlm"])
def test_a_resumed_run_is_bitwise_the_uninterrupted_one(train_data, vocab_dir, tmp_path, objective):
    settings = dict(vocab=str(vocab_dir), objective=objective, max_steps=4, save_every=2, keep_checkpoints=5,
                    keep_checkpoints_at_end=True, eval_batches=0, warmup_steps=1, **FAST)
    if objective != "mdlm":
        settings["mask_rate_schedule"] = "0.3:0.5,0.1:0.5"
    ref = pretrain(train_data, tmp_path / "ref", **settings)
    assert ref.step == 4
    resumed = copy_as_interrupted(tmp_path / "ref", tmp_path / "resumed", 2)
    torch.manual_seed(12345)  # whatever the global RNG holds now, the checkpoint's state wins
    again = pretrain(train_data, resumed, **settings)
    assert again.resumed_from is not None and again.step == 4
    a, b = load_file(str(tmp_path / "ref" / "model.safetensors")), load_file(str(resumed / "model.safetensors"))
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
