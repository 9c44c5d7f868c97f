"""`bertforge.folder_files`: a folder's file is read only if it is a regular file inside the folder, within its
size bound; every refusal is one FolderFileError naming the file and what was expected."""
from __future__ import annotations

import os

import pytest

from bertforge.folder_files import (
    VOCAB_MAX_BYTES,
    FolderFileError,
    check_folder_dir,
    check_folder_file,
    copy_folder_file,
    folder_has,
    open_folder_file,
    read_folder_bytes,
    read_folder_json,
    read_folder_text,
)

from hostile_files import fifo, sparse_file, zero_device_link


@pytest.fixture
def folder(tmp_path):
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "vocab.txt").write_bytes(b"[PAD]\r\n[UNK]\n")
    (tmp_path / "elsewhere.txt").write_text("a file outside the folder\n")
    return tmp_path / "model"


def test_regular_files_and_links_inside_the_folder_are_read(folder):
    (folder / "sub").mkdir()
    (folder / "sub" / "real.txt").write_text("x")
    (folder / "link.txt").symlink_to("sub/real.txt")
    assert read_folder_bytes(folder, "vocab.txt", 100) == b"[PAD]\r\n[UNK]\n"  # bytes as they are
    assert read_folder_text(folder, "vocab.txt", 100) == "[PAD]\r\n[UNK]\n"
    assert read_folder_text(folder, "link.txt", 1) == "x"
    assert read_folder_text(folder, "sub/real.txt", 1) == "x"
    assert check_folder_file(folder, "link.txt", 1) == (folder / "sub" / "real.txt").resolve()
    with open_folder_file(folder, "vocab.txt", 100) as handle:
        assert handle.read(5) == b"[PAD]"
    # a folder reached through a link is still that folder
    (folder.parent / "alias").symlink_to(folder)
    assert read_folder_text(folder.parent / "alias", "link.txt", 1) == "x"


def test_a_file_at_the_bound_is_read_one_byte_more_is_refused(folder):
    size = (folder / "vocab.txt").stat().st_size
    assert len(read_folder_bytes(folder, "vocab.txt", size)) == size
    with pytest.raises(FolderFileError, match=rf"vocab.txt has {size} bytes; expected at most {size - 1} bytes"):
        read_folder_bytes(folder, "vocab.txt", size - 1)


def test_link_out_of_the_folder_is_refused(folder):
    (folder / "config.json").symlink_to(folder.parent / "elsewhere.txt")
    (folder / "up.txt").symlink_to("../elsewhere.txt")
    for name in ("config.json", "up.txt"):
        with pytest.raises(FolderFileError) as err:
            read_folder_text(folder, name, 1000)
        assert str(err.value) == (f"{folder / name} is a link to {(folder.parent / 'elsewhere.txt').resolve()}, "
                                  f"outside the folder {folder.resolve()}; expected a file inside the folder")


def test_fifo_is_refused_without_blocking(folder):
    with fifo(folder / "vocab.json"):
        assert folder_has(folder, "vocab.json")
        for read in (read_folder_bytes, read_folder_text, open_folder_file):
            with pytest.raises(FolderFileError, match=r"vocab.json is a FIFO \(named pipe\); expected a regular file"):
                read(folder, "vocab.json", VOCAB_MAX_BYTES)


def test_link_to_dev_zero_is_refused(folder):
    zero_device_link(folder / "tokenizer.json")
    with pytest.raises(FolderFileError, match=r"tokenizer.json is a character device \(a link to /dev/zero\); "
                                              "expected a regular file"):
        read_folder_bytes(folder, "tokenizer.json", VOCAB_MAX_BYTES)


def test_oversized_file_is_refused_before_it_is_read(folder):
    sparse_file(folder / "merges.txt", VOCAB_MAX_BYTES + 1)
    with pytest.raises(FolderFileError, match=r"merges.txt has 32.0 MB; expected at most 32.0 MB for this file"):
        read_folder_text(folder, "merges.txt", VOCAB_MAX_BYTES)


