"""Metrics: hand-checked cases (arithmetic in the comments) and independent references on real data."""
from __future__ import annotations

import gzip
import json
import math
import random
import re
import string
from collections import Counter
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bertforge.tasks import (
    TASKS,
    accuracy,
    align_predictions_to_words,
    exact_match,
    f1_binary,
    glue_metrics,
    matthews_corrcoef,
    mnli_metrics,
    ner_metrics,
    normalize_answer,
    pearson,
    spearman,
    squad_v1_evaluate,
    squad_v2_evaluate,
    token_f1,
)
from bertforge.tasks.readers import SquadAnswer, SquadExample

from needs import require_module

# --------------------------------------------------------------------------- GLUE metrics


def test_hand_checked_binary_metrics() -> None:
    preds, labels = [1, 1, 0, 1, 0], [1, 0, 0, 1, 1]
    # right at positions 0, 2, 3 -> 3/5; positive class 1: tp=2 (0, 3), fp=1 (1), fn=1 (4)
    assert accuracy(preds, labels) == pytest.approx(3 / 5)
    assert f1_binary(preds, labels) == pytest.approx(2 * 2 / (2 * 2 + 1 + 1))  # 2/3
    assert f1_binary(["1", "1", "0"], ["1", "0", "0"]) == pytest.approx(2 / 3)  # label names work too
    assert f1_binary([0, 0], [0, 0]) == 0.0  # no positive anywhere: undefined -> 0, as sklearn
    # MCC: tp=1, fp=1, tn=2, fn=0 -> (tp*tn - fp*fn) / sqrt((tp+fp)(tp+fn)(tn+fp)(tn+fn)) = 2/sqrt(2*1*3*2)
    assert matthews_corrcoef([1, 1, 0, 0], [1, 0, 0, 0]) == pytest.approx(2 / math.sqrt(12))
    assert matthews_corrcoef([1, 1, 1], [1, 0, 1]) == 0.0  # constant prediction: undefined -> 0
    with pytest.raises(ValueError, match="2 predictions for 3 labels"):
        accuracy([1, 0], [1, 0, 1])
    with pytest.raises(ValueError, match="no predictions"):
        accuracy([], [])


# Independent references, written here from the textbook definitions in exact arithmetic (Fractions), so
# they share no code with the library implementations (sklearn / scipy) they check.
def ref_accuracy(preds, labels) -> Fraction:
    return Fraction(sum(p == y for p, y in zip(preds, labels)), len(labels))


def ref_f1(preds, labels, positive=1) -> Fraction:
    tp = sum(p == positive and y == positive for p, y in zip(preds, labels))
    fp = sum(p == positive and y != positive for p, y in zip(preds, labels))
    fn = sum(p != positive and y == positive for p, y in zip(preds, labels))
    return Fraction(2 * tp, 2 * tp + fp + fn) if tp else Fraction(0)


def ref_mcc(preds, labels) -> float:
    """Gorodkin's K-class MCC from the confusion matrix: cov(y, p) / sqrt(cov(p, p) cov(y, y))."""
    classes = sorted(set(preds) | set(labels))
    n = len(labels)
    correct = sum(p == y for p, y in zip(preds, labels))
    t = {k: sum(y == k for y in labels) for k in classes}
    q = {k: sum(p == k for p in preds) for k in classes}
    cov_yp = correct * n - sum(t[k] * q[k] for k in classes)
    cov_pp = n * n - sum(q[k] ** 2 for k in classes)
    cov_yy = n * n - sum(t[k] ** 2 for k in classes)
    if cov_pp == 0 or cov_yy == 0:
        return 0.0
    return cov_yp / math.sqrt(cov_pp * cov_yy)


def ref_pearson(x, y) -> float:
    x, y = [Fraction(v) for v in x], [Fraction(v) for v in y]
    mx, my = sum(x) / len(x), sum(y) / len(y)
    sxy = sum((a - mx) * (b - my) for a, b in zip(x, y))
    sxx, syy = sum((a - mx) ** 2 for a in x), sum((b - my) ** 2 for b in y)
    if sxx == 0 or syy == 0:
        return math.nan
    # r squared as an exact fraction, then one square root: subnormal inputs (hypothesis draws them) would
    # underflow a float sqrt(sxx * syy) to 0
    return math.copysign(math.sqrt(sxy * sxy / (sxx * syy)), sxy) if sxy else 0.0


def ref_ranks(values) -> list[Fraction]:
    """Rank of v = (#smaller) + (#equal + 1) / 2: the mean of the 1-based positions its ties occupy."""
    counts, smaller, seen = Counter(values), {}, 0
    for v in sorted(counts):
        smaller[v], seen = seen, seen + counts[v]
    return [smaller[v] + Fraction(counts[v] + 1, 2) for v in values]


