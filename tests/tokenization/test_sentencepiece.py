"""SentencePiece (ALBERT) against `transformers.AlbertTokenizer` loaded from the same model, on real text."""

from __future__ import annotations

import pickle
import shutil

import pytest
import torch

from bertforge.tokenization import load_tokenizer
from bertforge.tokenization.sentencepiece import AlbertTokenizer, preprocess, train_sentencepiece

from needs import require_module

transformers = require_module("transformers")
sentencepiece = require_module("sentencepiece")
VOCAB_SIZE = 3000


@pytest.fixture(scope="module")
def spiece_dir(wiki_lines, tmp_path_factory):
    """A 3,000-piece unigram model trained on 3,000 Wikipedia lines."""
    root = tmp_path_factory.mktemp("spiece")
    text = root / "slice.txt"
    text.write_text("\n".join(wiki_lines[:3000]) + "\n", encoding="utf-8")
    return train_sentencepiece([text], root / "tok", vocab_size=VOCAB_SIZE, show_progress=False)


@pytest.fixture(scope="module")
def ours(spiece_dir) -> AlbertTokenizer:
    return AlbertTokenizer.from_pretrained(spiece_dir)


@pytest.fixture(scope="module")
def theirs(spiece_dir, tmp_path_factory):
    """HF's tokenizer built by HF itself from `spiece.model` alone when it can read it (it needs `protobuf`);
    otherwise from our saved folder, where HF still builds the normaliser and pre-tokeniser itself."""
    try:
        import google.protobuf  # noqa: F401
        source = tmp_path_factory.mktemp("spiece-model-only")
        shutil.copy(spiece_dir / "spiece.model", source / "spiece.model")
    except ImportError:
        source = spiece_dir
    tok = transformers.AlbertTokenizer.from_pretrained(str(source))
    assert len(tok) == VOCAB_SIZE
    return tok


@pytest.fixture(scope="module")
def test_lines(wiki_lines) -> list[str]:
    return wiki_lines[5000:7000]  # not seen in training


def test_layout_of_the_trained_model(ours, spiece_dir):
    assert ours.vocab_size == VOCAB_SIZE
    assert ours.convert_ids_to_tokens([0, 1, 2, 3, 4]) == ["<pad>", "<unk>", "[CLS]", "[SEP]", "[MASK]"]
    assert (ours.pad_token_id, ours.unk_token_id, ours.cls_token_id, ours.sep_token_id, ours.mask_token_id) == \
        (0, 1, 2, 3, 4)
    assert ours.all_special_ids == [0, 1, 2, 3, 4]
    processor = sentencepiece.SentencePieceProcessor(model_file=str(spiece_dir / "spiece.model"))
    assert processor.GetPieceSize() == VOCAB_SIZE and processor.IsControl(2) and processor.IsControl(4)


def test_ids_equal_transformers_on_real_lines_and_pairs(ours, theirs, test_lines):
    assert ours(test_lines)["input_ids"] == theirs(test_lines)["input_ids"]
    firsts, seconds = test_lines[:1000], test_lines[1000:]
    assert ours(firsts, seconds)["input_ids"] == theirs(firsts, seconds)["input_ids"]
    kwargs = dict(truncation=True, max_length=64, padding="max_length")
    a = ours(firsts[:200], seconds[:200], **kwargs)
    b = theirs(firsts[:200], seconds[:200], return_token_type_ids=True, **kwargs)
    assert a["input_ids"] == b["input_ids"] and a["token_type_ids"] == b["token_type_ids"]
    assert ours.encode_batch_ids(test_lines) == [theirs.encode(t, add_special_tokens=False) for t in test_lines]


def test_pieces_agree_with_the_sentencepiece_library(ours, spiece_dir, test_lines):
    """The library itself differs only where two segmentations score the same (tie-breaking) or on unknown
    characters, so nearly every line is identical."""
    processor = sentencepiece.SentencePieceProcessor(model_file=str(spiece_dir / "spiece.model"))
    same = sum(processor.encode(preprocess(t), out_type=str) == ours.tokenize(t) for t in test_lines)
    assert same >= 0.99 * len(test_lines)


def test_offsets_equal_transformers_and_point_at_the_text(ours, theirs, test_lines):
    lines = test_lines[:300]
    a = ours(lines, return_offsets_mapping=True, return_word_ids=True)
    b = theirs(lines, return_offsets_mapping=True)
    assert a["offset_mapping"] == [[tuple(o) for o in row] for row in b["offset_mapping"]]
    assert [a.word_ids(i) for i in range(len(lines))] == [b.word_ids(i) for i in range(len(lines))]
    for text, ids, offsets in zip(lines, a["input_ids"], a["offset_mapping"]):
        assert offsets[0] == offsets[-1] == (0, 0)
        for start, end in offsets[1:-1]:
            assert 0 <= start <= end <= len(text) and not text[start:end].isspace()
    enc = ours("Zürich is lovely", return_offsets_mapping=True)
    tokens = ours.convert_ids_to_tokens(enc["input_ids"])
    assert tokens[1].startswith("▁z")  # lowercased, accent stripped
    assert "Zürich is lovely"[enc["offset_mapping"][1][0]] == "Z"


