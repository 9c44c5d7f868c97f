"""Task data from the user's own files and from the named benchmarks: options, flags, splits, bad rows.

References are independent of the readers: Python's csv/json modules on the files the tests write, and
the documented layouts and counts of ../shared/data (its README) for the real files.
"""
from __future__ import annotations

import argparse
import csv
import gzip
import json
from collections import Counter
from dataclasses import fields
from pathlib import Path

import pytest

from bertforge.commands.flags import add_data_arguments, data_options_from_args
from bertforge.tasks.readers import (
    CONLL2003_LABELS,
    BadRowsError,
    DataError,
    read_glue,
    read_qa,
    read_squad,
)
from bertforge.tasks.registry import TASKS
from bertforge.tasks.task_data import DataOptions, held_out_split, load_task_data


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8", newline="")
    return path


def load(task: str, need_train: bool = True, **options):
    return load_task_data(TASKS[task], DataOptions(task=task, **options), need_train=need_train)


def csv_rows(path: Path) -> list[dict[str, str]]:
    with open(path, encoding="utf-8", newline="") as handle:
        return list(csv.DictReader(handle))


# --------------------------------------------------------------------------- options and flags


def parser_with_data_flags(**kwargs) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="bertforge finetune", exit_on_error=True)
    add_data_arguments(parser, **kwargs)
    return parser


def test_flags_come_from_the_dataclass() -> None:
    parser = parser_with_data_flags()
    by_dest = {a.dest: a for a in parser._actions if a.dest != "help"}
    cli_fields = [f for f in fields(DataOptions) if f.metadata["cli"]]
    assert list(by_dest) == [f.name for f in cli_fields]
    for f in cli_fields:
        assert by_dest[f.name].help.startswith(f.metadata["help"])
    assert by_dest["train_file"].option_strings == ["--train"]
    assert by_dest["eval_file"].option_strings == ["--eval"]
    assert by_dest["text_pair_column"].option_strings == ["--text-pair-column"]
    assert by_dest["regression"].option_strings == ["--regression", "--no-regression"]
    assert by_dest["split_seed"].type("7") == 7 and by_dest["task"].required
    args = parser.parse_args(["--task", "SST-2", "--train", "t.csv", "--eval", "d.csv", "--text-column", "review",
                              "--label-column", "stars", "--eval-fraction", "0.25", "--split-seed", "7",
                              "--skip-bad-rows", "--no-regression"])
    assert data_options_from_args(args) == DataOptions(
        task="sst2", train_file="t.csv", eval_file="d.csv", text_column="review", label_column="stars",
        eval_fraction=0.25, split_seed=7, skip_bad_rows=True, regression=False)
    defaults = data_options_from_args(parser.parse_args(["--task", "ner"]))
    assert defaults == DataOptions(task="ner")
    assert defaults.regression is None and defaults.eval_fraction == 0.1


def test_flag_subsets_and_overrides() -> None:
    parser = parser_with_data_flags(include=["eval_split"], exclude=["train_file", "eval_fraction"],
                                    task_required=False)
    dests = {a.dest for a in parser._actions}
    assert "eval_split" in dests and "train_file" not in dests and "eval_fraction" not in dests
    args = parser.parse_args(["--split", "test"])
    assert args.task is None
    opts = data_options_from_args(args, task="rte")
    assert (opts.task, opts.eval_split, opts.train_file) == ("rte", "test", None)
    with pytest.raises(ValueError, match="--task is required"):
        data_options_from_args(args)
    with pytest.raises(ValueError, match="not DataOptions fields"):
        parser_with_data_flags(exclude=["batch_size"])


@pytest.mark.parametrize("argv,message", [
    (["--task", "imdb"], "argument --task: unknown task 'imdb'"),
    (["--task", "sst2", "--eval-fraction", "1.5"], "argument --eval-fraction: expected a fraction"),
    (["--task", "sst2", "--split-seed", "x"], "argument --split-seed: expected a whole number of at least 0, got 'x'"),
])
def test_bad_flags_are_one_line_errors(argv: list[str], message: str, capsys) -> None:
    with pytest.raises(SystemExit) as info:
        parser_with_data_flags().parse_args(argv)
    assert info.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert message in err[-1]


