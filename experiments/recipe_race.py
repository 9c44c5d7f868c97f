"""The recipe race: which pre-training recipe learns most in a fixed budget of one CPU core.

Every contender is a `bertforge pretrain` command on the same prepared corpus. A fixed wall-clock budget is
turned into a step budget per contender by timing its steps first (`calibrate`: all contenders in turn,
interleaved, one thread, medians), so the runs themselves can share the machine without changing what
each one is allowed to do. Timing on a loaded machine makes every step slower, so the step budgets are
conservative.

Every checkpoint of every run is then asked the same held-out questions, whatever it was trained on:
- `mlm_loss`: MLM loss on the held-out documents, FULL-SENTENCES sequences of 128, 15 % masking (80/10/10),
  the same masks for every model (as `bertforge ablate` asks them);
- `pairs_loss`: the same, on the segment pairs that a `--objective mlm+nsp` run evaluates itself on (batch 32,
  seed 0): the numbers the pre-training section of docs/RESULTS.md reports for its 60- and 120-minute runs;
  models trained without a sentence task see token type 0 throughout;
- `top5`: fill-mask top-5 hit rate on held-out probes: one whole word (a single word piece of 3+ letters,
  not a stop word) masked per held-out sequence, is the true word among the five best answers?

ELECTRA's discriminator is not an MLM: it is compared downstream, like every contender (`--finetune`):
SST-2 and MRPC dev after fine-tuning on the same subset (4,000 examples, 3 epochs, lr 3e-4: small models
from short runs need a larger rate than the paper's 2e-5), median of three seeds, the last epoch's weights.

    OMP_NUM_THREADS=1 python experiments/recipe_race.py --data ../runs/wiki --out ../runs/race \\
        --budget 20m --contenders bert,bert-mlm,modern,electra [--jobs 2] [--finetune ../shared/data/glue] \\
        [--records DIR]

Re-running the command skips what is done (calibration, runs, evaluations) and resumes killed runs. `--records`
writes the race's rows of the published table (group results-recipe-race): docs/RESULTS.md runs four races,
`--out ../runs/race`, `race2`, `race3` and `race4`, and the name of `--out` says which rows a race fills.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

# name -> (what it is, `bertforge pretrain` flags; "{warmup}" becomes the run's warmup steps)
CONTENDERS: dict[str, tuple[str, list[str]]] = {
    "bert": ("BERT: post-LN, learned positions, MLM + NSP, 15 % masking, dropout 0.1, batch 32, lr 1e-3",
             ["--recipe", "bert", "--model", "mini", "--batch-size", "32", "--lr", "1e-3"]),
    "bert-mlm": ("BERT layout, MLM only (no NSP), 30 % masking, dropout 0, batch 32, lr 1e-3",
                 ["--model", "mini", "--objective", "mlm", "--mask-rate", "0.3", "--dropout", "0",
                  "--batch-size", "32", "--lr", "1e-3"]),
    "modern": ("ModernBERT layout (pre-LN, GeGLU, no biases, rotary), MLM, 30 % masking, dropout 0, batch 32, "
               "lr 2e-3", ["--model", "modernbert-mini", "--objective", "mlm", "--mask-rate", "0.3", "--dropout", "0",
                           "--batch-size", "32", "--lr", "2e-3"]),
    "modern-span": ("the same with SpanBERT span masking", ["--model", "modernbert-mini", "--objective", "mlm",
                    "--mask-rate", "0.3", "--dropout", "0", "--batch-size", "32", "--lr", "2e-3", "--span-masking"]),
    "modern-b16": ("the modern contender with batch 16 (twice the updates for the same tokens)",
                   ["--model", "modernbert-mini", "--objective", "mlm", "--mask-rate", "0.3", "--dropout", "0",
                    "--batch-size", "16", "--lr", "2e-3"]),
    "fast": ("the `--recipe fast` defaults", ["--recipe", "fast", "--model", "mini"]),
    "fast-t5": ("`--recipe fast` with T5's relative position bias (32 buckets, max distance 128) instead of rotary "
                "positions", ["--recipe", "fast", "--model", "{config:fast-t5}"]),
    "electra": ("ELECTRA: generator 1/4 wide, replaced-token detection (weight 50), dropout 0, batch 32, lr 1e-3",
                ["--model", "mini", "--objective", "electra", "--dropout", "0", "--batch-size", "32",
                 "--lr", "1e-3"]),
    "electra-half": ("ELECTRA with the paper's larger generator: 1/2 wide, weight 50, dropout 0, batch 32, lr 1e-3",
                     ["--model", "mini", "--objective", "electra", "--generator-fraction", "0.5", "--dropout", "0",
                      "--batch-size", "32", "--lr", "1e-3"]),
    "electra-modern": ("ELECTRA in the ModernBERT layout (the `modern` contender's encoder options): generator 1/4 "
                       "wide, weight 50, 15 % masking, dropout 0, batch 32, lr 2e-3",
                       ["--model", "{config:electra-modern}", "--objective", "electra", "--dropout", "0",
                        "--batch-size", "32", "--lr", "2e-3"]),
}
# configs a contender names as "{config:NAME}": written into OUT/configs/NAME.json before the race:
# (size preset, recipe whose layout it takes or None, config fields set on top)
T5_BIAS = {"rope_theta": None, "local_rope_theta": None, "relative_attention_num_buckets": 32,
           "relative_attention_max_distance": 128}
CONFIGS: dict[str, tuple[str, str | None, dict]] = {"electra-modern": ("electra-mini", "fast", {}),
                                             "fast-t5": ("modernbert-mini", None, T5_BIAS)}
WARMUP_FRACTION = 0.06
PROBE_SEQUENCES = 640


def bertforge(*args: str) -> list[str]:
    return [sys.executable, "-m", "bertforge", *args]


def run_logged(cmd: list[str], log: Path) -> None:
    with log.open("a", encoding="utf-8") as f:
        f.write("$ " + " ".join(cmd) + "\n")
        f.flush()
        done = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, env={**os.environ, "OMP_NUM_THREADS": "1"})
    if done.returncode:
        raise SystemExit(f"failed ({done.returncode}): {' '.join(cmd)}; see {log}")


def config_ref(arg: str) -> str | None:
    """NAME of a "{config:NAME}" flag value, else None."""
    return arg[len("{config:"):-1] if arg.startswith("{config:") else None


def flags(name: str, warmup: int, out: Path) -> list[str]:
    return [str(out / "configs" / f"{config_ref(a)}.json") if config_ref(a) else a.replace("{warmup}", str(warmup))
            for a in CONTENDERS[name][1]]


def write_configs(names: list[str], data: str, out: Path) -> None:
    """The config.json of every contender that names one: its size preset in its recipe's layout."""
    from bertforge.data.shards import load_tokenizer
    from bertforge.model.auto import preset_config
    from bertforge.pretraining.pretrain import resolve_vocab
    from bertforge.pretraining.recipes import layout_overrides
    wanted = {config_ref(a) for n in names for a in CONTENDERS[n][1]} - {None}
    tokenizer = load_tokenizer(resolve_vocab(data, None))
    for config_name in wanted:
        preset, recipe, fields = CONFIGS[config_name]
        config = preset_config(preset, vocab_size=len(tokenizer.vocab), pad_token_id=tokenizer.pad_token_id)
        config = config.replace(**(layout_overrides(recipe, config.hidden_size) if recipe else {}), **fields)
        folder = out / "configs" / config_name
        config.save_pretrained(folder)
        from bertforge.config import config_file
        config_file(folder).replace(out / "configs" / f"{config_name}.json")
        folder.rmdir()


