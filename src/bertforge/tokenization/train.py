"""Learning a WordPiece vocabulary in BERT's ``vocab.txt`` layout.

The learning itself is the WordPiece trainer of ``tokenizers`` (Rust), fed line
by line from plain or compressed files with a progress bar in bytes. The
result is laid out like Google's original vocabularies, so that models,
checkpoints and the original tokenizer agree on the special ids::

    [PAD]=0, [unused0] .. [unused{N-1}], [UNK], [CLS], [SEP], [MASK], learned pieces...

With the default ``num_unused=99`` that is [UNK]=100, [CLS]=101, [SEP]=102,
[MASK]=103, as in ``bert-base-uncased``; ``num_unused=0`` packs them as 1..4.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Iterator, Sequence
from pathlib import Path

from tokenizers import Tokenizer, models, pre_tokenizers, trainers
from tqdm.auto import tqdm

from ..settings import SettingError
from ..textio import iter_lines, total_bytes
from .backend import bert_normalizer
from .vocab import save_vocab
from .wordpiece import BertTokenizer

__all__ = ["train_wordpiece", "SPECIAL_TOKENS"]

PAD, UNK, CLS, SEP, MASK = "[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"
SPECIAL_TOKENS = (PAD, UNK, CLS, SEP, MASK)
# Lines handed to Rust per Python call: large enough that the generator overhead vanishes.
_BATCH_LINES = 2000
# bytes that are not UTF-8 arrive as lone surrogates (errors="surrogateescape"), so a bad line is found exactly
_UNDECODABLE = re.compile("[\udc80-\udcff]")
_log = logging.getLogger(__name__)


def train_wordpiece(
    files: Sequence[str | os.PathLike[str]] | str | os.PathLike[str],
    output_dir: str | os.PathLike[str],
    vocab_size: int = 30522,
    lowercase: bool = True,
    min_frequency: int = 2,
    limit_alphabet: int = 1000,
    num_unused: int = 99,
    show_progress: bool = True,
    skip_bad_lines: bool = False,
) -> Path:
    """Learn a vocabulary from text files and write ``vocab.txt`` + ``tokenizer_config.json``.

    ``files`` are UTF-8 text files, optionally ``.gz``/``.xz``/``.bz2``; blank
    lines are skipped. ``vocab_size`` counts everything in the file (special
    tokens and ``[unusedN]`` placeholders included); fewer pieces are written
    if the text does not support that many. ``lowercase`` selects an uncased
    vocabulary (lowercased, accents stripped) and is stored as ``do_lower_case``.
    Pieces seen fewer than ``min_frequency`` times are not merged, and at most
    ``limit_alphabet`` distinct characters are kept. Returns ``output_dir``,
    loadable by :meth:`BertTokenizer.from_pretrained` and by the original tokenizer. A line that is not
    UTF-8 raises ValueError naming its file and line, unless ``skip_bad_lines`` (then it is left out and counted
    in a warning).
    """
    paths = [Path(files)] if isinstance(files, (str, os.PathLike)) else [Path(f) for f in files]
    if not paths:
        raise ValueError("train_wordpiece needs at least one input file")
    for name, value, low in (
        ("vocab_size", vocab_size, 1),
        ("min_frequency", min_frequency, 0),
        ("limit_alphabet", limit_alphabet, 1),
        ("num_unused", num_unused, 0),
    ):
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise ValueError(f"{name} must be an int >= {low}, got {value!r}")
    reserved = len(SPECIAL_TOKENS) + num_unused
    if vocab_size <= reserved:
        raise ValueError(
            f"vocab_size={vocab_size} leaves no room for learned pieces after {reserved} special/unused tokens"
        )
    size = total_bytes(paths)  # also checks that every file exists before any work

    tokenizer = Tokenizer(models.WordPiece(unk_token=UNK, continuing_subword_prefix="##"))
    tokenizer.normalizer = bert_normalizer(lowercase, None, True)
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    trainer = trainers.WordPieceTrainer(
        vocab_size=vocab_size - num_unused,  # the trainer counts its 5 special tokens itself
        min_frequency=min_frequency,
        limit_alphabet=limit_alphabet,
        special_tokens=list(SPECIAL_TOKENS),
        continuing_subword_prefix="##",
        show_progress=False,
    )
    seen = [0]
    with tqdm(
        total=size, unit="B", unit_scale=True, unit_divisor=1024, desc="reading text", disable=not show_progress
    ) as bar:
        tokenizer.train_from_iterator(_batches(paths, bar.update, seen, skip_bad_lines), trainer=trainer)
        bar.set_description("vocabulary learned")
    if seen[0] == 0:
        raise ValueError(f"no text found in {', '.join(str(p) for p in paths)} (all files are empty or blank)")

    learned = sorted(tokenizer.get_vocab().items(), key=lambda item: item[1])
    pieces = [token for token, _ in learned if token not in SPECIAL_TOKENS]
    layout = [PAD, *(f"[unused{i}]" for i in range(num_unused)), UNK, CLS, SEP, MASK, *pieces]
    out = Path(output_dir)
    out.mkdir(parents=True, exist_ok=True)
    save_vocab(layout[:vocab_size], out / "vocab.txt")
    BertTokenizer(out / "vocab.txt", do_lower_case=lowercase).save_pretrained(out)
    return out


def text_lines(paths: list[Path], progress=None, skip_bad_lines: bool = False) -> Iterator[str]:
    """The non-blank lines of the files. An undecodable line raises ValueError with its file and line number,
    or with ``skip_bad_lines`` is dropped; the number dropped is logged at the end."""
    skipped = 0
    for path in paths:
        for number, line in enumerate(iter_lines(path, errors="surrogateescape", progress=progress), 1):
            if not line.strip():
                continue
            bad = _UNDECODABLE.search(line)
            if bad is not None:
                if skip_bad_lines:
                    skipped += 1
                    continue
                byte = ord(bad.group()) - 0xDC00
                raise SettingError("{path}, line {number}: not valid UTF-8 (byte 0x{byte:02x}); fix or re-encode the "
                                   "file, or pass {skip_bad_lines} to leave such lines out", path=path, number=number,
                                   byte=byte)
            yield line
    if skipped:
        _log.warning("skipped %d line%s that are not valid UTF-8", skipped, "" if skipped == 1 else "s")


def _batches(paths: list[Path], progress, seen: list[int], skip_bad_lines: bool = False) -> Iterator[list[str]]:
    """Non-blank lines in lists of ``_BATCH_LINES``; counts them in ``seen[0]``."""
    batch: list[str] = []
    for line in text_lines(paths, progress, skip_bad_lines):
        if line.strip():
            batch.append(line)
            if len(batch) == _BATCH_LINES:
                seen[0] += len(batch)
                yield batch
                batch = []
    if batch:
        seen[0] += len(batch)
        yield batch
