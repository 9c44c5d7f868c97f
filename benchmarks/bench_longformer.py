"""A whole Longformer training step as the input grows: bertforge (banded), bertforge (dense), transformers.

Issue 45's scaling goal. A `mini` `LongformerForMaskedLM` (4 layers, hidden 256, window `--window`, [CLS]
global), batch 1, one step = forward with MLM labels on 15 % of the positions + backward (+ AdamW with
`--optimizer`, `common.same_optimizer` for all three), at each of `--lengths`. The contenders:

  banded        bertforge's default kernels: the window computed chunk by chunk (`model/sliding_window.py`);
  dense         the same kernels but `banded_attention=False`: the same pattern as one [length, length] mask,
                so the difference between the two is the attention alone;
  transformers  `transformers.LongformerForMaskedLM` loaded from the folder bertforge saved (same weights). The
                script refuses to time it unless an eval forward of both gives the same loss to 1e-4.

Time: every (contender, length) takes turns in one run (`common.interleave`), medians of `--repeats`. Peak
memory: each (contender, length) once in a fresh process, as the highest growth of its resident set during one
step over what loading the model and a warm-up step on 16 tokens left (gradients, optimizer state), sampled every
millisecond: the step's activations. Linux only (/proc). Growth from `--growth A B` (time and memory at B / at A;
linear in the length would be B/A) and the ratio transformers / bertforge at B go to the table, the plot
(`--plot`) and the results store (`--records`).

    python benchmarks/bench_longformer.py                                   # 512 .. 8192, 5 repeats
    python benchmarks/bench_longformer.py --lengths 256 512 --growth 256 512 --repeats 1 --records none
"""
from __future__ import annotations

import argparse
import dataclasses
import multiprocessing
import shlex
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from common import (interleave, machine_info, markdown_table, median, peak_resident_growth, same_optimizer,  # noqa: E402
                    start_process)

CONTENDERS = ("banded", "dense", "transformers")
LABELS = {"banded": "bertforge", "dense": "bertforge dense", "transformers": "transformers"}
GROUP = "bench-longformer"
DATA = "random token ids, batch 1"
MASKED = 0.15


@dataclasses.dataclass(frozen=True)
class Setup:
    """What every contender of one run shares: the saved weights and the step's shape."""
    folder: Path
    vocab_size: int
    optimizer_lr: float | None = None  # None: forward + backward only
    seed: int = 0


def build_config(max_length: int, window: int = 256, vocab_size: int = 30522, preset: str = "mini",
                 **overrides: Any):
    """The `preset` Longformer with `window` and room for `max_length` tokens (at least allenai's 8,194
    positions, so every length of a run uses one position table)."""
    from bertforge import LongformerConfig
    return LongformerConfig.preset(preset, attention_window=window, vocab_size=vocab_size,
                                   max_position_embeddings=max(8194, max_length + 2), **overrides)


def save_weights(config, folder: Path, seed: int = 0) -> Path:
    """A freshly initialised bertforge `LongformerForMaskedLM` saved in the HF layout: what every contender loads."""
    import torch
    from bertforge import LongformerForMaskedLM
    torch.manual_seed(seed)
    LongformerForMaskedLM(config).save_pretrained(folder)
    return folder


def make_batch(length: int, vocab_size: int, seed: int = 0) -> dict:
    """Batch 1 of random token ids (never the special ids 0-2), [CLS] global, labels on 15 % of positions."""
    import torch
    generator = torch.Generator().manual_seed(seed + length)
    ids = torch.randint(3, vocab_size, (1, length), generator=generator)
    ids[0, 0] = 0
    labels = torch.full_like(ids, -100)
    picked = torch.randperm(length - 1, generator=generator)[:max(1, round(MASKED * length))] + 1
    labels[0, picked] = ids[0, picked]
    globals_ = torch.zeros_like(ids)
    globals_[0, 0] = 1
    return {"input_ids": ids, "attention_mask": torch.ones_like(ids), "global_attention_mask": globals_,
            "labels": labels}


def load(contender: str, folder: Path):
    """The contender's model from `folder`, in training mode."""
    if contender == "transformers":
        import transformers
        return transformers.LongformerForMaskedLM.from_pretrained(folder).train()
    from bertforge import LongformerForMaskedLM
    from bertforge.model.kernels import Kernels
    if contender not in ("banded", "dense"):
        raise SystemExit(f"unknown contender {contender!r}; choose from {', '.join(CONTENDERS)}")
    model = LongformerForMaskedLM.from_pretrained(folder)
    model.set_kernels(dataclasses.replace(Kernels.fast(), banded_attention=contender == "banded"))
    return model.train()


