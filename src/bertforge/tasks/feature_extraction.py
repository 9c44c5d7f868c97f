"""The paper's feature-based approach (Section 5.3): frozen BERT activations as per-word features.

Each word is represented by its first sub-token's vectors from chosen layers, combined by concatenation
(the paper's best: last four layers), sum, or a single layer, so a separate model (e.g. a BiLSTM tagger)
can be trained on top without fine-tuning BERT.
"""
from __future__ import annotations

from typing import Sequence

import torch

COMBINE_MODES = ("concat", "sum", "last", "second-to-last")


def select_layers(layers: Sequence[int], combine: str) -> list[int]:
    """Which hidden-state indices (negative = from the top; the embeddings are index 0) a mode reads."""
    if combine == "last":
        return [-1]
    if combine == "second-to-last":
        return [-2]
    if combine in ("concat", "sum"):
        return list(layers)
    raise ValueError(f"combine must be one of {', '.join(COMBINE_MODES)}, got {combine!r}")


@torch.no_grad()
def word_features(model, tokenizer, texts: Sequence[Sequence[str]], layers: Sequence[int] = (-1, -2, -3, -4),
                  combine: str = "concat", max_length: int = 512, batch_size: int = 32) -> list[torch.Tensor]:
    """For each text (a list of words): a [n_words, D] tensor, D = hidden x layers for concat, else hidden.

    Words cut off by `max_length` get zero vectors, so row i is always word i.
    """
    chosen = select_layers(layers, combine)
    model.eval()
    out: list[torch.Tensor] = []
    for start in range(0, len(texts), batch_size):
        chunk = [list(t) for t in texts[start:start + batch_size]]
        enc = tokenizer(chunk, is_split_into_words=True, max_length=max_length, truncation=True, padding=True,
                        return_word_ids=True, return_tensors="pt")
        hidden = model(enc["input_ids"], attention_mask=enc["attention_mask"], token_type_ids=enc["token_type_ids"],
                       output_hidden_states=True).hidden_states
        picked = [hidden[i] for i in chosen]
        combined = torch.cat(picked, -1) if combine == "concat" else torch.stack(picked).sum(0)
        word_ids = enc["word_ids"]
        word_ids = word_ids.tolist() if isinstance(word_ids, torch.Tensor) else word_ids  # -1/None: no word
        for row, words in enumerate(chunk):
            feats = combined.new_zeros(len(words), combined.shape[-1])
            seen: set[int] = set()
            for pos, w in enumerate(word_ids[row]):
                if w is not None and w >= 0 and w not in seen:
                    seen.add(w)
                    feats[w] = combined[row, pos]
            out.append(feats)
    return out