def test_pair_format_options_and_call_api(ours, theirs, spiece_dir, test_lines):
    enc = ours("Hello world", "Bye now", return_offsets_mapping=True)
    tokens = ours.convert_ids_to_tokens(enc["input_ids"])
    sep = tokens.index("[SEP]")
    assert tokens[0] == "[CLS]" and tokens[-1] == "[SEP]" and tokens.count("[SEP]") == 2
    assert enc["token_type_ids"] == [0] * (sep + 1) + [1] * (len(tokens) - sep - 1)
    assert ours("a [MASK] b")["input_ids"].count(4) == 1
    assert ours.decode(ours("Hello  World!")["input_ids"], skip_special_tokens=True) == "hello world!"

    cased = AlbertTokenizer.from_pretrained(spiece_dir, do_lower_case=False, keep_accents=True)
    assert cased.tokenize("Café") != ours.tokenize("Café") == ours.tokenize("cafe")
    hf_cased = transformers.AlbertTokenizer.from_pretrained(str(spiece_dir), do_lower_case=False, keep_accents=True)
    assert cased(test_lines[:200])["input_ids"] == hf_cased(test_lines[:200])["input_ids"]

    question, context = "When was it built?", test_lines[3]
    kwargs = dict(truncation="only_second", max_length=40, stride=8, return_overflowing_tokens=True)
    a, b = ours(question, context, **kwargs), theirs(question, context, **kwargs)
    assert len(a["input_ids"]) > 1 and a["input_ids"] == b["input_ids"]

    words = [["New", "York", "is", "big."], ["Paris"]]
    a = ours(words, is_split_into_words=True, padding=True, return_tensors="pt", return_word_ids=True)
    b = theirs(words, is_split_into_words=True, padding=True, return_tensors="pt")
    assert torch.equal(a["input_ids"], b["input_ids"]) and a.word_ids(0) == b.word_ids(0)


def test_save_load_pickle_and_auto_tokenizer(ours, test_lines, tmp_path):
    ours.save_pretrained(tmp_path)
    again = load_tokenizer(tmp_path)
    assert isinstance(again, AlbertTokenizer) and again.vocab == ours.vocab
    assert again(test_lines[:100])["input_ids"] == ours(test_lines[:100])["input_ids"]
    auto = transformers.AutoTokenizer.from_pretrained(str(tmp_path))
    assert auto(test_lines[:100])["input_ids"] == ours(test_lines[:100])["input_ids"]
    copy = pickle.loads(pickle.dumps(ours))
    assert copy(test_lines[:5])["input_ids"] == ours(test_lines[:5])["input_ids"]


def test_missing_and_corrupt_model_are_named(spiece_dir, tmp_path):
    with pytest.raises(FileNotFoundError, match=r"spiece\.model"):
        AlbertTokenizer.from_pretrained(tmp_path)
    bad = tmp_path / "bad"
    bad.mkdir()
    data = (spiece_dir / "spiece.model").read_bytes()
    (bad / "spiece.model").write_bytes(data[: len(data) // 3])
    with pytest.raises(ValueError, match=r"spiece\.model"):
        load_tokenizer(bad)
    (bad / "spiece.model").write_bytes(b"not a model at all")
    with pytest.raises(ValueError, match=r"spiece\.model"):
        load_tokenizer(bad)
    empty = tmp_path / "empty.txt"
    empty.write_text("\n\n", encoding="utf-8")
    with pytest.raises(ValueError, match="no text found"):
        train_sentencepiece([empty], tmp_path / "out", vocab_size=100, show_progress=False)


def test_cli_writes_a_folder_both_libraries_load(wiki_lines, tmp_path):
    from bertforge.cli import main
    text = tmp_path / "lines.txt"
    text.write_text("\n".join(wiki_lines[:1000]) + "\n", encoding="utf-8")
    assert main(["vocab", "--type", "sentencepiece", "--input", str(text), "--output", str(tmp_path / "tok"),
                 "--vocab-size", "1200", "--cased"]) == 0
    ours = load_tokenizer(tmp_path / "tok")
    assert isinstance(ours, AlbertTokenizer) and ours.vocab_size <= 1200
    auto = transformers.AutoTokenizer.from_pretrained(str(tmp_path / "tok"))
    assert type(auto).__name__ == "AlbertTokenizer"
    assert auto(wiki_lines[1000:1200])["input_ids"] == ours(wiki_lines[1000:1200])["input_ids"]
