"""Vocabulary training: BERT's layout, loadable by us and by the original, clear errors."""

from __future__ import annotations

import gzip
import lzma

import pytest

from bertforge.tokenization import BertTokenizer, train_wordpiece


@pytest.fixture(scope="module")
def slice_file(wiki_lines, tmp_path_factory):
    path = tmp_path_factory.mktemp("corpus") / "wiki.txt.xz"
    with lzma.open(path, "wt", encoding="utf-8") as f:
        f.write("\n".join(wiki_lines[:5000]) + "\n\n")
    return path


@pytest.fixture(scope="module")
def trained_2k(slice_file, tmp_path_factory):
    return train_wordpiece([slice_file], tmp_path_factory.mktemp("vocab2k"), vocab_size=2000, show_progress=False)


def read_vocab(folder):
    return (folder / "vocab.txt").read_text(encoding="utf-8").split("\n")[:-1]


def test_layout_matches_original_bert(trained_2k):
    tokens = read_vocab(trained_2k)
    assert len(tokens) == 2000 and len(set(tokens)) == 2000
    assert tokens[0] == "[PAD]"
    assert tokens[1:100] == [f"[unused{i}]" for i in range(99)]
    assert tokens[100:104] == ["[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    assert any(t.startswith("##") for t in tokens) and "the" in tokens
    assert all(t == t.lower() for t in tokens[104:])  # uncased
    assert (trained_2k / "tokenizer_config.json").is_file()


def test_trained_vocab_loads_here_and_in_reference(trained_2k, wiki_lines, reference_for):
    tok = BertTokenizer.from_pretrained(trained_2k)
    assert (tok.pad_token_id, tok.unk_token_id, tok.cls_token_id, tok.sep_token_id, tok.mask_token_id) == (
        0,
        100,
        101,
        102,
        103,
    )
    ref = reference_for(trained_2k, True, 2000)
    texts = wiki_lines[5000:5400]
    assert tok(texts)["input_ids"] == [ref.encode(t) for t in texts]


def test_compact_layout_cased_and_gzip(wiki_lines, tmp_path):
    src = tmp_path / "text.txt.gz"
    with gzip.open(src, "wt", encoding="utf-8") as f:
        f.write("\n".join(wiki_lines[:3000]))
    out = train_wordpiece(src, tmp_path / "v", vocab_size=1500, lowercase=False, num_unused=0, show_progress=False)
    tokens = read_vocab(out)
    assert tokens[:5] == ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    assert any(t != t.lower() for t in tokens)  # cased
    assert BertTokenizer.from_pretrained(out).do_lower_case is False


def test_progress_bar_shows_bytes(slice_file, tmp_path, capsys):
    train_wordpiece([slice_file], tmp_path / "v", vocab_size=500, show_progress=True)
    err = capsys.readouterr().err
    assert "B/s" in err and "100%" in err


def test_errors_name_the_files(tmp_path):
    empty = tmp_path / "empty.txt"
    empty.write_text("\n  \n\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"no text found in .*empty\.txt"):
        train_wordpiece([empty], tmp_path / "out", vocab_size=500, show_progress=False)
    with pytest.raises(FileNotFoundError, match="missing.txt"):
        train_wordpiece([empty, tmp_path / "missing.txt"], tmp_path / "out", show_progress=False)
    with pytest.raises(ValueError, match="no room"):
        train_wordpiece([empty], tmp_path / "out", vocab_size=104, show_progress=False)
    with pytest.raises(ValueError, match="at least one input file"):
        train_wordpiece([], tmp_path / "out")
