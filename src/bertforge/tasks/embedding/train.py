"""Training sentence embeddings: the engine's stage for pairs (in-batch negatives) and scored pairs (CoSENT,
cosine), and `train_embeddings(settings)`, which writes a sentence-transformers folder.

The model is the checkpoint's plain encoder; a sentence vector is its pooled last layer (mean or [CLS]),
unit-length when asked. One forward pass per micro-batch embeds anchors, positives and negatives together, so
DDP sees one call. The saved folder is the encoder in the Hugging Face layout plus `modules.json`,
`1_Pooling/`, `2_Normalize/`, `sentence_bert_config.json` and `config_sentence_transformers.json`:
`SentenceTransformer(folder)`, `bertforge embed` and `bertforge serve` all embed with it alike.
"""
from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Callable, Sequence

import numpy as np
import torch

from bertforge.data.batches import EpochBatches
from bertforge.device import Precision, move_to
from bertforge.settings import MAX_BATCH, MAX_EPOCHS, MAX_LENGTH, SettingError, flat_keywords, part, setting
from bertforge.tasks.embedding.data import PairExample, RetrievalSet, read_beir, read_pairs
from bertforge.tasks.embedding.evaluation import RETRIEVAL_MAIN, STS_MAIN, evaluate_retrieval, evaluate_sts
from bertforge.tasks.embedding.losses import LOSSES, cosent, cosine_mse, in_batch_negatives
from bertforge.tasks.embedding.pooling import POOLING_MODES, Pooling, embed_texts, sentence_vectors
from bertforge.training.engine import FitResult, Session, Stage, TrainOptions
from bertforge.training.options import FaultHooks
from bertforge.training.run import Built
from bertforge.training.run import train as run_training

SAMPLERS = ("no-duplicates", "random")


def embedding_defaults() -> TrainOptions:
    """sentence-transformers' usual fine-tuning: lr 2e-5, a checkpoint only when asked for."""
    return TrainOptions(lr=2e-5, save_every=0, keep_checkpoints=1)


@flat_keywords
@dataclass
class EmbeddingSettings:
    """One embedding run: the checkpoint, the pairs, the loss, the pooling, and the engine's settings (`train`,
    also given by their own names: `EmbeddingSettings(..., max_steps=100, seed=1)`)."""

    model: str = setting(help="encoder folder to start from (HF or sentence-transformers layout)", metavar="DIR",
                         kind="existing_dir")
    train_file: str = setting(help="pairs: CSV/TSV/JSONL with anchor,positive[,negative] columns, or "
                              "sentence1,sentence2,score", flag="--train", metavar="FILE", kind="existing_file")
    output: str = setting(help="folder for the sentence-transformers model (new, empty, or this run's own)",
                          metavar="DIR")
    eval_path: str | None = setting(None, "evaluate on scored pairs (FILE: Spearman of cosine) or a BEIR folder "
                                    "(DIR: nDCG@10), after every epoch or --eval-every steps", flag="--eval",
                                    metavar="FILE|DIR")
    eval_split: str = setting("test", "the qrels file of a BEIR --eval folder (qrels/SPLIT.tsv)")
    loss: str | None = setting(None, "mnrl (in-batch negatives), cosent or cosine", choices=LOSSES,
                               deferred="default: mnrl for pairs, cosent for scored pairs")
    scale: float = setting(20.0, "mnrl and cosent: cosine x scale is the logit (1 / temperature)", positive=True,
                           maximum=1_000.0)
    symmetric: bool = setting(False, "mnrl: each positive must also pick its anchor (the two losses averaged)")
    pooling: str | None = setting(None, "token vectors -> sentence vector", choices=POOLING_MODES,
                                  deferred="default: the folder's, else mean")
    normalize: bool | None = setting(None, "unit-length sentence vectors (default: what the folder declares, else "
                                     "not)")
    epochs: float = setting(1.0, "passes over the pairs (--max-steps, when given, wins)", positive=True, maximum=MAX_EPOCHS)
    batch_size: int = setting(32, "pairs per micro-batch and process (more in-batch negatives with more)",
                              positive=True, maximum=MAX_BATCH)
    batch_sampler: str = setting("no-duplicates", "no-duplicates: no text twice in a batch (a repeated text "
                                 "would be a false negative); random: plain shuffling", choices=SAMPLERS)
    max_seq_length: int | None = setting(None, "tokens per text", positive=True,
                                         deferred="default: the folder's sentence_bert_config.json, else 128",
                                         maximum=MAX_LENGTH)
    warmup_fraction: float = setting(0.1, "fraction of the steps for linear lr warmup", flag="--warmup",
                                     kind="probability")
    eval_batch_size: int = setting(64, "texts per batch when evaluating", positive=True, maximum=MAX_BATCH)
    anchor_column: str | None = setting(None, "column of the anchors (default: anchor, query, question, "
                                        "sentence1 or text)")
    positive_column: str | None = setting(None, "column of the positives (default: positive, document, passage, "
                                          "sentence2 or text_pair)")
    negative_column: str | None = setting(None, "column of the hard negatives (default: negative, if present)")
    score_column: str | None = setting(None, "column of the scores (default: score or label, if present)")
    overwrite: bool = setting(False, "start again in an OUTPUT that holds another run (its contents are deleted)")
    train: TrainOptions = part(
        TrainOptions, embedding_defaults, title="training", hide=("warmup_steps",),
        deferred={"max_steps": "default: --epochs over the pairs"},
        help={"eval_every": "evaluate every N steps (0: after every epoch when --eval is given)"})


