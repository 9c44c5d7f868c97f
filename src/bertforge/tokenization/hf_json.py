"""Reading a `tokenizer.json` (the single file `transformers` 5 saves) into the parts our tokenizers are built from.

`transformers` 5 writes a tokenizer folder as `tokenizer.json` + `tokenizer_config.json` only: no `vocab.txt`,
`merges.txt` or `spiece.model`. The model section of `tokenizer.json` holds the same vocabulary those files do
(WordPiece: token -> id; BPE: token -> id and merges; Unigram: pieces with scores) and the normalizer holds the
casing settings. We take those parts and build the family's tokenizer exactly as from the classic files; when that
rebuilt pipeline is not the one the file declares (another normaliser, pre-tokeniser, model option, template or
added token: a folder built with the `tokenizers` library rather than saved from a transformers class), the
folder's own pipeline is run instead, as the `tokenizers` library reads it (`read_pipeline`, `same_pipeline`).
For SentencePiece we also rebuild a `spiece.model`, so a folder we save has the classic file too.
"""
from __future__ import annotations

import base64
import json
import struct
from pathlib import Path
from typing import Any

from tokenizers import Tokenizer

from ..folder_files import TOKENIZER_JSON_MAX_BYTES, read_folder_text

__all__ = [
    "GENERIC_CLASS",
    "TOKENIZER_JSON",
    "bpe_parts",
    "model_type",
    "read_pipeline",
    "read_tokenizer_json",
    "same_pipeline",
    "spiece_model_bytes",
    "unigram_options",
    "unigram_parts",
    "wordpiece_options",
    "wordpiece_vocab",
]

TOKENIZER_JSON = "tokenizer.json"
# what a folder that runs its own pipeline names as its tokenizer_class: transformers (4 and 5) then runs the
# tokenizer.json as it is, where a family class (BertTokenizer, ...) would rebuild the family's pipeline
GENERIC_CLASS = "PreTrainedTokenizerFast"
# the parts of a tokenizer.json that decide the tokens (truncation and padding are set per call)
PIPELINE_PARTS = ("normalizer", "pre_tokenizer", "model", "post_processor", "decoder")


def read_tokenizer_json(folder: str | Path) -> dict[str, Any]:
    path = Path(folder) / TOKENIZER_JSON
    text = read_folder_text(folder, TOKENIZER_JSON, TOKENIZER_JSON_MAX_BYTES)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as err:
        raise ValueError(f"{path}: not valid JSON (line {err.lineno}, column {err.colno}: {err.msg})") from None
    if not isinstance(data, dict) or not isinstance(data.get("model"), dict):
        raise ValueError(f"{path}: expected a tokenizers JSON object with a 'model' section")
    wrong = _shape_problem(data)
    if wrong:
        raise ValueError(f"{path}: {wrong}")
    return data


def _shape_problem(data: dict[str, Any]) -> str | None:
    """What is wrong with the parts bertforge reads itself (the added tokens, the normaliser's flags), in a few
    words naming the field, or None; the rest the `tokenizers` library checks when it builds the pipeline."""
    added = data.get("added_tokens")
    if added is not None and not isinstance(added, list):
        return f"field 'added_tokens' must be a list, got {type(added).__name__}"
    for i, token in enumerate(added or []):
        if not (isinstance(token, dict) and isinstance(token.get("content"), str) and isinstance(token.get("id"), int)
                and not isinstance(token.get("id"), bool)):
            return f"field 'added_tokens[{i}]' must be an object with a string 'content' and an integer 'id'"
    for part in PIPELINE_PARTS:
        if data.get(part) is not None and not isinstance(data[part], dict):
            return f"field {part!r} must be an object or null, got {type(data[part]).__name__}"
    norm = data.get("normalizer") or {}
    steps = norm.get("normalizers") if norm.get("type") == "Sequence" else [norm]
    if not isinstance(steps, list) or not all(isinstance(step, dict) for step in steps):
        return "field 'normalizer.normalizers' must be a list of objects"
    for step in steps:
        for flag in ("lowercase", "handle_chinese_chars", "clean_text", "strip_accents"):
            value = step.get(flag)
            if value is not None and not isinstance(value, bool):
                return f"field 'normalizer.{flag}' must be true, false or null, got {value!r}"
    return None


