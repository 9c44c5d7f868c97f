"""Tokenised corpus on disk: `prepare_corpus` writes it, `CorpusSplit` memory-maps it back.

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
import heapq
import json
import multiprocessing
import os
import shutil
import time
from collections import deque
from dataclasses import dataclass
from itertools import chain
from pathlib import Path
from typing import Any, Iterable, Sequence

import numpy as np

from bertforge.outputs import RUN_CONFIG
from bertforge.data.corpus import (FORMATS, MAX_DAMAGED_SHARE, LineCounts, detect_format, document_sentences,
                                   iter_raw_documents, read_lines)
from bertforge.data.hashing import combine

MANIFEST = "manifest.json"
MANIFEST_KIND = "bertforge-pretraining-corpus"
MANIFEST_VERSION = 1
SPLITS = ("train", "heldout")
_HELDOUT_SALT = 0x5EED4E1D  # fixed: the held-out set must not move between runs


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

class _ShardWriter:
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

    def close(self) -> list[dict[str, Any]]:
        if self._files is not None:
            self._close_shard()
        return self.shards


# ---- tokenising workers --------------------------------------------------------------------------------------

_worker: dict[str, Any] = {}


def _init_worker(vocab_dir: Any, dtype: str, max_sentence_tokens: int) -> None:
    os.environ["TOKENIZERS_PARALLELISM"] = "false"  # one process per core already; no nested thread pools
    _worker.update(tokenizer=load_tokenizer(vocab_dir), dtype=np.dtype(dtype),
                   max_sentence_tokens=max_sentence_tokens)


def _tokenize_chunk(docs: list[list[str]], fmt: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, LineCounts]:
    """Clean, split and tokenise a chunk of documents. Returns (tokens, tokens per sentence, sentences per
    document, counts); documents left without tokens are dropped and counted."""
    counts = LineCounts()
    texts: list[str] = []
    per_doc: list[int] = []
    for lines in docs:
        sentences = document_sentences(lines, fmt, counts)
        # Later sentences get back the space that separated them in the text: byte-level BPE encodes a word
        # after a space differently ("ĠThe" vs "The"), and whole-word masking reads word starts from it.
        # WordPiece and SentencePiece give the same ids either way.
        texts.extend(sentence if i == 0 else " " + sentence for i, sentence in enumerate(sentences))
        per_doc.append(len(sentences))
    ids = _worker["tokenizer"].encode_batch_ids(texts) if texts else []
    lens = np.fromiter(map(len, ids), np.int64, len(ids))
    tokens = np.fromiter(chain.from_iterable(ids), _worker["dtype"], int(lens.sum()))
    limit = _worker["max_sentence_tokens"]
    if (lens == 0).any() or (lens > limit).any():
        lens, per_doc = _fix_lengths(lens, per_doc, limit, counts)
    per_doc_arr = np.asarray(per_doc, np.int64)
    counts.empty_documents += int((per_doc_arr == 0).sum())
    return tokens, lens, per_doc_arr[per_doc_arr > 0], counts


def _fix_lengths(lens: np.ndarray, per_doc: list[int], limit: int,
                 counts: LineCounts) -> tuple[np.ndarray, list[int]]:
    """Drop sentences with no tokens and cut sentences longer than `limit` into pieces that fit."""
    new_lens: list[int] = []
    new_per_doc: list[int] = []
    pos = 0
    for n in per_doc:
        kept = 0
        for length in lens[pos:pos + n].tolist():
            if length > limit:
                counts.long_sentences_split += 1
                full, rest = divmod(length, limit)
                new_lens.extend([limit] * full + ([rest] if rest else []))
                kept += full + (1 if rest else 0)
            elif length > 0:
                new_lens.append(length)
                kept += 1
        new_per_doc.append(kept)
        pos += n
    return np.asarray(new_lens, np.int64), new_per_doc


# ---- prepare -------------------------------------------------------------------------------------------------

@dataclass
class _Chunk:
    docs: list[list[str]]
    fmt: str


def _expand_inputs(inputs: str | Path | Iterable[str | Path]) -> list[Path]:
    if isinstance(inputs, (str, Path)):
        inputs = [inputs]
    paths: list[Path] = []
    for item in inputs:
        path = Path(item)
        if path.is_dir():
            paths.extend(sorted(p for p in path.rglob("*") if p.is_file() and not p.name.startswith(".")))
        elif path.is_file():
            paths.append(path)
        else:
            raise FileNotFoundError(f"corpus input not found: {path}")
    if not paths:
        raise FileNotFoundError(f"no corpus input files in {list(map(str, inputs))}")
    return paths


def _heldout_key(ordinals: np.ndarray) -> np.ndarray:
    """A fixed pseudo-random number in [0, 1) per document ordinal: the held-out choice is spread over the
    whole corpus, reproducible, and needs no second pass."""
    return (combine(_HELDOUT_SALT, ordinals) >> np.uint64(11)).astype(np.float64) * (1.0 / (1 << 53))


def _select_documents(tokens: np.ndarray, sent_lens: np.ndarray, doc_nsent: np.ndarray,
                      keep: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    sent_keep = np.repeat(keep, doc_nsent)
    token_keep = np.repeat(sent_keep, sent_lens)
    return tokens[token_keep], sent_lens[sent_keep], doc_nsent[keep]


def prepare_corpus(
    inputs: str | Path | Sequence[str | Path],
    vocab_dir: str | Path,
    output_dir: str | Path,
    *,
    max_seq_length: int = 128,
    workers: int | None = None,
    input_format: str = "auto",
    heldout_fraction: float | None = 0.01,
    heldout_documents: int | None = None,
    shard_tokens: int = 2 ** 25,
    chunk_bytes: int = 1 << 20,
    show_progress: bool = True,
) -> dict[str, Any]:
    """Tokenise raw text files into memory-mapped shards under `output_dir`; returns the manifest.

    `input_format` is "auto" (guessed per file), "sentences" or "paragraphs". `workers` tokenising processes
    (default: all cores; 0 tokenises in this process). Held out for evaluation: a fixed pseudo-random
    `heldout_fraction` of the documents, or exactly `heldout_documents` of them when that is given.
    Sentences longer than `max_seq_length - 3` tokens are cut into pieces of that size, so a sentence always
    fits a sequence. Memory stays bounded by a few chunks of `chunk_bytes` per worker whatever the corpus size.
    """
    if input_format not in ("auto",) + FORMATS:
        raise ValueError(f"input_format must be 'auto', 'sentences' or 'paragraphs', got {input_format!r}")
    if heldout_documents is not None and heldout_documents < 0:
        raise ValueError("heldout_documents must be >= 0")
    if heldout_documents is None and not 0.0 <= (heldout_fraction or 0.0) < 1.0:
        raise ValueError(f"heldout_fraction must be in [0, 1), got {heldout_fraction}")
    if max_seq_length < 8:
        raise ValueError(f"max_seq_length must be at least 8, got {max_seq_length}")
    paths = _expand_inputs(inputs)
    output_dir = Path(output_dir)
    if output_dir.exists() and any(p.name != RUN_CONFIG for p in output_dir.iterdir()) \
            and not (output_dir / MANIFEST).is_file():
        raise CorpusError(f"{output_dir} exists and is not an earlier prepared corpus; refusing to overwrite it")

    tokenizer = load_tokenizer(vocab_dir)
    vocab_size = len(tokenizer.vocab)
    dtype = token_dtype(vocab_size)
    workers = (os.cpu_count() or 1) if workers is None else int(workers)
    max_sentence_tokens = max_seq_length - 3

    formats: list[tuple[str, str]] = []
    for path in paths:
        if input_format == "auto":
            fmt, reason = detect_format(path)
        else:
            fmt, reason = input_format, "given"
        formats.append((fmt, reason))

    tmp_dir = output_dir.with_name(f".{output_dir.name}.tmp-{os.getpid()}")
    if tmp_dir.exists():
        shutil.rmtree(tmp_dir)
    tmp_dir.mkdir(parents=True)
    try:
        source = vocab_dir if hasattr(vocab_dir, "encode_batch_ids") else str(vocab_dir)
        manifest = _prepare_into(paths, formats, tokenizer, source, tmp_dir, dtype, workers,
                                 max_seq_length, max_sentence_tokens, heldout_fraction, heldout_documents,
                                 shard_tokens, chunk_bytes, show_progress)
        if (output_dir / RUN_CONFIG).is_file():  # the verb's record of this run stays with its output
            shutil.copy2(output_dir / RUN_CONFIG, tmp_dir / RUN_CONFIG)
        if output_dir.exists():
            shutil.rmtree(output_dir)
        os.replace(tmp_dir, output_dir)
    finally:
        if tmp_dir.exists():
            shutil.rmtree(tmp_dir)
    return manifest


def _prepare_into(paths: list[Path], formats: list[tuple[str, str]], tokenizer: Any, vocab_dir: Any, out: Path,
                  dtype: np.dtype, workers: int, max_seq_length: int, max_sentence_tokens: int,
                  heldout_fraction: float | None, heldout_documents: int | None, shard_tokens: int,
                  chunk_bytes: int, show_progress: bool) -> dict[str, Any]:
    from tqdm.auto import tqdm

    started = time.perf_counter()
    writers = {split: _ShardWriter(out, split, dtype, shard_tokens) for split in SPLITS}
    counts = LineCounts()
    bytes_read = 0
    ordinal = 0                                    # documents with tokens seen so far
    best: list[tuple[float, int, tuple]] = []      # heldout_documents mode: max-heap (negated) of kept docs

    def consume(result: tuple[np.ndarray, np.ndarray, np.ndarray, LineCounts]) -> None:
        nonlocal ordinal
        tokens, sent_lens, doc_nsent, chunk_counts = result
        counts.add(chunk_counts)
        n = len(doc_nsent)
        if n == 0:
            return
        keys = _heldout_key(np.arange(ordinal, ordinal + n, dtype=np.uint64))
        if heldout_documents is None:
            held = keys < (heldout_fraction or 0.0)
            if held.any():
                writers["heldout"].add(*_select_documents(tokens, sent_lens, doc_nsent, held))
                tokens, sent_lens, doc_nsent = _select_documents(tokens, sent_lens, doc_nsent, ~held)
            if len(doc_nsent):
                writers["train"].add(tokens, sent_lens, doc_nsent)
        else:
            # Keep the `heldout_documents` documents with the smallest keys; the ones pushed out go to train.
            if len(best) >= heldout_documents:
                candidate = keys < (-best[0][0] if best else -1.0)
                if (~candidate).any():
                    writers["train"].add(*_select_documents(tokens, sent_lens, doc_nsent, ~candidate))
                tokens, sent_lens, doc_nsent = _select_documents(tokens, sent_lens, doc_nsent, candidate)
                keys, ordinals = keys[candidate], ordinal + np.flatnonzero(candidate)
            else:
                ordinals = ordinal + np.arange(n)
            for key, doc_ordinal, doc in _split_docs((tokens, sent_lens, doc_nsent), keys, ordinals):
                item = (-float(key), int(doc_ordinal), doc)
                if len(best) < heldout_documents:
                    heapq.heappush(best, item)
                elif item > best[0]:
                    writers["train"].add(*heapq.heapreplace(best, item)[2])
                else:
                    writers["train"].add(*doc)
        ordinal += n

    total_bytes = sum(p.stat().st_size for p in paths)
    bar = tqdm(total=total_bytes, unit="B", unit_scale=True, unit_divisor=1000, desc="prepare (text)",
               disable=not show_progress, dynamic_ncols=True, smoothing=0.1)
    context = multiprocessing.get_context("fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn")
    pool = None
    if workers > 0:  # fork keeps start-up cheap; the workers never touch torch
        pool = context.Pool(workers, initializer=_init_worker, initargs=(vocab_dir, dtype.str, max_sentence_tokens))
    else:
        _worker.update(tokenizer=tokenizer, dtype=dtype, max_sentence_tokens=max_sentence_tokens)
    in_flight: deque = deque()
    max_in_flight = 2 * max(workers, 1) + 1

    def finish(result: Any, on_disk: int, text: int) -> None:
        consume(result)
        # The bar counts text bytes (MB/s as in the manifest); its total is extrapolated from the on-disk
        # bytes read so far, which is exact for plain files and converges for compressed ones.
        bar.total = max(text, int(total_bytes * text / max(on_disk, 1)))
        bar.n = text
        bar.set_postfix(docs=f"{ordinal:,}", refresh=False)
        bar.refresh()

    def submit(chunk: _Chunk, on_disk: int) -> None:
        if pool is None:
            finish(_tokenize_chunk(chunk.docs, chunk.fmt), on_disk, bytes_read)
            return
        in_flight.append((pool.apply_async(_tokenize_chunk, (chunk.docs, chunk.fmt)), on_disk, bytes_read))
        while len(in_flight) >= max_in_flight:  # back-pressure: never read far ahead of the tokenisers
            result, *where = in_flight.popleft()
            finish(result.get(), *where)

    on_disk = 0

    def advance(nbytes: int) -> None:
        nonlocal on_disk
        on_disk += nbytes

    try:
        for path, (fmt, _) in zip(paths, formats):
            docs: list[list[str]] = []
            size = 0
            for lines, nbytes in iter_raw_documents(read_lines(path, advance), counts):
                bytes_read += nbytes
                if lines:
                    docs.append(lines)
                    size += nbytes
                if size >= chunk_bytes:
                    submit(_Chunk(docs, fmt), on_disk)
                    docs, size = [], 0
            if docs:
                submit(_Chunk(docs, fmt), on_disk)
        while in_flight:
            result, *where = in_flight.popleft()
            finish(result.get(), *where)
        bar.total = bar.n = bytes_read
    finally:
        bar.close()
        if pool is not None:
            pool.terminate()
            pool.join()
    for _, _, doc in sorted(best, key=lambda item: item[1]):  # held-out documents in corpus order
        writers["heldout"].add(*doc)

    splits = {split: writers[split].close() for split in SPLITS}
    names = ", ".join(map(str, paths))
    if counts.damaged_share > MAX_DAMAGED_SHARE:
        raise CorpusError(f"{names}: {counts.damaged_lines:,} of {counts.lines:,} non-blank lines "
                          f"({counts.damaged_share:.0%}) are not UTF-8 text or hold nothing but control characters "
                          f"(more than {MAX_DAMAGED_SHARE:.0%}); is this a binary, compressed or non-UTF-8 file?")
    if ordinal == 0:
        raise CorpusError(f"no documents with text in {names}")
    elapsed = time.perf_counter() - started
    split_info = {}
    for split, shards in splits.items():
        split_info[split] = {key: sum(s[key] for s in shards) for key in ("documents", "sentences", "tokens")}
        split_info[split]["shards"] = shards
    manifest = {
        "kind": MANIFEST_KIND,
        "version": MANIFEST_VERSION,
        "vocab": {"sha256": vocab_sha256(tokenizer), "size": len(tokenizer.vocab),
                  "source": vocab_dir if isinstance(vocab_dir, str) else None},
        "token_dtype": dtype.name,
        "max_seq_length": max_seq_length,
        "max_sentence_tokens": max_sentence_tokens,
        "inputs": [{"path": str(p), "bytes_on_disk": p.stat().st_size, "format": fmt, "format_reason": reason}
                   for p, (fmt, reason) in zip(paths, formats)],
        "counts": {"documents": ordinal, "sentences": sum(v["sentences"] for v in split_info.values()),
                   "tokens": sum(v["tokens"] for v in split_info.values()), "bytes_read": bytes_read},
        "bad_lines": counts.as_dict(),
        "damaged_lines": {"count": counts.damaged_lines, "of": counts.lines, "emptied": counts.emptied_lines},
        "heldout": {"fraction": None if heldout_documents is not None else heldout_fraction,
                    "documents": heldout_documents},
        "splits": split_info,
        "seconds": round(elapsed, 3),
        "mb_per_second": round(bytes_read / 1e6 / max(elapsed, 1e-9), 3),
        "workers": workers,
    }
    (out / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    return manifest


def _split_docs(arrays: tuple[np.ndarray, np.ndarray, np.ndarray], keys: np.ndarray, ordinals: np.ndarray):
    """Yield (key, ordinal, (tokens, sent_lens, doc_nsent)) for each document of a chunk."""
    tokens, sent_lens, doc_nsent = arrays
    doc_starts = np.concatenate([[0], np.cumsum(doc_nsent)])
    sent_starts = np.concatenate([[0], np.cumsum(sent_lens)])
    for i in range(len(doc_nsent)):
        s0, s1 = doc_starts[i], doc_starts[i + 1]
        yield keys[i], ordinals[i], (tokens[sent_starts[s0]:sent_starts[s1]].copy(), sent_lens[s0:s1].copy(),
                                     doc_nsent[i:i + 1].copy())


# ---- reading -------------------------------------------------------------------------------------------------

def load_manifest(data_dir: str | Path) -> dict[str, Any]:
    path = Path(data_dir) / MANIFEST
    if not path.is_file():
        raise CorpusError(f"{path} not found: is {data_dir} a folder written by `bertforge prepare`?")
    manifest = json.loads(path.read_text(encoding="utf-8"))
    if manifest.get("kind") != MANIFEST_KIND:
        raise CorpusError(f"{path} is not a bertforge pre-training corpus manifest")
    if manifest.get("version") != MANIFEST_VERSION:
        raise CorpusError(f"{path} has version {manifest.get('version')}; this bertforge reads {MANIFEST_VERSION}")
    return manifest


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
