"""The benchmarks' fairness guards: one optimizer for both sides, one start, one GEMM peak, identical ids."""
from pathlib import Path

import pytest
import torch

import bench_tokenizer  # noqa: E402
import common  # noqa: E402

from needs import require_module  # noqa: E402

transformers = require_module("transformers")


def _pair(tmp_path):
    from bertforge.config import BertConfig
    from bertforge.model import BertForPreTraining
    config = BertConfig(vocab_size=60, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=32, max_position_embeddings=16)
    folder = common.save_initial_weights(config, tmp_path / "init")
    return BertForPreTraining.from_pretrained(folder), transformers.BertForPreTraining.from_pretrained(folder)


def _inputs():
    ids = torch.tensor([[2, 7, 9, 11, 3], [2, 5, 3, 0, 0]])
    return {"input_ids": ids, "attention_mask": (ids > 0).long(), "token_type_ids": torch.zeros_like(ids)}


@pytest.mark.slow
def test_both_sides_get_the_same_optimizer_and_start(tmp_path):
    ours, theirs = _pair(tmp_path)
    a, b = common.same_optimizer(ours, 1e-3), common.same_optimizer(theirs, 1e-3)
    assert type(a) is type(b) is torch.optim.AdamW
    for key in ("fused", "foreach", "eps", "betas"):
        assert [g[key] for g in a.param_groups] == [g[key] for g in b.param_groups], key
    assert [g["weight_decay"] for g in a.param_groups] == [g["weight_decay"] for g in b.param_groups]
    # the same number of decayed / undecayed elements (ours fuses Q, K, V into one tensor)
    assert [sum(p.numel() for p in g["params"]) for g in a.param_groups] == \
        [sum(p.numel() for p in g["params"]) for g in b.param_groups]
    ours.train(), theirs.eval()
    diffs = common.assert_same_start(ours, theirs, _inputs(), "test")
    assert max(diffs.values()) < 1e-5
    assert ours.training and not theirs.training  # each model's mode is put back


@pytest.mark.slow
def test_a_different_start_is_refused(tmp_path):
    ours, theirs = _pair(tmp_path)
    with torch.no_grad():
        theirs.bert.encoder.layer[0].output.dense.weight[0, 0] += 1e-3
    with pytest.raises(SystemExit, match="do not start from the same weights"):
        common.assert_same_start(ours, theirs, _inputs(), "test")


def test_one_gemm_peak():
    assert common.peak_flops(1.0) == common.gemm_flops(*common.PEAK_GEMM)
    for script in ("bench_model.py", "bench_pretrain.py"):
        source = (Path(common.__file__).parent / script).read_text()
        assert "peak_gemm()" in source and "gemm_seconds(" not in source, script


def test_tokenizer_benchmark_reports_the_first_difference():
    same = {"input_ids": [[1, 2], [3, 4]], "attention_mask": [[1, 1], [1, 1]]}
    assert bench_tokenizer.first_difference(same, dict(same)) is None
    assert bench_tokenizer.first_difference([[1, 2]], [[1, 2]]) is None
    where = bench_tokenizer.first_difference(same, {**same, "input_ids": [[1, 2], [3, 5]]})
    assert where.startswith("input_ids, row 1")
    assert bench_tokenizer.first_difference([[1]], [[1], [2]]).startswith("input_ids: 1 rows")


@pytest.mark.slow
def test_tokenizer_benchmark_exits_non_zero_when_ids_differ(shared_data, minilm_dir, monkeypatch, capsys):
    from bertforge.tokenization import BertTokenizer
    args = ["--shared-data", str(shared_data), "--vocab-dir", str(minilm_dir), "--lines", "40", "--repeats", "5"]
    real = BertTokenizer.encode_batch_ids
    monkeypatch.setattr(BertTokenizer, "encode_batch_ids",
                        lambda self, texts, **kw: [ids[:-1] for ids in real(self, texts, **kw)])
    assert bench_tokenizer.main(args) == 1
    err = capsys.readouterr().err
    assert "different ids" in err and "bulk ids" in err and "no timing" in err
