"""`prepare_corpus` on every input format: the same text gives the same shards in every format, for any number of
workers, and an interrupted run continues to the same shards."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bertforge.data import RecordError, prepare_corpus
from bertforge.data import prepare as prepare_module

from needs import require_module

ARTICLES = 120


def shard_digests(manifest):
    """sha256 of every shard file of both splits, in order: equal lists mean byte-identical corpora."""
    return [(meta["file"], meta["sha256"]) for split in ("train", "heldout")
            for shard in manifest["splits"][split]["shards"] for meta in shard["files"].values()]


def prepare(inputs, tokenizer, out, **kwargs):
    kwargs.setdefault("show_progress", False)
    kwargs.setdefault("workers", 0)
    kwargs.setdefault("heldout_fraction", 0.05)
    return prepare_corpus(inputs, tokenizer, out, **kwargs)


@pytest.fixture(scope="module")
def articles(wiki_articles):
    return wiki_articles[:ARTICLES]


@pytest.fixture(scope="module")
def as_text(articles, tmp_path_factory):
    path = tmp_path_factory.mktemp("formats") / "corpus.txt"
    path.write_text("\n\n".join("\n".join(a) for a in articles) + "\n", encoding="utf-8")
    return path


def test_the_same_text_gives_the_same_shards_in_every_format(tmp_path, tokenizer, articles, as_text):
    pa = require_module("pyarrow", "pip install 'bertforge[data]'")
    import pyarrow.parquet as pq
    datasets = require_module("datasets")
    texts = ["\n".join(a) for a in articles]
    with open(tmp_path / "corpus.jsonl", "w", encoding="utf-8") as handle:
        for i, text in enumerate(texts):
            handle.write(json.dumps({"id": i, "text": text}) + "\n")
    pq.write_table(pa.table({"body": texts}), tmp_path / "corpus.parquet", row_group_size=32)
    datasets.Dataset.from_dict({"text": texts}).save_to_disk(str(tmp_path / "saved"))
    # a paragraph per row, documents told apart by their id: the same documents once the rows are joined
    rows = [(f"doc-{i}", line) for i, a in enumerate(articles) for line in a]
    pq.write_table(pa.table({"doc": [d for d, _ in rows], "text": [t for _, t in rows]}), tmp_path / "rows.parquet",
                   row_group_size=500)

    reference = prepare(as_text, tokenizer, tmp_path / "from-text")
    assert reference["splits"]["heldout"]["documents"] > 0
    for name, kwargs in (("corpus.jsonl", {}), ("corpus.parquet", {"text_column": "body"}), ("saved", {}),
                         ("rows.parquet", {"document_column": "doc"})):
        manifest = prepare(tmp_path / name, tokenizer, tmp_path / f"from-{name}", **kwargs)
        assert shard_digests(manifest) == shard_digests(reference), name
        assert manifest["counts"]["documents"] == len(articles)
    # without the document column every paragraph is a document of its own: other shards
    apart = prepare(tmp_path / "rows.parquet", tokenizer, tmp_path / "apart")
    assert apart["counts"]["documents"] == len(rows)


def test_more_workers_give_byte_identical_shards(tmp_path, tokenizer, as_text):
    one = prepare(as_text, tokenizer, tmp_path / "one", workers=1, chunk_bytes=8_000, shard_tokens=8_000)
    two = prepare(as_text, tokenizer, tmp_path / "two", workers=2, chunk_bytes=8_000, shard_tokens=8_000)
    assert len(one["splits"]["train"]["shards"]) > 3
    assert shard_digests(one) == shard_digests(two)


class Interrupted(Exception):
    """Stands for a kill: raised in the middle of a run, after some checkpoints and before the next one."""


@pytest.mark.parametrize("heldout", [{"heldout_fraction": 0.05}, {"heldout_documents": 6}])
def test_an_interrupted_run_continues_to_the_same_shards(tmp_path, tokenizer, as_text, monkeypatch, heldout):
    kwargs = dict(chunk_bytes=6_000, shard_tokens=6_000, **heldout)
    whole = prepare(as_text, tokenizer, tmp_path / "whole", **kwargs)
    saves = []
    consume = prepare_module._Run.consume
    real_save = prepare_module._Run.save

    def save(run):
        real_save(run)
        saves.append(run.chunks)

    def consume_then_die(run, result, chunk):
        consume(run, result, chunk)
        if len(saves) >= 2 and run.chunks == saves[1] + 2:  # two chunks past the second checkpoint
            raise Interrupted

    monkeypatch.setattr(prepare_module._Run, "save", save)
    monkeypatch.setattr(prepare_module._Run, "consume", consume_then_die)
    with pytest.raises(Interrupted):
        prepare(as_text, tokenizer, tmp_path / "out", **kwargs)
    assert not (tmp_path / "out").exists() and (tmp_path / ".out.partial" / prepare_module.STATE).is_file()

    monkeypatch.setattr(prepare_module._Run, "consume", consume)
    tokenized = []
    tokenize = prepare_module._tokenize_chunk
    monkeypatch.setattr(prepare_module, "_tokenize_chunk", lambda *a: tokenized.append(1) or tokenize(*a))
    resumed = prepare(as_text, tokenizer, tmp_path / "out", **kwargs)
    assert resumed["resumed_after_chunks"] == saves[1]
    assert len(tokenized) == whole_chunks(as_text, kwargs["chunk_bytes"]) - saves[1]  # the finished ones are not redone
    assert shard_digests(resumed) == shard_digests(whole)
    assert resumed["counts"] == whole["counts"] and resumed["bad_lines"] == whole["bad_lines"]
    assert not (tmp_path / ".out.partial").exists()


KILLED_RUN = """
import sys, time
from pathlib import Path
from bertforge.data import prepare as p
corpus, vocab, out, marker = sys.argv[1:5]
if marker != "-":  # after the second checkpoint: say so, and go on slowly enough to be killed mid-shard
    saves, save, consume = [], p._Run.save, p._Run.consume
    p._Run.save = lambda run: save(run) or saves.append(run.chunks)
    def consume_slowly(run, result, chunk):
        consume(run, result, chunk)
        if len(saves) >= 2:
            Path(marker).touch()
            time.sleep(0.2)
    p._Run.consume = consume_slowly