def one_step(model, batch: dict, optimizer=None):
    """One training step; returns the (detached) loss. The gradients stay on the model until the next step."""
    model.zero_grad(set_to_none=True)
    loss = model(**batch).loss
    loss.backward()
    if optimizer is not None:
        optimizer.step()
    return loss.detach()


def make_step(model, batch: dict, optimizer=None) -> Callable[[], None]:
    """An `interleave` candidate: one step, timed by the wall clock (it returns None)."""
    def step() -> None:
        one_step(model, batch, optimizer)
    return step


def gradient_norm(model) -> float:
    import torch
    return torch.linalg.vector_norm(torch.stack([p.grad.norm() for p in model.parameters()
                                                 if p.grad is not None])).item()


def check_same_start(ours, theirs, batch: dict, tol: float = 1e-4) -> float:
    """Refuse to time transformers unless it holds bertforge's tensors and an eval forward of both on `batch`
    gives the same loss to `tol`; returns |loss difference|."""
    import torch
    from bertforge.checkpoint import internal_to_hf_state_dict
    mine, other = internal_to_hf_state_dict(ours), theirs.state_dict()
    missing = sorted(set(mine) - set(other))
    differ = [k for k in mine if k in other and not torch.equal(mine[k], other[k])]
    if missing or differ:
        raise SystemExit(f"bench_longformer: the two models do not start from the same weights "
                         f"(missing in transformers: {missing[:3]}, different: {differ[:3]})")
    modes = ours.training, theirs.training
    ours.eval(), theirs.eval()
    with torch.no_grad():
        diff = abs(ours(**batch).loss.item() - theirs(**batch).loss.item())
    ours.train(modes[0]), theirs.train(modes[1])
    if not diff <= tol:
        raise SystemExit(f"bench_longformer: bertforge and transformers give different losses before timing "
                         f"(|diff| {diff:.2e} > {tol:g}); not timing them")
    return diff


def build_candidates(setup: Setup, lengths: Sequence[int], contenders: Sequence[str],
                     caps: dict[str, int]) -> dict[str, Callable[[], None]]:
    """`{"<contender>@<length>": step}` for every contender at every length up to its cap; transformers is
    checked against bertforge first (`check_same_start`)."""
    models = {c: load(c, setup.folder) for c in contenders}
    if "transformers" in models:
        reference = models["banded"] if "banded" in models else load("banded", setup.folder)
        check_same_start(reference, models["transformers"], make_batch(min(lengths), setup.vocab_size, setup.seed))
    optimizers = {c: same_optimizer(m, setup.optimizer_lr) if setup.optimizer_lr else None for c, m in models.items()}
    return {f"{c}@{n}": make_step(models[c], make_batch(n, setup.vocab_size, setup.seed), optimizers[c])
            for n in lengths for c in contenders if n <= caps.get(c, n)}


def _peak_growth(args: tuple) -> float:
    """MB the resident set grows by at its highest during one step in this (fresh) process, over what a warm-up
    step on 16 tokens left (gradients, optimizer state, lazy initialisation): the step's activations."""
    import torch
    contender, length, setup, threads = args
    torch.set_num_threads(threads)
    model = load(contender, setup.folder)
    batch = make_batch(length, setup.vocab_size, setup.seed)
    optimizer = same_optimizer(model, setup.optimizer_lr) if setup.optimizer_lr else None
    one_step(model, make_batch(min(length, 16), setup.vocab_size, setup.seed), optimizer)  # one-time costs
    return peak_resident_growth(lambda: one_step(model, batch, optimizer)) / 1e6


def peak_memory(contender: str, length: int, setup: Setup, threads: int) -> float:
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        return pool.apply(_peak_growth, ((contender, length, setup, threads),))


def _ratio(table: dict, top: tuple, bottom: tuple) -> float | None:
    return table[top] / table[bottom] if top in table and bottom in table and table[bottom] > 0 else None


def summarise(times: dict[str, list[float]], memory: dict[tuple[str, int], float], growth: tuple[int, int],
              ) -> dict[str, float]:
    """Per-length medians and peaks, growth from growth[0] to growth[1] tokens per contender (time and memory),
    and transformers / bertforge at growth[1]: {id without the group: value}."""
    seconds = {(c, int(n)): median(v) for key, v in times.items() for c, n in [key.split("@")]}
    out = {f"{c}/{n}/seconds": s for (c, n), s in seconds.items()}
    out.update({f"{c}/{n}/peak-mb": mb for (c, n), mb in memory.items()})
    low, high = growth
    for c in CONTENDERS:
        for prefix, table in (("growth", seconds), ("memory-growth", memory)):
            value = _ratio(table, (c, high), (c, low))
            if value is not None:
                out[f"{prefix}-{low}-{high}/{c}"] = value
    versus = _ratio(seconds, ("transformers", high), ("banded", high))
    if versus is not None:
        out[f"vs-transformers-{high}"] = versus
    return out