@dataclass(frozen=True)
class Recipe:
    """What the data and the folder decide: the loss, the pooling, the length."""

    loss: str
    pooling: Pooling


def decide(settings: EmbeddingSettings, examples: Sequence[PairExample]) -> Recipe:
    """The loss the data calls for (refusing one that does not fit it) and the pooling the folder declares
    (what the settings give wins)."""
    scored = examples[0].score is not None
    loss = settings.loss or ("cosent" if scored else "mnrl")
    if scored and loss == "mnrl":
        raise SettingError("{loss} mnrl trains on (anchor, positive) pairs; {path} has scores: use {loss} cosent "
                           "or cosine", owner=EmbeddingSettings, path=settings.train_file)
    if not scored and loss != "mnrl":
        raise SettingError("{loss} {given} trains on scored pairs; {path} has no score column ({score_column}): use "
                           "{loss} mnrl", owner=EmbeddingSettings, given=loss, path=settings.train_file)
    declared = Pooling.from_folder(settings.model)
    pooling = Pooling(settings.pooling or declared.mode,
                      declared.normalize if settings.normalize is None else settings.normalize,
                      settings.max_seq_length or declared.max_seq_length or 128)
    return Recipe(loss, pooling)


def check_length(length: int, config: Any, model: str | Path) -> None:
    """Refuse a text length the model has no position embeddings for: it would fail at the first long batch, or
    write a folder sentence-transformers cannot run."""
    longest = getattr(config, "max_sequence_length", None) or getattr(config, "max_position_embeddings", None)
    if isinstance(longest, int) and length > longest:
        raise SettingError("{max_seq_length} {length}: the model {model} has positions for {longest} tokens; give "
                           "{longest} or fewer", owner=EmbeddingSettings, length=length, model=model, longest=longest)


class PairBatches(EpochBatches):
    """`EpochBatches` of pairs: shuffled batches of one size, a new order every epoch; under torchrun each
    process takes its share of every global batch (the in-batch negatives are the global batch's).
    `no-duplicates` defers an example whose text is already in the batch being filled to a later batch."""

    what = "pairs"

    def __init__(self, examples: Sequence[PairExample], batch_size: int, seed: int, sampler: str = "no-duplicates",
                 rank: int = 0, world_size: int = 1) -> None:
        self.sampler = sampler
        super().__init__(examples, batch_size, seed, rank=rank, world_size=world_size)

    @property
    def examples(self) -> Sequence[PairExample]:
        return self.items

    def item_length(self, item: PairExample) -> int:
        return 0  # pairs are tokenised batch by batch; the order does not bucket by length

    def make_batch(self, indices: list[int]) -> list[PairExample]:
        return [self.items[i] for i in indices]

    def epoch_order(self, epoch: int) -> list[list[int]]:
        order = np.random.default_rng([self.seed, epoch]).permutation(len(self.items)).tolist()
        size = self.batch_size * self.world_size
        if self.sampler == "random":
            return [order[i:i + size] for i in range(0, len(order) - size + 1, size)]
        batches: list[list[int]] = []
        pending = deque(order)
        while len(pending) >= size:
            batch, seen, skipped = [], set(), []
            while pending and len(batch) < size:
                i = pending.popleft()
                texts = self._texts(i)
                if seen.isdisjoint(texts):
                    batch.append(i)
                    seen.update(texts)
                else:
                    skipped.append(i)
            if len(batch) < size:
                break
            batches.append(batch)
            pending.extendleft(reversed(skipped))  # the deferred ones open the next batch
        return batches

    def shard(self, batches: list[list[int]]) -> list[list[int]]:
        return [b[self.rank * self.batch_size:(self.rank + 1) * self.batch_size] for b in batches]

    def no_batches(self, epoch: int) -> Exception:
        if epoch == 0:
            return SettingError("{n} pairs give no batch of {size} x {processes} processes; lower {batch_size}",
                                owner=EmbeddingSettings, n=len(self.items), size=self.batch_size,
                                processes=self.world_size)
        # no-duplicates on few distinct texts: another order may fill no batch
        return SettingError("epoch {epoch} of the {n} pairs fills no batch of {size} without a text twice; lower "
                            "{batch_size}, or use {batch_sampler} random", owner=EmbeddingSettings, epoch=epoch + 1,
                            n=len(self.items), size=self.batch_size * self.world_size)

    def _texts(self, i: int) -> tuple[str, ...]:
        ex = self.items[i]
        return tuple(t for t in (ex.anchor, ex.positive, ex.negative) if t is not None)


