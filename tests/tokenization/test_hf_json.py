"""Folders saved by transformers 5 (tokenizer.json + tokenizer_config.json, no vocab.txt / merges.txt /
spiece.model) load with ids identical to transformers' own tokenizer of that folder, and our folders carry both
tokenizer.json and the classic files, so transformers reads them either way."""
from __future__ import annotations

import math
import re
import shutil
import struct

import pytest

from bertforge.tokenization import load_tokenizer
from bertforge.tokenization.bpe import RobertaTokenizer, train_bpe
from bertforge.tokenization.sentencepiece import AlbertTokenizer, train_sentencepiece
from bertforge.tokenization.wordpiece import BertTokenizer

from needs import require_module

transformers = require_module("transformers")

CLASSIC = {"vocab.txt", "vocab.json", "merges.txt", "spiece.model"}


@pytest.fixture(scope="module")
def texts(wiki_lines, real_pairs):
    lines = wiki_lines[5000:5150] + ["The [MASK] sat on the <mask> .", "  Café  NAÏVE  über ``quoted'' text ", "x"]
    firsts, seconds = zip(*real_pairs[:100])
    return lines, list(firsts), list(seconds)


def saved_by_transformers(source, tmp_path_factory, name):
    """transformers' tokenizer of `source`, saved by transformers into a new folder, as transformers 5 saves it:
    tokenizer.json and no classic file (a transformers that also writes them has them removed)."""
    out = tmp_path_factory.mktemp(name)
    transformers.AutoTokenizer.from_pretrained(str(source)).save_pretrained(str(out))
    names = {p.name for p in out.iterdir()}
    assert "tokenizer.json" in names
    for classic in names & CLASSIC:
        (out / classic).unlink()
    return out


def assert_same_ids(ours, theirs, texts):
    lines, firsts, seconds = texts
    assert ours(lines)["input_ids"] == theirs(lines)["input_ids"]
    assert ours(firsts, seconds)["input_ids"] == theirs(firsts, seconds)["input_ids"]
    if "token_type_ids" in theirs(firsts[:1], seconds[:1]):  # RoBERTa's transformers tokenizer returns none
        assert ours(firsts, seconds)["token_type_ids"] == theirs(firsts, seconds)["token_type_ids"]
    for length in (12, 24):
        kwargs = {"truncation": "longest_first", "max_length": length}
        assert ours(firsts, seconds, **kwargs)["input_ids"] == theirs(firsts, seconds, **kwargs)["input_ids"]
    assert ours(lines, truncation=True, max_length=16)["input_ids"] == \
        theirs(lines, truncation=True, max_length=16)["input_ids"]
    assert (ours.cls_token_id, ours.sep_token_id, ours.pad_token_id, ours.mask_token_id, ours.unk_token_id) == \
        (theirs.cls_token_id, theirs.sep_token_id, theirs.pad_token_id, theirs.mask_token_id, theirs.unk_token_id)


def check_family(source, cls, tmp_path_factory, texts, name):
    hf_dir = saved_by_transformers(source, tmp_path_factory, name)
    ours = load_tokenizer(hf_dir)
    assert type(ours) is cls
    theirs = transformers.AutoTokenizer.from_pretrained(str(hf_dir))
    assert_same_ids(ours, theirs, texts)
    # our save: tokenizer.json and the classic files, each enough for transformers on its own
    out = tmp_path_factory.mktemp(f"{name}-ours")
    ours.save_pretrained(out)
    names = {p.name for p in out.iterdir()}
    assert {"tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"} <= names and names & CLASSIC
    assert_same_ids(ours, transformers.AutoTokenizer.from_pretrained(str(out)), texts)
    classic = tmp_path_factory.mktemp(f"{name}-classic")
    for p in out.iterdir():
        if p.name != "tokenizer.json":
            shutil.copy(p, classic / p.name)
    assert_same_ids(load_tokenizer(classic), theirs, texts)
    assert_same_ids(ours, transformers.AutoTokenizer.from_pretrained(str(classic)), texts)