def result_table(summary: dict[str, float], lengths: Sequence[int], growth: tuple[int, int]) -> tuple[list, list]:
    """(header, rows) of the printed table: per length, each contender's seconds per step and peak MB."""
    header = ["length"] + [f"{LABELS[c]} s/step" for c in CONTENDERS] + [f"{LABELS[c]} peak MB" for c in CONTENDERS]
    rows: list[list[str]] = []
    for n in lengths:
        rows.append([f"{n:,}"] + [_cell(summary, f"{c}/{n}/seconds", "{:.3f}") for c in CONTENDERS]
                    + [_cell(summary, f"{c}/{n}/peak-mb", "{:,.0f}") for c in CONTENDERS])
    low, high = growth
    rows.append([f"growth {low:,} -> {high:,}"] + [_cell(summary, f"growth-{low}-{high}/{c}", "{:.2f}x")
                                                   for c in CONTENDERS]
                + [_cell(summary, f"memory-growth-{low}-{high}/{c}", "{:.2f}x") for c in CONTENDERS])
    return header, rows


def _cell(summary: dict[str, float], key: str, form: str) -> str:
    return form.format(summary[key]) if key in summary else "-"


def table_spec(summary: dict[str, float], lengths: Sequence[int], growth: tuple[int, int]) -> dict:
    """The store's table "bench-longformer": the printed table with every number a citation of its record."""
    header, rows = result_table(summary, lengths, growth)
    spec_rows = []
    for row, n in zip(rows, [*lengths, None]):
        keys = ([f"{c}/{n}/seconds" for c in CONTENDERS] + [f"{c}/{n}/peak-mb" for c in CONTENDERS] if n else
                [f"growth-{growth[0]}-{growth[1]}/{c}" for c in CONTENDERS]
                + [f"memory-growth-{growth[0]}-{growth[1]}/{c}" for c in CONTENDERS])
        spec_rows.append([row[0]] + [f"{{{GROUP}/{k}}}" if k in summary else "-" for k in keys])
    return {GROUP: {"header": header, "rows": spec_rows}}


def _what(key: str, shape: str, repeats: int) -> tuple[str, str, int]:
    """(what, unit, digits) of the record `key` (an id without the group)."""
    parts = key.split("/")
    if parts[0].startswith(("growth-", "memory-growth-")):
        low, high = parts[0].split("-")[-2:]
        kind = "peak memory" if parts[0].startswith("memory") else "median seconds per step"
        return (f"{kind} of {LABELS[parts[1]]} at {int(high):,} tokens / at {int(low):,} ({shape}; linear would "
                f"be {int(high) / int(low):g}x)", "x", 2)
    if parts[0].startswith("vs-transformers-"):
        n = int(parts[0].rsplit("-", 1)[1])
        return (f"median seconds per step of transformers' LongformerForMaskedLM / bertforge's (banded) at {n:,} "
                f"tokens ({shape}; same weights, interleaved, {repeats} repeats)", "x", 2)
    contender, n, metric = parts
    if metric == "seconds":
        return (f"seconds per step of {LABELS[contender]} at {int(n):,} tokens ({shape}), median of {repeats} "
                "interleaved repeats", "s", 3)
    return (f"peak resident-set growth during one step of {LABELS[contender]} at {int(n):,} tokens ({shape}), "
            "fresh process", "MB", 0)


def make_records(summary: dict[str, float], times: dict[str, list[float]], shape: str, repeats: int,
                 threads: int, command: str) -> list:
    """One `Record` per summary entry: seconds carry the repeats' [min, max] as their spread."""
    from bertforge.results_store import Record, this_machine, today
    cpu = this_machine()[0]
    records = []
    for key, value in summary.items():
        what, unit, digits = _what(key, shape, repeats)
        parts = key.split("/")
        samples = times.get(f"{parts[0]}@{parts[1]}") if len(parts) == 3 and parts[2] == "seconds" else None
        records.append(Record(id=f"{GROUP}/{key}", value=float(value), unit=unit, what=what, command=command,
                              cpu=cpu, threads=threads, date=today(), seeds=repeats if unit != "MB" else 1,
                              data=DATA, digits=digits,
                              spread=(min(samples), max(samples)) if samples and len(samples) > 1 else None))
    return records


