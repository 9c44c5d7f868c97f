"""A Longformer fine-tuning step on inputs shorter than its window: dense scores against the chunked band.

A long model fine-tuned on short examples (SQuAD paragraphs on a model lengthened to 4,096 tokens) sees grids no
longer than a few hundred tokens. Within three radii (1.5 windows) `Kernels.dense_short_windows` scores them as
one [length, length] grid; off, the banded path pads the queries to whole chunks of a radius and scores three
radii of keys for each. Both compute the same pattern: the script refuses to time them unless an eval forward
gives the same loss to 1e-5. The contenders are one model's weights in two copies, each with its kernels, taking
turns in one run (`common.interleave`), medians of `--repeats`: a question-answering step (the question's tokens
global, as Longformer's QA head sets them by default) of `--batch` rows of each length, forward with start and end
labels + backward.

    python benchmarks/bench_short_windows.py                      # MiniLM-sized, window 512, 128 .. 1,024 tokens
    python benchmarks/bench_short_windows.py --records docs/results
"""
from __future__ import annotations

import argparse
import copy
import dataclasses
import sys
from collections.abc import Callable, Sequence

from common import interleave, machine_info, markdown_table, median, start_process  # noqa: E402

GROUP = "bench-short-windows"
CONTENDERS = {"dense": "dense short windows (default)", "chunked": "chunked band"}
QUESTION = 16  # tokens of each row's question, global


def build_model(args: argparse.Namespace):
    """A randomly initialised LongformerForQuestionAnswering of the given shape, seeded."""
    import torch

    from bertforge import LongformerConfig, LongformerForQuestionAnswering
    torch.manual_seed(args.seed)
    config = LongformerConfig(vocab_size=args.vocab_size, hidden_size=args.hidden, num_hidden_layers=args.layers,
                              num_attention_heads=args.heads, intermediate_size=4 * args.hidden,
                              max_position_embeddings=max(args.lengths) + 2, attention_window=args.window)
    return LongformerForQuestionAnswering(config)


def make_batch(length: int, rows: int, vocab_size: int, seed: int) -> dict:
    """`rows` rows of `<s> question </s></s> context </s>`, `length` tokens each, with an answer span each."""
    import torch
    g = torch.Generator().manual_seed(seed + length)
    ids = torch.randint(4, vocab_size, (rows, length), generator=g)
    ids[:, 0], ids[:, QUESTION:QUESTION + 2], ids[:, -1] = 0, 2, 2
    start = torch.randint(QUESTION + 2, length - 1, (rows,), generator=g)
    return {"input_ids": ids, "attention_mask": torch.ones_like(ids), "start_positions": start,
            "end_positions": torch.minimum(start + 3, torch.full_like(start, length - 2))}


def contenders(model) -> dict[str, object]:
    """The model with dense short windows, and a copy with them off (the same weights)."""
    from bertforge.model.kernels import Kernels
    chunked = copy.deepcopy(model)
    chunked.set_kernels(dataclasses.replace(Kernels.fast(), dense_short_windows=False))
    return {"dense": model, "chunked": chunked}


def check_same_loss(models: dict[str, object], batch: dict, tol: float = 1e-5) -> float:
    import torch
    losses = []
    for model in models.values():
        model.eval()
        with torch.no_grad():
            losses.append(model(**batch).loss.item())
        model.train()
    diff = abs(losses[0] - losses[1])
    if not diff <= tol:
        raise SystemExit(f"bench_short_windows: the two paths give different losses (|diff| {diff:.2e} > {tol:g}); "
                         "not timing them")
    return diff


def make_step(model, batch: dict) -> Callable[[], None]:
    def step() -> None:
        model.zero_grad(set_to_none=True)
        model(**batch).loss.backward()
    return step


def summarise(times: dict[str, list[float]], lengths: Sequence[int]) -> dict[str, float]:
    """Median seconds per step of each contender at each length, and chunked / dense per length."""
    out: dict[str, float] = {}
    for n in lengths:
        for c in CONTENDERS:
            out[f"{c}/{n}/seconds"] = median(times[f"{c}@{n}"])
        out[f"speedup/{n}"] = out[f"chunked/{n}/seconds"] / out[f"dense/{n}/seconds"]
    return out


