"""The Hugging Face-style API: shapes, padding, truncation, windows, tensors, errors, save/load."""

from __future__ import annotations

import json
import pickle
import threading
import unicodedata

import numpy as np
import pytest
import torch

from bertforge.tokenization import BatchEncoding, BertTokenizer

from needs import require_module

ZWSP = "\u200b"


@pytest.fixture(scope="module")
def hf_fast(minilm_dir):
    transformers = require_module("transformers")
    return transformers.BertTokenizerFast(str(minilm_dir / "vocab.txt"), do_lower_case=True)


# ---------------------------------------------------------------- shapes, padding, truncation


def test_single_text_gives_flat_lists(uncased):
    enc = uncased("Hello world!")
    assert isinstance(enc, BatchEncoding) and isinstance(enc, dict)
    assert enc["input_ids"] == [101, 7592, 2088, 999, 102]
    assert enc.input_ids == enc["input_ids"]
    assert enc["token_type_ids"] == [0] * 5 and enc["attention_mask"] == [1] * 5
    assert not enc.is_batched


def test_batch_padding_longest_and_max_length(uncased):
    texts = ["short", "a somewhat longer sentence here", ""]
    enc = uncased(texts, padding=True)
    lengths = {len(row) for row in enc["input_ids"]}
    assert lengths == {7}
    assert enc["input_ids"][2] == [101, 102, 0, 0, 0, 0, 0]
    assert enc["attention_mask"][2] == [1, 1, 0, 0, 0, 0, 0]
    enc = uncased(texts, padding="max_length", max_length=12)
    assert all(len(r) == 12 for r in enc["input_ids"])


def test_truncation_strategies(uncased, hf_fast):
    long_a = "one two three four five six seven eight nine ten"
    long_b = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu"
    enc = uncased(long_a, truncation=True, max_length=6)
    assert enc["input_ids"] == [101, 2028, 2048, 2093, 2176, 102]
    n_a, n_b = len(uncased.tokenize(long_a)), len(uncased.tokenize(long_b))
    assert (n_a, n_b) == (10, 13)
    for strategy, kept_a in (("longest_first", 9), ("only_first", 5), ("only_second", 10)):
        enc = uncased(long_a, long_b, truncation=strategy, max_length=21, return_offsets_mapping=True)
        assert len(enc["input_ids"]) == 21 and enc["input_ids"].count(102) == 2
        assert enc["sequence_ids"].count(0) == kept_a
        assert enc["input_ids"] == hf_fast(long_a, long_b, truncation=strategy, max_length=21)["input_ids"]
    with pytest.raises(ValueError, match="too short"):
        uncased("a b", long_b, truncation="only_first", max_length=8)
    enc = uncased(long_a * 100, truncation=True)  # default length is model_max_length
    assert len(enc["input_ids"]) == 512


def test_padding_and_truncation_on_mixed_fast_and_python_path_batch(uncased, uncased_ref):
    texts = ["plain text here", "zero" + ZWSP + "width text that is a bit longer", "ΟΔΟΣ", "x"]
    enc = uncased(texts, padding=True, truncation=True, max_length=8, return_offsets_mapping=True, return_word_ids=True)
    assert {len(r) for r in enc["input_ids"]} == {8}
    for row, text in zip(enc["input_ids"], texts):
        expected = uncased_ref.encode(text, truncation=True, max_length=8)
        assert row[: len(expected)] == expected and set(row[len(expected) :]) <= {0}
    assert enc["word_ids"][3] == [None, 0, None, None, None, None, None, None]
    enc = uncased(texts, padding="max_length", max_length=10)  # pads, but does not truncate
    assert [len(r) for r in enc["input_ids"]] == [10, 12, 10, 10]


def test_tensors(uncased):
    enc = uncased(["a b c", "d"], padding=True, return_tensors="pt", return_offsets_mapping=True, return_word_ids=True)
    assert isinstance(enc["input_ids"], torch.Tensor) and enc["input_ids"].dtype == torch.int64
    assert tuple(enc["input_ids"].shape) == (2, 5)
    assert tuple(enc["offset_mapping"].shape) == (2, 5, 2)
    assert enc["word_ids"][1].tolist() == [-1, 0, -1, -1, -1]  # None becomes -1 in tensors
    enc = uncased("a b c", return_tensors="np")  # one text still gets a batch dimension, as in HF
    assert isinstance(enc["input_ids"], np.ndarray) and enc["input_ids"].shape == (1, 5)
    assert enc.is_batched and enc.word_ids(0) == [None, 0, 1, 2, None]
    with pytest.raises(ValueError, match="padding"):
        uncased(["a b c", "d"], return_tensors="pt")
    with pytest.raises(ValueError, match="return_tensors"):
        uncased("a", return_tensors="tf")


