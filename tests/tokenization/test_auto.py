"""`load_tokenizer` on a path that is not a tokenizer folder: the message says what the path is."""
from __future__ import annotations

import pytest

from bertforge.tokenization import load_tokenizer


def test_a_file_is_named_as_a_file_and_a_missing_path_as_missing(tmp_path):
    text = tmp_path / "texts.txt"
    text.write_text("hello\n")
    with pytest.raises(NotADirectoryError, match=r"texts.txt is a file; expected a model or tokenizer folder"):
        load_tokenizer(text)
    with pytest.raises(FileNotFoundError, match=r"nope: no such tokenizer folder"):
        load_tokenizer(tmp_path / "nope")
