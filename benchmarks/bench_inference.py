"""Inference side by side: `Predictor.predict` (and `features`) against the `transformers` code a user writes.

Both sides use the same weights (all-MiniLM-L6-v2's encoder with a seeded random classifier, saved as a
bertforge predictor folder, which `transformers` loads as it is), the same real inputs (SST-2 dev sentences)
and the same batch size, in one process, taking turns (`common.interleave`), and report medians.

* bertforge: `Predictor.load(DIR).predict(texts)`: bertforge's tokenizer, batches sorted by length and capped
  by `--max-batch-tokens`, padding removed inside the model, records out.
* transformers: `AutoModelForSequenceClassification` + `BertTokenizerFast`, batches of `--batch-size` in input
  order padded to their longest row, softmax, label + probabilities per input (what a plain loop does);
  "transformers, sorted" also sorts by length first, to show how much of the gap is the batching.
* features (`--features`): `word_features` (last four layers, concatenated, first piece of each word) against
  `AutoModel(output_hidden_states=True)` with the same gather.

Before timing, the sides' probabilities (features) are compared and the largest difference is printed.

    python benchmarks/bench_inference.py [--n 872] [--batch-size 64] [--repeats 5] [--threads 1]
                                         [--precision fp32] [--features] [--data ../shared/data] [--out r.json]
                                         [--records DIR]
"""
from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

import numpy as np
import torch

from common import (default_shared_data, interleave, machine_info, markdown_table, median,  # noqa: E402
                    minilm_folder, start_process)


def log(msg: str) -> None:
    print(msg, flush=True)


def make_predictor_folder(model_dir: Path, out: Path, seed: int = 0) -> Path:
    """The encoder with a seeded random two-label classifier, saved as `bertforge finetune` saves one."""
    from bertforge import BertForSequenceClassification
    from bertforge.tokenization import load_tokenizer
    torch.manual_seed(seed)
    model = BertForSequenceClassification.from_pretrained(model_dir, id2label={0: "negative", 1: "positive"})
    with torch.no_grad():
        model.classifier.weight.normal_(0.0, 0.5)
    model.save_pretrained(out)
    load_tokenizer(model_dir).save_pretrained(out)
    from bertforge.tasks.predictor import write_task_file
    write_task_file(out, {"task": "sst2", "head": "sequence_classification", "labels": ["negative", "positive"],
                          "max_seq_length": 128})
    return out


def hf_classify(model, tokenizer, texts: list[str], batch_size: int, sort: bool) -> list[dict]:
    """Label + probabilities per text, in input order, the way a plain `transformers` loop computes them."""
    order = sorted(range(len(texts)), key=lambda i: len(texts[i])) if sort else list(range(len(texts)))
    names = [model.config.id2label[i] for i in range(model.config.num_labels)]
    out: list[dict] = [{}] * len(texts)
    with torch.inference_mode():
        for start in range(0, len(order), batch_size):
            idx = order[start:start + batch_size]
            enc = tokenizer([texts[i] for i in idx], padding=True, truncation=True, max_length=128,
                            return_tensors="pt")
            probs = model(**enc).logits.float().softmax(-1).tolist()
            for i, p in zip(idx, probs):
                k = int(np.argmax(p))
                out[i] = {"label": names[k], "score": p[k], "scores": dict(zip(names, p))}
    return out


