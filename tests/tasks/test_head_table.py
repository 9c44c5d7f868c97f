"""The head table (`tasks.heads.HEADS`): complete, consistent with the tasks, the model roles, the ONNX outputs and
the serving parsers, and each row's claims about its model's outputs true of the model it names."""
from __future__ import annotations

import pytest
import torch

from bertforge.model.auto import FAMILY_MODULES, ROLES, family
from bertforge.tasks.heads import CHUNKINGS, GOLDS, HEADS, INPUT_KINDS, Head
from bertforge.tasks.registry import TASKS

ROWS = list(HEADS.values())
ids = [h.name for h in ROWS]


def test_every_task_head_is_a_row_and_every_row_is_used():
    assert {spec.head for spec in TASKS.values()} <= set(HEADS)
    assert set(HEADS) <= {spec.head for spec in TASKS.values()}, "a row no task uses"
    assert all(name == row.name for name, row in HEADS.items())


@pytest.mark.parametrize("row", ROWS, ids=ids)
def test_row_fields_are_known_values(row: Head):
    assert row.model_role in ROLES
    assert row.inputs in INPUT_KINDS and row.gold in GOLDS
    assert row.chunking is None or row.chunking in CHUNKINGS
    assert row.onnx_outputs and len(set(row.onnx_outputs)) == len(row.onnx_outputs)
    assert all(callable(f) for f in (row.encode, row.decode, row.score))
    assert row.max_length > 0
    assert not row.regression or (row.per_text and not row.labelled), "a regression head predicts one number per text"
    assert not row.report or row.labelled, "a per-class report needs the class names"


@pytest.mark.parametrize("model_type", sorted(FAMILY_MODULES))
def test_every_family_has_a_class_for_every_rows_role(model_type):
    classes = family(model_type).classes
    assert {row.model_role for row in ROWS} <= set(classes)


def test_derived_tables_follow_the_rows():
    from bertforge.serving.onnx_backend import OUTPUTS
    from bertforge.tasks.long_inputs import CHUNKED_HEADS
    from bertforge.tasks.metrics.report import REPORT_HEADS
    assert {name: OUTPUTS[name] for name in HEADS} == {name: row.onnx_outputs for name, row in HEADS.items()}
    assert set(CHUNKED_HEADS) == {"sequence_classification", "regression", "question_answering",
                                  "token_classification"}
    assert set(REPORT_HEADS) == {"sequence_classification", "token_classification"}


def test_the_rows_say_what_the_code_decided_by_name_before():
    """The values the scattered name comparisons gave, pinned (a row edited by mistake changes behaviour)."""
    assert {n: h.model_role for n, h in HEADS.items()}["regression"] == "sequence_classification"
    assert {n: h.max_length for n, h in HEADS.items()} == {
        "sequence_classification": 128, "regression": 128, "token_classification": 128, "question_answering": 384,
        "multiple_choice": 128}
    assert [n for n, h in HEADS.items() if h.per_token] == ["token_classification", "question_answering"]
    assert [n for n, h in HEADS.items() if h.labelled] == ["sequence_classification", "token_classification"]
    assert [n for n, h in HEADS.items() if h.per_text] == ["sequence_classification", "regression"]
    assert HEADS["regression"].pair_scorer(None) and HEADS["sequence_classification"].pair_scorer(["no", "yes"])
    assert not HEADS["sequence_classification"].pair_scorer(["a", "b", "c"])
    assert not any(HEADS[n].pair_scorer(["a", "b"]) for n in ("token_classification", "multiple_choice"))


@pytest.mark.parametrize("row", ROWS, ids=ids)
def test_the_rows_sample_is_a_served_input_of_its_kind(row: Head):
    """The warm-up sample parses as a /predict input of the head (what the server sends at start-up)."""
    from bertforge.serving.limits import ServeSettings
    from bertforge.serving.requests import predict_input
    sample = row.sample if not isinstance(row.sample, tuple) else list(row.sample)
    if row.inputs == "choices":
        sample = {"context": row.sample[0], "start": row.sample[1], "endings": row.sample[2]}
    elif row.inputs == "question":
        sample = {"question": row.sample[0], "context": row.sample[1]}
    parsed = predict_input(row.name, sample, "inputs[0]", ServeSettings())
    assert parsed == row.sample or (row.inputs == "choices" and tuple(parsed) == tuple(row.sample))


def _model_outputs(row: Head, seq: int = 7, batch: int = 3):
    """A tiny BERT of the row's role run on a padded batch (choices: 2 per example)."""
    from bertforge import BertConfig
    config = BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=32, max_position_embeddings=32,
                        id2label={0: "score"} if row.regression else {0: "A", 1: "B", 2: "C"})
    torch.manual_seed(0)
    model = family("bert").model_class(row.model_role)(config).eval()
    shape = (batch, 2, seq) if row.inputs == "choices" else (batch, seq)
    ids = torch.randint(5, 50, shape)
    mask = torch.ones(shape, dtype=torch.long)
    mask[..., -2:] = 0
    with torch.no_grad():
        return model(input_ids=ids, attention_mask=mask, token_type_ids=torch.zeros_like(ids)), batch, seq


@pytest.mark.parametrize("row", ROWS, ids=ids)
def test_the_rows_outputs_are_what_its_model_returns(row: Head):
    """`onnx_outputs` names the model's output tensors (the export reads them by these names) and `per_token`
    says whether they have a row per token (the graph's sequence axis)."""
    out, batch, seq = _model_outputs(row)
    tensors = {name for name in ("logits", "start_logits", "end_logits")
               if isinstance(getattr(out, name, None), torch.Tensor)}
    assert tensors == set(row.onnx_outputs)
    for name in row.onnx_outputs:
        t = getattr(out, name)
        assert t.shape[0] == batch
        assert (t.ndim >= 2 and t.shape[1] == seq) == row.per_token, name
        if row.regression:
            assert t.shape == (batch, 1)


# question answering decodes against its examples' contexts: tests/tasks/test_evaluation.py runs it
@pytest.mark.parametrize("row", [r for r in ROWS if r.gold != "answers"], ids=lambda r: r.name)
def test_the_rows_decode_takes_what_the_model_returns(row: Head):
    """`decode` of the row applied to outputs shaped as `run_model` hands them on: one prediction per input."""
    from bertforge.tasks.evaluation import InferenceSettings
    out, batch, seq = _model_outputs(row)
    logits = out.logits.numpy()
    features = [{"word_ids": [None] + list(range(seq - 2)) + [None], "num_words": seq - 2} for _ in range(batch)]
    predictions = row.decode([], features, list(logits), ["A", "B", "C"], InferenceSettings())
    assert len(predictions) == batch
    if row.per_token:
        assert all(len(p) == seq - 2 and set(p) <= {"A", "B", "C"} for p in predictions)
    elif row.regression:
        assert all(isinstance(p, float) for p in predictions)
    else:
        assert all(isinstance(p, int) and 0 <= p < logits.shape[-1] for p in predictions)
