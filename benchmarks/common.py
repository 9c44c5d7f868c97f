"""Shared helpers for the benchmark scripts: interleaved timing, a same-run GEMM peak, fair contenders, tables.

On a shared machine absolute times drift by tens of percent from minute to minute; what survives is a
ratio measured with both contenders taking turns. `interleave` runs every candidate once per repeat (in
an order that rotates between repeats) so drift hits all of them alike, and reports medians; it and the other
helpers the experiments share live in `bertforge.measuring`, re-exported here.

Fairness is defined here once for every script that races bertforge against `transformers`: both sides
train with the same optimizer (`same_optimizer`), start from one state dict (saved by bertforge, loaded by
`transformers`, checked by `assert_same_start`), and utilisation is measured against one GEMM peak
(`PEAK_GEMM`, `peak_gemm`, `peak_flops`).
"""
from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from bertforge.measuring import (REPO, corpus_slice, cpu_model, default_shared_data, interleave,  # noqa: F401
                                 machine_info, markdown_table, median, minilm_folder, start_process)


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
    from bertforge.checkpoint import SAFE_WEIGHTS
    from bertforge.model import BertForPreTraining
    if not (folder / SAFE_WEIGHTS).exists():
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


