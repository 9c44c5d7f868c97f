"""Each pre-training objective LEARNS: a tiny model trained through `pretrain(...)` on the same handful of real
Wikipedia sequences, over and over, memorises them.

A range check (a loss is finite, an accuracy lies in [0, 1]) passes for a model whose labels are misaligned,
whose masks leak the answer into the wrong positions, whose NSP/SOP labels are noise or whose optimizer never
steps. Overfitting a tiny fixed set fails for each of these. The set is fixed because the corpus is cut to a
few sequences, one batch holds all of them, and static masking with `dupe_factor=1` serves the same masks and
sentence pairs every epoch.

The "after" numbers are measured independently of our model code: the saved model is loaded with Hugging Face
`transformers` and scored on the same batch rebuilt by `PretrainingDataset`. The "before" numbers are the
engine's first logged step, computed before any update.
"""
from __future__ import annotations

import json
import lzma
import math
from pathlib import Path

import pytest
import torch

from bertforge.config import BertConfig
from bertforge.data import MaskingConfig, PretrainingDataset, prepare_corpus
from bertforge.pretraining.pretrain import pretrain

from needs import require_module, require_path

transformers = require_module("transformers")

WIKI = Path("corpus") / "wikipedia-en-2018" / "wiki_en.txt.xz"
SEED = 0


def _article_heads(path: Path, articles: int, lines: int) -> str:
    """The first `lines` lines of each of the first `articles` articles (blank-line separated)."""
    out, current = [], []
    with lzma.open(path, "rt", encoding="utf-8") as handle:
        for line in handle:
            if line.strip():
                current.append(line.rstrip("\n"))
                continue
            if current:
                out.append("\n".join(current[:lines]))
                current = []
                if len(out) == articles:
                    break
    return "\n\n".join(out) + "\n"


def _tiny_corpus(shared_data: Path, vocab_dir: Path, root: Path, articles: int, lines: int) -> Path:
    source = require_path(shared_data / WIKI, f"the Wikipedia slice ../shared/data/{WIKI}")
    root.mkdir(parents=True, exist_ok=True)
    text = root / "wiki.txt"
    text.write_text(_article_heads(source, articles, lines), encoding="utf-8")
    prepare_corpus([text], str(vocab_dir), root / "prepared", workers=0, heldout_fraction=0.0,
                   show_progress=False, max_seq_length=64)
    return root / "prepared"


def _bert_config(root: Path, vocab_dir: Path) -> Path:
    """2 layers, hidden 64: memorises a batch in a few dozen steps on one CPU thread."""
    from bertforge.tokenization import BertTokenizer
    vocab_size = BertTokenizer.from_pretrained(vocab_dir).vocab_size
    root.mkdir(parents=True, exist_ok=True)
    BertConfig.preset("tiny", vocab_size=vocab_size, hidden_size=64, num_attention_heads=2,
                      intermediate_size=128).save_pretrained(root / "config")
    return root / "config"


def _the_batch(data: Path, vocab_dir: Path, objective: str, seq_len: int) -> dict[str, torch.Tensor]:
    """Every training example in one batch, with the masks and pairs the run trained on."""
    dataset = PretrainingDataset(data, str(vocab_dir), objective=objective, max_seq_length=seq_len,
                                 batch_size=10_000, masking=MaskingConfig(mode="static", dupe_factor=1), seed=SEED)
    assert len(dataset) == 1
    return next(iter(dataset))


def _train(data: Path, out: Path, model: str, objective: str, seq_len: int, steps: int, lr: float):
    result = pretrain(data, out, model=model, objective=objective, masking="static", dupe_factor=1,
                      batch_size=10_000, seq_len_schedule=f"{seq_len}:1", eval_batches=0, dropout=0.0,
                      max_steps=steps, lr=lr, weight_decay=0.0, seed=SEED, save_every=0, log_every=1,
                      progress=False)
    assert result.step == steps and result.skipped_steps == 0
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    train = [r for r in records if r["split"] == "train"]
    assert [r["step"] for r in train] == list(range(1, steps + 1))
    return train[0], train[-1]


def _accuracy(logits: torch.Tensor, labels: torch.Tensor) -> float:
    keep = labels != -100
    return float((logits.argmax(-1)[keep] == labels[keep]).float().mean())


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("learn")


