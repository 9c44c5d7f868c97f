"""`load_tokenizer` on a path that is not a tokenizer folder says what the path is; it reads every file of a
tokenizer folder through `bertforge.folder_files`: a file that links out of the folder, a FIFO, a link to
/dev/zero or an oversized file is refused in one line naming it, for every file each tokenizer reads; through
the CLI that is one error line and exit status 1."""
from __future__ import annotations

import shutil

import pytest

from bertforge.cli import main
from bertforge.folder_files import (
    SETTINGS_MAX_BYTES,
    SPIECE_MODEL_MAX_BYTES,
    TOKENIZER_JSON_MAX_BYTES,
    VOCAB_MAX_BYTES,
)
from bertforge.tokenization import BertTokenizer, load_tokenizer, train_wordpiece
from bertforge.tokenization.bpe import train_bpe
from bertforge.tokenization.sentencepiece import train_sentencepiece

from hostile_files import fifo, sparse_file, zero_device_link

CORPUS = "\n".join(f"the cat number {i} sat on the mat and looked at the dog ." for i in range(300)) + "\n"
BOUNDS = {"vocab.txt": VOCAB_MAX_BYTES, "vocab.json": VOCAB_MAX_BYTES, "merges.txt": VOCAB_MAX_BYTES,
          "spiece.model": SPIECE_MODEL_MAX_BYTES, "tokenizer.json": TOKENIZER_JSON_MAX_BYTES,
          "tokenizer_config.json": SETTINGS_MAX_BYTES}
# (family, the file made hostile, files removed so that the loader reads that one)
READS = [
    ("bert", "vocab.txt", ()), ("bert", "tokenizer.json", ("vocab.txt",)), ("bert", "tokenizer_config.json", ()),
    ("roberta", "vocab.json", ()), ("roberta", "merges.txt", ()), ("roberta", "tokenizer_config.json", ()),
    ("roberta", "tokenizer.json", ("vocab.json", "merges.txt")),
    ("albert", "spiece.model", ("tokenizer.json",)), ("albert", "tokenizer.json", ()),
    ("albert", "tokenizer_config.json", ()),
]


def test_a_file_is_named_as_a_file_and_a_missing_path_as_missing(tmp_path):
    text = tmp_path / "texts.txt"
    text.write_text("hello\n")
    with pytest.raises(NotADirectoryError, match=r"texts.txt is a file; expected a model or tokenizer folder"):
        load_tokenizer(text)
    with pytest.raises(FileNotFoundError, match=r"nope: no such tokenizer folder"):
        load_tokenizer(tmp_path / "nope")


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    """A small tokenizer folder of each family, with tokenizer.json beside the classic files."""
    root = tmp_path_factory.mktemp("tokenizers")
    (root / "corpus.txt").write_text(CORPUS, encoding="utf-8")
    bert = train_wordpiece([root / "corpus.txt"], root / "bert", vocab_size=200, num_unused=0, show_progress=False)
    BertTokenizer.from_pretrained(bert).save_pretrained(bert)
    return {"bert": bert,
            "roberta": train_bpe([root / "corpus.txt"], root / "roberta", vocab_size=300, show_progress=False),
            "albert": train_sentencepiece([root / "corpus.txt"], root / "albert", vocab_size=60,
                                          show_progress=False)}


def copy_of(source, tmp_path, removed=()):
    folder = tmp_path / source.name
    shutil.copytree(source, folder)
    for name in removed:
        (folder / name).unlink()
    return folder


def plant(kind, path, outside):
    """Make `path` hostile: a link out of its folder, a FIFO (context manager), a /dev/zero link or too large."""
    path.unlink()
    if kind == "link out":
        path.symlink_to(outside)
        return f"{path} is a link to {outside.resolve()}, outside the folder {path.parent.resolve()}; " \
               "expected a file inside the folder"
    if kind == "/dev/zero":
        zero_device_link(path)
        return f"{path} is a character device (a link to /dev/zero); expected a regular file"
    sparse_file(path, BOUNDS[path.name] + 1)
    return f"{path} has {(BOUNDS[path.name] + 1) / 2 ** 20:,.1f} MB; expected at most"


@pytest.mark.parametrize("family, name, removed", READS, ids=[f"{f}-{n}" for f, n, _ in READS])
def test_every_file_a_loader_reads_is_checked(folders, tmp_path, family, name, removed):
    folder = copy_of(folders[family], tmp_path, removed)
    outside = tmp_path / "outside" / name
    outside.parent.mkdir()
    shutil.copy(folder / name, outside)  # a good file: only where it lies is wrong
    assert load_tokenizer(folder).vocab_size > 0
    for kind in ("link out", "/dev/zero", "too large"):
        expected = plant(kind, folder / name, outside)
        with pytest.raises(ValueError) as err:
            load_tokenizer(folder)
        assert str(err.value).startswith(expected), kind
    (folder / name).unlink()
    with fifo(folder / name):
        with pytest.raises(ValueError, match=f"{name} is a FIFO \\(named pipe\\); expected a regular file"):
            load_tokenizer(folder)


@pytest.fixture
def mlm_folder(folders, tmp_path):
    """A tiny BERT with its MLM head and the BERT tokenizer: what `fill-mask` loads."""
    from bertforge import BertConfig, BertForMaskedLM
    folder = copy_of(folders["bert"], tmp_path)
    BertForMaskedLM(BertConfig.preset("tiny", vocab_size=load_tokenizer(folder).vocab_size)).save_pretrained(folder)
    return folder


def fill_mask_error(capsys, folder) -> str:
    """The one line `bertforge fill-mask` prints for this folder; asserts exit 1 and no traceback."""
    capsys.readouterr()
    code = main(["fill-mask", "--model", str(folder), "the cat [MASK] on the mat"])
    out, err = capsys.readouterr()
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 1 and "Traceback" not in err and len(lines) == 1, err
    assert lines[0].startswith("bertforge fill-mask: error: "), err
    return lines[0].removeprefix("bertforge fill-mask: error: ")


@pytest.mark.parametrize("kind", ["link out", "/dev/zero", "too large", "FIFO"])
def test_fill_mask_refuses_a_hostile_tokenizer_file_in_one_line(mlm_folder, tmp_path, capsys, kind):
    capsys.readouterr()
    assert main(["fill-mask", "--model", str(mlm_folder), "the cat [MASK] on the mat"]) == 0
    name = "tokenizer.json" if kind == "/dev/zero" else "vocab.txt"
    if name == "tokenizer.json":
        (mlm_folder / "vocab.txt").unlink()  # so that tokenizer.json is the file read
    outside = tmp_path / "elsewhere.txt"
    shutil.copy(mlm_folder / name, outside)
    if kind == "FIFO":
        (mlm_folder / name).unlink()
        with fifo(mlm_folder / name):
            assert fill_mask_error(capsys, mlm_folder) == f"{mlm_folder / name} is a FIFO (named pipe); " \
                                                          "expected a regular file"
        return
    expected = plant(kind, mlm_folder / name, outside)
    assert fill_mask_error(capsys, mlm_folder).startswith(expected)