def plot(summary: dict[str, float], lengths: Sequence[int], path: Path, title: str) -> None:
    """Seconds per step and peak MB against the length, log-log, every contender."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.6))
    for ax, metric, label in ((axes[0], "seconds", "seconds per step"), (axes[1], "peak-mb", "peak MB (activations)")):
        for c in CONTENDERS:
            points = [(n, summary[f"{c}/{n}/{metric}"]) for n in lengths if f"{c}/{n}/{metric}" in summary]
            if points:
                ax.plot(*zip(*points), marker="o", markersize=3, label=LABELS[c])
            if c == "banded" and len(points) > 1:  # linear in the length, through bertforge's first point
                (n0, y0), n1 = points[0], points[-1][0]
                ax.plot([n0, n1], [y0, y0 * n1 / n0], color="grey", linestyle=":", linewidth=1, label="linear")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xticks(list(lengths), [f"{n:,}" for n in lengths])
        ax.tick_params(axis="x", which="minor", bottom=False, labelbottom=False)
        ax.set_xlabel("tokens (batch 1)")
        ax.set_ylabel(label)
        if ax.lines:
            ax.legend(fontsize=8)
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--lengths", type=int, nargs="+", default=[512, 1024, 2048, 4096, 8192])
    parser.add_argument("--window", type=int, default=256, help="attention_window (even)")
    parser.add_argument("--preset", default="mini", choices=("tiny", "mini", "small", "medium", "base", "large"))
    parser.add_argument("--vocab-size", type=int, default=30522)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--optimizer", action="store_true", help="add an AdamW step (common.same_optimizer)")
    parser.add_argument("--hf-max-length", type=int, default=4096, help="longest length transformers runs at")
    parser.add_argument("--dense-max-length", type=int, default=8192, help="longest length dense runs at")
    parser.add_argument("--growth", type=int, nargs=2, default=[512, 4096], metavar=("FROM", "TO"))
    parser.add_argument("--plot", default="docs/results/long-scaling.png", help="'none': no plot")
    parser.add_argument("--records", default="docs/results", help="results folder, or 'none'")
    parser.add_argument("--skip-memory", action="store_true", help="time only (no fresh-process peaks)")
    args = parser.parse_args(argv)
    if min(args.lengths) < 2:
        parser.error(f"--lengths must all be at least 2, got {min(args.lengths)}")
    if args.window < 2 or args.window % 2:
        parser.error(f"--window must be even and at least 2, got {args.window}")
    if args.repeats < 1 or args.threads < 1:
        parser.error("--repeats and --threads must be at least 1")
    return args


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    start_process(args.threads)
    caps = {"transformers": args.hf_max_length, "dense": args.dense_max_length}
    growth = (args.growth[0], args.growth[1])
    with tempfile.TemporaryDirectory() as tmp:
        config = build_config(max(args.lengths), args.window, args.vocab_size, args.preset)
        setup = Setup(save_weights(config, Path(tmp) / "weights"), args.vocab_size,
                      1e-4 if args.optimizer else None)
        candidates = build_candidates(setup, args.lengths, CONTENDERS, caps)
        times = interleave(candidates, repeats=args.repeats, log=print)
        runs = [(c, int(n)) for c, n in (key.split("@") for key in candidates)]
        memory = {} if args.skip_memory else {(c, n): peak_memory(c, n, setup, args.threads) for c, n in runs}
    summary = summarise(times, memory, growth)
    header, rows = result_table(summary, args.lengths, growth)
    step = "forward with MLM labels on 15 % + backward" + (" + AdamW" if args.optimizer else "")
    shape = (f"{args.preset} LongformerForMaskedLM, window {args.window}, [CLS] global, batch 1, {step}, "
             f"{args.threads} thread(s)")
    print(markdown_table(header, rows))
    print(f"\n{shape}; medians of {args.repeats} interleaved repeats; "
          + ", ".join(f"{k} {v}" for k, v in machine_info().items()))
    if args.plot != "none":
        plot(summary, args.lengths, Path(args.plot), shape)
    if args.records != "none":
        from bertforge.results_store import write_records
        given = sys.argv[1:] if argv is None else argv
        command = " ".join(["python", "benchmarks/bench_longformer.py", *(shlex.quote(arg) for arg in given)])
        records = make_records(summary, times, shape, args.repeats, args.threads, command)
        print(write_records(GROUP, records, args.records, tables=table_spec(summary, args.lengths, growth)))


if __name__ == "__main__":
    main()
