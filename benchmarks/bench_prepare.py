"""`bertforge prepare` against the transformers way, and its peak memory as the corpus grows.

compare: MB/s of `prepare_corpus` (read, clean, split sentences, tokenise, write shards) and of what
transformers' `run_mlm` does (`datasets.load_dataset("text")` then `Dataset.map` with the fast tokenizer,
batched, the same number of processes), on the same text file, interleaved, medians of `--repeats` rounds.
Each round starts from an empty `datasets` cache so neither side reads a previous result.

    python benchmarks/bench_prepare.py compare --input CORPUS.txt --vocab TOKENIZER_DIR --workers 2 --repeats 3

memory: peak memory of a `bertforge prepare` process and its workers, sampled every 0.5 s, once per input, to
show that it does not grow with the corpus. Memory is the sum of the processes' proportional set sizes (PSS):
forked workers share the parent's pages, and summing their RSS (also reported, as `ps` would add it up) counts
those once per process.
`--max-seconds` stops a run that long (SIGKILL, as a crash would) and reports how far it got by its last
checkpoint.

    python benchmarks/bench_prepare.py memory --vocab TOKENIZER_DIR --workers 2 --input SMALL.txt BIG.txt

workers: what a second worker gives: `prepare_corpus` with 1 worker and with 2 on each input, interleaved, medians
of `--repeats` rounds, and the CPU-seconds the main process and the workers spent (so a serial part in the main
process shows). `wikitext` writes a wikitext-shaped file from the shared Wikipedia text to compare shapes with:
every paragraph its own line between lines of one space, a heading line ` = Title = ` per article, so a
blank-line-separated document is one paragraph.

    python benchmarks/bench_prepare.py wikitext --input wiki.txt --output wikitext10.txt --mb 10
    python benchmarks/bench_prepare.py workers --vocab TOKENIZER_DIR --input wiki20.txt wikitext10.txt --repeats 3
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import interleave, machine_info, median  # noqa: E402


def run_bertforge(corpus: Path, vocab: str, workers: int, work: Path) -> float:
    from bertforge.data import prepare_corpus
    out = work / "bertforge"
    shutil.rmtree(out, ignore_errors=True)
    started = time.perf_counter()
    prepare_corpus([corpus], vocab, out, workers=workers, show_progress=False, heldout_fraction=0.0)
    return time.perf_counter() - started


def run_transformers(corpus: Path, vocab: str, workers: int, work: Path) -> float:
    """run_mlm's preprocessing: the text loader, then batched tokenisation with the fast tokenizer (the
    line_by_line=False path, whose grouping into blocks is left out: bertforge builds sequences at load time)."""
    import datasets
    from transformers import AutoTokenizer
    cache = work / "hf-cache"
    shutil.rmtree(cache, ignore_errors=True)
    datasets.disable_progress_bars()
    tokenizer = AutoTokenizer.from_pretrained(vocab, use_fast=True)
    started = time.perf_counter()
    raw = datasets.load_dataset("text", data_files={"train": str(corpus)}, cache_dir=str(cache))["train"]
    raw.map(lambda batch: tokenizer(batch["text"], return_special_tokens_mask=True), batched=True,
            num_proc=workers if workers > 1 else None, remove_columns=["text"], load_from_cache_file=False)
    return time.perf_counter() - started


def compare(args: argparse.Namespace) -> None:
    corpus = Path(args.input)
    mb = corpus.stat().st_size / 1e6
    with tempfile.TemporaryDirectory(dir=args.workdir) as tmp:
        times = interleave({"bertforge": lambda: run_bertforge(corpus, args.vocab, args.workers, Path(tmp)),
                            "transformers": lambda: run_transformers(corpus, args.vocab, args.workers, Path(tmp))},
                           repeats=args.repeats, warmup=0, log=lambda line: print(line, flush=True))
    medians = {name: median(t) for name, t in times.items()}
    print(", ".join(f"{k}: {v}" for k, v in machine_info().items()))
    print(f"{corpus.name}: {mb:.1f} MB, {args.workers} processes, medians of {args.repeats}:")
    for name, seconds in medians.items():
        print(f"  {name:>12}: {mb / seconds:8.4f} MB/s")
    paired = median([t / b for b, t in zip(times["bertforge"], times["transformers"])])
    print(f"  bertforge / transformers MB/s: {medians['transformers'] / medians['bertforge']:.2f}x of the medians, "
          f"{paired:.2f}x paired (median of the per-repeat ratios)")
    if args.records:
        write_compare_records(corpus, mb, medians, args)


def write_compare_records(corpus: Path, mb: float, medians: dict[str, float], args: argparse.Namespace) -> None:
    """This process count's row of the compare table: both sides' MB/s (medians) and their ratio."""
    from bertforge.results_store import Record, write_records
    command = (f"python benchmarks/bench_prepare.py compare --input {corpus.name} --vocab \"$MINILM\" --workers "
               f"{args.workers} --repeats {args.repeats}")
    data = f"{corpus.name}: {mb:.1f} MB ({args.shapes.get(corpus.name, 'text')})"
    base, what = f"bench-prepare/compare/{args.workers}", f"bench_prepare compare, {args.workers} processes"
    mbs = {name: mb / seconds for name, seconds in medians.items()}
    records = [Record.measured(f"{base}/bertforge-mb-s", mbs["bertforge"], "MB/s", f"{what}: bertforge MB/s", data,
                               seeds=args.repeats, command=command),
               Record.measured(f"{base}/transformers-way-mb-s", mbs["transformers"], "MB/s",
                               f"{what}: transformers' way MB/s", data, seeds=args.repeats, command=command),
               Record.measured(f"{base}/bertforge-transformers", mbs["bertforge"] / mbs["transformers"], "x",
                               f"{what}: bertforge MB/s / transformers' way MB/s", data, seeds=args.repeats,
                               command=command)]
    print(write_records("bench-prepare", records, args.records))


def run_timed(corpus: Path, vocab: str, workers: int, work: Path) -> tuple[float, float, float]:
    """(wall seconds, CPU-seconds of this process, CPU-seconds of its finished children) of one prepare."""
    import resource
    before = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    seconds = run_bertforge(corpus, vocab, workers, work)
    after = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = [a.ru_utime + a.ru_stime - b.ru_utime - b.ru_stime for a, b in zip(after, before)]
    return seconds, cpu[0], cpu[1]


def workers_ratio(args: argparse.Namespace) -> None:
    rows = []
    with tempfile.TemporaryDirectory(dir=args.workdir) as tmp:
        for corpus in map(Path, args.input):
            cpu: dict[str, list[tuple[float, float]]] = {"1": [], "2": []}

            def one(workers: int, corpus: Path = corpus, cpu: dict = cpu) -> float:
                seconds, main_cpu, worker_cpu = run_timed(corpus, args.vocab, workers, Path(tmp))
                cpu[str(workers)].append((main_cpu, worker_cpu))
                return seconds

            times = interleave({"1": lambda: one(1), "2": lambda: one(2)}, repeats=args.repeats, warmup=0,
                               log=lambda line: print(line, flush=True))
            ratios = [a / b for a, b in zip(times["1"], times["2"])]
            rows.append({"input": corpus, "mb": corpus.stat().st_size / 1e6, "times": times, "ratios": ratios,
                         "cpu": {w: (median([m for m, _ in c]), median([k for _, k in c])) for w, c in cpu.items()}})
    print(", ".join(f"{k}: {v}" for k, v in machine_info().items()))
    print(f"medians of {args.repeats} interleaved rounds:")
    for row in rows:
        mbs = {w: row["mb"] / median(t) for w, t in row["times"].items()}
        print(f"  {row['input'].name} ({row['mb']:.1f} MB): 1 worker {mbs['1']:.2f} MB/s, 2 workers {mbs['2']:.2f} "
              f"MB/s: {median(row['ratios']):.2f}x ({min(row['ratios']):.2f}-{max(row['ratios']):.2f}x over the "
              "rounds); CPU-s main process / workers: " + ", ".join(
                  f"{w} worker{'s' * (w != '1')} {m:.1f} / {k:.1f}" for w, (m, k) in row["cpu"].items()))
    if args.records:
        write_worker_records(rows, args)


def write_worker_records(rows: list[dict], args: argparse.Namespace) -> None:
    from bertforge.results_store import Record, write_records
    command = "python benchmarks/bench_prepare.py workers --vocab \"$MINILM\" --input " + " ".join(
        row["input"].name for row in rows) + f" --repeats {args.repeats}"
    records = []
    for row in rows:
        ratios = row["ratios"]
        (main1, work1), (main2, work2) = row["cpu"]["1"], row["cpu"]["2"]
        records.append(Record.measured(
            f"bench-prepare/two-workers/{row['input'].stem}", median(ratios), "x",
            f"MB/s of bertforge prepare with 2 workers over 1 worker, {row['input'].name}",
            f"{row['input'].name}: {row['mb']:.1f} MB ({args.shapes.get(row['input'].name, 'text')})",
            seeds=len(ratios), command=command, digits=2,
            spread=(min(ratios), max(ratios)) if len(ratios) > 1 else None,
            note=f"CPU-seconds main process / workers: 1 worker {main1:.1f} / {work1:.1f}, 2 workers {main2:.1f} / "
                 f"{work2:.1f}"))
    print(write_records("bench-prepare", records, args.records))


def write_wikitext(args: argparse.Namespace) -> None:
    """A wikitext-shaped file from a corpus of blank-line-separated articles (title line, then a paragraph per
    line): ` = Title = ` headings, every line between lines of one space, cut at `--mb` MB."""
    from bertforge.data.corpus import iter_raw_documents, read_lines
    limit, written = int(args.mb * 1e6), 0
    with open(args.output, "w", encoding="utf-8") as out:
        for lines, _ in iter_raw_documents(read_lines(args.input)):
            if not lines:
                continue
            block = f" \n = {lines[0].strip()} = \n \n" + "".join(f" {line.strip()} \n \n" for line in lines[1:])
            if written + len(block.encode()) > limit:
                break
            out.write(block)
            written += len(block.encode())
    print(f"wrote {args.output}: {written / 1e6:.1f} MB")


def tree_memory(pid: int) -> tuple[int, int, int, int]:
    """(sum of PSS, sum of RSS, RSS of the main process, bytes the main process has read) for a process and its
    descendants; zeros once it is gone."""
    import psutil
    try:
        root = psutil.Process(pid)
        procs = [root] + root.children(recursive=True)
        main_rss = root.memory_info().rss
        read = root.io_counters().read_chars
    except psutil.NoSuchProcess:
        return 0, 0, 0, 0
    pss = rss = 0
    for proc in procs:
        try:
            info = proc.memory_full_info()
        except psutil.NoSuchProcess:
            continue
        pss, rss = pss + info.pss, rss + info.rss
    return pss, rss, main_rss, read


def memory(args: argparse.Namespace) -> None:
    import json
    import signal
    for corpus in map(Path, args.input):
        out = Path(args.workdir or tempfile.gettempdir()) / f"bench-prepare-{corpus.stem}"
        command = [sys.executable, "-m", "bertforge", "prepare", "--input", str(corpus), "--vocab", args.vocab,
                   "--output", str(out), "--workers", str(args.workers), "--no-progress"]
        shutil.rmtree(out, ignore_errors=True)
        shutil.rmtree(out.with_name(f".{out.name}.partial"), ignore_errors=True)
        started = time.perf_counter()
        proc = subprocess.Popen(command, stdout=subprocess.PIPE, text=True, env={**os.environ}, start_new_session=True)
        peak_pss = peak_rss = peak_main = read = 0
        while proc.poll() is None:
            pss, rss, main_rss, now_read = tree_memory(proc.pid)
            peak_pss, peak_rss, peak_main = max(peak_pss, pss), max(peak_rss, rss), max(peak_main, main_rss)
            read = max(read, now_read)
            if args.max_seconds and time.perf_counter() - started > args.max_seconds:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                break
            time.sleep(0.5)
        seconds = time.perf_counter() - started
        output = proc.stdout.read() if proc.stdout else ""
        partial = out.with_name(f".{out.name}.partial")
        if proc.returncode == -signal.SIGKILL:
            state = partial / "prepare-state.json"
            done = json.loads(state.read_text())["bytes_read"] / 1e6 if state.is_file() else 0.0
            reached = (f"killed after {seconds:.0f} s, having read {read / 1e6:,.1f} MB (the input, the tokenizer, "
                       f"the shards' checkpoints); last checkpoint at {done:,.1f} MB of text")
        elif proc.returncode:
            raise SystemExit(f"{' '.join(command)} failed ({proc.returncode})")
        else:
            reached = next((line for line in output.splitlines() if line.startswith("prepared")), "")
        shutil.rmtree(out, ignore_errors=True)
        shutil.rmtree(partial, ignore_errors=True)
        print(f"{corpus.name}: {corpus.stat().st_size / 1e6:8.1f} MB on disk, peak memory of the process and its "
              f"{args.workers} workers {peak_pss / 2 ** 20:7.1f} MiB PSS, {peak_rss / 2 ** 20:7.1f} MiB RSS summed "
              f"(main process {peak_main / 2 ** 20:.1f} MiB RSS), {seconds:7.1f} s\n   {reached}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="mode", required=True)
    p = sub.add_parser("wikitext")
    p.add_argument("--input", required=True, help="the shared Wikipedia text, decompressed")
    p.add_argument("--output", required=True)
    p.add_argument("--mb", type=float, default=10.0)
    for name in ("compare", "memory", "workers"):
        p = sub.add_parser(name)
        p.add_argument("--input", nargs="+" if name != "compare" else None, required=True)
        p.add_argument("--vocab", required=True, help="a tokenizer folder both sides can load (vocab.txt + "
                       "tokenizer.json, e.g. a MiniLM or BERT checkpoint)")
        if name != "workers":
            p.add_argument("--workers", type=int, default=2)
        p.add_argument("--workdir", default=None, help="where temporary outputs go (default: the system's)")
        if name in ("workers", "compare"):
            p.add_argument("--records", default=None, help="write the results as records of this results store "
                           "(docs/results)")
        if name in ("compare", "workers"):
            p.add_argument("--repeats", type=int, default=3)
        else:
            p.add_argument("--max-seconds", type=float, default=None, help="kill each run after this long")
    args = parser.parse_args()
    args.shapes = {"wiki20.txt": "the shared Wikipedia's first 20 MB: documents of about 1.6 KB, a paragraph a line",
                   "wikitext10.txt": "wikitext-shaped: a paragraph per document between lines of one space, "
                                     "` = Title = ` headings"}
    {"compare": compare, "memory": memory, "workers": workers_ratio, "wikitext": write_wikitext}[args.mode](args)


if __name__ == "__main__":
    main()
