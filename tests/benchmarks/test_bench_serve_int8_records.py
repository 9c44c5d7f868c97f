"""bench_serve int8 --records writes the published table's records (the same ids, descriptions and units as
docs/results/serve-int8.json): each model's SST-2 dev accuracy and its throughput over the torch predictor's in
the same run, and the accuracy of the int8 export with one scale per matrix.

A real run, on a tiny random SST-2 predictor (2 layers, 32 wide, MiniLM's vocabulary) and 24 dev sentences: the
three exports, the four dev passes and the records. Each dev pass is watched (`dev_score`), so the ratios are
checked against the passes they divide, and the per-matrix export's graph against the per-channel one's."""
from __future__ import annotations

import pytest

from needs import require_module
from predictor_folders import tiny_predictor
from published_records import assert_published

import bench_serve  # noqa: E402

require_module("onnxruntime")
require_module("onnx")


def weight_scales(folder) -> list[tuple[int, ...]]:
    """The shapes of the int8 weight scales of a quantized export's graph."""
    import onnx
    graph = onnx.load(str(folder / "model.onnx")).graph
    return [tuple(t.dims) for t in graph.initializer if t.name.endswith("_scale") and t.data_type == onnx.TensorProto.FLOAT]


@pytest.mark.slow
def test_records_are_the_published_ones(minilm_dir, tmp_path, monkeypatch):
    import torch

    from bertforge.results_store import read_store
    model = tiny_predictor(tmp_path / "sst2-tiny", minilm_dir, "sst2", "sequence_classification", ["0", "1"])
    dev = tmp_path / "SST-2" / "dev.tsv"
    dev.parent.mkdir()
    dev.write_text("sentence\tlabel\n" + "".join(f"{'a fine' if i % 2 else 'a dull'} film number {i}\t{i % 2}\n"
                                                 for i in range(24)), encoding="utf-8")
    passes, scales = [], {}
    real_score, real_export = bench_serve.dev_score, bench_serve.export_per_matrix

    def watched_score(predictor, data):
        passes.append(real_score(predictor, data))
        return passes[-1]

    def watched_export(fp32, output):
        real_export(fp32, output)
        scales["per-channel"], scales["per-matrix"] = weight_scales(fp32.parent / "int8"), weight_scales(output)

    monkeypatch.setattr(bench_serve, "dev_score", watched_score)
    monkeypatch.setattr(bench_serve, "export_per_matrix", watched_export)
    threads = torch.get_num_threads()
    try:
        bench_serve.main(["int8", "--model", str(model), "--data", str(dev), "--records", str(tmp_path / "records")])
    finally:
        torch.set_num_threads(threads)  # the script sets its own; the rest of the session keeps the test's
    assert [n for _, n, _ in passes] == [24] * 4  # torch, ONNX fp32, ONNX int8, ONNX int8 one scale per matrix
    assert scales["per-channel"] and any(shape for shape in scales["per-channel"])  # a scale per output column
    assert scales["per-matrix"] and not any(shape for shape in scales["per-matrix"])  # one scalar per matrix
    written = assert_published(tmp_path / "records", "serve-int8/")
    assert read_store(tmp_path / "records").tables == {"serve-int8-sst2": read_store().tables["serve-int8-sst2"]}
    for record in written.values():
        assert record.threads == 1 and record.data.startswith("SST-2 dev, 24 sentences (")
        assert record.command.startswith("python benchmarks/bench_serve.py int8 --model ")
        assert "--records" not in record.command
    torch_seconds = passes[0][2]
    for (accuracy, _, seconds), key in zip(passes, ("pytorch", "onnx-fp32", "onnx-int8", "onnx-int8-per-matrix")):
        base = f"serve-int8/sst2/{key}"
        assert written[f"{base}/dev-accuracy"].value == pytest.approx(100 * accuracy)
        if key != "onnx-int8-per-matrix":  # its speed is not published
            assert written[f"{base}/throughput-vs-pytorch"].value == pytest.approx(torch_seconds / seconds, rel=1e-9)
    assert written["serve-int8/sst2/pytorch/throughput-vs-pytorch"].value == 1.0
