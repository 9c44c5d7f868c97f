"""`bertforge fill-mask`: the top-k tokens for each [MASK] in a sentence, and where chosen words rank."""
from __future__ import annotations

import argparse

from bertforge.commands import add_common
from bertforge.commands.flags import add_settings_arguments
from bertforge.commands.options import add_text_argument, at_most, bounded_int, existing_dir, positive_int
from bertforge.device import DeviceOptions

# A sentence to fill is short; a megabyte of text is a mistake (a file pasted as an argument) that would only
# cost minutes of tokenizing before being truncated to the model's length anyway.
MAX_CHARS = 100_000
MAX_TOP_K = 1_000  # a longer list is unreadable; --targets gives the rank of any word instead


def register(sub) -> None:
    p = sub.add_parser("fill-mask", help="predict the [MASK] tokens of sentences",
                       description="Print the top-k predictions for every [MASK] in each sentence. With "
                                   "--targets, also print the rank and probability of those words at every "
                                   "mask: early in pre-training the right word climbs long before it "
                                   "reaches the top-k. Works for every family (RoBERTa's <mask> may be "
                                   "written [MASK]).")
    p.add_argument("--model", required=True, type=existing_dir, metavar="DIR",
                   help="a checkpoint folder with a trained MLM head and its tokenizer")
    p.add_argument("sentences", nargs="*", metavar="TEXT", help='sentences such as "the man went to the [MASK] ."')
    add_text_argument(p, "sentences given with a flag, as every verb takes them (repeatable; read after the "
                         "positional ones)")
    p.add_argument("--top-k", type=bounded_int(1, MAX_TOP_K), default=5,
                   help=f"how many predictions to print per mask (1-{MAX_TOP_K:,})")
    p.add_argument("--targets", metavar="WORD,...", default="",
                   help="comma-separated words to rank at every mask (a word that splits into several "
                        "pieces is ranked by its first piece, as transformers' fill-mask pipeline does)")
    p.add_argument("--max-chars", type=at_most(positive_int, 10_000_000), default=MAX_CHARS, metavar="N",
                   help="refuse a text longer than this many characters (checked before tokenizing)")
    add_settings_arguments(p, DeviceOptions, hide=("precision",))  # fill-mask ranks in fp32
    add_common(p)
    p.set_defaults(run=run)


def sentences(args: argparse.Namespace) -> list[str]:
    """The positional sentences, then the --text ones; at least one."""
    texts = list(args.sentences or []) + list(args.text or [])
    if not texts:
        raise ValueError('nothing to fill: give sentences, e.g. fill-mask --model DIR "the [MASK] is blue ." '
                         '(or --text "...")')
    return texts


def check_lengths(texts: list[str], max_chars: int) -> None:
    for i, text in enumerate(texts, 1):
        if len(text) > max_chars:
            raise ValueError(f"text #{i} has {len(text):,} characters; the limit is --max-chars {max_chars:,}")


def run(args: argparse.Namespace) -> int:
    from bertforge.generation.fill_mask import fill_mask
    from bertforge.generation.loading import load_mlm
    from bertforge.generation.mlm import NonFiniteScoresError
    texts = sentences(args)
    check_lengths(texts, args.max_chars)
    model, tokenizer = load_mlm(args.model, device=args.device)
    targets = [w.strip() for w in args.targets.split(",") if w.strip()]
    try:
        filled = fill_mask(model, tokenizer, texts, args.top_k, targets)
    except NonFiniteScoresError as err:
        raise NonFiniteScoresError(f"{args.model}: {err}") from None
    vocab = tokenizer.vocab_size
    for text, masks in zip(texts, filled):
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
