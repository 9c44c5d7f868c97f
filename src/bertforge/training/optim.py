"""Optimizers and learning-rate schedules of the BERT recipe.

AdamW with BERT's settings (beta 0.9/0.999, eps 1e-6, weight decay 0.01 except on biases and LayerNorm),
LAMB for large batches (You et al., 2019), and linear warmup then linear decay.
"""
from __future__ import annotations

from typing import Iterable

import torch
from torch import nn

from bertforge.training.state import EngineState


def parameter_groups(model: nn.Module, weight_decay: float) -> list[dict]:
    """Two groups: matrices decay; biases, LayerNorm and other 1-D parameters do not (as in the paper's code)."""
    decay, no_decay, seen = [], [], set()
    for name, param in model.named_parameters():
        if not param.requires_grad or id(param) in seen:
            continue
        seen.add(id(param))
        (no_decay if param.ndim < 2 else decay).append(param)
    return [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]


def build_optimizer(model: nn.Module, lr: float, weight_decay: float = 0.01, betas: tuple[float, float] = (0.9, 0.999),
                    eps: float = 1e-6, kind: str = "adamw") -> torch.optim.Optimizer:
    groups = parameter_groups(model, weight_decay)
    if kind == "adamw":
        device = next(model.parameters()).device
        # The fused kernel does the whole update in one pass over memory: the embedding matrix dominates
        # small models, so this matters on CPU as much as on GPU.
        fused = device.type in ("cpu", "cuda")
        return torch.optim.AdamW(groups, lr=lr, betas=betas, eps=eps, fused=fused)
    if kind == "lamb":
        return Lamb(groups, lr=lr, betas=betas, eps=eps)
    raise ValueError(f"unknown optimizer {kind!r}; choose adamw or lamb")


class Lamb(torch.optim.Optimizer):
    """LAMB: Adam's update rescaled per parameter tensor by ||w|| / ||update|| (trust ratio)."""

    def __init__(self, params: Iterable, lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-6, weight_decay: float = 0.01) -> None:
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay))

    @torch.no_grad()
    def step(self, closure=None):
        loss = closure() if closure is not None else None
        for group in self.param_groups:
            beta1, beta2 = group["betas"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if not state:
                    state["step"] = 0
                    state["exp_avg"] = torch.zeros_like(p)
                    state["exp_avg_sq"] = torch.zeros_like(p)
                state["step"] += 1
                m, v = state["exp_avg"], state["exp_avg_sq"]
                m.mul_(beta1).add_(p.grad, alpha=1 - beta1)
                v.mul_(beta2).addcmul_(p.grad, p.grad, value=1 - beta2)
                m_hat = m / (1 - beta1 ** state["step"])
                v_hat = v / (1 - beta2 ** state["step"])
                update = m_hat / (v_hat.sqrt() + group["eps"])
                if group["weight_decay"]:
                    update.add_(p, alpha=group["weight_decay"])
                w_norm, u_norm = p.norm(), update.norm()
                trust = torch.where((w_norm > 0) & (u_norm > 0), w_norm / u_norm, torch.ones_like(w_norm))
                p.add_(update, alpha=-group["lr"] * float(trust))
        return loss


def linear_warmup_decay(optimizer: torch.optim.Optimizer, warmup_steps: int,
                        total_steps: int) -> torch.optim.lr_scheduler.LambdaLR:
    """lr x step/warmup while warming up, then linearly down to 0 at `total_steps`."""
    def factor(step: int) -> float:
        if warmup_steps > 0 and step < warmup_steps:
            return (step + 1) / warmup_steps
        remaining = max(total_steps - warmup_steps, 1)
        return max(0.0, 1.0 - (step - warmup_steps) / remaining)
    return torch.optim.lr_scheduler.LambdaLR(optimizer, factor)


def budget_lr_factor(step: int, warmup_steps: int, elapsed: float, budget: float,
                     warmup_ended_at: float | None) -> float:
    """lr factor of a time-budgeted run: linear warmup over `warmup_steps` steps, then linear decay to 0 over
    the time that was left when warmup ended (`warmup_ended_at`, seconds into the run).

    Decaying over the time left, not the whole budget, keeps the peak at the full lr: multiplying a step
    warmup by a decay that starts at time 0 peaks lower the longer warmup lasts (0.6 x lr when warmup
    takes 40% of the budget).
    """
    if warmup_steps > 0 and step < warmup_steps:
        return (step + 1) / warmup_steps
    start = warmup_ended_at or 0.0
    return max(0.0, 1.0 - max(0.0, elapsed - start) / max(budget - start, 1e-9))


def set_budget_lr(optimizer: torch.optim.Optimizer, base_lrs: list[float], state: EngineState, step: int,
                  warmup_steps: int, budget: float) -> float:
    """Set every group's lr for this step of a time-budgeted run and return the factor. Records in `state`
    (saved with each checkpoint, so a resumed run decays the same way) the time at which warmup ended."""
    if state.warmup_ended_at is None and step + 1 >= warmup_steps:
        state.warmup_ended_at = state.elapsed
    factor = budget_lr_factor(step, warmup_steps, state.elapsed, budget, state.warmup_ended_at)
    for group, base in zip(optimizer.param_groups, base_lrs):
        group["lr"] = base * factor
    return factor
