"""Hand-picked hard cases: our ids must equal the original tokenizer's, both casings."""

from __future__ import annotations

import pytest

HARD_CASES = [
    # ordinary text, punctuation BERT splits (all ASCII symbols count)
    "Hello, World! It's 5 o'clock; costs $5.00 (approx.) -- ok?",
    "^_^ `quoted` ~tilde~ a|b \\ back/slash @user #tag 100% & <tag>",
    "«guillemets» „low“ —dash– ¿qué? ¡sí! …ellipsis… •bullet ·middot",
    # accents: precomposed and decomposed (NFC matters when not stripping)
    "Café naïve résumé Ångström Øresund Dvořák Łódź",
    "Cafe\u0301 A\u030angstro\u0308m e\u0301\u0301 a\u0323\u0302 o\u0302\u0323",
    "ÀÉÎÕÜ ñ ç ß ẞ Æ œ ð þ",
    # case mapping oddities: Greek final sigma, dotted I, ligatures, Kelvin/Ohm signs
    "ΟΔΟΣ ΟΔΟΣ. Σ ΣΑΣ ὈΔΥΣΣΕΎΣ ΌΣΟΣ'Σ",
    "İstanbul ıI ǅ ǈ ﬁne ﬀ K Ω Å",
    # CJK and Japanese/Korean
    "中文字符测试，标点。日本語のテキスト、カタカナ。ｶﾀｶﾅ",
    "한국어 텍스트 \u1100\u1161\u11a8 \uac00\u11a8",
    "\uf900\uf901\ufa0e \U00020000 \U0002b820 \U0002f800 \u3400 \u4dbf",
    # other scripts
    "مرحبا بالعالم، كيف حالك؟ שָׁלוֹם עוֹלָם नमस्ते दुनिया क़ தமிழ் ภาษาไทย",
    # control and zero-width characters
    "a\u200bb a\u200db \ufeffhello soft\u00adhyphen a\u200eb\u200f",
    "tab\tnew\nline\rcr\r\nend",
    "x\x0by\x0cz\x1cw\x1dv\x1eu\x1ft\x85s\x7fr",
    "line\u2028sep\u2029para \u00a0nbsp \u3000ideo \u2009thin \u202fnarrow \u205fmath \u1680ogham",
    "\u180e\u2060\u2061\u2062\u2063\u2064\u206a\u206f",
    # NUL, U+FFFD, lone surrogates, unassigned, private use, noncharacters
    "\x00",
    "a\x00b \ufffd c\ufffdd",
    "\ud800",
    "a\udc00b\ud83d c",
    "\u0378 \ue000 \uffff \U0010ffff \U000e0001 \U000f0000",
    # emoji (some newer than Rust's Unicode tables)
    "😀 🥰 👍🏽 🏳️‍🌈 🧑‍💻 🫠",
    # newer punctuation/marks (Python knows them, Rust's tables do not)
    "a⹃b ؝ ᙭ a᜴b a\u0898b \U00011944",
    # compatibility characters are not NFKC-folded by BERT
    "Ⅻ ① ＡＢＣ ¼ ² ㎏",
    # word length limit (100 characters)
    "a" * 100,
    "a" * 101,
    "é" * 100 + " " + "é" * 101,
    "e\u0301" * 60,
    "x" * 99 + "\u0301",
    # empty and whitespace-only
    "",
    " ",
    "\t\n \r\n",
    "\u200b",
    # special tokens typed in text
    "[MASK]",
    "the [MASK] sat on the [MASK].",
    "[mask] [Mask] [ MASK ]",
    "[MASK][SEP][CLS][PAD][UNK]",
    "a[MASK]b",
    "[MASK\u200b] x[MASK\u200b] [MA\x00SK] [MASK]\u0301",
    "[UNK] unknownword [PAD]",
]


@pytest.mark.parametrize("text", HARD_CASES)
def test_hard_case_ids_match_reference(pair_under_test, text):
    ours, ref = pair_under_test
    assert ours.encode(text) == ref.encode(text)
    assert ours.tokenize(text) == ref.tokenize(text)


def test_hard_cases_as_pairs_and_batch(pair_under_test):
    ours, ref = pair_under_test
    firsts = HARD_CASES
    seconds = HARD_CASES[::-1]
    expected = [ref.encode(a, b) for a, b in zip(firsts, seconds)]
    assert ours(firsts, seconds)["input_ids"] == expected
    assert ours.encode_batch_ids(firsts) == [ref.encode(t, add_special_tokens=False) for t in firsts]


def test_token_type_ids_of_pairs(uncased, uncased_ref):
    enc = uncased("first part", "and the second")
    ref = uncased_ref("first part", "and the second", return_token_type_ids=True)
    assert enc["input_ids"] == ref["input_ids"]
    assert enc["token_type_ids"] == ref["token_type_ids"]
    assert enc["attention_mask"] == ref["attention_mask"]


@pytest.mark.parametrize(
    "do_lower_case, strip_accents, tokenize_chinese_chars",
    [(True, False, True), (False, True, True), (True, None, False), (False, None, False)],
)
def test_other_options_match_reference(minilm_dir, do_lower_case, strip_accents, tokenize_chinese_chars):
    from transformers import BertTokenizerLegacy

    from bertforge.tokenization import BertTokenizer

    options = dict(
        do_lower_case=do_lower_case, strip_accents=strip_accents, tokenize_chinese_chars=tokenize_chinese_chars
    )
    ours = BertTokenizer(minilm_dir / "vocab.txt", **options)
    ref = BertTokenizerLegacy(str(minilm_dir / "vocab.txt"), **options)
    assert ref.vocab_size == 30522
    assert ours(HARD_CASES)["input_ids"] == [ref.encode(t) for t in HARD_CASES]
