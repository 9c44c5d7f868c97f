"""experiments/hf_pretrain_mlm.py: the transformers contender trains on bertforge's training documents, is asked
about bertforge's held-out documents, has bertforge's model size, and its held-out loss is bertforge's question."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from needs import require_module

import hf_pretrain_mlm as hf  # noqa: E402


@pytest.fixture(scope="module")
def hf_tokenizer(vocab_dir):
    require_module("transformers")
    return hf.load_hf_tokenizer(str(vocab_dir))


def split(data: Path, tokenizer):
    from bertforge.data import load_manifest
    documents = hf.read_documents(hf.corpus_path(data, None))
    return hf.split_like_prepare(hf.tokenize_documents(documents, tokenizer, show_progress=False), load_manifest(data))


def test_split_is_prepares_by_fraction(train_data, hf_tokenizer):
    train, heldout = split(train_data, hf_tokenizer)
    assert heldout, "the fixture holds out 5 % of 120 articles"
    hf.check_same_split(train_data, train, heldout)  # raises unless both splits are prepare's, token for token


def test_split_is_prepares_by_document_count_and_a_wrong_split_is_refused(train_data, vocab_dir, hf_tokenizer,
                                                                          tmp_path):
    from bertforge.data import load_manifest, prepare_corpus
    text = tmp_path / "wiki.txt"
    text.write_text(hf.corpus_path(train_data, None).read_text(encoding="utf-8")
                    + "\n\n\x01\x02\n\n", encoding="utf-8")  # and a document with no tokens: it gets no ordinal
    data = tmp_path / "prepared"
    prepare_corpus([text], str(vocab_dir), data, workers=0, heldout_documents=7, show_progress=False)
    train, heldout = split(data, hf_tokenizer)
    assert len(heldout) == 7
    hf.check_same_split(data, train, heldout)
    documents = hf.tokenize_documents(hf.read_documents(text), hf_tokenizer, show_progress=False)
    other = hf.split_like_prepare(documents, {**load_manifest(data), "heldout": {"documents": 8, "fraction": None}})
    with pytest.raises(SystemExit, match="split is not this corpus.s documents"):
        hf.check_same_split(data, *other)


def test_group_texts_wraps_every_line_and_drops_the_remainder():
    documents = [[[5, 6], [7]], [[8, 9, 10]]]
    blocks = hf.group_texts(documents, cls_id=1, sep_id=2, block_size=4)
    # [CLS] 5 6 [SEP] [CLS] 7 [SEP] [CLS] 8 9 10 [SEP] -> three blocks of 4 (12 tokens, nothing left over)
    assert blocks.tolist() == [[1, 5, 6, 2], [1, 7, 2, 1], [8, 9, 10, 2]]
    assert hf.group_texts(documents, 1, 2, 5).tolist() == [[1, 5, 6, 2, 1], [7, 2, 1, 8, 9]]


def test_model_has_bertforges_mini_size(hf_tokenizer):
    import transformers

    from bertforge.model import BertForMaskedLM
    from bertforge.model.auto import preset_config
    theirs = transformers.BertForMaskedLM(hf.hf_config("mini", hf_tokenizer))
    ours = BertForMaskedLM(preset_config("mini", vocab_size=len(hf_tokenizer), pad_token_id=hf_tokenizer.pad_token_id))
    count = lambda model: sum(p.numel() for p in model.parameters())  # noqa: E731
    assert count(theirs) == count(ours)
    assert theirs.config.num_hidden_layers == 4 and theirs.config.hidden_size == 256


@pytest.mark.slow
def test_heldout_loss_is_the_question_bertforge_asks(train_data, hf_tokenizer, tmp_path):
    """The transformers model's held-out loss on bertforge's masks equals what bertforge's own model (the same
    weights, loaded from the saved folder) gives on recipe_race's held-out question."""
    import torch
    import transformers

    import recipe_race
    torch.manual_seed(0)
    model = transformers.BertForMaskedLM(hf.hf_config("tiny", hf_tokenizer)).eval()
    model.save_pretrained(tmp_path / "m")
    hf_tokenizer.save_pretrained(tmp_path / "m")
    theirs = hf.heldout_loss_bertforge_masks(model, train_data, str(tmp_path / "m"), batches=2)
    ours = recipe_race.evaluate_model(tmp_path / "m", str(train_data), eval_batches=2)["mlm_loss"]
    assert theirs == pytest.approx(ours, abs=1e-4)
    assert abs(theirs - np.log(len(hf_tokenizer))) < 1.0  # an untrained model: near the uniform guess
