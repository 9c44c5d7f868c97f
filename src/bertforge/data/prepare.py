"""`prepare_corpus`: text and record files -> tokenised shards (`data.shards`), in parallel and resumable.

The main process cuts the inputs into chunks (`data.sources`): blocks of a text file's bytes, which the
workers decode and split into documents, and documents read from record files; worker processes clean, split
and tokenise them; the main process takes the results back in input order and writes them out, holding out a
fixed pseudo-random set of documents. Results are taken in order, so the shards are the same, byte for byte,
for any number of workers.

The work happens in a folder beside the output (`.NAME.partial`) that becomes the output when it is complete.
Each time a shard is finished the run records how many chunks it has written (`prepare-state.json`); the same
command run again after an interruption reads past those chunks without tokenising them and writes on from
there, so a resumed run gives the same shards as one that was never stopped.
"""
from __future__ import annotations

import heapq
import json
import multiprocessing
import os
import shutil
import time
from collections import deque
from dataclasses import asdict, dataclass
from itertools import chain
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from bertforge.data.corpus import MAX_DAMAGED_SHARE, LineCounts, document_sentences
from bertforge.data.hashing import combine
from bertforge.data.prepare_settings import PREPARE_DEFAULTS, PrepareSettings, recorded_settings
from bertforge.data.records import RecordError
from bertforge.data.shards import (MANIFEST, MANIFEST_KIND, MANIFEST_VERSION, SPLITS, CorpusError, ShardWriter,
                                   load_tokenizer, token_dtype, vocab_sha256)
from bertforge.data.sources import Chunk, Columns, Source, TextBlock, block_documents, iter_chunks, open_sources
from bertforge.lifeline import die_with_parent
from bertforge.outputs import RUN_CONFIG
from bertforge.settings import SettingError, check_settings

STATE = "prepare-state.json"
CANDIDATES = "heldout-candidates.npz"
_HELDOUT_SALT = 0x5EED4E1D  # fixed: the held-out set must not move between runs
MAX_BAD_ROW_SAMPLES = 5


# ---- tokenising workers --------------------------------------------------------------------------------------

_worker: dict[str, Any] = {}


def _init_worker(vocab_dir: Any, dtype: str, max_sentence_tokens: int) -> None:
    die_with_parent()  # a tokenizer process ends with `prepare`, even a killed one
    os.environ["TOKENIZERS_PARALLELISM"] = "false"  # one process per core already; no nested thread pools
    _worker.update(tokenizer=load_tokenizer(vocab_dir), dtype=np.dtype(dtype),
                   max_sentence_tokens=max_sentence_tokens)


def _tokenize_chunk(docs: list[list[str]], fmt: str, block: TextBlock | None = None
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, LineCounts, int]:
    """Clean, split and tokenise a chunk of documents (cut from `block` first when the chunk is a text block).
    Returns (tokens, tokens per sentence, sentences per document, counts, text bytes read here); documents
    left without tokens are dropped and counted."""
    counts, read = LineCounts(), 0
    if block is not None:
        docs, read, counts = block_documents(block)
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
    return tokens, lens, per_doc_arr[per_doc_arr > 0], counts, read


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


# ---- the held-out choice -------------------------------------------------------------------------------------

def heldout_key(ordinals: np.ndarray) -> np.ndarray:
    """A fixed pseudo-random number in [0, 1) per document ordinal: the held-out choice is spread over the
    whole corpus, reproducible, and needs no second pass."""
    return (combine(_HELDOUT_SALT, ordinals) >> np.uint64(11)).astype(np.float64) * (1.0 / (1 << 53))