# ---- step budgets --------------------------------------------------------------------------------------------------
def calibrate(names: list[str], data: str, out: Path, rounds: int, steps: int, jobs: int) -> dict[str, float]:
    """Seconds per step of each contender: `rounds` short runs each, interleaved, `jobs` at once as in the race
    itself, median of the steady part."""
    path = out / "calibration.json"
    known = json.loads(path.read_text()) if path.exists() else {}
    todo = [n for n in names if n not in known]
    samples: dict[str, list[float]] = {n: [] for n in todo}

    def one(name: str, r: int) -> None:
        run = out / "calibration" / f"{name}-{r}"
        cmd = bertforge("pretrain", "--data", data, "--output", str(run), "--overwrite", "--max-steps", str(steps),
                        "--save-every", "0", "--eval-batches", "0", "--log-every", "5", "--no-progress",
                        *flags(name, 1, out))
        run_logged(cmd, out / f"calibration-{name}.log")
        from bertforge.training.metrics_log import read_metrics_log
        rows = read_metrics_log(run)
        times = {row["step"]: row["time"] for row in rows if row.get("split") == "train"}
        first = sorted(times)[1]  # the first logged steps pay for start-up
        samples[name].append((times[steps] - times[first]) / (steps - first))
        print(f"calibration {name} round {r + 1}: {samples[name][-1]:.3f} s/step", flush=True)

    with ThreadPoolExecutor(jobs) as pool:
        list(pool.map(lambda job: one(*job), [(name, r) for r in range(rounds) for name in todo]))
    known.update({n: statistics.median(s) for n, s in samples.items()})
    path.write_text(json.dumps(known, indent=2) + "\n")
    return known


