"""`bertforge fill-mask`: the top-k tokens for each [MASK] in a sentence, and where chosen words rank."""
from __future__ import annotations

import argparse

from bertforge.commands import add_common
from bertforge.commands.flags import add_settings_arguments, settings_from_args


def register(sub) -> None:
    from bertforge.generation.runs import FillMaskSettings
    p = sub.add_parser("fill-mask", help="predict the [MASK] tokens of sentences",
                       description="Print the top-k predictions for every [MASK] in each sentence. With "
                                   "--targets, also print the rank and probability of those words at every "
                                   "mask: early in pre-training the right word climbs long before it "
                                   "reaches the top-k. Works for every family (RoBERTa's <mask> may be "
                                   "written [MASK]).")
    add_settings_arguments(p, FillMaskSettings)
    add_common(p)
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from bertforge.generation.runs import FillMaskSettings, fill_masks
    filled = fill_masks(settings_from_args(FillMaskSettings, args))
    for text, masks in zip(filled.texts, filled.masks):
        print(text)
        if not masks:
            alt = "" if filled.mask_token == "[MASK]" else f" or {filled.mask_token}"
            print(f"  (no [MASK]{alt} in this text)")
        for i, mask in enumerate(masks):
            shown = "  ".join(f"{tok} {p:.3f}" for tok, p in mask["top"])
            print(f"  [MASK] #{i + 1}: {shown}")
            for s in mask["targets"]:
                piece = "" if s.piece == s.word else f" (as {s.piece!r})"
                prob = f"{s.probability:.4f}" if s.probability >= 1e-3 else f"{s.probability:.1e}"
                print(f"      {s.word}{piece}: rank {s.rank:,} of {filled.vocab_size:,}, p {prob}")
    return 0