def test_options_that_do_not_apply_are_refused(tmp_path: Path) -> None:
    train = write(tmp_path / "train.csv", "text,label\na,x\nb,y\n")
    with pytest.raises(ValueError, match=r"--text-column is for your own data \(classification, regression, ner, qa\)"):
        load("sst2", train_file=str(train), text_column="review")
    with pytest.raises(ValueError, match="--regression does not apply to ner"):
        load("ner", train_file=str(train), regression=True)
    with pytest.raises(ValueError, match="--no-regression contradicts task regression"):
        load("regression", train_file=str(train), regression=False)
    with pytest.raises(ValueError, match="--eval-fraction must be"):
        DataOptions(task="classification", eval_fraction=1.0)
    with pytest.raises(ValueError, match="no eval set"):
        load("classification", train_file=str(train), eval_fraction=0.0)
    with pytest.raises(ValueError, match="give one"):
        load("classification", data=str(train), train_file=str(train))


# --------------------------------------------------------------------------- held-out split


def make_classification(tmp_path: Path, n: int = 40) -> Path:
    lines = ["text,label"] + [f'"sentence {i}, with a comma",{["neg", "pos", "neutral"][i % 3]}' for i in range(n)]
    return write(tmp_path / "train.csv", "\n".join(lines) + "\n")


def test_held_out_split_is_seeded_disjoint_and_noted(tmp_path: Path) -> None:
    path = make_classification(tmp_path, 40)
    data = load("classification", train_file=str(path))
    assert data.note == "held out 10 % of train.csv (seed 42): 4 examples"
    assert data.spec is TASKS["classification"]
    assert data.labels == ["neg", "neutral", "pos"]  # whatever the data holds, sorted
    rows = csv_rows(path)
    train, held = data.train, data.evals["eval"]
    assert (len(train), len(held)) == (36, 4)
    # every row exactly once, each side in file order
    assert sorted([ex.text for ex in train + held]) == sorted(r["text"] for r in rows)
    assert [ex.line for ex in train] == sorted(ex.line for ex in train)
    assert {(ex.text, ex.label) for ex in held} <= {(r["text"], r["label"]) for r in rows}
    again = load("classification", train_file=str(path))
    assert [ex.guid for ex in again.evals["eval"]] == [ex.guid for ex in held]
    other = load("classification", train_file=str(path), split_seed=1, eval_fraction=0.25)
    assert len(other.evals["eval"]) == 10 and other.note.startswith("held out 25 % of train.csv (seed 1): 10")
    assert {ex.guid for ex in other.evals["eval"]} != {ex.guid for ex in held}
    # --data may be the train file itself, or a folder holding only a train file
    assert [ex.guid for ex in load("classification", data=str(path)).evals["eval"]] == [ex.guid for ex in held]
    assert [ex.guid for ex in load("classification", data=str(tmp_path)).evals["eval"]] == [ex.guid for ex in held]
    # evaluating (no training): the file given is the eval set, whole
    scored = load("classification", need_train=False, data=str(path))
    assert scored.train == [] and len(scored.evals["eval"]) == 40 and scored.note == ""


def test_held_out_split_groups_and_limits() -> None:
    items = [(f"ctx{i // 3}", i) for i in range(30)]  # 10 groups of 3
    train, held = held_out_split(items, 0.2, 0, group=lambda x: x[0])
    assert len(held) == 6 and {g for g, _ in held}.isdisjoint({g for g, _ in train})
    assert held_out_split(items[:2], 0.01, 0)[1] != []  # at least one held out ...
    assert len(held_out_split(items[:2], 0.99, 0)[0]) == 1  # ... and at least one left to train on
    with pytest.raises(ValueError, match="give --eval FILE"):
        held_out_split(items[:1], 0.1, 0)


# --------------------------------------------------------------------------- classification / regression


def test_generic_formats_and_columns(tmp_path: Path) -> None:
    tsv = write(tmp_path / "train.tsv", "id\treview\tother\tstars\n1\tGood \"film\tnice\tpos\n2\tBad.\tmeh\tneg\n")
    dev = write(tmp_path / "dev.jsonl", '{"review": "Fine.", "other": "ok", "stars": "pos"}\n')
    data = load("classification", train_file=str(tsv), eval_file=str(dev), text_column="review",
                text_pair_column="other", label_column="stars")
    assert [(ex.text, ex.text_pair, ex.label) for ex in data.train] == [('Good "film', "nice", "pos"),
                                                                        ("Bad.", "meh", "neg")]
    assert [(ex.text, ex.label) for ex in data.evals["eval"]] == [("Fine.", "pos")]
    assert data.labels == ["neg", "pos"] and data.note == ""
    assert data.files == {"train": str(tsv), "eval": str(dev)}
    folder = load("classification", data=str(tmp_path), text_column="review", text_pair_column="other",
                  label_column="stars")
    assert folder.files == data.files and folder.evals == data.evals


