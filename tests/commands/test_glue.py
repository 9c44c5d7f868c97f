"""`bertforge glue` on the command line: a short suite on the real MiniLM weights that learns, its three files,
and `--compare`."""
from __future__ import annotations

import csv
import json

import pytest

from bertforge.cli import main

PNG = b"\x89PNG\r\n\x1a\n"


def test_flags_are_checked_before_any_work(tmp_path, capsys):
    assert main(["glue", "--output", str(tmp_path / "o")]) == 1
    assert "bertforge glue: error: --model is required" in capsys.readouterr().err
    assert main(["glue", "--compare", __file__, "--output", str(tmp_path / "x.pdf")]) == 1
    assert "expected a .png file name" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


@pytest.mark.slow
def test_minilm_learns_sst2_and_the_files_agree(minilm_dir, shared_data, tmp_path, capsys):
    """all-MiniLM-L6-v2 on 400 SST-2 train sentences (2 epochs in batches of 16, the cpu protocol's lr), scored on
    the whole dev set; WNLI as its majority class, outside the average."""
    out = tmp_path / "minilm"
    code = main(["glue", "--model", str(minilm_dir), "--data", str(shared_data / "glue"), "--output", str(out),
                 "--tasks", "sst2,wnli", "--protocol", "cpu", "--max-train-samples", "400", "--epochs", "2",
                 "--batch-size", "16", "--keep-predictors", "--name", "MiniLM-L6", "--no-progress"])
    printed = capsys.readouterr().out
    assert code == 0, printed
    result = json.loads((out / "glue.json").read_text())
    sst2 = result["tasks"]["sst2"]
    with open(shared_data / "glue" / "SST-2" / "dev.tsv", encoding="utf-8", newline="") as handle:
        dev = list(csv.reader(handle, delimiter="\t", quoting=csv.QUOTE_NONE))[1:]
    gold = [int(label) for _, label in dev]
    floor = 100 * gold.count(1) / len(gold)  # the train set's majority class is 1 (37,569 of 67,349)
    assert sst2["majority"]["metrics"]["accuracy"] == pytest.approx(floor)
    assert sst2["metrics"]["accuracy"] > floor + 10  # it learned: far above answering "positive" every time
    # the number is scikit-learn's accuracy of the kept predictor on the whole dev set
    from sklearn.metrics import accuracy_score

    from bertforge.tasks.predictor import Predictor
    predictor = Predictor.load(out / "units" / "sst2" / "seed42-lr0.0001" / "run")
    predicted = [int(a["label"]) for a in predictor.predict([text for text, _ in dev])]
    assert sst2["metrics"]["accuracy"] == pytest.approx(100 * accuracy_score(gold, predicted))
    assert sst2["dev_examples"] == {"dev": 872} and sst2["runs"][0]["train_examples"] == 400
    # glue.json, glue.md, the printed table and glue.png say the same
    assert result["average"] == pytest.approx(sst2["score"]) and result["average_over"] == ["sst2"]
    row = f"| MiniLM-L6 | {sst2['metrics']['accuracy']:.1f} | {100 * 40 / 71:.1f}* | {result['average']:.1f} |"
    assert row in (out / "glue.md").read_text().splitlines() and row in printed.splitlines()
    assert "bertforge glue --model" in (out / "glue.md").read_text()
    assert (out / "glue.png").read_bytes().startswith(PNG)

    # --compare: this result beside a copy under another name
    other = json.loads((out / "glue.json").read_text())
    other["name"], other["tasks"]["sst2"]["score"] = "copy", 50.0
    (tmp_path / "other.json").write_text(json.dumps(other))
    png = tmp_path / "both.png"
    assert main(["glue", "--compare", str(out / "glue.json"), str(tmp_path / "other.json"), "--output", str(png)]) == 0
    assert png.read_bytes().startswith(PNG)
    table = png.with_suffix(".md").read_text()
    assert row in table.splitlines() and "| copy |" in table
    assert main(["glue", "--compare", str(out / "glue.json"), "--output", str(png)]) == 1  # never replaced silently
    assert "exists; use --overwrite" in capsys.readouterr().err
