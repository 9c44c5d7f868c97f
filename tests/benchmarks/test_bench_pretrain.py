"""The time-to-quality race's small pure parts: the loop spec and the 'reached at' interpolation."""

import pytest

import bench_pretrain  # noqa: E402


def test_loop_spec_names_each_override_and_keeps_the_shared_recipe():
    loops = bench_pretrain.parse_ttq_loops("transformers, bertforge, bertforge:mask=0.3:dropout=0,bertforge:lr=1e-3")
    assert [name for name, _, _ in loops] == ["transformers", "bertforge, same recipe",
                                              "bertforge, mask 0.3, dropout 0", "bertforge, lr 0.001"]
    assert loops[1][2] == bench_pretrain.TTQ_BASE
    assert loops[2][2] == {"lr": 5e-4, "mask": 0.3, "dropout": 0.0}


@pytest.mark.parametrize("spec, message", [
    ("bertforge", "exactly one transformers loop"),
    ("transformers,transformers:lr=1e-3", "takes no overrides"),
    ("transformers,hf", "unknown implementation 'hf'"),
    ("transformers,bertforge:masking=0.3", "key=value"),
    ("transformers,bertforge:lr=fast", "lr must be a number"),
])
def test_bad_loop_spec_says_what_is_wrong(spec, message):
    with pytest.raises(SystemExit, match=message):
        bench_pretrain.parse_ttq_loops(spec)


def test_reaching_the_target_interpolates_and_counts_time_zero():
    curve = [(0.0, 10.0), (60.0, 8.0), (120.0, 7.0)]
    assert bench_pretrain.first_time_below(curve, 7.5) == pytest.approx(90.0)
    assert bench_pretrain.first_time_below(curve, 6.0) is None
    assert bench_pretrain.first_time_below(curve, 10.5) == 0.0   # already there at the start: 0 s, not "never"
