"""`bertforge vocab`: train a WordPiece vocabulary (BERT's vocab.txt layout) from text files."""
from __future__ import annotations

import argparse

from bertforge.commands import add_common


def register(sub) -> None:
    p = sub.add_parser("vocab", help="train a WordPiece vocabulary from text files",
                       description="Train a WordPiece vocabulary with the `tokenizers` library and write BERT's "
                       "vocab.txt ([PAD]=0, [unused*], [UNK], [CLS], [SEP], [MASK]) plus tokenizer_config.json.")
    p.add_argument("--input", nargs="+", required=True, metavar="FILE", help="text files (.txt, .gz, .xz, .bz2)")
    p.add_argument("--output", required=True, metavar="DIR", help="folder for vocab.txt and tokenizer_config.json")
    p.add_argument("--vocab-size", type=int, default=30522)
    p.add_argument("--cased", action="store_true", help="keep case and accents (default: lowercase, as uncased BERT)")
    p.add_argument("--min-frequency", type=int, default=2)
    p.add_argument("--unused", type=int, default=99, metavar="N",
                   help="[unusedN] placeholders before [UNK] (99 gives the original ids 0/100/101/102/103)")
    add_common(p)
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from bertforge.tokenization import BertTokenizer, train_wordpiece
    out = train_wordpiece(args.input, args.output, vocab_size=args.vocab_size, lowercase=not args.cased,
                          min_frequency=args.min_frequency, num_unused=args.unused)
    tok = BertTokenizer.from_pretrained(args.output)
    print(f"vocabulary: {tok.vocab_size} tokens ({'cased' if args.cased else 'uncased'}) -> {out}")
    return 0