def train(name: str, data: str, out: Path, budget: float, seconds_per_step: float, saves: int) -> Path:
    steps = int(budget / seconds_per_step)
    run = out / "runs" / name
    from bertforge.checkpoint import SAFE_WEIGHTS
    if (run / SAFE_WEIGHTS).exists():
        return run
    run.mkdir(parents=True, exist_ok=True)
    every = max(1, steps // saves)
    cmd = bertforge("pretrain", "--data", data, "--output", str(run), "--max-steps", str(steps),
                    "--warmup-steps", str(max(1, round(WARMUP_FRACTION * steps))), "--save-every", str(every),
                    "--keep-checkpoints", str(saves + 1), "--eval-batches", "0", "--no-progress", *flags(name, 1, out))
    # a contender's own --warmup-steps wins over the race's (argparse keeps the last)
    print(f"[{name}] {steps} steps ({seconds_per_step:.3f} s/step x {steps} = {budget / 60:.0f} min)", flush=True)
    run_logged(cmd, out / f"{name}.log")
    return run


# ---- the same questions for every model ------------------------------------------------------------------------------
def evaluate_model(folder: Path, data: str, eval_batches: int) -> dict[str, float]:
    import torch

    from bertforge.data import MaskingConfig, PretrainingDataset
    from bertforge.data.shards import load_tokenizer
    from bertforge.model.auto import model_class_for

    torch.set_num_threads(1)
    model = model_class_for(folder, "masked_lm").from_pretrained(folder).eval()
    tokenizer = load_tokenizer(folder)
    result: dict[str, float] = {}
    from bertforge.outputs import read_run_config
    run_config = next((c for p in (folder, folder.parent.parent) if (c := read_run_config(p)) is not None),
                      None)  # none: a folder another tool trained (transformers' Trainer), MLM only
    sentence_task = run_config is not None and run_config["objective"] in ("mlm+nsp", "mlm+sop")
    for key, objective, packing, seed in (("mlm", "mlm", "full-sentences", 1234), ("pairs", "mlm+nsp", "full-sentences", 0)):
        held = PretrainingDataset(data, tokenizer, objective=objective, packing=packing, batch_size=32,
                                  masking=MaskingConfig(rate=0.15), seed=seed, split="heldout")
        loss = n = correct = 0.0
        with torch.no_grad():
            for i, batch in enumerate(held):
                if i >= eval_batches:
                    break
                labels = batch["labels"]
                types = batch.get("token_type_ids")
                if types is not None and not sentence_task:
                    types = torch.zeros_like(types)
                kwargs = {"token_type_ids": types} if types is not None and model.config.type_vocab_size else {}
                rows = labels != -100  # the decoder runs on the masked rows only
                logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"],
                               prediction_positions=rows, **kwargs).logits
                logp = logits.float().log_softmax(-1)
                target = labels[rows]
                loss += float(-logp.gather(-1, target[:, None]).sum())
                correct += float((logp.argmax(-1) == target).sum())
                n += int(rows.sum())
        result[f"{key}_loss"] = loss / n
        result[f"{key}_acc"] = correct / n
    result["top5"] = probe_top5(model, tokenizer, data)
    return result


