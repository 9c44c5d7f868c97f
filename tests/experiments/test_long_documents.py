"""experiments/long_documents.py: the scored tokens are the same masked tokens past position 512 whichever way
the article is read, and their loss is transformers' MLM loss on those rows."""
from __future__ import annotations


import json

import pytest
import torch

from needs import require_module

import long_documents as ld  # noqa: E402

transformers = require_module("transformers")


@pytest.fixture(scope="module")
def tiny(tmp_path_factory, vocab_dir):
    """A tiny random BERT MLM with 1,024 positions and the real vocabulary, and its tokenizer."""
    from bertforge import BertConfig, BertForMaskedLM
    from bertforge.tokenization import BertTokenizer
    tok = BertTokenizer.from_pretrained(vocab_dir)
    torch.manual_seed(0)
    folder = tmp_path_factory.mktemp("tiny-mlm")
    BertForMaskedLM(BertConfig.preset("tiny", vocab_size=tok.vocab_size, max_position_embeddings=1024,
                                      hidden_dropout_prob=0.0)).save_pretrained(folder)
    return folder, tok


def test_masks_fall_past_512_and_chunks_cover_the_article():
    masked = ld.masked_positions(900, ld.SHORT, 0.15, seed=3)
    assert masked == sorted(set(masked)) and min(masked) >= ld.SHORT and len(masked) == round(0.15 * 388)
    assert ld.masked_positions(900, ld.SHORT, 0.15, seed=3) == masked
    assert ld.chunk_spans(1100, 510) == [(0, 510), (510, 1020), (1020, 1100)]


def test_a_chunk_as_long_as_the_article_is_the_whole_article(tiny):
    """The same masked tokens, scored with one chunk holding the whole article, give the whole article's loss
    exactly; smaller chunks score the same count of tokens."""
    from bertforge.model.auto import AutoModelForMaskedLM
    folder, tok = tiny
    model = AutoModelForMaskedLM.from_pretrained(folder).eval()
    tokens = torch.randint(2000, 20000, (800,), generator=torch.Generator().manual_seed(1)).tolist()
    masked = ld.masked_positions(len(tokens), ld.SHORT, 0.15, seed=0)
    ids = (tok.mask_token_id, tok.cls_token_id, tok.sep_token_id)
    whole = ld.score_article(model, tokens, masked, *ids, chunk=None)
    assert ld.score_article(model, tokens, masked, *ids, chunk=len(tokens)) == whole
    chunked = ld.score_article(model, tokens, masked, *ids, chunk=ld.SHORT - 2)
    assert chunked[1] == whole[1] == len(masked) and chunked[0] != whole[0]


def test_the_loss_is_transformers_mlm_loss_on_the_same_row(tiny):
    from bertforge.model.auto import AutoModelForMaskedLM
    folder, tok = tiny
    ours = AutoModelForMaskedLM.from_pretrained(folder).eval()
    theirs = transformers.BertForMaskedLM.from_pretrained(folder).eval()
    tokens = torch.randint(2000, 20000, (700,), generator=torch.Generator().manual_seed(2)).tolist()
    masked = ld.masked_positions(len(tokens), ld.SHORT, 0.2, seed=1)
    total, count = ld.score_article(ours, tokens, masked, tok.mask_token_id, tok.cls_token_id, tok.sep_token_id,
                                    chunk=None)
    row = [tok.cls_token_id] + [tok.mask_token_id if p in masked else t for p, t in enumerate(tokens)]
    row.append(tok.sep_token_id)
    labels = torch.full((1, len(row)), -100)
    for p in masked:
        labels[0, p + 1] = tokens[p]
    with torch.no_grad():
        want = theirs(input_ids=torch.tensor([row]), labels=labels).loss.item()
    assert total / count == pytest.approx(want, abs=1e-5)


def test_held_out_articles_are_long_and_never_trained_on(vocab_dir):
    from bertforge.tokenization import BertTokenizer
    tok = BertTokenizer.from_pretrained(vocab_dir)
    texts = [" ".join(["word"] * n) for n in (2000, 10, 1500, 20, 30, 1200, 40)]
    held, train = ld.split_articles(texts, tok, eval_count=2, train_count=3)
    assert held == [texts[0], texts[2]] and train == [texts[1], texts[3], texts[4]]
    records, plan = ld.parse_args(["--model", "m", "--out", "o"])
    assert records is None
    assert (plan.max_positions, plan.attention_window, plan.max_steps) == (4096, 512, 3000)


@pytest.mark.slow
def test_a_whole_run_on_real_articles_writes_its_scores_as_records(tmp_path, vocab_dir):
    """Every stage on a tiny BERT (512 positions, lengthened to 1,024) and real articles: the records hold the
    three modes' losses and the continued pre-training's steps as results.json has them, under the command that
    ran (without --records); a second run keeps the scores instead of computing them again."""
    from bertforge import BertConfig, BertForMaskedLM
    from bertforge.results_store import read_store
    from bertforge.tokenization import BertTokenizer
    tok = BertTokenizer.from_pretrained(vocab_dir)
    torch.manual_seed(0)
    source = tmp_path / "source"
    BertForMaskedLM(BertConfig.preset("tiny", vocab_size=tok.vocab_size)).save_pretrained(source)
    tok.save_pretrained(source)
    argv = ["--model", str(source), "--out", str(tmp_path / "run"), "--max-positions", "1024", "--attention-window",
            "128", "--eval-articles", "2", "--train-articles", "30", "--max-steps", "2", "--batch-size", "2",
            "--grad-accum", "1", "--records", str(tmp_path / "store")]
    assert ld.main(argv) == 0
    result = json.loads((tmp_path / "run" / "results.json").read_text())
    store = read_store(tmp_path / "store")
    for name, (model, whole) in ld.MODES.items():
        record = store.records[f"long-documents/{model}-{'whole' if whole else 'chunks'}/mlm-loss"]
        assert record.value == result["results"][name]["mlm_loss"] and result["results"][name]["tokens"] > 0
        assert "--records" not in record.command and "--max-steps 2" in record.command
    assert store.records["long-documents/long/steps"].value == result["steps"]["long"] == 2
    stamp = (tmp_path / "run" / "results.json").stat().st_mtime_ns
    assert ld.main(argv) == 0 and (tmp_path / "run" / "results.json").stat().st_mtime_ns == stamp
