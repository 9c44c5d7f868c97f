"""`bertforge seq2seq`: the conditional MLM's stage in the engine — masking, exact resume, bad input."""
from __future__ import annotations

import pytest
import torch
import warm_cli
from safetensors.torch import load_file

from run_folders import copy_as_interrupted
from bertforge.tasks.seq2seq import Pair, PairBatches, collate, read_pairs
from tests.generation.seq2seq_task import reversal_pairs, tiny_bert, train, write_jsonl


class _Tokenizer:
    pad_token_id, cls_token_id, sep_token_id, mask_token_id = 0, 2, 3, 4


def test_cmlm_masks_a_uniform_number_of_target_tokens_and_labels_only_them():
    pairs = [Pair([2, 10, 11, 3], list(range(20, 30))) for _ in range(400)]
    batch = collate(pairs, _Tokenizer(), torch.Generator().manual_seed(0))
    masked = batch["decoder_input_ids"] == 4
    assert torch.equal(masked, batch["labels"] != -100)
    assert torch.equal(batch["labels"][masked], (torch.arange(20, 30).repeat(400, 1))[masked[:, 1:-1]])
    counts = masked.sum(1)
    assert counts.min() >= 1 and counts.max() == 10
    assert abs(counts.float().mean() - 5.5) < 0.4        # uniform over 1..10
    assert (batch["decoder_input_ids"][:, 0] == 2).all() and (batch["decoder_input_ids"][:, -1] == 3).all()
    everything = collate(pairs[:2], _Tokenizer(), None)      # evaluation: every target token masked
    assert (everything["decoder_input_ids"][:, 1:-1] == 4).all()
    assert everything["target_lengths"].tolist() == [10, 10]


def test_batches_resume_at_the_same_place_with_the_same_masks():
    pairs = [Pair([2, 5 + i % 7, 3], [20 + i % 5, 21]) for i in range(100)]
    a = PairBatches(pairs, _Tokenizer(), 8, seed=3)
    for _ in range(17):
        a.next()
    b = PairBatches(pairs, _Tokenizer(), 8, seed=3)
    b.load_state_dict(a.state_dict())
    for _ in range(5):
        x, y = a.next(), b.next()
        assert all(torch.equal(x[k], y[k]) for k in x)


@pytest.mark.slow
def test_a_run_resumed_from_a_checkpoint_ends_bitwise_equal(tmp_path):
    init = tiny_bert(tmp_path / "init")
    data = write_jsonl(tmp_path / "train.jsonl", reversal_pairs(200, seed=0))
    ref = tmp_path / "ref"
    train(ref, init, data, steps=12, save_every=6, keep_checkpoints=3, keep_checkpoints_at_end=True)
    resumed = copy_as_interrupted(ref, tmp_path / "resumed", 6)
    train(resumed, init, data, steps=12, save_every=6, keep_checkpoints=3, keep_checkpoints_at_end=True)
    a, b = load_file(str(ref / "model.safetensors")), load_file(str(resumed / "model.safetensors"))
    assert set(a) == set(b) and all(torch.equal(a[k], b[k]) for k in a)
    assert any(k.startswith("length_predictor.") for k in a)


def test_bad_jsonl_names_file_line_and_field(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"source": "a b", "target": "b a"}\n{"source": "c d"}\n', encoding="utf-8")
    with pytest.raises(ValueError, match=r"bad.jsonl, line 2, field 'target': expected a string"):
        read_pairs(bad)
    bad.write_text('{"source": "a b", "target": "b a"}\nnot json\n', encoding="utf-8")
    with pytest.raises(ValueError, match="line 2.*JSON"):
        read_pairs(bad)


@pytest.mark.slow
def test_the_verb_reports_bad_input_in_one_line_and_leaves_no_output(tmp_path):
    init = tiny_bert(tmp_path / "init")
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"source": "a", "target": 3}\n', encoding="utf-8")
    out = tmp_path / "out"
    done = warm_cli.run(["seq2seq", "--train", str(bad), "--encoder", str(init), "--output", str(out),
                         "--max-steps", "2"])
    assert done.returncode == 1 and "line 1, field 'target'" in done.stderr and "Traceback" not in done.stderr
    assert not out.exists()
    done = warm_cli.run(["seq2seq", "--train", str(bad), "--output", str(out), "--max-steps", "2"])
    assert done.returncode == 1 and "--encoder DIR" in done.stderr