def ref_spearman(x, y) -> float:
    return ref_pearson(ref_ranks(x), ref_ranks(y))


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 2), st.integers(0, 2)), min_size=1, max_size=40))
def test_classification_metrics_equal_the_definitions(pairs: list[tuple[int, int]]) -> None:
    preds, labels = [p for p, _ in pairs], [y for _, y in pairs]
    assert accuracy(preds, labels) == pytest.approx(float(ref_accuracy(preds, labels)), abs=1e-15)
    assert matthews_corrcoef(preds, labels) == pytest.approx(ref_mcc(preds, labels), abs=1e-12)
    assert f1_binary(preds, labels, positive=2) == pytest.approx(float(ref_f1(preds, labels, 2)), abs=1e-15)
    bp, by = [min(p, 1) for p in preds], [min(y, 1) for y in labels]
    assert f1_binary(bp, by) == pytest.approx(float(ref_f1(bp, by)), abs=1e-15)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 5), st.floats(0, 5, allow_nan=False)), min_size=1, max_size=40))
def test_correlations_equal_the_definitions(pairs: list[tuple[int, float]]) -> None:
    x = [float(a) for a, _ in pairs]  # few distinct values: many ties
    y = [b for _, b in pairs]
    r, rho = ref_pearson(x, y), ref_spearman(x, y)
    if math.isnan(r):  # a constant side (or a single pair): undefined, NaN, never a small number
        assert math.isnan(pearson(x, y)) and math.isnan(spearman(x, y))
        return
    assert pearson(x, y) == pytest.approx(r, abs=1e-9)
    assert spearman(x, y) == pytest.approx(rho, abs=1e-9)


def test_constant_side_gives_nan_not_a_rounding_residue() -> None:
    # 0.1 * 3 has a mean that is not exactly 0.1, so a naive formula gives a tiny non-zero variance
    for constant in ([0.1, 0.1, 0.1], [1e300] * 4, [7] * 2, [0.5]):
        other = list(range(len(constant)))
        assert math.isnan(pearson(constant, other)) and math.isnan(spearman(other, constant))
    assert glue_metrics("stsb", [3.0, 3.0, 3.0], [1.0, 2.0, 5.0])["corr"] != pytest.approx(0.0)
    with pytest.raises(ValueError, match="finite"):
        pearson([1.0, float("nan")], [1.0, 2.0])


def _tsv(path, column: int) -> list[str]:
    lines = path.read_text(encoding="utf-8").splitlines()
    return [line.split("\t")[column] for line in lines if line]


def test_glue_metrics_on_real_dev_labels_with_random_predictions(shared_data) -> None:
    rng = np.random.default_rng(0)
    # CoLA (MCC) and MRPC (F1, accuracy): the real dev labels, predictions right ~70% of the time
    cola = [int(v) for v in _tsv(shared_data / "glue" / "CoLA" / "dev.tsv", 1)]
    mrpc = [int(v) for v in _tsv(shared_data / "glue" / "MRPC" / "dev.tsv", 0)[1:]]
    assert (len(cola), len(mrpc)) == (1043, 408)
    for labels in (cola, mrpc):
        preds = [y if rng.random() < 0.7 else 1 - y for y in labels]
        assert matthews_corrcoef(preds, labels) == pytest.approx(ref_mcc(preds, labels), abs=1e-12)
        assert f1_binary(preds, labels) == pytest.approx(float(ref_f1(preds, labels)), abs=1e-15)
        assert accuracy(preds, labels) == pytest.approx(float(ref_accuracy(preds, labels)), abs=1e-15)
    # STS-B: the real gold similarity scores (many ties), noisy predictions rounded to create ties too
    gold = [float(v) for v in _tsv(shared_data / "glue" / "STS-B" / "dev.tsv", 9)[1:]]
    assert len(gold) == 1500
    preds = [round(g + rng.normal(0, 1.2), 1) for g in gold]
    out = glue_metrics("stsb", preds, gold)
    assert out["pearson"] == pytest.approx(ref_pearson(preds, gold), abs=1e-12)
    assert out["spearman"] == pytest.approx(ref_spearman(preds, gold), abs=1e-12)


def test_hand_checked_correlations() -> None:
    # y = 2x + 1 exactly -> r = 1; ranks of [1, 2, 2, 3] are [1, 2.5, 2.5, 4]
    assert pearson([1, 2, 3, 4], [3, 5, 7, 9]) == pytest.approx(1.0)
    assert spearman([1, 2, 3, 4], [1, 8, 27, 64]) == pytest.approx(1.0)  # monotone, not linear
    assert pearson([1, 2, 3], [3, 2, 1]) == pytest.approx(-1.0)


