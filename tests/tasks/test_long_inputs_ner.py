"""Token classification of sentences longer than the model reads (`tasks/long_inputs.py`, `--long-inputs chunk`):
each word's tag against transformers' BertForTokenClassification run by hand on the window, computed here, in
which the word is most central; a sentence that fits is tagged as without chunks; `evaluate` on a CoNLL file
scores every word of a long sentence (seqeval on the whole tag lists)."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from bertforge.tasks.long_inputs import LongInputOptions, word_windows
from bertforge.tasks.predictor import Predictor
from bertforge.tasks.readers import CONLL2003_LABELS

from needs import require_module
from predictor_folders import tiny_predictor

transformers = require_module("transformers")
LENGTH = 32  # the windows' --max-seq-length: room for 30 word tokens


def sentence(vocab_dir: Path, count: int, seed: int = 0) -> list[str]:
    """`count` words: whole-word vocabulary entries, some glued in pairs (several WordPiece tokens each), and
    commas (seeded)."""
    lines = (vocab_dir / "vocab.txt").read_text(encoding="utf-8").splitlines()
    pool = [w for w in lines[3000:8000] if w.isalpha() and w.isascii()][:2000]
    rng = np.random.default_rng(seed)
    words = []
    for _ in range(count):
        kind = rng.integers(0, 6)
        words.append("," if kind == 0 else str(rng.choice(pool)) + (str(rng.choice(pool)) if kind == 1 else ""))
    return words


@pytest.fixture(scope="module")
def tagger(vocab_dir, tmp_path_factory) -> Path:
    """A tiny random CoNLL-2003 tagger whose classifier is wide enough that a word's tag depends on its window."""
    out = tiny_predictor(tmp_path_factory.mktemp("ner"), vocab_dir, "conll2003", "token_classification",
                         CONLL2003_LABELS, initializer_range=0.2)
    from bertforge import BertForTokenClassification
    model = BertForTokenClassification.from_pretrained(out)
    torch.manual_seed(2)
    with torch.no_grad():
        model.classifier.weight.normal_(0.0, 0.5)
    model.save_pretrained(out)
    return out


def windows_by_hand(lengths: list[int], room: int, stride: int) -> list[tuple[int, int]]:
    """Whole words into windows of at most `room` tokens; the next window starts at the first word at least
    `stride` tokens (at most `room`) after this one's start, never past its end; the last one ends at the
    sentence's end."""
    spans, start, stride = [], 0, min(stride, room)
    while True:
        end, used = start, 0
        while end < len(lengths) and used + lengths[end] <= room:
            used += lengths[end]
            end += 1
        spans.append((start, end))
        if end == len(lengths):
            return spans
        nxt = start + 1
        while nxt < end and sum(lengths[start:nxt]) < stride:
            nxt += 1
        start = nxt


def tags_by_hand(folder: Path, words: list[str], stride: int) -> tuple[list[str], list[tuple[int, int]], int]:
    """Each word's tag: transformers' model on [CLS] window [SEP] of the window where the word is farthest (in
    words) from the nearer edge, earlier window on a tie, read at the word's first sub-token. Also returns the
    windows and how many words disagree between two windows that hold them (what a wrong choice would show)."""
    tok = transformers.BertTokenizerFast.from_pretrained(folder)
    model = transformers.BertForTokenClassification.from_pretrained(folder).eval()
    ids = [tok(w, add_special_tokens=False)["input_ids"] for w in words]
    spans = windows_by_hand([len(i) for i in ids], LENGTH - 2, stride)
    per_window = []
    with torch.no_grad():
        for s, e in spans:
            row = [tok.cls_token_id] + [t for i in ids[s:e] for t in i] + [tok.sep_token_id]
            pred = model(input_ids=torch.tensor([row])).logits[0].argmax(-1).tolist()
            first, tags = 1, {}
            for w in range(s, e):
                tags[w] = CONLL2003_LABELS[pred[first]]
                first += len(ids[w])
            per_window.append(tags)
    chosen, disagree = [], 0
    for w in range(len(words)):
        chosen.append(per_window[most_central(spans, w)][w])
        disagree += len({per_window[k][w] for k, (s, e) in enumerate(spans) if s <= w < e}) > 1
    return chosen, spans, disagree


def most_central(spans: list[tuple[int, int]], w: int) -> int:
    """The window holding word `w` farthest from its nearer edge, in words; the first of them on a tie."""
    holding = [k for k, (s, e) in enumerate(spans) if s <= w < e]
    depth = [min(w - spans[k][0], spans[k][1] - 1 - w) for k in holding]
    return holding[depth.index(max(depth))]


