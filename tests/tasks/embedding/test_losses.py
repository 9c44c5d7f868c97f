"""The losses equal sentence-transformers' own on the same vectors (an independent implementation)."""
from __future__ import annotations

import pytest
import torch

from bertforge.tasks.embedding.losses import cosent, cosine_mse, in_batch_negatives
from needs import require_module


@pytest.fixture(scope="module")
def st_model(tiny_st_folder):
    st = require_module("sentence_transformers")
    return st.SentenceTransformer(str(tiny_st_folder), device="cpu")


def _vectors(n: int, dim: int = 16, seed: int = 0) -> torch.Tensor:
    return torch.randn(n, dim, generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("with_negatives", [False, True])
@pytest.mark.parametrize("scale", [20.0, 7.0])
def test_in_batch_negatives_equals_multiple_negatives_ranking_loss(st_model, with_negatives, scale):
    from sentence_transformers.sentence_transformer.losses import MultipleNegativesRankingLoss
    a, p, n = _vectors(6, seed=1), _vectors(6, seed=2), _vectors(6, seed=3)
    reference = MultipleNegativesRankingLoss(st_model, scale=scale)
    embeddings = [a, p, n] if with_negatives else [a, p]
    expected = reference.compute_loss_from_embeddings(embeddings, None)
    got, _ = in_batch_negatives(a, p, n if with_negatives else None, scale=scale)
    assert float(got) == pytest.approx(float(expected), rel=1e-5)


def test_symmetric_equals_both_directions_averaged(st_model):
    from sentence_transformers.sentence_transformer.losses import MultipleNegativesRankingLoss
    a, p, n = _vectors(5, seed=4), _vectors(5, seed=5), _vectors(5, seed=6)
    reference = MultipleNegativesRankingLoss(st_model, directions=("query_to_doc", "doc_to_query"),
                                             partition_mode="per_direction")
    for embeddings in ([a, p], [a, p, n]):
        expected = reference.compute_loss_from_embeddings(embeddings, None)
        got, _ = in_batch_negatives(*embeddings, symmetric=True) if len(embeddings) == 3 else \
            in_batch_negatives(a, p, symmetric=True)
        assert float(got) == pytest.approx(float(expected), rel=1e-5)


def test_in_batch_accuracy_counts_anchors_whose_positive_ranks_first():
    a = torch.eye(4)
    p = torch.eye(4)[[0, 1, 3, 2]]  # anchors 2 and 3 see the other's positive first
    _, accuracy = in_batch_negatives(a, p)
    assert float(accuracy) == 0.5


def test_cosent_and_cosine_equal_sentence_transformers(st_model):
    from sentence_transformers.sentence_transformer.losses import CoSENTLoss, CosineSimilarityLoss
    a, b = _vectors(8, seed=7), _vectors(8, seed=8)
    scores = torch.tensor([0.1, 0.9, 0.5, 0.5, 0.0, 1.0, 0.3, 0.7])
    expected = CoSENTLoss(st_model, scale=20.0).compute_loss_from_embeddings([a, b], scores)
    assert float(cosent(a, b, scores, scale=20.0)) == pytest.approx(float(expected), rel=1e-5)
    expected = CosineSimilarityLoss(st_model).compute_loss_from_embeddings([a, b], scores)
    assert float(cosine_mse(a, b, scores)) == pytest.approx(float(expected), rel=1e-5)


def _rank_loss(rank: int, port: int, out: str) -> None:
    """One of two gloo processes: its half of the batch, with the other half's positives gathered in."""
    import torch.distributed as dist
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
    try:
        a = _vectors(8, seed=11)[rank * 4:(rank + 1) * 4].clone().requires_grad_(True)
        p = _vectors(8, seed=12)[rank * 4:(rank + 1) * 4].clone()
        n = _vectors(8, seed=13)[rank * 4:(rank + 1) * 4].clone()
        loss, _ = in_batch_negatives(a, p, n)
        loss.backward()
        torch.save({"loss": loss.detach(), "grad": a.grad}, f"{out}/rank{rank}.pt")
    finally:
        dist.destroy_process_group()


@pytest.mark.slow
def test_two_processes_see_every_processes_candidates(st_model, tmp_path):
    """Under torchrun each anchor competes with all 16 candidates: the ranks' mean loss is the one-process loss of
    the whole batch (sentence-transformers' MNRL), and each rank's anchors get the whole batch's gradient."""
    import socket

    import torch.multiprocessing as mp
    from sentence_transformers.sentence_transformer.losses import MultipleNegativesRankingLoss
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mp.spawn(_rank_loss, args=(port, str(tmp_path)), nprocs=2, join=True)
    ranks = [torch.load(tmp_path / f"rank{r}.pt") for r in range(2)]
    a = _vectors(8, seed=11).requires_grad_(True)
    whole = MultipleNegativesRankingLoss(st_model).compute_loss_from_embeddings(
        [a, _vectors(8, seed=12), _vectors(8, seed=13)], None)
    whole.backward()
    assert float((ranks[0]["loss"] + ranks[1]["loss"]) / 2) == pytest.approx(float(whole.detach()), rel=1e-5)
    torch.testing.assert_close(torch.cat([r["grad"] for r in ranks]) / 2, a.grad, rtol=1e-4, atol=1e-6)
