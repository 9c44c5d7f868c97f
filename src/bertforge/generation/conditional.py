"""Conditional generation with an encoder–decoder trained as a conditional MLM (Mask-Predict's setting).

For each source: encode it once, take the `length_beam` most likely target lengths from the length
predictor, fill `[CLS] [MASK] x L [SEP]` for each with the same samplers as unconditional generation
(`samplers.mask_predict`, `samplers.left_to_right`), and keep the best candidate. The paper keeps the highest
mean token log-probability; we add the length's own log-probability to it, because a model sure of a few
tokens of a too-short candidate otherwise beats the length it predicts (seen on a reversal task whose lengths
the predictor gets 100 % right). Candidates of one length run as one batch, each row attending to its
own source's states (`ConditionalMLM`).
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

from bertforge.generation import samplers as S
from bertforge.generation.mlm import MaskedLM
from bertforge.generation.template import GenerationInputError

CONDITIONAL_SAMPLERS = ("mask-predict", "left-to-right")


class ConditionalMLM(MaskedLM):
    """The decoder of an encoder-decoder as a `MaskedLM`: row r of every call attends to `memory` row r."""

    def __init__(self, model: Any, tokenizer: Any, precision: str = "auto") -> None:
        super().__init__(model.decoder, tokenizer, precision=precision)
        self.memory: tuple[torch.Tensor, torch.Tensor] | None = None

    @torch.no_grad()
    def log_probs(self, ids: torch.Tensor, positions: torch.Tensor,
                  attention_mask: torch.Tensor | None = None) -> torch.Tensor:
        states, source_mask = self.memory
        with self.precision.autocast():
            logits = self.model(input_ids=ids.to(self.device), attention_mask=attention_mask,
                                prediction_positions=positions.to(self.device), encoder_hidden_states=states,
                                encoder_attention_mask=source_mask).logits
        return logits.float().log_softmax(-1).cpu()


@torch.no_grad()
def generate_conditional(model: Any, tokenizer: Any, sources: Sequence[str], *, sampler: str = "mask-predict",
                         iterations: int = 10, length_beam: int = 3, batch_size: int = 16,
                         max_source_length: int = 256, precision: str = "auto",
                         progress: Callable[[int], Any] | None = None) -> list[dict]:
    """One record per source: {"source", "text", "length", "score" (mean log-probability of the chosen
    tokens plus that of the length), "sampler", "iterations"}. Greedy, so the same input always gives the same output."""
    if sampler not in CONDITIONAL_SAMPLERS:
        raise GenerationInputError(f"unknown sampler {sampler!r} for an encoder-decoder; choose one of "
                                   f"{', '.join(CONDITIONAL_SAMPLERS)}")
    if iterations < 1 or length_beam < 1 or batch_size < 1:
        raise GenerationInputError(f"iterations, length_beam and batch_size must be at least 1, got "
                                   f"{iterations}, {length_beam} and {batch_size}")
    sources = list(sources)
    for i, text in enumerate(sources):
        if not isinstance(text, str) or not text.strip():
            raise GenerationInputError(f"source {i + 1}: empty text")
    model.eval()
    mlm = ConditionalMLM(model, tokenizer, precision)
    longest = min(model.config.max_target_length, model.config.decoder.max_position_embeddings - 2)
    beam = min(length_beam, longest)
    bar = progress(len(sources)) if progress else None
    results: list[dict] = []
    for start in range(0, len(sources), batch_size):
        chunk = sources[start:start + batch_size]
        source_ids, source_mask = _pad([_source_ids(tokenizer, s, max_source_length) for s in chunk],
                                       tokenizer.pad_token_id)
        source_ids, source_mask = source_ids.to(mlm.device), source_mask.to(mlm.device)
        with mlm.precision.autocast():
            states = model.encode(source_ids, source_mask)
            length_logits = model.predict_length(states, source_mask).float()
        length_logits[:, 0] = float("-inf")  # a target has at least one token
        length_logits[:, longest + 1:] = float("-inf")
        length_logp, lengths = length_logits.log_softmax(-1).topk(beam, dim=-1)
        length_logp, lengths = length_logp.cpu(), lengths.cpu()                     # [sources, beam]
        best: list[tuple[float, list[int]]] = [(float("-inf"), [])] * len(chunk)
        for length in sorted(set(lengths.flatten().tolist())):
            rows = (lengths == length).any(1).nonzero()[:, 0]                       # sources trying this length
            template = torch.tensor([tokenizer.cls_token_id] + [tokenizer.mask_token_id] * length
                                    + [tokenizer.sep_token_id]).repeat(len(rows), 1)
            targets = torch.arange(1, length + 1)
            mlm.memory = (states[rows.to(mlm.device)], source_mask[rows.to(mlm.device)])
            no_randomness = [None] * len(rows)  # greedy: the generators are never drawn from
            if sampler == "mask-predict":
                out = S.mask_predict(mlm, template, targets, iterations, no_randomness)
            else:
                out = S.left_to_right(mlm, template, targets, no_randomness)
            score = out.scores.mean(1) + length_logp[rows][lengths[rows] == length]
            for r, source in enumerate(rows.tolist()):
                if float(score[r]) > best[source][0]:
                    best[source] = (float(score[r]), out.ids[r, 1:length + 1].tolist())
        for text, (score, ids) in zip(chunk, best):
            results.append({"source": text, "text": tokenizer.decode(ids, skip_special_tokens=True).strip(),
                            "length": len(ids), "score": score, "sampler": sampler,
                            "iterations": iterations if sampler == "mask-predict" else len(ids)})
        if bar is not None:
            bar.update(len(chunk))
    if bar is not None:
        bar.close()
    return results


def _source_ids(tokenizer: Any, text: str, max_length: int) -> list[int]:
    ids = list(tokenizer.encode(text, add_special_tokens=True))
    return ids if len(ids) <= max_length else ids[:max_length - 1] + [tokenizer.sep_token_id]


def _pad(rows: list[list[int]], pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    width = max(len(r) for r in rows)
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for i, r in enumerate(rows):
        ids[i, :len(r)] = torch.tensor(r)
        mask[i, :len(r)] = 1
    return ids, mask