def probe_top5(model, tokenizer, data: str) -> float:
    """Fill-mask top-5 hit rate: one content word masked per held-out sequence."""
    import torch
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

    from bertforge.data import MaskingConfig, PretrainingDataset

    held = PretrainingDataset(data, tokenizer, objective="mlm", packing="full-sentences", batch_size=32,
                              masking=MaskingConfig(rate=0.15), seed=4321, split="heldout")
    pieces = tokenizer.convert_ids_to_tokens(list(range(len(tokenizer.vocab))))
    hits = total = 0
    with torch.no_grad():
        for batch in held:
            ids = torch.where(batch["labels"] != -100, batch["labels"], batch["input_ids"])
            masked, where, truth = ids.clone(), torch.zeros_like(ids, dtype=torch.bool), []
            for row in range(ids.shape[0]):
                seq = ids[row].tolist()
                candidates = [i for i in range(1, len(seq) - 1) if pieces[seq[i]].isalpha() and len(pieces[seq[i]]) >= 3
                              and pieces[seq[i]] not in ENGLISH_STOP_WORDS and not pieces[seq[i + 1]].startswith("##")]
                if candidates:
                    i = candidates[(row * 7919 + total) % len(candidates)]
                    masked[row, i] = tokenizer.mask_token_id
                    where[row, i] = True
                    truth.append(seq[i])
            logits = model(input_ids=masked, attention_mask=batch["attention_mask"], prediction_positions=where).logits
            for row_logits, true in zip(logits, truth):  # one masked row per sequence, in order
                hits += int(true in row_logits.topk(5).indices.tolist())
                total += 1
            if total >= PROBE_SEQUENCES:
                break
    return hits / total


def is_electra(name: str) -> bool:
    args = CONTENDERS[name][1]
    return "--objective" in args and args[args.index("--objective") + 1] == "electra"


def checkpoints(run: Path) -> list[tuple[int, Path]]:
    found = [(int(p.name.split("-")[1]), p) for p in (run / "checkpoints").glob("step-*")]
    return sorted(found)


def evaluate_run(name: str, run: Path, data: str, out: Path, eval_batches: int) -> list[dict]:
    path = out / "eval" / f"{name}.json"
    rows = json.loads(path.read_text()) if path.exists() else []
    seen = {r["step"] for r in rows}
    from bertforge.config import has_config
    from bertforge.training.metrics_log import read_metrics_log
    metrics = read_metrics_log(run)
    times = {m["step"]: m["time"] for m in metrics if m.get("split") == "train"}
    for step, folder in checkpoints(run):
        if step in seen:
            continue
        if not has_config(folder):
            continue
        if is_electra(name):
            continue  # a discriminator has no MLM to ask; see the downstream table
        row = {"step": step, "time": times.get(step), **evaluate_model(folder, data, eval_batches)}
        rows.append(row)
        print(f"[{name}] step {step}: " + ", ".join(f"{k} {v:.4f}" for k, v in row.items()
                                                    if isinstance(v, float)), flush=True)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(sorted(rows, key=lambda r: r["step"]), indent=2) + "\n")
    return rows


# ---- downstream ---------------------------------------------------------------------------------------------------
GLUE = (("sst2", "SST-2", ("accuracy",)), ("mrpc", "MRPC", ("accuracy", "f1")))  # (task, folder, metrics)


