"""The `mdlm` sampler: MDLM's ancestral reverse process (Sahoo et al. 2024, Sec. 3.2) over the masked targets.

With the linear schedule alpha_t = 1 - t and `steps` steps from t = 1 to 0, the step from t to s = t - 1/steps
reveals each still-masked token with probability (t - s) / t, drawing it from the model's distribution at
its position given the current sequence (tempered, cut to the top k and to the nucleus top p); revealed
tokens, and every token of the template that was not a mask, are never changed again ("carry-over
unmasking"). The last step has s = 0, so it reveals everything that is left: after `steps` steps no mask
remains. Each sample draws from its own generator (its reveal decisions for every target at every step,
then its tokens), so a sample does not depend on the batch it ran in.
"""
from __future__ import annotations

from collections.abc import Callable

import torch

from bertforge.generation.mlm import MaskedLM
from bertforge.generation.samplers import proposal

__all__ = ["mdlm_sample", "nucleus"]


def nucleus(logq: torch.Tensor, top_p: float) -> torch.Tensor:
    """log q cut to the smallest set of most likely tokens whose probability reaches `top_p` (Holtzman et al.
    2020), renormalised; top_p >= 1 keeps every token. The most likely token is always kept."""
    if top_p >= 1.0:
        return logq
    sorted_logq, order = logq.sort(-1, descending=True)
    before = sorted_logq.exp().cumsum(-1) - sorted_logq.exp()  # the mass of the tokens ranked above each
    drop = torch.zeros_like(logq, dtype=torch.bool).scatter(-1, order, before >= top_p)
    return logq.masked_fill(drop, float("-inf")).log_softmax(-1)


def _draw(log_probs: torch.Tensor, generators: list[torch.Generator], temperature: float, top_k: int,
          top_p: float) -> torch.Tensor:
    """One token per row from the tempered, top-k and nucleus-cut distribution (argmax at temperature 0)."""
    if temperature == 0:
        return log_probs.argmax(-1)
    probs = nucleus(proposal(log_probs, temperature, top_k), top_p).exp()
    return torch.stack([torch.multinomial(probs[r], 1, generator=g)[0] for r, g in enumerate(generators)])


def mdlm_sample(mlm: MaskedLM, ids: torch.Tensor, targets: torch.Tensor, steps: int,
                generators: list[torch.Generator], temperature: float = 1.0, top_k: int = 0, top_p: float = 1.0,
                step: Callable[[], None] | None = None) -> torch.Tensor:
    """Fill `targets` of the identical templates `ids` [B, seq] in `steps` reverse steps; the filled batch."""
    batch, n_targets = ids.shape[0], targets.numel()
    x = ids.clone()
    x[:, targets] = mlm.mask_id
    masked = torch.ones(batch, n_targets, dtype=torch.bool)
    for k in range(steps):
        t, s = 1.0 - k / steps, 1.0 - (k + 1) / steps
        draws = torch.stack([torch.rand(n_targets, generator=g) for g in generators])
        reveal = masked & (draws < (t - s) / t) if k < steps - 1 else masked
        if not bool(reveal.any()):
            continue
        where = torch.zeros_like(x, dtype=torch.bool)
        where[:, targets] = reveal
        logp = mlm.generation_logits(mlm.log_probs(x, where))  # rows' revealed positions, row-major
        if step is not None:
            step()
        rows, positions = where.nonzero(as_tuple=True)  # the order `log_probs` answers in
        x[rows, positions] = _draw(logp, [generators[r] for r in rows.tolist()], temperature, top_k, top_p)
        masked &= ~reveal
    return x
