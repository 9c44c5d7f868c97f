"""/similarity and /rerank over real HTTP, against independent computations: sentence-transformers' embeddings of
the real all-MiniLM-L6-v2 folder with numpy's cosine, and transformers' own classifier for a cross-encoder."""
from __future__ import annotations

import httpx
import numpy as np
import pytest

from bertforge.serving.app import create_app
from bertforge.serving.served_model import ServedModel

from needs import require_module

from .conftest import running

pytestmark = pytest.mark.slow
QUERY = "How do plants make their food?"
TEXTS = ["Photosynthesis turns light, water and carbon dioxide into sugar.", "The stock market fell sharply today.",
         "Leaves hold chlorophyll, which captures sunlight.", "My cat sleeps all afternoon."]


def cosine(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (b @ a) / (np.linalg.norm(a) * np.linalg.norm(b, axis=1))


@pytest.fixture(scope="module")
def encoder_url(minilm_dir):
    with running(create_app(ServedModel(minilm_dir, device="cpu", precision="fp32"))) as url:
        yield url


def test_similarity_is_the_cosine_of_sentence_transformers_embeddings(encoder_url, st_model):
    r = httpx.post(encoder_url + "/similarity", json={"inputs": {"source_sentence": QUERY, "sentences": TEXTS}},
                   timeout=60)
    assert r.status_code == 200, r.text
    ref = st_model.encode([QUERY, *TEXTS], normalize_embeddings=False)
    np.testing.assert_allclose(r.json(), cosine(ref[0], ref[1:]), atol=1e-5)


def test_rerank_with_an_encoder_sorts_by_cosine(encoder_url, st_model):
    r = httpx.post(encoder_url + "/rerank", json={"query": QUERY, "texts": TEXTS, "return_text": True}, timeout=60)
    assert r.status_code == 200, r.text
    ref = st_model.encode([QUERY, *TEXTS])
    expected = cosine(ref[0], ref[1:])
    ranks = r.json()
    assert [x["index"] for x in ranks] == list(np.argsort(-expected))
    np.testing.assert_allclose([x["score"] for x in ranks], np.sort(expected)[::-1], atol=1e-5)
    assert [x["text"] for x in ranks] == [TEXTS[x["index"]] for x in ranks]
    plain = httpx.post(encoder_url + "/rerank", json={"query": QUERY, "texts": TEXTS}, timeout=60).json()
    assert all(set(x) == {"index", "score"} for x in plain)  # no text unless asked (TEI's shape)


def test_a_predictor_folder_answers_404_to_similarity(sst2_folder):
    with running(create_app(ServedModel(sst2_folder, device="cpu", precision="fp32"))) as url:
        r = httpx.post(url + "/similarity", json={"inputs": {"source_sentence": "a", "sentences": ["b"]}}, timeout=60)
    assert r.status_code == 404 and "/predict" in r.json()["error"] and "/rerank" in r.json()["error"]


def test_rerank_with_a_cross_encoder_matches_transformers(sst2_folder):
    """A two-label classifier scores each (query, text) pair with its second label's probability, or with the
    logit of the second label against the first with raw_scores (text-embeddings-inference's convention)."""
    import torch
    transformers = require_module("transformers")
    tok = transformers.AutoTokenizer.from_pretrained(str(sst2_folder))
    ref_model = transformers.AutoModelForSequenceClassification.from_pretrained(str(sst2_folder)).eval()
    with torch.no_grad():
        logits = ref_model(**tok([QUERY] * len(TEXTS), TEXTS, padding=True, return_tensors="pt")).logits.double()
    probability = logits.softmax(-1)[:, 1].numpy()
    raw = (logits[:, 1] - logits[:, 0]).numpy()
    with running(create_app(ServedModel(sst2_folder, device="cpu", precision="fp32"))) as url:
        scored = httpx.post(url + "/rerank", json={"query": QUERY, "texts": TEXTS}, timeout=60).json()
        logit = httpx.post(url + "/rerank", json={"query": QUERY, "texts": TEXTS, "raw_scores": True}, timeout=60).json()
    assert [x["index"] for x in scored] == list(np.argsort(-probability))
    np.testing.assert_allclose([x["score"] for x in scored], np.sort(probability)[::-1], atol=1e-5)
    assert [x["index"] for x in logit] == [x["index"] for x in scored]
    np.testing.assert_allclose([x["score"] for x in logit], np.sort(raw)[::-1], atol=1e-4)


def test_a_tagger_is_no_cross_encoder(minilm_dir, tmp_path):
    from .conftest import make_task_folder
    folder = make_task_folder(minilm_dir, tmp_path / "ner", "token_classification")
    served = ServedModel(folder, device="cpu", precision="fp32")
    assert not served.cross_encoder and "rerank" not in served.endpoints
    with running(create_app(served)) as url:
        r = httpx.post(url + "/rerank", json={"query": "q", "texts": ["t"]}, timeout=60)
    assert r.status_code == 404 and r.json()["type"] == "not_found"


def test_rerank_with_a_regression_cross_encoder_matches_transformers(minilm_dir, tmp_path):
    """A one-output head (a cross-encoder such as an STS-B model) scores a pair with the sigmoid of its output,
    or the output itself with raw_scores."""
    import torch
    transformers = require_module("transformers")
    from .conftest import make_task_folder
    folder = make_task_folder(minilm_dir, tmp_path / "stsb", "regression")
    tok = transformers.AutoTokenizer.from_pretrained(str(folder))
    ref_model = transformers.AutoModelForSequenceClassification.from_pretrained(str(folder)).eval()
    assert ref_model.config.num_labels == 1
    with torch.no_grad():
        raw = ref_model(**tok([QUERY] * len(TEXTS), TEXTS, padding=True, return_tensors="pt")).logits[:, 0].numpy()
    with running(create_app(ServedModel(folder, device="cpu", precision="fp32"))) as url:
        scored = httpx.post(url + "/rerank", json={"query": QUERY, "texts": TEXTS}, timeout=60).json()
        logit = httpx.post(url + "/rerank", json={"query": QUERY, "texts": TEXTS, "raw_scores": True}, timeout=60).json()
    assert [x["index"] for x in scored] == [x["index"] for x in logit] == list(np.argsort(-raw))
    np.testing.assert_allclose([x["score"] for x in logit], np.sort(raw)[::-1], atol=1e-5)
    np.testing.assert_allclose([x["score"] for x in scored], 1 / (1 + np.exp(-np.sort(raw)[::-1])), atol=1e-5)
