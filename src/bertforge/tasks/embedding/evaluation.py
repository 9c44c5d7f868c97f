"""How good sentence vectors are: STS (Spearman of the cosine against human scores) and retrieval (exact
cosine search over a corpus, scored with nDCG@10, MRR@10 and recall@1/10/100 as BEIR and sentence-transformers'
InformationRetrievalEvaluator report them).

Each evaluation takes `encode`, a function from texts to a [texts, dim] array, so that the model being trained,
a saved folder and an ONNX model are measured the same way. A corpus whose vectors do not fit in memory is
embedded chunk by chunk into a memory-mapped .npy file and searched chunk by chunk, keeping each query's running
top k (`vectors_dir`): the same exact ranking, with memory bounded by a chunk.
"""
from __future__ import annotations

import math
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import numpy as np
import torch

from bertforge.tasks.embedding.data import PairExample, RetrievalSet
from bertforge.tasks.metrics import pearson, spearman

Encode = Callable[[Sequence[str]], np.ndarray]
CUTOFFS = {"ndcg": 10, "mrr": 10}
RECALL_AT = (1, 10, 100)
STS_MAIN, RETRIEVAL_MAIN = "spearman", "ndcg@10"
CORPUS_CHUNK = 65536


def _cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    a = a / np.maximum(np.linalg.norm(a, axis=1, keepdims=True), 1e-12)
    b = b / np.maximum(np.linalg.norm(b, axis=1, keepdims=True), 1e-12)
    return (a * b).sum(1)


def evaluate_sts(encode: Encode, pairs: Sequence[PairExample]) -> dict[str, float]:
    """Spearman (the headline) and Pearson of the pairs' cosine similarity against their scores."""
    if not pairs or any(p.score is None for p in pairs):
        raise ValueError("STS evaluation needs pairs with a score column (sentence1, sentence2, score)")
    start = time.perf_counter()
    cos = _cosines(encode([p.anchor for p in pairs]), encode([p.positive for p in pairs]))
    gold = [float(p.score) for p in pairs]  # type: ignore[arg-type]
    return {"spearman": spearman(cos, gold), "pearson": pearson(cos, gold), "pairs": len(pairs),
            "eval_seconds": time.perf_counter() - start}


def exact_search(queries: np.ndarray, documents: np.ndarray, k: int, batch_size: int = 1024) -> tuple[np.ndarray,
                                                                                                    np.ndarray]:
    """(indices, cosines) of each query's `k` most similar documents, best first, by exact search in batches of
    queries (memory stays at batch x corpus)."""
    docs = torch.nn.functional.normalize(torch.from_numpy(np.asarray(documents, dtype=np.float32)), dim=1)
    k = min(k, docs.shape[0])
    top_idx, top_val = [], []
    for start in range(0, len(queries), batch_size):
        q = torch.nn.functional.normalize(torch.from_numpy(np.asarray(queries[start:start + batch_size],
                                                                      dtype=np.float32)), dim=1)
        values, indices = torch.topk(q @ docs.T, k, dim=1)
        top_idx.append(indices.numpy())
        top_val.append(values.numpy())
    return np.concatenate(top_idx), np.concatenate(top_val)


def _unit_rows(vectors: np.ndarray) -> np.ndarray:
    vectors = np.asarray(vectors, dtype=np.float32)
    return vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)


def write_vectors(encode: Encode, texts: Sequence[str], path: str | Path, chunk: int = CORPUS_CHUNK) -> np.memmap:
    """Unit-length vectors of `texts` written to a .npy file `chunk` texts at a time and opened memory-mapped
    (read-only): memory holds one chunk of vectors, never the corpus's."""
    store: np.memmap | None = None
    for start in range(0, len(texts), chunk):
        vectors = _unit_rows(encode(texts[start:start + chunk]))
        if store is None:
            store = np.lib.format.open_memmap(path, mode="w+", dtype=np.float32, shape=(len(texts), vectors.shape[1]))
        store[start:start + len(vectors)] = vectors
    if store is None:
        raise ValueError("no texts to embed")
    store.flush()
    del store
    return np.load(path, mmap_mode="r")