class EmbeddingStage(Stage):
    """Sentence vectors of an encoder trained with a pair loss: the engine's stage for embeddings."""

    name = "embeddings"
    find_unused_parameters = True  # the encoder's pooler is loaded and saved, never used

    def __init__(self, settings: EmbeddingSettings, recipe: Recipe, model: torch.nn.Module, tokenizer: Any,
                 batches: PairBatches, evaluation: Callable[[Callable], dict[str, float]] | None,
                 main_metric: str | None, precision: Precision) -> None:
        self.settings, self.recipe, self.model, self.tokenizer = settings, recipe, model, tokenizer
        self.batches, self.evaluation, self.main_metric, self.precision = batches, evaluation, main_metric, precision
        self.device = next(model.parameters()).device
        self.final_checkpoint = settings.train.save_every > 0

    def run_record(self) -> dict[str, Any]:
        s, r = self.settings, self.recipe
        return {"model": s.model, "train": s.train_file, "loss": r.loss, "scale": s.scale, "symmetric": s.symmetric,
                "pooling": r.pooling.mode, "normalize": r.pooling.normalize, "batch_size": s.batch_size,
                "batch_sampler": s.batch_sampler, "max_seq_length": r.pooling.max_seq_length,
                "pairs": len(self.batches.examples)}

    def next_batch(self) -> dict[str, Any]:
        examples = self.batches.next()
        texts = [e.anchor for e in examples] + [e.positive for e in examples]
        if examples[0].negative is not None:
            texts += [e.negative for e in examples]
        enc = self.tokenizer(texts, padding=True, truncation=True, max_length=self.recipe.pooling.max_seq_length,
                             return_tensors="pt")
        batch = {k: enc[k] for k in ("input_ids", "attention_mask", "token_type_ids") if k in enc}
        batch["rows"] = len(examples)
        if examples[0].score is not None:
            batch["scores"] = torch.tensor([e.score for e in examples], dtype=torch.float32)
        return batch

    def loss(self, net: torch.nn.Module, batch: dict[str, Any]) -> Any:
        inputs = move_to({k: batch[k] for k in ("input_ids", "attention_mask", "token_type_ids") if k in batch},
                         self.device)
        hidden = net(**inputs).last_hidden_state
        vectors = sentence_vectors(hidden, inputs["attention_mask"], self.recipe.pooling.mode,
                                   self.recipe.pooling.normalize)
        parts = vectors.split(batch["rows"])
        s = self.settings
        if self.recipe.loss == "mnrl":
            loss, accuracy = in_batch_negatives(parts[0], parts[1], parts[2] if len(parts) > 2 else None,
                                                scale=s.scale, symmetric=s.symmetric)
            return SimpleNamespace(loss=loss, accuracy=accuracy.detach())
        scores = batch["scores"].to(self.device)
        loss = cosent(parts[0], parts[1], scores, scale=s.scale) if self.recipe.loss == "cosent" \
            else cosine_mse(parts[0], parts[1], scores)
        return SimpleNamespace(loss=loss, accuracy=None)

    def add_metrics(self, sums: dict[str, float], out: Any, batch: dict[str, Any]) -> None:
        rows = float(batch["rows"])
        sums["loss_sum"] = sums.get("loss_sum", 0.0) + float(out.loss.detach()) * rows
        sums["rows"] = sums.get("rows", 0.0) + rows
        if out.accuracy is not None:
            sums["hits"] = sums.get("hits", 0.0) + float(out.accuracy) * rows

    def summarize(self, sums: dict[str, float]) -> dict[str, float]:
        if not sums.get("rows"):
            return {}
        out = {"train_loss": sums["loss_sum"] / sums["rows"]}
        if "hits" in sums:
            out["in_batch_accuracy"] = sums["hits"] / sums["rows"]
        return out

    def postfix(self, values: dict[str, float]) -> dict[str, str]:
        return {"acc": f"{values['in_batch_accuracy']:.3f}"} if "in_batch_accuracy" in values else {}

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """The current model's sentence vectors (evaluation)."""
        self.model.eval()
        try:
            return embed_texts(self.model, self.tokenizer, texts, mode=self.recipe.pooling.mode,
                               normalize=self.recipe.pooling.normalize,
                               max_length=self.recipe.pooling.max_seq_length or 128,
                               batch_size=self.settings.eval_batch_size, precision=self.precision)
        finally:
            self.model.train()

    def evaluate(self) -> dict[str, float]:
        if self.evaluation is None:
            return {}
        return {k: float(v) for k, v in self.evaluation(self.encode).items()}

    def score(self, metrics: dict[str, float]) -> float | None:
        return metrics.get(self.main_metric) if self.main_metric else None

    def state_dict(self) -> dict[str, Any]:
        return self.batches.state_dict()

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.batches.load_state_dict(state)

    def save(self, folder: Path) -> None:
        self.model.save_pretrained(folder)
        self.tokenizer.save_pretrained(folder)
        self.recipe.pooling.save(folder, self.model.config.hidden_size)


