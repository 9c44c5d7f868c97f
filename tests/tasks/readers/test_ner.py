"""NER records: the same CoNLL-2003 sentences as column text, JSON Lines, Parquet, Arrow and `datasets` folders."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from bertforge.tasks import CONLL2003_LABELS, TASKS, DataError
from bertforge.tasks.readers import read_ner
from record_files import record_copies

BLANK_LINES = 120  # how much of the real CoNLL-2003 valid file: its first 113 sentences


@pytest.fixture(scope="module")
def conll(shared_data: Path, tmp_path_factory) -> Path:
    """The first sentences of valid.txt, as published (column text with -DOCSTART- lines)."""
    lines, count = [], 0
    with open(shared_data / "conll2003" / "valid.txt", encoding="utf-8") as handle:
        for line in handle:
            lines.append(line)
            count += not line.strip()
            if count > BLANK_LINES:
                break
    path = tmp_path_factory.mktemp("conll") / "valid.conll"
    path.write_text("".join(lines), encoding="utf-8")
    return path


def _hub_layout(sentences) -> tuple[dict, object]:
    """The sentences as `datasets`' conll2003 has them: tokens, and ner_tags as ClassLabel ids."""
    import datasets
    features = datasets.Features({"id": datasets.Value("string"),
                                  "tokens": datasets.Sequence(datasets.Value("string")),
                                  "ner_tags": datasets.Sequence(datasets.ClassLabel(names=CONLL2003_LABELS))})
    columns = {"id": [str(i) for i in range(len(sentences))], "tokens": [list(s.words) for s in sentences],
               "ner_tags": [[CONLL2003_LABELS.index(t) for t in s.tags] for s in sentences]}
    return columns, features


def _read(result) -> list[tuple]:
    return [(s.guid, s.words, s.tags) for s in result]


def test_conll_sentences_read_alike_in_every_record_format(conll: Path, tmp_path: Path, minilm_dir: Path) -> None:
    """Tag ids are names once read: the same examples, label list and features from text, strings and ids."""
    from bertforge.tasks.features import encode_ner
    from bertforge.tokenization import BertTokenizer
    want = read_ner(conll)
    assert len(want) == 113 and "B-MISC" in want.labels
    columns, features = _hub_layout(want)
    with_ids = record_copies(tmp_path / "ids", columns, features, name="valid")
    as_names = record_copies(tmp_path / "names", {"tokens": columns["tokens"], "ner_tags": [list(s.tags) for s in want]},
                             name="valid", plain=True)
    jsonl = tmp_path / "valid.jsonl"
    jsonl.write_text("".join(json.dumps({"words": s.words, "tags": s.tags}) + "\n" for s in want), encoding="utf-8")
    tokenizer = BertTokenizer.from_pretrained(minilm_dir)
    label2id = {label: i for i, label in enumerate(want.labels)}
    want_features = encode_ner(tokenizer, want.examples, 64, label2id)
    for path in [*with_ids, *as_names, jsonl]:
        got = read_ner(path)
        assert _read(got) == _read(want) and got.labels == want.labels, path
        assert [s.line for s in got] == list(range(1, len(want) + 1))  # rows (lines), numbered from 1
        if path == with_ids[0]:
            assert encode_ner(tokenizer, got.examples, 64, label2id) == want_features, path
    named = TASKS["conll2003"].reader(with_ids[2])  # the named task reads the `datasets` layout too
    assert _read(named) == _read(want) and named.labels == CONLL2003_LABELS


