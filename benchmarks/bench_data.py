"""Throughput of the pre-training data path: `prepare` MB/s, then examples/s served per objective.

The data path must never be what a training step waits for, so next to examples/s this prints what one
training step of a `mini` BERT (4 layers, hidden 256) consumes on this machine, and the ratio.

    python benchmarks/bench_data.py --input ../shared/data/corpus/wikipedia-en-2018/wiki_en.txt.xz \\
        --vocab VOCAB_DIR [--max-mb 57] [--workers 2] [--data PREPARED_DIR] [--model-step]
"""
from __future__ import annotations

import argparse
import itertools
import tempfile
import time
from pathlib import Path

CONFIGS = [  # (label, objective, packing, masking keyword arguments)
    ("mlm+nsp (BERT, dynamic)", "mlm+nsp", "full-sentences", {}),
    ("mlm+nsp (BERT, static x10)", "mlm+nsp", "full-sentences", {"mode": "static"}),
    ("mlm+nsp whole-word", "mlm+nsp", "full-sentences", {"whole_word": True}),
    ("mlm+sop (ALBERT)", "mlm+sop", "full-sentences", {}),
    ("mlm full-sentences (RoBERTa)", "mlm", "full-sentences", {}),
    ("mlm doc-sentences", "mlm", "doc-sentences", {}),
    ("ltr", "ltr", "full-sentences", {}),
]


def slice_corpus(source: Path, max_mb: float, target: Path) -> Path:
    """The first whole documents of `source` up to `max_mb` MB of text, as a plain file."""
    from bertforge.data.corpus import iter_raw_documents, read_lines
    budget = int(max_mb * 1e6)
    lines = read_lines(source)
    with open(target, "w", encoding="utf-8", errors="surrogateescape") as out:
        for doc, nbytes in iter_raw_documents(lines):
            if budget <= 0:
                break
            out.write("\n".join(doc) + "\n\n")
            budget -= nbytes
    lines.close()
    return target


def bench_prepare(args: argparse.Namespace, tokenizer, workdir: Path) -> Path:
    from bertforge.data import prepare_corpus
    source = Path(args.input)
    if args.max_mb:
        source = slice_corpus(source, args.max_mb, workdir / "slice.txt")
    out = workdir / "prepared"
    manifest = prepare_corpus([source], tokenizer, out, workers=args.workers, show_progress=False,
                              max_seq_length=args.max_seq_length)
    c = manifest["counts"]
    print(f"prepare: {c['bytes_read'] / 1e6:.1f} MB, {c['documents']:,} documents, {c['tokens']:,} tokens in "
          f"{manifest['seconds']:.1f} s with {args.workers} workers -> {manifest['mb_per_second']:.2f} MB/s")
    return out


def bench_dataset(data: Path, tokenizer, args: argparse.Namespace) -> None:
    from bertforge.data import MaskingConfig, PretrainingDataset
    print(f"serving batches of {args.batch_size} x <= {args.max_seq_length} tokens, {args.batches} batches each:")
    for label, objective, packing, masking in CONFIGS:
        started = time.perf_counter()
        ds = PretrainingDataset(data, tokenizer, objective=objective, packing=packing, batch_size=args.batch_size,
                                max_seq_length=args.max_seq_length, masking=MaskingConfig(**masking))
        len(ds)  # builds the epoch's plan
        setup = time.perf_counter() - started
        stream = itertools.chain.from_iterable(itertools.repeat(ds))
        next(stream)
        started = time.perf_counter()
        examples = tokens = 0
        for batch in itertools.islice(stream, args.batches):
            examples += len(batch["input_ids"])
            tokens += int(batch["attention_mask"].sum())
        elapsed = time.perf_counter() - started
        print(f"  {label:30s} {examples / elapsed:9,.0f} examples/s  {tokens / elapsed / 1e6:5.2f} M tokens/s  "
              f"(plan {setup:.2f} s)")


def bench_model_step(args: argparse.Namespace, data: Path, tokenizer) -> None:
    import torch
    from bertforge import BertConfig, BertForPreTraining
    from bertforge.data import PretrainingDataset
    model = BertForPreTraining(BertConfig.preset("mini", vocab_size=len(tokenizer.vocab)))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    ds = PretrainingDataset(data, tokenizer, objective="mlm+nsp", batch_size=args.batch_size,
                            max_seq_length=args.max_seq_length)
    batches = list(itertools.islice(iter(ds), 6))
    for i, batch in enumerate(batches):
        if i == 1:
            started = time.perf_counter()
        loss = model(**batch).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    per_step = (time.perf_counter() - started) / (len(batches) - 1)
    print(f"mini BERT training step ({torch.get_num_threads()} threads): {per_step * 1000:.0f} ms per batch of "
          f"{args.batch_size} -> consumes {args.batch_size / per_step:,.0f} examples/s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--vocab", required=True, help="folder with vocab.txt")
    parser.add_argument("--input", help="raw corpus to prepare (plain, .gz or .xz)")
    parser.add_argument("--data", help="an already prepared corpus (skips the prepare benchmark)")
    parser.add_argument("--max-mb", type=float, default=0, help="prepare only the first MB of text (0 = all)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--batches", type=int, default=100)
    parser.add_argument("--max-seq-length", type=int, default=128)
    parser.add_argument("--model-step", action="store_true", help="also time a mini BERT training step")
    args = parser.parse_args()
    if not args.input and not args.data:
        parser.error("give --input (to prepare) or --data (already prepared)")

    from bertforge.data.shards import load_tokenizer
    tokenizer = load_tokenizer(args.vocab)
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(args.data) if args.data else bench_prepare(args, tokenizer, Path(tmp))
        bench_dataset(data, tokenizer, args)
        if args.model_step:
            bench_model_step(args, data, tokenizer)


if __name__ == "__main__":
    main()