def read_pipeline(data: dict[str, Any], path: str | Path) -> Tokenizer:
    """The pipeline the file declares, built by the `tokenizers` library (without the file's truncation and
    padding: those are set per call)."""
    try:
        pipeline = Tokenizer.from_str(json.dumps(data))
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as exc:  # tokenizers raises a bare Exception naming the JSON it could not read, or panics
        raise ValueError(f"{path}: the tokenizers library cannot build the pipeline it declares: {exc}") from None
    pipeline.no_truncation()
    pipeline.no_padding()
    return pipeline


def same_pipeline(rebuilt: Tokenizer, data: dict[str, Any]) -> bool:
    """Whether `rebuilt` (the family's pipeline built from the file's parts) is the pipeline the file `data`
    declares: the same normaliser, pre-tokeniser, model, template and decoder, and every token the file adds.
    Compared with the file as Python reads it: the `tokenizers` library's own reading of a Unigram model's
    scores can be off by one unit in the last place."""
    ours = json.loads(rebuilt.to_str())
    if any(ours.get(part) != data.get(part) for part in PIPELINE_PARTS):
        return False
    added = {(t.get("content"), t.get("id")) for t in ours.get("added_tokens") or []}
    theirs = data.get("added_tokens") or []
    return isinstance(theirs, list) and all(isinstance(t, dict) and (t.get("content"), t.get("id")) in added
                                            for t in theirs)


def model_type(data: dict[str, Any], path: str | Path) -> str:
    kind = data["model"].get("type")
    if kind is None:  # old files leave the type out; the fields tell
        model = data["model"]
        kind = "BPE" if "merges" in model else "Unigram" if isinstance(model.get("vocab"), list) else "WordPiece"
    if kind not in ("WordPiece", "BPE", "Unigram"):
        raise ValueError(f"{path}: tokenizer model type {kind!r}; bertforge reads WordPiece (BERT), BPE (RoBERTa) "
                         "and Unigram (ALBERT)")
    return kind


def _vocab_dict(data: dict[str, Any], path: str | Path) -> dict[str, int]:
    vocab = data["model"].get("vocab")
    if not isinstance(vocab, dict) or not all(isinstance(i, int) for i in vocab.values()):
        raise ValueError(f"{path}: model.vocab must map tokens to integer ids")
    vocab = dict(vocab)
    added_tokens = data.get("added_tokens") or []
    if not isinstance(added_tokens, list) or not all(
            isinstance(t, dict) and isinstance(t.get("content"), str) and isinstance(t.get("id"), int)
            and not isinstance(t.get("id"), bool) for t in added_tokens):
        raise ValueError(f"{path}: added_tokens must be a list of objects with a str 'content' and an int 'id'")
    for added in added_tokens:  # tokens added after training live outside model.vocab
        vocab.setdefault(added["content"], added["id"])
    return vocab


def wordpiece_vocab(data: dict[str, Any], path: str | Path) -> list[str]:
    """The WordPiece vocabulary as the lines of a vocab.txt (token of id i on line i)."""
    vocab = _vocab_dict(data, path)
    lines = sorted(vocab, key=vocab.__getitem__)
    if [vocab[t] for t in lines] != list(range(len(lines))):
        raise ValueError(f"{path}: model.vocab ids are not 0..{len(lines) - 1} without gaps")
    return lines


def wordpiece_options(data: dict[str, Any], path: str | Path = TOKENIZER_JSON) -> dict[str, Any]:
    """BertTokenizer settings that the normalizer records (BertNormalizer's flags)."""
    norm = data.get("normalizer") or {}
    if not isinstance(norm, dict) or norm.get("type") != "BertNormalizer":
        return {}
    for key, allowed in (("lowercase", (bool,)), ("handle_chinese_chars", (bool,)),
                         ("strip_accents", (bool, type(None)))):
        if key in norm and not isinstance(norm[key], allowed):
            raise ValueError(f"{path}: normalizer.{key} must be {' or '.join(a.__name__ for a in allowed)}, "
                             f"got {norm[key]!r}")
    return {"do_lower_case": bool(norm.get("lowercase", True)), "strip_accents": norm.get("strip_accents"),
            "tokenize_chinese_chars": bool(norm.get("handle_chinese_chars", True))}


