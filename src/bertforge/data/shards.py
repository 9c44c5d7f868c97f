"""Tokenised corpus on disk: `ShardWriter` writes it (for `data.prepare`), `CorpusSplit` memory-maps it back.

Examples are *not* materialised here. We store sentences and documents and build segment pairs or packed
sequences at load time, so one prepared corpus serves every objective, sequence length and masking mode,
and each epoch can draw fresh pairs.

Layout of an output folder::

    manifest.json                   counts, vocab hash, formats, bad lines, per-file sha256 (written last)
    train-00000.tokens.bin          token ids, uint16 when the vocab has < 65,536 entries, else uint32
    train-00000.sentences.bin       int64 [n_sentences + 1]: token offset where each sentence starts, then the end
    train-00000.documents.bin       int64 [n_documents + 1]: sentence offset where each document starts, then the end
    heldout-00000.*                 the same for the held-out documents

Offsets are local to their shard; a document never spans two shards.
"""
from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

MANIFEST = "manifest.json"
MANIFEST_KIND = "bertforge-pretraining-corpus"
MANIFEST_VERSION = 1
SPLITS = ("train", "heldout")


class CorpusError(ValueError):
    """A prepared corpus that cannot be used as asked; the message names the file."""


# ---- vocab identity ------------------------------------------------------------------------------------------

def vocab_tokens(tokenizer: Any) -> list[str]:
    """The vocabulary in id order, from a `BertTokenizer` (or anything with a token -> id `.vocab`)."""
    vocab: dict[str, int] = tokenizer.vocab
    tokens = [""] * (max(vocab.values()) + 1)
    for token, index in vocab.items():
        tokens[index] = token
    return tokens


def vocab_sha256(tokenizer: Any) -> str:
    """sha256 of the vocab as a `vocab.txt` file ("token\\n" per id), so it equals `sha256sum vocab.txt` for a
    file with Unix line ends, yet it is computed from the tokenizer actually in use."""
    digest = hashlib.sha256()
    for token in vocab_tokens(tokenizer):
        digest.update(token.encode("utf-8") + b"\n")
    return digest.hexdigest()


def load_tokenizer(tokenizer_or_vocab: Any) -> Any:
    """Accept a tokenizer, or a folder holding one (WordPiece `vocab.txt`, byte-level BPE `vocab.json` +
    `merges.txt`, or SentencePiece `spiece.model`)."""
    if hasattr(tokenizer_or_vocab, "encode_batch_ids"):
        return tokenizer_or_vocab
    from bertforge.tokenization import load_tokenizer as load_folder
    return load_folder(str(tokenizer_or_vocab))


def token_dtype(vocab_size: int) -> np.dtype:
    return np.dtype(np.uint16) if vocab_size < 2 ** 16 else np.dtype(np.uint32)


# ---- writing -------------------------------------------------------------------------------------------------

