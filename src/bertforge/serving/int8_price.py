"""What int8 costs on the user's own data: the metric and the speed of the fp32 and the int8 ONNX graph, side by side.

Dynamic int8 quantization shrinks the weights four times, but whether it keeps the model's quality, and whether it
is any faster on a given CPU, depends on the model and the machine; so `export --quantize int8 --calibrate-on FILE`
measures both graphs on FILE before it keeps the int8 one:
- a classifier predictor: accuracy on the labelled file (the task's reader: GLUE files or text[,text_pair],label);
- a regression predictor: Spearman correlation of its scores with the labels;
- an encoder (sentence embeddings): Spearman correlation of the cosine of the two texts' vectors with the gold
  score, on scored pairs (GLUE STS-B's sentence1, sentence2, score, or text, text_pair, label); or, given a BEIR
  folder (corpus.jsonl, queries.jsonl, qrels/dev.tsv or qrels/test.tsv), nDCG@10 of exact cosine search.
Metrics are in points (x100); speed is the mean seconds per batch of 32 over batches that sample the file's
lengths (the median of three passes), the two graphs taking turns.
"""
from __future__ import annotations

import statistics
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from bertforge.settings import SettingError

BATCH = 32
TIMED_BATCHES = 8
ROUNDS = 3


@dataclass(frozen=True)
class Int8Price:
    """The metric and the speed of the fp32 and the int8 graph on one file."""

    metric: str
    fp32: float            # points
    int8: float            # points
    examples: int
    fp32_seconds: float    # mean seconds per batch of `BATCH` (median of the passes)
    int8_seconds: float
    file: str

    @property
    def drop(self) -> float:
        """Points lost by int8 (negative: it scored higher)."""
        return self.fp32 - self.int8

    @property
    def speedup(self) -> float:
        return self.fp32_seconds / self.int8_seconds

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "drop": self.drop, "speedup": self.speedup}

    def summary(self) -> str:
        unit = "queries" if self.metric == "ndcg@10" else "examples"
        return (f"int8 on {Path(self.file).name} ({self.examples} {unit}): {self.metric} {self.fp32:.2f} -> "
                f"{self.int8:.2f} ({-self.drop:+.2f} points); {1e3 * self.fp32_seconds:.1f} -> "
                f"{1e3 * self.int8_seconds:.1f} ms per batch of {BATCH} ({self.speedup:.2f}x)")


class Int8TooCostly(SettingError):
    """The int8 graph loses more than the allowed drop on the user's file."""


def price_int8(folder: Path, fp32_file: Path, int8_file: Path, data_file: str | Path) -> Int8Price:
    """Score the fp32 and the int8 graph (both exported from `folder`'s files) on `data_file`, and time them."""
    from bertforge.serving.onnx_backend import OnnxModel, folder_head
    from bertforge.tasks.heads import HEADS
    fp32 = OnnxModel.from_pretrained(folder, file=fp32_file)
    int8 = OnnxModel.from_pretrained(folder, file=int8_file)
    head = folder_head(folder)
    if head == "encoder" and Path(data_file).is_dir():
        metric, scores, batches = _retrieval_scores(folder, (fp32, int8), data_file)
    elif head == "encoder":
        metric, scores, batches = _embedding_scores(folder, (fp32, int8), data_file)
    elif HEADS[head].per_text:
        metric, scores, batches = _predictor_scores(folder, (fp32, int8), data_file)
    else:
        raise SettingError("{calibrate_on}: a {head} folder has no metric bertforge measures int8 with; it measures "
                           "classifier and regression predictors and sentence-embedding encoders", head=head)
    fp32_s, int8_s = _time(fp32, int8, batches)
    return Int8Price(metric, scores[0], scores[1], scores[2], fp32_s, int8_s, str(data_file))


def _predictor_scores(folder: Path, models, data_file) -> tuple[str, tuple[float, float, int], list[dict]]:
    from bertforge.tasks.heads import HEADS
    from bertforge.tasks.predictor import Predictor, read_task_file
    from bertforge.tokenization import load_tokenizer
    task = read_task_file(folder)
    tokenizer = load_tokenizer(folder)
    metric = "spearman" if HEADS[task["head"]].regression else "accuracy"
    values, examples = [], []
    for model in models:
        kept: dict = {}
        report = Predictor(model, tokenizer, task, folder).evaluate(eval_file=str(data_file), keep=kept)
        name = next(iter(kept))
        examples = kept[name][0]
        if metric not in report[name]:
            raise SettingError("{calibrate_on} {file}: the {task} metrics have no {metric}", file=data_file,
                               task=task["task"], metric=metric)
        values.append(100.0 * float(report[name][metric]))
    texts = [ex.text for ex in examples]
    pairs = [ex.text_pair for ex in examples] if examples and examples[0].text_pair is not None else None
    length = task.get("max_seq_length") or 128
    return metric, (values[0], values[1], len(examples)), _batches(tokenizer, texts, pairs, length)


