"""`bertforge fill-mask`: top-k, the ranks of --targets, and the family's own mask token."""
from __future__ import annotations

import re

import pytest
import torch

from bertforge.cli import main

CORPUS = "\n".join(f"the cat number {i} sat on the mat and looked at the dog ." for i in range(300))


def _bert_folder(tmp_path):
    from bertforge import BertConfig, BertForMaskedLM
    from bertforge.tokenization import BertTokenizer
    (tmp_path / "corpus.txt").write_text(CORPUS)
    assert main(["vocab", "--input", str(tmp_path / "corpus.txt"), "--output", str(tmp_path / "m"),
                 "--vocab-size", "200", "--unused", "0"]) == 0
    tok = BertTokenizer.from_pretrained(tmp_path / "m")
    torch.manual_seed(0)
    model = BertForMaskedLM(BertConfig.preset("tiny", vocab_size=tok.vocab_size))
    model.save_pretrained(tmp_path / "m")
    return tmp_path / "m", model, tok


def test_targets_rank_agrees_with_the_top_k(tmp_path, capsys):
    """The top-1 word, asked for as a target, must come back as rank 1 with the same probability."""
    from bertforge.generation.fill_mask import fill_mask
    folder, model, tok = _bert_folder(tmp_path)
    [[first]] = fill_mask(model, tok, ["the cat [MASK] on the mat"], top_k=3)
    best, p_best = first["top"][0]
    capsys.readouterr()
    assert main(["fill-mask", "--model", str(folder), "--top-k", "3", "--targets", f"{best},dog",
                 "the cat [MASK] on the mat"]) == 0
    out = capsys.readouterr().out
    m = re.search(rf"^\s+{re.escape(best)}: rank 1 of {tok.vocab_size}, p (\S+)$", out, re.M)
    assert m and abs(float(m.group(1)) - p_best) <= 1e-4 + 0.05 * p_best, out
    dog = re.search(r"^\s+dog: rank (\d+) of \d+, p (\S+)$", out, re.M)
    probs = model(**{k: v for k, v in tok(["the cat [MASK] on the mat"], return_tensors="pt").items()
                     if k in ("input_ids", "attention_mask", "token_type_ids")}).logits.softmax(-1)
    mask_row = probs[0, 3]
    p_dog = mask_row[tok.convert_tokens_to_ids("dog")]
    assert int(dog.group(1)) == int((mask_row > p_dog).sum()) + 1


def test_roberta_accepts_bracket_mask(tmp_path, capsys):
    """A RoBERTa checkpoint's mask token is <mask>; [MASK] in the text means the same."""
    from bertforge.model.roberta import RobertaConfig, RobertaForMaskedLM
    from bertforge.tokenization.bpe import train_bpe
    (tmp_path / "corpus.txt").write_text(CORPUS)
    train_bpe([tmp_path / "corpus.txt"], tmp_path / "r", vocab_size=300, min_frequency=2, show_progress=False)
    from bertforge.tokenization.auto import load_tokenizer
    tok = load_tokenizer(tmp_path / "r")
    RobertaForMaskedLM(RobertaConfig.preset("tiny", vocab_size=tok.vocab_size)).save_pretrained(tmp_path / "r")
    capsys.readouterr()
    assert main(["fill-mask", "--model", str(tmp_path / "r"), "--targets", "dog", "the cat [MASK] on the mat",
                 "the cat <mask> on the mat", "no mask"]) == 0
    out = capsys.readouterr().out
    assert out.count("[MASK] #1:") == 2 and "no [MASK] or <mask> in this text" in out
    assert len(re.findall(r"rank \d+ of", out)) == 2
    assert "dog (as 'Ġdog')" in out  # ranked as the mid-sentence piece, with its leading space


def test_bad_targets_and_top_k_are_clear_errors(tmp_path, capsys):
    """A target outside the vocabulary is refused, not silently ranked as [UNK]; --top-k below 1 is refused."""
    folder, _, _ = _bert_folder(tmp_path)
    capsys.readouterr()
    assert main(["fill-mask", "--model", str(folder), "--targets", "dog,zebra", "the cat [MASK] on the mat"]) == 1
    err = capsys.readouterr().err
    assert "--targets: 'zebra' is not in this vocabulary" in err and "Traceback" not in err
    with pytest.raises(SystemExit):
        main(["fill-mask", "--model", str(folder), "--top-k", "0", "the cat [MASK] on the mat"])
    assert "--top-k: expected a whole number from 1 to 1,000, got '0'" in capsys.readouterr().err


def test_text_flag_reads_like_positional_sentences(tmp_path, capsys):
    """`--text` (the flag every verb takes) gives the same output as positional sentences, after them."""
    folder, _, _ = _bert_folder(tmp_path)
    first, second = "the cat [MASK] on the mat", "the [MASK] looked at the dog ."
    capsys.readouterr()
    assert main(["fill-mask", "--model", str(folder), first, second]) == 0
    positional = capsys.readouterr().out
    assert main(["fill-mask", "--model", str(folder), first, "--text", second]) == 0
    assert capsys.readouterr().out == positional
    assert main(["fill-mask", "--model", str(folder), "--text", first, "--text", second]) == 0
    assert capsys.readouterr().out == positional
    assert main(["fill-mask", "--model", str(folder)]) == 1
    assert "nothing to fill" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["fill-mask", "--model", str(folder), "--top-k", "100000000", first])
    assert "--top-k: expected a whole number from 1 to 1,000, got '100000000'" in capsys.readouterr().err


def test_a_fine_tuned_predictor_is_named_as_such(tmp_path, minilm_dir, capsys):
    """Its head predicts labels: the remedy is `predict`, not continuing pre-training from it."""
    from predictor_folders import tiny_predictor
    folder = tiny_predictor(tmp_path / "clf", minilm_dir, "sst2", "sequence_classification", ["0", "1"])
    assert main(["fill-mask", "--model", str(folder), "the [MASK] is blue ."]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"bertforge fill-mask: error: {folder} is a fine-tuned predictor (it has task.json)")
    assert "`bertforge predict` runs it" in err and "pretrain --init-from" not in err
