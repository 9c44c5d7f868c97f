"""Predictor folders for tests, made directly (no fine-tuning): a model with every head weight saved, the real
MiniLM WordPiece tokenizer and a `task.json`, laid out as `bertforge finetune` writes them."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch

HEAD_CLASSES = {"sequence_classification": "BertForSequenceClassification",
                "regression": "BertForSequenceClassification",
                "token_classification": "BertForTokenClassification",
                "question_answering": "BertForQuestionAnswering",
                "multiple_choice": "BertForMultipleChoice"}


def write_task(out: Path, task: str, head: str, labels: Any = None, **extra: Any) -> None:
    (out / "task.json").write_text(json.dumps({"task": task, "head": head, "labels": labels, **extra}))


def tiny_predictor(out: Path, tokenizer_dir: Path, task: str, head: str, labels: list[str] | None = None, *,
                   seed: int = 0, **config: Any) -> Path:
    """A randomly initialised 2-layer BERT of the head kind: fast, and every weight is in the checkpoint."""
    import bertforge
    from bertforge.tokenization import BertTokenizer
    tok = BertTokenizer.from_pretrained(tokenizer_dir)
    out.mkdir(parents=True, exist_ok=True)
    id2label = ({0: "score"} if head == "regression" else dict(enumerate(labels)) if labels else None)
    cfg = bertforge.BertConfig(**{"vocab_size": tok.vocab_size, "hidden_size": 32, "num_hidden_layers": 2,
                                  "num_attention_heads": 2, "intermediate_size": 64,
                                  "max_position_embeddings": 512, "id2label": id2label, **config})
    torch.manual_seed(seed)
    model = getattr(bertforge, HEAD_CLASSES[head])(cfg)
    model.save_pretrained(out)
    tok.save_pretrained(out)
    write_task(out, task, head, labels, max_seq_length=128)  # short SQuAD windows too: fast, several per context
    return out


def minilm_predictor(out: Path, minilm_dir: Path, task: str = "sst2", labels: tuple[str, ...] = ("0", "1"),
                     seed: int = 0) -> Path:
    """The real MiniLM encoder with a (seeded random) classifier on top, saved as a predictor folder."""
    from bertforge import BertForSequenceClassification
    from bertforge.tokenization import BertTokenizer
    torch.manual_seed(seed)
    model = BertForSequenceClassification.from_pretrained(minilm_dir, id2label=dict(enumerate(labels)))
    with torch.no_grad():  # a wide random classifier, so probabilities are far from uniform
        model.classifier.weight.normal_(0.0, 0.5)
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    BertTokenizer.from_pretrained(minilm_dir).save_pretrained(out)
    write_task(out, task, "sequence_classification", list(labels), max_seq_length=128)
    return out


def tiny_encoder(out: Path, tokenizer_dir: Path, seed: int = 0) -> Path:
    """A tiny random BERT (no head) with the real MiniLM vocabulary: what the data checks need, trained in
    seconds."""
    from bertforge import BertConfig, BertModel
    from bertforge.tokenization import BertTokenizer
    tok = BertTokenizer.from_pretrained(tokenizer_dir)
    torch.manual_seed(seed)
    BertModel(BertConfig.preset("tiny", vocab_size=tok.vocab_size)).save_pretrained(out)
    tok.save_pretrained(out)
    return out


def finetune_mrpc_then_compare(folder: Path, tuned: Path, shared_data: Path, theirs_class: type) -> None:
    """`bertforge finetune --task mrpc` (16 pairs, one epoch) on a family's folder; its predictor's logits equal
    transformers' `theirs_class` on the same folder, on an input longer than a window or a few blocks."""
    import warm_cli
    from bertforge.model.auto import AutoModelForSequenceClassification
    done = warm_cli.run(["finetune", "--task", "mrpc", "--model", str(folder), "--output", str(tuned),
                         "--data", str(shared_data / "glue" / "MRPC"), "--epochs", "1", "--batch-size", "8",
                         "--lr", "1e-4", "--max-train-samples", "16", "--max-eval-samples", "16", "--no-progress"],
                        timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads((tuned / "config.json").read_text())["architectures"] == [theirs_class.__name__]
    ours = AutoModelForSequenceClassification.from_pretrained(tuned).eval()
    theirs = theirs_class.from_pretrained(tuned).eval()
    ids = torch.tensor([[101] + [1996, 3185, 2001, 2307] * 10 + [102, 2023, 2143, 102, 0, 0]])
    mask = (ids != 0).long()
    with torch.no_grad():
        a = ours(input_ids=ids, attention_mask=mask).logits
        b = theirs(input_ids=ids, attention_mask=mask).logits
    assert torch.allclose(a, b, atol=1e-5), (a, b)