def test_glue_metrics_per_task() -> None:
    assert set(glue_metrics("CoLA", [1, 0], [1, 0])) == {"mcc"}
    mrpc = glue_metrics("mrpc", [1, 1, 0, 1, 0], [1, 0, 0, 1, 1])
    assert mrpc == pytest.approx({"accuracy": 0.6, "f1": 2 / 3, "acc_and_f1": (0.6 + 2 / 3) / 2})
    assert set(glue_metrics("qqp", [1], [1])) == {"accuracy", "f1", "acc_and_f1"}
    stsb = glue_metrics("STS-B", [0.1, 0.4, 0.2, 5.0], [0.0, 2.0, 1.0, 4.0])
    assert stsb["spearman"] == pytest.approx(1.0) and stsb["corr"] == pytest.approx((stsb["pearson"] + 1) / 2)
    for task in ("sst2", "mnli", "mnli-mm", "qnli", "rte", "wnli"):
        assert glue_metrics(task, [0, 1], [0, 0]) == {"accuracy": 0.5}
    assert mnli_metrics([0, 1], [0, 1], [2], [1]) == {"accuracy_matched": 1.0, "accuracy_mismatched": 0.0}
    with pytest.raises(KeyError):
        glue_metrics("imdb", [0], [0])


def test_registry_main_metric_is_reported() -> None:
    for name in ("sst2", "cola", "mrpc", "stsb", "qqp", "mnli", "qnli", "rte", "wnli", "swag", "classification"):
        spec = TASKS[name]
        preds = [0.5, 1.5, 3.0] if spec.head == "regression" else [0, 1, 1]
        assert spec.main_metric in spec.metric(preds, [0.0, 2.0, 2.5] if spec.head == "regression" else [0, 1, 0])
    data = [SquadExample("q", "?", "c", (SquadAnswer("a b", 0),))]
    assert TASKS["squad"].main_metric in TASKS["squad"].metric({"q": "a b"}, data)
    assert TASKS["squad2"].main_metric in TASKS["squad2"].metric({"q": "a b"}, data, na_probs={"q": 0.1})
    assert TASKS["conll2003"].main_metric in TASKS["conll2003"].metric([["B-PER"]], [["B-PER"]])
    assert (TASKS["cola"].main_metric, TASKS["stsb"].main_metric, TASKS["mrpc"].main_metric) == ("mcc", "spearman", "f1")


# --------------------------------------------------------------------------- SQuAD


def test_normalize_answer() -> None:
    # lower -> drop ASCII punctuation ("-" too, so words join) -> drop a/an/the as words -> squash spaces
    assert normalize_answer("The  Quick, brown-fox!") == "quick brownfox"
    assert normalize_answer("An apple a day") == "apple day"
    assert normalize_answer("theater (Athens)") == "theater athens"  # 'the' inside a word stays
    assert normalize_answer("Nobel Prize–winning") == "nobel prize–winning"  # an en dash is not ASCII punctuation
    assert exact_match("the Denver Broncos.", "Denver Broncos") == 1


def test_token_f1_partial_overlap_and_empties() -> None:
    # pred "Santa Clara" vs gold "Santa Clara, California": same=2, P=2/2, R=2/3 -> F1 = 2*1*(2/3)/(5/3) = 0.8
    assert token_f1("Santa Clara", "Santa Clara, California") == pytest.approx(0.8)
    # tokens count with multiplicity: pred [b, b] vs gold [b]: same=1, P=1/2, R=1 -> 2*(1/2)/(3/2) = 2/3
    assert token_f1("b b", "b") == pytest.approx(2 / 3)
    # pred [x, b, b] vs gold [b, y]: same=1, P=1/3, R=1/2 -> 2*(1/6)/(5/6) = 0.4
    assert token_f1("x b b", "b y") == pytest.approx(0.4)
    assert token_f1("", "") == 0.0 and token_f1("", "", v2=True) == 1.0  # v1.1 vs v2.0
    assert token_f1("the", "", v2=True) == 1.0  # "the" normalises to nothing
    assert token_f1("Broncos", "", v2=True) == 0.0


def three_questions() -> list[SquadExample]:
    def q(qid: str, *golds: str) -> SquadExample:
        return SquadExample(qid, "?", "ctx", tuple(SquadAnswer(g, 0) for g in golds))

    return [q("q1", "Denver Broncos", "The Denver Broncos"),
            q("q2", "Santa Clara, California"),
            q("q3", "Carolina Panthers", "the Panthers")]


def test_squad_v1_three_questions_by_hand() -> None:
    preds = {"q1": "the Denver Broncos.", "q2": "Santa Clara", "q3": "Panthers of Carolina", "zzz": "ignored"}
    # q1: normalises to "denver broncos" = gold -> EM 1, F1 1
    # q2: EM 0; F1 0.8 (see the partial-overlap test)
    # q3: vs "carolina panthers": same=2, P=2/3, R=1 -> 0.8; vs "panthers": same=1, P=1/3, R=1 -> 0.5; max 0.8
    # EM = 100 * 1/3 = 33.33; F1 = 100 * (1 + 0.8 + 0.8)/3 = 86.67
    assert squad_v1_evaluate(preds, three_questions()) == pytest.approx({"exact_match": 100 / 3, "f1": 260 / 3})
    # a missing prediction scores 0 and still counts: EM 100*1/3, F1 100*1/3
    assert squad_v1_evaluate({"q1": "Denver Broncos"}, three_questions()) == pytest.approx(
        {"exact_match": 100 / 3, "f1": 100 / 3})