def test_special_tokens_mask_and_no_special_tokens(uncased):
    enc = uncased("a [MASK] b", return_special_tokens_mask=True)
    assert enc["input_ids"] == [101, 1037, 103, 1038, 102]
    assert enc["special_tokens_mask"] == [1, 0, 0, 0, 1]
    assert uncased("a b", add_special_tokens=False)["input_ids"] == [1037, 1038]


def test_empty_batch(uncased):
    enc = uncased([])
    assert enc["input_ids"] == [] and enc.is_batched


# ---------------------------------------------------------------- parity with the HF fast tokenizer


def test_squad_windows_match_hf_fast(uncased, hf_fast, real_pairs):
    questions = [q for q, _ in real_pairs[:40]]
    contexts = [c for _, c in real_pairs[:40]]
    kwargs = dict(
        truncation="only_second",
        max_length=96,
        stride=24,
        return_overflowing_tokens=True,
        return_offsets_mapping=True,
        padding="max_length",
    )
    ours = uncased(questions, contexts, **kwargs)
    theirs = hf_fast(questions, contexts, **kwargs)
    assert len(ours["input_ids"]) > 40  # there are windows
    for key in ("input_ids", "token_type_ids", "attention_mask", "overflow_to_sample_mapping"):
        assert ours[key] == theirs[key], key
    assert ours["offset_mapping"] == [[tuple(o) for o in row] for row in theirs["offset_mapping"]]
    for i in range(len(ours["input_ids"])):
        assert ours.sequence_ids(i) == theirs.sequence_ids(i)
    assert ours["sequence_ids"] == [ours.sequence_ids(i) for i in range(len(ours["input_ids"]))]


def test_windows_on_the_python_path(uncased, hf_fast, real_pairs):
    """The same windows when a context needs the Python path; offsets still index the original."""
    question, context = real_pairs[3]
    forced = context.replace(" ", " " + ZWSP, 5)  # deleted characters early in the context
    kwargs = dict(
        truncation="only_second", max_length=64, stride=16, return_overflowing_tokens=True, return_offsets_mapping=True
    )
    ours = uncased(question, forced, **kwargs)
    theirs = hf_fast(question, context, **kwargs)
    assert ours["input_ids"] == theirs["input_ids"]
    assert ours["overflow_to_sample_mapping"] == [0] * len(ours["input_ids"])
    for row, ids in zip(ours["offset_mapping"], ours["input_ids"]):
        for i, ((start, end), token) in enumerate(zip(row, uncased.convert_ids_to_tokens(ids))):
            if ours.sequence_ids(ours["input_ids"].index(ids))[i] == 1 and token != "[UNK]":
                source = unicodedata.normalize("NFD", forced[start:end].replace(ZWSP, "").lower())
                assert "".join(c for c in source if unicodedata.category(c) != "Mn") == token.removeprefix("##")


def test_split_words_match_hf_fast(uncased, hf_fast, real_texts):
    sentences = [s.split(" ") for s in real_texts["conll"][:50]]
    ours = uncased(sentences, is_split_into_words=True, return_word_ids=True, return_offsets_mapping=True)
    theirs = hf_fast(sentences, is_split_into_words=True, return_offsets_mapping=True)
    assert ours["input_ids"] == theirs["input_ids"]
    assert ours["word_ids"] == [theirs.word_ids(i) for i in range(len(sentences))]
    assert ours["offset_mapping"] == [[tuple(o) for o in row] for row in theirs["offset_mapping"]]
    single = uncased(["EU", "rejects", "German"], is_split_into_words=True, return_word_ids=True)
    assert single["word_ids"] == [None, 0, 1, 2, None] and single.word_ids() == single["word_ids"]


# ---------------------------------------------------------------- decoding and conversions


def test_decode_matches_reference(uncased, uncased_ref, real_texts):
    for text in real_texts["sst2"][:200] + ["Hello, world! don't it's [MASK] unaffable", "a ' b n't"]:
        ids = uncased.encode(text)
        assert uncased.decode(ids) == uncased_ref.decode(ids)
        assert uncased.decode(ids, skip_special_tokens=True) == uncased_ref.decode(ids, skip_special_tokens=True)
    batch = uncased(["one two", "three"], padding=True, return_tensors="pt")["input_ids"]
    assert uncased.batch_decode(batch, skip_special_tokens=True) == ["one two", "three"]
    assert uncased.decode(torch.tensor([7592, 2088])) == "hello world"


