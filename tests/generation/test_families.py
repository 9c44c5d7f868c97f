"""Other families: RoBERTa (<mask>, <s> </s>, byte BPE) and DistilBERT, checked against `transformers`.

Random-init models have no known infill, so these check what must hold for any weights: PLL equals a loop
over masked copies run by transformers' own class, and Mask-Predict with T = 1 takes each mask's argmax of
transformers' logits (special tokens excluded)."""
from __future__ import annotations

import pytest
import torch

from bertforge.generation import generate, load_mlm, pseudo_log_likelihood

from needs import require_module

transformers = require_module("transformers")
CORPUS = "\n".join(f"the cat number {i} sat on the mat and looked at the dog ." for i in range(200))


def roberta_folder(tmp_path):
    from bertforge.model.roberta import RobertaConfig, RobertaForMaskedLM
    from bertforge.tokenization.auto import load_tokenizer
    from bertforge.tokenization.bpe import train_bpe
    (tmp_path / "corpus.txt").write_text(CORPUS)
    train_bpe([tmp_path / "corpus.txt"], tmp_path / "m", vocab_size=300, min_frequency=2, show_progress=False)
    torch.manual_seed(0)
    config = RobertaConfig.preset("tiny", vocab_size=load_tokenizer(tmp_path / "m").vocab_size)
    RobertaForMaskedLM(config).save_pretrained(tmp_path / "m")
    return tmp_path / "m", transformers.RobertaForMaskedLM


def distilbert_folder(tmp_path):
    from bertforge.cli import main
    from bertforge.model.distilbert import DistilBertConfig, DistilBertForMaskedLM
    from bertforge.tokenization.auto import load_tokenizer
    (tmp_path / "corpus.txt").write_text(CORPUS)
    assert main(["vocab", "--input", str(tmp_path / "corpus.txt"), "--output", str(tmp_path / "m"),
                 "--vocab-size", "200", "--unused", "0"]) == 0
    torch.manual_seed(0)
    config = DistilBertConfig.preset("tiny", vocab_size=load_tokenizer(tmp_path / "m").vocab_size)
    DistilBertForMaskedLM(config).save_pretrained(tmp_path / "m")
    return tmp_path / "m", transformers.DistilBertForMaskedLM


FAMILIES = {"roberta": roberta_folder, "distilbert": distilbert_folder}
TEXTS = ["the cat sat on the mat .", "the dog looked at the cat number 7 ."]


@pytest.fixture(params=FAMILIES)
def family(request, tmp_path):
    folder, theirs_class = FAMILIES[request.param](tmp_path)
    return folder, theirs_class.from_pretrained(folder).eval()


def test_pll_equals_transformers_loop(family):
    folder, theirs = family
    model, tokenizer = load_mlm(folder)
    ours = pseudo_log_likelihood(model, tokenizer, TEXTS, per_token=True, max_tokens=64)
    special = set(tokenizer.all_special_ids)
    for text, result in zip(TEXTS, ours):
        ids = tokenizer.encode(text)
        expected = []
        for i, token in enumerate(ids):
            if token in special:
                continue
            copy = torch.tensor([ids])
            copy[0, i] = tokenizer.mask_token_id
            with torch.no_grad():
                expected.append(theirs(input_ids=copy).logits[0, i].double().log_softmax(-1)[token].item())
        assert result["token_scores"] == pytest.approx(expected, abs=1e-5)


def test_mask_predict_one_pass_is_transformers_argmax_with_the_family_mask(family):
    folder, theirs = family
    model, tokenizer = load_mlm(folder)
    text = f"the cat {tokenizer.mask_token} on the [MASK] and looked"   # the family's mask and the [MASK] alias
    ids = tokenizer.encode(text.replace("[MASK]", tokenizer.mask_token))
    assert ids.count(tokenizer.mask_token_id) == 2
    with torch.no_grad():
        logits = theirs(input_ids=torch.tensor([ids])).logits[0]
    logits[:, torch.tensor(tokenizer.all_special_ids)] = float("-inf")
    expected = tokenizer.convert_ids_to_tokens(logits[torch.tensor(ids) == tokenizer.mask_token_id].argmax(-1))
    assert generate(model, tokenizer, text=text, iterations=1)[0]["tokens"] == expected