def _select_documents(tokens: np.ndarray, sent_lens: np.ndarray, doc_nsent: np.ndarray,
                      keep: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    sent_keep = np.repeat(keep, doc_nsent)
    token_keep = np.repeat(sent_keep, sent_lens)
    return tokens[token_keep], sent_lens[sent_keep], doc_nsent[keep]


def _split_docs(arrays: tuple[np.ndarray, np.ndarray, np.ndarray], keys: np.ndarray, ordinals: np.ndarray):
    """Yield (key, ordinal, (tokens, sent_lens, doc_nsent)) for each document of a chunk."""
    tokens, sent_lens, doc_nsent = arrays
    doc_starts = np.concatenate([[0], np.cumsum(doc_nsent)])
    sent_starts = np.concatenate([[0], np.cumsum(sent_lens)])
    for i in range(len(doc_nsent)):
        s0, s1 = doc_starts[i], doc_starts[i + 1]
        yield keys[i], ordinals[i], (tokens[sent_starts[s0]:sent_starts[s1]].copy(), sent_lens[s0:s1].copy(),
                                     doc_nsent[i:i + 1].copy())


# ---- one run: what has been written, and its checkpoint --------------------------------------------------------

@dataclass(frozen=True)
class _Plan:
    """Everything that decides the shards; a checkpoint is only continued by a run of the same plan."""
    inputs: tuple[tuple[str, str, int, int], ...]   # (path, kind, size, mtime_ns) per input
    formats: tuple[str, ...]
    vocab_sha256: str
    max_seq_length: int
    heldout_fraction: float | None
    heldout_documents: int | None
    shard_tokens: int
    chunk_bytes: int
    text_column: str
    document_column: str | None
    skip_bad_rows: bool
    # how inputs are cut into chunks (2: text files as byte blocks); a checkpoint counts chunks, so one cut
    # another way is not continued
    chunking: int = 2

    def as_json(self) -> Any:
        return json.loads(json.dumps(asdict(self)))


class _Run:
    """The writers of both splits and the running totals, fed chunk results in input order."""

    def __init__(self, work: Path, dtype: np.dtype, plan: _Plan) -> None:
        self.work, self.plan = work, plan
        self.writers = {split: ShardWriter(work, split, dtype, plan.shard_tokens) for split in SPLITS}
        self.counts = LineCounts()
        self.chunks = self.ordinal = self.bytes_read = 0   # chunks consumed, documents with tokens, text bytes
        self.best: list[tuple[float, int, tuple]] = []      # heldout_documents mode: max-heap (negated keys)
        self.bad_rows: list[str] = []
        self._finished_shards = 0

    def consume(self, result: tuple[np.ndarray, np.ndarray, np.ndarray, LineCounts, int], chunk: Chunk) -> None:
        tokens, sent_lens, doc_nsent, chunk_counts, read_by_worker = result
        self.counts.add(chunk.counts)
        self.counts.add(chunk_counts)
        self.bytes_read += chunk.text_bytes + read_by_worker
        self.bad_rows.extend(chunk.bad_rows[:MAX_BAD_ROW_SAMPLES - len(self.bad_rows)])
        self.chunks += 1
        n = len(doc_nsent)
        if n == 0:
            return
        keys = heldout_key(np.arange(self.ordinal, self.ordinal + n, dtype=np.uint64))
        if self.plan.heldout_documents is None:
            self._by_fraction(tokens, sent_lens, doc_nsent, keys)
        else:
            self._by_count(tokens, sent_lens, doc_nsent, keys)
        self.ordinal += n

    def _by_fraction(self, tokens: np.ndarray, sent_lens: np.ndarray, doc_nsent: np.ndarray,
                     keys: np.ndarray) -> None:
        held = keys < (self.plan.heldout_fraction or 0.0)
        if held.any():
            self.writers["heldout"].add(*_select_documents(tokens, sent_lens, doc_nsent, held))
            tokens, sent_lens, doc_nsent = _select_documents(tokens, sent_lens, doc_nsent, ~held)
        if len(doc_nsent):
            self.writers["train"].add(tokens, sent_lens, doc_nsent)

    def _by_count(self, tokens: np.ndarray, sent_lens: np.ndarray, doc_nsent: np.ndarray, keys: np.ndarray) -> None:
        """Keep the `heldout_documents` documents with the smallest keys; the ones pushed out go to train."""
        best, limit, train = self.best, self.plan.heldout_documents or 0, self.writers["train"]
        if len(best) >= limit:
            candidate = keys < (-best[0][0] if best else -1.0)
            if (~candidate).any():
                train.add(*_select_documents(tokens, sent_lens, doc_nsent, ~candidate))
            tokens, sent_lens, doc_nsent = _select_documents(tokens, sent_lens, doc_nsent, candidate)
            keys, ordinals = keys[candidate], self.ordinal + np.flatnonzero(candidate)
        else:
            ordinals = self.ordinal + np.arange(len(doc_nsent))
        for key, doc_ordinal, doc in _split_docs((tokens, sent_lens, doc_nsent), keys, ordinals):
            item = (-float(key), int(doc_ordinal), doc)
            if len(best) < limit:
                heapq.heappush(best, item)
            elif item > best[0]:
                train.add(*heapq.heapreplace(best, item)[2])
            else:
                train.add(*doc)

    def finish_heldout(self) -> None:
        for _, _, doc in sorted(self.best, key=lambda item: item[1]):  # held-out documents in corpus order
            self.writers["heldout"].add(*doc)
        self.best = []

    # -- checkpoints --

    def shard_finished(self) -> bool:
        """Whether a shard was finished since the last checkpoint (the moment to take the next one)."""
        finished = sum(len(w.shards) for w in self.writers.values())
        if finished > self._finished_shards:
            self._finished_shards = finished
            return True
        return False

    def save(self) -> None:
        """Record the run so far, atomically: after a crash at any point the last checkpoint is whole."""
        from bertforge.atomic import atomic_path, atomic_write_text
        if self.plan.heldout_documents:
            with atomic_path(self.work / CANDIDATES) as tmp, open(tmp, "wb") as handle:
                np.savez(handle, **_pack_candidates(self.best))
        state = {"plan": self.plan.as_json(), "chunks": self.chunks, "ordinal": self.ordinal,
                 "bytes_read": self.bytes_read, "counts": asdict(self.counts), "bad_rows": self.bad_rows,
                 "writers": {split: writer.state() for split, writer in self.writers.items()}}
        atomic_write_text(self.work / STATE, json.dumps(state) + "\n")

    def restore(self) -> bool:
        """Go on from the checkpoint in the work folder when it was taken by a run of the same plan; else
        empty the folder. Returns whether a checkpoint was taken up."""
        state = _read_state(self.work)
        if state is None or state.get("plan") != self.plan.as_json():
            _empty(self.work)
            return False
        for split, writer in self.writers.items():
            writer.restore(state["writers"][split])
        self.chunks, self.ordinal, self.bytes_read = state["chunks"], state["ordinal"], state["bytes_read"]
        self.counts = LineCounts(**state["counts"])
        self.bad_rows = list(state["bad_rows"])
        if self.plan.heldout_documents:
            with np.load(self.work / CANDIDATES, allow_pickle=False) as saved:
                self.best = _unpack_candidates(saved)
        self._finished_shards = sum(len(w.shards) for w in self.writers.values())
        keep = set().union(*(w.file_names() for w in self.writers.values())) | {STATE, CANDIDATES}
        for path in self.work.iterdir():  # shards begun after the checkpoint
            if path.name not in keep:
                path.unlink()
        return True


def _read_state(work: Path) -> dict[str, Any] | None:
    try:
        state = json.loads((work / STATE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return state if isinstance(state, dict) else None


def _empty(folder: Path) -> None:
    for path in folder.iterdir():
        if path.is_dir():
            shutil.rmtree(path)
        else:
            path.unlink()


def _pack_candidates(best: list[tuple[float, int, tuple]]) -> dict[str, np.ndarray]:
    """The held-out candidates as flat arrays (no pickles: a checkpoint is read back with allow_pickle=False)."""
    docs = [item[2] for item in best]
    return {"keys": np.array([item[0] for item in best], np.float64),
            "ordinals": np.array([item[1] for item in best], np.int64),
            "tokens": np.concatenate([d[0] for d in docs]) if docs else np.zeros(0, np.uint32),
            "sent_lens": np.concatenate([d[1] for d in docs]) if docs else np.zeros(0, np.int64),
            "doc_nsent": np.concatenate([d[2] for d in docs]) if docs else np.zeros(0, np.int64)}


def _unpack_candidates(saved: Any) -> list[tuple[float, int, tuple]]:
    tokens, sent_lens, doc_nsent = saved["tokens"], saved["sent_lens"], saved["doc_nsent"]
    sent_starts = np.concatenate([[0], np.cumsum(doc_nsent)])
    token_starts = np.concatenate([[0], np.cumsum(sent_lens)])
    best = []
    for i, (key, ordinal) in enumerate(zip(saved["keys"].tolist(), saved["ordinals"].tolist())):
        s0, s1 = sent_starts[i], sent_starts[i + 1]
        doc = (tokens[token_starts[s0]:token_starts[s1]].copy(), sent_lens[s0:s1].copy(), doc_nsent[i:i + 1].copy())
        best.append((key, ordinal, doc))
    heapq.heapify(best)
    return best


# ---- prepare -------------------------------------------------------------------------------------------------

def prepare_corpus(
    inputs: str | Path | Sequence[str | Path],
    vocab_dir: Any,
    output_dir: str | Path,
    *,
    max_seq_length: int = PREPARE_DEFAULTS["max_seq_length"],
    workers: int | None = PREPARE_DEFAULTS["workers"],
    input_format: str = PREPARE_DEFAULTS["input_format"],
    heldout_fraction: float | None = PREPARE_DEFAULTS["heldout_fraction"],
    heldout_documents: int | None = PREPARE_DEFAULTS["heldout_documents"],
    shard_tokens: int = 2 ** 25,
    chunk_bytes: int = 1 << 20,
    show_progress: bool = PREPARE_DEFAULTS["progress"],
    text_column: str = PREPARE_DEFAULTS["text_column"],
    document_column: str | None = PREPARE_DEFAULTS["document_column"],
    skip_bad_rows: bool = PREPARE_DEFAULTS["skip_bad_rows"],
    resume: bool = True,
) -> dict[str, Any]:
    """Tokenise text and record files into memory-mapped shards under `output_dir`; returns the manifest.

    `inputs`: files, folders and glob patterns of plain text (.txt/.gz/.xz/.bz2, blank line between
    documents), JSON Lines, CSV/TSV, Parquet, Arrow, or `datasets` save_to_disk folders. A record's
    `text_column` is a document, or with `document_column` consecutive records with the same id are one.
    `input_format` is "auto" (guessed per input), "sentences" or "paragraphs" (one per line). `workers`
    tokenising processes (default: all cores; 0 tokenises in this process); the shards do not depend on it.
    Held out for evaluation: a fixed pseudo-random `heldout_fraction` of the documents, or exactly
    `heldout_documents` of them. Sentences longer than `max_seq_length - 3` tokens are cut into pieces that
    fit. A bad record raises `RecordError` naming file, row and field, or with `skip_bad_rows` is counted.
    Memory stays bounded by a few chunks of `chunk_bytes` per worker whatever the corpus size; an interrupted
    call continues from its last finished shard when called again the same way (unless `resume=False`).
    """
    check_settings(PrepareSettings(input=inputs, vocab=vocab_dir, output=str(output_dir), text_column=text_column,
                                   document_column=document_column, skip_bad_rows=skip_bad_rows,
                                   max_seq_length=max_seq_length, workers=workers, input_format=input_format,
                                   heldout_fraction=heldout_fraction, heldout_documents=heldout_documents))
    if heldout_documents is None and not (heldout_fraction or 0.0) < 1.0:  # a range no maximum says: [0, 1)
        raise SettingError("{heldout_fraction} must be below 1 (1 would hold out every document), got {got}",
                           owner=PrepareSettings, got=heldout_fraction)
    columns = Columns(text_column, document_column, skip_bad_rows)
    sources = open_sources(inputs, input_format, columns)
    output_dir = Path(output_dir)
    if output_dir.exists() and any(p.name != RUN_CONFIG for p in output_dir.iterdir()) \
            and not (output_dir / MANIFEST).is_file():
        raise CorpusError(f"{output_dir} exists and is not an earlier prepared corpus; refusing to overwrite it")
    tokenizer = load_tokenizer(vocab_dir)
    dtype = token_dtype(len(tokenizer.vocab))
    plan = _Plan(tuple((str(s.path.resolve()), s.kind, s.bytes_on_disk(), s.path.stat().st_mtime_ns) for s in sources),
                 tuple(s.fmt for s in sources), vocab_sha256(tokenizer), max_seq_length,
                 None if heldout_documents is not None else heldout_fraction, heldout_documents, shard_tokens,
                 chunk_bytes, text_column, document_column, skip_bad_rows)
    work = output_dir.with_name(f".{output_dir.name}.partial")
    work.mkdir(parents=True, exist_ok=True)
    run = _Run(work, dtype, plan)
    try:
        if not resume or not run.restore():
            _empty(work)
    except (CorpusError, OSError, KeyError, TypeError, ValueError):  # a checkpoint damaged after it was written
        _empty(work)
        run = _Run(work, dtype, plan)
    resumed = (run.chunks, run.bytes_read)
    workers = (os.cpu_count() or 1) if workers is None else int(workers)
    started = time.perf_counter()
    try:
        source = vocab_dir if hasattr(vocab_dir, "encode_batch_ids") else str(vocab_dir)
        _tokenize(sources, columns, run, (source, dtype.str, max_seq_length - 3), tokenizer, workers, show_progress)
        manifest = _finish(run, sources, tokenizer, source if isinstance(source, str) else None, workers,
                           time.perf_counter() - started, resumed)
    except (CorpusError, RecordError):
        shutil.rmtree(work, ignore_errors=True)  # bad input: a re-run after fixing it starts over anyway
        raise
    _put_in_place(work, output_dir)
    return manifest


def prepare(settings: PrepareSettings) -> dict[str, Any]:
    """`bertforge prepare`: claim `settings.output` (a finished run of the same settings there is kept, an
    interrupted one continued), record the settings and the inputs' identity, and prepare the corpus into it;
    returns the manifest. Every input is resolved (globs expanded, folders walked) before the output is claimed,
    so `overwrite` can never empty a file a pattern matches."""
    from bertforge.data.identity import check_input_content, record_input_content
    from bertforge.data.records import expand_inputs
    from bertforge.outputs import fresh_output
    for path in map(Path, settings.input):
        if path.is_dir() and (path / MANIFEST).is_file():
            raise SettingError("{input} {path} is a folder written by `bertforge prepare` (it has manifest.json): "
                               "give it to `bertforge pretrain --data`; prepare reads raw text files",
                               owner=PrepareSettings, path=str(path))
    inputs = (*[p for p in map(Path, settings.input) if p.exists()], *[p for p, _ in expand_inputs(settings.input)],
              settings.vocab)
    content = check_input_content(settings.output, "prepare", inputs, settings.overwrite)
    with fresh_output(settings.output, verb="prepare", overwrite=settings.overwrite,
                      settings=recorded_settings(settings), inputs=inputs) as output:
        record_input_content(output, content)
        return prepare_corpus(settings.input, settings.vocab, output, max_seq_length=settings.max_seq_length,
                              workers=settings.workers, input_format=settings.input_format,
                              heldout_fraction=settings.heldout_fraction, heldout_documents=settings.heldout_documents,
                              show_progress=settings.progress, text_column=settings.text_column,
                              document_column=settings.document_column, skip_bad_rows=settings.skip_bad_rows,
                              resume=not settings.overwrite)


def _put_in_place(work: Path, output_dir: Path) -> None:
    """The finished work folder becomes the output (the verb's run record, if any, moves with it)."""
    (work / STATE).unlink(missing_ok=True)
    (work / CANDIDATES).unlink(missing_ok=True)
    if (output_dir / RUN_CONFIG).is_file():
        shutil.copy2(output_dir / RUN_CONFIG, work / RUN_CONFIG)
    if output_dir.exists():
        shutil.rmtree(output_dir)
    os.replace(work, output_dir)


def _tokenize(sources: list[Source], columns: Columns, run: _Run, worker_args: tuple, tokenizer: Any,
              workers: int, show_progress: bool) -> None:
    """Read every chunk, tokenise it (in `workers` processes) and hand the results to `run` in input order,
    checkpointing whenever a shard is finished. Chunks an earlier run consumed are read but not tokenised."""
    from tqdm.auto import tqdm
    total = sum(s.bytes_on_disk() for s in sources)
    bar = tqdm(total=total, unit="B", unit_scale=True, unit_divisor=1000, desc="prepare",
               disable=not show_progress, dynamic_ncols=True, smoothing=0.1)
    pool = None
    if workers > 0:  # fork keeps start-up cheap; the workers never touch torch
        methods = multiprocessing.get_all_start_methods()
        pool = multiprocessing.get_context("fork" if "fork" in methods else "spawn").Pool(
            workers, initializer=_init_worker, initargs=worker_args)
    else:
        _worker.update(tokenizer=tokenizer, dtype=np.dtype(worker_args[1]), max_sentence_tokens=worker_args[2])
    in_flight: deque = deque()
    max_in_flight = 2 * max(workers, 1) + 1

    def finish(result: Any, chunk: Chunk) -> None:
        run.consume(result, chunk)
        if run.shard_finished():
            run.save()
        # The bar counts text bytes (MB/s as in the manifest); its total is extrapolated from the on-disk
        # bytes read so far, which is exact for plain files and converges for compressed and columnar ones.
        bar.total = max(run.bytes_read, int(total * run.bytes_read / max(chunk.on_disk, 1)))
        bar.n = run.bytes_read
        bar.set_postfix(docs=f"{run.ordinal:,}", refresh=False)
        bar.refresh()

    try:
        skip = run.chunks
        for index, chunk in enumerate(iter_chunks(sources, columns, run.plan.chunk_bytes)):
            if index < skip:  # consumed by the interrupted run: its results are in the shards already
                continue
            if pool is None:
                finish(_tokenize_chunk(chunk.docs, chunk.fmt, chunk.block), chunk)
                continue
            in_flight.append((pool.apply_async(_tokenize_chunk, (chunk.docs, chunk.fmt, chunk.block)), chunk))
            while len(in_flight) >= max_in_flight:  # back-pressure: never read far ahead of the tokenisers
                result, done = in_flight.popleft()
                finish(result.get(), done)
        while in_flight:
            result, done = in_flight.popleft()
            finish(result.get(), done)
        bar.total = bar.n = run.bytes_read
    finally:
        bar.close()
        if pool is not None:
            pool.terminate()
            pool.join()
    run.finish_heldout()


def _finish(run: _Run, sources: list[Source], tokenizer: Any, vocab_source: str | None, workers: int,
            elapsed: float, resumed: tuple[int, int]) -> dict[str, Any]:
    """Close the shards, check the corpus was text, and write the manifest (last: it marks the corpus whole)."""
    splits = {split: writer.close() for split, writer in run.writers.items()}
    counts, plan = run.counts, run.plan
    names = ", ".join(str(s.path) for s in sources)
    if counts.damaged_share > MAX_DAMAGED_SHARE:
        raise CorpusError(f"{names}: {counts.damaged_lines:,} of {counts.lines:,} non-blank lines "
                          f"({counts.damaged_share:.0%}) are not UTF-8 text or hold nothing but control characters "
                          f"(more than {MAX_DAMAGED_SHARE:.0%}); is this a binary, compressed or non-UTF-8 file?")
    if run.ordinal == 0:
        raise CorpusError(f"no documents with text in {names}")
    split_info = {}
    for split, shards in splits.items():
        split_info[split] = {key: sum(s[key] for s in shards) for key in ("documents", "sentences", "tokens")}
        split_info[split]["shards"] = shards
    manifest = {
        "kind": MANIFEST_KIND,
        "version": MANIFEST_VERSION,
        "vocab": {"sha256": plan.vocab_sha256, "size": len(tokenizer.vocab), "source": vocab_source},
        "token_dtype": run.writers["train"].dtype.name,
        "max_seq_length": plan.max_seq_length,
        "max_sentence_tokens": plan.max_seq_length - 3,
        "inputs": [{"path": str(s.path), "kind": s.kind, "bytes_on_disk": s.bytes_on_disk(), "format": s.fmt,
                    "format_reason": s.reason} for s in sources],
        "columns": {"text": plan.text_column, "document": plan.document_column},
        "counts": {"documents": run.ordinal, "sentences": sum(v["sentences"] for v in split_info.values()),
                   "tokens": sum(v["tokens"] for v in split_info.values()), "bytes_read": run.bytes_read},
        "bad_lines": counts.as_dict(),
        "bad_row_samples": run.bad_rows,
        "damaged_lines": {"count": counts.damaged_lines, "of": counts.lines, "emptied": counts.emptied_lines},
        "heldout": {"fraction": plan.heldout_fraction, "documents": plan.heldout_documents},
        "splits": split_info,
        "seconds": round(elapsed, 3),
        "mb_per_second": round((run.bytes_read - resumed[1]) / 1e6 / max(elapsed, 1e-9), 3),  # this call's
        "workers": workers,
        "resumed_after_chunks": resumed[0],
    }
    from bertforge.atomic import atomic_write_text
    atomic_write_text(run.work / MANIFEST, json.dumps(manifest, indent=2) + "\n")
    return manifest