@pytest.mark.slow
def test_bert_wordpiece_from_transformers_5_folder(minilm_dir, tmp_path_factory, texts):
    check_family(minilm_dir, BertTokenizer, tmp_path_factory, texts, "bert")


@pytest.mark.slow
def test_roberta_bpe_from_transformers_5_folder(wiki_lines, tmp_path_factory, texts):
    root = tmp_path_factory.mktemp("bpe-train")
    (root / "text.txt").write_text("\n".join(wiki_lines[:1500]) + "\n", encoding="utf-8")
    source = train_bpe([root / "text.txt"], root / "tok", vocab_size=1200, show_progress=False)
    check_family(source, RobertaTokenizer, tmp_path_factory, texts, "roberta")


@pytest.mark.slow
def test_albert_unigram_from_transformers_5_folder(wiki_lines, tmp_path_factory, texts):
    root = tmp_path_factory.mktemp("spm-train")
    (root / "text.txt").write_text("\n".join(wiki_lines[:1500]) + "\n", encoding="utf-8")
    source = train_sentencepiece([root / "text.txt"], root / "tok", vocab_size=1200, show_progress=False)
    check_family(source, AlbertTokenizer, tmp_path_factory, texts, "albert")


FAMILIES = {"bert": ("BertTokenizer", BertTokenizer), "roberta": ("RobertaTokenizer", RobertaTokenizer),
            "albert": ("AlbertTokenizer", AlbertTokenizer)}


