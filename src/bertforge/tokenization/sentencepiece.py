"""``AlbertTokenizer``: ALBERT's SentencePiece unigram tokenizer, and ``train_sentencepiece``.

The model file is SentencePiece's own ``spiece.model``, trained and read with the ``sentencepiece`` library.
Encoding runs the pipeline Hugging Face builds from that file for ALBERT (doubled back or single quotes
become a double quote, accents stripped, lowercased, the model's own normalisation table, whitespace split,
``▁`` word marker, unigram Viterbi), so the ids equal ``transformers.AlbertTokenizer``'s, and offsets,
truncation windows and padding come from the same Rust engine as the other tokenizers.
"""

from __future__ import annotations

import os
import unicodedata
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors
from tqdm.auto import tqdm

from ..folder_files import SPIECE_MODEL_MAX_BYTES, folder_has, read_folder_bytes
from ..textio import total_bytes
from .fast import SPECIAL_NAMES, FastTokenizer, check_overrides, read_tokenizer_options
from .hf_json import TOKENIZER_JSON

__all__ = ["AlbertTokenizer", "UnigramModel", "train_sentencepiece"]

MODEL_FILE = "spiece.model"
# ALBERT's layout: <pad>=0, <unk>=1, then the control symbols [CLS]=2, [SEP]=3, [MASK]=4.
PAD, UNK, CLS, SEP, MASK = "<pad>", "<unk>", "[CLS]", "[SEP]", "[MASK]"
_OPTIONS = ("do_lower_case", "keep_accents", "model_max_length", *SPECIAL_NAMES)


class UnigramModel(NamedTuple):
    """A unigram model already read: its ``spiece.model`` bytes (what a save writes) and the pieces with the
    scores the tokenizer runs. The scores of a ``tokenizer.json`` are float64, those of ``spiece.model`` float32:
    Viterbi sums float64 scores with rounding that decides exact ties ("i"+"ii" against "ii"+"i"), so the pieces
    read from a ``tokenizer.json`` are kept as they are, not rounded through ``spiece.model``."""

    model_bytes: bytes
    pieces: list[tuple[str, float]]
    unk_id: int
    charsmap: bytes | None


