"""Feature-based approach: per-word vectors from chosen layers equal the encoder's own hidden states."""
from __future__ import annotations

import json

import pytest
import torch

from bertforge import BertConfig, BertModel
from bertforge.cli import main
from bertforge.tasks.feature_extraction import word_features


@pytest.fixture(scope="module")
def tiny(tmp_path_factory, minilm_dir):
    from bertforge.tokenization import BertTokenizer
    out = tmp_path_factory.mktemp("tiny")
    tok = BertTokenizer.from_pretrained(minilm_dir)
    torch.manual_seed(0)
    model = BertModel(BertConfig(vocab_size=tok.vocab_size, hidden_size=16, num_hidden_layers=4,
                                 num_attention_heads=2, intermediate_size=32, max_position_embeddings=128))
    model.save_pretrained(out)
    tok.save_pretrained(out)
    return out, model.eval(), tok


def test_modes_pick_first_sub_token_of_each_word(tiny):
    _, model, tok = tiny
    words = [["Johanson", "met", "Uzbekistan"], ["hi"]]
    concat = word_features(model, tok, words, (-1, -2, -3, -4), "concat")
    assert [f.shape for f in concat] == [(3, 64), (1, 64)]
    summed = word_features(model, tok, words, (-1, -2, -3, -4), "sum")
    last = word_features(model, tok, words, combine="last")
    second = word_features(model, tok, words, combine="second-to-last")
    enc = tok([words[0]], is_split_into_words=True, return_word_ids=True, return_tensors="pt")
    with torch.no_grad():
        hs = model(enc["input_ids"], attention_mask=enc["attention_mask"], token_type_ids=enc["token_type_ids"],
                   output_hidden_states=True).hidden_states
    firsts = [enc["word_ids"][0].tolist().index(w) for w in range(3)]
    assert torch.allclose(last[0], hs[-1][0, firsts], atol=1e-5)
    assert torch.allclose(second[0], hs[-2][0, firsts], atol=1e-5)
    assert torch.allclose(summed[0], sum(hs[i][0, firsts] for i in (-1, -2, -3, -4)), atol=1e-5)
    assert torch.allclose(concat[0][:, :16], last[0], atol=1e-5)


def test_cli_writes_safetensors(tiny, tmp_path):
    from safetensors import safe_open
    folder, _, _ = tiny
    (tmp_path / "in.txt").write_text("EU rejects German call.\n\nPeter Blackburn\n")
    out = tmp_path / "f.safetensors"
    assert main(["features", "--model", str(folder), "--input", str(tmp_path / "in.txt"), "--layers", "-1,-2",
                 "--combine", "concat", "--output", str(out)]) == 0
    with safe_open(str(out), "pt") as f:
        assert sorted(f.keys()) == ["text_0", "text_1"]
        assert f.get_tensor("text_0").shape == (5, 32)
        assert json.loads(f.metadata()["words"])[1] == ["Peter", "Blackburn"]
