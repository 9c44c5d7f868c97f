"""Longformer's attention, banded against dense: time and peak memory of one layer's attention as the input grows.

Both paths compute the same function (`tests/model/test_longformer.py`, `test_big_bird.py`): the banded one chunk
by chunk (`Kernels.banded_attention`, the default), the dense one as SDPA under the [length, length] mask of the
same pattern (the reference kernels). One sequence, `--heads` x `--head-dim`; Longformer's pattern (a window of
`--window` tokens, global attention on `[CLS]`: forward + backward of `sliding_window_attention`, the global
projections included) or, with `--pattern bigbird`, BigBird's blocks (`block_sparse_attention`).

Time: the two paths take turns at every length in one run (`common.interleave`), medians of `--repeats`. Peak
memory: each (path, length) once in a fresh process of its own, as the highest growth of its resident set during
the step over what the set-up left (sampled every millisecond), so one measurement's allocations cannot hide
another's. Linux only (/proc).

    python benchmarks/bench_long_attention.py                      # 512 .. 4096, 5 repeats
    python benchmarks/bench_long_attention.py --lengths 256 512 --repeats 2   # a quick check
    python benchmarks/bench_long_attention.py --pattern bigbird --block 64 --random-blocks 3
"""
from __future__ import annotations

import argparse
import multiprocessing
from typing import Callable

from common import interleave, markdown_table, median, peak_resident_growth, start_process  # noqa: E402

PATHS = ("banded", "dense")


def make_step(path: str, length: int, heads: int, head_dim: int, window: int, pattern: str = "longformer",
              block: int = 64, random_blocks: int = 3) -> Callable[[], None]:
    """One forward + backward of the attention on a [1, length] grid, by `path`."""
    import torch
    from bertforge.model.kernels import Kernels
    from bertforge.model.packing import PackedBatch
    from bertforge.model.sliding_window import sliding_window_attention, sliding_window_pattern

    if pattern == "bigbird":
        return _bigbird_step(path, length, heads, head_dim, block, random_blocks)
    hidden = heads * head_dim
    attention = torch.nn.Module()
    attention.num_heads, attention.head_dim, attention.dropout_p = heads, head_dim, 0.0
    attention.kernels = Kernels(banded_attention=path == "banded")
    attention.query_global = torch.nn.Linear(hidden, hidden)
    attention.kv_global = torch.nn.Linear(hidden, 2 * hidden)
    batch = PackedBatch.from_mask(None, 1, length, torch.device("cpu"))
    flags = torch.zeros(length, dtype=torch.bool)
    flags[0] = True
    batch.global_tokens = flags
    batch.window = sliding_window_pattern(batch, window // 2)
    x = torch.randn(length, hidden, requires_grad=True)
    q, k, v = (torch.randn(heads, 1, length, head_dim, requires_grad=True) for _ in range(3))

    def step() -> None:
        ys = sliding_window_attention(attention, [(q, k, v)], x, batch)
        (ys[0].sum() + ys[1].sum()).backward()
    return step


def _bigbird_step(path: str, length: int, heads: int, head_dim: int, block: int,
                  random_blocks: int) -> Callable[[], None]:
    """BigBird's block-sparse attention (random blocks drawn as when training) or its dense mask."""
    import torch
    from bertforge.model.block_sparse import block_pattern, block_sparse_attention, dense_block_attention
    from bertforge.model.packing import PackedBatch

    batch = PackedBatch.from_mask(None, 1, length, torch.device("cpu"))
    layout = block_pattern(batch, block, random_blocks, heads, training=True)
    attend = block_sparse_attention if path == "banded" else dense_block_attention
    q, k, v = (torch.randn(heads, 1, layout.length, head_dim, requires_grad=True) for _ in range(3))

    def step() -> None:
        attend(q, k, v, layout).sum().backward()
    return step


def _peak_growth(args: tuple) -> float:
    """MiB the resident set grows by at its highest during one step, over what it was before (a fresh process)."""
    import torch
    torch.set_num_threads(args[-1])
    return peak_resident_growth(make_step(*args[:-1])) / 2 ** 20


def peak_memory(path: str, length: int, *shape_and_threads: object) -> float:
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        return pool.apply(_peak_growth, ((path, length, *shape_and_threads),))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--lengths", type=int, nargs="+", default=[512, 1024, 2048, 4096])
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--head-dim", type=int, default=64)
    parser.add_argument("--window", type=int, default=256)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--pattern", choices=("longformer", "bigbird"), default="longformer")
    parser.add_argument("--block", type=int, default=64, help="BigBird's block size")
    parser.add_argument("--random-blocks", type=int, default=3, help="BigBird's random blocks per query block")
    args = parser.parse_args()
    start_process(args.threads)
    shape = (args.heads, args.head_dim, args.window, args.pattern, args.block, args.random_blocks)
    candidates = {f"{path}@{n}": make_step(path, n, *shape) for n in args.lengths for path in PATHS}
    times = interleave(candidates, repeats=args.repeats)
    rows = []
    for n in args.lengths:
        t = {path: median(times[f"{path}@{n}"]) for path in PATHS}
        mem = {path: peak_memory(path, n, *shape, args.threads) for path in PATHS}
        rows.append([n, f"{t['banded'] * 1e3:.1f}", f"{t['dense'] * 1e3:.1f}", f"{t['dense'] / t['banded']:.2f}x",
                     f"{mem['banded']:.1f}", f"{mem['dense']:.1f}"])
    print(markdown_table(["length", "banded ms", "dense ms", "dense / banded", "banded peak MiB", "dense peak MiB"],
                         rows))
    layout = (f"window {args.window}, [CLS] global" if args.pattern == "longformer" else
              f"BigBird blocks of {args.block}, {args.random_blocks} random")
    print(f"\n{args.heads} heads x {args.head_dim}, {layout}, forward + backward, {args.threads} thread(s), "
          f"medians of {args.repeats} interleaved repeats")


if __name__ == "__main__":
    main()
