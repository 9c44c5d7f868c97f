"""Does `export --quantize int8 --calibrate-on` tell the truth? Its reported metric change and speed-up, against an
independent re-evaluation of the two graphs it is about.

The script runs the user's commands (`bertforge export` to fp32, and `bertforge export --quantize int8
--calibrate-on PAIRS`), reads the price the second one recorded (onnx.json's `int8_price`), and measures the same two
graphs again without bertforge's code: the `tokenizers` library reads the folder's tokenizer.json, ONNX Runtime
runs each model.onnx on one thread, numpy mean-pools its token vectors, scipy ranks the cosines (Spearman, on
every pair of the file), and the two graphs take turns batch by batch over the whole file (batches of 32, longest
texts first, as bertforge embeds), their speed-up being the ratio of their total times.

    python benchmarks/bench_int8.py --model "$MINILM" --pairs ../shared/data/glue/STS-B/dev.tsv --out ../runs/int8
"""
from __future__ import annotations

import argparse
import csv
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
BATCH = 32


def read_pairs(path: Path) -> tuple[list[str], list[str], list[float]]:
    """GLUE STS-B's dev.tsv: sentence1, sentence2, score."""
    with path.open(encoding="utf-8") as f:
        rows = list(csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE))
    return [r["sentence1"] for r in rows], [r["sentence2"] for r in rows], [float(r["score"]) for r in rows]


def export(model: str, out: Path, *extra: str) -> dict:
    subprocess.run([sys.executable, "-m", "bertforge", "export", "--model", model, "--output", str(out),
                    "--overwrite", *extra], check=True, cwd=REPO)
    return json.loads((out / "onnx.json").read_text(encoding="utf-8"))


class Graph:
    """One model.onnx in ONNX Runtime, one thread; `hidden(batch)` gives its token vectors."""

    def __init__(self, folder: Path) -> None:
        import onnxruntime as ort
        options = ort.SessionOptions()
        options.intra_op_num_threads = options.inter_op_num_threads = 1
        self.session = ort.InferenceSession(str(folder / "model.onnx"), options, providers=["CPUExecutionProvider"])
        self.inputs = [i.name for i in self.session.get_inputs()]

    def hidden(self, batch: dict[str, np.ndarray]) -> np.ndarray:
        return self.session.run(["last_hidden_state"], {k: batch[k] for k in self.inputs})[0]


def batches(tokenizer, texts: list[str], max_length: int, offset: int = 0) -> list[tuple[np.ndarray, dict]]:
    """(indices + offset, inputs) of batches of 32, longest texts (by characters) first, padded to their longest.
    int8 quantizes each call's activations with one scale, so a text's int8 vector depends on its batch-mates:
    the column is batched as the evaluation batches it."""
    order = np.argsort([-len(t) for t in texts], kind="stable")
    tokenizer.enable_truncation(max_length)
    out = []
    for start in range(0, len(texts), BATCH):
        idx = order[start:start + BATCH]
        tokenizer.enable_padding()
        enc = tokenizer.encode_batch([texts[i] for i in idx])
        ids = np.array([e.ids for e in enc], dtype=np.int64)
        mask = np.array([e.attention_mask for e in enc], dtype=np.int64)
        out.append((idx + offset, {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}))
    return out


