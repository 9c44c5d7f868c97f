"""bench_serve's `ratio`: the sides' order rotates round by round, and each round's ratio pairs its own ceiling."""
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import bench_serve  # noqa: E402


@pytest.mark.parametrize("sides", [["ceiling", "served"], ["ceiling", "served", "baseline"]])
def test_every_side_goes_first_and_last_equally_often(sides):
    orders = [bench_serve.round_order(sides, r) for r in range(2 * len(sides))]
    assert all(sorted(order) == sorted(sides) for order in orders)
    for side in sides:
        assert [order[0] for order in orders].count(side) == 2
        assert [order[-1] for order in orders].count(side) == 2
    if len(sides) == 2:
        assert orders[0] != orders[1]  # two sides alternate


def test_ratios_pair_each_round_with_its_own_ceiling():
    served, ceiling = [50.0, 90.0, 60.0], [100.0, 100.0, 120.0]
    report = bench_serve.paired_ratios(served, ceiling)
    assert report["per_round"] == [0.5, 0.9, 0.5]
    assert (report["median"], report["min"], report["max"]) == (0.5, 0.5, 0.9)
    # the ratio of the medians (60 / 100) is not what is reported
    with pytest.raises(ValueError):
        bench_serve.paired_ratios(served, ceiling[:2])
