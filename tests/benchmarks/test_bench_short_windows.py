"""bench_short_windows at a tiny size: the two contenders are one function (and the guard refuses two that are
not), the short lengths take the dense path and the long one the band, and the records are the medians timed."""
from __future__ import annotations

import pytest
import torch

import bench_short_windows  # noqa: E402

TINY = ["--window", "16", "--layers", "1", "--hidden", "32", "--heads", "2", "--vocab-size", "64", "--batch", "2"]


def test_the_contenders_share_weights_and_switch_path_only_within_three_radii():
    args = bench_short_windows.parse_args([*TINY, "--lengths", "24", "40"])
    models = bench_short_windows.contenders(bench_short_windows.build_model(args))
    dense, chunked = models["dense"], models["chunked"]
    assert all(torch.equal(a, b) for a, b in zip(dense.state_dict().values(), chunked.state_dict().values()))
    assert dense.kernels.dense_short_windows and not chunked.kernels.dense_short_windows
    for length in (24, 40):  # 24 is within three radii (3 x 8), 40 is not
        batch = bench_short_windows.make_batch(length, 2, 64, 0)
        assert batch["input_ids"].shape == (2, length)
        assert bench_short_windows.check_same_loss(models, batch) <= 1e-5
        grads = []
        for model in (dense, chunked):  # in eval mode: no dropout, whose draws differ between the paths
            bench_short_windows.make_step(model.eval(), batch)()
            grads.append(torch.cat([p.grad.flatten() for p in model.parameters() if p.grad is not None]))
        assert (grads[0] - grads[1]).abs().max().item() <= 1e-5


def test_the_guard_refuses_two_different_models():
    args = bench_short_windows.parse_args([*TINY, "--lengths", "24"])
    models = bench_short_windows.contenders(bench_short_windows.build_model(args))
    with torch.no_grad():
        models["chunked"].qa_outputs.weight.mul_(3.0)
    with pytest.raises(SystemExit, match="different losses"):
        bench_short_windows.check_same_loss(models, bench_short_windows.make_batch(24, 2, 64, 0))


def test_records_are_the_medians_of_the_run(tmp_path):
    from bertforge.results_store import read_store
    summary = bench_short_windows.main([*TINY, "--lengths", "24", "40", "--repeats", "2", "--records",
                                        str(tmp_path)])
    records = read_store(tmp_path).records
    assert set(records) == {f"bench-short-windows/{k}" for k in summary}
    for n in (24, 40):
        dense, chunked = (records[f"bench-short-windows/{c}/{n}/seconds"] for c in ("dense", "chunked"))
        assert dense.spread[0] <= dense.value <= dense.spread[1]
        assert records[f"bench-short-windows/speedup/{n}"].value == pytest.approx(chunked.value / dense.value)
    assert "--records" not in records["bench-short-windows/speedup/24"].command
