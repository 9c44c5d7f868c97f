"""`bertforge prepare`: tokenize a corpus into memory-mapped shards for pre-training."""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from bertforge.commands import add_common
from bertforge.commands.flags import add_settings_arguments, settings_from_args


def register(sub) -> None:
    from bertforge.data.corpus import MAX_DAMAGED_SHARE
    from bertforge.data.prepare_settings import PrepareSettings
    p = sub.add_parser("prepare", help="tokenize a corpus (text, JSONL, CSV, Parquet, Arrow) into pre-training shards",
                       description="Read documents (text files: one sentence or one paragraph per line, blank line "
                       "between documents; record files: one document per row, or per run of rows with the same "
                       "--document-column), split sentences, tokenize in parallel and write memory-mapped shards "
                       "with a manifest.json (counts, vocab hash, sha256 per shard, bad lines). Undecodable bytes "
                       "and control characters are repaired and counted; an input in which more than "
                       f"{MAX_DAMAGED_SHARE:.0%} of the non-blank lines are damage is refused. The shards are the "
                       "same for any --workers; an interrupted run given the same command again continues from "
                       "its last finished shard.")
    add_settings_arguments(p, PrepareSettings)
    add_common(p)
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from bertforge.data.prepare import prepare
    from bertforge.data.prepare_settings import PrepareSettings
    manifest = prepare(settings_from_args(PrepareSettings, args))
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
