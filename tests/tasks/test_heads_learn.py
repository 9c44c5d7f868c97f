"""Every task head LEARNS: a tiny random BERT with MiniLM's vocabulary, fine-tuned with `finetune(...)` on 32
examples and evaluated on the same 32, ends near perfect while its untrained head scored near chance.

A range check (an F1 lies in [0, 100]) passes for a head that reads the wrong label column, aligns NER tags to
the wrong sub-words, shifts SQuAD spans by a token, mixes the choices of different SWAG examples or never
steps its optimizer. Fitting 32 examples fails for each of these. The "before" value is the task's own metric
on the head `finetune` starts from (same seed, same checkpoint), scored by the same evaluation; the metrics
themselves are checked against sklearn, scipy and seqeval in test_metrics.py.
Real data from ../shared where it exists (SST-2, STS-B, CoNLL-2003, SQuAD v1.1 dev); SWAG is not available
offline, so its rows are hand-made.
"""
from __future__ import annotations

import csv
import gzip
import json
from pathlib import Path

import pytest
import torch

from bertforge import BertConfig, BertModel
from bertforge.tasks.evaluation import evaluate_examples
from bertforge.tasks.finetune import FinetuneSettings, build_model, finetune
from bertforge.tasks.registry import get_task
from bertforge.tasks.task_data import DataOptions, load_task_data
from bertforge.tokenization import BertTokenizer, load_tokenizer

N = 32
SEED = 42  # FinetuneSettings' default: the seed its one run starts from


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory, minilm_dir) -> Path:
    """A 2-layer, 64-wide random BERT with MiniLM's real vocabulary. No dropout: the test asks whether the
    head can fit, and dropout only slows that down."""
    out = tmp_path_factory.mktemp("tiny-learn")
    tok = BertTokenizer.from_pretrained(minilm_dir)
    config = BertConfig(vocab_size=tok.vocab_size, hidden_size=64, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=128, max_position_embeddings=512, hidden_dropout_prob=0.0,
                        attention_probs_dropout_prob=0.0)
    torch.manual_seed(0)
    BertModel(config).save_pretrained(out)
    tok.save_pretrained(out)
    return out


def fit_and_score(task: str, model: Path, path: Path, out: Path, **kw) -> tuple[dict, dict]:
    """(metrics of the untrained head, metrics after fine-tuning), both on the 32 training examples."""
    # keep="last" and one evaluation at the end: the score is the final weights', not the best epoch's
    settings = FinetuneSettings(task=task, model=str(model), output=str(out), train_file=str(path),
                                eval_file=str(path), keep="last", eval_every=10 ** 6, log_every=10 ** 6,
                                progress=False, seed=SEED, **kw)
    spec = get_task(task)
    data = load_task_data(None, DataOptions(task=task, train_file=str(path), eval_file=str(path)))
    examples = next(iter(data.evals.values()))
    assert len(data.train) == len(examples) == N
    torch.manual_seed(SEED)
    untrained = build_model(spec, model, data.labels)
    before, _ = evaluate_examples(untrained, load_tokenizer(str(model)), spec, examples, settings, data.labels)
    report = finetune(settings, say=lambda *_: None)
    assert report.eval["n_examples"] == N and report.n_train_examples == N
    return before, report.eval


