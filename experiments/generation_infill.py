"""Infilling held-out Wikipedia sentences with a masked LM: Mask-Predict at several T, Gibbs, MH, left to right.

Sentences come from the LAST `--articles` articles of the corpus (a model continued-pre-trained on a slice
from the front has not seen them). In each sentence one span of 1-4 word pieces (length uniform, position
uniform among the non-special tokens) is masked; every method fills the same spans. Reported per method:
token accuracy (masked pieces recovered exactly), exact span match (the whole span right), and with --pll
the mean pseudo-log-likelihood per token of the filled sentences (higher = more probable under the MLM
itself; the originals' value is given for reference).

With --records DIR the run's numbers become records of the results store's group generation-infill (`make_records`).
The published group is the two runs of docs/GENERATION.md, one after the other: `--sentences 100` with every method,
then `--sentences 400` with Mask-Predict and left to right. The sentences and their masked pieces follow from the
corpus, the tokenizer and the seed alone (not the model), so those runs have 100 sentences with 244 masked pieces and
400 with 982, the counts the methods' record ids name. A record whose id names no count (span length, time, MH's
acceptance) is that of the last run that had its method. The group's mlm-phase records are the continued
pre-training's (`bertforge pretrain`), not this script's: they stay as they are. Another model's run goes to a
group of its own with `--group G [--row NAME --label TEXT]`: records G/NAME/<method>/token-acc and span-match, and
table G with a line per model and method (the models of experiments/glue_budget.py's race, say).

    python experiments/generation_infill.py --model DIR [--corpus ../shared/data/corpus/wikipedia-en-2018/wiki_en.txt.xz]
        [--articles 300] [--sentences 100] [--methods NAME,...] [--pll] [--seed 0] [--out results.json] [--records DIR]
"""
from __future__ import annotations

import argparse
import json
import random
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import torch

from bertforge.generation import generate, load_mlm, pseudo_log_likelihood
from bertforge.measuring import last_articles, pick_sentences

METHODS = {
    # name: generate() options
    "mask-predict T=1": {"sampler": "mask-predict", "iterations": 1},
    "mask-predict T=2": {"sampler": "mask-predict", "iterations": 2},
    "mask-predict T=4": {"sampler": "mask-predict", "iterations": 4},
    "mask-predict T=10": {"sampler": "mask-predict", "iterations": 10},
    "left-to-right (greedy)": {"sampler": "left-to-right"},
    "gibbs 10 sweeps temperature 1": {"sampler": "gibbs", "iterations": 10},
    "gibbs 10 sweeps temperature 0.1": {"sampler": "gibbs", "iterations": 10, "temperature": 0.1},
    "mh 3 sweeps temperature 1": {"sampler": "mh", "iterations": 3},
    # masked diffusion's reverse process (for a model pre-trained with --objective mdlm), each token its argmax
    "mdlm 10 steps greedy": {"sampler": "mdlm", "iterations": 10, "temperature": 0.0},
}

GROUP = "generation-infill"
#: method -> (its part of the record ids, its row of the methods table, its column of the span-length table)
LABELS = {
    "mask-predict T=1": ("mp-t1", "Mask-Predict T = 1", "T = 1"),
    "mask-predict T=2": ("mp-t2", "Mask-Predict T = 2", "T = 2"),
    "mask-predict T=4": ("mp-t4", "Mask-Predict T = 4", "T = 4"),
    "mask-predict T=10": ("mp-t10", "Mask-Predict T = 10", "T = 10"),
    "left-to-right (greedy)": ("l2r", "left to right, greedy", "left to right"),
    "gibbs 10 sweeps temperature 1": ("gibbs-t1", "Gibbs, 10 sweeps, temperature 1", None),
    "gibbs 10 sweeps temperature 0.1": ("gibbs-t01", "Gibbs, 10 sweeps, temperature 0.1", None),
    "mh 3 sweeps temperature 1": ("mh", "MH, 3 sweeps, temperature 1", None),
    "mdlm 10 steps greedy": ("mdlm-t10", "MDLM reverse process, 10 steps, greedy", None),
}
#: method -> (its time record, the method as that record names it, digits): seconds a sentence
TIMES = {"mask-predict T=1": ("mp-t1-seconds", "Mask-Predict T = 1", 1),
         "mask-predict T=10": ("mp-t10-seconds", "Mask-Predict T = 10", 2),
         "mh 3 sweeps temperature 1": ("mh-seconds", "MH, 3 sweeps", 1)}