def _embedding_scores(folder: Path, models, data_file) -> tuple[str, tuple[float, float, int], list[dict]]:
    from scipy.stats import spearmanr

    from bertforge.serving.embeddings import Pooling, SentenceEncoder
    from bertforge.tokenization import load_tokenizer
    firsts, seconds, gold = read_scored_pairs(data_file)
    tokenizer = load_tokenizer(folder)
    values = []
    for model in models:
        encoder = SentenceEncoder(model, tokenizer, Pooling.from_folder(folder))
        a, b = encoder.encode(firsts, batch_size=BATCH), encoder.encode(seconds, batch_size=BATCH)
        cosine = (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1)).clip(min=1e-12)
        values.append(100.0 * float(spearmanr(cosine, gold).statistic))
    length = SentenceEncoder(models[0], tokenizer, Pooling.from_folder(folder)).max_length
    return "spearman", (values[0], values[1], len(gold)), _batches(tokenizer, firsts + seconds, None, length)


def _retrieval_scores(folder: Path, models, data_dir) -> tuple[str, tuple[float, float, int], list[dict]]:
    """nDCG@10 (x100) of each graph on a BEIR folder's dev qrels (its test qrels when it has no dev split)."""
    from bertforge.serving.embeddings import Pooling, SentenceEncoder
    from bertforge.tasks.embedding.data import read_beir
    from bertforge.tasks.embedding.evaluation import evaluate_retrieval
    from bertforge.tokenization import load_tokenizer
    split = "dev" if (Path(data_dir) / "qrels" / "dev.tsv").is_file() else "test"
    try:
        data = read_beir(data_dir, split)
    except ValueError as err:
        raise SettingError("{calibrate_on}: {err}", err=err) from None
    tokenizer = load_tokenizer(folder)
    values = []
    for model in models:
        encoder = SentenceEncoder(model, tokenizer, Pooling.from_folder(folder))
        values.append(100.0 * evaluate_retrieval(lambda texts: encoder.encode(texts, batch_size=BATCH), data)["ndcg@10"])
    length = SentenceEncoder(models[0], tokenizer, Pooling.from_folder(folder)).max_length
    texts = list(data.queries.values()) + list(data.corpus.values())
    return "ndcg@10", (values[0], values[1], len(data.queries)), _batches(tokenizer, texts, None, length)


def read_scored_pairs(path: str | Path) -> tuple[list[str], list[str], list[float]]:
    """(first texts, second texts, gold scores) of a scored-pairs file: GLUE STS-B's layout (a `score` column), or
    text, text_pair, label rows in CSV, TSV or JSON Lines."""
    from bertforge.tasks.task_data import load_task_data
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"--calibrate-on {path}: no such file")
    with path.open(encoding="utf-8", errors="replace") as f:
        header = f.readline()
    task = "stsb" if "score" in header.rstrip("\r\n").split("\t") else "regression"
    data = load_task_data(task, None, None, str(path), need_train=False)
    examples = next(iter(data.evals.values()))
    if not examples or examples[0].text_pair is None:
        raise SettingError("{calibrate_on} {file}: expected scored pairs (sentence1, sentence2, score or text, "
                           "text_pair, label) for an embedding model", file=path)
    return [ex.text for ex in examples], [ex.text_pair for ex in examples], [float(ex.label) for ex in examples]


def _batches(tokenizer, texts: list[str], pairs: list[str] | None, length: int) -> list[dict]:
    """Up to `TIMED_BATCHES` padded batches of `BATCH` of the file's own inputs (length-sorted, as served)."""
    order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
    step = max(1, len(order) // (BATCH * TIMED_BATCHES))
    picked = order[::step][:BATCH * TIMED_BATCHES]
    out = []
    for start in range(0, len(picked), BATCH):
        idx = picked[start:start + BATCH]
        enc = tokenizer([texts[i] for i in idx], [pairs[i] for i in idx] if pairs else None, padding=True,
                        truncation=True, max_length=length, return_tensors="pt")
        out.append({k: enc[k] for k in ("input_ids", "attention_mask", "token_type_ids") if k in enc})
    return out


def _time(fp32, int8, batches: list[dict]) -> tuple[float, float]:
    """Seconds per batch of each graph, averaged over the batches (the batches sample the file's lengths, so this
    is the file's throughput; a median batch would leave out how int8 fares on the long ones), the median of
    `ROUNDS` passes; the two take turns batch by batch, after one warm-up pass."""
    for batch in batches:
        fp32(**batch)
        int8(**batch)
    passes: dict[int, list[float]] = {0: [], 1: []}
    for r in range(ROUNDS):
        spent = [0.0, 0.0]
        for b, batch in enumerate(batches):
            for i in ((0, 1) if (r + b) % 2 == 0 else (1, 0)):
                start = time.perf_counter()
                (fp32, int8)[i](**batch)
                spent[i] += time.perf_counter() - start
        for i in (0, 1):
            passes[i].append(spent[i] / len(batches))
    return statistics.median(passes[0]), statistics.median(passes[1])
