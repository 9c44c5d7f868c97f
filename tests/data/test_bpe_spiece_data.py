"""The pre-training pipeline with RoBERTa's byte-level BPE and ALBERT's SentencePiece: prepare, batches, and
whole-word masking that reads word starts ("Ġ", "▁") instead of WordPiece's "##" continuations."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from bertforge.cli import main
from bertforge.data import MaskingConfig, PretrainingDataset, prepare_corpus
from bertforge.data.masking import VocabTables, mask_tokens
from bertforge.data.shards import CorpusSplit, load_tokenizer

ARTICLES = 80


@pytest.fixture(scope="module")
def small_slice(wiki_articles, tmp_path_factory):
    path = tmp_path_factory.mktemp("wiki-small") / "wiki.txt"
    path.write_text("\n\n".join("\n".join(a) for a in wiki_articles[:ARTICLES]) + "\n", encoding="utf-8")
    return path


@pytest.fixture(scope="module", params=["bpe", "sentencepiece"])
def vocab_folder(request, small_slice, tmp_path_factory):
    """A small vocabulary of each kind, trained through the CLI on the slice itself."""
    out = tmp_path_factory.mktemp(f"vocab-{request.param}") / "tok"
    size = "1000" if request.param == "bpe" else "800"
    assert main(["vocab", "--type", request.param, "--input", str(small_slice), "--output", str(out),
                 "--vocab-size", size]) == 0
    return out


@pytest.fixture(scope="module")
def prepared(vocab_folder, small_slice, tmp_path_factory):
    out = tmp_path_factory.mktemp("prepared") / "data"
    assert main(["prepare", "--input", str(small_slice), "--vocab", str(vocab_folder), "--output", str(out),
                 "--workers", "1", "--heldout-fraction", "0", "--max-seq-length", "64"]) == 0
    return out


def word_starts(tokenizer, ids: torch.Tensor) -> np.ndarray:
    tokens = np.array([tokenizer.convert_ids_to_tokens(int(i)) for i in ids.reshape(-1)]).reshape(ids.shape)
    return np.char.startswith(tokens, tokenizer.word_start_prefix)


def test_prepare_stores_the_ids_of_the_folder_tokenizer(prepared, vocab_folder, wiki_articles):
    tokenizer = load_tokenizer(vocab_folder)
    split = CorpusSplit(prepared, "train")
    assert split.num_documents == ARTICLES
    shard = split.shards[0]
    first_sentence = shard.tokens[shard.sentence_offsets[0]:shard.sentence_offsets[1]].tolist()
    assert first_sentence == tokenizer.encode_batch_ids([wiki_articles[0][0]])[0]
    second = shard.tokens[shard.sentence_offsets[1]:shard.sentence_offsets[2]].tolist()
    # later sentences are encoded after their space, as inside running text
    assert tokenizer.convert_ids_to_tokens(second[0]).startswith(tokenizer.word_start_prefix)


@pytest.mark.parametrize("packing", ["full-sentences", "doc-sentences"])
def test_mlm_batches_with_whole_word_masking(prepared, vocab_folder, packing):
    tokenizer = load_tokenizer(vocab_folder)
    ds = PretrainingDataset(prepared, vocab_folder, objective="mlm", packing=packing, max_seq_length=64,
                            batch_size=16, masking=MaskingConfig(whole_word=True, rate=0.3), seed=3)
    batch = next(iter(ds))
    ids, labels, mask = batch["input_ids"], batch["labels"], batch["attention_mask"].bool()
    originals = torch.where(labels != -100, labels, ids)
    assert (originals[:, 0] == tokenizer.cls_token_id).all()
    assert (originals[~mask] == tokenizer.pad_token_id).all() and (batch["token_type_ids"] == 0).all()
    lengths = mask.sum(1)
    assert (originals[torch.arange(len(ids)), lengths - 1] == tokenizer.sep_token_id).all()
    assert (labels != -100).any()

    # whole words: a piece that does not start a word is chosen exactly when the piece before it is
    special = torch.isin(originals, torch.tensor(tokenizer.all_special_ids))
    continues = torch.from_numpy(~word_starts(tokenizer, originals)) & ~special & mask
    continues[:, 1:] &= ~special[:, :-1]
    continues[:, 0] = False
    chosen = labels != -100
    assert continues.any()
    assert torch.equal(chosen[:, 1:][continues[:, 1:]], chosen[:, :-1][continues[:, 1:]])


def test_word_start_tables_and_masking_on_a_toy_vocab():
    tokens = ["<s>", "<pad>", "</s>", "<unk>", "ĠNew", "ĠYork", "er", "s", ".", "<mask>"]
    tables = VocabTables.from_tokens(tokens, [0, 1, 2, 3, 9], mask_id=9, word_start_prefix="Ġ")
    assert tables.is_continuation[4:9].tolist() == [False, False, True, True, True]
    ids = np.array([[0, 4, 6, 7, 5, 8, 2, 1]])
    for seed in range(20):
        _, labels = mask_tokens(ids, np.array([7]), np.array([seed], np.uint64),
                                MaskingConfig(whole_word=True, rate=0.5), 3, tables)
        chosen = (labels[0] != -100).tolist()
        assert chosen[1] == chosen[2] == chosen[3] and chosen[4] == chosen[5]  # "ĠNew er s", "ĠYork ."
        assert not chosen[0] and not chosen[6] and not chosen[7]


def test_prepare_in_process_matches_worker_processes(vocab_folder, small_slice, tmp_path):
    tokenizer = load_tokenizer(vocab_folder)
    a = prepare_corpus([small_slice], tokenizer, tmp_path / "a", workers=0, heldout_fraction=0.0,
                       show_progress=False)
    b = prepare_corpus([small_slice], str(vocab_folder), tmp_path / "b", workers=1, heldout_fraction=0.0,
                       show_progress=False)
    assert a["vocab"]["sha256"] == b["vocab"]["sha256"] and a["counts"]["tokens"] == b["counts"]["tokens"]
    assert np.array_equal(CorpusSplit(tmp_path / "a").shards[0].tokens, CorpusSplit(tmp_path / "b").shards[0].tokens)