def _best_first(values: np.ndarray, indices: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Each row's k largest values and their indices, best first (ties: the lower index first)."""
    if values.shape[1] > k:
        keep = np.argpartition(-values, k - 1, axis=1)[:, :k]
        values, indices = np.take_along_axis(values, keep, 1), np.take_along_axis(indices, keep, 1)
    order = np.lexsort((indices, -values), axis=1)
    return np.take_along_axis(indices, order, 1), np.take_along_axis(values, order, 1)


def chunked_search(queries: np.ndarray, documents: np.ndarray, k: int, chunk: int = CORPUS_CHUNK,
                   batch_size: int = 1024) -> tuple[np.ndarray, np.ndarray]:
    """(indices, cosines) of each query's `k` most similar documents, best first, as `exact_search` gives them,
    reading `documents` (unit-length rows, e.g. a memory map from `write_vectors`) one chunk at a time and
    keeping every query's running top k: each chunk is read once; memory is queries x k plus batch x chunk."""
    q = _unit_rows(queries)
    k = min(k, len(documents))
    top_idx = np.zeros((len(q), 0), dtype=np.int64)
    top_val = np.zeros((len(q), 0), dtype=np.float32)
    for start in range(0, len(documents), chunk):
        block = np.asarray(documents[start:start + chunk], dtype=np.float32)
        offsets = np.arange(start, start + len(block), dtype=np.int64)
        merged_idx, merged_val = [], []
        for b in range(0, len(q), batch_size):
            scores = q[b:b + batch_size] @ block.T
            values = np.concatenate([top_val[b:b + batch_size], scores], axis=1)
            indices = np.concatenate([top_idx[b:b + batch_size], np.broadcast_to(offsets, scores.shape)], axis=1)
            i, v = _best_first(values, indices, k)
            merged_idx.append(i)
            merged_val.append(v)
        top_idx, top_val = np.concatenate(merged_idx), np.concatenate(merged_val)
    return top_idx, top_val


def query_metrics(ranked: Sequence[str], relevant: Mapping[str, int]) -> dict[str, float]:
    """nDCG@10 (graded gain, as trec_eval), MRR@10 and recall@k of one query; `ranked` holds its document ids,
    best first (nothing ranked scores 0)."""
    gains = [relevant.get(d, 0) for d in ranked]
    cut = CUTOFFS["ndcg"]
    dcg = sum(g / math.log2(i + 2) for i, g in enumerate(gains[:cut]))
    ideal = sorted(relevant.values(), reverse=True)[:cut]
    idcg = sum(g / math.log2(i + 2) for i, g in enumerate(ideal))
    first = next((i for i, g in enumerate(gains[:CUTOFFS["mrr"]]) if g > 0), None)
    return {"ndcg@10": dcg / idcg if idcg > 0 else 0.0, "mrr@10": 1.0 / (first + 1) if first is not None else 0.0,
            **{f"recall@{k}": sum(1 for g in gains[:k] if g > 0) / len(relevant) for k in RECALL_AT}}


def ranking_metrics(ranked: Mapping[str, Sequence[str]], qrels: Mapping[str, Mapping[str, int]]) -> dict[str, float]:
    """`query_metrics` averaged over the queries of `qrels`; `ranked` holds each query's document ids, best
    first."""
    totals = {"ndcg@10": 0.0, "mrr@10": 0.0, **{f"recall@{k}": 0.0 for k in RECALL_AT}}
    for qid, relevant in qrels.items():
        for name, value in query_metrics(list(ranked.get(qid, ())), relevant).items():
            totals[name] += value
    n = max(len(qrels), 1)
    return {name: value / n for name, value in totals.items()}


def evaluate_retrieval(encode: Encode, data: RetrievalSet, *, search_batch: int = 1024,
                       vectors_dir: str | Path | None = None, corpus_chunk: int = CORPUS_CHUNK) -> dict[str, float]:
    """Embed the corpus and the queries, rank the whole corpus for each query, and score the ranking. With
    `vectors_dir`, the corpus vectors go to a memory-mapped file there (deleted afterwards) and are searched
    `corpus_chunk` documents at a time."""
    start = time.perf_counter()
    doc_ids = list(data.corpus)
    query_ids = list(data.queries)
    query_vectors = encode([data.queries[q] for q in query_ids])
    if vectors_dir is None:
        doc_vectors = encode([data.corpus[d] for d in doc_ids])
        indices, _ = exact_search(query_vectors, doc_vectors, max(RECALL_AT), search_batch)
    else:
        Path(vectors_dir).mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix="corpus-vectors-", dir=vectors_dir) as scratch:
            doc_vectors = write_vectors(encode, [data.corpus[d] for d in doc_ids], Path(scratch) / "corpus.npy",
                                        corpus_chunk)
            indices, _ = chunked_search(query_vectors, doc_vectors, max(RECALL_AT), corpus_chunk, search_batch)
            del doc_vectors  # the memory map closes before its file is removed
    ranked = {qid: [doc_ids[j] for j in row] for qid, row in zip(query_ids, indices)}
    return {**ranking_metrics(ranked, data.qrels), "queries": len(query_ids), "documents": len(doc_ids),
            "eval_seconds": time.perf_counter() - start}
