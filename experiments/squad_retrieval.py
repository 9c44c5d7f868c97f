"""SQuAD v1.1 dev as a retrieval task: each question's query finds the paragraph it was asked about.

Only the dev set is available offline (48 articles, 2,067 paragraphs, 10,570 questions), so it is split BY
ARTICLE, as the rest of the project splits it: articles 0-37 give training pairs (question -> paragraph) and
articles 38-47 the held-out retrieval set, whose corpus holds only their own paragraphs (no passage of a training
article is ever retrieved or trained on at evaluation). Writes

    OUT/train.jsonl                      {"anchor": question, "positive": paragraph} per training question
    OUT/eval/corpus.jsonl                {"_id": "p<article>_<paragraph>", "title", "text"} (BEIR layout)
    OUT/eval/queries.jsonl               {"_id": question id, "text"}
    OUT/eval/qrels/test.tsv              query-id, corpus-id, score (1)
    OUT/all/...                          the same layout over all 48 articles (the issue's 10,570 x 2,067 task)

    python experiments/squad_retrieval.py --out ../runs/squad-retrieval [--squad ../shared/data/squad/dev-v1.1.json.gz]
    bertforge evaluate --task retrieval --model MODEL --data ../runs/squad-retrieval/eval
    bertforge train-embeddings --model MODEL --train ../runs/squad-retrieval/train.jsonl --output tuned
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any, Iterable

ROOT = Path(__file__).resolve().parents[1]

from bertforge.atomic import atomic_write_text  # noqa: E402
from bertforge.tasks.readers import load_squad_json, split_squad_by_article  # noqa: E402

SQUAD = ROOT.parent / "shared" / "data" / "squad" / "dev-v1.1.json.gz"
TRAIN_ARTICLES, EVAL_ARTICLES = range(0, 38), range(38, 48)


def paragraphs(articles: Iterable[tuple[int, dict[str, Any]]]):
    """(paragraph id, title, context, [(question id, question)]) of each paragraph."""
    for a, article in articles:
        title = article["title"].replace("_", " ")
        for p, paragraph in enumerate(article["paragraphs"]):
            yield f"p{a}_{p}", title, paragraph["context"], [(q["id"], q["question"]) for q in paragraph["qas"]]


def write_beir(folder: Path, articles: list[tuple[int, dict[str, Any]]]) -> dict[str, int]:
    """The articles' paragraphs as a corpus and their questions as queries, each relevant to its paragraph."""
    corpus, queries, qrels = [], [], ["query-id\tcorpus-id\tscore"]
    for pid, title, context, questions in paragraphs(articles):
        corpus.append(json.dumps({"_id": pid, "title": title, "text": context}))
        for qid, question in questions:
            queries.append(json.dumps({"_id": qid, "text": question}))
            qrels.append(f"{qid}\t{pid}\t1")
    (folder / "qrels").mkdir(parents=True, exist_ok=True)
    atomic_write_text(folder / "corpus.jsonl", "\n".join(corpus) + "\n")
    atomic_write_text(folder / "queries.jsonl", "\n".join(queries) + "\n")
    atomic_write_text(folder / "qrels" / "test.tsv", "\n".join(qrels) + "\n")
    return {"paragraphs": len(corpus), "questions": len(queries), "articles": len(articles)}


def write_pairs(path: Path, articles: list[tuple[int, dict[str, Any]]]) -> int:
    """One (question, paragraph) training pair per question; the paragraph is titled as in the corpus."""
    lines = [json.dumps({"anchor": question, "positive": f"{title} {context}"})
             for _, title, context, questions in paragraphs(articles) for _, question in questions]
    atomic_write_text(path, "\n".join(lines) + "\n")
    return len(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--squad", type=Path, default=SQUAD, help="SQuAD v1.1 dev JSON (.gz)")
    parser.add_argument("--out", type=Path, required=True, help="folder to write the sets into")
    args = parser.parse_args(argv)
    data = load_squad_json(args.squad)["data"]
    indexed = list(enumerate(data))
    train, held_out = split_squad_by_article(indexed, TRAIN_ARTICLES, EVAL_ARTICLES)
    args.out.mkdir(parents=True, exist_ok=True)
    summary = {"train_pairs": write_pairs(args.out / "train.jsonl", train),
               "train_articles": len(train),
               "eval": write_beir(args.out / "eval", held_out),
               "all": write_beir(args.out / "all", indexed)}
    atomic_write_text(args.out / "summary.json", json.dumps(summary, indent=2) + "\n")
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
