"""Real text from ../shared/data: zero mismatches against the original tokenizer.

The default run checks a spread sample; the slow run checks 12,000 texts from all
sources (plus 3,000 pairs) for each casing, which is the acceptance bar. Only a
handful of real texts contain a character that sends them down the Python path,
so every text is also checked once more with zero-width spaces inserted (the
original deletes them, so the expected ids are the same), which forces the
Python path on all of them.
"""

from __future__ import annotations

import pytest

SOURCES = ("wikipedia", "sst2", "cola", "conll", "squad_context", "squad_question")


def spread(texts: list, n: int) -> list:
    """``n`` items spread evenly over ``texts`` (deterministic)."""
    if n >= len(texts):
        return list(texts)
    step = len(texts) / n
    return [texts[int(i * step)] for i in range(n)]


def corpus_sample(real_texts: dict[str, list[str]], total: int) -> list[str]:
    per_source = {
        "wikipedia": total * 5 // 12,
        "sst2": total // 6,
        "cola": total // 12,
        "conll": total // 12,
        "squad_context": total // 12,
        "squad_question": total // 6,
    }
    out: list[str] = []
    for name in SOURCES:
        out.extend(spread(real_texts[name], per_source[name]))
    return out


def with_zero_width_spaces(text: str) -> str:
    """The text with U+200B after every 7th character: same BERT ids, but tokenized on the Python path."""
    return "".join(ch + ("\u200b" if i % 7 == 6 else "") for i, ch in enumerate(text))


def mismatches(ours, ref, texts, pairs=None):
    """Inputs whose ids differ from the reference, on the Rust path and forced onto the Python path."""
    if pairs is None:
        expected = [ref.encode(t) for t in texts]
    else:
        expected = [ref.encode(a, b) for a, b in zip(texts, pairs)]
    bad = []
    for path, prepare in (("rust", lambda x: x), ("python", with_zero_width_spaces)):
        got = ours([prepare(t) for t in texts], None if pairs is None else [prepare(t) for t in pairs])["input_ids"]
        bad.extend((path, i, texts[i]) for i, (g, e) in enumerate(zip(got, expected)) if g != e)
    return bad


def test_sources_are_real_and_large(real_texts, real_pairs):
    assert len(real_texts["wikipedia"]) == 40_000
    assert len(real_texts["sst2"]) == 67_349
    assert len(real_texts["cola"]) == 8_551
    assert len(real_texts["conll"]) == 14_041
    assert len(real_texts["squad_context"]) == 2_067
    assert len(real_texts["squad_question"]) == 10_570
    assert len(real_pairs) > 10_000


def test_corpus_sample_matches_reference(pair_under_test, real_texts, real_pairs):
    ours, ref = pair_under_test
    texts = corpus_sample(real_texts, 1_200)
    assert mismatches(ours, ref, texts) == []
    pairs = spread(real_pairs, 200)
    assert mismatches(ours, ref, [a for a, _ in pairs], [b for _, b in pairs]) == []


def test_bulk_ids_match_reference(pair_under_test, real_texts):
    ours, ref = pair_under_test
    texts = spread(real_texts["wikipedia"], 500)
    assert ours.encode_batch_ids(texts) == [ref.encode(t, add_special_tokens=False) for t in texts]


@pytest.mark.slow
def test_twelve_thousand_real_texts_match_reference(pair_under_test, real_texts, real_pairs):
    ours, ref = pair_under_test
    texts = corpus_sample(real_texts, 12_000)
    assert len(texts) >= 10_000
    assert mismatches(ours, ref, texts) == []
    pairs = spread(real_pairs, 3_000)
    assert mismatches(ours, ref, [a for a, _ in pairs], [b for _, b in pairs]) == []
