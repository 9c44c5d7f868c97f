"""`prepare_corpus` and the shards it writes: contents, manifest, bad lines, held-out split, errors."""
from __future__ import annotations

import hashlib
import json
import lzma

import numpy as np
import pytest

from bertforge.data import CorpusError, CorpusSplit, PretrainingDataset, load_manifest, prepare_corpus
from bertforge.data.shards import vocab_sha256

DOCS = [
    ["Alice went home. She was tired.", "The next day she slept late."],
    ["A second document. It is short."],
    ["Third one here. Dr. Who visited the U.S. Army base.", "Final line."],
]


def write_corpus(path, docs):
    path.write_text("\n\n".join("\n".join(doc) for doc in docs) + "\n", encoding="utf-8")
    return path


def read_split(data_dir, split="train"):
    """Every document of a split as a list of sentences (lists of ids)."""
    corpus = CorpusSplit(data_dir, split, verify=True)
    docs = []
    for shard in corpus.shards:
        sent, doc = np.asarray(shard.sentence_offsets), np.asarray(shard.document_offsets)
        for d in range(len(doc) - 1):
            docs.append([shard.tokens[sent[s]:sent[s + 1]].tolist() for s in range(doc[d], doc[d + 1])])
    return docs


def prepare(inputs, tokenizer, out, **kwargs):
    kwargs.setdefault("show_progress", False)
    kwargs.setdefault("workers", 0)
    return prepare_corpus(inputs, tokenizer, out, **kwargs)


def test_round_trip_paragraphs(tmp_path, tokenizer):
    src = write_corpus(tmp_path / "c.txt", DOCS)
    manifest = prepare(src, tokenizer, tmp_path / "out", heldout_fraction=0.0)
    expected = [tokenizer.encode_batch_ids(
        ["Alice went home.", "She was tired.", "The next day she slept late."]),
        tokenizer.encode_batch_ids(["A second document.", "It is short."]),
        tokenizer.encode_batch_ids(["Third one here.", "Dr. Who visited the U.S. Army base.", "Final line."])]
    assert read_split(tmp_path / "out") == expected
    assert manifest["counts"] == {"documents": 3, "sentences": 8, "tokens": sum(len(s) for d in expected for s in d),
                                  "bytes_read": src.stat().st_size}
    assert manifest["token_dtype"] == "uint16"
    assert manifest["inputs"][0]["format"] in ("paragraphs", "sentences")  # too little text to tell apart
    assert manifest["vocab"]["sha256"] == vocab_sha256(tokenizer)
    assert load_manifest(tmp_path / "out") == manifest
    for shard in manifest["splits"]["train"]["shards"]:  # per-file sha256 match the files
        for meta in shard["files"].values():
            assert hashlib.sha256((tmp_path / "out" / meta["file"]).read_bytes()).hexdigest() == meta["sha256"]


def test_explicit_formats_and_auto_per_file(tmp_path, tokenizer):
    a = write_corpus(tmp_path / "a.txt", DOCS)
    manifest = prepare([a], tokenizer, tmp_path / "s", input_format="sentences", heldout_fraction=0.0)
    assert manifest["counts"]["sentences"] == 5 and manifest["inputs"][0]["format"] == "sentences"
    para = tmp_path / "p.txt"
    para.write_text("\n\n".join(" ".join(f"Sentence number {i} of paragraph {j}. It ends here." for i in range(4))
                                for j in range(30)) + "\n", encoding="utf-8")
    sent = tmp_path / "s.txt"
    sent.write_text("\n\n".join(f"Sentence {j} stands alone.\nSo does this one." for j in range(30)) + "\n",
                    encoding="utf-8")
    manifest = prepare([para, sent], tokenizer, tmp_path / "auto", heldout_fraction=0.0)
    assert [i["format"] for i in manifest["inputs"]] == ["paragraphs", "sentences"]
    assert manifest["counts"]["documents"] == 60


def test_bad_lines_are_repaired_and_counted(tmp_path, tokenizer):
    src = tmp_path / "bad.txt.xz"
    raw = (b"Good title\nA valid line.\n\n"
           b"Broken \xff\xfe bytes here.\nControl \x00\x1b chars.\n\n"
           b"\x01\x02\n\n"                       # a document with nothing left after cleaning
           b"Last doc.\n")
    with lzma.open(src, "wb") as handle:
        handle.write(raw)
    manifest = prepare(src, tokenizer, tmp_path / "out", heldout_fraction=0.0)
    assert manifest["bad_lines"] == {"invalid_utf8": 1, "control_chars": 2, "empty_documents": 1,
                                     "documents_cut": 0, "long_sentences_split": 0, "bad_rows": 0}
    assert manifest["counts"]["documents"] == 3
    assert manifest["counts"]["bytes_read"] == len(raw)