p.prepare_corpus(corpus, vocab, out, workers=2, chunk_bytes=8_000, shard_tokens=8_000, heldout_fraction=0.05,
                 show_progress=False)
"""


@pytest.mark.slow
def test_a_run_killed_with_sigkill_and_run_again_gives_the_same_bytes(tmp_path, minilm_dir, as_text):
    """A real kill of the process and its two tokenizer processes, part-way through a shard after two
    checkpoints; the same call again continues and writes the shards an uninterrupted run writes, byte for byte."""
    whole = prepare(as_text, minilm_dir, tmp_path / "whole", chunk_bytes=8_000, shard_tokens=8_000)
    script = tmp_path / "run.py"
    script.write_text(KILLED_RUN, encoding="utf-8")
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2] / "src"), OMP_NUM_THREADS="1")
    marker, out = tmp_path / "two-checkpoints", tmp_path / "out"
    argv = [sys.executable, str(script), str(as_text), str(minilm_dir), str(out)]
    run = subprocess.Popen([*argv, str(marker)], env=env, start_new_session=True)
    deadline = time.monotonic() + 900
    while not marker.exists() and run.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    os.killpg(run.pid, signal.SIGKILL)  # the tokenizer processes too
    assert run.wait(timeout=60) == -signal.SIGKILL
    assert not out.exists()
    partial = json.loads((tmp_path / ".out.partial" / prepare_module.STATE).read_text(encoding="utf-8"))
    assert partial["chunks"] > 0

    subprocess.run([*argv, "-"], env=env, check=True, timeout=900)
    resumed = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    assert resumed["resumed_after_chunks"] == partial["chunks"]
    files = [name for name, _ in shard_digests(whole)]
    assert files == [name for name, _ in shard_digests(resumed)] and len(files) > 6
    for name in files:
        assert (out / name).read_bytes() == (tmp_path / "whole" / name).read_bytes(), name
    assert not (tmp_path / ".out.partial").exists()


def whole_chunks(path, chunk_bytes):
    from bertforge.data.sources import Columns, iter_chunks, open_sources
    columns = Columns()
    return sum(1 for _ in iter_chunks(open_sources([path], "auto", columns), columns, chunk_bytes))


def test_a_changed_input_starts_over(tmp_path, tokenizer, as_text, monkeypatch):
    """A checkpoint of other inputs is not continued: the shards are those of the input as it is now."""
    corpus = tmp_path / "c.txt"
    corpus.write_bytes(as_text.read_bytes())
    kwargs = dict(chunk_bytes=6_000, shard_tokens=6_000)

    real_save = prepare_module._Run.save

    def die_after_first_save(run):
        real_save(run)
        raise Interrupted

    monkeypatch.setattr(prepare_module._Run, "save", die_after_first_save)
    with pytest.raises(Interrupted):
        prepare(corpus, tokenizer, tmp_path / "out", **kwargs)
    monkeypatch.undo()
    corpus.write_text("A different text. It has two sentences.\n", encoding="utf-8")
    manifest = prepare(corpus, tokenizer, tmp_path / "out", **kwargs)
    assert manifest["resumed_after_chunks"] == 0 and manifest["counts"]["documents"] == 1


def test_bad_rows_are_named_or_skipped_and_counted(tmp_path, tokenizer):
    src = tmp_path / "bad.jsonl"
    src.write_text('{"text": "A good row. It has text."}\n{"text": 3}\n{"title": "no text"}\nnot json\n'
                   '{"text": "Another good row."}\n', encoding="utf-8")
    with pytest.raises(RecordError) as err:
        prepare(src, tokenizer, tmp_path / "out")
    assert str(err.value) == f"{src}, line 2, field 'text': expected a string, got int 3"
    assert not (tmp_path / "out").exists() and not (tmp_path / ".out.partial").exists()
    manifest = prepare(src, tokenizer, tmp_path / "out", skip_bad_rows=True, heldout_fraction=0.0)
    assert manifest["bad_lines"]["bad_rows"] == 3 and manifest["counts"]["documents"] == 2
    assert manifest["bad_row_samples"][1] == f"{src}, line 3, field 'text': expected a string, got nothing " \
                                             "(null or missing)"
    assert manifest["bad_row_samples"][2].startswith(f"{src}, line 4: expected one JSON object per line, got invalid")


def test_columnar_errors_name_the_file_and_column(tmp_path, tokenizer):
    pa = require_module("pyarrow", "pip install 'bertforge[data]'")
    import pyarrow.parquet as pq
    pq.write_table(pa.table({"body": ["Some text."]}), tmp_path / "a.parquet")
    with pytest.raises(RecordError, match=r"a.parquet, field 'text': expected a column 'text' in the schema, "
                                          r"got columns body$"):
        prepare(tmp_path / "a.parquet", tokenizer, tmp_path / "out")
    pq.write_table(pa.table({"text": ["Fine.", None, "Fine again."]}), tmp_path / "b.parquet")
    with pytest.raises(RecordError, match=r"b.parquet, row 2, field 'text': expected a string, got nothing"):
        prepare(tmp_path / "b.parquet", tokenizer, tmp_path / "out")
    data = (tmp_path / "b.parquet").read_bytes()
    (tmp_path / "c.parquet").write_bytes(data[:len(data) // 2])  # cut short: no footer
    with pytest.raises(RecordError, match=r"c.parquet: expected a readable Parquet file, got ArrowInvalid"):
        prepare(tmp_path / "c.parquet", tokenizer, tmp_path / "out")


@pytest.mark.slow
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGKILL], ids=["SIGTERM", "SIGKILL"])
def test_no_tokenizer_process_outlives_a_killed_prepare(signum, tmp_path, minilm_dir, wiki_path):
    """`bertforge prepare --workers 2` on the whole Wikipedia file, its own process killed (not its group) while
    its tokenizer processes work: within seconds none of them is left (before, a SIGTERM left them tokenizing
    the chunk they held, and fed by nobody)."""
    from processes import descendants, kill_leftovers, left_alive, need_proc, wait_for
    need_proc()
    out = tmp_path / "shards"
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2] / "src"), OMP_NUM_THREADS="1")
    driver = subprocess.Popen([sys.executable, "-m", "bertforge", "prepare", "--input", str(wiki_path), "--vocab",
                               str(minilm_dir), "--output", str(out), "--workers", "2", "--no-progress"], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    started: set[int] = set()
    try:
        wait_for(lambda: len(descendants(driver.pid)) >= 2 and (tmp_path / ".shards.partial").exists(), 300,
                 "tokenizer processes at work", driver)
        started = descendants(driver.pid)
        driver.send_signal(signum)
        output, _ = driver.communicate(timeout=120)
        assert left_alive(started) == set(), f"tokenizer processes outlived prepare killed by {signum.name}"
        if signum == signal.SIGTERM:
            assert driver.returncode == 128 + signal.SIGTERM and "terminated" in output, output
    finally:
        kill_leftovers(started)
        if driver.poll() is None:
            driver.kill()
            driver.wait()
