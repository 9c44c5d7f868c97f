"""Typed requests read from JSON: what each endpoint accepts, and every refusal naming its field. No model."""
from __future__ import annotations

import pytest

from bertforge.serving.limits import RequestError, ServeSettings
from bertforge.serving.requests import (
    EmbedRequest,
    FillMaskRequest,
    OpenAIEmbeddingsRequest,
    PredictRequest,
    RerankRequest,
    SimilarityRequest,
    TokenizeRequest,
    predict_input,
)

SETTINGS = ServeSettings(max_client_batch_size=4, max_input_chars=50)


def refused(parse, data, settings=SETTINGS) -> RequestError:
    with pytest.raises(RequestError) as caught:
        parse(data, settings)
    return caught.value


def test_each_request_reads_its_fields():
    assert OpenAIEmbeddingsRequest.parse({"input": "one", "model": "m", "user": "u"}, SETTINGS) == \
        OpenAIEmbeddingsRequest(["one"], "m")
    assert EmbedRequest.parse({"inputs": ["a", "b"], "normalize": False}, SETTINGS) == EmbedRequest(["a", "b"], False)
    assert EmbedRequest.parse({"inputs": "a"}, SETTINGS).normalize is True  # TEI's default
    assert FillMaskRequest.parse({"inputs": ["x [MASK]"]}, SETTINGS) == FillMaskRequest(["x [MASK]"], 5)
    assert TokenizeRequest.parse({"inputs": "a"}, SETTINGS) == TokenizeRequest(["a"])
    assert PredictRequest.parse({"inputs": {"text": "a"}}, SETTINGS) == PredictRequest([{"text": "a"}])
    assert SimilarityRequest.parse({"inputs": {"source_sentence": "s", "sentences": ["a", "b"]}}, SETTINGS) == \
        SimilarityRequest("s", ["a", "b"])
    assert RerankRequest.parse({"query": "q", "texts": ["a"], "return_text": True}, SETTINGS) == \
        RerankRequest("q", ["a"], False, True)


@pytest.mark.parametrize("parse, data, field, status", [
    (EmbedRequest.parse, {"inputs": ["ok", "x" * 51]}, "inputs[1]", 413),
    (EmbedRequest.parse, {"inputs": ["ok", "\ud800"]}, "inputs[1]", 422),
    (EmbedRequest.parse, {"inputs": ["a"] * 5}, "--max-client-batch-size", 422),
    (OpenAIEmbeddingsRequest.parse, {"input": ["a"], "model": {"x": 1}}, "model", 422),
    (OpenAIEmbeddingsRequest.parse, {"input": ["a"], "encoding_format": "base64"}, "encoding_format", 422),
    (FillMaskRequest.parse, {"inputs": ["[MASK]"], "top_k": 10 ** 40}, "top_k", 422),
    (FillMaskRequest.parse, {"inputs": ["[MASK]"], "top_k": True}, "top_k", 422),
    (TokenizeRequest.parse, {"inputs": ["x" * 51]}, "inputs[0]", 413),
    (PredictRequest.parse, {"inputs": 3}, "inputs", 422),
    (PredictRequest.parse, {"inputs": [1] * 5}, "--max-client-batch-size", 422),
    (SimilarityRequest.parse, {"inputs": ["a"]}, "inputs", 422),
    (SimilarityRequest.parse, {"inputs": {"source_sentence": "s"}}, "inputs.sentences", 422),
    (SimilarityRequest.parse, {"inputs": {"source_sentence": " ", "sentences": ["a"]}}, "inputs.source_sentence", 422),
    (SimilarityRequest.parse, {"inputs": {"source_sentence": "s", "sentences": "a"}}, "inputs.sentences", 422),
    (SimilarityRequest.parse, {"inputs": {"source_sentence": "s", "sentences": ["a", 2]}}, "inputs.sentences[1]", 422),
    (SimilarityRequest.parse, {"inputs": {"source_sentence": "s", "sentences": ["a"] * 5}},
     "--max-client-batch-size", 422),
    (RerankRequest.parse, {"texts": ["a"]}, "query", 422),
    (RerankRequest.parse, {"query": "q", "texts": []}, "texts", 422),
    (RerankRequest.parse, {"query": "q", "texts": ["a"], "raw_scores": "yes"}, "raw_scores", 422),
])
def test_refusals_name_the_field(parse, data, field, status):
    err = refused(parse, data)
    assert err.status == status
    assert err.message.startswith(field) or field in err.message


@pytest.mark.parametrize("head, item, expected", [
    ("sequence_classification", "a text", "a text"),
    ("sequence_classification", ["a", "b"], ("a", "b")),
    ("sequence_classification", {"text": "a", "text_pair": "b"}, ("a", "b")),
    ("regression", {"text": "a"}, "a"),
    ("token_classification", ["John", "lives"], ["John", "lives"]),
    ("question_answering", {"question": "q", "context": "c"}, ("q", "c")),
    ("multiple_choice", {"context": "c", "endings": ["x", "y"]}, ("c", "", ["x", "y"])),
])
def test_predict_inputs_by_head(head, item, expected):
    assert predict_input(head, item, "inputs[0]", SETTINGS) == expected


@pytest.mark.parametrize("head, item, field, status", [
    ("sequence_classification", {"text": "a", "text_pair": "x" * 51}, "inputs[0].text_pair", 413),
    ("sequence_classification", ["a", "b", "c"], "inputs[0]", 422),
    ("token_classification", ["word"] * 13, "--max-input-chars", 413),  # 52 characters in all
    ("question_answering", {"question": "q"}, "inputs[0]", 422),
    ("question_answering", {"question": "q", "context": "x" * 51}, "inputs[0].context", 413),
    ("multiple_choice", {"context": "c", "endings": ["e"] * 5}, "inputs[0].endings", 422),
    ("multiple_choice", {"context": "c", "endings": ["e"], "start": 3}, "inputs[0].start", 422),
])
def test_predict_input_refusals(head, item, field, status):
    with pytest.raises(RequestError) as caught:
        predict_input(head, item, "inputs[0]", SETTINGS)
    assert caught.value.status == status and field in caught.value.message
