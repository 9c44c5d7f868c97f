"""Which `.txt` files are tables (`sniff_delimiter`) and the `--delimiter` value."""
from __future__ import annotations

import pytest

from bertforge.settings import SettingError
from bertforge.tasks.readers.generic import TEXT_ALIASES
from bertforge.tasks.readers.rows import parse_delimiter, sniff_delimiter, table_format


@pytest.mark.parametrize("first, expected", [
    ("text;label_name", ";"), ("text,label", ","), ("sentence\tlabel", "\t"), ("label|text", "|"),
    ("\ufefftext;label", ";"), ("id;text;label", ";"),
    ("text", None), ("i feel great; really", None), ("hello,world", None), ("text; is what i wrote", None),
    ("", None)])
def test_a_header_naming_a_text_column_makes_a_table(tmp_path, first, expected):
    path = tmp_path / "data.txt"
    path.write_text(first + "\nsecond line;x\n", encoding="utf-8")
    assert sniff_delimiter(path, TEXT_ALIASES) == expected


def test_table_format(tmp_path):
    table, lines = tmp_path / "t.txt", tmp_path / "l.txt"
    table.write_text("text;label\na;b\n", encoding="utf-8")
    lines.write_text("just a text\n", encoding="utf-8")
    assert table_format(table, None, None, TEXT_ALIASES) == ("csv", ";")
    assert table_format(lines, None, None, TEXT_ALIASES) == (None, None)
    assert table_format(lines, None, "|", TEXT_ALIASES) == ("csv", "|")  # told: no sniffing
    assert table_format(tmp_path / "g.tsv", "tsv", "\t", TEXT_ALIASES) == ("tsv", None)  # GLUE's unquoted TSV
    with pytest.raises(SettingError, match=r"--delimiter splits .csv, .tsv and .txt tables; .*x.jsonl is a jsonl"):
        table_format(tmp_path / "x.jsonl", "jsonl", ";", TEXT_ALIASES)


def test_parse_delimiter():
    assert [parse_delimiter(v) for v in (";", "|", "tab", "\\t", "\t")] == [";", "|", "\t", "\t", "\t"]
    for bad in ("", ";;", '"', "a"):
        with pytest.raises(ValueError, match="expected one separator character"):
            parse_delimiter(bad)
