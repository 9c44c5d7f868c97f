"""Fuzzing over arbitrary Unicode, lone surrogates included: never an exception, reference ids."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

ANY_CHAR = st.characters(min_codepoint=0, max_codepoint=0x10FFFF, exclude_categories=())
SURROGATE = st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF, exclude_categories=())
# Characters and strings around which the Rust engine and the original could differ.
TRICKY = st.sampled_from(
    [
        " ",
        "\t",
        "\n",
        "\u00a0",
        "\u2028",
        "\u200b",
        "\u00ad",
        "\ufeff",
        "\x00",
        "\ufffd",
        "\x85",
        "\x1c",
        "\u0301",
        "\u0308",
        "\u0323",
        "\u0345",
        "\u1161",
        "\u11a8",
        "\u0b3e",
        "\u0bcd",
        "\u093c",
        "Σ",
        "σ",
        "ς",
        "İ",
        "ı",
        "ß",
        "ẞ",
        "ﬁ",
        "K",
        "Ω",
        "Å",
        "ǅ",
        "中",
        "\uf900",
        "\U0002b820",
        "\u3400",
        "カ",
        "한",
        ".",
        "'",
        "-",
        "[",
        "]",
        "$",
        "⹃",
        "᙭",
        "\u0378",
        "\ue000",
        "😀",
        "🥰",
        "[MASK]",
        "[SEP]",
        "[mask]",
        "##",
        "e",
        "E",
        "a",
        "A",
        "the",
        "Ñ",
    ]
)
WORDS = st.sampled_from(["hello", "World", "unaffable", "Straße", "naïve", "ΟΔΟΣ", "x" * 101, "ça", "1,000.5"])
PIECE = st.one_of(ANY_CHAR, ANY_CHAR, SURROGATE, TRICKY, TRICKY, WORDS)
TEXT = st.lists(PIECE, max_size=40).map("".join)

FUZZ = settings(max_examples=300, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
FUZZ_LONG = settings(max_examples=4000, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])


def _check(ours, ref, text: str, pair: str) -> None:
    assert ours.encode(text) == ref.encode(text)
    assert ours.encode(text, pair) == ref.encode(text, pair)
    enc = ours(text, return_offsets_mapping=True, return_word_ids=True)
    assert len(enc["offset_mapping"]) == len(enc["input_ids"]) == len(enc["word_ids"])
    previous = 0
    for (start, end), wid in zip(enc["offset_mapping"], enc["word_ids"]):
        if wid is None:
            assert (start, end) == (0, 0)
            continue
        assert 0 <= start < end <= len(text)
        assert start >= previous
        previous = start


@FUZZ
@given(text=TEXT, pair=TEXT)
def test_fuzz_uncased(uncased, uncased_ref, text, pair):
    _check(uncased, uncased_ref, text, pair)


@FUZZ
@given(text=TEXT, pair=TEXT)
def test_fuzz_cased(cased, cased_ref, text, pair):
    _check(cased, cased_ref, text, pair)


@FUZZ
@given(texts=st.lists(TEXT, max_size=8))
def test_fuzz_batch_paths(uncased, uncased_ref, texts):
    """Batches mixing fast-path and Python-path texts keep order and ids."""
    assert uncased.encode_batch_ids(texts) == [uncased_ref.encode(t, add_special_tokens=False) for t in texts]
    assert uncased(texts)["input_ids"] == [uncased_ref.encode(t) for t in texts]


@pytest.mark.slow
@FUZZ_LONG
@given(text=TEXT, pair=TEXT)
def test_fuzz_long_both_casings(uncased, uncased_ref, cased, cased_ref, text, pair):
    _check(uncased, uncased_ref, text, pair)
    _check(cased, cased_ref, text, pair)


@FUZZ
@given(words=st.lists(TEXT, min_size=1, max_size=6), pair=st.lists(TEXT, min_size=1, max_size=4))
def test_fuzz_split_words(cased, cased_ref, words, pair):
    """Pre-split words (NER input): reference ids, word ids within range."""
    assert (
        cased(words, is_split_into_words=True)["input_ids"] == cased_ref(words, is_split_into_words=True)["input_ids"]
    )
    got = cased(words, pair, is_split_into_words=True, return_word_ids=True)
    assert got["input_ids"] == cased_ref(words, pair, is_split_into_words=True)["input_ids"]
    for wid, sid in zip(got["word_ids"], got.sequence_ids()):
        assert wid is None or 0 <= wid < (len(words) if sid == 0 else len(pair))