GIBBS = ("gibbs 10 sweeps temperature 1", "gibbs 10 sweeps temperature 0.1")  # one time record: their mean
SPAN_LENGTH_METHODS = [name for name, (_, _, column) in LABELS.items() if column]
#: the two published runs (docs/GENERATION.md): sentences, masked pieces, methods; the methods table's columns
PUBLISHED = [name for name in LABELS if METHODS[name]["sampler"] != "mdlm"]  # the group's model is no mdlm model
RUNS = ((100, 244, PUBLISHED), (400, 982, SPAN_LENGTH_METHODS))


def accuracy_id(key: str, sentences: int, pieces: int) -> str:
    return f"{GROUP}/methods/{key}/token-acc-{sentences}-sent-{pieces}-pieces"


def span_match_id(key: str, sentences: int) -> str:
    return f"{GROUP}/methods/{key}/span-match-{sentences}"


def span_length_id(length: int, column: str) -> str:
    """The token accuracy of a span length's cell ("-2" after it: the span match)."""
    return f"{GROUP}/span-length/len{length}/{column.lower().replace(' = ', '-').replace(' ', '-')}"


def methods_table() -> dict:
    rows = []
    for name in PUBLISHED:
        key, label, _ = LABELS[name]
        row = [label + f" (acceptance {{{GROUP}/mh/acceptance}})" if key == "mh" else label]
        for sentences, pieces, methods in RUNS:
            ran = name in methods
            row += [f"{{{accuracy_id(key, sentences, pieces)}}}" if ran else "",
                    f"{{{span_match_id(key, sentences)}}}" if ran else ""]
        rows.append(row)
    header = ["method"]
    for sentences, pieces, _ in RUNS:
        header += [f"token acc. ({sentences} sent., {pieces} pieces)", f"span match ({sentences})"]
    return {"header": header, "align": ["---"] * len(header), "rows": rows}


def span_length_table() -> dict:
    columns = [LABELS[name][2] for name in SPAN_LENGTH_METHODS]
    rows = [[str(length), *(f"{{{span_length_id(length, c)}|bare}} / {{{span_length_id(length, c)}-2}}" for c in columns)]
            for length in (1, 2, 3, 4)]
    return {"header": ["span length", *columns], "align": ["---"] * (1 + len(columns)), "rows": rows}


TABLES = {f"{GROUP}-methods": methods_table(), f"{GROUP}-span-length": span_length_table()}


def make_records(results: dict, data: str, command: str) -> list:
    """The run's records: per method its token accuracy and exact span match (%), their ids naming the run's
    sentences and masked pieces (each token accuracy also under the group's second spelling of its id, with
    'acc.' and 'sent.'); per span length the token accuracy and span match of the span-length table's methods;
    MH's acceptance rate; seconds a sentence of Mask-Predict T = 1 and 10, of MH and of Gibbs (the mean of its
    two temperatures, their range as the spread)."""
    from bertforge.results_store import Record

    def record(rid: str, value: float, unit: str, what: str, digits: int, **extra) -> Record:
        return Record.measured(rid, value, unit, what, data, command=command, digits=digits, **extra)

    n, pieces, rows = results["sentences"], results["masked_pieces"], results["methods"]
    records = []
    for name, row in rows.items():
        key, label, column = LABELS[name]
        if "acceptance_rate" in row:
            label += f" (acceptance {100 * row['acceptance_rate']:.0f} %)"
        what = f"infilling held-out Wikipedia spans: {label}, token acc. ({n} sent., {pieces} pieces)"
        for rid in (accuracy_id(key, n, pieces), f"{GROUP}/methods/{key}/token-acc.-{n}-sent.-{pieces}-pieces"):
            records.append(record(rid, 100 * row["token_accuracy"], "%", what, 1))
        records.append(record(span_match_id(key, n), 100 * row["exact_span_match"], "%",
                              f"infilling held-out Wikipedia spans: {label}, span match ({n})", 1))
        if column:
            for length, cell in row["by_span_length"].items():
                what = (f"infilling held-out Wikipedia spans, {n} sentences, token accuracy / span match: {length}, "
                        f"{column}")
                for suffix, value in (("", cell["token_accuracy"]), ("-2", cell["exact_span_match"])):
                    records.append(record(span_length_id(length, column) + suffix, 100 * value, "%", what,
                                          1 if value else 0))  # none right: "0 %"
        if "acceptance_rate" in row:
            records.append(record(f"{GROUP}/mh/acceptance", 100 * row["acceptance_rate"], "%",
                                  "MH's acceptance rate on the infilling spans (3 sweeps, temperature 1)", 0))
        if name in TIMES:
            rid, label, digits = TIMES[name]
            records.append(record(f"{GROUP}/time/{rid}", row["seconds"] / n, "s", f"seconds a sentence, {label}", digits))
    gibbs = [rows[name]["seconds"] / n for name in GIBBS if name in rows]
    if gibbs:
        records.append(record(f"{GROUP}/time/gibbs-seconds", sum(gibbs) / len(gibbs), "s",
                              "seconds a sentence, Gibbs (10 sweeps)", 2, spread=(min(gibbs), max(gibbs))))
    return records


