"""SWAG records: the swagaf CSV and the same rows in the `datasets` swag layout (integer labels) read alike."""
from __future__ import annotations

import csv
from pathlib import Path

import pytest

from bertforge.tasks import DataError, read_swag
from record_files import record_copies

COLUMNS = ["video-id", "fold-ind", "startphrase", "sent1", "sent2", "gold-source", "ending0", "ending1", "ending2",
           "ending3", "label"]
ROWS = [["lsmdc3001_21_JUMP_STREET-422", "5", "Students lower their eyes nervously. She",
         "Students lower their eyes nervously.", "She", "gold", "pats her shoulder, then saunters off.",
         "turns with two students.", "walks slowly towards someone.", "wheels around.", 0],
        ["anetv_jkn6uvmqwh4", "12", "He rides the bike. He", "He rides the bike.", "He", "gen", "stops.", "falls.",
         '"waves" at us.', "smiles.", 2]]


def _examples(result) -> list[tuple]:
    return [(ex.guid, ex.context, ex.start, ex.endings, ex.label, ex.video_id) for ex in result]


def test_swag_records_read_like_the_csv(tmp_path: Path) -> None:
    import datasets
    with open(tmp_path / "val.csv", "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow([""] + COLUMNS)
        writer.writerows([i, *row] for i, row in enumerate(ROWS))
    want = read_swag(tmp_path / "val.csv")
    columns = {name: [row[i] for row in ROWS] for i, name in enumerate(COLUMNS)}
    features = datasets.Features({**{name: datasets.Value("string") for name in COLUMNS[:-1]},
                                  "label": datasets.ClassLabel(names=["0", "1", "2", "3"])})
    for path in record_copies(tmp_path, columns, features, name="val"):
        got = read_swag(path)
        assert _examples(got) == _examples(want) and got.labels == want.labels, path
        assert [ex.line for ex in got] == [1, 2]
    bad = dict(columns, label=[0, 4], ending2=["walks.", None])
    for path in record_copies(tmp_path / "bad", bad, plain=True):
        with pytest.raises(DataError, match=rf"{path.name}, row 2, field 'label': expected an ending index 0-3, got 4"):
            read_swag(path)
        kept = read_swag(path, skip_bad_rows=True)
        assert [ex.label for ex in kept] == [0] and kept.skipped == 1
    unlabeled = record_copies(tmp_path / "test", {k: v for k, v in columns.items() if k != "label"}, plain=True)[0]
    assert [ex.label for ex in read_swag(unlabeled)] == [None, None]
    with pytest.raises(DataError, match=r"t.parquet, field 'label': expected a labeled file"):
        read_swag(unlabeled, labeled=True)
    with pytest.raises(DataError, match=r"t.parquet, field 'sent2': expected a column 'sent2'"):
        read_swag(record_copies(tmp_path / "short", {"sent1": ["A"], "label": [1]}, plain=True)[0])
