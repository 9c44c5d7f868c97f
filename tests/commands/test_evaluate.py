"""`bertforge evaluate` on a user's labelled file: the label-spelling rule (the same as fine-tuning's), flags that
do not go together, and the folders it cannot run."""
from __future__ import annotations

import json

import pytest

from bertforge.cli import main
from bertforge.tasks.predictor import Predictor
from needs import require_module
from predictor_folders import tiny_predictor

ROWS = [("a gripping , funny film", "pos"), ("it 's a bore", "neg"), ("not bad at all", "pos"),
        ("the plot goes nowhere", "neg"), ("an unexpected delight", "pos"), ("flat and dull", "neg")]


@pytest.fixture(scope="module")
def predictor(tmp_path_factory, minilm_dir):
    return tiny_predictor(tmp_path_factory.mktemp("clf"), minilm_dir, "classification", "sequence_classification",
                          ["neg", "pos"], seed=1)


def _evaluate(capsys, *argv: str) -> dict:
    assert main(["evaluate", *argv]) == 0
    out = capsys.readouterr().out
    return json.loads(out[out.index("{"):])


def test_labels_with_surrounding_spaces_score_like_clean_ones(predictor, tmp_path, capsys):
    """"pos " is "pos": the accuracy is the share of predictions equal to the stripped gold labels (computed here
    from `Predictor.predict`), not 0.000 for a label no prediction can match."""
    spaced = tmp_path / "dev.csv"
    spaced.write_text("text,label\n" + "".join(f'"{t}",{lab}{" " * (i % 3)}\n' for i, (t, lab) in enumerate(ROWS)))
    report = _evaluate(capsys, "--model", str(predictor), "--eval", str(spaced), "--device", "cpu")
    predicted = [r["label"] for r in Predictor.load(predictor, device="cpu").predict([t for t, _ in ROWS])]
    expected = sum(p == gold for p, (_, gold) in zip(predicted, ROWS)) / len(ROWS)
    assert report["eval"]["accuracy"] == pytest.approx(expected, abs=1e-12)


def test_labels_differing_only_by_case_are_refused(predictor, tmp_path, capsys):
    mixed = tmp_path / "dev.csv"
    mixed.write_text("text,label\n" + "".join(f'"{t}",{lab}\n' for t, lab in ROWS[:3]) + "meh,Pos\n")
    assert main(["evaluate", "--model", str(predictor), "--eval", str(mixed)]) == 1
    err = capsys.readouterr().err.strip()
    assert err == (f"bertforge evaluate: error: {mixed}, line 5, field 'label': expected one spelling per label, got "
                   "'Pos' here and 'pos' on line 2: labels that differ only by case would be two classes; write them "
                   "alike")


def test_split_and_eval_file_are_refused_together(predictor, tmp_path, capsys):
    dev = tmp_path / "dev.csv"
    dev.write_text("text,label\nfine,pos\n")
    assert main(["evaluate", "--model", str(predictor), "--eval", str(dev), "--split", "test"]) == 1
    assert "--split test picks a file of a --data folder; --eval" in capsys.readouterr().err
    assert main(["evaluate", "--model", str(predictor), "--data", str(tmp_path / "nowhere")]) == 1
    assert capsys.readouterr().err.strip().endswith(f"--data {tmp_path / 'nowhere'}: no such file or folder")


@pytest.mark.parametrize("verb", ["predict", "evaluate"])
def test_an_onnx_export_is_named_with_the_verbs_that_run_it(predictor, tmp_path, capsys, verb):
    """Not "no weights file": the folder is an export, `serve --backend onnx` runs it, and the folder it was
    exported from is named."""
    from needs import require_module
    require_module("onnx", hint="pip install 'bertforge[onnx]'")
    onnx_dir = tmp_path / "clf-onnx"
    assert main(["export", "--model", str(predictor), "--format", "onnx", "--output", str(onnx_dir)]) == 0
    dev = tmp_path / "dev.csv"
    dev.write_text("text,label\nfine,pos\n")
    argv = ["--text", "fine"] if verb == "predict" else ["--eval", str(dev)]
    capsys.readouterr()
    assert main([verb, "--model", str(onnx_dir), *argv]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"bertforge {verb}: error: {onnx_dir} is an ONNX export (model.onnx, no PyTorch weights)")
    assert f"`bertforge serve --model {onnx_dir} --backend onnx` runs it" in err
    assert f"(its onnx.json names {predictor.name!r})" in err


# ---- the per-class report and confusion matrix ----------------------------------------------------------------------
THREE = ["pos", "neu", "neg"]  # the task's label order, not sorted: a report in sorted order would differ


