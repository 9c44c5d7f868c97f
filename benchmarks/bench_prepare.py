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
    for name in ("compare", "memory"):
        p = sub.add_parser(name)
        p.add_argument("--input", nargs="+" if name == "memory" else None, required=True)
        p.add_argument("--vocab", required=True, help="a tokenizer folder both sides can load (vocab.txt + "
                       "tokenizer.json, e.g. a MiniLM or BERT checkpoint)")
        p.add_argument("--workers", type=int, default=2)
        p.add_argument("--workdir", default=None, help="where temporary outputs go (default: the system's)")
        if name == "compare":
            p.add_argument("--repeats", type=int, default=3)
        else:
            p.add_argument("--max-seconds", type=float, default=None, help="kill each run after this long")
    args = parser.parse_args()
    compare(args) if args.mode == "compare" else memory(args)


if __name__ == "__main__":
    main()