class ShardWriter:
    """Streams whole documents of one split into shards of about `shard_tokens` tokens."""

    def __init__(self, root: Path, split: str, dtype: np.dtype, shard_tokens: int) -> None:
        self.root, self.split, self.dtype, self.shard_tokens = root, split, dtype, shard_tokens
        self.shards: list[dict[str, Any]] = []
        self._files: dict[str, Any] | None = None

    def _open(self) -> None:
        name = f"{self.split}-{len(self.shards):05d}"
        self._name = name
        self._files = {}
        for part in ("tokens", "sentences", "documents"):
            path = self.root / f"{name}.{part}.bin"
            self._files[part] = (open(path, "wb"), hashlib.sha256(), path)
        self._tokens = self._sentences = self._documents = 0
        self._write("sentences", np.zeros(1, np.int64))
        self._write("documents", np.zeros(1, np.int64))

    def _write(self, part: str, array: np.ndarray) -> None:
        handle, digest, _ = self._files[part]
        data = np.ascontiguousarray(array).tobytes()
        handle.write(data)
        digest.update(data)

    def _close_shard(self) -> None:
        files = {}
        for part, (handle, digest, path) in self._files.items():
            handle.flush()
            os.fsync(handle.fileno())  # a finished shard survives a crash: a resumed run builds on it
            handle.close()
            files[part] = {"file": path.name, "bytes": path.stat().st_size, "sha256": digest.hexdigest()}
        self.shards.append({"name": self._name, "documents": self._documents, "sentences": self._sentences,
                            "tokens": self._tokens, "files": files})
        self._files = None

    def add(self, tokens: np.ndarray, sent_lens: np.ndarray, doc_nsent: np.ndarray) -> None:
        """Append whole documents: `tokens` concatenated, `sent_lens` per sentence, `doc_nsent` per document."""
        doc_starts = np.concatenate([[0], np.cumsum(doc_nsent)])
        sent_starts = np.concatenate([[0], np.cumsum(sent_lens)])
        doc_tokens_end = sent_starts[doc_starts[1:]]  # cumulative tokens at the end of each document
        d = 0
        while d < len(doc_nsent):
            if self._files is None:
                self._open()
            room = self.shard_tokens - self._tokens
            base = sent_starts[doc_starts[d]]
            k = int(np.searchsorted(doc_tokens_end[d:] - base, room, side="right"))
            if k == 0:
                if self._tokens > 0:      # the next document does not fit: start a new shard
                    self._close_shard()
                    continue
                k = 1                     # a document bigger than a shard gets a shard of its own
            s0, s1 = doc_starts[d], doc_starts[d + k]
            t0, t1 = sent_starts[s0], sent_starts[s1]
            self._write("tokens", tokens[t0:t1])
            self._write("sentences", sent_starts[s0 + 1:s1 + 1] - t0 + self._tokens)
            self._write("documents", doc_starts[d + 1:d + k + 1] - s0 + self._sentences)
            self._tokens += int(t1 - t0)
            self._sentences += int(s1 - s0)
            self._documents += k
            d += k
            if self._tokens >= self.shard_tokens:
                self._close_shard()

    def state(self) -> dict[str, Any]:
        """What a resumed run needs to write on: the finished shards, and the open one's sizes and counts (its
        files are flushed to disk first)."""
        current = None
        if self._files is not None:
            sizes = {}
            for part, (handle, _, _) in self._files.items():
                handle.flush()
                os.fsync(handle.fileno())
                sizes[part] = handle.tell()
            current = {"name": self._name, "bytes": sizes, "tokens": self._tokens, "sentences": self._sentences,
                       "documents": self._documents}
        return {"shards": list(self.shards), "open": current}

    def restore(self, state: dict[str, Any]) -> None:
        """Go on from `state`: the open shard's files are cut back to the sizes recorded (whatever was written
        after the checkpoint goes) and their digests recomputed."""
        self.shards = list(state["shards"])
        current = state["open"]
        if current is None:
            return
        self._name = current["name"]
        self._files = {}
        for part in ("tokens", "sentences", "documents"):
            path = self.root / f"{self._name}.{part}.bin"
            size = current["bytes"][part]
            if not path.is_file() or path.stat().st_size < size:
                raise CorpusError(f"{path}: shorter than the checkpoint of the interrupted run says ({size} bytes)")
            handle = open(path, "r+b")  # noqa: SIM115 - closed with the shard
            handle.truncate(size)
            digest = hashlib.sha256()
            for block in iter(lambda: handle.read(1 << 22), b""):
                digest.update(block)
            self._files[part] = (handle, digest, path)
        self._tokens, self._sentences, self._documents = current["tokens"], current["sentences"], current["documents"]

    def file_names(self) -> set[str]:
        """The files of every shard written so far (finished or open)."""
        names = {meta["file"] for shard in self.shards for meta in shard["files"].values()}
        if self._files is not None:
            names |= {path.name for _, _, path in self._files.values()}
        return names

    def close(self) -> list[dict[str, Any]]:
        if self._files is not None:
            self._close_shard()
        return self.shards


# ---- reading -------------------------------------------------------------------------------------------------

def load_manifest(data_dir: str | Path) -> dict[str, Any]:
    path = Path(data_dir) / MANIFEST
    if not path.is_file():
        raise CorpusError(f"{path} not found: is {data_dir} a folder written by `bertforge prepare`?")
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, RecursionError) as err:
        raise CorpusError(f"{path}: not valid JSON ({err})") from None
    if not isinstance(manifest, dict) or manifest.get("kind") != MANIFEST_KIND:
        raise CorpusError(f"{path} is not a bertforge pre-training corpus manifest")
    if manifest.get("version") != MANIFEST_VERSION:
        raise CorpusError(f"{path} has version {manifest.get('version')}; this bertforge reads {MANIFEST_VERSION}")
    wrong = _manifest_problem(manifest)
    if wrong:
        raise CorpusError(f"{path}: {wrong}")
    return manifest


_COUNTS = ("documents", "sentences", "tokens")