def test_evaluate_writes_the_per_class_report_of_the_predictors_own_answers(tmp_path, minilm_dir, capsys):
    """classification_report.json and confusion_matrix.csv equal plain counting over `Predictor.predict`'s answers
    on the same texts (rows = gold, columns = predicted, names in the task's order), a class never predicted is
    there with precision 0, and the printed table is sklearn's text report of those answers."""
    import csv

    import numpy as np
    sk = require_module("sklearn.metrics")
    folder = tiny_predictor(tmp_path / "three", minilm_dir, "classification", "sequence_classification", THREE,
                            seed=3)
    rows = [(t, THREE[i % 3]) for i, (t, _) in enumerate(ROWS * 3)]
    dev = tmp_path / "dev.csv"
    dev.write_text("text,label\n" + "".join(f'"{t}",{lab}\n' for t, lab in rows))
    out = tmp_path / "out"
    assert main(["evaluate", "--model", str(folder), "--eval", str(dev), "--device", "cpu", "--output", str(out)]) == 0
    printed = capsys.readouterr().out
    predicted = [r["label"] for r in Predictor.load(folder, device="cpu").predict([t for t, _ in rows])]
    gold = [lab for _, lab in rows]
    counted = np.array([[sum(g == a and p == b for g, p in zip(gold, predicted)) for b in THREE] for a in THREE])
    table = list(csv.reader((out / "confusion_matrix.csv").open(encoding="utf-8")))
    assert table[0][1:] == THREE and [r[0] for r in table[1:]] == THREE
    np.testing.assert_array_equal(np.array([[int(c) for c in r[1:]] for r in table[1:]]), counted)
    report = json.loads((out / "classification_report.json").read_text())
    assert list(report["per_class"]) == THREE
    for i, name in enumerate(THREE):
        hits, said, support = counted[i, i], counted[:, i].sum(), counted[i].sum()
        assert report["per_class"][name]["support"] == support
        assert report["per_class"][name]["precision"] == pytest.approx(hits / said if said else 0.0)
        assert report["per_class"][name]["recall"] == pytest.approx(hits / support)
    assert report["accuracy"] == pytest.approx(np.trace(counted) / len(rows))
    assert any(counted[:, i].sum() == 0 for i in range(3)), "the random head should leave a class unpredicted"
    expected = sk.classification_report(gold, predicted, labels=THREE, digits=4, zero_division=0)
    assert f"eval:\n{expected}" in printed
    assert (out / "confusion_matrix.png").stat().st_size > 1000


def test_a_regression_evaluation_writes_no_report(tmp_path, minilm_dir, capsys):
    folder = tiny_predictor(tmp_path / "reg", minilm_dir, "regression", "regression")
    dev = tmp_path / "dev.csv"
    dev.write_text("text,label\n" + "".join(f'"{t}",{i / 2}\n' for i, (t, _) in enumerate(ROWS)))
    out = tmp_path / "out"
    assert main(["evaluate", "--model", str(folder), "--eval", str(dev), "--device", "cpu", "--output", str(out)]) == 0
    assert "precision" not in capsys.readouterr().out
    assert (out / "metrics.json").is_file() and (out / "predictions.csv").is_file()
    assert not any((out / name).exists() for name in ("classification_report.json", "confusion_matrix.csv",
                                                      "confusion_matrix.png"))


# ---- --task sts / retrieval: sentence embeddings of any encoder folder ---------------------------------------------
STS_ROWS = [("a man plays a guitar", "a man is playing guitar", 4.8), ("a cat sleeps", "the stock market fell", 0.2),
            ("kids run in a park", "children are running outside", 4.1), ("a woman cooks", "a chef is cooking", 3.5),
            ("the sun is bright", "it is raining hard", 0.9), ("a dog barks", "a dog is barking loudly", 4.4),
            ("two men talk", "a plane takes off", 0.0), ("he reads a book", "a man is reading", 3.9)]
DOCS = {"d1": "the eiffel tower is in paris", "d2": "pandas eat bamboo in china", "d3": "the nile flows through egypt",
        "d4": "python is a programming language", "d5": "paris is the capital of france"}
QUERIES = {"q1": ("where is the eiffel tower", ["d1", "d5"]), "q2": ("what do pandas eat", ["d2"]),
           "q3": ("which river is in egypt", ["d3"]), "q4": ("a language for programs", ["d4"])}


@pytest.fixture(scope="module")
def encoder_folder(tiny_model, tmp_path_factory):
    """The tiny random encoder declared as a sentence-transformers model (mean pooling, normalised)."""
    import shutil

    from bertforge.tasks.embedding.pooling import Pooling
    out = tmp_path_factory.mktemp("st") / "model"
    shutil.copytree(tiny_model, out)
    Pooling("mean", True, 64).save(out, 32)
    return out


