"""`bertforge vocab`: train a vocabulary from text files: WordPiece (BERT), byte-level BPE (RoBERTa) or
SentencePiece unigram (ALBERT)."""
from __future__ import annotations

import argparse

from bertforge.commands import add_common
from bertforge.commands.options import add_output_arguments, existing_file
from bertforge.commands.options import at_most, non_negative_int, positive_int
from bertforge.settings import MAX_SAMPLES

# the vocabulary size of the original model of each kind, used when --vocab-size is not given
DEFAULT_SIZES = {"wordpiece": 30522, "bpe": 50265, "sentencepiece": 30000}


def register(sub) -> None:
    p = sub.add_parser("vocab", help="train a WordPiece, byte-level BPE or SentencePiece vocabulary from text files",
                       description="Train a vocabulary and write a tokenizer folder that bertforge and "
                       "transformers.AutoTokenizer load. wordpiece: BERT's vocab.txt ([PAD]=0, [unused*], [UNK], "
                       "[CLS], [SEP], [MASK]); bpe: RoBERTa's vocab.json + merges.txt (<s> <pad> </s> <unk> ... "
                       "<mask>); sentencepiece: ALBERT's spiece.model (<pad> <unk> [CLS] [SEP] [MASK] ...). "
                       "Every folder also holds tokenizer.json.")
    p.add_argument("--input", nargs="+", required=True, type=existing_file, metavar="FILE",
                   help="text files (.txt, .gz, .xz, .bz2)")
    add_output_arguments(p, help="folder for the tokenizer files (new or empty, unless --overwrite)")
    p.add_argument("--type", dest="kind", choices=sorted(DEFAULT_SIZES), default="wordpiece",
                   help="tokenizer kind (default: wordpiece)")
    p.add_argument("--vocab-size", type=at_most(positive_int, 1_000_000), default=None,
                   help=f"default: the original's ({', '.join(f'{k} {v}' for k, v in DEFAULT_SIZES.items())})")
    p.add_argument("--cased", action="store_true",
                   help="keep case and accents (wordpiece, sentencepiece; default: lowercase as uncased BERT and "
                   "ALBERT). Byte-level BPE is always cased")
    p.add_argument("--min-frequency", type=at_most(non_negative_int, MAX_SAMPLES), default=2, help="wordpiece and bpe")
    p.add_argument("--unused", type=at_most(non_negative_int, 10_000), default=99, metavar="N",
                   help="wordpiece: [unusedN] placeholders before [UNK] (99 gives the original ids 0/100/101/102/103)")
    p.add_argument("--skip-bad-lines", action="store_true",
                   help="leave out (and count) lines that are not UTF-8; by default the first one stops the run, "
                   "naming its file and line")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    add_common(p)
    p.set_defaults(run=run)


def check_size(kind: str, size: int, unused: int) -> None:
    """Refuse a --vocab-size that the reserved ids fill up, naming the flags (before any file is read)."""
    if kind == "wordpiece":
        from bertforge.tokenization.train import SPECIAL_TOKENS
        reserved, what = len(SPECIAL_TOKENS) + unused, f"{len(SPECIAL_TOKENS)} special tokens and --unused {unused}"
    elif kind == "bpe":
        from bertforge.tokenization.bpe import LEADING_SPECIALS
        reserved, what = 256 + len(LEADING_SPECIALS) + 1, f"256 byte symbols and {len(LEADING_SPECIALS) + 1} special tokens"
    else:
        reserved, what = 5, "5 special tokens"
    if size <= reserved:
        raise ValueError(f"--vocab-size {size} leaves no room for learned pieces after the {reserved} reserved ids "
                         f"of --type {kind} ({what}); give more than {reserved}")


def run(args: argparse.Namespace) -> int:
    from bertforge.data.identity import check_input_content, record_input_content
    from bertforge.outputs import fresh_output
    from bertforge.tokenization import load_tokenizer
    size = args.vocab_size if args.vocab_size is not None else DEFAULT_SIZES[args.kind]
    check_size(args.kind, size, args.unused)
    casing = "cased" if args.cased or args.kind == "bpe" else "uncased"
    settings = {"input": [str(p) for p in args.input], "kind": args.kind, "vocab_size": size, "cased": args.cased,
                "min_frequency": args.min_frequency, "unused": args.unused, "skip_bad_lines": args.skip_bad_lines}
    content = check_input_content(args.output, "vocab", args.input, args.overwrite)
    with fresh_output(args.output, verb="vocab", overwrite=args.overwrite, settings=settings,
                      inputs=args.input) as output:
        record_input_content(output, content)
        if args.kind == "bpe":
            from bertforge.tokenization.bpe import train_bpe
            out = train_bpe(args.input, output, vocab_size=size, min_frequency=args.min_frequency,
                            skip_bad_lines=args.skip_bad_lines, show_progress=not args.no_progress)
        elif args.kind == "sentencepiece":
            from bertforge.tokenization.sentencepiece import train_sentencepiece
            out = train_sentencepiece(args.input, output, vocab_size=size, do_lower_case=not args.cased,
                                      keep_accents=args.cased, skip_bad_lines=args.skip_bad_lines,
                                      show_progress=not args.no_progress)
        else:
            from bertforge.tokenization import train_wordpiece
            out = train_wordpiece(args.input, output, vocab_size=size, lowercase=not args.cased,
                                  min_frequency=args.min_frequency, num_unused=args.unused,
                                  skip_bad_lines=args.skip_bad_lines, show_progress=not args.no_progress)
        tok = load_tokenizer(output)
    print(f"vocabulary: {tok.vocab_size} tokens ({args.kind}, {casing}) -> {out}")
    return 0
