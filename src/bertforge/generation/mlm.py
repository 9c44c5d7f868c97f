"""One batched call into a masked LM: log-probabilities at chosen positions, in token-budget chunks.

Every sampler and the scorer go through `MaskedLM.log_probs`, so the decoder runs only on the rows that are
asked for (not on the whole sequence) and a large batch of masked copies never exceeds `max_tokens`.
"""
from __future__ import annotations

from typing import Any

import torch


class NonFiniteScoresError(ValueError):
    """The model gives NaN or inf logits (broken weights, or a precision that overflowed): anything ranked, sampled
    or scored from them would be garbage, so it is an error rather than an output."""


def check_finite(logits: torch.Tensor) -> None:
    if not bool(torch.isfinite(logits).all()):
        raise NonFiniteScoresError("the model's scores are not finite (NaN or inf): its weights are broken, or its "
                                   "precision overflowed")


class MaskedLM:
    """A model with an MLM head and its tokenizer, seen as `p(token | sequence)` at chosen positions."""

    def __init__(self, model: Any, tokenizer: Any, max_tokens: int = 8192, precision: str = "auto") -> None:
        from bertforge.device import placement
        if max_tokens < 1:
            raise ValueError(f"max_tokens must be at least 1, got {max_tokens}")
        self.model = model.eval()
        self.tokenizer = tokenizer
        self.max_tokens = max_tokens
        self.mask_id = int(tokenizer.mask_token_id)
        self.pad_id = int(tokenizer.pad_token_id) if tokenizer.pad_token_id is not None else 0
        self.special_ids = sorted({int(i) for i in tokenizer.all_special_ids})
        self.device = next(model.parameters()).device
        # fp32 on CPU unless asked: bf16 is faster where the CPU has native bf16 and moves per-token
        # log-probabilities slightly (GENERATION.md)
        _, self.precision = placement(self.device, precision)
        config = model.config
        self.max_length = int(getattr(config, "max_sequence_length", config.max_position_embeddings))
        self.vocab_size = int(config.vocab_size)
        # Generated tokens are never special ([CLS], [SEP], [PAD], [MASK], [UNK]...): their logits are dropped.
        self.banned = torch.tensor([i for i in self.special_ids if i < self.vocab_size], dtype=torch.long)

    @torch.no_grad()
    def log_probs(self, ids: torch.Tensor, positions: torch.Tensor,
                  attention_mask: torch.Tensor | None = None) -> torch.Tensor:
        """Natural-log probabilities [positions.sum(), vocab] at the True entries of `positions` [rows, seq],
        in row-major order (row 0's positions left to right, then row 1's...)."""
        rows, seq = ids.shape
        per_chunk = max(1, self.max_tokens // max(seq, 1))
        out = []
        for start in range(0, rows, per_chunk):
            chunk = slice(start, start + per_chunk)
            pos = positions[chunk]
            if not bool(pos.any()):
                continue
            mask = attention_mask[chunk] if attention_mask is not None else torch.ones_like(ids[chunk])
            with self.precision.autocast():
                logits = self.model(input_ids=ids[chunk].to(self.device), attention_mask=mask.to(self.device),
                                    prediction_positions=pos.to(self.device)).logits
            check_finite(logits)
            out.append(logits.float().log_softmax(-1).cpu())
        if not out:
            return torch.empty(0, self.vocab_size)
        return torch.cat(out)

    def generation_logits(self, log_probs: torch.Tensor) -> torch.Tensor:
        """`log_probs` with the special tokens removed (set to -inf) and renormalised."""
        out = log_probs.clone()
        out[:, self.banned] = float("-inf")
        return out.log_softmax(-1)