def measure(graphs: dict[str, Graph], work: list[tuple[np.ndarray, dict]], n: int, rounds: int) -> tuple[dict, dict]:
    """Each graph's mean-pooled vectors of every text, and its total seconds per pass (median over `rounds`), the
    graphs taking turns batch by batch (the order flips every batch)."""
    vectors = {name: None for name in graphs}
    totals: dict[str, list[float]] = {name: [] for name in graphs}
    names = list(graphs)
    for r in range(rounds + 1):  # the first pass warms up and is not timed
        spent = dict.fromkeys(names, 0.0)
        for b, (idx, batch) in enumerate(work):
            for name in (names if (b + r) % 2 == 0 else names[::-1]):
                start = time.perf_counter()
                hidden = graphs[name].hidden(batch)
                spent[name] += time.perf_counter() - start
                if r == 0:
                    mask = batch["attention_mask"][..., None]
                    pooled = (hidden * mask).sum(1) / mask.sum(1)
                    if vectors[name] is None:
                        vectors[name] = np.zeros((n, pooled.shape[1]), dtype=np.float64)
                    vectors[name][idx] = pooled
        if r:
            for name in names:
                totals[name].append(spent[name])
    return vectors, {name: statistics.median(t) if t else float("nan") for name, t in totals.items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True, help="an encoder folder (sentence embeddings)")
    parser.add_argument("--pairs", type=Path, required=True, help="scored pairs: GLUE STS-B's dev.tsv")
    parser.add_argument("--out", type=Path, required=True, help="where the two exports go")
    parser.add_argument("--rounds", type=int, default=3, help="timed passes over the file")
    parser.add_argument("--max-length", type=int, default=256, help="tokens per text (all-MiniLM-L6-v2's own length)")
    parser.add_argument("--records", default=None, help="write the table as records of this results store "
                        "(docs/results)")
    args = parser.parse_args()
    from scipy.stats import spearmanr
    from tokenizers import Tokenizer

    export(args.model, args.out / "fp32")
    info = export(args.model, args.out / "int8", "--quantize", "int8", "--calibrate-on", str(args.pairs),
                  "--max-drop", "100")
    reported = info["int8_price"]
    first, second, gold = read_pairs(args.pairs)
    texts = first + second
    tokenizer = Tokenizer.from_file(str(args.out / "fp32" / "tokenizer.json"))
    graphs = {q: Graph(args.out / q) for q in ("fp32", "int8")}
    # each column batched on its own, as bertforge's evaluation embeds them; then both columns mixed in one
    # length-sorted list, to show how much int8's score depends on which texts share a batch
    by_column = batches(tokenizer, first, args.max_length) + batches(tokenizer, second, args.max_length, len(first))
    vectors, seconds = measure(graphs, by_column, len(texts), args.rounds)
    mixed, _ = measure(graphs, batches(tokenizer, texts, args.max_length), len(texts), 0)

    def spearman_of(v):
        a, b = v[:len(first)], v[len(first):]
        cosine = (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))
        return 100 * spearmanr(cosine, gold).statistic

    spearman = {q: spearman_of(v) for q, v in vectors.items()}
    spearman_mixed = {q: spearman_of(v) for q, v in mixed.items()}
    independent = {"fp32": spearman["fp32"], "int8": spearman["int8"], "drop": spearman["fp32"] - spearman["int8"],
                   "speedup": seconds["fp32"] / seconds["int8"], "fp32_seconds_per_pass": seconds["fp32"],
                   "int8_seconds_per_pass": seconds["int8"], "pairs": len(gold),
                   "columns_mixed_in_batches": {"fp32": spearman_mixed["fp32"], "int8": spearman_mixed["int8"],
                                                "drop": spearman_mixed["fp32"] - spearman_mixed["int8"]}}
    report = {"reported": {k: reported[k] for k in ("metric", "fp32", "int8", "drop", "speedup", "examples")},
              "independent": independent}
    print(f"| | fp32 Spearman | int8 Spearman | drop (points) | int8 speed-up |\n|---|---:|---:|---:|---:|\n"
          f"| reported by export | {reported['fp32']:.2f} | {reported['int8']:.2f} | {reported['drop']:.2f} | "
          f"{reported['speedup']:.2f}x |\n"
          f"| independent re-evaluation | {spearman['fp32']:.2f} | {spearman['int8']:.2f} | "
          f"{independent['drop']:.2f} | {independent['speedup']:.2f}x |\n"
          f"| the same, both columns mixed in its batches | {spearman_mixed['fp32']:.2f} | {spearman_mixed['int8']:.2f} | "
          f"{spearman_mixed['fp32'] - spearman_mixed['int8']:.2f} | — |")
    (args.out / "int8_check.json").write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    if args.records:
        print("records:", write_int8_records(report, args))
    return 0


def write_int8_records(report: dict, args: argparse.Namespace) -> Path:
    """The table's three rows (the export's stated price, the re-evaluation, the mixed batches) as records of the
    results store (group bench-int8) and the table bench-int8-stsb."""
    from bertforge.results_store import Record, write_records
    command = (f"OMP_NUM_THREADS=1 taskset -c 1 python benchmarks/bench_int8.py --model \"$MINILM\" --pairs "
               f"{args.pairs} --out {args.out} --rounds {args.rounds}")
    pairs = report["independent"]["pairs"]
    data = f"the {pairs:,} STS-B dev pairs of {args.pairs}"
    ind = report["independent"]
    rows = {"stated": ("reported by `export --calibrate-on`", report["reported"]),
            "re-evaluated": ("independent re-evaluation", ind),
            "mixed-batches": ("the same, both columns mixed in its batches", ind["columns_mixed_in_batches"])}
    records, table = [], []
    for key, (label, numbers) in rows.items():
        what = f"bench_int8, all-MiniLM-L6-v2 sentence encoder, int8 against fp32: {label}"
        base = f"bench-int8/stsb/{key}"
        cells = [label]
        for name, value, unit in (("fp32-spearman", numbers["fp32"], ""), ("int8-spearman", numbers["int8"], ""),
                                  ("drop-points", numbers["drop"], ""), ("int8-speed-up", numbers.get("speedup"), "x")):
            if value is None:
                cells.append("—")
                continue
            records.append(Record.measured(f"{base}/{name}", float(value), unit, f"{what}, {name.replace('-', ' ')}",
                                           data, seeds=args.rounds, command=command, digits=2))
            cells.append("{" + f"{base}/{name}" + ("}" if unit else "|bare}"))
        table.append(cells)
    spec = {"header": ["", "fp32 Spearman", "int8 Spearman", "drop (points)", "int8 speed-up"],
            "align": ["---", "---:", "---:", "---:", "---:"], "rows": table}
    return write_records("bench-int8", records, args.records, tables={"bench-int8-stsb": spec})


if __name__ == "__main__":
    raise SystemExit(main())