def finetune(name: str, run: Path, glue: Path, out: Path, seeds: list[int], samples: int, epochs: float,
             lr: float) -> dict[str, float]:
    from bertforge.tasks.finetune_report import read_finetune_report
    from bertforge.training.run_output import RESULTS
    scores: dict[str, list[float]] = {}
    for task, folder, metrics in GLUE:
        for seed in seeds:
            target = out / "finetune" / name / f"{task}-{seed}"
            if not (target / RESULTS).exists():
                cmd = bertforge("finetune", "--task", task, "--model", str(run), "--data", str(glue / folder),
                                "--output", str(target), "--overwrite", "--epochs", str(epochs), "--lr", str(lr),
                                "--max-train-samples", str(samples), "--seed", str(seed), "--keep", "last",
                                "--no-progress")
                run_logged(cmd, out / f"{name}-finetune.log")
            report = read_finetune_report(target)
            for metric in metrics:
                key = task if metric == "accuracy" else f"{task}_{metric}"
                scores.setdefault(key, []).append(float(report.eval[metric]))
    return {task: statistics.median(v) for task, v in scores.items()} | {f"{t}_all": v for t, v in scores.items()}


def majority_class(glue: Path) -> dict[str, float]:
    """The scores (points) of answering the train set's most frequent label for every dev example, keyed as
    `finetune`'s medians."""
    from bertforge.evaluation.scores import majority_baseline
    from bertforge.tasks.registry import get_task
    scores = {}
    for task, folder, metrics in GLUE:
        spec = get_task(task)
        train, dev = ([ex.label for ex in spec.read(glue / folder, split)[0].examples] for split in ("train", "dev"))
        found = majority_baseline(task, train, dev)
        scores.update({task if metric == "accuracy" else f"{task}_{metric}": found[metric] for metric in metrics})
    return scores


# ---- the published records -----------------------------------------------------------------------------------------
GROUP = "results-recipe-race"
WHAT = "recipe race at equal step budgets (mini, Wikipedia)"
# the table's rows: (race: the name of --out, contender, row id, first cell, "what it is", fine-tuned in that race)
ROWS = [
    ("race2", "fast", "fast-recipe-fast", "**`fast` = `--recipe fast`**",
     "ModernBERT layout (pre-LN, GeGLU, rotary, no biases, local/global attention), BERT's init, MLM only, 30 % masking, "
     "dropout 0, lr 2e-3", True),
    ("race", "modern", "modern-693-steps", "`modern`, 693 steps",
     "`fast` with ModernBERT's init (truncated, output projections scaled by 1/sqrt(2 x layers))", True),
    ("race2", "modern", "modern-784-steps", "`modern`, 784 steps", "the same, in `../runs/race2`", True),
    ("race", "modern-b16", "modern-b16", "`modern-b16`", "`modern` at batch 16 (steps of 16)", False),
    ("race", "modern-span", "modern-span", "`modern-span`", "`modern` with SpanBERT span masking (`--span-masking`)",
     False),
    ("race4", "fast-t5", "fast-t5", "`fast-t5`", "`fast` with T5's relative position bias instead of rotary", True),
    ("race", "bert", "bert", "`bert`",
     "`--recipe bert --lr 1e-3`: post-LN, learned positions, MLM + NSP, 15 % masking, dropout 0.1", False),
    ("race", "bert-mlm", "bert-mlm", "`bert-mlm`", "BERT layout, MLM only, 30 % masking, dropout 0, lr 1e-3", True),
    ("race", "electra", "electra", "`electra`", "BERT layout, generator 1/4 wide, discriminator weight 50, lr 1e-3",
     True),
    ("race3", "electra-half", "electra-half", "`electra-half`", "`electra` with a generator 1/2 wide", True),
    ("race2", "electra-modern", "electra-modern", "`electra-modern`",
     "ELECTRA in the modern layout, generator 1/4 wide, lr 2e-3", True),
]
CONTROL = ("race3", "bert-mlm", "race3/bert-mlm/sst2", "electra-half's race")  # cited beside the table: its SST-2
MLM = (("held-out-mlm-loss", "held-out MLM loss", "mlm_loss", "", 3, 1),  # (slug, column, key of a curve row,
       ("mlm-acc", "MLM acc", "mlm_acc", "%", 1, 100),                  # unit, digits, scale)
       ("fill-mask-top-5", "fill-mask top-5", "top5", "%", 1, 100))
