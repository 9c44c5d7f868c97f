"""Optimizers and learning-rate schedules of the BERT recipe.

AdamW with BERT's settings (beta 0.9/0.999, eps 1e-6, weight decay 0.01 except on biases and LayerNorm),
LAMB for large batches (You et al., 2019), and the lr schedules of `schedules.SCHEDULES` (by default linear warmup
then linear decay) by steps or, under a time budget, by the time spent.
"""
from __future__ import annotations

from typing import Callable, Iterable

import torch
from torch import nn

from bertforge.training.schedules import SCHEDULES
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
    """lr x step/warmup while warming up, then linearly down to 0 at `total_steps` (the paper's schedule)."""
    return build_scheduler(optimizer, "linear", warmup_steps, total_steps)


def build_scheduler(optimizer: torch.optim.Optimizer, name: str, warmup_steps: int,
                    total_steps: int) -> torch.optim.lr_scheduler.LambdaLR:
    """The step schedule `name` of `SCHEDULES` as a LambdaLR (its state is the step count, so a checkpoint of any
    schedule resumes the same way); a schedule that cycles beta1 sets step 0's now, `set_beta1` the later ones."""
    schedule = SCHEDULES[name]
    set_beta1(optimizer, name, 0, warmup_steps, total_steps)
    return torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: schedule.factor(step, warmup_steps, total_steps))


def set_beta1(optimizer: torch.optim.Optimizer, name: str, step: int, warmup_steps: int, total_steps: int) -> None:
    """Give every group the beta1 of 0-based step `step` when schedule `name` cycles it (one-cycle); else nothing."""
    beta1 = SCHEDULES[name].beta1
    if beta1 is None:
        return
    value = beta1(step, warmup_steps, total_steps)
    for group in optimizer.param_groups:
        group["betas"] = (value, group["betas"][1])


def budget_lr_factor(step: int, warmup_steps: int, elapsed: float, budget: float,
                     warmup_ended_at: float | None, decay: Callable[[float], float] = SCHEDULES["linear"].decay
                     ) -> float:
    """lr factor of a time-budgeted run: linear warmup over `warmup_steps` steps, then `decay` (linear: down to 0)
    over the time that was left when warmup ended (`warmup_ended_at`, seconds into the run).

    Decaying over the time left, not the whole budget, keeps the peak at the full lr: multiplying a step
    warmup by a decay that starts at time 0 peaks lower the longer warmup lasts (0.6 x lr when warmup
    takes 40% of the budget).
    """
    if warmup_steps > 0 and step < warmup_steps:
        return (step + 1) / warmup_steps
    start = warmup_ended_at or 0.0
    return max(0.0, decay(min(1.0, max(0.0, elapsed - start) / max(budget - start, 1e-9))))


def set_budget_lr(optimizer: torch.optim.Optimizer, base_lrs: list[float], state: EngineState, step: int,
                  warmup_steps: int, budget: float, schedule: str = "linear", spent: float | None = None) -> float:
    """Set every group's lr for this step of a time-budgeted run and return the factor. Records in `state`
    (saved with each checkpoint, so a resumed run decays the same way) the time at which warmup ended.
    `schedule` must be one that follows time (`schedules.BY_TIME`). `spent`: the budget's clock when it is not
    the wall clock (`state.elapsed`), e.g. the CPU seconds of a `--cpu-budget` run."""
    spent = state.elapsed if spent is None else spent
    if state.warmup_ended_at is None and step + 1 >= warmup_steps:
        state.warmup_ended_at = spent
    factor = budget_lr_factor(step, warmup_steps, spent, budget, state.warmup_ended_at,
                              SCHEDULES[schedule].decay)
    for group, base in zip(optimizer.param_groups, base_lrs):
        group["lr"] = base * factor
    return factor
