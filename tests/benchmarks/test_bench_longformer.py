"""bench_longformer at tiny sizes: the three contenders compute one function, the same-weights guard refuses a
different model, a fresh process's peak sees the dense mask, and a run stores the ids the docs cite."""
import sys
from pathlib import Path

import pytest
import torch

import bench_longformer  # noqa: E402

from needs import only_on, require_module  # noqa: E402

transformers = require_module("transformers")

WINDOW, VOCAB = 32, 100


@pytest.fixture(scope="module")
def weights(tmp_path_factory) -> Path:
    """Tiny Longformer weights without dropout, so a training step is deterministic on every side."""
    config = bench_longformer.build_config(128, WINDOW, VOCAB, "tiny", hidden_dropout_prob=0.0,
                                           attention_probs_dropout_prob=0.0)
    return bench_longformer.save_weights(config, tmp_path_factory.mktemp("longformer"))


def test_the_three_contenders_compute_the_same_loss_and_gradients(weights):
    batch = bench_longformer.make_batch(128, VOCAB)
    assert (batch["labels"] != -100).sum().item() == round(0.15 * 128) and batch["global_attention_mask"][0, 0] == 1
    results = {}
    for contender in bench_longformer.CONTENDERS:
        model = bench_longformer.load(contender, weights)
        loss = bench_longformer.one_step(model, batch).item()
        results[contender] = (loss, bench_longformer.gradient_norm(model))
    assert bench_longformer.load("dense", weights)._kernels.banded_attention is False
    assert bench_longformer.load("banded", weights)._kernels.banded_attention is True
    loss, norm = results["banded"]
    for contender, (other_loss, other_norm) in results.items():
        assert abs(other_loss - loss) <= 1e-4, contender
        assert abs(other_norm - norm) <= 1e-4 * norm, contender


def test_a_step_with_the_shared_optimizer_learns(weights):
    """With `--optimizer`, repeating a step on one batch lowers its loss: the step really trains."""
    from common import same_optimizer
    model = bench_longformer.load("banded", weights)
    batch = bench_longformer.make_batch(64, VOCAB)
    optimizer = same_optimizer(model, 3e-3)
    losses = [bench_longformer.one_step(model, batch, optimizer).item() for _ in range(4)]
    assert losses[-1] < losses[0] - 0.1


def test_a_different_weight_set_or_model_is_refused(weights, tmp_path):
    ours = bench_longformer.load("banded", weights)
    theirs = bench_longformer.load("transformers", weights)
    batch = bench_longformer.make_batch(64, VOCAB)
    assert bench_longformer.check_same_start(ours, theirs, batch) <= 1e-4
    assert theirs.training and ours.training  # the eval forward leaves both as they were
    with torch.no_grad():
        theirs.longformer.encoder.layer[0].attention.self.query.weight[0, 0] += 1e-3
    with pytest.raises(SystemExit, match="do not start from the same weights"):
        bench_longformer.check_same_start(ours, theirs, batch)
    # the same tensors under another window: the loss check refuses what the tensor check cannot see
    narrow = transformers.LongformerForMaskedLM.from_pretrained(weights, attention_window=8)
    with pytest.raises(SystemExit, match="different losses"):
        bench_longformer.check_same_start(ours, narrow, batch)


@pytest.mark.slow
@only_on(sys.platform.startswith("linux"), "resident set read from /proc")
def test_the_fresh_process_peak_sees_the_dense_mask(weights):
    """At 2,048 tokens the dense path holds [heads, L, L] scores per layer (tens of MB); the banded path does not."""
    setup = bench_longformer.Setup(weights, VOCAB)
    banded = bench_longformer.peak_memory("banded", 2048, setup, 1)
    dense = bench_longformer.peak_memory("dense", 2048, setup, 1)
    assert dense > banded + 30


def test_a_run_stores_the_ids_and_table_the_docs_cite(tmp_path):
    from bertforge.results_store import read_store, render
    bench_longformer.main(["--lengths", "64", "128", "--window", str(WINDOW), "--preset", "tiny", "--vocab-size",
                           str(VOCAB), "--repeats", "1", "--growth", "64", "128", "--hf-max-length", "64",
                           "--skip-memory", "--records", str(tmp_path), "--plot", str(tmp_path / "scaling.png")])
    store = read_store(tmp_path)
    group = bench_longformer.GROUP
    expected = {f"{group}/{c}/{n}/seconds" for c in ("banded", "dense") for n in (64, 128)}
    expected |= {f"{group}/transformers/64/seconds", f"{group}/growth-64-128/banded", f"{group}/growth-64-128/dense"}
    assert set(store.records) == expected  # transformers stops at --hf-max-length: no growth, no ratio at 128
    record = store.records[f"{group}/banded/128/seconds"]
    assert record.unit == "s" and record.threads == 1 and record.data == "random token ids, batch 1"
    assert record.command.startswith("python benchmarks/bench_longformer.py --lengths 64 128")
    growth = store.records[f"{group}/growth-64-128/banded"]
    assert growth.value == pytest.approx(record.value / store.records[f"{group}/banded/64/seconds"].value)
    table = store.tables[group]
    assert table["rows"][1][1] == f"{{{group}/banded/128/seconds}}" and table["rows"][1][3] == "-"
    assert render(store, f"{group}/growth-64-128/banded").endswith("x")
    assert (tmp_path / "scaling.png").stat().st_size > 0


def test_summary_ratios_against_transformers():
    times = {"banded@512": [1.0, 2.0, 3.0], "banded@4096": [8.0], "transformers@512": [3.0],
             "transformers@4096": [20.0], "dense@512": [1.0], "dense@4096": [64.0]}
    memory = {("banded", 512): 10.0, ("banded", 4096): 70.0}
    summary = bench_longformer.summarise(times, memory, (512, 4096))
    assert summary["growth-512-4096/banded"] == 4.0 and summary["growth-512-4096/dense"] == 64.0
    assert summary["memory-growth-512-4096/banded"] == 7.0 and summary["vs-transformers-4096"] == 2.5
    assert "memory-growth-512-4096/dense" not in summary
