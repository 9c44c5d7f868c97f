"""Does length pay? A 512-token BERT is lengthened to 4,096 positions (`bertforge lengthen`), pre-trained further
with MLM on whole Wikipedia articles, and asked about held-out articles: the MLM loss on masked tokens past
position 512, with the whole article as context against the same article cut into 512-token chunks (the very
same masked tokens scored both ways; the source model on the chunks beside them).

    python experiments/long_documents.py --model CHECKPOINT --out runs/long-documents --max-steps 3000

CHECKPOINT is a BERT or RoBERTa folder with an MLM head (a `bertforge pretrain` output). A folder without one,
such as all-MiniLM-L6-v2, first gets its head trained by MLM at 512 tokens (`--short-budget`, CPU time), and that
512-token checkpoint is the one lengthened and the one the chunks are compared with. `--long-budget` bounds the
continued pre-training by CPU time instead of `--max-steps`. Every stage writes into
--out and is skipped when its output is complete, so the same command continues an interrupted run (the
pre-training resumes from its newest checkpoint). Prints one JSON object (also written to OUT/results.json).
"""
from __future__ import annotations

import argparse
import json
import lzma
import math
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Sequence

REPO = Path(__file__).resolve().parents[1]
WIKI = REPO.parent / "shared" / "data" / "corpus" / "wikipedia-en-2018" / "wiki_en.txt.xz"
SHORT = 512


@dataclass(frozen=True)
class Plan:
    """Where each stage writes and how big it is."""

    model: Path
    out: Path
    max_positions: int = 4096
    attention_window: int = 512
    eval_articles: int = 200
    train_articles: int = 20_000
    train_min_tokens: int = 0
    max_steps: int = 3000
    batch_size: int = 8
    grad_accum: int = 8
    mask_rate: float = 0.15
    seed: int = 0
    short_budget: float | None = None
    long_budget: float | None = None
    short_batch_size: int = 8
    lr: float = 1e-4
    warmup_steps: int = 0


def articles(path: Path = WIKI) -> Iterable[str]:
    """The corpus's articles (blank-line separated), whole, in order."""
    lines: list[str] = []
    with lzma.open(path, "rt", encoding="utf-8") as handle:
        for line in handle:
            if line.strip():
                lines.append(line.strip())
            elif lines:
                yield "\n".join(lines)
                lines = []
    if lines:
        yield "\n".join(lines)


def split_articles(source: Iterable[str], tokenizer, eval_count: int, train_count: int,
                   min_tokens: int = 2 * SHORT, train_min_tokens: int = 0) -> tuple[list[str], list[str]]:
    """(held-out, train): the first `eval_count` articles of at least `min_tokens` tokens are held out; the
    `train_count` articles of at least `train_min_tokens` after the first held-out one, but for the held-out ones,
    are trained on."""
    held, train = [], []
    for text in source:
        length = len(tokenizer(text, add_special_tokens=False)["input_ids"])
        if len(held) < eval_count and length >= min_tokens:
            held.append(text)
        elif held and length >= train_min_tokens:
            train.append(text)
        if len(held) >= eval_count and len(train) >= train_count:
            break
    return held, train


def masked_positions(length: int, start: int, rate: float, seed: int) -> list[int]:
    """Content positions >= `start` (of `length`) to mask: a seeded `rate` of them, at least one when any."""
    import numpy as np
    candidates = np.arange(start, length)
    if not len(candidates):
        return []
    count = max(1, round(rate * len(candidates)))
    return sorted(np.random.default_rng(seed).choice(candidates, size=count, replace=False).tolist())


def chunk_spans(length: int, chunk: int) -> list[tuple[int, int]]:
    """Consecutive [start, end) spans of at most `chunk` content tokens covering `length` tokens."""
    return [(s, min(s + chunk, length)) for s in range(0, length, chunk)]