def model_records(results: dict, group: str, row: str, label: str, data: str, command: str,
                  folder: str | Path) -> tuple[list, dict]:
    """Another model's run as records of its own `group` (not the published group's fixed runs): per method its
    token accuracy and span match under `group`/`row`/<method>, and the group's table with a line per model and
    method (this row's lines replace its earlier ones, other models' stay)."""
    from bertforge.results_store import Record, read_store
    n, pieces = results["sentences"], results["masked_pieces"]
    records, lines = [], []
    for name, result in results["methods"].items():
        key, method, _ = LABELS[name]
        base = f"{group}/{row}/{key}"
        for part, value, what in (("token-acc", result["token_accuracy"], f"token acc. ({n} sent., {pieces} pieces)"),
                                  ("span-match", result["exact_span_match"], f"span match ({n} sent.)")):
            records.append(Record.measured(f"{base}/{part}", 100 * value, "%", f"infilling Wikipedia spans (the "
                                           f"corpus's last articles) with {label}: {method}, {what}", data,
                                           command=command, digits=1))
        lines.append([label, method, f"{{{base}/token-acc}}", f"{{{base}/span-match}}"])
    header = ["model", "method", f"token acc. ({n} sent., {pieces} pieces)", f"span match ({n} sent.)"]
    published = read_store(folder).tables.get(group) if Path(folder).is_dir() else None
    kept = [line for line in published["rows"] if f"{{{group}/{row}/" not in line[2]] \
        if published and published["header"] == header else []
    return records, {group: {"header": header, "align": ["---", "---", "---:", "---:"], "rows": kept + lines}}


def shown_path(path: str) -> str:
    """`path` as a record names it (`bertforge.measuring.portable_path`)."""
    from bertforge.measuring import portable_path
    return portable_path(path)


def mask_span(tokenizer, sentence: str, rng: random.Random) -> tuple[str, list[str]]:
    """The sentence as word pieces with one span of 1-4 pieces replaced by masks, and the true pieces."""
    pieces = tokenizer.convert_ids_to_tokens(tokenizer.encode(sentence, add_special_tokens=False))
    length = rng.randint(1, 4)
    start = rng.randint(0, len(pieces) - length)
    truth = pieces[start:start + length]
    masked = pieces[:start] + [tokenizer.mask_token] * length + pieces[start + length:]
    return masked, truth


