"""Examples -> model inputs on real data: SQuAD windows, NER first-sub-token labels, batching."""
from __future__ import annotations

import pytest
import torch

from bertforge.tasks import get_task, read_conll, read_squad
from bertforge.tasks.features import (collate, encode_classification, encode_multiple_choice, encode_ner, encode_squad,
                                      length_bucketed_batches, truncate_question)
from bertforge.tasks.metrics import align_predictions_to_words
from bertforge.tasks.readers import CONLL2003_LABELS, SwagExample, TextExample


@pytest.fixture(scope="module")
def tokenizer(minilm_dir):
    from bertforge.tokenization import BertTokenizer
    return BertTokenizer.from_pretrained(minilm_dir)


@pytest.fixture(scope="module")
def squad_examples(shared_data):
    return read_squad(shared_data / "squad" / "dev-v1.1.json.gz").examples[:400]


@pytest.mark.parametrize("max_length,stride", [(384, 128), (96, 32)])
def test_squad_windows_cover_every_answer_and_offsets_map_back(tokenizer, squad_examples, max_length, stride):
    feats = encode_squad(tokenizer, squad_examples, max_length=max_length, doc_stride=stride, training=True)
    by_example: dict[int, list[dict]] = {}
    for f in feats:
        assert len(f["input_ids"]) <= max_length
        by_example.setdefault(f["example_index"], []).append(f)
    assert set(by_example) == set(range(len(squad_examples)))
    exact = 0
    for i, ex in enumerate(squad_examples):
        ans = ex.answers[0]
        hits = [f for f in by_example[i] if f["start_positions"] > 0]
        assert hits, f"answer of {ex.qid} is in no window"
        for f in hits:
            s, e = f["start_positions"], f["end_positions"]
            start, end = f["offsets"][s][0], f["offsets"][e][1]
            # the token span covers the answer and never more than the words around it
            assert start <= ans.answer_start and end >= ans.answer_start + len(ans.text)
            exact += ex.context[start:end] == ans.text
    if max_length == 384:
        assert len(feats) < 1.2 * len(squad_examples)  # dev paragraphs mostly fit one window
    else:
        assert len(feats) > 2 * len(squad_examples)  # short windows: several per question
    # answers that start/end inside a word ("gold" in "golden", "39" in "739") are rare
    assert exact >= 0.95 * sum(1 for f in feats if f["start_positions"] > 0)


def test_squad_window_starts_are_doc_stride_apart(tokenizer, squad_examples):
    ex = max(squad_examples, key=lambda e: len(e.context))
    feats = encode_squad(tokenizer, [ex], max_length=128, doc_stride=50)
    firsts = [next(o for o in f["offsets"] if o is not None)[0] for f in feats]
    assert firsts == sorted(firsts) and len(feats) > 2
    ctx_tokens = tokenizer(ex.context, add_special_tokens=False, return_offsets_mapping=True)["offset_mapping"]
    starts = [o[0] for o in ctx_tokens]
    positions = [starts.index(c) for c in firsts]
    assert all(b - a == 50 for a, b in zip(positions, positions[1:]))


def test_long_question_is_cut_to_max_query_length(tokenizer):
    q = " ".join(["word"] * 100) + "?"
    cut = truncate_question(tokenizer, q, 64)
    assert len(tokenizer(cut, add_special_tokens=False)["input_ids"]) == 64


def test_ner_first_sub_token_labels_on_real_conll(tokenizer, shared_data):
    sentences = read_conll(shared_data / "conll2003" / "valid.txt").examples[:300]
    label2id = {t: i for i, t in enumerate(CONLL2003_LABELS)}
    feats = encode_ner(tokenizer, sentences, max_length=128, label2id=label2id)
    split_words = 0
    for sent, f in zip(sentences, feats):
        labelled = [(p, lab) for p, lab in enumerate(f["labels"]) if lab != -100]
        assert len(labelled) == len(sent.words)  # one label per word, none on [CLS]/[SEP]/later pieces
        for w, (p, lab) in enumerate(labelled):
            assert f["word_ids"][p] == w and CONLL2003_LABELS[lab] == sent.tags[w]
        split_words += len(f["input_ids"]) - 2 - len(sent.words)
        # gold ids on every token map back to exactly the gold word tags
        ids = [lab if lab != -100 else 0 for lab in f["labels"]]
        assert align_predictions_to_words(ids, f["word_ids"], CONLL2003_LABELS, f["num_words"]) == list(sent.tags)
    assert split_words > 100  # the data really has multi-piece words


def test_ner_truncated_words_are_predicted_o(tokenizer):
    words = ["Paris"] * 50
    f = encode_ner(tokenizer, [words], max_length=16)[0]
    tags = align_predictions_to_words([5] * 16, f["word_ids"], CONLL2003_LABELS, f["num_words"])
    assert len(tags) == 50 and tags[:14] == ["B-LOC"] * 14 and set(tags[14:]) == {"O"}


def test_classification_pairs_and_collate(tokenizer):
    exs = [TextExample("a", "short one", "and its pair", "1", 1),
           TextExample("b", "a somewhat longer first sentence here", "x", "0", 2)]
    feats = encode_classification(tokenizer, exs, 128, {"0": 0, "1": 1})
    batch = collate(feats)
    assert batch["input_ids"].shape == batch["attention_mask"].shape
    assert batch["labels"].tolist() == [1, 0]
    assert batch["attention_mask"].sum(1).tolist() == [len(f["input_ids"]) for f in feats]
    assert set(batch["token_type_ids"][0].tolist()) == {0, 1}
    reg = encode_classification(tokenizer, [TextExample("c", "x", "y", 3.2, 1)], 128, regression=True)
    assert collate(reg)["labels"].dtype == torch.float


def test_multiple_choice_features(tokenizer):
    endings = ("plays a song.", "eats it.", "flies away quickly.", "sings.")
    ex = SwagExample("s", "A man sits at a piano.", "He", endings, 2, 1)
    feats = encode_multiple_choice(tokenizer, [ex, ex], 64)
    batch = collate(feats)
    assert batch["input_ids"].shape[:2] == (2, 4)
    assert batch["labels"].tolist() == [2, 2]


def test_bucketed_batches_cover_everything_once():
    lengths = [(i * 37) % 101 for i in range(1000)]
    for shuffle in (True, False):
        batches = length_bucketed_batches(lengths, 32, shuffle=shuffle, seed=3)
        flat = sorted(i for b in batches for i in b)
        assert flat == list(range(1000))
        spread = sum(max(lengths[i] for i in b) - min(lengths[i] for i in b) for b in batches) / len(batches)
        assert spread < 20  # tight batches: little padding
    assert length_bucketed_batches(lengths, 32, seed=1) != length_bucketed_batches(lengths, 32, seed=2)


def test_task_registry_heads_have_encoders():
    for name in ("sst2", "stsb", "squad", "conll2003", "swag"):
        assert get_task(name).head