def masked_loss(model, rows: Sequence[tuple[list[int], dict[int, int]]], cls_id: int, sep_id: int) -> tuple[float, int]:
    """(summed MLM loss, tokens scored) of `model` on rows of content ids (masked) each with {row position:
    true id}; every row is read as [CLS] ids [SEP], one row per call."""
    import torch
    total, count = 0.0, 0
    with torch.no_grad():
        for ids, answers in rows:
            if not answers:
                continue
            row = torch.tensor([[cls_id, *ids, sep_id]])
            out = model(row, attention_mask=torch.ones_like(row), token_type_ids=torch.zeros_like(row))
            logits = out.logits[0]
            where = torch.tensor([p + 1 for p in answers])
            want = torch.tensor(list(answers.values()))
            total += float(torch.nn.functional.cross_entropy(logits[where], want, reduction="sum"))
            count += len(answers)
    return total, count


def score_article(model, tokens: list[int], masked: list[int], mask_id: int, cls_id: int, sep_id: int,
                  chunk: int | None) -> tuple[float, int]:
    """The masked tokens' summed loss with the whole article as context (`chunk` None) or with each chunk of
    `chunk` content tokens read on its own; the same tokens are masked and scored either way."""
    ids = list(tokens)
    for p in masked:
        ids[p] = mask_id
    spans = [(0, len(ids))] if chunk is None else chunk_spans(len(ids), chunk)
    rows = [(ids[s:e], {p - s: tokens[p] for p in masked if s <= p < e}) for s, e in spans]
    return masked_loss(model, rows, cls_id, sep_id)


def length_pays(models: dict[str, tuple[Any, int | None]], tokenizer, texts: Sequence[str], max_tokens: int,
                rate: float, seed: int) -> dict[str, Any]:
    """{name: mean loss} of each (model, chunk) on the masked tokens past position SHORT of `texts`."""
    sums = {name: [0.0, 0] for name in models}
    for index, text in enumerate(texts):
        tokens = tokenizer(text, add_special_tokens=False)["input_ids"][:max_tokens - 2]
        masked = masked_positions(len(tokens), SHORT, rate, seed + index)
        for name, (model, chunk) in models.items():
            loss, count = score_article(model, tokens, masked, tokenizer.mask_token_id, tokenizer.cls_token_id,
                                        tokenizer.sep_token_id, chunk)
            sums[name][0] += loss
            sums[name][1] += count
    return {name: {"mlm_loss": total / max(count, 1), "perplexity": math.exp(total / max(count, 1)),
                   "tokens": count} for name, (total, count) in sums.items()}


def has_mlm_head(folder: Path) -> bool:
    """Whether the folder's weights hold an MLM head (BERT's `cls.predictions`, RoBERTa's `lm_head`)."""
    from bertforge.checkpoint import read_state_dict
    return any(k.startswith(("cls.predictions.", "lm_head.")) for k in read_state_dict(Path(folder))[0])