def test_squad_v1_accepts_raw_json() -> None:
    raw = {"version": "1.1", "data": [{"title": "t", "paragraphs": [{"context": "c", "qas": [
        {"id": "a", "question": "?", "answers": [{"text": "Broncos", "answer_start": 0}]}]}]}]}
    assert squad_v1_evaluate({"a": "broncos"}, raw) == {"exact_match": 100.0, "f1": 100.0}
    assert squad_v1_evaluate({"a": "broncos"}, raw["data"])["f1"] == 100.0


def v2_data() -> list[SquadExample]:
    def q(qid: str, gold: str | None) -> SquadExample:
        answers = (SquadAnswer(gold, 0),) if gold else ()
        return SquadExample(qid, "?", "ctx", answers, is_impossible=gold is None)

    return [q("q1", "Denver Broncos"), q("q2", "the Carolina Panthers"), q("q3", None), q("q4", None)]


V2_PREDS = {"q1": "Denver Broncos", "q2": "Panthers", "q3": "Santa Clara", "q4": ""}
V2_NA = {"q1": 0.1, "q2": 0.6, "q3": 0.7, "q4": 0.2}


def test_squad_v2_two_answerable_two_unanswerable_by_hand() -> None:
    # raw per question (exact, f1): q1 (1, 1); q2 "panthers" vs "carolina panthers": (0, 2/3);
    # q3 answers an unanswerable question: (0, 0); q4 correctly empty: (1, 1)
    out = squad_v2_evaluate(V2_PREDS, v2_data())
    assert out == pytest.approx({
        "exact": 50.0, "f1": 100 * (8 / 3) / 4, "total": 4,  # (1+0+0+1)/4, (1+2/3+0+1)/4
        "HasAns_exact": 50.0, "HasAns_f1": 100 * (5 / 3) / 2, "HasAns_total": 2,
        "NoAns_exact": 50.0, "NoAns_f1": 50.0, "NoAns_total": 2,
    })
    # threshold 0.65 flips q3 (na 0.7 > 0.65) to "no answer", which is right: exact 3/4, f1 (1+2/3+1+1)/4
    flipped = squad_v2_evaluate(V2_PREDS, v2_data(), V2_NA, na_prob_thresh=0.65)
    assert flipped["exact"] == pytest.approx(75.0) and flipped["f1"] == pytest.approx(100 * 11 / 12)
    assert flipped["NoAns_exact"] == 100.0 and flipped["HasAns_f1"] == pytest.approx(100 * 5 / 6)
    # scan by increasing na: start = #unanswerable = 2 (answer nothing)
    #   q1 (0.1) +1 -> 3 (best, thresh 0.1); q4 (0.2) empty -> +0; q2 (0.6) exact +0 / f1 +2/3;
    #   q3 (0.7) non-empty on unanswerable -> -1
    # exact: best 3 at 0.1 -> 75.0; f1: 3 at 0.1, then 3 2/3 at 0.6 -> 100 * (11/3) / 4
    assert flipped["best_exact"] == pytest.approx(75.0) and flipped["best_exact_thresh"] == 0.1
    assert flipped["best_f1"] == pytest.approx(100 * 11 / 12) and flipped["best_f1_thresh"] == 0.6
    # below 0.6 also q2 becomes "no answer" and is wrong: exact (1+0+1+1)/4, f1 the same
    assert squad_v2_evaluate(V2_PREDS, v2_data(), V2_NA, na_prob_thresh=0.5)["f1"] == pytest.approx(75.0)


def test_squad_v2_threshold_scan_keeps_official_quirks() -> None:
    data = [SquadExample("a", "?", "c", (SquadAnswer("x", 0),)),
            SquadExample("b", "?", "c", (), is_impossible=True),
            SquadExample("c", "?", "c", (SquadAnswer("y", 0),))]
    preds = {"a": "x", "b": "wrong", "c": "no"}
    # a and b tie at 0.5. Start 1 (b unanswered is right). Order a, b: a +1 -> 2 beats 1 at 0.5, b -1 -> 1,
    # c +0 -> 1; so best 2/3 at 0.5 although *applying* 0.5 answers both a and b (1/3): ties are not grouped.
    first = squad_v2_evaluate(preds, data, {"a": 0.5, "b": 0.5, "c": 0.9})
    assert first["best_exact"] == pytest.approx(200 / 3) and first["best_exact_thresh"] == 0.5
    # order b, a (same values): b -1 -> 0, a +1 -> 1 (not > 1), c -> 1: best stays 1/3 at the initial 0.0
    second = squad_v2_evaluate(preds, data, {"b": 0.5, "a": 0.5, "c": 0.9})
    assert second["best_exact"] == pytest.approx(100 / 3) and second["best_exact_thresh"] == 0.0
    # A non-empty prediction on an unanswerable question counts -1 in the scan even when it normalises
    # to "" ("the"), although its own exact score is 1.
    quirk = squad_v2_evaluate({"a": "x", "b": "the", "c": "y"}, data, {"a": 0.5, "b": 0.1, "c": 0.6})
    assert quirk["exact"] == 100.0
    # start 1; b -1 -> 0; a +1 -> 1 (not > 1); c +1 -> 2 at 0.6 -> 2/3
    assert quirk["best_exact"] == pytest.approx(200 / 3) and quirk["best_exact_thresh"] == 0.6