DOWNSTREAM = (("sst-2-dev-acc", "SST-2 dev acc", "sst2", "%"),  # (slug, column, key of `finetune`'s medians, unit)
              ("mrpc-dev-acc-f1/1", "MRPC dev acc", "mrpc", ""), ("mrpc-dev-acc-f1/2", "MRPC dev F1", "mrpc_f1", ""))
TRAIN_LOSS_STEPS = (200, 300, 400)  # the `fast` run's training MLM loss the text cites


def table() -> dict:
    """The published table's spec: every row's cells name its records."""
    def down(row: str, mark: str) -> list[str]:
        ref = f"{{{GROUP}/{row}/"
        return [f"{mark}{ref}sst-2-dev-acc}}{mark}", f"{mark}{ref}mrpc-dev-acc-f1/1}} / {ref}mrpc-dev-acc-f1/2}}{mark}"]
    rows = []
    for _, name, row, cell, what_it_is, tuned in ROWS:
        mark = "**" if cell.startswith("**") else ""
        mlm = ["—"] * 3 if is_electra(name) else [f"{mark}{{{GROUP}/{row}/{slug}}}{mark}" for slug, *_ in MLM]
        rows.append([cell, what_it_is, f"{{{GROUP}/{row}/steps-of-32|bare}}", *mlm,
                     *(down(row, mark) if tuned else ["—"] * 2)])
    rows.append(["*majority class*", "", "", "", "", "", *down("majority-class", "*")])
    return {"header": ["contender", "what it is", "steps of 32", "held-out MLM loss", "MLM acc", "fill-mask top-5",
                       "SST-2 dev acc", "MRPC dev acc / F1"], "align": ["---"] * 2 + ["---:"] * 6, "rows": rows}


def seeds_text(seeds: list[int]) -> str:
    return f"{seeds[0]}-{seeds[-1]}" if len(seeds) > 2 and seeds == list(range(seeds[0], seeds[-1] + 1)) \
        else ", ".join(map(str, seeds))


