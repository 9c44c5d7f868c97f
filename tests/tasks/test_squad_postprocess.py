"""Post-processing alone: logits that point at the gold tokens must give back the gold answer texts."""
from __future__ import annotations

import numpy as np
import pytest

from bertforge.tasks import read_squad, squad_v1_evaluate, squad_v2_evaluate
from bertforge.tasks.features import encode_squad
from bertforge.tasks.readers import SquadAnswer, SquadExample
from bertforge.tasks.squad_postprocess import postprocess_squad


@pytest.fixture(scope="module")
def tokenizer(minilm_dir):
    from bertforge.tokenization import BertTokenizer
    return BertTokenizer.from_pretrained(minilm_dir)


def oracle_logits(features):
    """Logits peaked at each window's gold start/end (at [CLS] where the answer is not in the window)."""
    starts, ends = [], []
    for f in features:
        s, e = np.zeros(len(f["input_ids"])), np.zeros(len(f["input_ids"]))
        s[f["start_positions"]] = e[f["end_positions"]] = 10.0 if f["start_positions"] else 1.0
        starts.append(s)
        ends.append(e)
    return starts, ends


@pytest.mark.parametrize("max_length,stride", [(384, 128), (96, 32)])
def test_oracle_logits_recover_gold_answers_on_real_squad(tokenizer, shared_data, max_length, stride):
    examples = read_squad(shared_data / "squad" / "dev-v1.1.json.gz").examples[:300]
    feats = encode_squad(tokenizer, examples, max_length=max_length, doc_stride=stride, training=True)
    preds = postprocess_squad(examples, feats, *oracle_logits(feats))
    scores = squad_v1_evaluate({q: p.answer() for q, p in preds.items()}, examples)
    # the only misses are first gold answers whose offsets point inside a word ("gold" of "golden", "8" of
    # "18": 10 of these 300 questions), which no token span can cut exactly
    assert scores["exact_match"] > 96.0 and scores["f1"] > 96.5
    for ex in examples:
        p = preds[ex.qid].best
        assert ex.context[p.start_char:p.end_char] == p.text


def test_null_score_decides_unanswerable(tokenizer):
    ctx = "Marie Curie won the Nobel Prize in 1903 and again in 1911."
    examples = [SquadExample("a", "When did she first win?", ctx, ()), SquadExample("b", "Who is the king?", ctx, ())]
    feats = encode_squad(tokenizer, examples, max_length=64)
    starts, ends = [], []
    for f in feats:
        s, e = np.zeros(len(f["input_ids"])), np.zeros(len(f["input_ids"]))
        span = [i for i, o in enumerate(f["offsets"]) if o is not None and ctx[o[0]:o[1]] == "1903"][0]
        if f["example_index"] == 0:
            s[span], e[span], s[0], e[0] = 8.0, 8.0, 1.0, 1.0   # span beats null
        else:
            s[span], e[span], s[0], e[0] = 2.0, 2.0, 6.0, 6.0   # null beats span
        starts.append(s)
        ends.append(e)
    preds = postprocess_squad(examples, feats, starts, ends)
    assert preds["a"].answer(0.0) == "1903" and preds["a"].null_diff == pytest.approx(2 - 16)
    assert preds["b"].answer(0.0) == "" and preds["b"].answer() == "1903" and preds["b"].null_diff == pytest.approx(8)
    diffs = {q: p.null_diff for q, p in preds.items()}
    refs = [SquadExample("a", "q", ctx, (SquadAnswer("1903", 35),)), SquadExample("b", "q", ctx, (), True)]
    m = squad_v2_evaluate({q: p.answer() for q, p in preds.items()}, refs, na_probs=diffs, na_prob_thresh=0.0)
    assert m["exact"] == 100.0 and m["best_f1"] == 100.0
