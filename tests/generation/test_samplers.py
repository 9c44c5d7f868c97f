"""Each sampler recovers the known infill of the eight-sentence language; seeds make runs repeatable."""
from __future__ import annotations

import pytest
import torch

from bertforge.generation import generate, pseudo_log_likelihood
from tests.generation.conftest import N_SENTENCES, is_sentence, sentence

CASES = {
    # name: (arguments, the known generated spans)
    "two-token span": ({"text": "k3w0 k3w1 [MASK] [MASK] k3w4 k3w5 k3w6 k3w7"}, [sentence(3, 2, 4)]),
    "two spans": ({"text": "k5w0 [MASK] k5w2 k5w3 k5w4 [MASK] [MASK] k5w7"}, [sentence(5, 1, 2), sentence(5, 5, 7)]),
    "span lengths": ({"text": "k1w0 [MASK] k1w4 k1w5 k1w6 k1w7", "span_lengths": [3]}, [sentence(1, 1, 4)]),
    "one word of context": ({"text": "[MASK] [MASK] [MASK] [MASK] [MASK] k6w5 [MASK] [MASK]"},
                            [sentence(6, 0, 5), sentence(6, 6, 8)]),
    "prefix": ({"length": 7, "prefix": "k2w0"}, [sentence(2, 1, 8)]),
}
# Gibbs and MH sample: at temperature 0.5 a wrong word has a chance of about 1e-5 per draw with this model,
# so the known answer is what a correct sampler returns.
SAMPLERS = [("mask-predict", {"iterations": 4}), ("gibbs", {"iterations": 4, "temperature": 0.5}),
            ("gibbs", {"iterations": 4, "parallel": True, "temperature": 0.5}),
            ("mh", {"iterations": 2, "temperature": 0.5}),
            ("left-to-right", {})]


@pytest.mark.parametrize("sampler,options", SAMPLERS, ids=lambda v: v if isinstance(v, str) else str(v))
@pytest.mark.parametrize("case", CASES)
def test_sampler_recovers_known_infill(sentences_mlm, sampler, options, case):
    model, tokenizer = sentences_mlm
    arguments, spans = CASES[case]
    results = generate(model, tokenizer, sampler=sampler, num_samples=2, seed=1, **arguments, **options)
    assert len(results) == 2
    for result in results:
        assert result["spans"] == spans, result
        assert is_sentence(result["text"]), result


def test_mask_predict_single_pass_is_the_argmax_of_each_mask(sentences_mlm):
    """T = 1 is one parallel prediction: each masked position takes its own most likely (non-special) token."""
    model, tokenizer = sentences_mlm
    text = "[MASK] k4w1 [MASK] [MASK] k4w4 [MASK] k4w6 [MASK]"
    ids = torch.tensor([tokenizer.encode(text)])
    with torch.no_grad():
        logits = model(input_ids=ids).logits[0]
    logits[:, torch.tensor(tokenizer.all_special_ids)] = float("-inf")
    expected = tokenizer.convert_ids_to_tokens(logits[ids[0] == tokenizer.mask_token_id].argmax(-1))
    assert generate(model, tokenizer, text=text, iterations=1)[0]["tokens"] == expected


@pytest.mark.parametrize("sampler", ["gibbs", "mh"])
def test_unconditional_samples_are_sentences_and_vary_with_the_seed(sentences_mlm, sampler):
    model, tokenizer = sentences_mlm
    texts = [r["text"] for r in generate(model, tokenizer, length=8, sampler=sampler, iterations=3,
                                         num_samples=12, seed=0)]
    assert all(is_sentence(t) for t in texts), texts
    assert len(set(texts)) > 1  # samples from a distribution over N_SENTENCES sentences, not one answer
    assert len(set(texts)) <= N_SENTENCES


@pytest.mark.parametrize("sampler", ["gibbs", "mh"])
def test_same_seed_same_samples_whatever_the_batch_size(sentences_mlm, sampler):
    model, tokenizer = sentences_mlm
    kwargs = {"length": 6, "sampler": sampler, "iterations": 2, "num_samples": 4, "seed": 7, "temperature": 3.0}
    together = generate(model, tokenizer, batch_size=4, **kwargs)
    assert together == generate(model, tokenizer, batch_size=4, **kwargs)
    apart = generate(model, tokenizer, batch_size=1, **kwargs)
    assert [r["text"] for r in together] == [r["text"] for r in apart]
    other_seed = generate(model, tokenizer, batch_size=4, **{**kwargs, "seed": 8})
    assert [r["text"] for r in other_seed] != [r["text"] for r in together]


def test_mh_reports_acceptance_rate_and_energy(sentences_mlm):
    """The energy of the final text is its negative pseudo-log-likelihood (Goyal et al.'s E_norm)."""
    model, tokenizer = sentences_mlm
    result = generate(model, tokenizer, text="k7w0 [MASK] [MASK] k7w3 k7w4", sampler="mh", iterations=3)[0]
    assert result["spans"] == [sentence(7, 1, 3)]
    assert 0.0 <= result["acceptance_rate"] <= 1.0
    pll = pseudo_log_likelihood(model, tokenizer, [sentence(7, 0, 5)])[0]["pll"]
    assert result["energy"] == pytest.approx(-pll, abs=1e-4)


def test_mh_rejects_bad_proposals(sentences_mlm):
    """At proposal temperature 2 most proposals are wrong words (the right one has q ~ 0.4): MH rejects them
    (acceptance well below one) and still ends on the right text, where the proposals alone (one parallel
    draw at the same temperature) do not."""
    model, tokenizer = sentences_mlm
    text = "k0w0 k0w1 [MASK] [MASK] [MASK] k0w5 k0w6 k0w7"
    results = generate(model, tokenizer, text=text, sampler="mh", iterations=20, temperature=2.0, num_samples=4)
    assert all(r["spans"] == [sentence(0, 2, 5)] for r in results), results
    assert max(r["acceptance_rate"] for r in results) < 0.9
    drawn = generate(model, tokenizer, text=text, sampler="mask-predict", iterations=1, temperature=2.0,
                     num_samples=4)
    assert any(r["spans"] != [sentence(0, 2, 5)] for r in drawn)