def hf_word_features(model, tokenizer, texts: list[list[str]], batch_size: int) -> list[torch.Tensor]:
    out = []
    with torch.inference_mode():
        for start in range(0, len(texts), batch_size):
            chunk = texts[start:start + batch_size]
            enc = tokenizer(chunk, is_split_into_words=True, padding=True, truncation=True, max_length=512,
                            return_tensors="pt")
            hs = model(**enc, output_hidden_states=True).hidden_states
            combined = torch.cat([hs[i] for i in (-1, -2, -3, -4)], -1)
            for row, words in enumerate(chunk):
                ids = enc.word_ids(row)
                firsts = [ids.index(w) for w in range(len(words))]
                out.append(combined[row, firsts].float())
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", type=Path, default=None, help="encoder folder (default: the MiniLM package)")
    ap.add_argument("--data", type=Path, default=default_shared_data())
    ap.add_argument("--n", type=int, default=872, help="SST-2 dev sentences (872 = all)")
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--max-batch-tokens", type=int, default=None, help="bertforge's token budget (default: its own)")
    ap.add_argument("--precision", default="fp32", choices=("fp32", "bf16"))
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--features", action="store_true", help="also time per-word features")
    ap.add_argument("--out", type=Path, help="write the results as JSON here")
    ap.add_argument("--records", default=None, metavar="DIR",
                    help="also write the table as results-store records (group bench-inference) into DIR")
    args = ap.parse_args(argv)
    start_process(args.threads)

    from transformers import AutoModel, AutoModelForSequenceClassification, BertTokenizerFast

    from bertforge.tasks.feature_extraction import word_features
    from bertforge.tasks.inference_options import DEFAULT_MAX_BATCH_TOKENS
    from bertforge.tasks.prediction_inputs import split_words
    from bertforge.tasks.predictor import Predictor
    from bertforge.tasks.readers import read_glue

    model_dir = args.model or minilm_folder()
    texts = [ex.text for ex in read_glue("sst2", args.data / "glue" / "SST-2" / "dev.tsv").examples][:args.n]
    budget = args.max_batch_tokens or DEFAULT_MAX_BATCH_TOKENS
    log(f"{len(texts)} SST-2 dev sentences, batch size {args.batch_size}, token budget {budget}, "
        f"{args.precision}, {args.threads} thread(s)")
    results: dict = {"machine": machine_info(), "n": len(texts), "batch_size": args.batch_size,
                     "max_batch_tokens": budget, "precision": args.precision, "threads": args.threads}
    with tempfile.TemporaryDirectory() as tmp:
        folder = make_predictor_folder(model_dir, Path(tmp))
        ours = Predictor.load(folder, device="cpu", precision=args.precision, max_batch_tokens=budget)
        hf = AutoModelForSequenceClassification.from_pretrained(folder).eval()
        tok = BertTokenizerFast(str(folder / "vocab.txt"), do_lower_case=True)
        autocast = ours.precision.autocast

        def run_hf(sort: bool):
            def go():
                with autocast():
                    go.last = hf_classify(hf, tok, texts, args.batch_size, sort)
            return go

        def run_ours() -> None:  # candidates return None: `interleave` then takes the wall time
            ours.predict(texts, args.batch_size)

        a = np.array([r["scores"]["positive"] for r in ours.predict(texts, args.batch_size)])
        reference = run_hf(False)
        reference()
        b = np.array([r["scores"]["positive"] for r in reference.last])
        results["max_prob_diff"] = float(np.abs(a - b).max())
        log(f"largest probability difference bertforge vs transformers: {results['max_prob_diff']:.2e}")
        candidates = {"bertforge Predictor": run_ours,
                      "transformers": run_hf(False), "transformers, sorted": run_hf(True)}
        if args.features:
            words = [[w for w, _, _ in split_words(t)] for t in texts]
            encoder = ours.model.bert
            hf_encoder = AutoModel.from_pretrained(folder).eval()
            mine = word_features(encoder, ours.tokenizer, words, max_batch_tokens=budget,
                                 batch_size=args.batch_size, precision=args.precision)
            theirs = hf_word_features(hf_encoder, tok, words, args.batch_size)
            results["features_max_diff"] = max(float((x - y).abs().max()) for x, y in zip(mine, theirs))
            log(f"largest feature difference: {results['features_max_diff']:.2e}")

            def hf_features():
                with autocast():
                    hf_word_features(hf_encoder, tok, words, args.batch_size)

            def our_features():
                word_features(encoder, ours.tokenizer, words, max_batch_tokens=budget, batch_size=args.batch_size,
                              precision=args.precision)

            candidates["bertforge features"] = our_features
            candidates["transformers features"] = hf_features
        times = interleave(candidates, args.repeats, log=log)
    rows = []
    for name, samples in times.items():
        base = "transformers features" if "features" in name else "transformers"
        rows.append([name, f"{median(samples):.3f}", f"{len(texts) / median(samples):.1f}",
                     f"{median(times[base]) / median(samples):.2f}x"])
    results["seconds"] = times
    print()
    print(markdown_table(["candidate", "median s", "examples/s", "vs transformers"], rows))
    print()
    print("; ".join(f"{k}: {v}" for k, v in results["machine"].items()))
    if args.out:
        args.out.write_text(json.dumps(results, indent=2) + "\n")
    if args.records:
        from bertforge.results_store import write_records
        where = ("../shared/data" if args.data == default_shared_data() else str(args.data)) + "/glue/SST-2"
        data = (f"the {len(texts)} SST-2 dev sentences of {where}" if len(texts) == 872
                else f"the first {len(texts)} SST-2 dev sentences of {where}")
        write_records("bench-inference", make_records(times, len(texts), args, data), args.records)


# candidate -> (its records' slug, its name in the published table)
RECORD_NAMES = {"bertforge Predictor": ("bertforge-predictor", "bertforge Predictor"),
                "transformers": ("transformers", "transformers"),
                "transformers, sorted": ("transformers-sorted-by-lengt", "transformers, sorted by length"),
                "bertforge features": ("bertforge-features", "bertforge features"),
                "transformers features": ("transformers-features", "transformers features")}


def make_records(times: dict[str, list[float]], n: int, args, data: str) -> list:
    """The table's records: each candidate's median seconds, examples/s and speed over its transformers baseline
    (the baseline's median seconds over the candidate's). Another model or precision than the published run's
    (MiniLM, fp32) goes under ids of its own."""
    import dataclasses
    import re
    from bertforge.results_store import Record
    model = "MiniLM" if args.model is None else args.model.name
    base = "bench-inference/sst2-dev"
    if args.model is not None:
        base += "-" + re.sub(r"[^a-z0-9]+", "-", args.model.name.lower()).strip("-")
    if args.precision != "fp32":
        base += f"-{args.precision}"
    records = []
    for name, samples in times.items():
        slug, label = RECORD_NAMES[name]
        what = f"bench_inference, {model}'s encoder with a seeded classifier: {label}"
        seconds = median(samples)
        baseline = median(times["transformers features" if "features" in name else "transformers"])
        for column, value, unit, digits in (("median s", seconds, "s", 2), ("examples/s", n / seconds, "examples/s", 1),
                                            ("vs transformers", baseline / seconds, "x", 2)):
            record = Record.measured(f"{base}/{slug}/{column.replace(' ', '-').replace('/', '-')}", value, unit,
                                     f"{what}, {column}", data, seeds=len(samples), digits=digits)
            records.append(dataclasses.replace(record, threads=args.threads))  # torch's threads (start_process)
    return records


if __name__ == "__main__":
    main()