def test_long_sentences_are_cut_to_fit(tmp_path, tokenizer):
    src = tmp_path / "long.txt"
    src.write_text("Title\n" + " ".join(["word"] * 100) + ".\n", encoding="utf-8")
    manifest = prepare(src, tokenizer, tmp_path / "out", max_seq_length=32, heldout_fraction=0.0,
                       input_format="sentences")
    (doc,) = read_split(tmp_path / "out")
    assert [len(s) for s in doc] == [1, 29, 29, 29, 14]
    assert manifest["bad_lines"]["long_sentences_split"] == 1


def test_workers_and_shards_do_not_change_the_data(tmp_path, tokenizer, wiki_slice_file):
    one = prepare(wiki_slice_file, tokenizer, tmp_path / "one", workers=0, heldout_fraction=0.02)
    many = prepare(wiki_slice_file, tokenizer, tmp_path / "many", workers=2, chunk_bytes=20_000,
                   heldout_fraction=0.02, shard_tokens=20_000)
    assert len(one["splits"]["train"]["shards"]) == 1 and len(many["splits"]["train"]["shards"]) > 3
    for split in ("train", "heldout"):
        assert read_split(tmp_path / "one", split) == read_split(tmp_path / "many", split)
        for key in ("documents", "sentences", "tokens"):
            assert one["splits"][split][key] == many["splits"][split][key]
    assert one["counts"] == many["counts"]
    for shard in many["splits"]["train"]["shards"][:-1]:
        assert shard["tokens"] <= 20_000 or shard["documents"] == 1  # whole documents only


def test_heldout_fraction_is_spread_and_deterministic(tmp_path, tokenizer, wiki_slice_file, wiki_articles):
    m = prepare(wiki_slice_file, tokenizer, tmp_path / "a", heldout_fraction=0.05)
    again = prepare(wiki_slice_file, tokenizer, tmp_path / "b", heldout_fraction=0.05, workers=2)
    held = read_split(tmp_path / "a", "heldout")
    assert held == read_split(tmp_path / "b", "heldout")
    assert m["splits"]["heldout"]["documents"] + m["splits"]["train"]["documents"] == len(wiki_articles)
    assert 0.02 * len(wiki_articles) < len(held) < 0.09 * len(wiki_articles)
    # Spread over the corpus: held-out titles come from both halves of it.
    titles = [a[0] for a in wiki_articles]
    first_ids = {tuple(tokenizer.encode_batch_ids([t])[0]): i for i, t in enumerate(titles)}
    positions = [first_ids[tuple(doc[0])] for doc in held if tuple(doc[0]) in first_ids]
    assert min(positions) < len(titles) / 2 < max(positions)
    train = read_split(tmp_path / "a", "train")
    assert not {tuple(map(tuple, d)) for d in held} & {tuple(map(tuple, d)) for d in train}
    shas = [[f["sha256"] for s in mm["splits"]["heldout"]["shards"] for f in s["files"].values()] for mm in (m, again)]
    assert shas[0] == shas[1]  # byte-identical held-out shards whatever the number of workers


def test_heldout_documents_exact_count(tmp_path, tokenizer, wiki_slice_file, wiki_articles):
    m = prepare(wiki_slice_file, tokenizer, tmp_path / "a", heldout_documents=7, chunk_bytes=30_000)
    m2 = prepare(wiki_slice_file, tokenizer, tmp_path / "b", heldout_documents=7, workers=2)
    assert m["splits"]["heldout"]["documents"] == 7
    assert m["splits"]["train"]["documents"] == len(wiki_articles) - 7
    assert read_split(tmp_path / "a", "heldout") == read_split(tmp_path / "b", "heldout")
    assert m["splits"]["train"]["tokens"] + m["splits"]["heldout"]["tokens"] == m2["counts"]["tokens"]