def _manifest_problem(manifest: dict[str, Any]) -> str | None:
    """The first field the readers of a corpus use that does not hold what `prepare` writes, or None."""
    vocab = manifest.get("vocab")
    if not (isinstance(vocab, dict) and isinstance(vocab.get("sha256"), str) and _count(vocab.get("size"))
            and isinstance(vocab.get("source"), (str, type(None)))):
        return "field 'vocab' must be an object with a 'sha256' string, a 'size' count and a 'source' path or null"
    dtype = manifest.get("token_dtype")
    if dtype not in ("uint16", "int32", "uint32", "int64"):
        return f"field 'token_dtype' must be uint16, int32, uint32 or int64, got {dtype!r}"
    splits = manifest.get("splits")
    if not isinstance(splits, dict) or not isinstance(splits.get("train"), dict):
        return "field 'splits' must be an object with a 'train' split"
    for name, split in splits.items():
        where = f"splits.{name}"
        if not isinstance(split, dict) or not all(_count(split.get(k)) for k in _COUNTS):
            return f"field {where!r} must be an object with counts {', '.join(_COUNTS)}"
        if not isinstance(split.get("shards"), list):
            return f"field '{where}.shards' must be a list"
        for i, shard in enumerate(split["shards"]):
            files = shard.get("files") if isinstance(shard, dict) else None
            metas = [files.get(part) for part in ("tokens", "sentences", "documents")] if isinstance(files, dict) \
                else [None]
            if not all(isinstance(m, dict) and isinstance(m.get("file"), str) and Path(m["file"]).name == m["file"]
                       and m["file"] not in ("", ".", "..") and _count(m.get("bytes"))
                       and isinstance(m.get("sha256"), str) for m in metas):
                return (f"field '{where}.shards[{i}].files' must hold tokens, sentences and documents, each a file "
                        "name of this folder with its bytes and sha256")
    return None


def _count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def check_vocab(data_dir: str | Path, manifest: dict[str, Any], tokenizer: Any) -> None:
    """Refuse to train on ids made with another vocabulary: they would silently mean other tokens."""
    expected = manifest["vocab"]["sha256"]
    actual = vocab_sha256(tokenizer)
    if expected != actual:
        raise CorpusError(f"vocab mismatch: {Path(data_dir) / MANIFEST} was prepared with vocab sha256 "
                          f"{expected[:12]}... ({manifest['vocab']['size']} tokens) but the tokenizer in use has "
                          f"{actual[:12]}... ({len(tokenizer.vocab)} tokens); prepare the corpus again with this vocab")


@dataclass
class Shard:
    """One shard, memory-mapped: nothing is read until it is indexed."""
    tokens: np.ndarray             # [n_tokens]
    sentence_offsets: np.ndarray   # [n_sentences + 1] int64, token offsets
    document_offsets: np.ndarray   # [n_documents + 1] int64, sentence offsets

    @property
    def num_documents(self) -> int:
        return len(self.document_offsets) - 1

    def document_token_starts(self) -> np.ndarray:
        """Token offset of each document's first token (in RAM: one int64 per document)."""
        return np.asarray(self.sentence_offsets[np.asarray(self.document_offsets[:-1])])


class CorpusSplit:
    """The shards of one split ("train" or "heldout") of a prepared corpus."""

    def __init__(self, data_dir: str | Path, split: str = "train", *, verify: bool = False) -> None:
        if split not in SPLITS:
            raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
        self.data_dir = Path(data_dir)
        self.split = split
        self.manifest = load_manifest(self.data_dir)
        info = self.manifest["splits"][split]
        if info["documents"] == 0:
            raise CorpusError(f"split '{split}' of {self.data_dir / MANIFEST} has no documents")
        dtype = np.dtype(self.manifest["token_dtype"])
        self.shards: list[Shard] = []
        for shard in info["shards"]:
            arrays = {}
            for part, kind in (("tokens", dtype), ("sentences", np.int64), ("documents", np.int64)):
                meta = shard["files"][part]
                path = self.data_dir / meta["file"]
                if not path.is_file() or path.stat().st_size != meta["bytes"]:
                    raise CorpusError(f"{path} is missing or has the wrong size (manifest says {meta['bytes']} bytes)")
                if verify and _sha256_file(path) != meta["sha256"]:
                    raise CorpusError(f"{path} does not match its sha256 in {self.data_dir / MANIFEST}")
                arrays[part] = np.memmap(path, dtype=kind, mode="r")
            self.shards.append(Shard(arrays["tokens"], arrays["sentences"], arrays["documents"]))
        self.num_documents = info["documents"]
        self.num_sentences = info["sentences"]
        self.num_tokens = info["tokens"]


def _sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 22), b""):
            digest.update(block)
    return digest.hexdigest()