@pytest.fixture(scope="module")
def held_out_lines(wiki_lines):
    """3,000 Wikipedia lines none of the vocabularies below saw: the 500 longest (up to ~6k characters) of
    lines 20,000-40,000 and 2,500 spread evenly over the rest."""
    held = wiki_lines[20_000:]
    longest = set(sorted(range(len(held)), key=lambda i: len(held[i]))[-500:])
    rest = [i for i in range(len(held)) if i not in longest]
    return [held[i] for i in sorted([*longest, *rest[:: len(rest) // 2500][:2500]])]


@pytest.mark.slow
@pytest.mark.parametrize("family", FAMILIES)
def test_folder_trained_and_saved_by_transformers_gives_its_ids_on_held_out_lines(family, wiki_lines,
                                                                                   held_out_lines, tmp_path):
    """transformers trains a vocabulary (its own trainers: WordPiece, byte BPE, Unigram with float64 scores) on
    2,000 lines and saves the folder (tokenizer.json only); every held-out line gets transformers' ids."""
    name, cls = FAMILIES[family]
    fast_unigram = {"shrinking_factor": 0.5, "n_sub_iterations": 1} if family == "albert" else {}
    trained = getattr(transformers, name)().train_new_from_iterator(iter(wiki_lines[:2000]), vocab_size=2000,
                                                                    **fast_unigram)
    trained.save_pretrained(str(tmp_path))
    assert {p.name for p in tmp_path.iterdir()} == {"tokenizer.json", "tokenizer_config.json"}
    ours = load_tokenizer(tmp_path)
    theirs = transformers.AutoTokenizer.from_pretrained(str(tmp_path))
    assert type(ours) is cls and len(held_out_lines) == 3000
    mine, reference = ours(held_out_lines)["input_ids"], theirs(held_out_lines)["input_ids"]
    differ = [i for i, (a, b) in enumerate(zip(mine, reference)) if a != b]
    assert len(mine) == len(reference) and not differ, \
        f"{len(differ)}/3000 lines differ, first: {held_out_lines[differ[0]][:80]!r}"


def test_unigram_scores_keep_float64_precision(wiki_lines, tmp_path):
    """Unigram's Viterbi adds float64 scores, and an exact tie ("xiii" = x+i+ii = x+ii+i) is decided by the
    rounding of those sums: transformers runs the float64 scores of tokenizer.json, and so must we. (A copy of
    the scores rounded to float32, as spiece.model stores them, splits "XIII" the other way.)"""
    counts = {"▁": 50, "▁i": 9, "▁v": 7, "▁x": 5, "i": 30, "ii": 11, "v": 8, "x": 6, "l": 4, "c": 4, "d": 3, "m": 3}
    specials = [("<pad>", 0.0), ("<unk>", 0.0), ("[CLS]", 0.0), ("[SEP]", 0.0), ("[MASK]", 0.0)]
    exact = specials + [(piece, math.log(n / sum(counts.values()))) for piece, n in counts.items()]
    rounded = [(piece, struct.unpack("<f", struct.pack("<f", score))[0]) for piece, score in exact]
    transformers.AlbertTokenizer(vocab=exact).save_pretrained(str(tmp_path / "exact"))
    transformers.AlbertTokenizer(vocab=rounded).save_pretrained(str(tmp_path / "rounded"))
    theirs = transformers.AutoTokenizer.from_pretrained(str(tmp_path / "exact"))
    theirs_rounded = transformers.AutoTokenizer.from_pretrained(str(tmp_path / "rounded"))
    numerals = sorted({w for line in wiki_lines for w in line.split() if re.fullmatch("[IVXLCDM]+", w)})
    reference = theirs(numerals)["input_ids"]
    assert reference != theirs_rounded(numerals)["input_ids"], "no tie is decided by the rounding: test is void"
    ours = load_tokenizer(tmp_path / "exact")
    assert ours(numerals)["input_ids"] == reference
    # our save keeps them too (tokenizer.json beside the float32 spiece.model, and tokenizer.json is read)
    ours.save_pretrained(tmp_path / "ours")
    assert load_tokenizer(tmp_path / "ours")(numerals)["input_ids"] == reference
    assert transformers.AutoTokenizer.from_pretrained(str(tmp_path / "ours"))(numerals)["input_ids"] == reference


def test_rebuilt_spiece_model_reads_like_the_original(wiki_lines, tmp_path_factory):
    """The spiece.model rebuilt from a tokenizer.json gives SentencePiece itself the original's pieces and ids."""
    import sentencepiece
    root = tmp_path_factory.mktemp("spm-rebuild")
    (root / "text.txt").write_text("\n".join(wiki_lines[:1500]) + "\n", encoding="utf-8")
    source = train_sentencepiece([root / "text.txt"], root / "tok", vocab_size=800, show_progress=False)
    only_json = root / "json-only"
    only_json.mkdir()
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(source / name, only_json / name)
    rebuilt = root / "rebuilt"
    load_tokenizer(only_json).save_pretrained(rebuilt)
    original, again = sentencepiece.SentencePieceProcessor(), sentencepiece.SentencePieceProcessor()
    original.Load(str(source / "spiece.model"))
    again.Load(str(rebuilt / "spiece.model"))
    assert again.GetPieceSize() == original.GetPieceSize()
    assert [again.IdToPiece(i) for i in range(again.GetPieceSize())] == \
        [original.IdToPiece(i) for i in range(original.GetPieceSize())]
    assert (again.unk_id(), again.pad_id()) == (original.unk_id(), original.pad_id())
    lines = [line.lower() for line in wiki_lines[5000:5200]]
    assert again.EncodeAsIds(lines) == original.EncodeAsIds(lines)


def test_tokenizer_json_of_another_kind_is_named(tmp_path, minilm_dir):
    shutil.copy(minilm_dir / "tokenizer.json", tmp_path / "tokenizer.json")
    with pytest.raises(ValueError, match="holds a WordPiece tokenizer, not RoBERTa"):
        RobertaTokenizer.from_pretrained(tmp_path)
    (tmp_path / "tokenizer.json").write_text('{"model": {"type": "WordLevel", "vocab": {}}}')
    with pytest.raises(ValueError, match="model type 'WordLevel'"):
        load_tokenizer(tmp_path)
    (tmp_path / "tokenizer.json").write_text('{"model": ')
    with pytest.raises(ValueError, match=r"tokenizer.json: not valid JSON \(line 1"):
        load_tokenizer(tmp_path)