def test_eval_label_outside_the_train_set(tmp_path: Path) -> None:
    train = make_classification(tmp_path, 12)
    dev = write(tmp_path / "dev.csv", "text,label\nfine,pos\ngreat,superb\nok,neutral\n")
    with pytest.raises(DataError) as info:
        load("classification", train_file=str(train), eval_file=str(dev))
    message = str(info.value)
    assert message.startswith(f"{dev}, line 3, field 'label': expected one of ['neg', 'neutral', 'pos'] "
                              "(the labels of train.csv), got 'superb'")
    assert "\n" not in message and "--skip-bad-rows" in message
    data = load("classification", train_file=str(train), eval_file=str(dev), skip_bad_rows=True)
    assert [ex.text for ex in data.evals["eval"]] == ["fine", "ok"]
    assert "skipped 1 bad rows of dev.csv (first: " in data.note and "'superb'" in data.note


def test_malformed_rows_name_file_line_and_field(tmp_path: Path) -> None:
    path = write(tmp_path / "train.csv", "text,label\ngood,pos\n  ,neg\nonly text\nbad,neg\n,pos\n")
    with pytest.raises(BadRowsError) as info:
        load("classification", train_file=str(path))
    err = info.value
    assert (err.line, err.field, err.count) == (3, "text", 3)
    assert str(err) == (f"{path}, line 3, field 'text': expected non-empty text, got '  ' "
                        "[3 bad rows in this file: this one, line 4, line 6; --skip-bad-rows skips and counts them]")
    data = load("classification", train_file=str(path), skip_bad_rows=True, eval_fraction=0.5)
    assert sorted(ex.text for ex in data.train + data.evals["eval"]) == ["bad", "good"]
    assert "skipped 3 bad rows of train.csv" in data.note
    many = write(tmp_path / "many.csv", "text,label\n" + "ok,a\n" + " ,a\n" * 8)
    with pytest.raises(BadRowsError, match=r"\[8 bad rows in this file: this one, line 4, line 5, line 6, line 7 "
                                           r"and 3 more; --skip-bad-rows"):
        load("classification", train_file=str(many))
    jsonl = write(tmp_path / "x.jsonl", '{"text": "a", "label": "p"}\n{"label": "p"}\n{"text": "b"}\n')
    with pytest.raises(DataError, match=r"line 2, field 'text': expected a string, got nothing .*2 bad rows"):
        load("classification", train_file=str(jsonl))


@pytest.mark.parametrize("name, content", [
    ("train.csv", "text\ngood\nbad\nfine\nawful\n"),
    ("train.jsonl", '{"text": "good"}\n{"text": "bad"}\n{"text": "fine"}\n'),
    ("train.tsv", "text\tstars\ngood\t5\nbad\t1\n"),  # the labels are there, under a name not asked for
])
def test_train_or_eval_data_without_labels_is_refused_before_training(tmp_path: Path, name: str, content: str) -> None:
    """Read as unlabeled, such a file trained a head on no labels and failed only at the end of training."""
    path = write(tmp_path / name, content)
    for task in ("classification", "regression"):
        with pytest.raises(DataError) as info:
            load(task, train_file=str(path))
        assert (info.value.field, info.value.line) == ("label", 1) and str(path) in str(info.value)
    (tmp_path / "labeled").mkdir()
    labeled = make_classification(tmp_path / "labeled", 12)
    with pytest.raises(DataError, match=rf"{name}, line 1, field 'label': expected a label"):
        load("classification", train_file=str(labeled), eval_file=str(path))
    if name == "train.tsv":
        assert load("classification", train_file=str(path), label_column="stars", eval_fraction=0.5).labels == ["1", "5"]