def test_empty_corpus_is_an_error_naming_the_file(tmp_path, tokenizer):
    src = tmp_path / "empty.txt"
    src.write_text("\n\n   \n\x00\n", encoding="utf-8")
    with pytest.raises(CorpusError, match="empty.txt"):
        prepare(src, tokenizer, tmp_path / "out")
    assert not (tmp_path / "out").exists()
    with pytest.raises(FileNotFoundError, match="missing.txt"):
        prepare(tmp_path / "missing.txt", tokenizer, tmp_path / "out")


def test_refuses_to_overwrite_a_foreign_folder(tmp_path, tokenizer):
    src = write_corpus(tmp_path / "c.txt", DOCS)
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "precious.txt").write_text("keep me")
    with pytest.raises(CorpusError, match="refusing"):
        prepare(src, tokenizer, tmp_path / "out")
    assert (tmp_path / "out" / "precious.txt").read_text() == "keep me"
    prepare(src, tokenizer, tmp_path / "again", heldout_fraction=0.0)
    prepare(src, tokenizer, tmp_path / "again", heldout_fraction=0.0)  # an earlier corpus is replaced


class OtherVocab:
    """The real tokenizer with one vocabulary entry renamed: ids now mean something else."""

    def __init__(self, tokenizer):
        self._tokenizer = tokenizer
        self.vocab = dict(tokenizer.vocab)
        token = next(t for t, i in self.vocab.items() if i == 2000)
        self.vocab["[not-in-any-vocab]"] = self.vocab.pop(token)

    def __getattr__(self, name):
        return getattr(self._tokenizer, name)


def test_vocab_mismatch_at_load_names_the_manifest(tmp_path, tokenizer):
    src = write_corpus(tmp_path / "c.txt", DOCS)
    prepare(src, tokenizer, tmp_path / "out", heldout_fraction=0.0)
    PretrainingDataset(tmp_path / "out", tokenizer)
    with pytest.raises(CorpusError, match=r"vocab mismatch: .*out/manifest.json"):
        PretrainingDataset(tmp_path / "out", OtherVocab(tokenizer))


def test_corruption_and_missing_splits_are_reported(tmp_path, tokenizer):
    src = write_corpus(tmp_path / "c.txt", DOCS)
    prepare(src, tokenizer, tmp_path / "out", heldout_fraction=0.0)
    with pytest.raises(CorpusError, match="heldout"):
        CorpusSplit(tmp_path / "out", "heldout")
    tokens = tmp_path / "out" / "train-00000.tokens.bin"
    data = bytearray(tokens.read_bytes())
    data[0] ^= 1
    tokens.write_bytes(bytes(data))
    CorpusSplit(tmp_path / "out")  # sizes still match: only `verify` reads the bytes
    with pytest.raises(CorpusError, match="train-00000.tokens.bin"):
        CorpusSplit(tmp_path / "out", verify=True)
    with pytest.raises(CorpusError, match="manifest.json"):
        CorpusSplit(tmp_path)


def test_real_slice_manifest(wiki_data, wiki_articles, minilm_dir):
    manifest = json.loads((wiki_data / "manifest.json").read_text())
    assert manifest["counts"]["documents"] == len(wiki_articles)
    assert manifest["inputs"][0]["format"] == "paragraphs"
    # The vocab hash is the hash of the vocab.txt file (Unix line ends), computed from the tokenizer.
    assert manifest["vocab"]["sha256"] == hashlib.sha256((minilm_dir / "vocab.txt").read_bytes()).hexdigest()
    assert len(manifest["splits"]["train"]["shards"]) > 1
    assert manifest["bad_lines"]["invalid_utf8"] == 0 and manifest["bad_lines"]["empty_documents"] == 0


@pytest.mark.slow
def test_whole_shared_corpus(tmp_path, tokenizer, wiki_path):
    """The full 57 MB corpus with 2 workers: every article and every byte arrives (about 45 s here)."""
    manifest = prepare_corpus([wiki_path], tokenizer, tmp_path / "wiki", workers=2, show_progress=False)
    assert manifest["counts"]["documents"] == 36_183
    assert manifest["counts"]["bytes_read"] == 57_066_366
    assert manifest["inputs"][0]["format"] == "paragraphs"
    assert 0.008 < manifest["splits"]["heldout"]["documents"] / 36_183 < 0.012
    print(f"prepare: {manifest['mb_per_second']:.2f} MB/s, {manifest['counts']['tokens']:,} tokens")
