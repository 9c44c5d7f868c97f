"""`bertforge prepare`: tokenize a corpus into memory-mapped shards for pre-training."""
from __future__ import annotations

import argparse
from pathlib import Path
import json

from bertforge.commands import add_common


def register(sub) -> None:
    p = sub.add_parser("prepare", help="tokenize a text corpus into pre-training shards",
                       description="Read documents (one sentence per line, or one paragraph per line; blank line "
                       "between documents), split sentences, tokenize in parallel and write memory-mapped shards "
                       "with a manifest.json (counts, vocab hash, sha256 per shard, bad lines).")
    p.add_argument("--input", nargs="+", required=True, metavar="FILE", help="text files or folders (.txt/.gz/.xz)")
    p.add_argument("--vocab", required=True, metavar="DIR", help="tokenizer folder: vocab.txt (WordPiece), vocab.json + merges.txt "
                   "(byte BPE) or spiece.model (SentencePiece)")
    p.add_argument("--output", required=True, metavar="DIR")
    p.add_argument("--max-seq-length", type=int, default=128)
    p.add_argument("--workers", type=int, default=None, help="tokenizer processes (default: all cores)")
    p.add_argument("--format", dest="input_format", default="auto", choices=["auto", "sentences", "paragraphs"])
    p.add_argument("--heldout-fraction", type=float, default=0.01, help="documents kept for evaluation")
    p.add_argument("--heldout-documents", type=int, default=None, help="exact number of held-out documents")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    add_common(p)
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from bertforge.data import prepare_corpus
    manifest = prepare_corpus(args.input, args.vocab, args.output, max_seq_length=args.max_seq_length,
                              workers=args.workers, input_format=args.input_format,
                              heldout_fraction=args.heldout_fraction, heldout_documents=args.heldout_documents,
                              show_progress=not args.no_progress)
    for source in manifest["inputs"]:
        if source["format_reason"] != "given":
            print(f"{Path(source['path']).name}: format '{source['format']}' ({source['format_reason']})")
    counts = manifest["counts"]
    print(f"prepared {counts['documents']:,} documents, {counts['tokens']:,} tokens ({counts['bytes_read'] / 1e6:.1f} MB "
          f"at {manifest['mb_per_second']:.2f} MB/s) -> {args.output}")
    bad = {k: v for k, v in (manifest.get("bad_lines") or {}).items() if v}
    print("repaired or skipped: " + (json.dumps(bad) if bad else "nothing"))
    print(f"manifest: {args.output}/manifest.json")
    return 0