def make_records(results: dict, race: str, runs: dict[str, Path], args, command: str) -> list:
    """The records of race `race`'s rows of the table: each contender's steps, its last checkpoint's held-out MLM
    loss, accuracy and top-5 hit rate, its fine-tuning medians (SST-2 accuracy, MRPC accuracy and F1), the majority
    class's scores on the same dev sets; `fast`'s training loss at TRAIN_LOSS_STEPS and CONTROL's SST-2."""
    import dataclasses

    from bertforge.data.shards import load_manifest
    from bertforge.results_store import Record
    from bertforge.training.metrics_log import read_metrics_log
    seeds = [int(s) for s in args.finetune_seeds.split(",")]
    heldout = load_manifest(args.data)["splits"]["heldout"]["documents"]
    data = f"{args.data} ({heldout:,} documents held out)" + (
        f"; SST-2 and MRPC of {args.finetune} (median of fine-tuning seeds {seeds_text(seeds)})" if args.finetune else "")
    records = []

    def add(rid: str, value: float, unit: str, what: str, digits: int, **extra) -> None:
        record = Record.measured(f"{GROUP}/{rid}", value, unit, what, data, command=command, digits=digits, **extra)
        records.append(dataclasses.replace(record, threads=1))  # every run and evaluation: one thread

    def tuned(key: str, down: dict) -> dict:  # a median of the seeds: their number and range
        return {"seeds": len(down[f"{key}_all"]), "spread": (100 * min(down[f"{key}_all"]), 100 * max(down[f"{key}_all"]))}

    for row_race, name, row, cell, _, _ in ROWS:
        if row_race != race or name not in results:
            continue
        result, label = results[name], cell.replace("*", "").replace("`", "")
        add(f"{row}/steps-of-32", result["steps"], "steps", f"{WHAT}: {label}, steps of 32", 0)
        if result["curve"]:  # an MLM's checkpoints: the last one's answers
            for slug, column, key, unit, digits, scale in MLM:
                add(f"{row}/{slug}", scale * result["curve"][-1][key], unit, f"{WHAT}: {label}, {column}", digits)
        if "downstream" in result:
            for slug, column, key, unit in DOWNSTREAM:
                add(f"{row}/{slug}", 100 * result["downstream"][key], unit, f"{WHAT}: {label}, {column}", 1,
                    **tuned(key, result["downstream"]))
        if name == "fast":
            logged = {m["step"]: m["mlm_loss"] for m in read_metrics_log(runs[name])
                      if m.get("split") == "train" and "mlm_loss" in m}
            for step in [s for s in TRAIN_LOSS_STEPS if s in logged]:
                add(f"fast/train-loss-step{step}", logged[step], "loss",
                    f"training MLM loss of the race's fast contender (--recipe fast, mini) at step {step}", 2)
    control_race, name, rid, whose = CONTROL
    if race == control_race and "downstream" in results.get(name, {}):
        add(rid, 100 * results[name]["downstream"]["sst2"], "%",
            f"SST-2 dev accuracy (median of fine-tuning seeds {seeds_text(seeds)}) of {name} in {whose} "
            f"({results[name]['steps']} steps)", 1, **tuned("sst2", results[name]["downstream"]))
    if args.finetune:
        floor = majority_class(Path(args.finetune))
        for slug, column, key, unit in DOWNSTREAM:
            add(f"majority-class/{slug}", floor[key], unit, f"{WHAT}: majority class, {column}", 1)
    return records


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", required=True, help="a folder written by `bertforge prepare`")
    parser.add_argument("--out", required=True)
    parser.add_argument("--budget", default="20m", help="wall-clock budget per contender, e.g. 20m or 1200s")
    parser.add_argument("--contenders", default="bert,bert-mlm,modern,modern-span,electra")
    parser.add_argument("--finetune-contenders", default="bert-mlm,modern,electra,electra-half,electra-modern")
    parser.add_argument("--jobs", type=int, default=2, help="runs at once (one thread each)")
    parser.add_argument("--calibration-rounds", type=int, default=2)
    parser.add_argument("--calibration-steps", type=int, default=40)
    parser.add_argument("--saves", type=int, default=2, help="checkpoints per run, each evaluated")
    parser.add_argument("--eval-batches", type=int, default=20)
    parser.add_argument("--finetune", metavar="GLUE_DIR", help="also fine-tune every contender on SST-2 and MRPC")
    parser.add_argument("--finetune-seeds", default="1,2,3")
    parser.add_argument("--finetune-samples", type=int, default=4000)
    parser.add_argument("--finetune-epochs", type=float, default=3)
    parser.add_argument("--finetune-lr", type=float, default=3e-4)
    parser.add_argument("--records", metavar="DIR", help=f"also write the race's rows of the published table "
                        f"(group {GROUP}) as results-store records into DIR")
    args = parser.parse_args(argv)
    names = [n for n in args.contenders.split(",") if n]
    unknown = [n for n in names if n not in CONTENDERS]
    if unknown:
        parser.error(f"--contenders: unknown {', '.join(unknown)}; choose from {', '.join(CONTENDERS)}")
    budget = float(args.budget[:-1]) * {"s": 1, "m": 60, "h": 3600}[args.budget[-1]]
    out = Path(args.out)
    races = sorted({row[0] for row in ROWS})
    if args.records and out.name not in races:
        parser.error(f"--records: the published races are --out named {', '.join(races)} (docs/RESULTS.md), "
                     f"not {out.name!r}")
    out.mkdir(parents=True, exist_ok=True)
    write_configs(names, args.data, out)
    speed = calibrate(names, args.data, out, args.calibration_rounds, args.calibration_steps, args.jobs)
    started = time.time()
    with ThreadPoolExecutor(args.jobs) as pool:
        runs = dict(zip(names, pool.map(lambda n: train(n, args.data, out, budget, speed[n], args.saves), names)))
    print(f"runs done in {(time.time() - started) / 60:.1f} min", flush=True)
    results = {}
    for name in names:
        results[name] = {"what": CONTENDERS[name][0], "seconds_per_step": speed[name],
                         "steps": int(budget / speed[name]),
                         "curve": evaluate_run(name, runs[name], args.data, out, args.eval_batches)}
    if args.finetune:
        seeds = [int(s) for s in args.finetune_seeds.split(",")]
        for name in [n for n in args.finetune_contenders.split(",") if n in names]:
            results[name]["downstream"] = finetune(name, runs[name], Path(args.finetune), out, seeds,
                                                   args.finetune_samples, args.finetune_epochs, args.finetune_lr)
    (out / "results.json").write_text(json.dumps(results, indent=2) + "\n")
    if args.records:
        from bertforge.measuring import portable_command
        from bertforge.results_store import write_records
        command = portable_command("experiments/recipe_race.py", list(sys.argv[1:] if argv is None else argv))
        write_records(GROUP, make_records(results, out.name, runs, args, command), args.records,
                      tables={GROUP: table()})
    print(markdown(results, budget))
    plot(results, out / "race.png", runs)