class AlbertTokenizer(FastTokenizer):
    """ALBERT's SentencePiece tokenizer with :class:`BertTokenizer`'s call API (pair: ``[CLS] A [SEP] B [SEP]``).

    ``vocab_file`` is a ``spiece.model`` (its path or bytes) or a :class:`UnigramModel`. ``do_lower_case``
    lowercases; unless ``keep_accents``, accents are stripped (NFKD, combining marks dropped), as in ALBERT's
    preprocessing.
    """

    word_start_prefix = "▁"

    def __init__(
        self,
        vocab_file: str | os.PathLike[str] | bytes | UnigramModel,
        do_lower_case: bool = True,
        keep_accents: bool = False,
        model_max_length: int = 512,
        bos_token: str = CLS,
        eos_token: str = SEP,
        unk_token: str = UNK,
        sep_token: str = SEP,
        pad_token: str = PAD,
        cls_token: str = CLS,
        mask_token: str = MASK,
    ) -> None:
        for name, value in (("do_lower_case", do_lower_case), ("keep_accents", keep_accents)):
            if not isinstance(value, bool):
                raise TypeError(f"{name} must be True or False, got {value!r}")
        if isinstance(vocab_file, UnigramModel):  # read from a tokenizer.json
            self._model_bytes, pieces, unk_id, charsmap = vocab_file
            vocab_file = TOKENIZER_JSON
        else:  # a spiece.model, or its bytes
            self._model_bytes = vocab_file if isinstance(vocab_file, bytes) else _read_bytes(Path(vocab_file))
            pieces, unk_id, charsmap = read_spiece_model(self._model_bytes, Path(vocab_file))
        self.do_lower_case, self.keep_accents = do_lower_case, keep_accents
        backend = Tokenizer(models.Unigram(pieces, unk_id=unk_id, byte_fallback=False))
        backend.normalizer = albert_normalizer(do_lower_case, keep_accents, charsmap)
        backend.pre_tokenizer = pre_tokenizers.Sequence(
            [pre_tokenizers.WhitespaceSplit(), pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always")])
        backend.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="always")
        ids = {piece: i for i, (piece, _) in enumerate(pieces)}
        if cls_token in ids and sep_token in ids:
            backend.post_processor = processors.TemplateProcessing(
                single=f"{cls_token}:0 $A:0 {sep_token}:0", pair=f"{cls_token}:0 $A:0 {sep_token}:0 $B:1 {sep_token}:1",
                special_tokens=[(cls_token, ids[cls_token]), (sep_token, ids[sep_token])])
        specials = dict(bos_token=bos_token, eos_token=eos_token, unk_token=unk_token, sep_token=sep_token,
                        pad_token=pad_token, cls_token=cls_token, mask_token=mask_token)
        super().__init__(backend, specials, model_max_length, str(vocab_file))

    @classmethod
    def from_pretrained(cls, path: str | os.PathLike[str], **overrides: Any) -> AlbertTokenizer:
        """Load a folder with ``tokenizer.json`` or ``spiece.model`` (+ optional ``tokenizer_config.json``), or a
        ``.model`` file.

        When a folder holds both, ``tokenizer.json`` is read, as ``transformers`` does: its scores are exact,
        ``spiece.model`` holds them rounded to float32 (see :class:`UnigramModel`).
        """
        check_overrides(overrides, _OPTIONS)
        p = Path(path)
        if os.path.lexists(p) and not p.is_dir():  # a model file (read_folder_bytes says if it is not one)
            return cls(p, **overrides)
        if not p.is_dir():
            raise FileNotFoundError(f"tokenizer path not found: {p} (expected a folder with {MODEL_FILE})")
        if folder_has(p, TOKENIZER_JSON):
            return cls._from_tokenizer_json(p, overrides)
        if not folder_has(p, MODEL_FILE):
            raise FileNotFoundError(f"{p} has no {MODEL_FILE}; a SentencePiece tokenizer needs it")
        return cls(p / MODEL_FILE, **{**read_tokenizer_options(p, _OPTIONS), **overrides})

    @classmethod
    def _from_tokenizer_json(cls, folder: Path, overrides: dict[str, Any]) -> AlbertTokenizer:
        """Pieces, scores and normalisation come from tokenizer.json (what transformers runs), special tokens and
        length from tokenizer_config.json; the spiece.model a save writes is rebuilt from them. A tokenizer.json
        whose pipeline is not ALBERT's (another normaliser, pre-tokeniser, byte fallback...) runs as it is, unless
        the casing is given here (`do_lower_case`, `keep_accents`: ALBERT's pipeline with these settings)."""
        from .hf_json import read_pipeline, read_tokenizer_json, same_pipeline
        tok = cls._rebuilt_from_json(folder, overrides)
        path, data = folder / TOKENIZER_JSON, read_tokenizer_json(folder)
        if not {"do_lower_case", "keep_accents"} & set(overrides) and not same_pipeline(tok.backend, data):
            tok.adopt_pipeline(read_pipeline(data, path), str(path))
        return tok

    @classmethod
    def _rebuilt_from_json(cls, folder: Path, overrides: dict[str, Any]) -> AlbertTokenizer:
        from .hf_json import model_type, read_tokenizer_json, spiece_model_bytes, unigram_options, unigram_parts
        path = folder / TOKENIZER_JSON
        data = read_tokenizer_json(folder)
        kind = model_type(data, path)
        if kind != "Unigram":
            raise ValueError(f"{path} holds a {kind} tokenizer, not ALBERT's SentencePiece unigram")
        pieces, unk_id, charsmap = unigram_parts(data, path)
        options = {**read_tokenizer_options(folder, _OPTIONS), **unigram_options(data), **overrides}
        control = {t["content"] for t in data.get("added_tokens") or [] if t.get("special")}
        control.discard(pieces[unk_id][0])
        model = spiece_model_bytes(pieces, unk_id, charsmap, control, pad_token=options.get("pad_token", PAD))
        return cls(UnigramModel(model, pieces, unk_id, charsmap), **options)

    def save_pretrained(self, save_directory: str | os.PathLike[str]) -> tuple[Path, ...]:
        """Write ``spiece.model``, ``tokenizer.json`` and the config files ``transformers.AutoTokenizer`` reads.

        ``tokenizer.json`` lets ``transformers`` load the folder without ``protobuf`` (which it needs to read
        ``spiece.model`` itself); both describe the same tokenizer. A tokenizer running a tokenizer.json's own
        pipeline (:attr:`own_pipeline`) writes no ``spiece.model``: it would describe another tokenizer.
        """
        out = Path(save_directory)
        if out.exists() and not out.is_dir():
            raise NotADirectoryError(f"cannot save the tokenizer into {out}: it is a file")
        out.mkdir(parents=True, exist_ok=True)
        model_path = out / MODEL_FILE
        if self.own_pipeline:
            model_path.unlink(missing_ok=True)  # an older save's file would contradict tokenizer.json
        else:
            model_path.write_bytes(self._model_bytes)
        json_path = out / TOKENIZER_JSON
        self._backend.save(str(json_path))
        configs = self._write_configs(out, {"tokenizer_class": "AlbertTokenizer", "do_lower_case": self.do_lower_case,
                                            "keep_accents": self.keep_accents, "remove_space": True})
        return (*([] if self.own_pipeline else [model_path]), json_path, *configs)


def albert_normalizer(do_lower_case: bool, keep_accents: bool, charsmap: bytes | None) -> normalizers.Normalizer:
    """ALBERT's text preprocessing, then the model's own (precompiled) normalisation table."""
    steps = [normalizers.Replace("``", '"'), normalizers.Replace("''", '"')]
    if not keep_accents:
        steps += [normalizers.NFKD(), normalizers.StripAccents()]
    if do_lower_case:
        steps.append(normalizers.Lowercase())
    if charsmap:
        steps.append(normalizers.Precompiled(charsmap))
    return normalizers.Sequence(steps)


def _read_bytes(path: Path) -> bytes:
    return read_folder_bytes(path.parent, path.name, SPIECE_MODEL_MAX_BYTES)


def read_spiece_model(model: bytes, path: Path) -> tuple[list[tuple[str, float]], int, bytes | None]:
    """(pieces with scores, unknown id, precompiled normalisation table) of a SentencePiece model (the bytes
    of `path`, which errors name)."""
    import sentencepiece

    processor = sentencepiece.SentencePieceProcessor()
    try:
        processor.LoadFromSerializedProto(model)
        charsmap = _precompiled_charsmap(model)
    except (OSError, RuntimeError, ValueError, IndexError) as exc:
        raise ValueError(f"{path} is not a readable SentencePiece model (truncated or corrupted?): {exc}") from None
    if processor.GetPieceSize() == 0:
        raise ValueError(f"{path} is a SentencePiece model without pieces")
    pieces = [(processor.IdToPiece(i), processor.GetScore(i)) for i in range(processor.GetPieceSize())]
    return pieces, processor.unk_id(), charsmap


def _precompiled_charsmap(model: bytes) -> bytes | None:
    """ModelProto.normalizer_spec (field 3) . precompiled_charsmap (field 2), read from the protobuf wire
    format directly so that neither we nor the user need the ``protobuf`` package."""
    spec = _field(model, 3)
    return _field(spec, 2) if spec is not None else None


def _field(message: bytes, number: int) -> bytes | None:
    """The last length-delimited field `number` of a serialised protobuf message (None if absent)."""
    found, pos = None, 0
    while pos < len(message):
        key, pos = _varint(message, pos)
        field, wire = key >> 3, key & 7
        if wire == 0:
            _, pos = _varint(message, pos)
        elif wire == 1:
            pos += 8
        elif wire == 5:
            pos += 4
        elif wire == 2:
            size, pos = _varint(message, pos)
            if field == number:
                found = message[pos:pos + size]
            pos += size
        else:
            raise ValueError(f"unsupported protobuf wire type {wire}")
    return found


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7


def preprocess(text: str, do_lower_case: bool = True, keep_accents: bool = False) -> str:
    """ALBERT's preprocessing in Python, for training text: the same steps the tokenizer's normaliser runs."""
    text = text.replace("``", '"').replace("''", '"')
    if not keep_accents:
        text = "".join(c for c in unicodedata.normalize("NFKD", text) if not unicodedata.combining(c))
    return text.lower() if do_lower_case else text


def train_sentencepiece(
    files: Sequence[str | os.PathLike[str]] | str | os.PathLike[str],
    output_dir: str | os.PathLike[str],
    vocab_size: int = 30000,
    do_lower_case: bool = True,
    keep_accents: bool = False,
    character_coverage: float = 0.99995,
    max_sentences: int = 2_000_000,
    show_progress: bool = True,
    skip_bad_lines: bool = False,
) -> Path:
    """Learn a SentencePiece unigram model (ALBERT's settings) from text files and write a tokenizer folder.

    Lines are preprocessed as the tokenizer will preprocess them (lowercased, accents stripped unless
    ``keep_accents``), so the pieces fit the text they will see. At most ``max_sentences`` lines (a random
    sample, SentencePiece's own) are used, which bounds memory. The vocabulary is ``<pad> <unk> [CLS] [SEP]
    [MASK]`` then the learned pieces; a small corpus may give fewer than ``vocab_size``. A line that is not UTF-8
    fails with its file and line unless ``skip_bad_lines``. Returns ``output_dir``.
    """
    import sentencepiece

    paths = [Path(files)] if isinstance(files, (str, os.PathLike)) else [Path(f) for f in files]
    if not paths:
        raise ValueError("train_sentencepiece needs at least one input file")
    if isinstance(vocab_size, bool) or not isinstance(vocab_size, int) or vocab_size <= 5:
        raise ValueError(f"vocab_size must be an int > 5 (the special tokens take 5 ids), got {vocab_size!r}")
    size = total_bytes(paths)
    out = Path(output_dir)
    out.mkdir(parents=True, exist_ok=True)
    options = dict(model_prefix=str(out / "spiece"), vocab_size=vocab_size, model_type="unigram",
                   pad_id=0, unk_id=1, bos_id=-1, eos_id=-1, pad_piece=PAD, unk_piece=UNK,
                   control_symbols=[CLS, SEP, MASK], character_coverage=character_coverage,
                   input_sentence_size=max_sentences, shuffle_input_sentence=True, max_sentence_length=1 << 16,
                   hard_vocab_limit=False, num_threads=os.cpu_count() or 1, minloglevel=2)
    seen = [0]
    with tqdm(total=size, unit="B", unit_scale=True, unit_divisor=1024, desc="reading text",
              disable=not show_progress) as bar:
        lines = _preprocessed_lines(paths, bar.update, seen, do_lower_case, keep_accents, skip_bad_lines)
        failed: list[ValueError] = []

        def guarded() -> Iterator[str]:  # SentencePiece's C++ would bury a bad line's message in its own
            try:
                yield from lines
            except ValueError as exc:
                failed.append(exc)

        try:
            sentencepiece.SentencePieceTrainer.Train(sentence_iterator=guarded(), **options)
        except RuntimeError as exc:
            if failed:
                raise failed[0] from None
            if seen[0] == 0:
                raise ValueError(f"no text found in {', '.join(str(p) for p in paths)} "
                                 "(all files are empty or blank)") from None
            raise ValueError(f"SentencePiece training failed: {exc}") from None
    if failed:
        raise failed[0]
    (out / "spiece.vocab").unlink(missing_ok=True)  # a human-readable copy of the pieces; not needed
    AlbertTokenizer(out / MODEL_FILE, do_lower_case=do_lower_case, keep_accents=keep_accents).save_pretrained(out)
    return out


def _preprocessed_lines(paths: list[Path], progress, seen: list[int], do_lower_case: bool,
                        keep_accents: bool, skip_bad_lines: bool = False) -> Iterator[str]:
    from .train import text_lines
    for line in text_lines(paths, progress, skip_bad_lines):
        seen[0] += 1
        yield preprocess(line, do_lower_case, keep_accents)