@pytest.fixture(scope="module")
def six_articles(shared_data, vocab_dir, workdir) -> Path:
    """18 sequences from the openings of 6 real articles (several documents, so NSP has random partners)."""
    return _tiny_corpus(shared_data, vocab_dir, workdir / "six", articles=6, lines=4)


@pytest.mark.slow
def test_mlm_nsp_memorises_its_batch(six_articles, vocab_dir, workdir):
    out = workdir / "nsp-run"
    first, last = _train(six_articles, out, str(_bert_config(workdir / "nsp", vocab_dir)), "mlm+nsp",
                         seq_len=64, steps=60, lr=1e-2)
    # before: a random model guesses (MLM loss ~ ln |vocab|, NSP loss ~ ln 2)
    assert first["mlm_loss"] > 0.9 * math.log(30522) and first["mlm_acc"] < 0.05
    assert abs(first["nsp_loss"] - math.log(2)) < 0.05
    assert last["loss"] < 0.3 * first["loss"]
    # after, measured by transformers on the saved model
    batch = _the_batch(six_articles, vocab_dir, "mlm+nsp", 64)
    model = transformers.BertForPreTraining.from_pretrained(out).eval()
    with torch.no_grad():
        theirs = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"],
                       token_type_ids=batch["token_type_ids"], labels=batch["labels"],
                       next_sentence_label=batch["next_sentence_label"])
    assert float(theirs.loss) < 0.3 * first["loss"]
    assert _accuracy(theirs.prediction_logits, batch["labels"]) >= 0.95
    assert _accuracy(theirs.seq_relationship_logits, batch["next_sentence_label"]) == 1.0
    labels = batch["next_sentence_label"]
    assert 0 < int(labels.sum()) < len(labels), "both NSP classes must be in the batch"


@pytest.mark.slow
def test_albert_mlm_sop_memorises_its_batch(shared_data, vocab_dir, workdir):
    data = _tiny_corpus(shared_data, vocab_dir, workdir / "four", articles=4, lines=4)
    out = workdir / "sop-run"
    first, last = _train(data, out, "albert-tiny", "mlm+sop", seq_len=64, steps=60, lr=6e-3)
    assert first["mlm_loss"] > 0.9 * math.log(30522) and first["mlm_acc"] < 0.05
    assert abs(first["nsp_loss"] - math.log(2)) < 0.05
    assert last["loss"] < 0.3 * first["loss"]
    batch = _the_batch(data, vocab_dir, "mlm+sop", 64)
    model = transformers.AlbertForPreTraining.from_pretrained(out).eval()
    with torch.no_grad():
        theirs = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"],
                       token_type_ids=batch["token_type_ids"], labels=batch["labels"],
                       sentence_order_label=batch["next_sentence_label"])
    assert float(theirs.loss) < 0.3 * first["loss"]
    assert _accuracy(theirs.prediction_logits, batch["labels"]) >= 0.95
    assert _accuracy(theirs.sop_logits, batch["next_sentence_label"]) == 1.0
    labels = batch["next_sentence_label"]
    assert 0 < int(labels.sum()) < len(labels), "both SOP classes (in order, swapped) must be in the batch"


@pytest.mark.slow
def test_ltr_memorises_its_batch(shared_data, vocab_dir, workdir):
    """Left-to-right LM: every position predicts the next token under a causal mask. transformers' BERT as a
    decoder (`is_decoder=True`: causal self-attention) scores the saved weights: if our model could see the
    future, it would have learnt to copy the next token and fail here."""
    data = _tiny_corpus(shared_data, vocab_dir, workdir / "three", articles=3, lines=2)
    out = workdir / "ltr-run"
    first, last = _train(data, out, str(_bert_config(workdir / "ltr", vocab_dir)), "ltr", seq_len=32, steps=50,
                         lr=1e-2)
    assert first["mlm_loss"] > 0.9 * math.log(30522) and first["mlm_acc"] < 0.05
    assert last["loss"] < 0.3 * first["loss"]
    batch = _the_batch(data, vocab_dir, "ltr", 32)
    model = transformers.BertLMHeadModel.from_pretrained(out, is_decoder=True).eval()
    with torch.no_grad():
        logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"],
                       token_type_ids=batch["token_type_ids"]).logits
    labels = batch["labels"]  # labels[i] is the token at i + 1 (already shifted)
    loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1),
                                             ignore_index=-100)
    assert float(loss) < 0.3 * first["loss"]
    assert _accuracy(logits, labels) >= 0.9
