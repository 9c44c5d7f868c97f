"""The `mdlm` sampler (generation/diffusion.py): MDLM's reverse process, its nucleus cut, and `generate --sampler
mdlm` end to end on the eight-sentence BERT (trained at mask rates from 15 % to all, as a diffusion model is)."""
from __future__ import annotations

import json
import math

import pytest
import torch

from bertforge.cli import main
from bertforge.generation import generate
from bertforge.generation.diffusion import mdlm_sample, nucleus
from tests.generation.conftest import SEQ, is_sentence, sentence

MASK = 4


class UniformLM:
    """A stand-in masked LM over 50 tokens that answers every position with the uniform distribution (never
    [MASK]) and records how many positions each call asks for."""

    mask_id = MASK

    def __init__(self) -> None:
        self.asked: list[int] = []

    def log_probs(self, ids: torch.Tensor, where: torch.Tensor) -> torch.Tensor:
        assert not bool((ids[where] != MASK).any()), "a revealed position is predicted again"
        self.asked.append(int(where.sum()))
        return torch.full((int(where.sum()), 50), -math.log(50))

    def generation_logits(self, log_probs: torch.Tensor) -> torch.Tensor:
        return log_probs.index_fill(1, torch.tensor([MASK]), float("-inf")).log_softmax(-1)  # as MaskedLM bans it


@pytest.mark.parametrize("steps", [1, 4, 10])
def test_each_step_reveals_its_share_and_none_is_left(steps):
    """From t to s = t - 1/S each mask is revealed with probability (t - s)/t: every step reveals N/S masks on
    average (a rule of t - s would reveal few early and leave the rest to the last step)."""
    n, batch = 32, 200
    lm = UniformLM()
    ids = torch.full((batch, n + 2), 7)
    targets = torch.arange(1, n + 1)
    generators = [torch.Generator().manual_seed(i) for i in range(batch)]
    x = mdlm_sample(lm, ids, targets, steps, generators)  # type: ignore[arg-type]
    assert not bool((x == MASK).any()) and sum(lm.asked) == n * batch
    assert torch.equal(x[:, [0, -1]], ids[:, [0, -1]])
    per_step = torch.tensor(lm.asked, dtype=torch.float) / batch
    assert len(lm.asked) == steps and torch.allclose(per_step, torch.full((steps,), n / steps), rtol=0.1)


def test_the_nucleus_keeps_the_smallest_set_reaching_p():
    logq = torch.tensor([[0.5, 0.3, 0.15, 0.05]]).log()
    assert torch.allclose(nucleus(logq, 0.7).exp(), torch.tensor([[0.625, 0.375, 0.0, 0.0]]))
    assert torch.allclose(nucleus(logq, 0.45).exp(), torch.tensor([[1.0, 0.0, 0.0, 0.0]]))
    assert torch.allclose(nucleus(logq, 0.81).exp(), torch.tensor([[0.5, 0.3, 0.15, 0.0]]) / 0.95)
    assert torch.equal(nucleus(logq, 1.0), logq)


@pytest.mark.parametrize("steps,top_k,top_p", [(1, 0, 1.0), (3, 5, 1.0), (6, 0, 0.9)])
def test_infilling_keeps_the_context_and_fills_every_mask(sentences_mlm, steps, top_k, top_p):
    model, tokenizer = sentences_mlm
    text = "k3w0 k3w1 [MASK] [MASK] k3w4 [MASK] k3w6 k3w7"
    out = generate(model, tokenizer, text, sampler="mdlm", iterations=steps, num_samples=4, batch_size=3,
                   top_k=top_k, top_p=top_p)
    for sample in out:
        assert "[MASK]" not in sample["text"] and sample["text"] == sentence(3)
        assert sample["spans"] == [sentence(3, 2, 4), sentence(3, 5, 6)]


def test_unconditional_samples_are_whole_sentences_and_follow_the_seed(sentences_mlm):
    """Revealing a few tokens per step, each given the ones revealed before, keeps a sample in one sentence."""
    model, tokenizer = sentences_mlm
    out = generate(model, tokenizer, length=SEQ, sampler="mdlm", iterations=64, num_samples=6, seed=1)
    assert sum(is_sentence(s["text"]) for s in out) >= 5
    again = generate(model, tokenizer, length=SEQ, sampler="mdlm", iterations=64, num_samples=6, seed=1,
                     batch_size=2)
    assert [s["text"] for s in again] == [s["text"] for s in out]  # a sample does not depend on its batch


def test_generate_mdlm_from_the_command_line(capsys, sentences_model_dir):
    code = main(["generate", "--model", str(sentences_model_dir), "--text", "k5w0 [MASK] k5w2 k5w3 [MASK]",
                 "--span-lengths", "1,4", "--sampler", "mdlm", "--iterations", "4", "--top-p", "0.95",
                 "--no-progress"])
    out, _ = capsys.readouterr()
    assert code == 0 and json.loads(out.splitlines()[0])["text"] == sentence(5)


def test_top_p_with_another_sampler_is_one_line(capsys, sentences_model_dir):
    code = main(["generate", "--model", str(sentences_model_dir), "--text", "k5w0 [MASK]", "--sampler", "gibbs",
                 "--top-p", "0.9", "--no-progress"])
    err = capsys.readouterr().err.strip()
    assert code != 0 and err == ("bertforge generate: error: --top-p is for --sampler mdlm; gibbs draws with "
                                 "--temperature and --top-k")


def test_the_generate_endpoint_infills_and_refuses_over_limit_requests_in_one_line(sentences_model_dir,
                                                                                   monkeypatch):
    import httpx

    from bertforge.serving import handlers

    from bertforge.serving.app import create_app
    from bertforge.serving.limits import MAX_GENERATE_STEPS, ServeSettings
    from bertforge.serving.served_model import ServedModel
    from tests.serving.conftest import running

    served = ServedModel(sentences_model_dir, device="cpu", precision="fp32")
    with running(create_app(served, ServeSettings(max_client_batch_size=4))) as url:
        def post(body: dict) -> httpx.Response:
            return httpx.post(url + "/generate", json=body, timeout=60)

        ok = post({"inputs": ["k2w0 k2w1 [MASK] [MASK] k2w4 k2w5 k2w6 k2w7", "k6w0 [MASK]"], "steps": 3,
                   "top_p": 0.9, "seed": 2})
        assert ok.status_code == 200, ok.text
        assert [r["text"] for r in ok.json()] == [sentence(2), sentence(6, 0, 2)]
        assert ok.json()[0]["spans"] == [sentence(2, 2, 4)]
        refusals = {
            "steps": ({"inputs": ["k1w0 [MASK]"], "steps": MAX_GENERATE_STEPS + 1}, 422),
            "top_p": ({"inputs": ["k1w0 [MASK]"], "top_p": 0}, 422),
            "inputs[0]": ({"inputs": ["k1w0 k1w1"]}, 422),
            "inputs: 5": ({"inputs": ["k1w0 [MASK]"] * 5}, 422),
            "steps: 50 steps x 4 tokens": ({"inputs": ["k1w0 [MASK]"], "steps": 50}, 422),
        }
        monkeypatch.setattr(handlers, "MAX_GENERATE_STEP_TOKENS", 100)  # steps x tokens, whatever the two
        for field, (body, status) in refusals.items():
            r = post(body)
            message = r.json()["error"]
            assert r.status_code == status and message.startswith(field) and "\n" not in message, message
