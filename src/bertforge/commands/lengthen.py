"""`bertforge lengthen`: a 4,096-token Longformer from a 512-token BERT or RoBERTa (Longformer's recipe)."""
from __future__ import annotations

import argparse

from bertforge.commands import add_common
from bertforge.commands.flags import add_settings_arguments, settings_from_args


def register(sub) -> None:
    from bertforge.model.lengthen import LengthenSettings
    p = sub.add_parser("lengthen", help="turn a 512-token BERT/RoBERTa into a long Longformer",
                       description="Longformer's recipe: copy the learned position embeddings block by block across "
                                   "--max-positions, turn each layer's attention into a sliding window of "
                                   "--attention-window tokens with global projections copied from the local ones, and "
                                   "write a LongformerForMaskedLM folder (HF layout, tokenizer included) to continue "
                                   "MLM pre-training from (`bertforge pretrain --init-from OUTPUT`).")
    add_settings_arguments(p, LengthenSettings)
    add_common(p)
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from bertforge.model.lengthen import LengthenSettings, lengthen
    lengthen(settings_from_args(LengthenSettings, args), say=print)
    return 0
