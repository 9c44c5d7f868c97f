"""Folders saved by transformers 5 (tokenizer.json + tokenizer_config.json, no vocab.txt / merges.txt /
spiece.model) load with ids identical to transformers' own tokenizer of that folder, and our folders carry both
tokenizer.json and the classic files, so transformers reads them either way."""
from __future__ import annotations

import json
import math
import pickle
import re
import shutil
import struct

import pytest

from bertforge.tokenization import load_tokenizer
from bertforge.tokenization.bpe import RobertaTokenizer, train_bpe
from bertforge.tokenization.sentencepiece import AlbertTokenizer, train_sentencepiece
from bertforge.tokenization.wordpiece import BertTokenizer

from needs import require_module

WIKI = "corpus/wikipedia-en-2018/wiki_en.txt.xz"

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
    out = tmp_path_factory.mktemp(f"{name}-ours")
    ours.save_pretrained(out)
    names = {p.name for p in out.iterdir()}
    assert {"tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"} <= names
    assert_same_ids(ours, transformers.AutoTokenizer.from_pretrained(str(out)), texts)
    assert_same_ids(load_tokenizer(out), theirs, texts)
    if cls is BertTokenizer:  # it runs the file's pipeline (as transformers does), so a save writes no vocab.txt,
        assert not names & CLASSIC and load_tokenizer(out).own_pipeline  # which would load BERT's exact one
        return
    # ALBERT and RoBERTa: tokenizer.json and the classic files, each enough for transformers on its own
    assert names & CLASSIC
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


FAMILIES = {"bert": ("BertTokenizer", BertTokenizer, {}),
            "bert-cased": ("BertTokenizer", BertTokenizer, {"do_lower_case": False}),
            "roberta": ("RobertaTokenizer", RobertaTokenizer, {}),
            "albert": ("AlbertTokenizer", AlbertTokenizer, {})}

# characters that NFKC (or SentencePiece's nmt_nfkc table) rewrites, in running text: the ellipsis, fraction slash
# and hyphen of issue 51, ligatures, full-width letters, super- and subscripts, vulgar fractions, Roman numerals,
# compatibility Hangul, Arabic presentation forms, circled and squared letters, the Ohm and Angstrom signs...
NFKC_TEXTS = [
    "He waited… and then … nothing; see pp. 12⁄13, the so‐called ‘pre‐war’ era – 1914‐1918.",
    "The ﬁrst ﬂoor oﬃce: ﬀ ﬃ ﬄ ﬅ ﬆ ligatures, ＡＢＣ ｆｕｌｌ－ｗｉｄｔｈ ＷＯＲＤＳ and ｶﾀｶﾅ half-width.",
    "E = mc² and H₂O, x³ + y⁴ ≤ z⁽ⁿ⁾; ½ cup, ¾ mile, ⅛ inch, 1⁄2 and ⅞ again.",
    "Louis Ⅻ, Henry Ⅷ and Pope Ⅳ ruled in ⅰⅴ ⅹⅱ; ① ② ⑳ ⒜ ⓐ Ⓩ ㈜ ㎏ ㎞ ℃ ℉ № ™ ℡.",
    "Korean compatibility jamo ㄱㄴㄷ ㅏㅑ and 한국어 ﾡﾢ; Arabic ﻻ ﻼ ﷲ ﷺ ﺍﺏ ﭐ; Greek ϐ ϑ ϕ ϰ µ.",
    "The Ω and Å signs (U+2126, U+212B), K (Kelvin), ǅ ǈ ǋ digraphs, Ǆ ǉ, and ΣΑΣ ΟΔΟΣ.",
    "Spaces: a\u00a0b\u2002c\u2003d\u2009e\u3000f; ︙ ︰ ﹏ ﹐ ﹑ ﹔ ！ ？ ＂ ＃ ＄ ％ ＆ ＇ （ ） ＊ ＋.",
    "café naïve Ångström ﬁancée Straße ǆemal ḱ ẛ ẞ ẜ; ＠user ｈｔｔｐ：／／ｅｘａｍｐｌｅ．ｃｏｍ",
]