@settings(max_examples=80, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.sampled_from(["", "x", "y z", "x y"])), min_size=1, max_size=7),
       st.randoms(use_true_random=False))
def test_squad_v2_best_matches_brute_force(questions: list[tuple[bool, str]], rng) -> None:
    data = [SquadExample(f"q{i}", "?", "c", (SquadAnswer("x y", 0),) if has else (), is_impossible=not has)
            for i, (has, _) in enumerate(questions)]
    preds = {f"q{i}": p for i, (_, p) in enumerate(questions)}
    values = [(k + 1) / 10 for k in range(len(questions))]
    rng.shuffle(values)  # distinct na_probs: no ties, so the scan equals trying every threshold
    na = {f"q{i}": v for i, v in enumerate(values)}
    out = squad_v2_evaluate(preds, data, na)
    for key in ("exact", "f1"):
        tried = [(-1.0, squad_v2_evaluate(preds, data, na, na_prob_thresh=-1.0)[key])]  # answer nothing
        tried += [(t, squad_v2_evaluate(preds, data, na, na_prob_thresh=t)[key]) for t in sorted(values)]
        best = max(score for _, score in tried)
        first_t = next(t for t, score in tried if score == pytest.approx(best))
        assert out[f"best_{key}"] == pytest.approx(best)
        assert out[f"best_{key}_thresh"] == (0.0 if first_t == -1.0 else first_t)


def test_squad_v2_needs_every_prediction() -> None:
    with pytest.raises(ValueError, match="1 questions have no prediction"):
        squad_v2_evaluate({k: v for k, v in V2_PREDS.items() if k != "q2"}, v2_data())
    with pytest.raises(ValueError, match="no na_prob"):
        squad_v2_evaluate(V2_PREDS, v2_data(), {"q1": 0.0})


# --------------------------------------------------------------------------- NER

SENT = ["John", "Smith", "visited", "New", "York", "with", "Acme", "Corp", "yesterday", "."]
GOLD = ["B-PER", "I-PER", "O", "B-LOC", "I-LOC", "O", "B-ORG", "I-ORG", "O", "O"]
PRED = ["B-PER", "I-PER", "O", "B-LOC", "I-LOC", "O", "B-MISC", "I-MISC", "B-MISC", "O"]


def test_ner_hand_checked() -> None:
    # gold entities: PER(0-1), LOC(3-4), ORG(6-7) = 3; predicted: PER(0-1) ok, LOC(3-4) ok,
    # MISC(6-7) wrong type, MISC(8) spurious = 4. P = 2/4, R = 2/3, F1 = 2*(1/2)(2/3)/(1/2+2/3) = 4/7
    out = ner_metrics([PRED], [GOLD])
    assert (out["n_gold"], out["n_pred"]) == (3, 4)
    assert out["precision"] == pytest.approx(0.5) and out["recall"] == pytest.approx(2 / 3)
    assert out["f1"] == pytest.approx(4 / 7)
    assert out["accuracy"] == pytest.approx(7 / 10)  # tokens 6, 7, 8 wrong
    assert out["per_type"]["ORG"] == {"precision": 0.0, "recall": 0.0, "f1": 0.0, "support": 1}
    assert out["per_type"]["PER"]["f1"] == 1.0


def test_ner_equals_seqeval_and_conlleval_starts() -> None:
    seqeval = require_module("seqeval.metrics")
    gold = [["O", "I-PER", "I-PER", "O"], ["B-LOC", "I-ORG"]]  # I- after O / another type starts an entity
    pred = [["O", "B-PER", "I-PER", "O"], ["B-LOC", "B-ORG"]]
    out = ner_metrics(pred, gold)
    assert out["f1"] == pytest.approx(seqeval.f1_score(gold, pred)) and out["f1"] == 1.0
    with pytest.raises(ValueError, match="align to words first"):
        ner_metrics([["O"]], [["O", "O"]])


def test_align_predictions_to_words() -> None:
    labels = ["O", "B-LOC", "I-LOC"]
    # [CLS] Wash ##ington visited [SEP] [PAD]
    word_ids = [None, 0, 0, 1, None, None]
    assert align_predictions_to_words([0, 1, 2, 0, 0, 0], word_ids, labels) == ["B-LOC", "O"]
    assert align_predictions_to_words(np.array([0, 1, 1, 0, 0, 0]), word_ids, labels) == ["B-LOC", "O"]
    # word 2 was truncated away: tagged O when the word count is known, an error otherwise
    assert align_predictions_to_words([0, 1, 0, 0], [None, 0, 1, None], labels, num_words=3) == ["B-LOC", "O", "O"]
    with pytest.raises(ValueError, match="have no token"):
        align_predictions_to_words([0, 1, 0, 0], [None, 0, 2, None], labels)


