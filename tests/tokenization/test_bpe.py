"""Byte-level BPE (RoBERTa) against `transformers.RobertaTokenizer` loaded from the same files, on real text."""

from __future__ import annotations

import lzma
import pickle
import shutil

import pytest
import torch

from bertforge.tokenization import load_tokenizer
from bertforge.tokenization.bpe import RobertaTokenizer, train_bpe

from needs import require_module

transformers = require_module("transformers")
VOCAB_SIZE = 3000


@pytest.fixture(scope="module")
def bpe_dir(wiki_lines, tmp_path_factory):
    """A 3,000-token byte-level BPE trained on 3,000 Wikipedia lines (read from an .xz file)."""
    root = tmp_path_factory.mktemp("bpe")
    text = root / "slice.txt.xz"
    with lzma.open(text, "wt", encoding="utf-8") as handle:
        handle.write("\n".join(wiki_lines[:3000]) + "\n")
    return train_bpe([text], root / "tok", vocab_size=VOCAB_SIZE, min_frequency=2, show_progress=False)


@pytest.fixture(scope="module")
def ours(bpe_dir) -> RobertaTokenizer:
    return RobertaTokenizer.from_pretrained(bpe_dir)


@pytest.fixture(scope="module")
def theirs(bpe_dir, tmp_path_factory):
    """HF's tokenizer from vocab.json + merges.txt alone: it builds its pipeline itself, not from our config."""
    bare = tmp_path_factory.mktemp("bpe-files-only")
    for name in ("vocab.json", "merges.txt"):
        shutil.copy(bpe_dir / name, bare / name)
    tok = transformers.RobertaTokenizer.from_pretrained(str(bare))
    assert len(tok) == VOCAB_SIZE
    return tok


@pytest.fixture(scope="module")
def test_lines(wiki_lines) -> list[str]:
    return wiki_lines[5000:7000]  # not seen in training


def test_layout_of_the_trained_vocabulary(ours, bpe_dir):
    assert ours.vocab_size == VOCAB_SIZE and len(ours) == VOCAB_SIZE
    assert [ours.cls_token_id, ours.pad_token_id, ours.sep_token_id, ours.unk_token_id] == [0, 1, 2, 3]
    assert ours.mask_token_id == VOCAB_SIZE - 1 and ours.convert_ids_to_tokens(VOCAB_SIZE - 1) == "<mask>"
    assert (ours.cls_token, ours.sep_token, ours.bos_token, ours.eos_token) == ("<s>", "</s>", "<s>", "</s>")
    assert ours.all_special_ids == [0, 1, 2, 3, VOCAB_SIZE - 1]
    assert (bpe_dir / "merges.txt").read_text(encoding="utf-8").startswith("#version: 0.2\n")


def test_ids_equal_transformers_on_real_lines_and_pairs(ours, theirs, test_lines):
    assert ours(test_lines)["input_ids"] == theirs(test_lines)["input_ids"]
    firsts, seconds = test_lines[:1000], test_lines[1000:]
    assert ours(firsts, seconds)["input_ids"] == theirs(firsts, seconds)["input_ids"]
    questions = [line[:20] for line in test_lines[200:300]]
    for strategy in ("longest_first", "only_first", "only_second"):
        kwargs = dict(truncation=strategy, max_length=40)
        pairs = (test_lines[:100], questions) if strategy == "only_first" else (questions, test_lines[:100])
        assert ours(*pairs, **kwargs)["input_ids"] == theirs(*pairs, **kwargs)["input_ids"], strategy
    kwargs = dict(truncation=True, max_length=64, padding="max_length")
    assert ours(firsts[:200], seconds[:200], **kwargs)["input_ids"] == \
        theirs(firsts[:200], seconds[:200], **kwargs)["input_ids"]
    assert ours.encode_batch_ids(test_lines) == [theirs.encode(t, add_special_tokens=False) for t in test_lines]


def test_offsets_equal_transformers_and_point_at_the_text(ours, theirs, test_lines):
    lines = test_lines[:300]
    a = ours(lines, return_offsets_mapping=True)
    b = theirs(lines, return_offsets_mapping=True)
    assert a["offset_mapping"] == [[tuple(o) for o in row] for row in b["offset_mapping"]]
    for text, ids, offsets in zip(lines, a["input_ids"], a["offset_mapping"]):
        assert offsets[0] == offsets[-1] == (0, 0)  # <s>, </s>
        for token, (start, end) in zip(ours.convert_ids_to_tokens(ids[1:-1]), offsets[1:-1]):
            assert 0 <= start <= end <= len(text)
            if token.startswith("Ġ") and len(token) > 1:
                assert not text[start].isspace()  # the leading space is trimmed off
    assert ours.decode(a["input_ids"][0], skip_special_tokens=True) == lines[0]


def test_pair_format_types_words_and_sequence_ids(ours):
    enc = ours("Hello world", "Bye now", return_offsets_mapping=True, return_word_ids=True)
    tokens = ours.convert_ids_to_tokens(enc["input_ids"])
    assert tokens[0] == "<s>" and tokens[-1] == "</s>"
    assert tokens.count("</s>") == 3 and tokens[tokens.index("</s>") + 1] == "</s>"  # <s> A </s></s> B </s>
    assert enc["token_type_ids"] == [0] * len(tokens)  # RoBERTa has one segment type
    assert enc["sequence_ids"][0] is None and set(enc["sequence_ids"]) == {None, 0, 1}
    assert enc.word_ids() == enc["word_ids"] and enc["word_ids"][0] is None
    assert ours("a <mask> b")["input_ids"].count(ours.mask_token_id) == 1