@pytest.mark.parametrize("stride", [None, 9])
def test_each_word_takes_its_tag_from_the_window_where_it_is_most_central(tagger, vocab_dir, stride):
    """A sentence 4x the window: the predictor's tags are transformers' model run on the windows computed here,
    each word read in the window where it is most central; some words are tagged differently by the windows
    that hold them, so a wrong choice of window would show."""
    words = sentence(vocab_dir, 70)
    options = LongInputOptions(max_seq_length=LENGTH, long_inputs="chunk", chunk_stride=stride)
    got = Predictor.load(tagger, "cpu", "fp32", long_inputs=options).predict([words])[0]
    want, spans, disagree = tags_by_hand(tagger, words, stride or LENGTH // 2)
    assert len(spans) >= 4 and disagree >= 3
    assert got["tags"] == want
    assert got["words"] == words and "dropped_tokens" not in got


def test_library_windows_are_the_hand_computed_ones():
    """Word lengths with a word longer than the room (a window of its own) and words of no token."""
    lengths = [3, 1, 0, 4, 2, 2, 7, 1, 1, 0, 3, 5, 2, 1]
    for room, stride in [(6, 3), (6, 6), (5, 100), (8, 1)]:
        want = [(s, max(e, s + 1)) for s, e in windows_by_hand(lengths, room, stride)]
        assert word_windows(lengths, room, stride) == want, (room, stride)


def test_each_word_is_read_from_its_most_central_window_and_ties_go_to_the_earlier():
    """`WordWindows.tags` with each window's tags naming the window: every word of every sentence is read from
    the window this test picks (windows of seeded random word lengths, ties included), and a sentence of one
    feature keeps its tags."""
    from bertforge.tasks.long_inputs import WordWindows
    rng = np.random.default_rng(0)
    owners, spans, tags, counts, want, ties = [], [], [], [], [], 0
    for sentence_index in range(30):
        lengths = [int(n) for n in rng.choice([0, 1, 1, 2, 3], size=int(rng.integers(1, 40)))]
        windows = word_windows(lengths, int(rng.integers(4, 12)), int(rng.integers(1, 8)))
        counts.append(len(lengths))
        want.append([f"{most_central(windows, w)}" for w in range(len(lengths))])
        for k, (s, e) in enumerate(windows):
            owners.append(sentence_index)
            spans.append((s, e))
            tags.append([f"{k}"] * (e - s))
        for w in range(len(lengths)):
            depth = [min(w - s, e - 1 - w) for s, e in windows if s <= w < e]
            ties += depth.count(max(depth)) > 1
    assert ties >= 10
    assert WordWindows(owners, spans, counts).tags(tags) == want
    assert WordWindows([0, 1], [(0, 2), (0, 1)], [2, 1]).tags([["B-PER", "I-PER"], ["O"]]) == [["B-PER", "I-PER"],
                                                                                                ["O"]]


def test_a_sentence_that_fits_is_tagged_as_without_chunks(tagger, vocab_dir):
    """In one call with a long sentence, a short one gets exactly the tags (and entities) truncation gives it; a
    text input is split into words as without chunks."""
    short, long = sentence(vocab_dir, 12, seed=1), sentence(vocab_dir, 60, seed=2)
    chunked = Predictor.load(tagger, "cpu", "fp32",
                             long_inputs=LongInputOptions(max_seq_length=LENGTH, long_inputs="chunk"))
    plain = Predictor.load(tagger, "cpu", "fp32", long_inputs=LongInputOptions(max_seq_length=LENGTH))
    got = chunked.predict([long, short, " ".join(short)])
    assert got[1] == plain.predict([short])[0]
    assert got[2] == plain.predict([" ".join(short)])[0]
    assert got[0]["tags"] == tags_by_hand(tagger, long, LENGTH // 2)[0]


def test_evaluate_scores_every_word_of_a_long_sentence(tagger, vocab_dir, tmp_path, capsys):
    """`bertforge evaluate --long-inputs chunk` on a CoNLL file with a long and a short sentence: its metrics are
    seqeval's on the whole tag lists (the long sentence tagged by hand, window by window); truncated, the words
    past the window would all be "O", and some of them are not."""
    from seqeval.metrics import accuracy_score, f1_score

    from bertforge.cli import main
    long, short = sentence(vocab_dir, 50, seed=3), sentence(vocab_dir, 8, seed=4)
    rng = np.random.default_rng(5)
    gold = [[str(rng.choice(CONLL2003_LABELS)) for _ in s] for s in (long, short)]
    path = tmp_path / "valid.txt"
    path.write_text("".join("".join(f"{w} {t}\n" for w, t in zip(s, g)) + "\n" for s, g in zip((long, short), gold)))
    hand = [tags_by_hand(tagger, long, LENGTH // 2)[0],
            Predictor.load(tagger, "cpu", "fp32", long_inputs=LongInputOptions(max_seq_length=LENGTH)
                           ).predict([short])[0]["tags"]]
    tok = transformers.BertTokenizerFast.from_pretrained(tagger)
    fits = next(i for i in range(len(long) + 1) if len(tok(long[:i + 1], is_split_into_words=True)["input_ids"])
                > LENGTH)
    assert any(t != "O" for t in hand[0][fits:]), "truncation would change the score"
    capsys.readouterr()
    assert main(["evaluate", "--model", str(tagger), "--eval", str(path), "--device", "cpu", "--max-seq-length",
                 str(LENGTH), "--long-inputs", "chunk"]) == 0
    out = capsys.readouterr().out
    report = json.loads(out[out.index("{\n"):])
    metrics = next(v for v in report.values() if isinstance(v, dict) and "f1" in v)
    assert metrics["f1"] == pytest.approx(f1_score(gold, hand, zero_division=0), abs=1e-12)
    assert metrics["accuracy"] == pytest.approx(accuracy_score(gold, hand), abs=1e-12)
    assert metrics["n_examples"] == 2
