"""What to generate: a token sequence whose target positions are masks, from infilling text or a length.

Infilling text marks each position to fill with the tokenizer's mask token (`[MASK]` is accepted for every
family, as `fill-mask` does); a run of masks is one span. `span_lengths` expands the i-th mask into that many.
Unconditional generation is `length` masks after an optional prefix.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch


class GenerationInputError(ValueError):
    """The text, spans or length asked for cannot be generated with this model."""


@dataclass(frozen=True)
class Template:
    ids: torch.Tensor        # [seq] token ids, masks at the targets
    targets: torch.Tensor    # [n] positions to generate, ascending
    spans: list[list[int]]   # runs of consecutive target positions

    @property
    def length(self) -> int:
        return int(self.ids.numel())


def build_template(tokenizer: Any, max_length: int, text: str | None = None,
                   span_lengths: Sequence[int] | None = None, length: int | None = None,
                   prefix: str | None = None) -> Template:
    """The sequence to fill: `text` with masks (optionally expanded by `span_lengths`), or `length` masks after
    `prefix`. Raises GenerationInputError with a one-line reason for anything that cannot be generated."""
    mask = tokenizer.mask_token
    if (text is None) == (length is None):
        raise GenerationInputError("give either a text with mask tokens (infilling) or a length "
                                   "(unconditional generation), not both or neither")
    if length is not None:
        if span_lengths:
            raise GenerationInputError("span lengths apply to masks in a text, not to unconditional generation")
        if length < 1:
            raise GenerationInputError(f"length must be at least 1, got {length}")
        text = " ".join(([prefix.strip()] if prefix and prefix.strip() else []) + [mask] * length)
    elif prefix:
        raise GenerationInputError("a prefix goes with a length (unconditional generation); for infilling put "
                                   "the context in the text")
    text = text.replace("[MASK]", mask)
    ids = list(tokenizer.encode(text, add_special_tokens=True))
    mask_id = int(tokenizer.mask_token_id)
    masks = [i for i, t in enumerate(ids) if t == mask_id]
    if not masks:
        shown = "[MASK]" if mask == "[MASK]" else f"{mask} or [MASK]"
        raise GenerationInputError(f"the text has no mask token ({shown}) to fill: {_short(text)!r}")
    if span_lengths:
        lengths = [int(n) for n in span_lengths]
        if len(lengths) != len(masks):
            raise GenerationInputError(f"span lengths give {len(lengths)} lengths but the text has {len(masks)} "
                                       f"mask tokens; give one length per mask")
        if min(lengths) < 1:
            raise GenerationInputError(f"span lengths must be at least 1, got {','.join(map(str, lengths))}")
        expanded: list[int] = []
        for i, t in enumerate(ids):
            expanded += [t] * (lengths[masks.index(i)] if t == mask_id else 1)
        ids = expanded
    if len(ids) > max_length:
        raise GenerationInputError(f"the sequence to generate is {len(ids)} tokens with its special tokens; "
                                   f"this model takes at most {max_length}")
    targets = [i for i, t in enumerate(ids) if t == mask_id]
    spans: list[list[int]] = []
    for p in targets:
        if spans and spans[-1][-1] == p - 1:
            spans[-1].append(p)
        else:
            spans.append([p])
    return Template(torch.tensor(ids, dtype=torch.long), torch.tensor(targets, dtype=torch.long), spans)


def _short(text: str, n: int = 60) -> str:
    return text if len(text) <= n else text[: n - 3] + "..."
