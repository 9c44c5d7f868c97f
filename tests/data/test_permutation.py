"""PLM batches mean what the paper says, checked by perturbing tokens and watching XLNet's predictions.

The oracle is not our masks: a random 2-layer XLNet reads each batch, and for every prediction and every other
token we change that token and see whether the prediction moves. From those dependencies alone the test asks
what XLNet's factorisation requires: a prediction never depends on its own token or on padding; every token
that is not predicted is seen by every prediction; among the predictions, "i depends on j" is a strict total
order (a factorisation order exists); 1/K of the tokens are predicted, never <cls>/<sep>; and the order can be
cut into spans of neighbouring tokens, each at most `max_span` long (spans are predicted together). Two layers
make a leak through the content stream (a token that sees a later target, seen in turn) show up too.
"""
from __future__ import annotations

import numpy as np
import pytest
import torch

from bertforge.data.permutation import PermutationConfig, permutation_batch
from bertforge.model.xlnet import XLNetConfig, XLNetLMHeadModel

CLS, SEP, PAD, VOCAB = 1, 2, 0, 50


def corpus_batch(lengths: list[int], seed: int) -> dict[str, torch.Tensor]:
    """BERT-layout rows as `PretrainingDataset` serves them: [CLS] tokens [SEP] (a [SEP] inside, too) pad."""
    g = np.random.default_rng(seed)
    W = max(lengths) + 2
    ids = np.full((len(lengths), W), PAD)
    for r, n in enumerate(lengths):
        ids[r, 0], ids[r, 1:n + 1], ids[r, n + 1] = CLS, g.integers(5, VOCAB, n), SEP
        ids[r, 1 + n // 2] = SEP  # a document boundary inside a packed row
    mask = (np.arange(W)[None] < np.array(lengths)[:, None] + 2).astype(np.int64)
    return {"input_ids": torch.tensor(ids), "token_type_ids": torch.zeros_like(torch.tensor(ids)),
            "attention_mask": torch.tensor(mask)}


@torch.no_grad()
def dependencies(model: XLNetLMHeadModel, batch: dict[str, torch.Tensor], row: int) -> np.ndarray:
    """[P, W]: does prediction p of `row` change when the token at position w is changed?"""
    names = ("input_ids", "token_type_ids", "attention_mask", "perm_mask", "target_mapping")
    inputs = {k: batch[k][row:row + 1] for k in names}
    inputs = {k: v.double() if v.is_floating_point() else v for k, v in inputs.items()}
    base = model(**inputs).logits[0]
    W = inputs["input_ids"].shape[1]
    moved = np.zeros((base.shape[0], W), dtype=bool)
    for w in range(W):
        changed = dict(inputs, input_ids=inputs["input_ids"].clone())
        changed["input_ids"][0, w] = (changed["input_ids"][0, w] + 7) % VOCAB
        moved[:, w] = (model(**changed).logits[0] - base).abs().amax(-1).numpy() > 1e-9
    return moved


def fewest_pieces(order: list[int], candidates: list[int], max_span: int) -> int:
    """The fewest pieces the order (positions) cuts into, each piece a set of at most `max_span` neighbouring
    candidates (in any order inside the piece): the number of spans, for an order that keeps spans together."""
    place = {p: i for i, p in enumerate(candidates)}
    best = [0] + [len(order) + 1] * len(order)
    for t in range(1, len(order) + 1):
        for n in range(1, min(max_span, t) + 1):
            piece = [place[p] for p in order[t - n:t]]
            if max(piece) - min(piece) + 1 == n:
                best[t] = min(best[t], best[t - n] + 1)
    return best[-1]


@pytest.mark.parametrize("k, max_span", [(6, 5), (3, 3), (2, 1)])
def test_each_prediction_sees_exactly_the_context_and_the_targets_before_it(k, max_span):
    torch.manual_seed(0)
    config = XLNetConfig(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                         intermediate_size=64, hidden_dropout_prob=0.0, pad_token_id=PAD, initializer_range=0.3)
    model = XLNetLMHeadModel(config).double().eval()  # large weights, float64: a dependence cannot hide in rounding
    cfg = PermutationConfig(k=k, max_span=max_span)
    lengths = [17, 11, 20]
    batch = permutation_batch(corpus_batch(lengths, seed=k), cfg, np.random.default_rng(k), cls_id=CLS,
                              sep_id=SEP, pad_id=PAD)
    for row, n in enumerate(lengths):
        ids, real = batch["input_ids"][row].numpy(), batch["attention_mask"][row].numpy().astype(bool)
        assert list(ids[real][-2:]) == [SEP, CLS] and not real[:len(real) - n - 2].any(), "XLNet's layout"
        moved = dependencies(model, batch, row)
        labels = batch["labels"][row].numpy()
        predicted = [int(np.flatnonzero(m)[0]) for m in batch["target_mapping"][row].numpy() if m.any()]
        assert len(predicted) == (labels != -100).sum() and list(labels[:len(predicted)]) == list(ids[predicted])
        candidates = [w for w in np.flatnonzero(real) if ids[w] not in (CLS, SEP)]
        assert set(predicted) <= set(candidates) and len(predicted) == -(-len(candidates) // k)
        context = [w for w in np.flatnonzero(real) if w not in predicted]
        seen = {w: set(np.flatnonzero(moved[p])) for p, w in enumerate(predicted)}
        for w in predicted:
            assert w not in seen[w], "a prediction must not see its own token"
            assert seen[w] & set(np.flatnonzero(~real)) == set(), "padding is never seen"
            assert set(context) <= seen[w], "every token that is not predicted is seen by every prediction"
        for a in predicted:
            for b in predicted:
                if a != b:
                    assert (b in seen[a]) != (a in seen[b]), "two predictions: exactly one sees the other"
        order = sorted(predicted, key=lambda w: len(seen[w] & set(predicted)))
        assert [len(seen[w] & set(predicted)) for w in order] == list(range(len(order))), "a total order"


@pytest.mark.parametrize("max_span", [5, 1])
def test_spans_are_neighbours_predicted_together_and_one_in_k(max_span):
    """Over many rows the order cuts into few pieces of neighbouring tokens: spans of mean length 3 (lengths
    1..5) give about a third as many pieces as targets; single tokens (max_span 1), or the same targets in a
    shuffled order, one piece per target or nearly. The share predicted is 1/K."""
    cfg = PermutationConfig(k=6, max_span=max_span)
    batch = permutation_batch(corpus_batch([120] * 40, seed=1), cfg, np.random.default_rng(1), cls_id=CLS,
                              sep_id=SEP, pad_id=PAD)
    ours, shuffled, targets = 0, 0, 0
    for row in range(40):
        perm = batch["perm_mask"][row].numpy()
        where = batch["target_positions"][row][batch["labels"][row] != -100].numpy()
        ids = batch["input_ids"][row].numpy()
        candidates = [w for w in range(len(ids)) if ids[w] not in (CLS, SEP, PAD)]
        assert len(where) == -(-len(candidates) // 6)
        order = sorted(where, key=lambda w: perm[w, where].sum(), reverse=True)  # first: hides the most
        ours += fewest_pieces(order, candidates, 5)
        shuffled += fewest_pieces(list(np.random.default_rng(row).permutation(order)), candidates, 5)
        targets += len(where)
    assert shuffled > 0.8 * targets
    if max_span == 1:
        assert ours > 0.8 * targets
    else:
        assert ours < 0.5 * targets, "the tokens of a span come one after the other in the order"


def test_bad_settings_are_refused():
    with pytest.raises(ValueError, match="plm k"):
        PermutationConfig(k=1)
    with pytest.raises(ValueError, match="max span"):
        PermutationConfig(max_span=0)
