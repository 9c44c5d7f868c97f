"""The GLUE rows against the real task files, and a GLUE-like task added as one row reaching every table."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from bertforge.tasks import GLUE, get_task, read_glue

REPO = Path(__file__).resolve().parents[2]


def _header(path: Path) -> list[str]:
    with path.open(encoding="utf-8") as f:
        return f.readline().rstrip("\r\n").split("\t")


@pytest.mark.parametrize("name", [n for n in GLUE if n not in ("qqp", "mnli")])
def test_row_names_the_real_files_columns_and_labels(shared_data: Path, name: str) -> None:
    """Each row's folder, columns and labels are those of the task's real files: a misspelt column, a label
    missing from the list or a wrong folder in a row fails here (QQP and MNLI are not in ../shared/data)."""
    row, spec = GLUE[name], get_task(name)
    folder = shared_data / "glue" / row.display
    assert spec.folder == f"glue/{row.display}" and spec.labels == row.labels
    splits = [s for s in ("train.tsv", *row.dev) if (folder / s).exists()]
    assert splits, folder
    for split in splits:
        path = folder / split
        fmt = row.format
        if fmt.headerless:
            assert len(_header(path)) == len(fmt.headerless)
        else:
            named = [fmt.text, fmt.label] + ([fmt.pair] if fmt.pair else [])
            assert set(named) <= set(_header(path)), (path, named)
        examples = read_glue(name, path)
        assert examples.skipped == 0 and len(examples) > 0
        if row.labels is None:
            low, high = fmt.score_range
            assert all(low <= float(ex.label) <= high for ex in examples)
        else:
            counts = Counter(ex.label for ex in examples)
            assert set(counts) <= set(row.labels)
            if split == "train.tsv":
                assert set(counts) == set(row.labels)  # every class of the row occurs in training


NEW_ROW = '''
GLUE["boolq"] = GlueTask("boolq", "BoolQ", GlueFormat("question", "passage", "label", ("False", "True")),
                         ("f1", "accuracy"), "f1")
'''

CHECK = '''
import sys
from pathlib import Path
from bertforge.ablation.tables import COLUMNS
from bertforge.evaluation.report import header_cell
from bertforge.evaluation.scores import AVERAGED, DISPLAY, METRICS, GLUE_TASKS, official_metrics, task_score
from bertforge.tasks import get_task
spec = get_task("BoolQ")
assert spec.folder == "glue/BoolQ" and spec.labels == ("False", "True") and spec.main_metric == "f1", spec
rows = spec.reader(Path(sys.argv[1]))
assert [(ex.text, ex.text_pair, ex.label) for ex in rows] == [("is it", "it is", "True"), ("is it not", "no", "False"),
                                                             ("so", "yes", "True")], rows
gold = [spec.labels.index(ex.label) for ex in rows]  # label ids, as fine-tuning scores them
metrics = official_metrics("boolq", [1, 1, 1], gold)
assert list(metrics) == ["f1", "accuracy"] and abs(metrics["accuracy"] - 200 / 3) < 1e-9, metrics
assert abs(metrics["f1"] - 80.0) < 1e-9 and abs(task_score("boolq", metrics) - (80 + 200 / 3) / 2) < 1e-9
assert GLUE_TASKS[-1] == "boolq" and "boolq" in AVERAGED and DISPLAY["boolq"] == "BoolQ"
assert METRICS["boolq"] == ("f1", "accuracy") and header_cell("boolq") == "BoolQ (F1/acc)"
assert ("glue_boolq", "BoolQ (GLUE)", "{:.1f}") in COLUMNS
print("ok")
'''


def test_a_glue_like_task_is_one_row(tmp_path: Path) -> None:
    """A row appended to tasks/glue_tasks.py (and nothing else) gives the registry, the reader, the official
    metrics, the scores, the report and the ablation columns the new task: a table kept apart from the rows
    fails here."""
    src = tmp_path / "src"
    shutil.copytree(REPO / "src" / "bertforge", src / "bertforge", ignore=shutil.ignore_patterns("__pycache__"))
    rows = src / "bertforge" / "tasks" / "glue_tasks.py"
    text = rows.read_text(encoding="utf-8")
    at = text.index("\n\ndef glue_task(")
    rows.write_text(text[:at] + "\n" + NEW_ROW + text[at:], encoding="utf-8")
    data = tmp_path / "dev.tsv"
    data.write_text("idx\tquestion\tpassage\tlabel\n0\tis it\tit is\tTrue\n1\tis it not\tno\tFalse\n"
                    "2\tso\tyes\tTrue\n", encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(src)}
    done = subprocess.run([sys.executable, "-c", CHECK, str(data)], env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-3000:]