def test_tag_ids_follow_the_names_of_the_file_and_need_them(tmp_path: Path) -> None:
    import datasets
    features = datasets.Features({"tokens": datasets.Sequence(datasets.Value("string")),
                                  "ner_tags": datasets.Sequence(datasets.ClassLabel(names=["O", "B-DRUG", "I-DRUG"]))})
    parquet, arrow, saved = record_copies(tmp_path, {"tokens": [["Aspirin", "helps"]], "ner_tags": [[1, 0]]}, features)
    for path in (parquet, arrow, saved):
        assert read_ner(path)[0].tags == ("B-DRUG", "O"), path
    bare, _, _ = record_copies(tmp_path / "bare", {"tokens": [["Aspirin", "helps"]], "ner_tags": [[1, 0]]}, plain=True)
    with pytest.raises(DataError, match=r"t.parquet, row 1, field 'ner_tags': expected tag names \(integer tag ids "
                                        r"need their names in the file's features"):
        read_ner(bare)
    import pyarrow as pa
    import pyarrow.parquet as pq
    metadata = pq.read_schema(parquet).metadata  # the names of 3 tags, and an id past them
    pq.write_table(pa.table({"tokens": [["Aspirin"]], "ner_tags": [[3]]}).replace_schema_metadata(metadata),
                   tmp_path / "range.parquet")
    with pytest.raises(DataError, match=r"range.parquet, row 1, field 'ner_tags': expected tag ids 0-2"):
        read_ner(tmp_path / "range.parquet")


def test_bad_ner_records_name_file_row_and_field(tmp_path: Path) -> None:
    rows = {"tokens": [["Ann", "sang"], ["Bob"], ["Eve", "ran"]],
            "ner_tags": [["B-PER", "O"], ["B-PER", "O"], ["B-PER", "O"]]}
    for path in record_copies(tmp_path, rows, plain=True):
        with pytest.raises(DataError, match=rf"{path.name}, row 2, field 'ner_tags': expected one tag per token \(1\)"):
            read_ner(path)
        result = read_ner(path, skip_bad_rows=True)
        assert [s.words for s in result] == [("Ann", "sang"), ("Eve", "ran")] and result.skipped == 1
        assert result.skipped_samples[0].line == 2
    text = tmp_path / "text"
    parquet, _, _ = record_copies(text, {"tokens": ["Ann sang", "Bob"], "ner_tags": [["B-PER", "O"], ["B-PER"]]},
                                  plain=True)
    with pytest.raises(DataError, match=r"t.parquet, row 1, field 'tokens': expected a list of non-empty strings, "
                                        r"got 'Ann sang'"):
        read_ner(parquet)
    with pytest.raises(DataError, match=r"t.parquet, field 'words': expected a column 'words' \(the tokens of each "
                                        r"sentence\), got \['tokens', 'ner_tags'\]"):
        read_ner(parquet, text_column="words")
    with pytest.raises(DataError, match=r"t.parquet, field 'tags': expected a column named one of \['tags', "
                                        r"'ner_tags', 'labels'\]"):
        read_ner(record_copies(tmp_path / "untagged", {"tokens": [["Ann"]]}, plain=True)[0])
    broken = tmp_path / "broken.parquet"
    broken.write_bytes(parquet.read_bytes()[:200])
    with pytest.raises(ValueError, match=r"broken.parquet: expected a readable Parquet file, got"):
        read_ner(broken)


def test_a_dataset_dict_folder_is_a_data_folder(tmp_path: Path) -> None:
    """`--data` a saved DatasetDict: its train/ and validation/ splits are the train and dev files."""
    import datasets

    from bertforge.tasks.task_data import DataOptions, load_task_data
    split = {"train": {"tokens": [["Ann", "sang"], ["Bob", "ran"]], "ner_tags": [["B-PER", "O"], ["B-PER", "O"]]},
             "validation": {"tokens": [["Eve", "ran"]], "ner_tags": [["B-PER", "O"]]}}
    datasets.disable_progress_bars()
    datasets.DatasetDict({k: datasets.Dataset.from_dict(v) for k, v in split.items()}).save_to_disk(str(tmp_path / "d"))
    data = load_task_data(None, DataOptions(task="ner", data=str(tmp_path / "d")))
    assert [s.words for s in data.train] == [("Ann", "sang"), ("Bob", "ran")]
    assert [s.words for s in data.evals["eval"]] == [("Eve", "ran")]
    assert data.files == {"train": str(tmp_path / "d" / "train"), "eval": str(tmp_path / "d" / "validation")}
