"""Conditional generation: an encoder-decoder trained for a few seconds on a task with known answers
(reversing letters) decodes them exactly with Mask-Predict and left to right; bad input is one line."""
from __future__ import annotations

import json
import subprocess

import pytest
import warm_cli

from bertforge.generation.conditional import generate_conditional
from bertforge.generation.loading import load_encoder_decoder
from bertforge.generation.template import GenerationInputError
from tests.generation.seq2seq_task import reversal_pairs, tiny_bert, train, write_jsonl

pytestmark = pytest.mark.slow  # every test reads the model the module fixture trains (about 10 s)

HELD_OUT = reversal_pairs(60, seed=1)


@pytest.fixture(scope="module")
def reverser(tmp_path_factory):
    root = tmp_path_factory.mktemp("reverser")
    init = tiny_bert(root / "init")
    result = train(root / "model", init, write_jsonl(root / "train.jsonl", reversal_pairs(2000, seed=0)),
                   write_jsonl(root / "eval.jsonl", HELD_OUT))
    return root, result


def exact(model, tokenizer, **kw) -> float:
    out = generate_conditional(model, tokenizer, [p["source"] for p in HELD_OUT], **kw)
    return sum(o["text"] == p["target"] for o, p in zip(out, HELD_OUT)) / len(HELD_OUT)


@pytest.mark.parametrize("sampler,iterations", [("mask-predict", 2), ("mask-predict", 4), ("left-to-right", 1)])
def test_decoders_reverse_held_out_sequences_exactly(reverser, sampler, iterations):
    model, tokenizer = load_encoder_decoder(reverser[0] / "model")
    assert exact(model, tokenizer, sampler=sampler, iterations=iterations) >= 0.95


def test_the_length_predictor_learns_the_length(reverser):
    assert reverser[1].final_eval["eval_length_acc"] >= 0.95


def test_an_untrained_warm_start_does_not_reverse(reverser, tmp_path):
    """The decoding tests pass because of training: the same model before it gets (almost) nothing right."""
    from bertforge.model.encoder_decoder import EncoderDecoderModel
    from bertforge.tokenization import load_tokenizer
    init = reverser[0] / "init"
    model = EncoderDecoderModel.from_encoder_decoder_pretrained(init, init, max_target_length=8)
    assert exact(model, load_tokenizer(init), sampler="mask-predict", iterations=4) <= 0.05


def test_same_input_same_output_whatever_the_batch(reverser):
    model, tokenizer = load_encoder_decoder(reverser[0] / "model")
    sources = [p["source"] for p in HELD_OUT[:20]]
    one = generate_conditional(model, tokenizer, sources, iterations=4, batch_size=1)
    many = generate_conditional(model, tokenizer, sources, iterations=4, batch_size=16)
    assert [o["text"] for o in one] == [o["text"] for o in many]
    assert [o["score"] for o in one] == pytest.approx([o["score"] for o in many], abs=1e-5)


def test_bad_input_is_a_clear_error(reverser):
    model, tokenizer = load_encoder_decoder(reverser[0] / "model")
    with pytest.raises(GenerationInputError, match="source 2: empty"):
        generate_conditional(model, tokenizer, ["a b", "  "])
    with pytest.raises(GenerationInputError, match="unknown sampler 'gibbs'"):
        generate_conditional(model, tokenizer, ["a b"], sampler="gibbs")


def test_untrained_folder_is_refused(reverser, tmp_path):
    from bertforge.generation import MissingMLMHeadError
    from bertforge.model.encoder_decoder import EncoderDecoderModel
    init = reverser[0] / "init"
    folder = tmp_path / "warm"
    model = EncoderDecoderModel.from_encoder_decoder_pretrained(init, init, max_target_length=8)
    model.save_pretrained(folder)
    state = __import__("safetensors.torch", fromlist=["load_file"]).load_file(str(folder / "model.safetensors"))
    state = {k: v for k, v in state.items() if "crossattention" not in k}
    __import__("safetensors.torch", fromlist=["save_file"]).save_file(state, str(folder / "model.safetensors"))
    with pytest.raises(MissingMLMHeadError, match="crossattention"):
        load_encoder_decoder(folder)


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return warm_cli.run(list(args))


def test_generate_verb_decodes_sources_and_refuses_masked_lm_flags(reverser, tmp_path):
    model = str(reverser[0] / "model")
    done = run_cli("generate", "--model", model, "--source", "a b c", "--source", "j i h g", "--no-progress",
                   "--iterations", "4")
    assert done.returncode == 0, done.stderr
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    assert [r["text"] for r in lines] == ["c b a", "g h i j"]
    sources = write_jsonl(tmp_path / "in.jsonl", [{"source": "d e f"}])
    done = run_cli("generate", "--model", model, "--input", str(sources), "--sampler", "left-to-right", "--no-progress")
    assert done.returncode == 0 and json.loads(done.stdout)["text"] == "f e d"
    for bad, message in ((["--text", "a [MASK]"], "--text/--length are for masked LMs"),
                         (["--source", "a b", "--sampler", "mh"], "--sampler: an encoder-decoder decodes with")):
        done = run_cli("generate", "--model", model, *bad)
        assert done.returncode == 1 and message in done.stderr and "Traceback" not in done.stderr
        assert len(done.stderr.strip().splitlines()) == 1