def test_folder_dangling_and_looping_links_and_missing_files(folder):
    (folder / "spiece.model").mkdir()
    (folder / "gone.txt").symlink_to(folder / "never-there")
    (folder / "a").symlink_to("b")
    (folder / "b").symlink_to("a")
    cases = {"spiece.model": "spiece.model is a folder; expected a regular file",
             "gone.txt": "gone.txt is a link to .*never-there, which does not exist",
             "a": "a is a symbolic link that loops"}
    for name, message in cases.items():
        assert folder_has(folder, name)
        with pytest.raises(FolderFileError, match=message):
            read_folder_bytes(folder, name, 100)
    assert not folder_has(folder, "missing.txt")
    with pytest.raises(FileNotFoundError, match="missing.txt: no such file"):
        read_folder_bytes(folder, "missing.txt", 100)


def test_text_that_is_not_utf8_names_the_line(folder):
    (folder / "merges.txt").write_bytes(b"#version: 0.2\na b\ncaf\xe9 x\n")
    with pytest.raises(FolderFileError, match=r"merges.txt: not valid UTF-8 at line 3 \(byte 0xe9"):
        read_folder_text(folder, "merges.txt", 100)


def test_hugging_face_cache_snapshot_reads_its_blobs_only(tmp_path):
    """The hub cache's snapshot folders link every file to the repository's blobs folder, and nowhere else."""
    repo = tmp_path / "models--org--name"
    (repo / "blobs").mkdir(parents=True)
    (repo / "blobs" / "4c3e1d").write_text("[PAD]\n")
    (repo / "outside").write_text("no\n")
    snapshot = repo / "snapshots" / "0123abcd"
    snapshot.mkdir(parents=True)
    (snapshot / "vocab.txt").symlink_to(os.path.join("..", "..", "blobs", "4c3e1d"))
    (snapshot / "merges.txt").symlink_to(os.path.join("..", "..", "outside"))
    assert read_folder_text(snapshot, "vocab.txt", 100) == "[PAD]\n"
    with pytest.raises(FolderFileError, match="outside the folder"):
        read_folder_text(snapshot, "merges.txt", 100)


def test_copy_reads_what_a_loader_reads_and_nothing_outside(folder, tmp_path):
    copy_folder_file(folder, "vocab.txt", tmp_path / "copy.txt", VOCAB_MAX_BYTES)
    assert (tmp_path / "copy.txt").read_bytes() == b"[PAD]\r\n[UNK]\n"
    (folder / "merges.txt").symlink_to(tmp_path / "elsewhere.txt")
    with pytest.raises(FolderFileError, match="outside the folder"):
        copy_folder_file(folder, "merges.txt", tmp_path / "stolen.txt", VOCAB_MAX_BYTES)
    assert not (tmp_path / "stolen.txt").exists()
    with pytest.raises(FolderFileError, match="expected at most 10 bytes"):
        copy_folder_file(folder, "vocab.txt", tmp_path / "big.txt", 10)


def test_subfolders_must_lie_inside_the_folder(folder, tmp_path):
    (folder / "1_Pooling").mkdir()
    assert check_folder_dir(folder, "1_Pooling") == (folder / "1_Pooling").resolve()
    (tmp_path / "other").mkdir()
    (folder / "2_Normalize").symlink_to(tmp_path / "other")
    with pytest.raises(FolderFileError, match="outside the folder"):
        check_folder_dir(folder, "2_Normalize")
    with pytest.raises(FolderFileError, match="not a folder"):
        check_folder_dir(folder, "vocab.txt")


def test_json_is_parsed_with_the_line_of_an_error(folder):
    (folder / "task.json").write_text('{"task": "sst2",\n "head": }')
    with pytest.raises(FolderFileError, match=r"task.json: not valid JSON \(line 2, column 10"):
        read_folder_json(folder, "task.json")
    (folder / "task.json").write_text('{"task": "sst2"}')
    assert read_folder_json(folder, "task.json") == {"task": "sst2"}
