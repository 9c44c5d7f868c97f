"""`bertforge fill-mask`: the top-k tokens for each [MASK] in a sentence, and where chosen words rank."""
from __future__ import annotations

import argparse

from bertforge.commands import add_common
from bertforge.commands.options import existing_dir, positive_int
from bertforge.generation.fill_mask import fill_mask

# A sentence to fill is short; a megabyte of text is a mistake (a file pasted as an argument) that would only
# cost minutes of tokenizing before being truncated to the model's length anyway.
MAX_CHARS = 100_000
# weight-name prefixes of the masked-LM head of each family: BERT, RoBERTa, ALBERT, DistilBERT


def register(sub) -> None:
    p = sub.add_parser("fill-mask", help="predict the [MASK] tokens of sentences",
                       description="Print the top-k predictions for every [MASK] in each sentence. With "
                                   "--targets, also print the rank and probability of those words at every "
                                   "mask: early in pre-training the right word climbs long before it "
                                   "reaches the top-k. Works for every family (RoBERTa's <mask> may be "
                                   "written [MASK]).")
    p.add_argument("--model", required=True, type=existing_dir, metavar="DIR",
                   help="a checkpoint folder with a trained MLM head and its tokenizer")
    p.add_argument("text", nargs="+", help='sentences such as "the man went to the [MASK] ."')
    p.add_argument("--top-k", type=positive_int, default=5, help="how many predictions to print per mask")
    p.add_argument("--targets", metavar="WORD,...", default="",
                   help="comma-separated words to rank at every mask (a word that splits into several "
                        "pieces is ranked by its first piece, as transformers' fill-mask pipeline does)")
    p.add_argument("--max-chars", type=positive_int, default=MAX_CHARS, metavar="N",
                   help="refuse a text longer than this many characters (checked before tokenizing)")
    add_common(p)
    p.set_defaults(run=run)


def check_lengths(texts: list[str], max_chars: int) -> None:
    for i, text in enumerate(texts, 1):
        if len(text) > max_chars:
            raise ValueError(f"text #{i} has {len(text):,} characters; the limit is --max-chars {max_chars:,}")


def run(args: argparse.Namespace) -> int:
    from bertforge.generation.loading import load_mlm
    check_lengths(args.text, args.max_chars)
    model, tokenizer = load_mlm(args.model)
    targets = [w.strip() for w in args.targets.split(",") if w.strip()]
    vocab = tokenizer.vocab_size
    for text, masks in zip(args.text, fill_mask(model, tokenizer, args.text, args.top_k, targets)):
        print(text)
        if not masks:
            alt = "" if tokenizer.mask_token == "[MASK]" else f" or {tokenizer.mask_token}"
            print(f"  (no [MASK]{alt} in this text)")
        for i, mask in enumerate(masks):
            shown = "  ".join(f"{tok} {p:.3f}" for tok, p in mask["top"])
            print(f"  [MASK] #{i + 1}: {shown}")
            for s in mask["targets"]:
                piece = "" if s.piece == s.word else f" (as {s.piece!r})"
                prob = f"{s.probability:.4f}" if s.probability >= 1e-3 else f"{s.probability:.1e}"
                print(f"      {s.word}{piece}: rank {s.rank:,} of {vocab:,}, p {prob}")
    return 0
