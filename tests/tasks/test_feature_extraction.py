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


@pytest.mark.slow
def test_real_weights_match_transformers_hidden_states_in_input_order(minilm_dir, shared_data):
    """MiniLM features of real CoNLL sentences equal `transformers`' hidden states at each word's first piece,
    with a small token budget (several batches, run longest first) and in bf16 within bf16 tolerance."""
    from transformers import AutoModel, BertTokenizerFast

    from bertforge.model.auto import AutoModel as OurAutoModel
    from bertforge.tasks import read_conll
    from bertforge.tokenization import BertTokenizer
    sentences = [list(s.words) for s in read_conll(shared_data / "conll2003" / "valid.txt").examples[:16]]
    ours = OurAutoModel.from_pretrained(minilm_dir)
    feats = word_features(ours, BertTokenizer.from_pretrained(minilm_dir), sentences, (-1, -4), "concat",
                          max_batch_tokens=200, device="cpu", precision="fp32")
    hf = AutoModel.from_pretrained(minilm_dir).eval()
    tok = BertTokenizerFast(str(minilm_dir / "vocab.txt"), do_lower_case=True)
    enc = tok(sentences, is_split_into_words=True, padding=True, return_tensors="pt")
    with torch.no_grad():
        hs = hf(**enc, output_hidden_states=True).hidden_states
    for row, (words, got) in enumerate(zip(sentences, feats)):
        ids = enc.word_ids(row)
        firsts = [ids.index(w) for w in range(len(words))]
        want = torch.cat([hs[-1][row, firsts], hs[-4][row, firsts]], -1)
        assert got.shape == want.shape and got.dtype == torch.float32
        assert torch.allclose(got, want, atol=1e-5)
    low = word_features(ours, BertTokenizer.from_pretrained(minilm_dir), sentences[:6], (-1,), "concat",
                        precision="bf16")
    for a, full in zip(low, feats[:6]):
        b = full[:, :a.shape[1]]  # the last layer's half of the concatenation
        assert a.dtype == torch.float32 and not torch.equal(a, b)
        assert (a - b).abs().max() < 0.1 * b.abs().max()


def test_layers_out_of_range_are_refused(tiny):
    _, model, tok = tiny
    with pytest.raises(ValueError, match="layers 9 out of range: the model has 4 layers"):
        word_features(model, tok, [["hi"]], (-1, 9), "concat")
    assert [f.shape for f in word_features(model, tok, [["hi"], [], ["a", "b"]], (0, -5), "sum")] == [
        (1, 16), (0, 16), (2, 16)]
