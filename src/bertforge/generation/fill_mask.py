"""Fill-mask: the top-k tokens at every [MASK] of a batch of sentences, and where chosen words rank there.

Used by `bertforge fill-mask` and the server's /fill-mask.
"""
from __future__ import annotations

from dataclasses import dataclass

from bertforge.settings import SettingError


@dataclass
class TargetScore:
    word: str
    piece: str
    rank: int          # 1 = the model's top prediction
    probability: float


def fill_mask(model, tokenizer, texts: list[str], top_k: int = 5,
              targets: list[str] = ()) -> list[list[dict]]:
    """For each text, for each mask in it: {"top": [(token, probability)] * top_k, "targets": [TargetScore]}."""
    import torch

    from bertforge.generation.mlm import check_finite
    texts = [t.replace("[MASK]", tokenizer.mask_token) for t in texts]
    target_ids = [_first_piece(tokenizer, w) for w in targets]
    enc = tokenizer(texts, padding=True, truncation=True, return_tensors="pt")
    positions = enc["input_ids"] == tokenizer.mask_token_id
    device = next(model.parameters()).device
    inputs = {k: enc[k].to(device) for k in ("input_ids", "attention_mask", "token_type_ids") if k in enc}
    model.eval()
    with torch.no_grad():
        logits = model(**inputs, prediction_positions=positions.to(device)).logits.cpu()
    check_finite(logits)
    probs = logits.float().softmax(-1)
    top = probs.topk(min(top_k, probs.shape[-1]), dim=-1)
    results: list[list[dict]] = []
    row = 0
    for count in positions.sum(1).tolist():
        per_text = []
        for _ in range(count):
            p = probs[row]
            scores = [TargetScore(w, tokenizer.convert_ids_to_tokens(i), int((p > p[i]).sum()) + 1, float(p[i]))
                      for w, i in zip(targets, target_ids)]
            per_text.append({"top": [(tokenizer.convert_ids_to_tokens(i), v)
                                     for v, i in zip(top.values[row].tolist(), top.indices[row].tolist())],
                             "targets": scores})
            row += 1
        results.append(per_text)
    return results


def _first_piece(tokenizer, word: str) -> int:
    from bertforge.tokenization.bpe import RobertaTokenizer
    if isinstance(tokenizer, RobertaTokenizer):
        word = " " + word  # byte-level BPE: a word inside a sentence carries its leading space ("Ġgood")
    ids = tokenizer.encode(word, add_special_tokens=False)
    if not ids:
        raise SettingError("{targets}: {word!r} gives no tokens with this vocabulary", word=word.strip())
    if ids[0] == tokenizer.unk_token_id:
        raise SettingError("{targets}: {word!r} is not in this vocabulary (it would be ranked as {unk})",
                           word=word.strip(), unk=tokenizer.unk_token)
    return ids[0]
