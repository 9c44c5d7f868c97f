"""`bertforge fill-mask`: the top-k tokens for each [MASK] in a sentence."""
from __future__ import annotations

import argparse

from bertforge.commands import add_common


def register(sub) -> None:
    p = sub.add_parser("fill-mask", help="predict the [MASK] tokens of sentences",
                       description="Print the top-k predictions for every [MASK] in each sentence.")
    p.add_argument("--model", required=True, metavar="DIR", help="a checkpoint folder with an MLM head and vocab.txt")
    p.add_argument("text", nargs="+", help='sentences such as "the man went to the [MASK] ."')
    p.add_argument("--top-k", type=int, default=5)
    add_common(p)
    p.set_defaults(run=run)


def fill_mask(model, tokenizer, texts: list[str], top_k: int = 5) -> list[list[list[tuple[str, float]]]]:
    """For each text, for each [MASK] in it: [(token, probability)] * top_k."""
    import torch
    enc = tokenizer(texts, padding=True, truncation=True, return_tensors="pt")
    positions = enc["input_ids"] == tokenizer.mask_token_id
    model.eval()
    with torch.no_grad():
        logits = model(enc["input_ids"], attention_mask=enc["attention_mask"],
                       token_type_ids=enc["token_type_ids"], prediction_positions=positions).logits
    probs = logits.float().softmax(-1)
    top = probs.topk(top_k, dim=-1)
    rows = iter(zip(top.values.tolist(), top.indices.tolist()))
    results = []
    for count in positions.sum(1).tolist():
        per_text = []
        for _ in range(count):
            values, indices = next(rows)
            per_text.append([(tokenizer.convert_ids_to_tokens(i), v) for v, i in zip(values, indices)])
        results.append(per_text)
    return results


def run(args: argparse.Namespace) -> int:
    from bertforge import BertForMaskedLM
    from bertforge.tokenization import BertTokenizer
    tokenizer = BertTokenizer.from_pretrained(args.model)
    model = BertForMaskedLM.from_pretrained(args.model)
    for text, masks in zip(args.text, fill_mask(model, tokenizer, args.text, args.top_k)):
        print(text)
        if not masks:
            print(f"  (no {tokenizer.convert_ids_to_tokens(tokenizer.mask_token_id)} token in this text)")
        for i, candidates in enumerate(masks):
            shown = "  ".join(f"{tok} {p:.3f}" for tok, p in candidates)
            print(f"  [MASK] #{i + 1}: {shown}")
    return 0