def load_evaluation(settings: EmbeddingSettings) -> tuple[Callable[[Callable], dict[str, float]] | None, str | None]:
    """What `--eval` asks for: STS on a file of scored pairs, retrieval on a BEIR folder; and its main metric."""
    if settings.eval_path is None:
        return None, None
    path = Path(settings.eval_path)
    if path.is_dir():
        data: RetrievalSet = read_beir(path, settings.eval_split)
        return (lambda encode: evaluate_retrieval(encode, data)), RETRIEVAL_MAIN
    if not path.is_file():
        raise SettingError("{eval_path} {path}: no such file or folder", owner=EmbeddingSettings, path=path)
    pairs = read_pairs(path, anchor_column=settings.anchor_column, positive_column=settings.positive_column,
                       score_column=settings.score_column)
    if pairs[0].score is None:
        raise SettingError("{eval_path} {path}: expected scored pairs (a score column) or a BEIR folder",
                           owner=EmbeddingSettings, path=path)
    return (lambda encode: evaluate_sts(encode, pairs)), STS_MAIN


def run_options(settings: EmbeddingSettings, steps_per_epoch: int, evaluates: bool) -> TrainOptions:
    """The engine's options: steps from --epochs unless --max-steps is given, warmup as a fraction of them, and
    an evaluation after every epoch unless told otherwise."""
    train = settings.train
    total = train.max_steps or max(1, math.ceil(steps_per_epoch * settings.epochs))
    every = train.eval_every or (steps_per_epoch if evaluates else 0)
    return replace(train, max_steps=total, warmup_steps=int(settings.warmup_fraction * total), eval_every=every)


def train_embeddings(settings: EmbeddingSettings, say: Callable[[str], None] | None = None,
                     hooks: FaultHooks | None = None) -> FitResult:
    """Train the encoder of `settings.model` on the pairs and save a sentence-transformers folder in OUTPUT.
    `say` receives the progress lines (the command passes print; none: quiet)."""
    from bertforge.model.auto import AutoModel
    from bertforge.tokenization import load_tokenizer
    train = settings.train

    def build(session: Session, out: Path) -> Built:
        tell = say if session.is_main and say else (lambda msg: None)
        examples = read_pairs(settings.train_file, anchor_column=settings.anchor_column,
                              positive_column=settings.positive_column, negative_column=settings.negative_column,
                              score_column=settings.score_column)
        recipe = decide(settings, examples)
        top = max(abs(e.score) for e in examples) if examples[0].score is not None else 0.0
        if recipe.loss == "cosine" and top > 1:
            examples = [replace(e, score=e.score / top) for e in examples]  # type: ignore[operator]
            tell(f"NOTE: --loss cosine regresses cosines onto scores in [-1, 1]: the scores are divided by {top:g}")
        evaluation, main_metric = load_evaluation(settings)
        torch.manual_seed(train.seed)
        model = AutoModel.from_pretrained(settings.model).to(session.device)
        check_length(recipe.pooling.max_seq_length, model.config, settings.model)
        tokenizer = load_tokenizer(settings.model)
        info = session.info
        batches = PairBatches(examples, settings.batch_size, train.seed, settings.batch_sampler, info.rank,
                              info.world_size)
        steps_per_epoch = max(1, batches.per_epoch // train.grad_accum)
        opts = run_options(settings, steps_per_epoch, evaluation is not None)
        tell(f"{len(examples)} {'scored pairs' if examples[0].score is not None else 'pairs'}, loss {recipe.loss}, "
            f"{recipe.pooling.mode} pooling{', normalized' if recipe.pooling.normalize else ''}, "
            f"{opts.max_steps} steps ({steps_per_epoch} per epoch)")
        stage = EmbeddingStage(settings, recipe, model, tokenizer, batches, evaluation, main_metric,
                               session.precision(train.precision))
        return Built(stage, options=opts)
    return run_training(settings, build, verb="train-embeddings", hooks=hooks,
                        inputs=(settings.model, settings.train_file, settings.eval_path))