def table(lengths: Sequence[int], cell: Callable[[str], str]) -> tuple[list[str], list[list[str]]]:
    header = ["length", *(f"{label} s/step" for label in CONTENDERS.values()), "chunked / dense"]
    return header, [[f"{n:,}", *(cell(f"{c}/{n}/seconds") for c in CONTENDERS), cell(f"speedup/{n}")]
                    for n in lengths]


def make_records(summary: dict[str, float], times: dict[str, list[float]], shape: str, args, command: str) -> list:
    from bertforge.results_store import Record, this_machine, today
    records = []
    for key, value in summary.items():
        parts = key.split("/")
        if parts[0] == "speedup":
            what = (f"median seconds per step of the chunked band / dense short windows at {int(parts[1]):,} tokens "
                    f"({shape})")
            unit, digits, samples = "x", 2, None
        else:
            what = (f"seconds per step of {CONTENDERS[parts[0]]} at {int(parts[1]):,} tokens ({shape}), median of "
                    f"{args.repeats} interleaved repeats")
            unit, digits, samples = "s", 3, times[f"{parts[0]}@{parts[1]}"]
        records.append(Record(id=f"{GROUP}/{key}", value=float(value), unit=unit, what=what, command=command,
                              cpu=this_machine()[0], threads=args.threads, date=today(), seeds=args.repeats,
                              data="random token ids, seeded", digits=digits,
                              spread=(min(samples), max(samples)) if samples and len(samples) > 1 else None))
    return records


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--lengths", type=int, nargs="+", default=[128, 256, 384, 512, 768, 1024])
    p.add_argument("--window", type=int, default=512, help="attention_window (even)")
    p.add_argument("--layers", type=int, default=6)
    p.add_argument("--hidden", type=int, default=384)
    p.add_argument("--heads", type=int, default=12)
    p.add_argument("--vocab-size", type=int, default=30522)
    p.add_argument("--batch", type=int, default=4, help="rows per step")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--records", default=None, metavar="DIR", help="also write the results-store records into DIR")
    args = p.parse_args(argv)
    if min(args.lengths) <= QUESTION + 4:
        p.error(f"--lengths must all be above {QUESTION + 4} (a {QUESTION}-token question, separators and a span)")
    if args.window < 2 or args.window % 2:
        p.error(f"--window must be even and at least 2, got {args.window}")
    return args


def main(argv: Sequence[str] | None = None) -> dict[str, float]:
    args = parse_args(argv)
    start_process(args.threads)
    models = contenders(build_model(args))
    batches = {n: make_batch(n, args.batch, args.vocab_size, args.seed) for n in args.lengths}
    for n in args.lengths:
        check_same_loss(models, batches[n])
    steps = {f"{c}@{n}": make_step(models[c], batches[n]) for n in args.lengths for c in CONTENDERS}
    times = interleave(steps, repeats=args.repeats, log=print)
    summary = summarise(times, args.lengths)
    shape = (f"LongformerForQuestionAnswering, {args.layers} layers, hidden {args.hidden}, {args.heads} heads, window "
             f"{args.window}, {args.batch} rows of {QUESTION} global question tokens, forward + backward, "
             f"{args.threads} thread(s)")
    print(markdown_table(*table(args.lengths, lambda k: (f"{summary[k]:.2f}x" if k.startswith("speedup")
                                                         else f"{summary[k]:.3f}"))))
    print(f"\n{shape}; medians of {args.repeats} interleaved repeats; "
          + ", ".join(f"{k} {v}" for k, v in machine_info().items()))
    if args.records:
        from bertforge.measuring import portable_command
        from bertforge.results_store import write_records
        command = portable_command("benchmarks/bench_short_windows.py", list(sys.argv[1:] if argv is None else argv))
        header, rows = table(args.lengths, lambda k: f"{{{GROUP}/{k}}}")
        print(write_records(GROUP, make_records(summary, times, shape, args, command), args.records,
                            tables={GROUP: {"header": header, "rows": rows}}))
    return summary


if __name__ == "__main__":
    main()
