"""Offsets point into the original string; word ids follow words, on both the Rust and the Python path."""

from __future__ import annotations

import unicodedata

import pytest

ZWSP = "\u200b"  # deleted by BERT, and sends a text down the Python path


def spread(texts: list, n: int) -> list:
    step = max(1, len(texts) // n)
    return texts[::step][:n]


def visible(source: str, lowercase: bool) -> str:
    """What BERT makes of a stretch of original text (to compare with a token)."""
    kept = "".join(
        ch for ch in source if ch not in "\x00\ufffd" and (ch in "\t\n\r" or unicodedata.category(ch)[0] != "C")
    )
    kept = unicodedata.normalize("NFC", kept)
    if lowercase:
        kept = "".join(c for c in unicodedata.normalize("NFD", kept.lower()) if unicodedata.category(c) != "Mn")
    return kept


def check_offsets(tok, texts: list[str]) -> int:
    enc = tok(texts, return_offsets_mapping=True, return_word_ids=True)
    checked = 0
    for text, ids, offsets, word_ids in zip(texts, enc["input_ids"], enc["offset_mapping"], enc["word_ids"]):
        tokens = tok.convert_ids_to_tokens(ids)
        last_word = None
        for token, (start, end), wid in zip(tokens, offsets, word_ids):
            if wid is None:
                assert (start, end) == (0, 0)
                continue
            assert 0 <= start < end <= len(text)
            assert last_word is None or wid >= last_word  # words come in order
            last_word = wid
            if token == tok.unk_token:
                assert visible(text[start:end], tok.do_lower_case).strip()
                continue
            piece = token[2:] if token.startswith("##") else token
            lowercase = tok.do_lower_case and token not in tok.all_special_tokens
            assert visible(text[start:end], lowercase) == piece, (text, token, text[start:end])
            checked += 1
    return checked


def with_zero_width_spaces(text: str) -> str:
    """Insert a ZWSP after every 7th character (inside words too)."""
    return "".join(ch + (ZWSP if i % 7 == 6 else "") for i, ch in enumerate(text))


@pytest.mark.parametrize("casing", ["uncased", "cased"])
def test_offsets_on_real_text(casing, request, real_texts):
    tok = request.getfixturevalue(casing)
    texts = (
        spread(real_texts["wikipedia"], 300) + spread(real_texts["squad_context"], 50) + spread(real_texts["sst2"], 100)
    )
    assert check_offsets(tok, texts) > 10_000


@pytest.mark.parametrize("casing", ["uncased", "cased"])
def test_offsets_on_the_python_path(casing, request, real_texts):
    """Deleted characters inside words must not shift offsets."""
    tok = request.getfixturevalue(casing)
    texts = [with_zero_width_spaces(t) for t in spread(real_texts["wikipedia"], 100)]
    texts += [
        "Cafe\u0301 na\u0131\u0308ve ΟΔΟΣ İstanbul",
        "e\u0301\u0301x \ud800abc\udfff def",
        "a\x00b [MASK\u200b] c",
    ]
    assert check_offsets(tok, texts) > 2_000


def test_python_path_offsets_equal_rust_path_offsets(uncased, real_texts):
    """A text sent down the Python path by one trailing ZWSP gets the same offsets as on the Rust path."""
    texts = spread(real_texts["wikipedia"], 200)
    plain = uncased(texts, return_offsets_mapping=True, return_word_ids=True)
    forced = uncased([t + ZWSP for t in texts], return_offsets_mapping=True, return_word_ids=True)
    assert forced["input_ids"] == plain["input_ids"]
    assert forced["offset_mapping"] == plain["offset_mapping"]
    assert forced["word_ids"] == plain["word_ids"]


def test_offsets_across_nfc_and_case_changes(cased, uncased):
    text = "xe\u0301y Σ İx"
    enc = cased(text, return_offsets_mapping=True, add_special_tokens=False)
    pieces = [text[s:e] for s, e in enc["offset_mapping"]]
    assert "".join(pieces).replace(" ", "") == text.replace(" ", "")
    enc = uncased("İİ", return_offsets_mapping=True, add_special_tokens=False)
    assert enc["offset_mapping"][0][0] == 0 and enc["offset_mapping"][-1][1] == 2


def test_word_ids_with_split_words(uncased, uncased_ref, real_texts):
    """NER input: word ids index the given words; the tokens of word j are tokenize(word j)."""
    sentences = [s.split(" ") for s in spread(real_texts["conll"], 300)]
    sentences.append(["Zu\u200brich", "Σ", "", "  ", "[MASK]", "naïve", "\ud800"])
    enc = uncased(sentences, is_split_into_words=True, return_offsets_mapping=True, return_word_ids=True)
    for words, ids, word_ids, offsets in zip(sentences, enc["input_ids"], enc["word_ids"], enc["offset_mapping"]):
        assert ids == uncased_ref(words, is_split_into_words=True)["input_ids"]
        tokens = uncased.convert_ids_to_tokens(ids)
        for j, word in enumerate(words):
            mine = [t for t, w in zip(tokens, word_ids) if w == j]
            assert mine == uncased_ref.tokenize(word)
            for (start, end), w in zip(offsets, word_ids):
                if w == j:
                    assert 0 <= start < end <= len(word)  # offsets are relative to the word
