"""Finding inputs (files, folders, globs, `datasets` folders) and reading rows out of record files."""
from __future__ import annotations

import json

import pytest

from bertforge.data.records import RecordError, expand_inputs, input_kind, iter_rows

from needs import require_module


def test_files_folders_and_globs_expand_in_sorted_order(tmp_path):
    (tmp_path / "a").mkdir()
    for name in ("a/2.jsonl", "a/1.txt.gz", "a/.hidden.txt", "b.parquet", "c.csv", "d.tsv", "e.arrow"):
        (tmp_path / name).write_bytes(b"")
    (tmp_path / "a" / "saved").mkdir()
    (tmp_path / "a" / "saved" / "state.json").write_text("{}")
    (tmp_path / "a" / "saved" / "data-00000-of-00001.arrow").write_bytes(b"")
    found = expand_inputs([tmp_path / "a", str(tmp_path / "*.[ct]sv"), tmp_path / "b.parquet", tmp_path / "e.arrow"])
    assert [(p.relative_to(tmp_path).as_posix(), kind) for p, kind in found] == [
        ("a/1.txt.gz", "text"), ("a/2.jsonl", "jsonl"), ("a/saved", "datasets"), ("c.csv", "csv"), ("d.tsv", "tsv"),
        ("b.parquet", "parquet"), ("e.arrow", "arrow")]
    with pytest.raises(FileNotFoundError, match=r"\*.xml: no file matches"):
        expand_inputs([str(tmp_path / "*.xml")])
    with pytest.raises(FileNotFoundError, match="missing.txt"):
        expand_inputs([tmp_path / "missing.txt"])


def test_a_dataset_dict_folder_asks_for_one_split(tmp_path):
    (tmp_path / "dataset_dict.json").write_text(json.dumps({"splits": ["train", "test"]}))
    with pytest.raises(RecordError, match=r"expected one split of a `datasets` folder, got a DatasetDict with splits "
                                          r"\['train', 'test'\]: give one of them, e.g. .*/train"):
        input_kind(tmp_path)


def test_csv_quoting_tsv_and_row_places(tmp_path):
    (tmp_path / "a.csv").write_text('id,text\n1,"two\nlines, one field"\n2,short\n3\n', encoding="utf-8")
    rows = list(iter_rows(tmp_path / "a.csv", "csv", ["text"]))
    assert rows[:2] == [("line 2", {"id": "1", "text": "two\nlines, one field"}), ("line 4", {"id": "2", "text": "short"})]
    assert str(rows[2][1]) == f"{tmp_path / 'a.csv'}, line 5: expected 2 fields (id, text), got 1"
    (tmp_path / "a.tsv").write_text("label\tsentence\n0\tit \"is\" fine\n", encoding="utf-8")
    assert list(iter_rows(tmp_path / "a.tsv", "tsv")) == [("line 2", {"label": "0", "sentence": 'it "is" fine'})]
    with pytest.raises(RecordError, match=r"a.tsv, line 1, field 'text': expected a column 'text' in the header, "
                                          r"got columns label, sentence"):
        list(iter_rows(tmp_path / "a.tsv", "tsv", ["text"]))


def test_arrow_ipc_file_and_stream_are_read_in_batches(tmp_path, monkeypatch):
    pa = require_module("pyarrow", "pip install 'bertforge[data]'")
    from bertforge.data import records
    monkeypatch.setattr(records, "BATCH_ROWS", 3)
    table = pa.table({"text": [f"row {i}" for i in range(10)], "n": list(range(10))})
    with pa.OSFile(str(tmp_path / "f.arrow"), "wb") as sink, pa.ipc.new_file(sink, table.schema) as writer:
        writer.write_table(table)
    with pa.OSFile(str(tmp_path / "s.arrow"), "wb") as sink, pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table, max_chunksize=4)
    for name in ("f.arrow", "s.arrow"):
        seen = []
        rows = list(iter_rows(tmp_path / name, "arrow", ["text"], progress=seen.append))
        assert rows == [(f"row {i + 1}", {"text": f"row {i}"}) for i in range(10)]
        assert sum(seen) == (tmp_path / name).stat().st_size


@pytest.mark.parametrize("kind", ["csv", "tsv", "jsonl", "parquet"])
def test_a_column_named_twice_is_refused_not_read_as_the_last(tmp_path, kind):
    """Two `text` columns: taking either silently reads the wrong one (prepare once made 400 one-token documents
    of a table's second `text`); the file is refused naming the column, or for JSON Lines the row."""
    path = tmp_path / f"docs.{kind}"
    if kind == "csv":
        path.write_text("text,id,text\na whole paragraph of text,1,x\n")
    elif kind == "tsv":
        path.write_text("text\tid\ttext\na whole paragraph of text\t1\tx\n")
    elif kind == "jsonl":
        path.write_text('{"text": "a whole paragraph of text", "id": 1, "text": "x"}\n')
    else:
        pa = require_module("pyarrow")
        pq = require_module("pyarrow.parquet")
        pq.write_table(pa.table([pa.array(["a whole paragraph of text"]), pa.array([1]), pa.array(["x"])],
                                names=["text", "id", "text"]), path)
    if kind == "jsonl":
        [(place, row)] = list(iter_rows(path, kind, ["text"]))
        assert isinstance(row, RecordError) and str(row) == (f"{path}, line 1, field 'text': expected each key once in "
                                                             "an object, got 'text' twice")
        return
    with pytest.raises(RecordError, match=r"field 'text': expected each column name once in the (header|schema), "
                                          r"got 'text' as columns 1 and 3 \(rename one of them\)"):
        list(iter_rows(path, kind, ["text"]))


def test_a_dataset_dict_json_that_is_no_object_is_named(tmp_path):
    folder = tmp_path / "dd"
    (folder / "train").mkdir(parents=True)
    (folder / "dataset_dict.json").write_text('["train", "test"]')
    with pytest.raises(RecordError, match=r"dataset_dict.json: expected a JSON object \{\"splits\": \[\.\.\.\]\}, got "
                                          r"list"):
        input_kind(folder)
    (folder / "dataset_dict.json").write_text('{"splits": ["train", "test"]}')
    with pytest.raises(RecordError, match=r"a DatasetDict with splits \['train', 'test'\]: give one of them"):
        input_kind(folder)
