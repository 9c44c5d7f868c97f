"""XLNet on bertforge's task batches, which pad on the right: the same numbers as transformers on the same rows
padded on the left, XLNet's own way (its <cls> is then position -1, where transformers' summary reads it)."""
from __future__ import annotations

import pytest
import torch

from bertforge.model.xlnet import (XLNetConfig, XLNetForMultipleChoice, XLNetForSequenceClassification,
                                   XLNetForTokenClassification)

from needs import require_module

transformers = require_module("transformers")

CONFIG = dict(vocab_size=40, hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
              hidden_dropout_prob=0.0, summary_last_dropout=0.0, initializer_range=0.2, pad_token_id=5)
ROWS = [[11, 12, 13, 14, 15, 16, 4, 3], [21, 22, 4, 23, 4, 3], [31, 4, 3]]  # ... <sep> <cls> (ids 4, 3)


def padded(rows: list[list[int]], side: str) -> dict[str, torch.Tensor]:
    width = max(map(len, rows))
    ids, mask, types = [], [], []
    for r in rows:
        pad = [5] * (width - len(r))
        ids.append(r + pad if side == "right" else pad + r)
        real = [1] * len(r) + [0] * len(pad)
        mask.append(real if side == "right" else real[::-1])
        kinds = [0] * (len(r) - 1) + [2]
        types.append(kinds + [0] * len(pad) if side == "right" else [0] * len(pad) + kinds)
    return {"input_ids": torch.tensor(ids), "attention_mask": torch.tensor(mask), "token_type_ids": torch.tensor(types)}


@pytest.mark.parametrize("ours_class, hf_name", [(XLNetForSequenceClassification, "XLNetForSequenceClassification"),
                                                  (XLNetForTokenClassification, "XLNetForTokenClassification")])
def test_right_padding_gives_transformers_numbers_on_left_padding(ours_class, hf_name, tmp_path):
    torch.manual_seed(0)
    ours = ours_class(XLNetConfig(**CONFIG)).eval()
    ours.save_pretrained(tmp_path)
    theirs = getattr(transformers, hf_name).from_pretrained(tmp_path).eval()
    right, left = padded(ROWS, "right"), padded(ROWS, "left")
    with torch.no_grad():
        mine, ref = ours(**right).logits, theirs(**left).logits
    if mine.dim() == 2:  # one score per row: <cls>'s
        assert torch.allclose(mine, ref, atol=1e-5)
    else:  # per token: the real tokens line up once each side's padding is dropped
        for r, row in enumerate(ROWS):
            assert torch.allclose(mine[r, :len(row)], ref[r, -len(row):], atol=1e-5)


def test_multiple_choice_reads_each_choice_s_cls(tmp_path):
    torch.manual_seed(1)
    ours = XLNetForMultipleChoice(XLNetConfig(**CONFIG)).eval()
    ours.save_pretrained(tmp_path)
    theirs = transformers.XLNetForMultipleChoice.from_pretrained(tmp_path).eval()
    right, left = padded(ROWS[1:] * 2, "right"), padded(ROWS[1:] * 2, "left")
    with torch.no_grad():
        mine = ours(**{k: v.reshape(2, 2, -1) for k, v in right.items()}).logits
        ref = theirs(**{k: v.reshape(2, 2, -1) for k, v in left.items()}).logits
    assert torch.allclose(mine, ref, atol=1e-5)