def bpe_parts(data: dict[str, Any], path: str | Path) -> tuple[dict[str, int], list[tuple[str, str]]]:
    """(vocab.json's token -> id, merges.txt's pairs) of a byte-level BPE."""
    vocab = _vocab_dict(data, path)
    merges = []
    for merge in data["model"].get("merges") or []:
        pair = tuple(merge.split(" ")) if isinstance(merge, str) else tuple(merge)
        if len(pair) != 2:
            raise ValueError(f"{path}: a BPE merge must be two tokens, got {merge!r}")
        merges.append(pair)
    return dict(sorted(vocab.items(), key=lambda item: item[1])), merges


def _normalizers(data: dict[str, Any]) -> list[dict[str, Any]]:
    norm = data.get("normalizer") or {}
    if not isinstance(norm, dict):
        return []
    steps = list(norm.get("normalizers") or []) if norm.get("type") == "Sequence" else [norm]
    return [step for step in steps if isinstance(step, dict)]


def unigram_parts(data: dict[str, Any], path: str | Path) -> tuple[list[tuple[str, float]], int, bytes | None]:
    """(pieces with scores, unknown id, precompiled normalisation table) of a SentencePiece unigram."""
    model = data["model"]
    try:
        pieces = [(str(piece), float(score)) for piece, score in model["vocab"]]
    except (KeyError, TypeError, ValueError):
        raise ValueError(f"{path}: model.vocab of a Unigram model must be [piece, score] pairs") from None
    unk_id = model.get("unk_id")
    if not isinstance(unk_id, int) or not 0 <= unk_id < len(pieces):
        raise ValueError(f"{path}: model.unk_id must be the id of a piece, got {unk_id!r}")
    charsmap = None
    for step in _normalizers(data):
        if step.get("type") == "Precompiled" and step.get("precompiled_charsmap"):
            try:
                charsmap = base64.b64decode(step["precompiled_charsmap"], validate=True)
            except (TypeError, ValueError):
                raise ValueError(f"{path}: the Precompiled normalizer's precompiled_charsmap must be base64 text") \
                    from None
    return pieces, unk_id, charsmap


def unigram_options(data: dict[str, Any]) -> dict[str, Any]:
    """AlbertTokenizer's casing settings, read from the normalizer steps transformers writes for them."""
    kinds = {step.get("type") for step in _normalizers(data)}
    return {"do_lower_case": "Lowercase" in kinds, "keep_accents": "StripAccents" not in kinds}


# ---- spiece.model: a SentencePiece ModelProto, written in protobuf's wire format -----------------------------
# (field numbers from sentencepiece_model.proto; writing them directly needs no `protobuf` package)
_NORMAL, _UNKNOWN, _CONTROL = 1, 2, 3


def _varint(value: int) -> bytes:
    value &= (1 << 64) - 1  # negative int32 values are sent as 10-byte two's complement, as protobuf does
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def _key(number: int, wire: int) -> bytes:
    return _varint(number << 3 | wire)


def _bytes_field(number: int, payload: bytes) -> bytes:
    return _key(number, 2) + _varint(len(payload)) + payload


def _int_field(number: int, value: int) -> bytes:
    return _key(number, 0) + _varint(value)


def spiece_model_bytes(pieces: list[tuple[str, float]], unk_id: int, charsmap: bytes | None,
                       control: set[str], pad_token: str | None = None) -> bytes:
    """A `spiece.model` for these pieces: unigram, unknown id `unk_id`, the `control` pieces as control symbols
    (never produced from text), normalisation by `charsmap` with SentencePiece's whitespace handling."""
    out = bytearray()
    for i, (piece, score) in enumerate(pieces):
        kind = _UNKNOWN if i == unk_id else _CONTROL if piece in control else _NORMAL
        out += _bytes_field(1, _bytes_field(1, piece.encode("utf-8")) + _key(2, 5) + struct.pack("<f", score)
                            + _int_field(3, kind))
    ids = {piece: i for i, (piece, _) in enumerate(pieces)}
    pad_id = ids.get(pad_token, -1) if pad_token else -1
    trainer = (_int_field(3, 1) + _int_field(4, len(pieces)) + _int_field(40, unk_id) + _int_field(41, -1)
               + _int_field(42, -1) + _int_field(43, pad_id))
    out += _bytes_field(2, trainer)
    normalizer = (_bytes_field(1, b"nmt_nfkc" if charsmap else b"identity")
                  + (_bytes_field(2, charsmap) if charsmap else b"")
                  + _int_field(3, 1) + _int_field(4, 1) + _int_field(5, 1))
    out += _bytes_field(3, normalizer)
    return bytes(out)