def test_sts_is_sentence_transformers_spearman_of_cosine(encoder_folder, tmp_path, capsys):
    from needs import require_module
    st = require_module("sentence_transformers")
    from sentence_transformers.sentence_transformer.evaluation import EmbeddingSimilarityEvaluator
    (tmp_path / "dev.tsv").write_text("sentence1\tsentence2\tscore\n" + "".join(f"{a}\t{b}\t{s}\n"
                                                                              for a, b, s in STS_ROWS))
    report = _evaluate(capsys, "--model", str(encoder_folder), "--task", "sts", "--data", str(tmp_path))
    evaluator = EmbeddingSimilarityEvaluator([a for a, _, _ in STS_ROWS], [b for _, b, _ in STS_ROWS],
                                             [s / 5 for _, _, s in STS_ROWS], main_similarity="cosine")
    expected = evaluator(st.SentenceTransformer(str(encoder_folder), device="cpu"))
    assert report["eval"]["spearman"] == pytest.approx(expected["spearman_cosine"], abs=1e-9)
    assert report["eval"]["pearson"] == pytest.approx(expected["pearson_cosine"], abs=1e-5)


def test_retrieval_is_sentence_transformers_information_retrieval_evaluator(encoder_folder, tmp_path, capsys):
    from needs import require_module
    st = require_module("sentence_transformers")
    from sentence_transformers.sentence_transformer.evaluation import InformationRetrievalEvaluator
    beir = tmp_path / "beir"
    (beir / "qrels").mkdir(parents=True)
    (beir / "corpus.jsonl").write_text("".join(json.dumps({"_id": d, "title": "", "text": t}) + "\n"
                                               for d, t in DOCS.items()))
    (beir / "queries.jsonl").write_text("".join(json.dumps({"_id": q, "text": t}) + "\n"
                                                for q, (t, _) in QUERIES.items()))
    (beir / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n" + "".join(
        f"{q}\t{d}\t1\n" for q, (_, docs) in QUERIES.items() for d in docs))
    assert main(["evaluate", "--model", str(encoder_folder), "--task", "retrieval", "--data", str(beir),
                 "--output", str(tmp_path / "out")]) == 0
    report = json.loads((tmp_path / "out" / "metrics.json").read_text())
    evaluator = InformationRetrievalEvaluator({q: t for q, (t, _) in QUERIES.items()}, DOCS,
                                              {q: set(d) for q, (_, d) in QUERIES.items()}, mrr_at_k=[10],
                                              ndcg_at_k=[10], accuracy_at_k=[1], precision_recall_at_k=[1, 10, 100],
                                              map_at_k=[10], show_progress_bar=False)
    expected = evaluator(st.SentenceTransformer(str(encoder_folder), device="cpu"))
    for ours, theirs in (("ndcg@10", "cosine_ndcg@10"), ("mrr@10", "cosine_mrr@10"), ("recall@1", "cosine_recall@1"),
                         ("recall@10", "cosine_recall@10")):
        assert report["eval"][ours] == pytest.approx(expected[theirs], abs=1e-9), ours
    assert capsys.readouterr().out.strip().endswith(f"wrote {tmp_path / 'out' / 'metrics.json'}")
    # the corpus vectors memory-mapped on disk and searched two documents at a time: the same scores
    on_disk = _evaluate(capsys, "--model", str(encoder_folder), "--task", "retrieval", "--data", str(beir),
                        "--vectors-dir", str(tmp_path / "vectors"), "--corpus-chunk", "2")
    for name in ("ndcg@10", "mrr@10", "recall@1", "recall@10", "recall@100"):
        assert on_disk["eval"][name] == pytest.approx(report["eval"][name], abs=1e-9), name
    assert [p.name for p in (tmp_path / "vectors").iterdir()] == []  # used, then removed
    assert main(["evaluate", "--model", str(encoder_folder), "--task", "sts", "--data", str(beir),
                 "--vectors-dir", str(tmp_path / "vectors")]) == 1
    assert "--vectors-dir is for --task retrieval" in capsys.readouterr().err
    # a split the folder does not have is named with the ones it has
    assert main(["evaluate", "--model", str(encoder_folder), "--task", "retrieval", "--data", str(beir),
                 "--split", "dev"]) == 1
    assert capsys.readouterr().err.strip() == (f"bertforge evaluate: error: {beir}: no qrels/dev.tsv; it has the "
                                               "splits test (--split)")
