"""XLNet's SentencePiece tokenizer against `transformers.XLNetTokenizer` built from the same `spiece.model`, on
held-out Wikipedia lines: the same ids, `<sep> <cls>` at the end, padding on the left."""

from __future__ import annotations

import shutil

import pytest
import torch

from bertforge.tokenization import load_tokenizer
from bertforge.tokenization.xlnet import XLNetTokenizer, train_xlnet_sentencepiece

from needs import require_module

transformers = require_module("transformers")
sentencepiece = require_module("sentencepiece")
VOCAB_SIZE = 3000


@pytest.fixture(scope="module")
def spiece_dir(wiki_lines, tmp_path_factory):
    """A 3,000-piece unigram model with XLNet's special tokens, trained on 3,000 Wikipedia lines."""
    root = tmp_path_factory.mktemp("xlnet-spiece")
    text = root / "slice.txt"
    text.write_text("\n".join(wiki_lines[:3000]) + "\n", encoding="utf-8")
    return train_xlnet_sentencepiece([text], root / "tok", vocab_size=VOCAB_SIZE)


@pytest.fixture(scope="module")
def model_only(spiece_dir, tmp_path_factory):
    """A folder holding `spiece.model` alone: what each library builds its own tokenizer from."""
    folder = tmp_path_factory.mktemp("xlnet-spiece-model-only")
    shutil.copy(spiece_dir / "spiece.model", folder / "spiece.model")
    return folder


@pytest.fixture(scope="module")
def ours(model_only) -> XLNetTokenizer:
    return XLNetTokenizer.from_pretrained(model_only)


@pytest.fixture(scope="module")
def theirs(model_only):
    require_module("google.protobuf", hint="transformers reads spiece.model through protobuf")
    tok = transformers.XLNetTokenizer.from_pretrained(str(model_only))
    assert len(tok) == VOCAB_SIZE and tok.padding_side == "left"
    return tok


@pytest.fixture(scope="module")
def held_out(wiki_lines) -> list[str]:
    return wiki_lines[5000:8000]  # 3,000 lines not seen in training


def test_layout_of_the_trained_model(ours, spiece_dir):
    assert ours.vocab_size == VOCAB_SIZE
    assert ours.convert_ids_to_tokens(list(range(9))) == ["<unk>", "<s>", "</s>", "<cls>", "<sep>", "<pad>",
                                                          "<mask>", "<eod>", "<eop>"]
    assert (ours.unk_token_id, ours.cls_token_id, ours.sep_token_id, ours.pad_token_id, ours.mask_token_id) == \
        (0, 3, 4, 5, 6)
    processor = sentencepiece.SentencePieceProcessor(model_file=str(spiece_dir / "spiece.model"))
    assert processor.GetPieceSize() == VOCAB_SIZE and all(processor.IsControl(i) for i in range(3, 9))


def test_ids_equal_transformers_on_held_out_lines_and_pairs(ours, theirs, held_out):
    mine, reference = ours(held_out)["input_ids"], theirs(held_out)["input_ids"]
    mismatches = sum(a != b for a, b in zip(mine, reference, strict=True))
    assert mismatches == 0, f"{mismatches} of {len(held_out)} held-out lines differ"
    assert all(row[-2:] == [ours.sep_token_id, ours.cls_token_id] for row in mine)
    firsts, seconds = held_out[:1500], held_out[1500:]
    a, b = ours(firsts, seconds), theirs(firsts, seconds, return_token_type_ids=True)
    assert a["input_ids"] == b["input_ids"] and a["token_type_ids"] == b["token_type_ids"]
    assert all(types[-1] == 2 and types[-2] == 1 for types in a["token_type_ids"])  # <cls> is type 2, B is 1
    assert ours.encode_batch_ids(held_out) == [theirs.encode(t, add_special_tokens=False) for t in held_out]


def test_padding_is_on_the_left_and_truncation_matches(ours, theirs, held_out):
    for kwargs in (dict(padding=True), dict(truncation=True, max_length=40, padding="max_length")):
        a = ours(held_out[:200], held_out[200:400], **kwargs)
        b = theirs(held_out[:200], held_out[200:400], return_token_type_ids=True, **kwargs)
        for key in ("input_ids", "token_type_ids", "attention_mask"):
            assert a[key] == b[key], (kwargs, key)
    padded = ours(held_out[:200], padding=True)
    row = max(range(200), key=lambda i: padded["attention_mask"][i].count(0))
    assert padded["attention_mask"][row][0] == 0 and padded["input_ids"][row][0] == ours.pad_token_id
    assert padded["attention_mask"][row].count(0) > 0 and padded["input_ids"][row][-1] == ours.cls_token_id


def test_save_load_and_auto_classes(ours, theirs, spiece_dir, held_out, tmp_path):
    ours.save_pretrained(tmp_path)
    again = load_tokenizer(tmp_path)
    assert isinstance(again, XLNetTokenizer) and isinstance(load_tokenizer(spiece_dir), XLNetTokenizer)
    auto = transformers.AutoTokenizer.from_pretrained(str(tmp_path))
    assert type(auto).__name__ == "XLNetTokenizer" and auto.padding_side == "left"
    lines = held_out[:300]
    assert again(lines, padding=True)["input_ids"] == auto(lines, padding=True)["input_ids"] \
        == theirs(lines, padding=True)["input_ids"]


def test_tokenizer_and_model_together_match_transformers(ours, theirs, held_out, tmp_path):
    """Our tokenizer into our XLNet equals transformers' tokenizer into transformers' XLNet (left padding, pairs)."""
    from bertforge.model.xlnet import XLNetForSequenceClassification
    torch.manual_seed(0)
    config = transformers.XLNetConfig(d_model=32, n_layer=2, n_head=4, d_inner=64, vocab_size=VOCAB_SIZE)
    hf_model = transformers.XLNetForSequenceClassification(config).eval()
    hf_model.save_pretrained(tmp_path)
    model = XLNetForSequenceClassification.from_pretrained(tmp_path).eval()
    a = ours(held_out[:8], held_out[8:16], padding=True, return_tensors="pt")
    b = theirs(held_out[:8], held_out[8:16], padding=True, return_tensors="pt")
    with torch.no_grad():
        mine = model(a["input_ids"], attention_mask=a["attention_mask"], token_type_ids=a["token_type_ids"]).logits
        reference = hf_model(**b).logits
    assert (mine - reference).abs().max().item() < 1e-5


def test_training_refuses_a_vocabulary_without_room(tmp_path):
    text = tmp_path / "t.txt"
    text.write_text("a few words\n", encoding="utf-8")
    with pytest.raises(ValueError, match="vocab_size must be an int > 9"):
        train_xlnet_sentencepiece([text], tmp_path / "out", vocab_size=9)
