"""The samplers: Mask-Predict, Gibbs (Wang & Cho 2019), Metropolis-Hastings (Goyal et al. 2021), left to right.

Each takes a batch of identical templates `ids` [B, seq] (masks at `targets`), one `torch.Generator` per
sample, and returns the filled batch. Randomness is drawn per sample from its own generator, so a sample's
output depends on its seed, not on which batch it ran in. `step` is called once per model call (progress).
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from bertforge.generation.mlm import MaskedLM

SAMPLERS = ("mask-predict", "gibbs", "mh", "left-to-right", "mdlm")  # mdlm: generation/diffusion.py


@dataclass
class SamplerOutput:
    ids: torch.Tensor                                   # [B, seq] filled sequences
    extras: list[dict] = field(default_factory=list)    # per sample: e.g. acceptance_rate, energy
    scores: torch.Tensor | None = None                  # [B, targets]: each final token's log-probability when
                                                        # it was chosen (mask-predict, left-to-right)


def _noop() -> None:
    return None


def choose(log_probs: torch.Tensor, generators: list[torch.Generator], temperature: float,
           top_k: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """One token per row and its log-probability under the (tempered, top-k) distribution it was drawn from.

    Temperature 0 is the argmax (with the model's log-probability). Row r draws from `generators[r]`."""
    if temperature == 0:
        values, tokens = log_probs.max(-1)
        return tokens, values
    logq = proposal(log_probs, temperature, top_k)
    probs = logq.exp()
    tokens = torch.stack([torch.multinomial(probs[r], 1, generator=g)[0] for r, g in enumerate(generators)])
    return tokens, logq.gather(-1, tokens[:, None])[:, 0]


def proposal(log_probs: torch.Tensor, temperature: float, top_k: int = 0) -> torch.Tensor:
    """log q: the distribution scaled by 1/temperature, cut to the top k (0: all), renormalised."""
    logits = log_probs / temperature
    if 0 < top_k < logits.shape[-1]:
        kth = logits.topk(top_k, dim=-1).values[:, -1:]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    return logits.log_softmax(-1)


def _one_per_row(ids: torch.Tensor, positions: torch.Tensor, mask_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Rows of `ids` with position `positions[r]` masked in row r, and the matching prediction mask."""
    rows = torch.arange(ids.shape[0])
    masked = ids.clone()
    masked[rows, positions] = mask_id
    where = torch.zeros_like(ids, dtype=torch.bool)
    where[rows, positions] = True
    return masked, where


def mask_predict(mlm: MaskedLM, ids: torch.Tensor, targets: torch.Tensor, iterations: int,
                 generators: list[torch.Generator], temperature: float = 0.0, top_k: int = 0,
                 step: Callable[[], None] = _noop) -> SamplerOutput:
    """Ghazvininejad et al. (2019): predict every target at once, then for t = 1..T-1 re-mask the
    n = N*(T-t)/T targets of lowest probability and predict them again; a re-predicted token and its
    probability replace the old ones, the others keep theirs. Greedy (argmax) unless temperature > 0."""
    batch, n_targets = ids.shape[0], targets.numel()
    x = ids.clone()
    x[:, targets] = mlm.mask_id
    where = torch.zeros_like(x, dtype=torch.bool)
    where[:, targets] = True
    logp = mlm.generation_logits(mlm.log_probs(x, where))
    step()
    tokens, scores = choose(logp, _repeat(generators, n_targets), temperature, top_k)
    tokens, scores = tokens.view(batch, n_targets), scores.view(batch, n_targets)
    x[:, targets] = tokens
    for t in range(1, iterations):
        n = n_targets * (iterations - t) // iterations
        if n == 0:
            break
        chosen = scores.topk(n, dim=-1, largest=False).indices.sort(-1).values      # [B, n] target indices
        positions = targets[chosen]                                                  # [B, n] sequence positions
        masked = x.clone()
        masked.scatter_(1, positions, mlm.mask_id)
        where = torch.zeros_like(x, dtype=torch.bool).scatter_(1, positions, True)
        logp = mlm.generation_logits(mlm.log_probs(masked, where))
        step()
        new_tokens, new_scores = choose(logp, _repeat(generators, n), temperature, top_k)
        x.scatter_(1, positions, new_tokens.view(batch, n))
        scores.scatter_(1, chosen, new_scores.view(batch, n))
    return SamplerOutput(x, scores=scores)


def left_to_right(mlm: MaskedLM, ids: torch.Tensor, targets: torch.Tensor, generators: list[torch.Generator],
                  temperature: float = 0.0, top_k: int = 0, step: Callable[[], None] = _noop) -> SamplerOutput:
    """Fill the masks one at a time from the left, each given everything filled so far (greedy by default)."""
    x = ids.clone()
    x[:, targets] = mlm.mask_id
    scores = []
    for position in targets.tolist():
        where = torch.zeros_like(x, dtype=torch.bool)
        where[:, position] = True
        logp = mlm.generation_logits(mlm.log_probs(x, where))
        step()
        x[:, position], score = choose(logp, generators, temperature, top_k)
        scores.append(score)
    return SamplerOutput(x, scores=torch.stack(scores, 1) if scores else None)


def gibbs(mlm: MaskedLM, ids: torch.Tensor, targets: torch.Tensor, iterations: int,
          generators: list[torch.Generator], temperature: float = 1.0, top_k: int = 0, burn_in: int = 0,
          parallel: bool = False, step: Callable[[], None] = _noop) -> SamplerOutput:
    """Wang & Cho (2019): start from all masks; an iteration is one sweep over the targets. Sequential: each
    target in a random order (per sample) is masked and re-drawn from p(x_i | x_-i). Parallel: every target is
    re-drawn at once, each from its own masked copy of the current sequence. During the first `burn_in`
    sweeps tokens are drawn from the full distribution; after it from the top k (as in their code)."""
    batch, n_targets = ids.shape[0], targets.numel()
    x = ids.clone()
    x[:, targets] = mlm.mask_id
    rows = torch.arange(batch)
    for sweep in range(iterations):
        k = top_k if sweep >= burn_in else 0
        if parallel:
            copies = x.repeat_interleave(n_targets, dim=0)                          # [B*N, seq]
            masked, where = _one_per_row(copies, targets.repeat(batch), mlm.mask_id)
            logp = mlm.generation_logits(mlm.log_probs(masked, where))
            step()
            x[:, targets] = choose(logp, _repeat(generators, n_targets), temperature, k)[0].view(batch, n_targets)
            continue
        orders = torch.stack([torch.randperm(n_targets, generator=g) for g in generators])   # [B, N]
        for j in range(n_targets):
            positions = targets[orders[:, j]]
            masked, where = _one_per_row(x, positions, mlm.mask_id)
            logp = mlm.generation_logits(mlm.log_probs(masked, where))
            step()
            x[rows, positions] = choose(logp, generators, temperature, k)[0]
    return SamplerOutput(x)


def energy_positions(mlm: MaskedLM, ids: torch.Tensor) -> torch.Tensor:
    """Positions of the energy's sum: every token of the template that is not a special token."""
    special = torch.tensor(mlm.special_ids)
    keep = ~torch.isin(ids, special) | (ids == mlm.mask_id)
    return keep.nonzero()[:, 0]


def energy_and_conditionals(mlm: MaskedLM, x: torch.Tensor, scored: torch.Tensor,
                            targets_in_scored: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """E(x) = -sum_t log p(x_t | x_-t) over the `scored` positions (Goyal et al.'s normalised energy, the
    negative pseudo-log-likelihood) for each row of `x` [R, seq], and the conditionals p(. | x_-i) at the
    targets [R, N, vocab], which come from the same masked copies."""
    rows, n_scored = x.shape[0], scored.numel()
    copies = x.repeat_interleave(n_scored, dim=0)
    masked, where = _one_per_row(copies, scored.repeat(rows), mlm.mask_id)
    logp = mlm.log_probs(masked, where).view(rows, n_scored, -1)
    true = x[:, scored]
    energy = -logp.gather(-1, true[..., None])[..., 0].sum(-1)
    return energy, logp[:, targets_in_scored]


def metropolis_hastings(mlm: MaskedLM, ids: torch.Tensor, targets: torch.Tensor, iterations: int,
                        generators: list[torch.Generator], temperature: float = 1.0, top_k: int = 0,
                        step: Callable[[], None] = _noop) -> SamplerOutput:
    """Goyal et al. (2021): the MLM defines an energy E(x) = -sum_t log p_mlm(x_t | x_-t) (their E_norm, summed
    over every non-special token); the chain targets p(x) proportional to exp(-E(x)). Start from one
    sequential Gibbs sweep from all masks; each iteration sweeps the targets in a random order, proposes
    x'_i ~ q(. | x_-i) (the MLM conditional at temperature / top-k, with special tokens removed), and accepts with
    probability min(1, exp(E(x) - E(x')) q(x_i | x_-i) / q(x'_i | x_-i)). Reports each chain's acceptance rate."""
    batch, n_targets = ids.shape[0], targets.numel()
    scored = energy_positions(mlm, ids[0])
    targets_in_scored = torch.searchsorted(scored, targets)
    # a coherent start: one sequential sweep from all masks (a parallel draw mixes modes the chain then
    # has to climb out of one token at a time)
    x = gibbs(mlm, ids, targets, 1, generators, temperature, top_k, step=step).ids
    energy, cond = energy_and_conditionals(mlm, x, scored, targets_in_scored)
    step()
    accepted = torch.zeros(batch)
    proposed = 0
    rows = torch.arange(batch)
    for _ in range(iterations):
        orders = torch.stack([torch.randperm(n_targets, generator=g) for g in generators])
        for j in range(n_targets):
            index = orders[:, j]
            positions = targets[index]
            logq = proposal(mlm.generation_logits(cond[rows, index]), temperature, top_k)
            new = torch.stack([torch.multinomial(logq[r].exp(), 1, generator=g)[0] for r, g in enumerate(generators)])
            old = x[rows, positions]
            log_u = torch.stack([torch.rand((), generator=g) for g in generators]).log()
            proposed += 1
            moved = new != old
            accepted += (~moved).float()   # proposing the current token leaves the chain where it is: accepted
            if not bool(moved.any()):
                continue
            r = moved.nonzero()[:, 0]
            x_new = x[r].clone()
            x_new[torch.arange(r.numel()), positions[r]] = new[r]
            new_energy, new_cond = energy_and_conditionals(mlm, x_new, scored, targets_in_scored)
            step()
            log_ratio = (energy[r] - new_energy) + logq[r, old[r]] - logq[r, new[r]]
            accept = log_u[r] < log_ratio
            take = r[accept]
            x[take], energy[take], cond[take] = x_new[accept], new_energy[accept], new_cond[accept]
            accepted[take] += 1
    extras = [{"acceptance_rate": float(a) / max(proposed, 1), "energy": float(e)} for a, e in zip(accepted, energy)]
    return SamplerOutput(x, extras)


def _repeat(generators: list[torch.Generator], times: int) -> list[torch.Generator]:
    """Each sample's generator once per row of that sample (rows are sample-major)."""
    return [g for g in generators for _ in range(times)]
