"""tools/data_facts.py measures what the docs cite about the data and the installs: the emotion set's surprise
share (counted here with the csv module) as the published record, and folder sizes as `du` counts them."""
from __future__ import annotations

import csv
import importlib.util
import os
import sys
from pathlib import Path

import pytest

from published_records import assert_published

REPO_ROOT = Path(__file__).resolve().parents[2]


def _tool():
    spec = importlib.util.spec_from_file_location("data_facts", REPO_ROOT / "tools" / "data_facts.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_the_surprise_share_is_the_published_record(shared_data, tmp_path):
    path = shared_data / "emotion" / "train.txt"
    with open(path, encoding="utf-8", newline="") as handle:
        labels = [row["label_name"] for row in csv.DictReader(handle, delimiter=";", quoting=csv.QUOTE_NONE)]
    assert _tool().main(["--emotion", str(path), "--records", str(tmp_path)]) == 0
    written = assert_published(tmp_path, "data-facts/emotion/")
    record = written["data-facts/emotion/surprise-share"]
    assert record.value == pytest.approx(100 * labels.count("surprise") / len(labels), rel=1e-12)
    assert f"({labels.count('surprise'):,} of {len(labels):,})" in record.what


def test_each_venv_writes_its_published_record():
    from bertforge.results_store import read_store
    published = {rid: r for rid, r in read_store().records.items() if rid.startswith("data-facts/install/")}
    venvs = _tool().VENVS.values()
    assert {f"data-facts/install/{v.record}": v.what for v in venvs} == {rid: r.what for rid, r in published.items()}
    assert {r.command for r in published.values()} == {f"python tools/data_facts.py --venvs {v.name}" for v in venvs}


def test_a_folder_size_counts_a_hard_linked_file_once(tmp_path):
    folder = tmp_path / "v"
    folder.mkdir()
    (folder / "a.bin").write_bytes(os.urandom(1 << 20))
    tool = _tool()
    alone = tool.folder_size(folder)
    os.link(folder / "a.bin", folder / "b.bin")  # pip's wheels share nothing, but a venv may hold links
    assert tool.folder_size(folder) == alone
    (folder / "c.bin").write_bytes(os.urandom(1 << 20))
    assert tool.folder_size(folder) - alone == (folder / "c.bin").stat().st_blocks * 512


def test_an_unknown_venv_is_named(capsys):
    with pytest.raises(SystemExit) as exit_info:
        _tool().main(["--venvs", "cpu-serve,gpu"])
    assert exit_info.value.code == 2
    assert "--venvs: unknown gpu; expected some of cpu-serve, cpu-serve-onnx, cuda" in capsys.readouterr().err