def test_conversions(uncased, uncased_ref):
    tokens = ["hello", "##ing", "[MASK]", "not-a-token", "[UNK]"]
    assert uncased.convert_tokens_to_ids(tokens) == uncased_ref.convert_tokens_to_ids(tokens)
    assert uncased.convert_tokens_to_ids("hello") == 7592
    ids = [0, 100, 101, 102, 103, 7592, 30521]
    assert uncased.convert_ids_to_tokens(ids) == uncased_ref.convert_ids_to_tokens(ids)
    assert uncased.convert_ids_to_tokens(ids, skip_special_tokens=True) == uncased_ref.convert_ids_to_tokens(
        ids, skip_special_tokens=True
    )
    assert uncased.convert_ids_to_tokens(10**6) == "[UNK]"  # like the original
    assert uncased.convert_ids_to_tokens(np.int64(7592)) == "hello"


def test_properties(uncased):
    assert uncased.vocab_size == len(uncased) == 30522
    assert (
        uncased.pad_token_id,
        uncased.unk_token_id,
        uncased.cls_token_id,
        uncased.sep_token_id,
        uncased.mask_token_id,
    ) == (0, 100, 101, 102, 103)
    assert sorted(uncased.all_special_ids) == [0, 100, 101, 102, 103]
    assert uncased.vocab["hello"] == 7592 and uncased.ids_to_tokens[7592] == "hello"
    assert uncased.do_lower_case is True
    from tokenizers import Tokenizer

    assert isinstance(uncased.backend, Tokenizer)
    assert uncased.backend.encode("hello world", add_special_tokens=False).ids == [7592, 2088]


# ---------------------------------------------------------------- errors


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda t: t(123), "str or a list of str, got int"),
        (lambda t: t(["ok", None]), "item 1 is NoneType"),
        (lambda t: t(b"bytes"), "got bytes"),
        (lambda t: t("a", ["b"]), "text_pair must be a str"),
        (lambda t: t(["a"], "b"), "text_pair must be a list"),
        (lambda t: t(["a", "b"], is_split_into_words=True, text_pair="x"), "list of str words"),
        (lambda t: t([["a", 1]], is_split_into_words=True), "word 1 is int"),
        (lambda t: t.tokenize(None), "expects a str, got NoneType"),
        (lambda t: t.encode(3.5), "got float"),
        (lambda t: t.encode_batch_ids("one string"), "list of str, got str"),
        (lambda t: t.encode_batch_ids(["a", 7]), "item 1 is int"),
        (lambda t: t.convert_tokens_to_ids(["a", 3]), "item 1 is int"),
        (lambda t: t.decode(["a"]), "item 0 is str"),
    ],
)
def test_type_errors_say_what_was_given(uncased, call, match):
    with pytest.raises(TypeError, match=match):
        call(uncased)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(truncation="sideways"), "truncation must be"),
        (dict(padding="sometimes"), "padding must be"),
        (dict(truncation=True, max_length=2), "no room"),
        (dict(truncation=True, max_length=10, stride=8), "stride"),
        (dict(truncation="only_second", max_length=10), "needs text_pair"),
        (dict(return_overflowing_tokens=True), "needs truncation"),
        (dict(max_length=0, truncation=True), "max_length"),
    ],
)
def test_value_errors(uncased, kwargs, match):
    with pytest.raises(ValueError, match=match):
        uncased("some text", **kwargs)


def test_length_mismatch(uncased):
    with pytest.raises(ValueError, match="2 items but text_pair has 1"):
        uncased(["a", "b"], ["c"])


# ---------------------------------------------------------------- loading and saving


def test_save_and_reload_round_trip(uncased, tmp_path, real_texts):
    files = uncased.save_pretrained(tmp_path / "tok")
    assert sorted(p.name for p in files) == ["special_tokens_map.json", "tokenizer.json", "tokenizer_config.json",
                                            "vocab.txt"]
    config = json.loads((tmp_path / "tok" / "tokenizer_config.json").read_text())
    assert config["tokenizer_class"] == "BertTokenizer" and config["do_lower_case"] is True
    assert config["model_max_length"] == 512 and config["mask_token"] == "[MASK]"
    again = BertTokenizer.from_pretrained(tmp_path / "tok")
    texts = real_texts["sst2"][:300]
    assert again(texts)["input_ids"] == uncased(texts)["input_ids"]
    assert BertTokenizer.from_pretrained(tmp_path / "tok" / "vocab.txt").vocab == uncased.vocab


@pytest.mark.parametrize("casing", ["uncased", "cased"])
def test_transformers_autotokenizer_loads_saved_folder(casing, request, tmp_path, real_texts):
    transformers = require_module("transformers")
    tok = request.getfixturevalue(casing)
    tok.save_pretrained(tmp_path)
    auto = transformers.AutoTokenizer.from_pretrained(str(tmp_path))
    texts = real_texts["wikipedia"][:200] + real_texts["squad_question"][:100]
    assert auto(texts)["input_ids"] == tok(texts)["input_ids"]
    assert auto.mask_token_id == tok.mask_token_id and auto.model_max_length == tok.model_max_length