def test_call_api_windows_padding_tensors_and_words(ours, theirs, bpe_dir, test_lines):
    question, context = "When was it built?", test_lines[3]
    kwargs = dict(truncation="only_second", max_length=40, stride=8, return_overflowing_tokens=True)
    a, b = ours(question, context, **kwargs), theirs(question, context, **kwargs)
    assert len(a["input_ids"]) > 1 and a["input_ids"] == b["input_ids"]
    assert a["overflow_to_sample_mapping"] == list(b["overflow_to_sample_mapping"])

    enc = ours(test_lines[:3], padding=True, return_tensors="pt")
    assert enc["input_ids"].dtype == torch.int64 and enc["input_ids"].shape == enc["attention_mask"].shape
    assert (enc["input_ids"][enc["attention_mask"] == 0] == ours.pad_token_id).all()

    # pre-split words are words of running text ("ĠYork"), as HF encodes them with add_prefix_space=True
    spaced = RobertaTokenizer.from_pretrained(bpe_dir, add_prefix_space=True)
    hf_spaced = transformers.RobertaTokenizer.from_pretrained(str(bpe_dir), add_prefix_space=True)
    words = [["New", "York", "is", "big."], ["Paris"]]
    a = ours(words, is_split_into_words=True, return_word_ids=True, return_offsets_mapping=True)
    b = hf_spaced(words, is_split_into_words=True, return_offsets_mapping=True)
    assert a["input_ids"] == b["input_ids"] == spaced(words, is_split_into_words=True)["input_ids"]
    assert a["word_ids"][0] == b.word_ids(0) and a["offset_mapping"][0] == [tuple(o) for o in b["offset_mapping"][0]]
    assert ours.convert_ids_to_tokens(a["input_ids"][0][2]).startswith("Ġ")
    assert spaced("Paris")["input_ids"] == a["input_ids"][1] != ours("Paris")["input_ids"]

    assert (ours.num_special_tokens_to_add(), ours.num_special_tokens_to_add(pair=True)) == (2, 4)
    with pytest.raises(ValueError, match="special tokens"):
        ours("a", "b", truncation=True, max_length=4)  # a pair needs 4 special tokens


def test_save_load_pickle_and_auto_tokenizer(ours, test_lines, tmp_path):
    ours.save_pretrained(tmp_path)
    again = load_tokenizer(tmp_path)
    assert isinstance(again, RobertaTokenizer) and again.vocab == ours.vocab
    assert again(test_lines[:100])["input_ids"] == ours(test_lines[:100])["input_ids"]
    auto = transformers.AutoTokenizer.from_pretrained(str(tmp_path))
    assert auto(test_lines[:100])["input_ids"] == ours(test_lines[:100])["input_ids"]
    assert auto.model_max_length == ours.model_max_length == 512
    copy = pickle.loads(pickle.dumps(ours))
    assert copy(test_lines[:5])["input_ids"] == ours(test_lines[:5])["input_ids"]


def test_missing_and_corrupt_files_are_named(bpe_dir, tmp_path):
    for missing in ("vocab.json", "merges.txt"):
        folder = tmp_path / f"no-{missing}"
        folder.mkdir()
        for name in ("vocab.json", "merges.txt"):
            if name != missing:
                shutil.copy(bpe_dir / name, folder / name)
        with pytest.raises(FileNotFoundError, match=missing):
            RobertaTokenizer.from_pretrained(folder)
    bad = tmp_path / "bad"
    shutil.copytree(bpe_dir, bad)
    (bad / "vocab.json").write_text('{"<s>": 0, "oops"', encoding="utf-8")
    with pytest.raises(ValueError, match=r"vocab\.json"):
        load_tokenizer(bad)
    shutil.copy(bpe_dir / "vocab.json", bad / "vocab.json")
    (bad / "merges.txt").write_text("#version: 0.2\nĠ t\nthree tokens here\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"merges\.txt line 3"):
        load_tokenizer(bad)
    (bad / "merges.txt").write_text("#version: 0.2\nzzqq xxyy\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"merges\.txt does not fit"):
        load_tokenizer(bad)
    empty = tmp_path / "empty.txt"
    empty.write_text("\n\n", encoding="utf-8")
    with pytest.raises(ValueError, match="no text found"):
        train_bpe([empty], tmp_path / "out", vocab_size=1000, show_progress=False)


def test_cli_writes_a_folder_both_libraries_load(wiki_lines, tmp_path):
    from bertforge.cli import main
    text = tmp_path / "lines.txt"
    text.write_text("\n".join(wiki_lines[:1000]) + "\n", encoding="utf-8")
    assert main(["vocab", "--type", "bpe", "--input", str(text), "--output", str(tmp_path / "tok"),
                 "--vocab-size", "1200"]) == 0
    ours = load_tokenizer(tmp_path / "tok")
    assert isinstance(ours, RobertaTokenizer) and ours.vocab_size <= 1200
    auto = transformers.AutoTokenizer.from_pretrained(str(tmp_path / "tok"))
    assert type(auto).__name__ == "RobertaTokenizer"
    assert auto(wiki_lines[1000:1200])["input_ids"] == ours(wiki_lines[1000:1200])["input_ids"]
