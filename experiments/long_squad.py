"""SQuAD with the whole article as the context: a long model reading each article whole against a 512-token model
reading it in windows (the usual doc-stride chunks), both fine-tuned for the same CPU time.

    python experiments/long_squad.py --long runs/long-documents/long-mlm --short runs/long-documents/short-mlm \
        --out runs/long-squad --cpu-budget 30m

SQuAD v1.1 dev (`../shared/data/squad/dev-v1.1.json.gz`) has 48 articles. Each article's paragraphs are joined
(a blank line between them) into one context of a few thousand tokens, every question's answer offset moved to
match; the articles are split into train and test (`--test-articles`, seeded), and `--test-questions` of the
test articles' questions are scored (a whole-article question costs a forward pass over the article). By
default both contenders train on the train articles' own paragraphs (the same examples, so the same CPU time
buys the same steps); `--train-context article` trains on whole articles instead. Each contender is a
`bertforge finetune --task qa` run with `--max-seq-length` its own (the long model's positions, or 512) and
`--cpu-budget`, then `bertforge evaluate` on the test articles: the official v1.1 F1 and exact match. Every contender's
folder is kept; one already finished is read, not trained again. Prints one JSON object (also OUT/results.json).
"""
from __future__ import annotations

import argparse
import gzip
import json
import random
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

REPO = Path(__file__).resolve().parents[1]
SQUAD = REPO.parent / "shared" / "data" / "squad" / "dev-v1.1.json.gz"
JOIN = "\n\n"


def whole_articles(squad: dict[str, Any]) -> list[dict[str, Any]]:
    """Each SQuAD article as one paragraph: its contexts joined by a blank line, every answer_start shifted by the
    characters before its paragraph (the answer text is where the offset says: checked)."""
    out = []
    for article in squad["data"]:
        parts, qas, offset = [], [], 0
        for paragraph in article["paragraphs"]:
            for qa in paragraph["qas"]:
                answers = [{"text": a["text"], "answer_start": a["answer_start"] + offset} for a in qa["answers"]]
                qas.append({**qa, "answers": answers})
            parts.append(paragraph["context"])
            offset += len(paragraph["context"]) + len(JOIN)
        context = JOIN.join(parts)
        for qa in qas:
            for a in qa["answers"]:
                if context[a["answer_start"]:a["answer_start"] + len(a["text"])] != a["text"]:
                    raise ValueError(f"{article['title']}: question {qa['id']}: the answer moved off its text")
        out.append({"title": article["title"], "paragraphs": [{"context": context, "qas": qas}]})
    return out


def split_articles(articles: Sequence[dict], test_articles: int, seed: int) -> tuple[list[dict], list[dict]]:
    """(train, test): `test_articles` articles drawn with `seed` are the test set, the rest train."""
    order = list(range(len(articles)))
    random.Random(seed).shuffle(order)
    test = set(order[:test_articles])
    return [a for i, a in enumerate(articles) if i not in test], [a for i, a in enumerate(articles) if i in test]


def write_squad(path: Path, articles: Sequence[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"version": "1.1", "data": list(articles)}), encoding="utf-8")


@dataclass(frozen=True)
class Contender:
    name: str
    model: str
    max_seq_length: int


