"""`bertforge prepare`: tokenize a corpus into memory-mapped shards for pre-training."""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from bertforge.commands import add_common
from bertforge.commands.options import (add_output_arguments, existing_dir, path_or_glob, probability)
from bertforge.commands.options import at_most, non_negative_int, positive_int
from bertforge.settings import MAX_LENGTH, MAX_SAMPLES


def register(sub) -> None:
    from bertforge.data.corpus import MAX_DAMAGED_SHARE
    p = sub.add_parser("prepare", help="tokenize a corpus (text, JSONL, CSV, Parquet, Arrow) into pre-training shards",
                       description="Read documents (text files: one sentence or one paragraph per line, blank line "
                       "between documents; record files: one document per row, or per run of rows with the same "
                       "--document-column), split sentences, tokenize in parallel and write memory-mapped shards "
                       "with a manifest.json (counts, vocab hash, sha256 per shard, bad lines). Undecodable bytes "
                       "and control characters are repaired and counted; an input in which more than "
                       f"{MAX_DAMAGED_SHARE:.0%} of the non-blank lines are damage is refused. The shards are the "
                       "same for any --workers; an interrupted run given the same command again continues from "
                       "its last finished shard.")
    p.add_argument("--input", nargs="+", required=True, metavar="PATH", type=path_or_glob,
                   help="files, folders or glob patterns (quoted): text (.txt/.gz/.xz/.bz2), JSON Lines (.jsonl), "
                   ".csv/.tsv, .parquet, .arrow, or a `datasets` save_to_disk folder")
    p.add_argument("--text-column", default="text", metavar="NAME",
                   help="the field holding the text in JSONL/CSV/TSV/Parquet/Arrow inputs")
    p.add_argument("--document-column", default=None, metavar="NAME",
                   help="a document id field: consecutive rows with the same id are one document (default: each "
                   "row is one)")
    p.add_argument("--skip-bad-rows", action="store_true",
                   help="skip and count rows with a missing or non-string text instead of stopping at the first")
    p.add_argument("--vocab", required=True, type=existing_dir, metavar="DIR",
                   help="tokenizer folder: vocab.txt (WordPiece), vocab.json + merges.txt (byte BPE), spiece.model "
                   "(SentencePiece) or a transformers tokenizer.json")
    add_output_arguments(p, help="folder for the shards (new or empty, unless --overwrite)")
    p.add_argument("--max-seq-length", type=at_most(positive_int, MAX_LENGTH), default=128,
                   help="tokens per pre-training example, [CLS] and [SEP] included")
    p.add_argument("--workers", type=at_most(non_negative_int, 1_024), default=None,
                   help="tokenizer processes (default: all cores; 0: tokenize in this process)")
    p.add_argument("--format", dest="input_format", default="auto", choices=["auto", "sentences", "paragraphs"],
                   help="what a line of the corpus holds: one sentence, or a paragraph to split into sentences "
                   "(auto: decided from a sample of the lines)")
    p.add_argument("--heldout-fraction", type=probability, default=0.01, help="documents kept for evaluation")
    p.add_argument("--heldout-documents", type=at_most(non_negative_int, MAX_SAMPLES), default=None,
                   help="exact number of held-out documents")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    add_common(p)
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from bertforge.data import prepare_corpus
    from bertforge.data.records import expand_inputs
    from bertforge.data.identity import check_input_content, record_input_content
    from bertforge.outputs import fresh_output
    for path in map(Path, args.input):
        if path.is_dir() and (path / "manifest.json").is_file():
            raise ValueError(f"--input {path} is a folder written by `bertforge prepare` (it has manifest.json): "
                             "give it to `bertforge pretrain --data`; prepare reads raw text files")
    settings = {"input": [str(p) for p in args.input], "vocab": str(args.vocab),
                "max_seq_length": args.max_seq_length, "input_format": args.input_format,
                "heldout_fraction": args.heldout_fraction, "heldout_documents": args.heldout_documents,
                "text_column": args.text_column, "document_column": args.document_column,
                "skip_bad_rows": args.skip_bad_rows}
    # every input resolved (globs expanded, folders walked) before OUTPUT is claimed: --overwrite must not empty
    # a file a pattern matches
    inputs = (*[p for p in map(Path, args.input) if p.exists()], *[p for p, _ in expand_inputs(args.input)], args.vocab)
    content = check_input_content(args.output, "prepare", inputs, args.overwrite)
    with fresh_output(args.output, verb="prepare", overwrite=args.overwrite, settings=settings,
                      inputs=inputs) as output:
        record_input_content(output, content)
        manifest = prepare_corpus(args.input, args.vocab, output, max_seq_length=args.max_seq_length,
                                  workers=args.workers, input_format=args.input_format,
                                  heldout_fraction=args.heldout_fraction, heldout_documents=args.heldout_documents,
                                  show_progress=not args.no_progress, text_column=args.text_column,
                                  document_column=args.document_column, skip_bad_rows=args.skip_bad_rows,
                                  resume=not args.overwrite)
    if manifest["resumed_after_chunks"]:
        print(f"continued an interrupted run after {manifest['resumed_after_chunks']:,} chunks")
    for source in manifest["inputs"]:
        if source["format_reason"] != "given":
            print(f"{Path(source['path']).name}: format '{source['format']}' ({source['format_reason']})")
    counts = manifest["counts"]
    print(f"prepared {counts['documents']:,} documents, {counts['tokens']:,} tokens ({counts['bytes_read'] / 1e6:.1f} MB "
          f"at {manifest['mb_per_second']:.2f} MB/s) -> {args.output}")
    bad = {k: v for k, v in (manifest.get("bad_lines") or {}).items() if v}
    print("repaired or skipped: " + (json.dumps(bad) if bad else "nothing"))
    if manifest["bad_row_samples"]:
        print(f"first bad row skipped: {manifest['bad_row_samples'][0]}")
    damaged = manifest.get("damaged_lines") or {}
    if damaged.get("count"):
        print(f"damaged lines: {damaged['count']:,} of {damaged['of']:,} non-blank lines "
              f"({damaged['emptied']:,} with nothing left after cleaning)")
    print(f"manifest: {args.output}/manifest.json")
    return 0
