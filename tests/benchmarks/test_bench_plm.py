"""bench_plm's fairness guard: both sides start from one state dict, or the script refuses to time them."""

import numpy as np
import pytest
import torch

import bench_plm  # noqa: E402

from needs import require_module  # noqa: E402

transformers = require_module("transformers")


def test_a_different_start_is_refused_and_the_same_one_passes(tmp_path):
    from bertforge.data.permutation import PermutationConfig, permutation_batch
    from bertforge.model.xlnet import XLNetConfig, XLNetLMHeadModel
    torch.manual_seed(0)
    XLNetLMHeadModel(XLNetConfig(vocab_size=50, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                                 intermediate_size=32, pad_token_id=0)).save_pretrained(tmp_path)
    ids = torch.tensor([[1, 7, 9, 11, 13, 15, 2, 0], [1, 5, 8, 12, 14, 2, 0, 0]])
    batch = permutation_batch({"input_ids": ids, "token_type_ids": torch.zeros_like(ids),
                               "attention_mask": (ids > 0).long()}, PermutationConfig(k=2),
                              np.random.default_rng(0), cls_id=1, sep_id=2, pad_id=0)
    ours = XLNetLMHeadModel.from_pretrained(tmp_path)
    theirs = transformers.XLNetLMHeadModel.from_pretrained(tmp_path)
    assert bench_plm.check_same_start(ours, theirs, batch) < 1e-5
    with torch.no_grad():
        theirs.transformer.layer[0].ff.layer_1.weight[0, 0] += 1e-3
    with pytest.raises(SystemExit, match="do not start from the same weights"):
        bench_plm.check_same_start(ours, theirs, batch)


def test_the_records_hold_each_contenders_time_and_speedup(tmp_path):
    import argparse

    from bertforge.results_store import read_store, render
    rows = [["mini", "16x128, P=22", "bertforge", "310.4", "2.05x", "1e-07"],
            ["mini", "16x128, P=22", "bertforge, target_mapping", "402.0", "1.58x", "1e-07"],
            ["mini", "16x128, P=22", "transformers", "636.3", "1.00x", "1e-07"]]
    args = argparse.Namespace(configs="mini", k=6, seq_len=128, threads=1)
    store = read_store(bench_plm.write_plm_records(rows, args, tmp_path).parent)
    assert render(store, "bench-plm/mini/bertforge/vs-transformers") == "2.05x"
    assert render(store, "bench-plm/mini/bertforge-target-mapping/ms-per-step") == "402.0 ms"
    assert store.records["bench-plm/mini/transformers/ms-per-step"].command.startswith("python benchmarks/bench_plm.py")
    assert [row[2] for row in store.tables["bench-plm"]["rows"]] == ["bertforge", "bertforge, target_mapping",
                                                                      "transformers"]


def test_the_content_stream_floor_is_the_full_steps_loss_read_off_the_content_stream(tmp_path):
    """The floor contender computes the same LM loss from the content stream at the predicted positions: equal to
    the full model's loss when the query stream is replaced by the content stream's rows."""
    import torch.nn.functional as F

    from bertforge.data.permutation import PermutationConfig, permutation_batch
    from bertforge.model.xlnet import XLNetConfig, XLNetLMHeadModel
    torch.manual_seed(0)
    model = XLNetLMHeadModel(XLNetConfig(vocab_size=50, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                                         intermediate_size=32, pad_token_id=0)).eval()
    ids = torch.tensor([[1, 7, 9, 11, 13, 15, 2, 0], [1, 5, 8, 12, 14, 2, 0, 0]])
    batch = permutation_batch({"input_ids": ids, "token_type_ids": torch.zeros_like(ids),
                               "attention_mask": (ids > 0).long()}, PermutationConfig(k=2),
                              np.random.default_rng(0), cls_id=1, sep_id=2, pad_id=0)
    with torch.no_grad():
        h = model.bert(batch["input_ids"], attention_mask=batch["attention_mask"], perm_mask=batch["perm_mask"],
                       token_type_ids=batch["token_type_ids"]).last_hidden_state
        logits = F.linear(h, model.bert.word_embedding.weight, model.lm_bias)
        picked = torch.stack([logits[b, batch["target_positions"][b]] for b in range(2)])
        want = F.cross_entropy(picked.reshape(-1, 50), batch["labels"].reshape(-1), ignore_index=-100)
        got = bench_plm.content_stream_loss(model, batch)
        full = model(**bench_plm.fast_inputs(batch)).loss
    assert torch.allclose(got, want, atol=1e-6) and not torch.allclose(got, full)  # the query stream differs