def markdown(results: dict, budget: float) -> str:
    lines = [f"| contender | s/step | steps in {budget / 60:.0f} min | held-out MLM loss | pairs loss | MLM acc | "
             "fill-mask top-5 | SST-2 acc | MRPC acc / F1 |", "|---|---|---|---|---|---|---|---|---|"]
    for name, r in results.items():
        last = r["curve"][-1] if r["curve"] else {}
        down = r.get("downstream", {})

        def f(v, fmt):
            return fmt.format(v) if v is not None else "—"
        lines.append(f"| {name} | {r['seconds_per_step']:.3f} | {r['steps']} | {f(last.get('mlm_loss'), '{:.3f}')} | "
                     f"{f(last.get('pairs_loss'), '{:.3f}')} | {f(last.get('mlm_acc'), '{:.1%}')} | "
                     f"{f(last.get('top5'), '{:.1%}')} | {f(down.get('sst2'), '{:.1%}')} | "
                     f"{f(down.get('mrpc'), '{:.1%}')} / {f(down.get('mrpc_f1'), '{:.1%}')} |")
    return "\n".join(lines)


def plot(results: dict, path: Path, runs: dict[str, Path]) -> None:
    """Training MLM loss at every logged step (at each run's own masking rate), and the held-out questions."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, 3, figsize=(16, 4))
    for i, (name, r) in enumerate(results.items()):
        style = {"label": name, "color": f"C{i}"}  # one colour per contender in every panel
        minutes_per_step = r["seconds_per_step"] / 60
        from bertforge.training.metrics_log import read_metrics_log
        logged = read_metrics_log(runs[name])
        train = [m for m in logged if m.get("split") == "train" and "mlm_loss" in m]
        if train:
            axes[0].plot([m["step"] * minutes_per_step for m in train], [m["mlm_loss"] for m in train], **style)
        curve = r["curve"]
        if not curve:
            continue
        minutes = [c["step"] * minutes_per_step for c in curve]
        axes[1].plot(minutes, [c["mlm_loss"] for c in curve], marker="o", **style)
        axes[2].plot(minutes, [c["top5"] for c in curve], marker="o", **style)
    axes[0].set(xlabel="budget spent (minutes of one core)", ylabel="training MLM loss (own masking rate)")
    axes[1].set(xlabel="budget spent (minutes of one core)", ylabel="held-out MLM loss (15 %, same masks)")
    axes[2].set(xlabel="budget spent (minutes of one core)", ylabel="fill-mask top-5 hit rate")
    for ax in axes:
        ax.grid(alpha=0.3)
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)

if __name__ == "__main__":
    main()
