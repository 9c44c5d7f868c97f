"""`lengthen`: a BERT / RoBERTa folder becomes a Longformer folder that transformers loads and that, on an input
its window covers, computes exactly what the source computes (transformers' own BERT/RoBERTa and Longformer
are the two sides of the comparison)."""
from __future__ import annotations

import json

import pytest
import torch

from bertforge.cli import main
from bertforge.model.lengthen import LengthenSettings, lengthen, long_positions
from bertforge.settings import SettingError

from needs import require_module

transformers = require_module("transformers")
TOL = 1e-5
SOURCE_POSITIONS = 64


def small(config_class, tokenizer, **overrides):
    fields = dict(vocab_size=tokenizer.vocab_size, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                  intermediate_size=64, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    fields.update(overrides)
    return config_class(**fields)


@pytest.fixture(scope="module")
def tokenizer(vocab_dir):
    from bertforge.tokenization import BertTokenizer
    return BertTokenizer.from_pretrained(vocab_dir)


def bert_folder(tmp_path, tokenizer, **overrides):
    from bertforge import BertConfig, BertForMaskedLM
    torch.manual_seed(0)
    model = BertForMaskedLM(small(BertConfig, tokenizer, max_position_embeddings=SOURCE_POSITIONS, **overrides))
    with torch.no_grad():  # a distinct, large row per position, so a shifted table cannot go unnoticed
        model.bert.embeddings.position_embeddings.weight.normal_(0.0, 1.0)
    folder = tmp_path / "bert"
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def roberta_folder(tmp_path, tokenizer):
    """A RoBERTa (positions from padding_idx + 1 = 2) with the WordPiece vocabulary: the offset is what matters."""
    from bertforge.model.roberta import RobertaConfig, RobertaForMaskedLM
    torch.manual_seed(1)
    config = small(RobertaConfig, tokenizer, max_position_embeddings=SOURCE_POSITIONS + 2, pad_token_id=1)
    model = RobertaForMaskedLM(config)
    with torch.no_grad():
        model.bert.embeddings.position_embeddings.weight.normal_(0.0, 1.0)
    folder = tmp_path / "roberta"
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def padded_batch(tokenizer, lengths, pad: int):
    g = torch.Generator().manual_seed(3)
    ids = torch.randint(1000, tokenizer.vocab_size, (len(lengths), max(lengths)), generator=g)
    mask = (torch.arange(max(lengths))[None] < torch.tensor(lengths)[:, None]).long()
    ids[:, 0] = tokenizer.cls_token_id
    ids[torch.arange(len(lengths)), torch.tensor(lengths) - 1] = tokenizer.sep_token_id
    return torch.where(mask.bool(), ids, torch.full_like(ids, pad)), mask


def lengthened(source, out, positions=256, window=2 * SOURCE_POSITIONS):
    lengthen(LengthenSettings(model=str(source), output=str(out), max_positions=positions, attention_window=window),
             say=lambda _: None)
    return out


@pytest.mark.parametrize("family", ["bert", "roberta"])
def test_the_long_model_equals_the_source_where_the_window_covers_the_input(family, tmp_path, tokenizer):
    """transformers' Longformer on the converted folder gives the source's MLM logits (transformers' own BERT or
    RoBERTa) on a padded batch of the source's full length, with and without global tokens: positions copied
    with the right offset (BERT's 0, RoBERTa's 2), the global projections equal to the local ones, every layer
    and the head carried over."""
    source = bert_folder(tmp_path, tokenizer) if family == "bert" else roberta_folder(tmp_path, tokenizer)
    out = lengthened(source, tmp_path / "long")
    theirs_source = getattr(transformers, f"{'Bert' if family == 'bert' else 'Roberta'}ForMaskedLM")
    reference = theirs_source.from_pretrained(source).eval()
    long = transformers.LongformerForMaskedLM.from_pretrained(out).eval()
    pad = reference.config.pad_token_id
    ids, mask = padded_batch(tokenizer, (SOURCE_POSITIONS, 37), pad)
    extra = {"token_type_ids": torch.zeros_like(ids)}
    glob = torch.zeros_like(ids)
    glob[:, [0, 5]] = 1
    with torch.no_grad():
        want = reference(input_ids=ids, attention_mask=mask, **extra).logits
        local = long(input_ids=ids, attention_mask=mask, **extra).logits
        with_globals = long(input_ids=ids, attention_mask=mask, global_attention_mask=glob, **extra).logits
    real = mask.bool()
    torch.testing.assert_close(local[real], want[real], atol=TOL, rtol=0)
    torch.testing.assert_close(with_globals[real], want[real], atol=TOL, rtol=0)


def test_bertforge_reads_the_folder_as_transformers_does(tmp_path, tokenizer):
    """bertforge's own Longformer on the converted folder equals transformers' on an input 3x the source's
    positions (past the copied block boundaries, longer than the window), and the tokenizer now says the long
    length."""
    from bertforge.model.auto import AutoModelForMaskedLM
    out = lengthened(bert_folder(tmp_path, tokenizer), tmp_path / "long", positions=256, window=32)
    ours = AutoModelForMaskedLM.from_pretrained(out).eval()
    theirs = transformers.LongformerForMaskedLM.from_pretrained(out).eval()
    ids, mask = padded_batch(tokenizer, (3 * SOURCE_POSITIONS, 150), 0)
    with torch.no_grad():
        a = ours(ids, attention_mask=mask, token_type_ids=torch.zeros_like(ids)).logits
        b = theirs(input_ids=ids, attention_mask=mask, token_type_ids=torch.zeros_like(ids)).logits
    torch.testing.assert_close(a[mask.bool()], b[mask.bool()], atol=TOL, rtol=0)
    config = json.loads((out / "config.json").read_text())
    assert (config["model_type"], config["max_position_embeddings"], config["attention_window"]) == (
        "longformer", 257, 32)
    assert config["sep_token_id"] == tokenizer.sep_token_id  # the QA head's question ends at [SEP], not id 2
    assert json.loads((out / "tokenizer_config.json").read_text())["model_max_length"] == 256


def test_positions_past_the_source_repeat_its_learned_rows_block_by_block():
    """Longformer's notebook: position 512 + k starts as position k (RoBERTa's two rows below stay)."""
    table = torch.arange(10.0)[:, None].repeat(1, 3)  # RoBERTa-like: rows 0, 1 then positions 0..7
    out = long_positions(table, offset=2, rows=2 + 20, new_offset=2)
    assert out[:, 0].tolist() == [0, 1] + [2 + (p % 8) for p in range(20)]
    bert = long_positions(torch.arange(8.0)[:, None], offset=0, rows=1 + 20, new_offset=1)
    assert bert[:, 0].tolist() == [0] + [p % 8 for p in range(20)]  # BERT's position p moves one row up


def test_a_source_the_recipe_cannot_convert_is_refused_in_one_line(tmp_path, tokenizer, capsys):
    """A head that would compute another function (relu), a family without learned positions, a full output."""
    relu = bert_folder(tmp_path, tokenizer, hidden_act="relu")
    with pytest.raises(SettingError, match="hidden_act.*'relu'"):
        lengthened(relu, tmp_path / "a")
    full = tmp_path / "full"
    full.mkdir()
    (full / "x").write_text("x")
    with pytest.raises(SettingError, match="--output must be a new or empty folder"):
        lengthened(relu, full)
    long = lengthened(bert_folder(tmp_path / "ok", tokenizer), tmp_path / "long")
    capsys.readouterr()
    assert main(["lengthen", "--model", str(long), "--output", str(tmp_path / "again")]) == 1
    err = capsys.readouterr().err
    assert err.strip().count("\n") == 0 and "is a longformer folder" in err, err
    assert main(["lengthen", "--model", str(long), "--output", str(tmp_path / "b"), "--attention-window", "5"]) == 1
    err = capsys.readouterr().err
    assert err.strip().count("\n") == 0 and "--attention-window must be even" in err, err


# ---- continued MLM pre-training on whole articles -----------------------------------------------------------------
WIKI = "corpus/wikipedia-en-2018/wiki_en.txt.xz"
LONG = 1024


def first_articles(shared_data, count: int = 40) -> list[str]:
    """The first `count` real Wikipedia articles (blank-line separated), whole."""
    import lzma
    from needs import require_path
    source = require_path(shared_data / WIKI, f"the Wikipedia slice ../shared/data/{WIKI}")
    picked, lines = [], []
    with lzma.open(source, "rt", encoding="utf-8") as handle:
        for line in handle:
            if line.strip():
                lines.append(line.rstrip("\n"))
                continue
            if lines:
                picked.append("\n".join(lines))
                lines = []
            if len(picked) >= count:
                break
    return picked


@pytest.fixture(scope="module")
def whole_articles(shared_data, vocab_dir, tokenizer, tmp_path_factory):
    """(four real articles of 500 to 1,000 tokens: longer than a 512-token model reads, shorter than LONG; their
    corpus prepared at LONG)."""
    from bertforge.data import prepare_corpus
    articles = [a for a in first_articles(shared_data)
                if 500 < len(tokenizer(a, add_special_tokens=False)["input_ids"]) < LONG - 2][:4]
    root = tmp_path_factory.mktemp("long-corpus")
    (root / "wiki.txt").write_text("\n\n".join(articles) + "\n", encoding="utf-8")
    prepare_corpus([root / "wiki.txt"], str(vocab_dir), root / "prepared", workers=0, heldout_fraction=0.0,
                   show_progress=False, max_seq_length=LONG)
    return articles, root / "prepared"


def test_prepared_at_a_long_length_each_sequence_is_one_whole_article(whole_articles, vocab_dir, tokenizer):
    """`doc-sentences` packing at 1,024 tokens: every training sequence is one article, all of it, token for token
    as the tokenizer reads the article ([CLS] ... [SEP])."""
    from bertforge.data import MaskingConfig, PretrainingDataset
    articles, prepared = whole_articles
    data = PretrainingDataset(prepared, str(vocab_dir), objective="mlm", packing="doc-sentences",
                              max_seq_length=LONG, batch_size=8, masking=MaskingConfig(), seed=0)
    batch = next(iter(data))
    tokens = torch.where(batch["labels"] != -100, batch["labels"], batch["input_ids"])
    rows = sorted(row[:n].tolist() for row, n in zip(tokens, batch["attention_mask"].sum(-1).tolist()))
    assert rows == sorted(tokenizer(a)["input_ids"] for a in articles)


@pytest.mark.slow
def test_continued_mlm_from_the_converted_model_learns_and_resumes(whole_articles, vocab_dir, tokenizer, tmp_path):
    """`pretrain --init-from` the Longformer of a 512-token BERT, on whole articles of 500-1,000 tokens: the MLM
    loss on the (static) batch falls, measured by transformers on the saved model; and a run stopped inside a
    checkpoint save, run again, resumes and ends with the very weights of the uninterrupted run."""
    from bertforge import BertConfig, BertForMaskedLM
    from bertforge.data import MaskingConfig, PretrainingDataset
    from bertforge.pretraining.pretrain import pretrain
    from bertforge.training.engine import FaultHooks
    _, prepared = whole_articles
    torch.manual_seed(0)
    source = tmp_path / "bert"
    BertForMaskedLM(BertConfig.preset("tiny", vocab_size=tokenizer.vocab_size)).save_pretrained(source)
    tokenizer.save_pretrained(source)
    long = lengthened(source, tmp_path / "long", positions=LONG, window=64)
    options = dict(init_from=str(long), objective="mlm", packing="doc-sentences", seq_len_schedule=f"{LONG}:1",
                   batch_size=4, lr=3e-3, warmup_steps=0, max_steps=8, masking="static", dupe_factor=1,
                   eval_batches=0, save_every=3, progress=False, log_every=1, vocab=str(vocab_dir), seed=0)
    done = pretrain(prepared, tmp_path / "whole", **options)
    assert done.step == 8
    first = json.loads((tmp_path / "whole" / "metrics.jsonl").read_text().splitlines()[0])
    data = PretrainingDataset(prepared, str(vocab_dir), objective="mlm", packing="doc-sentences", max_seq_length=LONG,
                              batch_size=4, masking=MaskingConfig(mode="static", dupe_factor=1), seed=0)
    batch = next(iter(data))
    theirs = transformers.LongformerForMaskedLM.from_pretrained(tmp_path / "whole").eval()
    with torch.no_grad():
        after = theirs(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"],
                       token_type_ids=batch["token_type_ids"], labels=batch["labels"]).loss.item()
    assert after < first["loss"] - 2.0, (first["loss"], after)

    def stop_in_second_save(step: int) -> None:
        if step == 6:
            raise RuntimeError("stopped inside the save of step 6")

    with pytest.raises(RuntimeError, match="stopped inside"):
        pretrain(prepared, tmp_path / "resumed", hooks=FaultHooks(inside_save=stop_in_second_save), **options)
    again = pretrain(prepared, tmp_path / "resumed", **options)
    assert again.step == 8 and again.resumed_from is not None and again.resumed_from.name == "step-3"
    assert (tmp_path / "resumed" / "model.safetensors").read_bytes() == (
        tmp_path / "whole" / "model.safetensors").read_bytes()


def test_a_longformer_pretrained_from_a_preset_ends_its_question_at_the_vocabularys_separator(
        whole_articles, vocab_dir, tokenizer, tmp_path):
    """`pretrain --model longformer-tiny` with a WordPiece vocabulary: the saved config's sep_token_id is [SEP]'s
    id (102), not RoBERTa's 2, so its QA head's default global tokens are the question."""
    from bertforge.pretraining.pretrain import pretrain
    _, prepared = whole_articles
    pretrain(prepared, tmp_path / "run", model="longformer-tiny", objective="mlm", seq_len_schedule="64:1",
             batch_size=2, max_steps=1, eval_batches=0, save_every=0, progress=False, vocab=str(vocab_dir))
    config = json.loads((tmp_path / "run" / "config.json").read_text())
    assert (config["model_type"], config["sep_token_id"]) == ("longformer", tokenizer.sep_token_id)