def test_sub_tokens_would_inflate_counts() -> None:
    # Word level: one gold LOC ("Washington"), predicted right -> 1 gold, 1 predicted, F1 1.
    words = ner_metrics([["B-LOC", "O"]], [["B-LOC", "O"]])
    assert (words["n_gold"], words["n_pred"], words["f1"]) == (1, 1, 1.0)
    # Scored on tokens instead (Wash ##ington visited), with the word label copied to each piece,
    # the same sentence counts two gold and two predicted entities.
    tokens = ner_metrics([["B-LOC", "B-LOC", "O"]], [["B-LOC", "B-LOC", "O"]])
    assert (tokens["n_gold"], tokens["n_pred"]) == (2, 2)
    # and a model that tags the second piece I-LOC is "wrong" at token level though right per word
    mixed = ner_metrics([["B-LOC", "I-LOC", "O"]], [["B-LOC", "B-LOC", "O"]])
    assert mixed["f1"] == 0.0
    aligned = align_predictions_to_words([0, 1, 2, 0, 0], [None, 0, 0, 1, None], ["O", "B-LOC", "I-LOC"])
    assert ner_metrics([aligned], [["B-LOC", "O"]])["f1"] == 1.0


# --------------------------------------------------------------------------- SQuAD on the real dev set

def _squad_dev(shared_data, every: int = 4) -> dict:
    """The real SQuAD v1.1 dev set, every `every`-th question of it (all 48 articles), plus the three whose
    golds include "." (see the torchmetrics test)."""
    with gzip.open(shared_data / "squad" / "dev-v1.1.json.gz", "rt", encoding="utf-8") as handle:
        dataset = json.load(handle)
    seen = 0
    for article in dataset["data"]:
        for par in article["paragraphs"]:
            kept = []
            for qa in par["qas"]:
                if seen % every == 0 or any(a["text"] == "." for a in qa["answers"]):
                    kept.append(qa)
                seen += 1
            par["qas"] = kept
    assert seen == 10570
    return dataset


def _questions(dataset: dict) -> list[tuple[str, str, list[str]]]:
    return [(qa["id"], par["context"], [a["text"] for a in qa["answers"]])
            for article in dataset["data"] for par in article["paragraphs"] for qa in par["qas"]]