def test_regression_detected_from_every_label(tmp_path: Path) -> None:
    train = write(tmp_path / "train.jsonl", "".join(json.dumps({"text": f"t{i}", "label": v}) + "\n"
                                                    for i, v in enumerate([0.5, "3.8", 2, 4.25, "1"] * 4)))
    dev = write(tmp_path / "dev.csv", "text,label\na,1.5\nb,4\n")
    data = load("classification", train_file=str(train), eval_file=str(dev))
    assert data.spec is TASKS["regression"] and data.labels is None
    assert data.note == "every label of train.jsonl is a number, some with fractions: fine-tuning a regression head " \
                        "(--no-regression keeps them as classes)"
    assert [ex.label for ex in data.train[:5]] == [0.5, 3.8, 2.0, 4.25, 1.0]
    assert [ex.label for ex in data.evals["eval"]] == [1.5, 4.0]
    kept = load("classification", train_file=str(train), regression=False)
    assert kept.spec is TASKS["classification"] and kept.labels == ["0.5", "1", "2", "3.8", "4.25"]
    with pytest.raises(DataError, match=r"dev.csv, line 2, field 'label': expected one of .* got '1.5'"):
        load("classification", train_file=str(train), eval_file=str(dev), regression=False)
    # one label that is not a number keeps it classification
    mixed = write(tmp_path / "mixed.csv", "text,label\na,0.5\nb,3.8\nc,high\n")
    assert load("classification", train_file=str(mixed), eval_fraction=0.4).spec is TASKS["classification"]
    # integers alone are class ids (0/1 sentiment, 1-5 stars) unless regression is asked for
    stars = write(tmp_path / "stars.csv", "text,label\n" + "".join(f"r{i},{i % 5 + 1}\n" for i in range(20)))
    as_classes = load("classification", train_file=str(stars))
    assert as_classes.spec is TASKS["classification"] and as_classes.labels == ["1", "2", "3", "4", "5"]
    assert "are 5 integers: treated as classes (--regression fits a score instead)" in as_classes.note
    asked = load("classification", train_file=str(stars), regression=True)
    assert asked.spec is TASKS["regression"]
    assert {ex.text: ex.label for ex in asked.train + asked.evals["eval"]} == {f"r{i}": float(i % 5 + 1)
                                                                           for i in range(20)}
    assert load("regression", train_file=str(stars)).spec is TASKS["regression"]
    binary = write(tmp_path / "bin.csv", "text,label\n" + "".join(f"r{i},{i % 2}\n" for i in range(20)))
    only_split = load("classification", train_file=str(binary))
    assert only_split.labels == ["0", "1"] and only_split.note == "held out 10 % of bin.csv (seed 42): 2 examples"


# --------------------------------------------------------------------------- NER


DRUG_TRAIN = ("Take DT O\naspirin NN B-DRUG\ntwice RB B-DOSE\ndaily RB I-DOSE\n\n"
              "Stop VB O\nwarfarin NN B-DRUG\nsodium NN I-DRUG\n\n"
              "Ibuprofen NN B-DRUG\nhelps VBZ O\n\n")


def test_ner_any_bio_tag_set(tmp_path: Path) -> None:
    train = write(tmp_path / "train.txt", DRUG_TRAIN)
    dev = write(tmp_path / "dev.txt", "Give VB O\nmetformin NN B-DRUG\n\n")
    data = load("ner", train_file=str(train), eval_file=str(dev))
    assert data.labels == ["O", "B-DOSE", "I-DOSE", "B-DRUG", "I-DRUG"]
    assert data.spec is TASKS["ner"]
    words = [s.split("\n") for s in DRUG_TRAIN.strip().split("\n\n")]
    assert [list(s.words) for s in data.train] == [[w.split()[0] for w in s] for s in words]
    assert [list(s.tags) for s in data.train] == [[w.split()[-1] for w in s] for s in words]
    assert data.evals["eval"][0].tags == ("O", "B-DRUG")
    folder = load("ner", data=str(tmp_path))  # a folder with train.txt and dev.txt
    assert folder.files == {"train": str(train), "eval": str(dev)} and folder.train == data.train
    # BIOES: the E- and S- forms join the set, for every type
    bioes = write(tmp_path / "bioes.txt", "a X S-GENE\nb X O\n\nc X B-CHEM\nd X E-CHEM\n\ne X S-CHEM\n\n")
    assert load("ner", train_file=str(bioes), eval_fraction=0.4).labels == [
        "O", "B-CHEM", "I-CHEM", "E-CHEM", "S-CHEM", "B-GENE", "I-GENE", "E-GENE", "S-GENE"]


