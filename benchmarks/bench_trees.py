"""Two source trees of bertforge, one benchmark: a pre-training step, a fine-tuning step and inference, old vs new.

Each tree runs in its own long-lived process (`PYTHONPATH=TREE`), through the public surface both trees share:
`bertforge.cli.main` for `pretrain` and `finetune` (a step's time is read from the run's metrics.jsonl, between its
second and last logged step, so the start of a run is left out) and `Predictor.load(...).predict(...)` for
inference (batch-1 latency, batch-32 throughput). The trees take turns
(`common.interleave`: the order rotates between repeats) on the same inputs: the same slice of the shared
Wikipedia corpus, prepared by each tree with the same vocabulary, the same SST-2 sample and one predictor folder.
Every process runs on one thread.

    python benchmarks/bench_trees.py --old OLD/src --new NEW/src [--repeats 5]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from common import corpus_slice, default_shared_data, interleave, machine_info, minilm_folder  # noqa: E402

# One worker per tree, started once (its imports and its first steps are not what is measured): it reads one JSON
# command a line, runs it and writes its result to the file the command names, then prints the command's id.
WORKER = """
import json, sys, time
import torch
torch.set_num_threads(1)
from bertforge.cli import main
from bertforge.tasks.predictor import Predictor
predictors = {}
for line in sys.stdin:
    cmd = json.loads(line)
    if cmd["do"] == "cli":
        result = {"code": main(cmd["argv"])}
    else:
        if cmd["folder"] not in predictors:
            predictors[cmd["folder"]] = Predictor.load(cmd["folder"], device="cpu", precision="fp32")
        predictor, texts, reps = predictors[cmd["folder"]], cmd["texts"], cmd["reps"]
        predictor.predict(texts[:32], batch_size=32)
        single, batches = [], []
        for text in texts[:reps]:
            start = time.perf_counter(); predictor.predict([text], batch_size=1)
            single.append(time.perf_counter() - start)
        for i in range(max(1, reps // 4)):
            start = time.perf_counter(); predictor.predict(texts[32 * i:32 * (i + 1)], batch_size=32)
            batches.append(time.perf_counter() - start)
        result = {"b1": sorted(single)[len(single) // 2], "b32": sorted(batches)[len(batches) // 2]}
    with open(cmd["result"], "w") as handle:
        json.dump(result, handle)
    print("\\n" + cmd["id"], flush=True)
"""


class Worker:
    """A process of one tree (`PYTHONPATH=tree`, one thread) that runs commands in turn."""

    def __init__(self, tree: str, work: Path, name: str) -> None:
        env = {**os.environ, "PYTHONPATH": tree, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
        self.log = open(work / f"worker-{name}.log", "w", encoding="utf-8")  # noqa: SIM115 - closed in close()
        self.process = subprocess.Popen([sys.executable, "-c", WORKER], env=env, stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, stderr=self.log, text=True)
        self.work, self.name, self.count = work, name, 0

    def __call__(self, **command) -> dict:
        self.count += 1
        ident = f"done-{self.name}-{self.count}"
        result = self.work / f"{ident}.json"
        self.process.stdin.write(json.dumps({**command, "id": ident, "result": str(result)}) + "\n")
        self.process.stdin.flush()
        for line in self.process.stdout:
            if line.strip() == ident:
                return json.loads(result.read_text(encoding="utf-8"))
        raise SystemExit(f"the {self.name} worker stopped; see its log:\n"
                         + (self.work / f"worker-{self.name}.log").read_text(encoding="utf-8")[-3000:])

    def cli(self, *argv: str) -> None:
        code = self(do="cli", argv=list(argv))["code"]
        if code != 0:
            raise SystemExit(f"the {self.name} tree: bertforge {' '.join(argv[:2])} exited {code}")

    def close(self) -> None:
        self.process.stdin.close()
        self.process.wait(timeout=60)
        self.log.close()


def step_seconds(run: Path) -> float:
    """Seconds per optimizer step between the second and the last logged training step of run folder `run`."""
    from bertforge.training.metrics_log import read_metrics_log
    train = [r for r in read_metrics_log(run) if r.get("split") == "train" and "time" in r]
    first, last = train[1], train[-1]
    return (last["time"] - first["time"]) / (last["step"] - first["step"])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--old", required=True, help="the old tree's src folder")
    p.add_argument("--new", required=True, help="the new tree's src folder")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--pretrain-model", default="mini", help="the preset pre-trained from scratch")
    p.add_argument("--pretrain-steps", type=int, default=10)
    p.add_argument("--finetune-batch-size", type=int, default=32)
    p.add_argument("--finetune-examples", type=int, default=320, help="SST-2 examples: one epoch")
    p.add_argument("--infer-reps", type=int, default=16, help="batch-1 calls (and a quarter as many batches of 32)")
    p.add_argument("--only", default="pretrain,finetune,infer", help="which of pretrain, finetune, infer to time")
    p.add_argument("--warmup", type=int, default=1, help="untimed rounds first (each worker's first runs)")
    p.add_argument("--out", type=Path, help="write the samples and ratios as JSON here")
    args = p.parse_args()
    trees = {"old": str(Path(args.old).resolve()), "new": str(Path(args.new).resolve())}
    model = minilm_folder()
    sst2 = default_shared_data() / "glue" / "SST-2"
    texts = [line.split("\t")[0] for line in (sst2 / "dev.tsv").read_text(encoding="utf-8").splitlines()[1:]]
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        text = corpus_slice(work, 1.0)
        workers = {name: Worker(tree, work, name) for name, tree in trees.items()}
        for name, worker in workers.items():  # each tree reads data its own `prepare` wrote
            worker.cli("prepare", "--input", str(text), "--vocab", str(model), "--output", str(work / f"prepared-{name}"),
                       "--no-progress")
        counter = iter(range(10**6))
        common = ["--log-every", "2", "--save-every", "0", "--device", "cpu", "--precision", "fp32", "--no-progress"]

        def pretrain(name: str) -> float:
            out = work / f"pretrain-{next(counter)}"
            workers[name].cli("pretrain", "--data", str(work / f"prepared-{name}"), "--model", args.pretrain_model,
                              "--batch-size", "32", "--max-steps", str(args.pretrain_steps), *common, "--output", str(out))
            return step_seconds(out)

        def finetune(name: str) -> float:
            out = work / f"finetune-{next(counter)}"
            workers[name].cli("finetune", "--task", "sst2", "--data", str(sst2), "--model", str(model), "--batch-size",
                              str(args.finetune_batch_size), "--epochs", "1", "--max-train-samples",
                              str(args.finetune_examples), "--max-eval-samples", "32", *common, "--output", str(out))
            return step_seconds(out)

        kinds = [kind for kind in args.only.split(",") if kind]
        predictor = work / "predictor"  # one predictor folder for both trees (its format is the same in both)
        if "infer" in kinds:
            workers["new"].cli("finetune", "--task", "sst2", "--data", str(sst2), "--model", str(model), "--epochs", "1",
                               "--max-train-samples", "64", "--max-eval-samples", "32", *common, "--output",
                               str(predictor))
        infer_results: dict[str, list[dict]] = {name: [] for name in trees}

        def infer(name: str) -> float:
            result = workers[name](do="infer", folder=str(predictor), texts=texts[:32 * max(1, args.infer_reps // 4)],
                                   reps=args.infer_reps)
            infer_results[name].append(result)
            return result["b1"]

        candidates = {f"{kind}/{name}": (lambda fn=fn, name=name: fn(name))
                      for kind, fn in (("pretrain", pretrain), ("finetune", finetune), ("infer", infer))
                      if kind in kinds for name in trees}
        times = interleave(candidates, repeats=args.repeats, warmup=args.warmup, log=lambda line: print(line, flush=True))
        for worker in workers.values():
            worker.close()
    if "infer" in kinds:  # the warm-up rounds' results are left out, as interleave leaves out their times
        times["infer-b32/old"] = [r["b32"] for r in infer_results["old"][args.warmup:]]
        times["infer-b32/new"] = [r["b32"] for r in infer_results["new"][args.warmup:]]
    report = {"machine": machine_info(), "command": " ".join(sys.argv), "samples": times, "ratios": {}}
    print(f"{'what':12s} {'old (median)':>14s} {'new (median)':>14s} {'new/old':>8s} {'spread of per-repeat ratios':>30s}")
    for kind in [k for k in ("pretrain", "finetune", "infer", "infer-b32") if f"{k}/old" in times]:
        old, new = times[f"{kind}/old"], times[f"{kind}/new"]
        ratios = sorted(n / o for o, n in zip(old, new))
        report["ratios"][kind] = {"median": statistics.median(ratios), "min": ratios[0], "max": ratios[-1]}
        print(f"{kind:12s} {statistics.median(old) * 1e3:11.1f} ms {statistics.median(new) * 1e3:11.1f} ms "
              f"{statistics.median(new) / statistics.median(old):8.3f} {ratios[0]:14.3f} .. {ratios[-1]:.3f}")
    if args.out:
        args.out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