def run(plan: Plan) -> dict[str, Any]:
    """Every stage, each skipped when its output is complete: split, lengthen, prepare, pre-train, score."""
    from bertforge.data import prepare_corpus
    from bertforge.model.auto import AutoModelForMaskedLM
    from bertforge.model.lengthen import LengthenSettings, lengthen
    from bertforge.pretraining.pretrain import pretrain
    from bertforge.tokenization import load_tokenizer
    from bertforge.training.summary import TrainingSummary
    out = plan.out
    out.mkdir(parents=True, exist_ok=True)
    tokenizer = load_tokenizer(plan.model)
    held_file, train_file = out / "heldout.jsonl", out / "train.txt"
    long_file = out / "train-long.txt"  # the continued pre-training's articles: the long ones, when asked
    if not held_file.exists():
        held, train = split_articles(articles(), tokenizer, plan.eval_articles, plan.train_articles)
        train_file.write_text("\n\n".join(train) + "\n", encoding="utf-8")
        held_file.write_text("".join(json.dumps(t) + "\n" for t in held), encoding="utf-8")
    if not long_file.exists():
        _, train = split_articles(articles(), tokenizer, plan.eval_articles, plan.train_articles,
                                  train_min_tokens=plan.train_min_tokens)
        long_file.write_text("\n\n".join(train) + "\n", encoding="utf-8")
    held = [json.loads(line) for line in held_file.read_text(encoding="utf-8").splitlines()]
    from bertforge.config import has_config
    budget = {"max_steps": None, "cpu_budget": plan.long_budget} if plan.long_budget else {"max_steps": plan.max_steps}
    engine = {"lr": plan.lr, "warmup_steps": plan.warmup_steps, "seed": plan.seed, "save_every": 200}
    start = plan.model
    if plan.short_budget or not has_mlm_head(plan.model):
        if not plan.short_budget:
            raise SystemExit(f"{plan.model} has no MLM head: give --short-budget to train one at {SHORT} tokens first")
        short_data, start = out / "wiki-short", out / "short-mlm"
        if not (short_data / "manifest.json").exists():
            prepare_corpus([train_file], str(plan.model), short_data, heldout_fraction=0.01, max_seq_length=SHORT)
        pretrain(short_data, start, init_from=str(plan.model), objective="mlm", packing="doc-sentences",
                 max_seq_length=SHORT, batch_size=plan.short_batch_size, grad_accum=1, cpu_budget=plan.short_budget,
                 **{**engine, "max_steps": None})
    long = out / "long"
    if not has_config(long):
        lengthen(LengthenSettings(model=str(start), output=str(long), max_positions=plan.max_positions,
                                  attention_window=plan.attention_window), say=print)
    prepared = out / "wiki-long"
    if not (prepared / "manifest.json").exists():
        prepare_corpus([long_file], str(long), prepared, heldout_fraction=0.01, max_seq_length=plan.max_positions)
    trained = out / "long-mlm"
    pretrain(prepared, trained, init_from=str(long), objective="mlm", packing="doc-sentences",
             seq_len_schedule=f"{plan.max_positions}:1", batch_size=plan.batch_size, grad_accum=plan.grad_accum,
             **budget, **engine)
    steps = {stage: TrainingSummary.from_json(folder / TrainingSummary.FILE).step
             for stage, folder in (("short", start), ("long", trained)) if (folder / TrainingSummary.FILE).is_file()}
    if (out / "results.json").is_file():  # scored already: the scores are kept, not computed again
        return {**json.loads((out / "results.json").read_text(encoding="utf-8")), "steps": steps}
    source = AutoModelForMaskedLM.from_pretrained(start).eval()
    continued = AutoModelForMaskedLM.from_pretrained(trained).eval()
    chunk = SHORT - 2
    models = {name: (continued if model == "long" else source, None if whole else chunk)
              for name, (model, whole) in MODES.items()}
    scores = length_pays(models, tokenizer, held, plan.max_positions, plan.mask_rate, plan.seed)
    result = {"plan": {k: str(v) for k, v in vars(plan).items()}, "heldout_articles": len(held),
              "scored": f"masked tokens past position {SHORT}", "steps": steps, "results": scores}
    (out / "results.json").write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return result


#: How each row of the result reads the held-out articles: (model, whole article?).
MODES = {"long model, whole article": ("long", True), "long model, 512-token chunks": ("long", False),
         "source model, 512-token chunks": ("source", False)}
GROUP = "long-documents"
#: The results table (docs/LONG.md): each way of reading the held-out articles and its loss past position 512.
TABLE = {"header": ["model", "reads each held-out article", "MLM loss past position 512"],
         "align": ["---", "---", "---:"],
         "rows": [["lengthened to 4,096, continued MLM", "whole", "{long-documents/long-whole/mlm-loss}"],
                  ["lengthened to 4,096, continued MLM", "in 512-token chunks", "{long-documents/long-chunks/mlm-loss}"],
                  ["the 512-token source", "in 512-token chunks", "{long-documents/source-chunks/mlm-loss}"]]}