def test_from_pretrained_settings_and_overrides(cased_dir, minilm_dir):
    tok = BertTokenizer.from_pretrained(cased_dir)
    assert tok.do_lower_case is False  # read from tokenizer_config.json
    assert BertTokenizer.from_pretrained(cased_dir, do_lower_case=True).do_lower_case is True
    assert BertTokenizer.from_pretrained(minilm_dir, model_max_length=128).model_max_length == 128
    with pytest.raises(TypeError, match="unexpected argument"):
        BertTokenizer.from_pretrained(minilm_dir, lowercase=True)


def test_from_pretrained_errors(tmp_path, minilm_dir):
    with pytest.raises(FileNotFoundError, match="no-such-folder"):
        BertTokenizer.from_pretrained(tmp_path / "no-such-folder")
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match=r"empty has no vocab\.txt"):
        BertTokenizer.from_pretrained(tmp_path / "empty")
    bad = tmp_path / "bad"
    bad.mkdir()
    lines = (minilm_dir / "vocab.txt").read_text(encoding="utf-8").split("\n")
    (bad / "vocab.txt").write_text("\n".join(t for t in lines if t != "[MASK]"), encoding="utf-8")
    with pytest.raises(ValueError, match=r"mask_token='\[MASK\]'"):
        BertTokenizer.from_pretrained(bad)
    (bad / "vocab.txt").write_text("", encoding="utf-8")
    with pytest.raises(ValueError, match="empty"):
        BertTokenizer.from_pretrained(bad)
    (bad / "vocab.txt").write_text("\n".join(lines), encoding="utf-8")
    (bad / "tokenizer_config.json").write_text("{not json", encoding="utf-8")
    with pytest.raises(ValueError, match="tokenizer_config.json"):
        BertTokenizer.from_pretrained(bad)


def test_pickle_round_trip(cased):
    clone = pickle.loads(pickle.dumps(cased))
    text = "Zürich ΟΔΟΣ " + ZWSP + " the [MASK]"
    assert clone.encode(text) == cased.encode(text) and clone.do_lower_case is False
    enc = pickle.loads(pickle.dumps(cased([text, "x"], return_word_ids=True)))
    assert enc.word_ids(0) == cased([text], return_word_ids=True)["word_ids"][0]


def test_concurrent_calls_with_different_settings(uncased, real_texts):
    texts = real_texts["sst2"][:400]
    expected_short = uncased(texts, truncation=True, max_length=8, padding="max_length")["input_ids"]
    expected_long = uncased(texts, padding=True)["input_ids"]
    failures = []

    def worker(short: bool) -> None:
        for _ in range(15):
            if short:
                got = uncased(texts, truncation=True, max_length=8, padding="max_length")["input_ids"]
                ok = got == expected_short
            else:
                ok = uncased(texts, padding=True)["input_ids"] == expected_long
                ok = ok and uncased.encode_batch_ids(texts[:50]) == [
                    row[1 : row.index(102)] for row in expected_long[:50]
                ]
            if not ok:
                failures.append(short)

    threads = [threading.Thread(target=worker, args=(i % 2 == 0,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert failures == []


def test_mixed_batch_with_windows_and_longest_padding(uncased, hf_fast, real_pairs):
    """Python-path inputs inside a batch: same windows, padding and sample mapping as HF on the clean text."""
    questions = [q for q, _ in real_pairs[:6]]
    contexts = [c for _, c in real_pairs[:6]]
    forced = [c if i % 2 else c.replace(" ", " " + ZWSP, 3) for i, c in enumerate(contexts)]
    forced[4] = forced[4] + " \ud800"  # a lone surrogate cannot even be handed to Rust
    kwargs = dict(truncation="only_second", max_length=80, stride=20, return_overflowing_tokens=True, padding=True)
    ours = uncased(questions, forced, return_word_ids=True, **kwargs)
    theirs = hf_fast(questions, contexts, **kwargs)
    for key in ("input_ids", "token_type_ids", "attention_mask", "overflow_to_sample_mapping"):
        assert ours[key] == theirs[key], key
    assert len({len(r) for r in ours["input_ids"]}) == 1
    short = uncased(["tiny", "a longer plain text with several words in it", "x" + ZWSP], padding=True)
    assert len({len(r) for r in short["input_ids"]}) == 1
    longer_slow = uncased(
        ["tiny", "a longer text" + ZWSP + " with several more words in it than the other"], padding=True
    )
    assert len({len(r) for r in longer_slow["input_ids"]}) == 1