def later_lines(corpus) -> list[str]:
    """3,000 Wikipedia lines no other tokenizer test reads and no vocabulary here was trained on: of the
    non-blank lines 40,000-100,000, every one that NFKC changes (629) and the rest spread evenly."""
    import lzma
    import unicodedata

    lines: list[str] = []
    with lzma.open(corpus, "rt", encoding="utf-8") as f:
        for line in f:
            line = line.rstrip("\n")
            if line.strip():
                lines.append(line)
                if len(lines) == 100_000:
                    break
    later = lines[40_000:]
    changed = [i for i, line in enumerate(later) if unicodedata.normalize("NFKC", line) != line]
    rest = [i for i in range(len(later)) if i not in set(changed)]
    picked = sorted([*changed, *rest[:: len(rest) // (3000 - len(changed))][: 3000 - len(changed)]])
    return [later[i] for i in picked]


@pytest.fixture(scope="module")
def held_out_lines(wiki_lines):
    """3,000 Wikipedia lines none of the vocabularies below saw: the 500 longest (up to ~6k characters) of
    lines 20,000-40,000 and 2,500 spread evenly over the rest."""
    held = wiki_lines[20_000:]
    longest = set(sorted(range(len(held)), key=lambda i: len(held[i]))[-500:])
    rest = [i for i in range(len(held)) if i not in longest]
    return [held[i] for i in sorted([*longest, *rest[:: len(rest) // 2500][:2500]])]


@pytest.fixture(scope="module")
def later_held_out(shared_data) -> list[str]:
    lines = later_lines(shared_data / WIKI)
    assert len(lines) == 3000 and all(any(c in line for line in lines) for c in "…‐½")  # ½ is 1⁄2 in NFKC
    return lines


def differing(ours, theirs, texts) -> list[int]:
    mine, reference = ours(texts)["input_ids"], theirs(texts)["input_ids"]
    assert len(mine) == len(reference) == len(texts)
    return [i for i, (a, b) in enumerate(zip(mine, reference)) if a != b]


def assert_transformers_ids(ours, theirs, **sets) -> None:
    """Every text of every set gets transformers' ids; a failure says how many differ and the first."""
    for name, texts in sets.items():
        bad = differing(ours, theirs, texts)
        assert not bad, f"{name}: {len(bad)}/{len(texts)} differ, first: {texts[bad[0]][:80]!r}"


@pytest.mark.slow
@pytest.mark.parametrize("family", FAMILIES)
def test_folder_trained_and_saved_by_transformers_gives_its_ids_on_held_out_lines(family, wiki_lines,
                                                                                   held_out_lines, later_held_out,
                                                                                   tmp_path):
    """transformers trains a vocabulary (its own trainers: WordPiece, byte BPE, Unigram with float64 scores) on
    2,000 lines and saves the folder (tokenizer.json only); every held-out line and NFKC-rich text gets
    transformers' ids."""
    name, cls, settings = FAMILIES[family]
    fast_unigram = {"shrinking_factor": 0.5, "n_sub_iterations": 1} if family == "albert" else {}
    trained = getattr(transformers, name)(**settings).train_new_from_iterator(iter(wiki_lines[:2000]),
                                                                              vocab_size=2000, **fast_unigram)
    trained.save_pretrained(str(tmp_path))
    assert {p.name for p in tmp_path.iterdir()} == {"tokenizer.json", "tokenizer_config.json"}
    ours = load_tokenizer(tmp_path)
    theirs = transformers.AutoTokenizer.from_pretrained(str(tmp_path))
    assert type(ours) is cls and len(held_out_lines) == 3000
    assert_transformers_ids(ours, theirs, held_out=held_out_lines, later=later_held_out, nfkc=NFKC_TEXTS)
    if family != "roberta":  # RoBERTa's pre-split words are words of running text on purpose (RobertaTokenizer)
        words = [t.split() for t in NFKC_TEXTS]
        assert ours(words, is_split_into_words=True)["input_ids"] == \
            theirs(words, is_split_into_words=True)["input_ids"]


# ---- folders built with the tokenizers library: their tokenizer.json declares a pipeline of its own ----------
def own_pipeline_folder(family: str, lines: list[str], out):
    """A folder as the `tokenizers` library builds one, with normalisers the family's transformers class does not
    use (NFKC first), trained on `lines`, saved as tokenizer.json + a tokenizer_config.json naming the generic
    class (which makes transformers run the file as it is)."""
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers
    if family == "bert":
        specials = {"unk_token": "[UNK]", "sep_token": "[SEP]", "pad_token": "[PAD]", "cls_token": "[CLS]",
                    "mask_token": "[MASK]"}
        tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
        tok.normalizer = normalizers.Sequence([normalizers.NFKC(), normalizers.BertNormalizer(lowercase=True)])
        tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
        tok.decoder = decoders.WordPiece()
        trainer = trainers.WordPieceTrainer(vocab_size=2000, special_tokens=list(specials.values()),
                                            show_progress=False)
        cls_sep = ("[CLS]", "[SEP]")
    elif family == "roberta":
        specials = {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>", "sep_token": "</s>",
                    "pad_token": "<pad>", "cls_token": "<s>", "mask_token": "<mask>"}
        tok = Tokenizer(models.BPE())
        tok.normalizer = normalizers.Sequence([normalizers.NFKC(), normalizers.Lowercase()])
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=True)
        tok.decoder = decoders.ByteLevel()
        trainer = trainers.BpeTrainer(vocab_size=2000, special_tokens=["<s>", "<pad>", "</s>", "<unk>", "<mask>"],
                                      initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
        cls_sep = ("<s>", "</s>")
    else:  # ALBERT's kind, as tokenizers' SentencePieceUnigramTokenizer builds it
        specials = {"bos_token": "[CLS]", "eos_token": "[SEP]", "unk_token": "<unk>", "sep_token": "[SEP]",
                    "pad_token": "<pad>", "cls_token": "[CLS]", "mask_token": "[MASK]"}
        tok = Tokenizer(models.Unigram())
        tok.normalizer = normalizers.Sequence([normalizers.Nmt(), normalizers.NFKC(),
                                               normalizers.Replace(r"\s+", " "), normalizers.Lowercase()])
        tok.pre_tokenizer = pre_tokenizers.Metaspace()
        tok.decoder = decoders.Metaspace()
        trainer = trainers.UnigramTrainer(vocab_size=2000, unk_token="<unk>",
                                          special_tokens=["<pad>", "<unk>", "[CLS]", "[SEP]", "[MASK]"],
                                          shrinking_factor=0.5, n_sub_iterations=1, show_progress=False)
        cls_sep = ("[CLS]", "[SEP]")
    tok.train_from_iterator(lines, trainer=trainer)
    cls_id, sep_id = tok.token_to_id(cls_sep[0]), tok.token_to_id(cls_sep[1])
    tok.post_processor = processors.TemplateProcessing(
        single=f"{cls_sep[0]} $A {cls_sep[1]}", pair=f"{cls_sep[0]} $A {cls_sep[1]} $B:1 {cls_sep[1]}:1",
        special_tokens=[(cls_sep[0], cls_id), (cls_sep[1], sep_id)])
    out.mkdir(parents=True, exist_ok=True)
    tok.save(str(out / "tokenizer.json"))
    (out / "tokenizer_config.json").write_text(json.dumps({"tokenizer_class": "PreTrainedTokenizerFast",
                                                           **specials}), encoding="utf-8")
    return out


REBUILD = {"bert": {"do_lower_case": True}, "roberta": {"add_prefix_space": True}, "albert": {"do_lower_case": True}}


@pytest.mark.slow
@pytest.mark.parametrize("family", REBUILD)
def test_folder_with_its_own_pipeline_runs_it(family, wiki_lines, held_out_lines, later_held_out, tmp_path):
    """A tokenizer.json whose normaliser is not the family's (NFKC first) runs
    as the file says: transformers' ids on 6,000 held-out lines and the NFKC-rich texts, where the family's
    pipeline rebuilt from the vocabulary gives <unk> or other pieces for "…", "ﬁ", "Ⅻ"... A save writes it back
    without classic files (they would describe another tokenizer), and loads again alike, here and in
    transformers."""
    folder = own_pipeline_folder(family, wiki_lines[:2000], tmp_path / "built")
    ours = load_tokenizer(folder)
    theirs = transformers.AutoTokenizer.from_pretrained(str(folder))
    assert type(ours) is FAMILIES[family][1] and ours.own_pipeline
    rebuilt = load_tokenizer(folder, **REBUILD[family])  # given casing: the family's pipeline, as before issue 51
    assert not rebuilt.own_pipeline and differing(rebuilt, theirs, NFKC_TEXTS), "the file's pipeline is the family's"
    assert_transformers_ids(ours, theirs, held_out=held_out_lines, later=later_held_out, nfkc=NFKC_TEXTS)
    firsts, seconds = later_held_out[:200:2], later_held_out[1:200:2]
    assert ours(firsts, seconds, truncation=True, max_length=40)["input_ids"] == \
        theirs(firsts, seconds, truncation=True, max_length=40)["input_ids"]
    copied = pickle.loads(pickle.dumps(ours))  # what data-loading workers receive
    assert copied.own_pipeline and not differing(copied, theirs, NFKC_TEXTS)
    ours.save_pretrained(tmp_path / "ours")
    assert not {p.name for p in (tmp_path / "ours").iterdir()} & CLASSIC
    again = load_tokenizer(tmp_path / "ours")
    assert again.own_pipeline
    assert_transformers_ids(again, theirs, later=later_held_out[:500], nfkc=NFKC_TEXTS)
    assert_transformers_ids(transformers.AutoTokenizer.from_pretrained(str(tmp_path / "ours")), theirs,
                            nfkc=NFKC_TEXTS)


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
