"""The losses of embedding training, on sentence vectors.

- `in_batch_negatives` (MultipleNegativesRankingLoss, van den Oord et al.'s InfoNCE with cosine similarity):
  each anchor must pick its own positive among every positive and hard negative of the batch, a softmax over
  `scale` x cosine. Under torchrun the candidates of every process join the batch (more negatives for free);
  gradients flow through this process's own vectors only. `symmetric` adds the other direction (each positive
  picks its anchor) and averages the two.
- `cosent` (Su 2022): for scored pairs, every pair ranked above another by its score must have the higher
  cosine: log(1 + sum over (i, j) with score_i < score_j of exp(scale (cos_i - cos_j))).
- `cosine_mse`: the cosine of each pair regressed onto its score (scores in [0, 1] or [-1, 1]).
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

LOSSES = ("mnrl", "cosent", "cosine")


def gather_keep_local(x: torch.Tensor) -> torch.Tensor:
    """Every process's rows of `x`, concatenated in rank order; this process's rows keep their gradient (the
    others' arrive as constants). Without a process group, `x` itself."""
    import torch.distributed as dist
    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() == 1:
        return x
    parts = [torch.empty_like(x) for _ in range(dist.get_world_size())]
    dist.all_gather(parts, x.detach().contiguous())
    parts[dist.get_rank()] = x
    return torch.cat(parts)


def _rank() -> int:
    import torch.distributed as dist
    return dist.get_rank() if dist.is_available() and dist.is_initialized() else 0


def in_batch_negatives(anchors: torch.Tensor, positives: torch.Tensor, negatives: torch.Tensor | None = None, *,
                       scale: float = 20.0, symmetric: bool = False, gather: bool = True) -> tuple[torch.Tensor,
                                                                                                    torch.Tensor]:
    """(loss, accuracy): the mean cross-entropy of each anchor's positive among all candidates, and how often
    the anchor's most similar candidate is its positive (the in-batch accuracy, chance = 1 / candidates)."""
    a, p = F.normalize(anchors.float(), dim=-1), F.normalize(positives.float(), dim=-1)
    all_p = gather_keep_local(p) if gather else p
    candidates = all_p
    if negatives is not None:
        n = F.normalize(negatives.float(), dim=-1)
        candidates = torch.cat([all_p, gather_keep_local(n) if gather else n])
    offset = (_rank() if gather else 0) * a.shape[0]
    target = torch.arange(offset, offset + a.shape[0], device=a.device)
    logits = scale * a @ candidates.T
    loss = F.cross_entropy(logits, target)
    accuracy = (logits.argmax(-1) == target).float().mean()
    if symmetric:
        all_a = gather_keep_local(a) if gather else a
        loss = (loss + F.cross_entropy(scale * p @ all_a.T, target)) / 2
    return loss, accuracy


def cosent(first: torch.Tensor, second: torch.Tensor, scores: torch.Tensor, *, scale: float = 20.0) -> torch.Tensor:
    """CoSENT over a batch of scored pairs (only the order of the scores matters, not their scale)."""
    cos = scale * F.cosine_similarity(first.float(), second.float(), dim=-1)
    diff = cos[:, None] - cos[None, :]                    # diff[i, j] = cos_i - cos_j
    lower = scores[:, None] < scores[None, :]             # pairs (i, j) that must have cos_i < cos_j
    diff = diff.masked_fill(~lower, float("-inf"))
    return torch.logsumexp(torch.cat([diff.new_zeros(1), diff.flatten()]), dim=0)


def cosine_mse(first: torch.Tensor, second: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
    """Mean squared error between each pair's cosine and its score."""
    return F.mse_loss(F.cosine_similarity(first.float(), second.float(), dim=-1), scores.float())
