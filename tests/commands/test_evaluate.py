"""`bertforge evaluate` on a user's labelled file: the label-spelling rule (the same as fine-tuning's), flags that
do not go together, and the folders it cannot run."""
from __future__ import annotations

import json

import pytest

from bertforge.cli import main
from bertforge.tasks.predictor import Predictor
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