def make_records(result: dict[str, Any], command: str) -> list:
    """The results-store records of a finished run: each mode's MLM loss and the continued pre-training's steps."""
    from bertforge.results_store import Record
    plan = result["plan"]
    data = (f"the shared Wikipedia: {result['heldout_articles']} held-out articles of 1,024+ tokens, cut at "
            f"{plan['max_positions']} tokens; {plan['mask_rate']} of the tokens past position {SHORT} masked")
    records = []
    for name, (model, whole) in MODES.items():
        slug = f"{model}-{'whole' if whole else 'chunks'}"
        score = result["results"][name]
        records.append(Record.measured(f"{GROUP}/{slug}/mlm-loss", score["mlm_loss"], "loss",
                                       f"held-out MLM loss on masked tokens past position {SHORT}: {name}", data,
                                       command=command, digits=3))
    for stage, steps in result.get("steps", {}).items():
        length = SHORT if stage == "short" else plan["max_positions"]
        records.append(Record.measured(f"{GROUP}/{stage}/steps", steps, "steps",
                                       f"optimizer steps of MLM at {length} tokens in the run", data,
                                       command=command, digits=0))
    return records


def parse_duration(text: str) -> float:
    from bertforge.pretraining.pretrain import parse_duration as seconds
    return seconds(text)


def parse_args(argv: Sequence[str] | None = None) -> tuple[str | None, Plan]:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", required=True, type=Path, help="a 512-token BERT/RoBERTa folder (MLM head)")
    p.add_argument("--out", required=True, type=Path, help="folder for every stage's output")
    p.add_argument("--max-positions", type=int, default=4096, help="positions of the long model (default: 4096)")
    p.add_argument("--attention-window", type=int, default=512, help="its window (default: 512)")
    p.add_argument("--eval-articles", type=int, default=200, help="held-out articles of 1,024+ tokens (default: 200)")
    p.add_argument("--train-articles", type=int, default=20_000, help="articles trained on (default: 20000)")
    p.add_argument("--train-min-tokens", type=int, default=0,
                   help="continued pre-training on articles of at least this many tokens only (default: 0, all)")
    p.add_argument("--max-steps", type=int, default=3000, help="continued pre-training steps (default: 3000)")
    p.add_argument("--batch-size", type=int, default=8, help="sequences per micro-batch (default: 8)")
    p.add_argument("--grad-accum", type=int, default=8, help="micro-batches per step (default: 8)")
    p.add_argument("--short-budget", type=parse_duration, default=None, metavar="DURATION",
                   help="CPU time of MLM at 512 tokens before lengthening, e.g. 20m (needed for a folder without an "
                   "MLM head)")
    p.add_argument("--long-budget", type=parse_duration, default=None, metavar="DURATION",
                   help="CPU time of the continued pre-training at full length, e.g. 1h (instead of --max-steps)")
    p.add_argument("--lr", type=float, default=1e-4, help="peak learning rate of both stages (default: 1e-4)")
    p.add_argument("--warmup-steps", type=int, default=0, help="warmup of both stages (default: 0)")
    p.add_argument("--records", default=None, metavar="DIR",
                   help="also write the results as results-store records (group long-documents) into DIR")
    a = p.parse_args(argv)
    return a.records, Plan(model=a.model, out=a.out, max_positions=a.max_positions, attention_window=a.attention_window,
                eval_articles=a.eval_articles, train_articles=a.train_articles, max_steps=a.max_steps,
                train_min_tokens=a.train_min_tokens,
                batch_size=a.batch_size, grad_accum=a.grad_accum, short_budget=a.short_budget,
                long_budget=a.long_budget, lr=a.lr, warmup_steps=a.warmup_steps)


def main(argv: Sequence[str] | None = None) -> int:
    records, plan = parse_args(argv)
    result = run(plan)
    if records:
        from bertforge.results_store import write_records
        from bertforge.measuring import portable_command
        command = portable_command("experiments/long_documents.py", list(sys.argv[1:] if argv is None else argv))
        write_records(GROUP, make_records(result, command), records, tables={f"{GROUP}-mlm": TABLE})
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
