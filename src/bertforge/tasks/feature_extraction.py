"""The paper's feature-based approach (Section 5.3): frozen BERT activations as per-word features.

Each word is represented by its first sub-token's vectors from chosen layers, combined by concatenation
(the paper's best: last four layers), sum, or a single layer, so a separate model (e.g. a BiLSTM tagger)
can be trained on top without fine-tuning BERT.
"""
from __future__ import annotations

from typing import Sequence

import torch

from bertforge.device import Precision, move_to, placement
from bertforge.tasks.features import collate, token_budget_batches
from bertforge.training.progress import progress as make_bar

COMBINE_MODES = ("concat", "sum", "last", "second-to-last")


def select_layers(layers: Sequence[int], combine: str) -> list[int]:
    """Which hidden-state indices (negative = from the top; the embeddings are index 0) a mode reads."""
    if combine == "last":
        return [-1]
    if combine == "second-to-last":
        return [-2]
    if combine in ("concat", "sum"):
        if not layers:
            raise ValueError(f"combine={combine!r} needs at least one layer")
        return list(layers)
    raise ValueError(f"combine must be one of {', '.join(COMBINE_MODES)}, got {combine!r}")


def check_layers(layers: Sequence[int], num_layers: int) -> None:
    """Hidden states are the embeddings (0) and each of `num_layers` layers: indices 0..L or -(L+1)..-1."""
    bad = [i for i in layers if not -(num_layers + 1) <= i <= num_layers]
    if bad:
        raise ValueError(f"layers {','.join(map(str, bad))} out of range: the model has {num_layers} layers, so "
                         f"hidden states 0..{num_layers} (or {-(num_layers + 1)}..-1)")


@torch.no_grad()
def word_features(model, tokenizer, texts: Sequence[Sequence[str]], layers: Sequence[int] = (-1, -2, -3, -4),
                  combine: str = "concat", max_length: int = 512, batch_size: int = 32, *,
                  device: torch.device | str | None = None, precision: Precision | str | None = None,
                  max_batch_tokens: int | None = None, progress: bool = False) -> list[torch.Tensor]:
    """For each text (a list of words): a float32 CPU [n_words, D] tensor, D = hidden x layers for concat,
    else hidden.

    Words cut off by `max_length` get zero vectors, so row i is always word i. Texts run longest first in
    batches of at most `batch_size` texts and `max_batch_tokens` padded tokens, on `device` (default: the
    model's) under `precision` (default fp32); the result is in input order.
    """
    chosen = select_layers(layers, combine)
    config = getattr(model, "config", None)
    if config is not None:
        check_layers(chosen, config.num_hidden_layers)
    device, precision = placement(device, precision, model)
    model.eval()
    chunk = [list(t) for t in texts]
    out: list[torch.Tensor | None] = [None] * len(chunk)
    empty = [i for i, words in enumerate(chunk) if not words]
    todo = [i for i, words in enumerate(chunk) if words]
    if not todo:
        if empty:
            raise ValueError("every text is empty: no words to featurize")
        return []
    enc = tokenizer([chunk[i] for i in todo], is_split_into_words=True, max_length=max_length, truncation=True,
                    return_word_ids=True)
    features = [{"input_ids": enc["input_ids"][k], "token_type_ids": enc["token_type_ids"][k]}
                for k in range(len(todo))]
    pad_id = tokenizer.pad_token_id
    dim = None
    bar = make_bar(len(todo), bar=True, desc="features", unit="text", leave=False, silent=not progress)
    for batch_idx in token_budget_batches([len(f["input_ids"]) for f in features], batch_size, max_batch_tokens):
        batch = move_to(collate([features[k] for k in batch_idx], pad_id), device)
        with precision.autocast():
            hidden = model(batch["input_ids"], attention_mask=batch["attention_mask"],
                           token_type_ids=batch["token_type_ids"], output_hidden_states=True).hidden_states
        if config is None:
            check_layers(chosen, len(hidden) - 1)
        picked = [hidden[i].float() for i in chosen]
        combined = (torch.cat(picked, -1) if combine == "concat" else torch.stack(picked).sum(0)).cpu()
        dim = combined.shape[-1]
        for row, k in enumerate(batch_idx):
            i = todo[k]
            feats = combined.new_zeros(len(chunk[i]), dim)
            seen: set[int] = set()
            for pos, w in enumerate(enc["word_ids"][k]):
                if w is not None and w >= 0 and w not in seen:
                    seen.add(w)
                    feats[w] = combined[row, pos]
            out[i] = feats
        bar.update(len(batch_idx))
    bar.close()
    for i in empty:
        out[i] = torch.zeros(0, dim)
    return out  # type: ignore[return-value]