def pieces_to_text(tokenizer, pieces: list[str]) -> str:
    """Word pieces back to text whose re-tokenization gives the same pieces (and masks)."""
    out = []
    for piece in pieces:
        if piece.startswith("##") and out:
            out[-1] += piece[2:]
        else:
            out.append(piece)
    return " ".join(out)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--corpus", default="../shared/data/corpus/wikipedia-en-2018/wiki_en.txt.xz")
    parser.add_argument("--articles", type=int, default=300)
    parser.add_argument("--sentences", type=int, default=100)
    parser.add_argument("--pll", action="store_true", help="also score the filled sentences (slow: one copy per token)")
    parser.add_argument("--methods", default=",".join(PUBLISHED), help="comma-separated methods (default: all but "
                        "mdlm, which is for a model pre-trained with --objective mdlm)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--records", metavar="DIR", help="also write the run's numbers as results-store records (group "
                        f"{GROUP}) into DIR, e.g. docs/results")
    parser.add_argument("--group", help="with --records: write this model's numbers under a group of their own, a "
                        "row per model and method (not the published group's runs)")
    parser.add_argument("--row", help="with --group: the model's part of the record ids (default: its folder name)")
    parser.add_argument("--label", help="with --group: the model as the table names it (default: --row)")
    args = parser.parse_args(argv)

    model, tokenizer = load_mlm(args.model)
    rng = random.Random(args.seed)
    sentences = pick_sentences(last_articles(Path(args.corpus), args.articles), tokenizer, args.sentences, rng)
    cases = []
    for sentence in sentences:
        masked, truth = mask_span(tokenizer, sentence, rng)
        text = pieces_to_text(tokenizer, masked)
        n_masks = tokenizer.encode(text).count(tokenizer.mask_token_id)
        original = pieces_to_text(tokenizer, [*masked[:masked.index(tokenizer.mask_token)], *truth,
                                              *masked[masked.index(tokenizer.mask_token) + len(truth):]])
        if n_masks == len(truth):
            cases.append((text, truth, original))
    print(f"{len(cases)} sentences, {sum(len(t) for _, t, _ in cases)} masked pieces", file=sys.stderr)

    results = {"sentences": len(cases), "masked_pieces": sum(len(t) for _, t, _ in cases), "methods": {}}
    if args.pll:
        results["originals_pll_per_token"] = pll_per_token(model, tokenizer, [o for _, _, o in cases])
        print(f"originals: PLL/token {results['originals_pll_per_token']:.3f}", flush=True)
    for name in [m for m in args.methods.split(",") if m]:
        options = METHODS[name]
        start = time.perf_counter()
        right = spans_right = total = 0
        filled, acceptance = [], []
        by_length: dict[int, list[int]] = {}   # span length -> [pieces right, pieces, spans right, spans]
        for i, (text, truth, _) in enumerate(cases):
            out = generate(model, tokenizer, text=text, seed=args.seed + i, **options)[0]
            right += sum(a == b for a, b in zip(out["tokens"], truth))
            spans_right += out["tokens"] == truth
            total += len(truth)
            tally = by_length.setdefault(len(truth), [0, 0, 0, 0])
            tally[0] += sum(a == b for a, b in zip(out["tokens"], truth))
            tally[1] += len(truth)
            tally[2] += out["tokens"] == truth
            tally[3] += 1
            filled.append(out["text"])
            if "acceptance_rate" in out:
                acceptance.append(out["acceptance_rate"])
        seconds = time.perf_counter() - start
        row = {"token_accuracy": right / total, "exact_span_match": spans_right / len(cases), "seconds": seconds,
               "by_span_length": {n: {"spans": t[3], "token_accuracy": t[0] / t[1], "exact_span_match": t[2] / t[3]}
                                  for n, t in sorted(by_length.items())}}
        if acceptance:
            row["acceptance_rate"] = sum(acceptance) / len(acceptance)
        if args.pll:
            row["pll_per_token"] = pll_per_token(model, tokenizer, filled)
        results["methods"][name] = row
        print(f"{name:34s} token acc {row['token_accuracy']:.3f}  span match {row['exact_span_match']:.3f}  "
              f"{seconds:.0f} s" + (f"  acceptance {row['acceptance_rate']:.2f}" if acceptance else "")
              + (f"  PLL/token {row['pll_per_token']:.3f}" if args.pll else ""), flush=True)
        print(" " * 34 + "  by span length: " + "  ".join(
            f"{n}: {v['token_accuracy']:.3f}/{v['exact_span_match']:.3f}" for n, v in row["by_span_length"].items()),
            flush=True)
        if args.out:
            args.out.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    if args.records:
        from bertforge.measuring import portable_command
        from bertforge.results_store import write_records
        data = (f"sentences of 12-40 pieces from the last {args.articles} articles of {shown_path(args.corpus)}, one "
                "span of 1-4 pieces masked")
        command = portable_command("experiments/generation_infill.py", list(sys.argv[1:] if argv is None else argv))
        if args.group:
            row = args.row or Path(args.model).name
            records, table = model_records(results, args.group, row, args.label or row, data, command, args.records)
            write_records(args.group, records, args.records, tables=table)
        else:
            write_records(GROUP, make_records(results, data, command), args.records, tables=TABLES)


def pll_per_token(model, tokenizer, texts: list[str]) -> float:
    scored = pseudo_log_likelihood(model, tokenizer, texts)
    return sum(r["pll"] for r in scored) / sum(len(tokenizer.encode(t, add_special_tokens=False)) for t in texts)


if __name__ == "__main__":
    torch.set_grad_enabled(False)
    main()