def test_ner_unknown_eval_tag_and_bad_tags(tmp_path: Path) -> None:
    train = write(tmp_path / "train.txt", DRUG_TRAIN)
    dev = write(tmp_path / "dev.txt", "Give VB O\nBRCA1 NN B-GENE\n\nTake VB O\nit PRP O\n\n")
    with pytest.raises(DataError) as info:
        load("ner", train_file=str(train), eval_file=str(dev))
    assert str(info.value).startswith(f"{dev}, line 2, field 'NER tag': expected one of ['O', 'B-DOSE', "
                                      "'I-DOSE', 'B-DRUG', 'I-DRUG'] (the tags of train.txt), got 'B-GENE'")
    data = load("ner", train_file=str(train), eval_file=str(dev), skip_bad_rows=True)
    assert [s.words for s in data.evals["eval"]] == [("Take", "it")]
    assert "skipped 1 bad sentences of dev.txt" in data.note
    no_scheme = write(tmp_path / "pos.txt", "Take VB\naspirin NN\n\n")
    with pytest.raises(DataError, match=r"line 1, field 'NER tag': expected a BIO/BIOES tag.*got 'VB'"):
        load("ner", train_file=str(no_scheme))


def test_ner_json_lines(tmp_path: Path) -> None:
    rows = [{"tokens": ["Take", "aspirin"], "tags": ["O", "B-DRUG"]},
            {"tokens": ["Stop", "warfarin", "sodium"], "tags": ["O", "B-DRUG", "I-DRUG"]},
            {"tokens": ["oops"], "tags": ["O", "O"]}]
    train = write(tmp_path / "train.jsonl", "".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(DataError, match=r"line 3, field 'tags': expected one tag per token \(1\), got 2"):
        load("ner", train_file=str(train))
    data = load("ner", train_file=str(train), skip_bad_rows=True, eval_fraction=0.5)
    assert data.labels == ["O", "B-DRUG", "I-DRUG"]
    assert sorted(s.words for s in data.train + data.evals["eval"]) == sorted(tuple(r["tokens"]) for r in rows[:2])
    custom = write(tmp_path / "c.jsonl", json.dumps({"w": ["a", "b"], "t": ["B-X", "I-X"]}) + "\n"
                   + json.dumps({"w": ["c"], "t": ["O"]}) + "\n")
    assert load("ner", train_file=str(custom), text_column="w", label_column="t").labels == ["O", "B-X", "I-X"]


@pytest.mark.slow
def test_generic_ner_labels_feed_the_encoder(tmp_path: Path, minilm_dir: Path) -> None:
    """The generic tag set is what the NER encoder maps, word by word (first sub-token labelled)."""
    from bertforge.tasks.evaluation import InferenceSettings, encode
    from bertforge.tokenization import load_tokenizer
    data = load("ner", train_file=str(write(tmp_path / "train.txt", DRUG_TRAIN)), eval_fraction=0.3)
    tokenizer = load_tokenizer(str(minilm_dir))
    feats = encode(data.spec, tokenizer, data.train, InferenceSettings(), data.labels, training=True)
    for sent, f in zip(data.train, feats):
        firsts = [lab for lab, w, prev in zip(f["labels"], f["word_ids"], [None] + f["word_ids"][:-1])
                  if w is not None and w != prev]
        assert [data.labels[i] for i in firsts] == list(sent.tags)


# --------------------------------------------------------------------------- QA

CONTEXT = "The Broncos beat the Panthers 24-10 in Santa Clara, California, on February 7, 2016."


def squad_file(tmp_path: Path, qas: list[dict], name: str = "train.json") -> Path:
    data = {"version": "1.1", "data": [{"title": "SB50", "paragraphs": [{"context": CONTEXT, "qas": qas}]}]}
    return write(tmp_path / name, json.dumps(data))


def qa(qid: str, text: str, start: int) -> dict:
    return {"id": qid, "question": f"Question {qid}?", "answers": [{"text": text, "answer_start": start}]}


def test_squad_answers_not_in_context(tmp_path: Path) -> None:
    path = squad_file(tmp_path, [
        qa("good", "Broncos", 4),
        qa("moved", "Santa Clara", 36),          # really at 39: re-anchored
        qa("typo", "Santa Clata", 39),           # nowhere in the context
        qa("far", "Broncos", 4 + 250),           # past the end, nothing near
    ])
    with pytest.raises(BadRowsError) as info:
        read_squad(path)
    message = str(info.value)
    assert message.startswith(f"{path}, at data[0].paragraphs[0].qas[2] (question id 'typo'), field 'answers[0]': "
                              "expected the answer text in the context at answer_start 39 or within 100 characters")
    assert message.endswith("[2 bad questions in this file: this one, at data[0].paragraphs[0].qas[3] "
                            "(question id 'far'); --skip-bad-rows skips and counts them]")
    assert "\n" not in message
    with pytest.raises(BadRowsError, match="2 bad questions"):
        load("qa", train_file=str(path))
    with pytest.raises(ValueError, match="1 example group.* cannot be split into train and eval; give --eval"):
        load("qa", train_file=str(path), skip_bad_rows=True)  # one paragraph: nothing to hold out
    data = load("qa", train_file=str(path), eval_file=str(path), skip_bad_rows=True)
    kept = data.train
    assert sorted(ex.qid for ex in kept) == ["good", "moved"]
    for ex in kept:  # what is trained on is the gold text at its (fixed) offset, never [CLS]
        a = ex.answers[0]
        assert ex.context[a.answer_start:a.answer_start + len(a.text)] == a.text
    assert "skipped 2 bad questions of train.json" in data.note
    assert "1 answers of train.json were not at their answer_start and were moved" in data.note
    all_bad = squad_file(tmp_path, [qa("typo", "Santa Clata", 39), qa("x", "Denver", 0)], "bad.json")
    with pytest.raises(DataError, match=r"all 2 questions were bad"):
        load("qa", train_file=str(all_bad), skip_bad_rows=True)


def test_qa_json_lines_grouped_split_and_unanswerable(tmp_path: Path) -> None:
    contexts = [f"Paragraph {k} says the answer is {k * 7}." for k in range(10)]
    rows = []
    for k, ctx in enumerate(contexts):
        for j in range(3):
            rows.append({"id": f"c{k}q{j}", "question": f"What is {k}/{j}?", "context": ctx,
                         "answers": {"text": [str(k * 7)], "answer_start": [ctx.index(str(k * 7))]}})
    path = write(tmp_path / "train.jsonl", "".join(json.dumps(r) + "\n" for r in rows))
    data = load("qa", train_file=str(path), eval_fraction=0.2)
    assert data.spec is TASKS["qa"] and data.labels is None
    held = data.evals["eval"]
    assert len(held) == 6 and {ex.context for ex in held}.isdisjoint({ex.context for ex in data.train})
    assert data.note == "held out 20 % of train.jsonl (seed 42, whole contexts kept together): 6 examples"
    assert {ex.qid: (ex.answers[0].text, ex.answers[0].answer_start) for ex in data.train + held} == {
        r["id"]: (r["answers"]["text"][0], r["answers"]["answer_start"][0]) for r in rows}
    rows.append({"id": "none", "question": "Who?", "context": contexts[0], "answers": []})
    v2 = write(tmp_path / "v2.jsonl", "".join(json.dumps(r) + "\n" for r in rows))
    data = load("qa", train_file=str(v2), eval_file=str(path))
    assert data.spec is TASKS["squad2"] and "unanswerable questions" in data.note
    assert [ex.is_impossible for ex in data.train][-1] is True
    broken = write(tmp_path / "broken.jsonl", json.dumps({"question": "Q?", "context": "C",
                                                          "answers": [{"text": "C"}]}) + "\n")
    with pytest.raises(DataError, match=r"line 1 \(question id 'broken-1'\)|line 1, field 'answers\[0\].answer_start'"):
        read_qa(broken)


# --------------------------------------------------------------------------- real data: named tasks unchanged


def glue_rows(path: Path) -> tuple[list[str], list[list[str]]]:
    """The documented glue_data layout: a header line, then tab-separated fields, no quoting."""
    lines = path.read_text(encoding="utf-8").rstrip("\n").split("\n")
    return lines[0].split("\t"), [line.split("\t") for line in lines[1:]]


@pytest.mark.parametrize("task,folder,text,pair,label,rows", [
    ("sst2", "SST-2", "sentence", None, "label", 872),
    ("mrpc", "MRPC", "#1 String", "#2 String", "Quality", 408),
    ("stsb", "STS-B", "sentence1", "sentence2", "score", 1_500),
])
def test_named_glue_tasks_read_the_documented_rows(shared_data: Path, task: str, folder: str, text: str,
                                                   pair: str | None, label: str, rows: int) -> None:
    data = load(task, need_train=False, data=str(shared_data))
    path = shared_data / "glue" / folder / "dev.tsv"
    header, fields_ = glue_rows(path)
    assert len(fields_) == rows and data.note == "" and data.files == {"eval": str(path)}
    got = [(ex.text, ex.text_pair, ex.label) for ex in data.evals["eval"]]
    want = [(f[header.index(text)], f[header.index(pair)] if pair else None,
             float(f[header.index(label)]) if task == "stsb" else f[header.index(label)]) for f in fields_]
    assert got == want
    assert data.spec is TASKS[task]
    # the old keyword form (predictor, distillation) gives the same examples
    old = load_task_data(TASKS[task], str(shared_data), None, None, need_train=False)
    assert old.evals["eval"] == data.evals["eval"] and old.labels == data.labels


@pytest.mark.slow
def test_sst2_train_and_dev_with_old_and_new_forms(shared_data: Path) -> None:
    data = load("sst2", data=str(shared_data))
    assert (len(data.train), len(data.evals["eval"])) == (67_349, 872)
    assert Counter(ex.label for ex in data.evals["eval"]) == {"0": 428, "1": 444}
    assert data.labels == ["0", "1"] and data.note == ""
    assert load_task_data(TASKS["sst2"], str(shared_data)).train == data.train


def conll_sentences(path: Path) -> list[list[tuple[str, str]]]:
    """Independent parse of the documented layout: blank-line separated, -DOCSTART- dropped, word first, tag last."""
    out, cur = [], []
    for line in path.read_text(encoding="utf-8").split("\n"):
        cols = line.split()
        if not cols or cols[0] == "-DOCSTART-":
            if cur:
                out.append(cur)
            cur = []
            continue
        cur.append((cols[0], cols[-1]))
    return out + ([cur] if cur else [])


def test_conll2003_named_and_generic(shared_data: Path) -> None:
    path = shared_data / "conll2003" / "valid.txt"
    data = load("conll2003", need_train=False, data=str(shared_data / "conll2003"))
    want = conll_sentences(path)
    assert len(want) == 3_250 and data.labels == CONLL2003_LABELS
    assert [list(zip(s.words, s.tags)) for s in data.evals["eval"]] == want
    # the generic NER task on the same file finds the CoNLL-2003 tag set by itself
    generic = load("ner", train_file=str(path))
    assert set(generic.labels) == set(CONLL2003_LABELS) and generic.labels[0] == "O"
    assert len(generic.train) + len(generic.evals["eval"]) == 3_250
    assert generic.note == "held out 10 % of valid.txt (seed 42): 325 examples"
    folder = load("ner", need_train=False, data=str(shared_data / "conll2003"))  # valid.txt is the dev file
    assert folder.files == {"eval": str(path)} and folder.evals == data.evals
    assert sum(tag.startswith("B-") for s in generic.train + generic.evals["eval"] for tag in s.tags) == 5_942


def test_stsb_through_generic_regression_detection(shared_data: Path) -> None:
    path = shared_data / "glue" / "STS-B" / "dev.tsv"
    data = load("classification", train_file=str(path), label_column="score")
    assert data.spec is TASKS["regression"] and "every label of dev.tsv is a number, some with fractions" in data.note
    named = read_glue("stsb", path)
    by_guid = {ex.line: ex for ex in named}
    both = data.train + data.evals["eval"]
    assert len(both) == 1_500 and len(data.evals["eval"]) == 150
    assert all((ex.text, ex.text_pair, ex.label) == (by_guid[ex.line].text, by_guid[ex.line].text_pair,
                                                      by_guid[ex.line].label) for ex in both)


@pytest.mark.slow
def test_squad_dev_answers_and_article_split(shared_data: Path) -> None:
    path = shared_data / "squad" / "dev-v1.1.json.gz"
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        raw = json.load(handle)
    answers = [(qa_["id"], p["context"], a) for art in raw["data"] for p in art["paragraphs"] for qa_ in p["qas"]
               for a in qa_["answers"]]
    not_at_offset = sum(ctx[a["answer_start"]:a["answer_start"] + len(a["text"])] != a["text"]
                        for _, ctx, a in answers)
    result = read_squad(path)
    assert len(result) == 10_570 and result.skipped == 0
    assert result.answer_mismatches == not_at_offset == 0 and result.answers_reanchored == 0
    data = load("squad", data=str(path))
    per_article = [sum(len(p["qas"]) for p in art["paragraphs"]) for art in raw["data"]]
    assert (len(data.train), len(data.evals["eval"])) == (sum(per_article[:38]), sum(per_article[38:]))
    assert data.note.startswith("SQuAD article split of dev-v1.1.json.gz: trained on articles 0-37")
    generic = load("qa", train_file=str(path))
    held_articles = {ex.article_index for ex in generic.evals["eval"]}
    assert len(held_articles) == 5 and held_articles.isdisjoint({ex.article_index for ex in generic.train})
    assert generic.note.startswith("held out 10 % of dev-v1.1.json.gz (seed 42, whole articles kept together)")


def test_a_missing_dev_file_names_the_folder_and_the_names_tried_in_one_short_line(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("no data here")
    with pytest.raises(FileNotFoundError) as info:
        load("classification", need_train=False, data=str(tmp_path))
    assert str(info.value) == (f"classification dev file 'dev' not found: looked for dev / valid / validation / val / "
                               f"eval + .jsonl / .csv / .tsv / .json / .parquet / .arrow / .txt (or .gz) in {tmp_path}")


def test_a_folder_of_semicolon_txt_tables_is_found_by_data(tmp_path: Path) -> None:
    """The emotion tutorial's folder as it is (train.txt, val.txt: `text;label_name` with a header) works with
    --data alone; the labels come from the label column, not the text."""
    (tmp_path / "train.txt").write_text("text;label_name\ni am glad;joy\ni am sad;sadness\nso happy;joy\n")
    (tmp_path / "val.txt").write_text("text;label_name\nvery sad today;sadness\n")
    data = load("classification", data=str(tmp_path))
    assert sorted(data.labels) == ["joy", "sadness"]
    assert [ex.text for ex in data.train] == ["i am glad", "i am sad", "so happy"]
    assert [(ex.text, ex.label) for ex in data.evals["eval"]] == [("very sad today", "sadness")]


def test_train_and_eval_from_parquet_and_a_datasets_folder(tmp_path: Path) -> None:
    from needs import require_module
    pa = require_module("pyarrow", "pip install 'bertforge[data]'")
    import pyarrow.parquet as pq
    datasets = require_module("datasets")
    pq.write_table(pa.table({"review": ["great", "awful", "fine"], "stars": ["pos", "neg", "pos"]}),
                   tmp_path / "train.parquet")
    datasets.Dataset.from_dict({"review": ["lovely", "bad"], "stars": ["pos", "neg"]}).save_to_disk(str(tmp_path / "dev"))
    data = load("classification", train_file=str(tmp_path / "train.parquet"), eval_file=str(tmp_path / "dev"),
                text_column="review", label_column="stars")
    assert [(e.text, e.label) for e in data.train] == [("great", "pos"), ("awful", "neg"), ("fine", "pos")]
    assert [(e.text, e.label) for e in data.evals["eval"]] == [("lovely", "pos"), ("bad", "neg")]
    assert data.labels == ["neg", "pos"]
    found = load("classification", data=str(tmp_path), text_column="review", label_column="stars")  # by its name
    assert data.files["train"] == found.files["train"] == str(tmp_path / "train.parquet")


@pytest.mark.parametrize("unlabeled", ["train", "dev"])
def test_an_unlabeled_glue_split_to_train_or_score_on_is_refused_before_training(tmp_path: Path, unlabeled) -> None:
    """A GLUE test-format file (index, sentence: no label column) given as train or dev data would train on
    labels that are None and fail with a TypeError after training: refused at once, naming the file and column."""
    from bertforge.tasks.readers import DataError
    folder = tmp_path / "SST-2"
    folder.mkdir()
    sentences = ["a gripping , funny film", "it 's a bore", "not bad at all", "the plot goes nowhere"]
    labeled = "sentence\tlabel\n" + "".join(f"{s}\t{i % 2}\n" for i, s in enumerate(sentences))
    bare = "index\tsentence\n" + "".join(f"{i}\t{s}\n" for i, s in enumerate(sentences))
    (folder / "train.tsv").write_text(bare if unlabeled == "train" else labeled)
    (folder / "dev.tsv").write_text(bare if unlabeled == "dev" else labeled)
    with pytest.raises(DataError, match=rf"{unlabeled}.tsv, line 1, field 'label': expected a labeled file"):
        load_task_data(None, DataOptions(task="sst2", data=str(folder)))
    (folder / f"{unlabeled}.tsv").write_text(labeled)
    data = load_task_data(None, DataOptions(task="sst2", data=str(folder)))
    assert [ex.label for ex in data.train] == ["0", "1", "0", "1"]
