"""`bertforge generate` and `bertforge score` end to end, including one-line errors for bad input."""
from __future__ import annotations

import json

import pytest

from bertforge.cli import main
from tests.generation.conftest import sentence


def run(capsys, *argv: str) -> tuple[int, list[str], str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, [line for line in out.splitlines() if line], err


def test_generate_prints_one_json_line_per_sample_and_repeats_with_the_seed(capsys, sentences_model_dir):
    argv = ["generate", "--model", str(sentences_model_dir), "--text", "k2w0 [MASK] k2w2 k2w3 [MASK] k2w7",
            "--span-lengths", "1,3", "--sampler", "gibbs", "--temperature", "0.5", "--iterations", "3",
            "--num-samples", "3", "--batch-size", "2", "--seed", "4", "--no-progress"]
    code, lines, _ = run(capsys, *argv)
    assert code == 0
    samples = [json.loads(line) for line in lines]
    assert [s["sample"] for s in samples] == [0, 1, 2]
    assert all(s["spans"] == [sentence(2, 1, 2), sentence(2, 4, 7)] and s["text"] == sentence(2) for s in samples)
    assert run(capsys, *argv)[1] == lines


def test_generate_mh_reports_acceptance_rate(capsys, sentences_model_dir):
    code, lines, err = run(capsys, "generate", "--model", str(sentences_model_dir), "--length", "4", "--prefix",
                           "k6w0 k6w1", "--sampler", "mh", "--iterations", "2", "--temperature", "0.5")
    assert code == 0 and "generate" in err  # the progress bar goes to stderr, the samples to stdout
    sample = json.loads(lines[0])
    assert sample["text"] == sentence(6, 0, 6) and 0 <= sample["acceptance_rate"] <= 1


BAD = {
    "no mask": (["--text", "k1w0 k1w1"], "no mask token"),
    "span too long": (["--text", "k1w0 [MASK]", "--span-lengths", "40"], "at most 24"),
    "lengths do not match masks": (["--text", "k1w0 [MASK]", "--span-lengths", "2,3"], "give one length per mask"),
    "bad lengths": (["--text", "k1w0 [MASK]", "--span-lengths", "two"], "--span-lengths: expected"),
    "unknown sampler": (["--text", "k1w0 [MASK]", "--sampler", "beam"], "unknown sampler 'beam'"),
    "text and length": (["--text", "k1w0 [MASK]", "--length", "3"], "not both"),
    "zero temperature for gibbs": (["--length", "3", "--sampler", "gibbs", "--temperature", "0"], "above 0"),
}


@pytest.mark.parametrize("case", BAD)
def test_generate_bad_input_is_one_line(capsys, sentences_model_dir, case):
    argv, message = BAD[case]
    code, lines, err = run(capsys, "generate", "--model", str(sentences_model_dir), "--no-progress", *argv)
    assert code != 0 and not lines
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert err.startswith("bertforge generate: error:") and message in err


def test_generate_refuses_a_model_without_mlm_head(capsys, minilm_dir):
    """all-MiniLM-L6-v2 ships the encoder only: a random head would generate noise, so it is refused."""
    code, lines, err = run(capsys, "generate", "--model", str(minilm_dir), "--text", "a [MASK] day")
    assert code != 0 and not lines and len(err.strip().splitlines()) == 1
    assert "no trained masked-LM head" in err and "cls.predictions" in err


def test_score_file_one_json_line_per_sentence(capsys, tmp_path, sentences_model_dir, sentences_mlm):
    from bertforge.generation import pseudo_log_likelihood
    texts = [sentence(1), sentence(3, 1, 5)]
    source = tmp_path / "sentences.txt"
    source.write_text(f"{texts[0]}\n\n{texts[1]}\n", encoding="utf-8")
    code, lines, _ = run(capsys, "score", "--model", str(sentences_model_dir), "--input", str(source),
                         "--per-token", "--no-progress")
    assert code == 0
    scored = [json.loads(line) for line in lines]
    expected = pseudo_log_likelihood(*sentences_mlm, texts, per_token=True)
    assert [s["text"] for s in scored] == texts
    assert [s["pll"] for s in scored] == pytest.approx([e["pll"] for e in expected], abs=1e-6)
    assert scored[1]["tokens"] == texts[1].split()


def test_score_names_the_line_of_a_bad_sentence(capsys, tmp_path, sentences_model_dir):
    source = tmp_path / "sentences.txt"
    source.write_text(sentence(1) + "\n" + " ".join(["k1w0"] * 30) + "\n", encoding="utf-8")
    code, lines, err = run(capsys, "score", "--model", str(sentences_model_dir), "--input", str(source))
    assert code != 0 and not lines and len(err.strip().splitlines()) == 1
    assert f"{source}:2: 32 tokens" in err


def test_score_missing_file(capsys, tmp_path, sentences_model_dir):
    code, _, err = run(capsys, "score", "--model", str(sentences_model_dir), "--input", str(tmp_path / "nope.txt"))
    assert code != 0 and "nope.txt" in err and len(err.strip().splitlines()) == 1
