"""`bertforge.measuring`, what the benchmark and experiment scripts share: the turns `interleave` gives its
candidates, the tables, the held-out sentences of the corpus's last articles, and where the shared data is."""
from __future__ import annotations

import lzma
import random
from pathlib import Path

from bertforge.measuring import default_shared_data, interleave, last_articles, markdown_table, pick_sentences


def test_interleave_rotates_the_order_and_keeps_a_candidates_own_time():
    calls = []
    candidates = {"a": lambda: calls.append("a"), "b": lambda: calls.append("b") or 0.25, "c": lambda: calls.append("c")}
    times = interleave(candidates, repeats=3, warmup=1)
    assert calls == list("abc") + list("abc") + list("bca") + list("cab")  # the warm-up, then nobody always first
    assert times["b"] == [0.25] * 3  # a candidate's own seconds win over the wall time
    assert len(times["a"]) == 3 and all(0 <= t < 1 for t in times["a"])


def test_markdown_table_pads_every_column_to_its_widest_cell():
    assert markdown_table(["name", "s"], [["bertforge", 1.5], ["hf", 12]]).splitlines() == [
        "| name      | s   |", "|-----------|-----|", "| bertforge | 1.5 |", "| hf        | 12  |"]


class WordTokenizer:
    """One piece per word: enough for the length filter."""

    def encode(self, text: str, add_special_tokens: bool = True) -> list[int]:
        return list(range(len(text.split())))


def test_the_last_articles_give_their_sentences_of_the_wanted_length(tmp_path):
    corpus = tmp_path / "wiki.txt.xz"
    articles = ["First\nan early article that the model has seen in full here.",
                "Second\nShort one. A sentence of exactly seven words here now.\nA Heading.",
                "Third\nthe last article has one long enough sentence in it. Tiny."]
    with lzma.open(corpus, "wt", encoding="utf-8") as handle:
        handle.write("\n\n".join(articles) + "\n")
    last = last_articles(corpus, 2)
    assert last == [["Short one. A sentence of exactly seven words here now.", "A Heading."],
                    ["the last article has one long enough sentence in it. Tiny."]]  # titles dropped
    picked = pick_sentences(last, WordTokenizer(), 10, random.Random(0), min_pieces=5, max_pieces=10)
    assert sorted(picked) == ["A sentence of exactly seven words here now.",
                              "the last article has one long enough sentence in it."]
    assert len(pick_sentences(last, WordTokenizer(), 1, random.Random(0), min_pieces=5, max_pieces=10)) == 1


def test_the_shared_data_sits_beside_the_repository():
    assert default_shared_data() == Path(__file__).resolve().parents[1].parent / "shared" / "data"


def test_a_portable_command_names_no_folder_of_this_machine(minilm_dir):
    from bertforge.measuring import REPO, portable_command
    runs = REPO.parent / "runs" / "long"
    command = portable_command("experiments/x.py", ["--model", str(minilm_dir), "--out", str(runs), "--records",
                                                    "docs/results", "--records=elsewhere", "--glue-args", "a b"])
    assert command == "python experiments/x.py --model \"$MINILM\" --out ../runs/long --glue-args 'a b'"
    assert str(REPO.parent) not in command