def _random_answer(rng: random.Random, context: str, golds: list[str]) -> str:
    """What a reader might answer: the gold itself, restyled, cut, widened, a random span, a dot or nothing."""
    gold = rng.choice(golds) if golds else ""
    words = context.split()
    start = rng.randrange(len(words))
    kind = rng.randrange(8)
    if kind == 0 or not gold:
        return " ".join(words[start:start + rng.randint(1, 6)])
    if kind == 1:
        return gold
    if kind == 2:
        return rng.choice(["The ", "a ", ""]) + gold.upper() + rng.choice([".", "!", ",", ""])
    if kind == 3:
        return " ".join(gold.split()[: max(1, len(gold.split()) // 2)])
    if kind == 4:
        at = context.find(gold)
        return context[max(0, at - rng.randint(0, 15)): at + len(gold) + rng.randint(0, 15)] if at >= 0 else gold
    if kind == 5:
        return gold + " " + gold.split()[0]  # a repeated token: the bag-of-tokens count matters
    return rng.choice(["", ".", "the", " "]) if kind == 6 else " ".join(reversed(gold.split()))


PUNCTUATION = frozenset(string.punctuation)


def _norm(text: str) -> str:
    """The SQuAD normalisation, written again here from the official scripts' description."""
    text = "".join(c for c in text.lower() if c not in PUNCTUATION)
    return " ".join(re.sub(r"\b(a|an|the)\b", " ", text).split())


@pytest.mark.slow
def test_squad_v1_equals_torchmetrics_on_the_real_dev_set(shared_data) -> None:
    from torchmetrics.functional.text import squad as tm_squad
    dataset = _squad_dev(shared_data)
    questions = _questions(dataset)
    assert len(questions) > 2600
    rng = random.Random(0)
    preds = {qid: _random_answer(rng, context, golds) for qid, context, golds in questions}
    # torchmetrics gives F1 = 1 when prediction and gold both normalise to nothing (the v2.0 rule); the
    # official v1.1 script gives 0. Three real dev questions have "." among their golds, so a prediction
    # that normalises to nothing there is where the two must differ, by exactly 1 question's F1 each.
    both_empty = [qid for qid, _, golds in questions
                  if not _norm(preds[qid]) and any(not _norm(g) for g in golds)]
    dotted = [qid for qid, _, golds in questions if "." in golds]
    assert len(dotted) == 3
    preds[dotted[0]], preds[dotted[1]] = ".", "the"  # make sure the case occurs
    both_empty = sorted(set(both_empty) | set(dotted[:2]))

    ours = squad_v1_evaluate(preds, dataset)
    theirs = tm_squad([{"prediction_text": p, "id": q} for q, p in preds.items()],
                      [{"answers": {"text": golds, "answer_start": [0] * len(golds)}, "id": qid}
                       for qid, _, golds in questions])
    n = len(questions)
    assert 0 < ours["exact_match"] < 100 and 0 < ours["f1"] < 100
    # torchmetrics accumulates in float32: thousands of terms give it about 1e-5 relative error
    assert ours["exact_match"] == pytest.approx(float(theirs["exact_match"]), rel=2e-5)
    assert ours["f1"] + 100 * len(both_empty) / n == pytest.approx(float(theirs["f1"]), rel=2e-5)
    # and question by question on a sample (float32 per question: 1e-6)
    for qid, _, golds in rng.sample(questions, 60):
        one = [{"answers": {"text": golds, "answer_start": [0] * len(golds)}, "id": qid}]
        mine = squad_v1_evaluate({qid: preds[qid]}, {"data": [{"paragraphs": [{"qas": [
            {"id": qid, "answers": [{"text": g} for g in golds]}]}]}]})
        ref = tm_squad({"prediction_text": preds[qid], "id": qid}, one)
        assert mine["exact_match"] == float(ref["exact_match"]), (preds[qid], golds)
        expected_f1 = float(ref["f1"]) - (100.0 if qid in both_empty else 0.0)
        assert mine["f1"] == pytest.approx(expected_f1, abs=1e-4), (preds[qid], golds)


def _v2_reference(dataset: dict, preds: dict[str, str], na_probs: dict[str, float] | None,
                  thresh: float = 1.0) -> dict[str, float]:
    """SQuAD v2.0's official evaluation, written from its specification (not with our code):

    gold answers that normalise to nothing are dropped and an unanswerable question's gold is ""; EM is
    normalised equality; F1 is the token-bag F1, except that if either side has no tokens it is 1 when both
    have none and 0 otherwise; a question whose no-answer probability exceeds `thresh` is answered "" (so
    scores 1 iff it has no answer); results are means over all questions, answerable (HasAns) and not
    (NoAns), x100. The best threshold walks questions by increasing no-answer probability (stable, ties
    not grouped) from a start of "every question answered empty" (= #NoAns right), adding an answerable
    question's raw score or -1 for a non-empty prediction on an unanswerable one, keeping the first
    strictly-best point and its probability (0.0 if nothing beats the start)."""
    raw_exact, raw_f1, has_ans = {}, {}, {}
    for qid, _, answers in _questions(dataset):
        has_ans[qid] = bool(answers)
        golds = [a for a in answers if _norm(a)] or [""]
        pred_tokens = _norm(preds[qid]).split()
        raw_exact[qid] = max(float(_norm(g) == _norm(preds[qid])) for g in golds)
        f1s = []
        for g in golds:
            gold_tokens = _norm(g).split()
            if not gold_tokens or not pred_tokens:
                f1s.append(float(gold_tokens == pred_tokens))
                continue
            overlap = sum(min(gold_tokens.count(t), pred_tokens.count(t)) for t in set(gold_tokens))
            f1s.append(0.0 if overlap == 0 else 2 * overlap / (len(gold_tokens) + len(pred_tokens)))
        raw_f1[qid] = max(f1s)
    probs = na_probs or {qid: 0.0 for qid in preds}

    def after_threshold(raw):
        return {q: float(not has_ans[q]) if probs[q] > thresh else s for q, s in raw.items()}

    exact, f1 = after_threshold(raw_exact), after_threshold(raw_f1)
    out: dict[str, float] = {}
    for prefix, qids in (("", list(exact)), ("HasAns_", [q for q in exact if has_ans[q]]),
                         ("NoAns_", [q for q in exact if not has_ans[q]])):
        if qids:
            out.update({f"{prefix}exact": 100 * math.fsum(exact[q] for q in qids) / len(qids),
                        f"{prefix}f1": 100 * math.fsum(f1[q] for q in qids) / len(qids),
                        f"{prefix}total": len(qids)})
    if na_probs is not None:
        for name, raw in (("exact", raw_exact), ("f1", raw_f1)):
            score = best = float(sum(not v for v in has_ans.values()))
            best_at = 0.0
            for qid in sorted(na_probs, key=lambda q: na_probs[q]):
                score += raw[qid] if has_ans[qid] else (-1.0 if preds[qid] else 0.0)
                if score > best:
                    best, best_at = score, na_probs[qid]
            out[f"best_{name}"], out[f"best_{name}_thresh"] = 100 * best / len(raw), best_at
    return out


@pytest.mark.slow
def test_squad_v2_equals_the_official_definition_on_real_questions(shared_data) -> None:
    rng = random.Random(1)
    dataset = _squad_dev(shared_data)
    # Real questions; a random third made unanswerable (v2.0 dev itself is not in the shared data).
    for article in dataset["data"]:
        for par in article["paragraphs"]:
            for qa in par["qas"]:
                if rng.random() < 1 / 3:
                    qa["answers"], qa["is_impossible"] = [], True
    questions = _questions(dataset)
    preds = {qid: ("" if rng.random() < 0.3 else _random_answer(rng, context, golds))
             for qid, context, golds in questions}
    # no-answer probabilities from a half-decent model (higher where there is no answer), on a coarse grid:
    # the best threshold lies inside, and many ties, which the scan must walk in the given order
    na_probs = {qid: round(rng.betavariate(2, 5) if golds else rng.betavariate(5, 2), 2)
                for qid, _, golds in questions}
    no_ans = sum(not golds for _, _, golds in questions)
    assert 0.25 < no_ans / len(questions) < 0.4
    for probs, thresh in ((None, 1.0), (na_probs, 1.0), (na_probs, 0.5), (na_probs, 0.0)):
        ours = squad_v2_evaluate(preds, dataset, probs, na_prob_thresh=thresh)
        reference = _v2_reference(dataset, preds, probs, thresh)
        assert set(ours) == set(reference)
        for key, value in reference.items():
            assert ours[key] == pytest.approx(value, abs=1e-9), (key, thresh)
    assert 0 < reference["best_f1_thresh"] < 1 and 0 < reference["best_exact_thresh"] < 1


# --------------------------------------------------------------------------- NER on real CoNLL-2003 tags

def _conll_tags(path, limit: int) -> list[list[str]]:
    sentences, current = [], []
    for line in path.read_text(encoding="utf-8").splitlines():
        parts = line.split()
        if not parts or parts[0] == "-DOCSTART-":
            if current:
                sentences.append(current)
                current = []
                if len(sentences) == limit:
                    break
            continue
        current.append(parts[-1])
    return sentences


def _chunks(tags: list[str]) -> set[tuple[int, int, str]]:
    """conlleval's chunks: a chunk ends before B, O or a type change; one starts at B, or at I after O or
    after another type (so a stray I- opens a chunk)."""
    found, start, prev_tag, prev_type = set(), None, "O", ""
    for i, tag in enumerate(tags + ["O"]):
        kind, _, typ = tag.partition("-")
        ends = prev_tag != "O" and (kind in ("B", "O") or typ != prev_type)
        starts = kind == "B" or (kind == "I" and (prev_tag == "O" or typ != prev_type))
        if ends:
            found.add((start, i - 1, prev_type))
        if starts:
            start = i
        prev_tag, prev_type = kind, typ
    return found


def _corrupt(rng: random.Random, tags: list[str], rate: float) -> list[str]:
    choices = ["O"] + [f"{p}-{t}" for p in "BI" for t in ("PER", "LOC", "ORG", "MISC")]
    return [rng.choice(choices) if rng.random() < rate else t for t in tags]


@pytest.mark.slow
def test_ner_equals_conlleval_counts_and_nervaluate_on_real_tags(shared_data) -> None:
    from nervaluate import Evaluator
    gold = _conll_tags(shared_data / "conll2003" / "valid.txt", 800)
    assert len(gold) == 800 and any(t.startswith("B-") for s in gold for t in s)
    rng = random.Random(2)
    for rate in (0.03, 0.15):
        pred = [_corrupt(rng, s, rate) for s in gold]
        ours = ner_metrics(pred, gold)
        # conlleval, counted here
        g = [{(i, *c) for c in _chunks(s)} for i, s in enumerate(gold)]
        p = [{(i, *c) for c in _chunks(s)} for i, s in enumerate(pred)]
        gold_set, pred_set = set().union(*g), set().union(*p)
        correct = len(gold_set & pred_set)
        precision, recall = correct / len(pred_set), correct / len(gold_set)
        assert (ours["n_gold"], ours["n_pred"]) == (len(gold_set), len(pred_set))
        assert ours["precision"] == pytest.approx(precision, abs=1e-12)
        assert ours["recall"] == pytest.approx(recall, abs=1e-12)
        assert ours["f1"] == pytest.approx(2 * precision * recall / (precision + recall), abs=1e-12)
        tokens = [(a, b) for ps, gs in zip(pred, gold) for a, b in zip(ps, gs)]
        assert ours["accuracy"] == pytest.approx(sum(a == b for a, b in tokens) / len(tokens), abs=1e-12)
        for typ, scores in ours["per_type"].items():
            right = sum(c[3] == typ for c in gold_set & pred_set)
            n_gold = sum(c[3] == typ for c in gold_set)
            n_pred = sum(c[3] == typ for c in pred_set)
            assert scores["support"] == n_gold
            assert scores["precision"] == pytest.approx(right / n_pred if n_pred else 0.0, abs=1e-12)
            assert scores["recall"] == pytest.approx(right / n_gold if n_gold else 0.0, abs=1e-12)
        # nervaluate's strict mode (exact boundaries and type) is the same entity-level score
        results = Evaluator(gold, pred, tags=["PER", "LOC", "ORG", "MISC"], loader="list").evaluate()
        strict = results["overall"]["strict"]
        assert (strict.correct, strict.actual, strict.possible) == (correct, len(pred_set), len(gold_set))
        assert ours["f1"] == pytest.approx(strict.f1, abs=1e-12)
        for typ, by_mode in results["entities"].items():
            assert ours["per_type"][typ]["f1"] == pytest.approx(by_mode["strict"].f1, abs=1e-12), typ