# ---- 32 examples of each task ------------------------------------------------------------------------------------
def _sst2(shared_data: Path, path: Path) -> Path:
    """16 negative and 16 positive SST-2 train sentences (chance is 0.5)."""
    rows = (shared_data / "glue" / "SST-2" / "train.tsv").read_text(encoding="utf-8").splitlines()
    neg = [r for r in rows[1:] if r.endswith("\t0")][:N // 2]
    pos = [r for r in rows[1:] if r.endswith("\t1")][:N // 2]
    path.write_text("\n".join([rows[0]] + [r for pair in zip(neg, pos) for r in pair]) + "\n", encoding="utf-8")
    return path


def _stsb(shared_data: Path, path: Path) -> Path:
    rows = (shared_data / "glue" / "STS-B" / "train.tsv").read_text(encoding="utf-8").splitlines()
    path.write_text("\n".join(rows[:N + 1]) + "\n", encoding="utf-8")
    return path


def _conll(shared_data: Path, path: Path) -> Path:
    """The first 32 CoNLL-2003 train sentences that name an entity."""
    blocks = (shared_data / "conll2003" / "train.txt").read_text(encoding="utf-8").split("\n\n")
    chosen = [b.strip("\n") for b in blocks if "-DOCSTART-" not in b and " B-" in b][:N]
    path.write_text("\n\n".join(chosen) + "\n", encoding="utf-8")
    return path


def _squad(shared_data: Path, path: Path) -> Path:
    """The first question of each of the first 32 paragraphs of SQuAD v1.1 dev (real text and answers)."""
    with gzip.open(shared_data / "squad" / "dev-v1.1.json.gz", "rt", encoding="utf-8") as handle:
        data = json.load(handle)
    articles, n = [], 0
    for article in data["data"]:
        kept = [{**par, "qas": par["qas"][:1]} for par in article["paragraphs"][:N - n]]
        articles.append({**article, "paragraphs": kept})
        n += len(kept)
        if n == N:
            break
    path.write_text(json.dumps({"version": "1.1", "data": articles}), encoding="utf-8")
    return path


# (context, second sentence's start, the right ending, three wrong ones)
SWAG = [
    ("A man sits down at the piano.", "He", "begins to play a song.", "eats the piano.", "flies to the moon.",
     "turns into a cat."),
    ("The woman pours water into a glass.", "She", "drinks the water.", "throws the sky away.", "melts the table.",
     "sings to the floor."),
    ("A boy kicks the ball toward the goal.", "The ball", "goes into the net.", "becomes a bird.", "reads a book.",
     "cooks dinner."),
    ("The chef chops onions on the board.", "He", "puts them in the pot.", "swims in the pan.",
     "paints the onions blue.", "eats the knife."),
    ("A girl opens an umbrella in the rain.", "She", "walks home dry.", "drinks the clouds.", "folds the street.",
     "plants the umbrella."),
    ("The mechanic lifts the car with a jack.", "He", "changes the flat tire.", "bakes the wheel.",
     "teaches the car to sing.", "hides under the moon."),
    ("A dog hears its owner at the door.", "The dog", "runs over wagging its tail.", "writes a letter.",
     "turns off the sun.", "paints the door green."),
    ("The student opens her textbook at the desk.", "She", "starts reading the chapter.", "eats the desk.",
     "throws the book into the sea.", "becomes a chair."),
]


def _swag(path: Path) -> Path:
    """Each of 8 scenarios four times, the right ending in each position once: a head has to read the endings,
    not their positions (chance is 0.25)."""
    with open(path, "w", newline="", encoding="utf-8") as handle:
        w = csv.writer(handle)
        w.writerow(["", "video-id", "fold-ind", "startphrase", "sent1", "sent2", "gold-source",
                    "ending0", "ending1", "ending2", "ending3", "label"])
        i = 0
        for context, start, right, *wrong in SWAG:
            for label in range(4):
                endings = wrong[:label] + [right] + wrong[label:]
                w.writerow([i, f"v{i}", i, f"{context} {start}", context, start, "gold", *endings, label])
                i += 1
    return path


# ---- the tests ---------------------------------------------------------------------------------------------------
def test_sequence_classification_fits_sst2(tiny_model, shared_data, tmp_path):
    before, after = fit_and_score("sst2", tiny_model, _sst2(shared_data, tmp_path / "train.tsv"), tmp_path / "o",
                                  epochs=10, batch_size=8, learning_rates=[3e-3], max_seq_length=64)
    assert before["accuracy"] <= 0.7
    assert after["accuracy"] >= 0.95


def test_regression_fits_stsb(tiny_model, shared_data, tmp_path):
    before, after = fit_and_score("stsb", tiny_model, _stsb(shared_data, tmp_path / "train.tsv"), tmp_path / "o",
                                  epochs=40, batch_size=8, learning_rates=[3e-3], max_seq_length=64)
    assert before["pearson"] <= 0.5
    assert after["pearson"] >= 0.9 and after["spearman"] >= 0.9


def test_token_classification_fits_conll(tiny_model, shared_data, tmp_path):
    before, after = fit_and_score("conll2003", tiny_model, _conll(shared_data, tmp_path / "train.txt"),
                                  tmp_path / "o", epochs=25, batch_size=8, learning_rates=[3e-3],
                                  max_seq_length=64)
    assert before["f1"] <= 0.1
    assert after["f1"] >= 0.9


def test_question_answering_fits_squad(tiny_model, shared_data, tmp_path):
    before, after = fit_and_score("squad", tiny_model, _squad(shared_data, tmp_path / "train.json"), tmp_path / "o",
                                  epochs=15, batch_size=8, learning_rates=[3e-3], max_seq_length=192)
    assert before["f1"] <= 20
    assert after["f1"] >= 90 and after["exact_match"] >= 85


def test_multiple_choice_fits_swag(tiny_model, tmp_path):
    before, after = fit_and_score("swag", tiny_model, _swag(tmp_path / "train.csv"), tmp_path / "o",
                                  epochs=10, batch_size=8, learning_rates=[3e-3], max_seq_length=32)
    assert before["accuracy"] <= 0.5
    assert after["accuracy"] >= 0.95