def run_contender(contender: Contender, data: Path, out: Path, args: argparse.Namespace) -> dict[str, Any]:
    """Fine-tune one contender on data/train.json (a finished run is kept), then score it with `bertforge evaluate`
    on data/dev.json (the test articles), reading inputs up to its own length: its test metrics."""
    from bertforge.evaluation.evaluate import EvaluateSettings, evaluate
    from bertforge.evaluation.evaluation_report import EvaluationReport
    from bertforge.tasks.finetune import FinetuneSettings, finetune
    from bertforge.tasks.finetune_report import FinetuneReport, read_finetune_report
    folder, scored = out / contender.name, out / f"{contender.name}-test"
    if (folder / FinetuneReport.FILE).is_file():
        report = read_finetune_report(folder)
    else:  # the test is scored below, once: the run's own evaluation reads one question
        report = finetune(FinetuneSettings(
            model=contender.model, output=str(folder), task="qa", data=str(data), max_eval_samples=1,
            max_seq_length=contender.max_seq_length, cpu_budget=args.cpu_budget, epochs=args.epochs,
            batch_size=args.batch_size, learning_rates=(args.lr,), seed=args.seed, save_every=args.save_every,
            doc_stride=args.doc_stride or contender.max_seq_length // 2), say=print)
    if (scored / EvaluationReport.FILE).is_file():
        test = EvaluationReport.from_json(scored / EvaluationReport.FILE)
    else:
        test = evaluate(EvaluateSettings(model=str(folder), eval=str(data / "dev.json"), output=str(scored)))
    run = report.runs[0] if report.runs else {}
    return {"model": contender.model, "max_seq_length": contender.max_seq_length, "steps": run.get("steps"),
            "train_features": report.n_train_features, "f1": test.eval.get("f1"),
            "exact_match": test.eval.get("exact_match")}


def sample_questions(articles: Sequence[dict], count: int | None, seed: int) -> list[dict]:
    """The articles with a seeded sample of `count` of their questions in all (None: every question)."""
    ids = [qa["id"] for a in articles for p in a["paragraphs"] for qa in p["qas"]]
    keep = set(ids if count is None or count >= len(ids) else random.Random(seed).sample(ids, count))
    return [{**a, "paragraphs": [{**p, "qas": [qa for qa in p["qas"] if qa["id"] in keep]} for p in a["paragraphs"]]}
            for a in articles]


GROUP = "long-squad"
#: The results table (docs/LONG.md): each contender's test F1 / exact match and its fine-tuning steps.
TABLE = {"header": ["contender", "reads each test article", "F1", "exact match", "fine-tuning steps"],
         "align": ["---", "---", "---:", "---:", "---:"],
         "rows": [[name, reads, f"{{{GROUP}/{name}/f1}}", f"{{{GROUP}/{name}/exact-match}}",
                   f"{{{GROUP}/{name}/steps|bare}}"] for name, reads in (("long", "whole (4,096-token windows)"),
                                      ("short-chunks", "in 512-token windows"))]}


def make_records(summary: dict[str, Any], command: str) -> list:
    """Each contender's test F1 and exact match (%) and its fine-tuning steps, as results-store records."""
    from bertforge.results_store import Record
    data = (f"SQuAD v1.1 dev, whole articles: {summary['train_articles']} articles trained on "
            f"({summary['train_context']} contexts), {summary['test_questions']} questions of {summary['test_articles']} "
            "other articles scored")
    records = []
    for name, row in summary["results"].items():
        reads = (f"the long model (--long) reading the article in {row['max_seq_length']:,}-token windows"
                 if name == "long" else f"the 512-token model (--short) reading it in {row['max_seq_length']}-token "
                 "windows")
        for metric, label in (("f1", "F1"), ("exact_match", "exact match")):
            records.append(Record.measured(f"{GROUP}/{name}/{metric.replace('_', '-')}", row[metric], "%",
                                           f"official SQuAD v1.1 {label} of {reads}", data,
                                           command=command, digits=1))
        records.append(Record.measured(f"{GROUP}/{name}/steps", row["steps"], "steps",
                                       f"fine-tuning steps of {name} in {summary['cpu_budget_seconds']:.0f} CPU-s",
                                       data, command=command, digits=0))
    return records


def main(argv: Sequence[str] | None = None) -> int:
    from bertforge.pretraining.pretrain import parse_duration
    from bertforge.model.auto import AutoConfig
    from bertforge.tasks.predictor import model_positions
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--long", required=True, help="the long model (a lengthened, MLM-trained folder)")
    p.add_argument("--short", required=True, help="the 512-token model it was lengthened from")
    p.add_argument("--out", required=True, type=Path, help="folder for the data and every contender's run")
    p.add_argument("--squad", type=Path, default=SQUAD, help="SQuAD v1.1 JSON (.gz read too)")
    p.add_argument("--cpu-budget", type=parse_duration, required=True, metavar="DURATION",
                   help="CPU time of each contender's fine-tuning, e.g. 30m")
    p.add_argument("--test-articles", type=int, default=12, help="articles held out for the test (default: 12)")
    p.add_argument("--test-questions", type=int, default=200,
                   help="a seeded sample of the test articles' questions (default: 200; 0: all)")
    p.add_argument("--train-context", choices=("article", "paragraph"), default="paragraph",
                   help="train on the train articles' paragraphs (default: both contenders see the same examples) "
                   "or on whole articles (each read at its contender's length)")
    p.add_argument("--epochs", type=float, default=3.0, help="passes the budget may reach (default: 3)")
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--lr", type=float, default=5e-5)
    p.add_argument("--doc-stride", type=int, default=None,
                   help="tokens between window starts (default: half the contender's length)")
    p.add_argument("--only", choices=("long", "short-chunks"), default=None,
                   help="run one contender (two processes can run the two; a run without --only then reads both)")
    p.add_argument("--save-every", type=int, default=50)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--records", default=None, metavar="DIR",
                   help="also write each contender's F1, exact match and steps as results-store records (group "
                   "long-squad) into DIR")
    args = p.parse_args(argv)
    opener = gzip.open if args.squad.suffix == ".gz" else open
    with opener(args.squad, "rt", encoding="utf-8") as handle:
        squad = json.load(handle)
    articles = whole_articles(squad)
    train, test = split_articles(articles, args.test_articles, args.seed)
    data = args.out / "data"
    if args.train_context == "paragraph":
        titles = {a["title"] for a in train}
        train = [a for a in squad["data"] if a["title"] in titles]
    write_squad(data / "train.json", train)
    test = sample_questions(test, args.test_questions or None, args.seed)
    write_squad(data / "dev.json", test)
    chosen = [name for name in ("long", "short-chunks") if args.only in (None, name)]
    results = {}
    for name in chosen:  # the long model's length is its position table
        contender = (Contender(name, args.long, model_positions(AutoConfig.from_pretrained(args.long)))
                     if name == "long" else Contender(name, args.short, 512))
        results[name] = run_contender(contender, data, args.out, args)
    summary = {"train_articles": len(train), "test_articles": len(test),
               "test_questions": sum(len(p["qas"]) for a in test for p in a["paragraphs"]),
               "train_context": args.train_context, "cpu_budget_seconds": args.cpu_budget, "results": results}
    if args.records:
        from bertforge.results_store import write_records
        from bertforge.measuring import portable_command
        command = portable_command("experiments/long_squad.py", list(sys.argv[1:] if argv is None else argv))
        write_records(GROUP, make_records(summary, command), args.records, tables={GROUP: TABLE})
    name = "results.json" if args.only is None else f"results-{args.only}.json"
    (args.out / name).write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(summary, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
