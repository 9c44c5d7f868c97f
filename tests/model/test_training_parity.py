"""Whole training steps against `transformers`: forward, loss, backward and optimizer update all agree.

Forward parity alone would miss a wrong gradient (a detached path, a mis-tied decoder, a loss averaged
over padding). Here both models start from the same weights (ours saved, loaded by `transformers`), take
three steps on the same padded batches with dropout off, and must agree on every loss and every weight.
"""
from __future__ import annotations

import copy

import pytest
import torch

from bertforge import BertConfig, BertForPreTraining, BertForSequenceClassification
from bertforge.checkpoint import internal_to_hf_state_dict
from bertforge.model.packing import PackedBatch

from needs import require_module

transformers = require_module("transformers")

STEPS, VOCAB, SEQ = 3, 97, 15
LENGTHS = (15, 9, 4, 12)
LOSS_TOL, WEIGHT_TOL, GRAD_TOL = 1e-5, 1e-5, 1e-5


def _config(**kw) -> BertConfig:
    return BertConfig(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                      intermediate_size=64, max_position_embeddings=32, hidden_dropout_prob=0.0,
                      attention_probs_dropout_prob=0.0, **kw)


def _batches(kind: str, lengths: tuple[int, ...] = LENGTHS, steps: int = STEPS) -> list[dict[str, torch.Tensor]]:
    """`steps` padded batches: [PAD]=0 on padding, two segments, MLM labels on real tokens only."""
    g = torch.Generator().manual_seed(1)
    out = []
    for _ in range(steps):
        mask = (torch.arange(SEQ)[None] < torch.tensor(lengths)[:, None]).long()
        ids = torch.randint(5, VOCAB, (len(lengths), SEQ), generator=g) * mask
        types = (torch.arange(SEQ)[None] >= torch.tensor(lengths)[:, None] // 2).long() * mask
        batch = {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}
        if kind == "pretraining":
            picked = (torch.rand(ids.shape, generator=g) < 0.3) & mask.bool()
            batch["labels"] = torch.where(picked, torch.randint(5, VOCAB, ids.shape, generator=g), -100)
            batch["next_sentence_label"] = torch.randint(0, 2, (len(lengths),), generator=g)
        else:
            batch["labels"] = torch.randint(0, 3, (len(lengths),), generator=g)
        out.append(batch)
    return out


def _optimizer(name: str, model: torch.nn.Module) -> torch.optim.Optimizer:
    if name == "sgd":
        return torch.optim.SGD(model.parameters(), lr=0.5, momentum=0.9)
    return torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)


def _models(kind: str, folder) -> tuple[torch.nn.Module, torch.nn.Module]:
    """Ours at a seeded start, and transformers' model loaded from ours, in training mode."""
    if kind == "pretraining":
        ours_cls, hf_cls, config = BertForPreTraining, transformers.BertForPreTraining, _config()
    else:
        ours_cls, hf_cls = BertForSequenceClassification, transformers.BertForSequenceClassification
        config = _config(id2label={0: "a", 1: "b", 2: "c"})
    torch.manual_seed(0)
    ours = ours_cls(config)
    ours.save_pretrained(folder)
    theirs = hf_cls.from_pretrained(folder, attn_implementation="eager")
    ours.train(), theirs.train()
    return ours, theirs


@pytest.mark.parametrize("optimizer", ["sgd", "adamw"])
@pytest.mark.parametrize("kind", ["pretraining", "classification"])
def test_training_steps_match_transformers(tmp_path, kind, optimizer):
    ours, theirs = _models(kind, tmp_path)
    # the same starting point, checked: every tensor of ours is in theirs with the same values
    start_ours = {k: v.clone() for k, v in internal_to_hf_state_dict(ours).items()}
    start_theirs = theirs.state_dict()
    assert set(start_ours) <= set(start_theirs)
    assert all(torch.equal(start_ours[k], start_theirs[k]) for k in start_ours)

    opt_ours, opt_theirs = _optimizer(optimizer, ours), _optimizer(optimizer, theirs)
    for step, batch in enumerate(_batches(kind)):
        losses = []
        for model, opt in ((ours, opt_ours), (theirs, opt_theirs)):
            opt.zero_grad()
            loss = model(**batch).loss
            loss.backward()
            opt.step()
            losses.append(loss.item())
        assert abs(losses[0] - losses[1]) < LOSS_TOL, (step, losses)

    end_ours, end_theirs = internal_to_hf_state_dict(ours), theirs.state_dict()
    moved = 0
    for key, value in end_ours.items():
        diff = (value - end_theirs[key]).abs().max().item()
        assert diff < WEIGHT_TOL, (key, diff)
        moved += not torch.equal(value, start_ours[key])
    assert moved >= len(end_ours) - 3, "the steps must move (nearly) every tensor, or nothing was compared"


# Sequences of different lengths in the same attention group: each group's grid is padded to its longest member,
# so the key-padding mask inside a group (and the scatter of packed rows into it) carries the gradient.
GROUPED_LENGTHS = (15, 14, 13, 12, 4, 3)


def _gradients_by_hf_name(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """Our model's gradients under transformers' names (fused QKV split), via a copy holding them as weights."""
    holder = copy.deepcopy(model)
    with torch.no_grad():
        for p, q in zip(model.parameters(), holder.parameters()):
            q.copy_(p.grad if p.grad is not None else torch.zeros_like(p))
    return internal_to_hf_state_dict(holder)


@pytest.mark.parametrize("kind", ["pretraining", "classification"])
def test_padding_inside_an_attention_group_gives_transformers_loss_and_gradients(tmp_path, kind):
    batch = _batches(kind, GROUPED_LENGTHS, steps=1)[0]
    packed = PackedBatch.from_mask(batch["attention_mask"], len(GROUPED_LENGTHS), SEQ, torch.device("cpu"))
    padded_groups = [g for g in packed.groups if g.count > 1 and g.stop - g.start < g.count * g.length]
    assert len(packed.groups) > 1 and len(padded_groups) == len(packed.groups), \
        "every attention group holds sequences of different lengths, so every grid has padding inside"
    ours, theirs = _models(kind, tmp_path)
    losses = []
    for model in (ours, theirs):
        loss = model(**batch).loss
        loss.backward()
        losses.append(loss.item())
    assert abs(losses[0] - losses[1]) < LOSS_TOL, losses
    got, expected = _gradients_by_hf_name(ours), dict(theirs.named_parameters())
    compared = 0
    for name, grad in got.items():
        if name not in expected:
            continue  # a buffer (e.g. position ids), not a parameter
        reference = expected[name].grad
        assert reference is not None and grad.abs().max() > 0, f"{name}: both sides have a gradient"
        diff, scale = (grad - reference).abs().max().item(), max(1.0, reference.abs().max().item())
        assert diff < GRAD_TOL * scale, f"{name}: gradients differ by {diff:.2e}"
        compared += 1
    assert compared >= sum(1 for _ in theirs.parameters()), "every parameter of transformers' model was compared"
