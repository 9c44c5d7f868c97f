"""`bertforge generate` and `score` as users call them: counts bounded at parse time, `--text` repeatable,
`--device auto`, and a model whose scores are not finite refused instead of sampled from."""
from __future__ import annotations

import json

import pytest
import torch

from bertforge.cli import build_parser, main


@pytest.fixture(scope="module")
def mlm_folders(tmp_path_factory, minilm_dir):
    """A tiny random MLM with the real MiniLM vocabulary, and a copy whose head overflows to inf/NaN (finite
    weights, 1e38 in its output norm: what a bf16 overflow or a diverged run leaves)."""
    from bertforge import BertConfig, BertForMaskedLM
    from bertforge.tokenization import BertTokenizer
    tok = BertTokenizer.from_pretrained(minilm_dir)
    root = tmp_path_factory.mktemp("mlm")
    torch.manual_seed(0)
    model = BertForMaskedLM(BertConfig.preset("tiny", vocab_size=tok.vocab_size))
    for name in ("ok", "overflow"):
        if name == "overflow":
            with torch.no_grad():
                model.mlm.norm.weight.fill_(1e38)
                model.mlm.norm.bias.fill_(1e38)
        model.save_pretrained(root / name)
        tok.save_pretrained(root / name)
    return root / "ok", root / "overflow"


BOUNDS = [  # flag, value, the range the message must name
    ("--iterations", "1000000000", "from 1 to 1,000"),
    ("--iterations", "1e9", "from 1 to 1,000"),
    ("--num-samples", "0", "from 1 to 10,000"),
    ("--num-samples", "10001", "from 1 to 10,000"),
    ("--length", "100000000", "from 1 to 8,192"),
    ("--batch-size", "0", "from 1 to 1,024"),
    ("--seed", str(2**64), "from 0 to 4,294,967,295"),
    ("--top-k", "-1", "from 0 to 1,000,000"),
    ("--burn-in", "5000", "from 0 to 999"),
    ("--max-tokens", str(1 << 30), "from 1 to 1,048,576"),
    ("--temperature", "nan", "a number of at least 0"),
]


@pytest.mark.parametrize("flag, value, bound", BOUNDS, ids=[f"{f}={v}" for f, v, _ in BOUNDS])
def test_counts_are_bounded_at_parse_time(flag, value, bound, capsys):
    """Refused by argparse (status 2) before any model is read: the folder given does not even exist."""
    with pytest.raises(SystemExit) as exit_:
        main(["generate", "--model", "no-such-folder", "--length", "4", flag, value])
    assert exit_.value.code == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and f"argument {flag}: expected " in err and bound in err and repr(value) in err


def test_help_states_the_bounds_and_every_mlm_verb_defaults_to_device_auto(capsys):
    with pytest.raises(SystemExit):
        main(["generate", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "default: 10; from 1 to 1,000)" in text and "default: 1; from 1 to 10,000)" in text
    assert "(from 1 to 8,192)" in text
    parser = build_parser()
    for argv in (["generate", "--model", "m", "--length", "3"], ["score", "--model", "m", "--text", "a"],
                 ["fill-mask", "--model", ".", "a [MASK]"]):
        assert parser.parse_args(argv).device == "auto", argv


def test_each_text_is_its_own_run(mlm_folders, capsys):
    """`--text a --text b` prints exactly what two runs print, each sample tagged with its text's index."""
    ok, _ = mlm_folders
    common = ["generate", "--model", str(ok), "--num-samples", "2", "--sampler", "gibbs", "--iterations", "2",
              "--seed", "3", "--no-progress"]
    texts = ["the [MASK] sat on the mat .", "a [MASK] [MASK] day ."]
    alone = []
    for text in texts:
        assert main([*common, "--text", text]) == 0
        alone.append([json.loads(line) for line in capsys.readouterr().out.splitlines()])
    assert main([*common, "--text", texts[0], "--text", texts[1]]) == 0
    together = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert together == [{**s, "input": i} for i, run in enumerate(alone) for s in run]
    assert [s["input"] for s in together] == [0, 0, 1, 1]


@pytest.mark.parametrize("argv", [
    ["fill-mask", "the [MASK] sat on the mat ."],
    ["generate", "--text", "the [MASK] sat on the mat .", "--no-progress"],
    ["generate", "--length", "3", "--sampler", "gibbs", "--no-progress"],
    ["score", "--text", "the cat sat on the mat .", "--no-progress"],
], ids=["fill-mask", "mask-predict", "gibbs", "score"])
def test_non_finite_scores_are_an_error_naming_the_model(mlm_folders, argv, capsys):
    """Greedy decoding would pick a token from NaN logits and print it with exit 0; it is refused instead."""
    ok, broken = mlm_folders
    verb, rest = argv[0], argv[1:]
    assert main([verb, "--model", str(ok), *rest]) == 0  # the same command on the sound copy works
    capsys.readouterr()
    assert main([verb, "--model", str(broken), *rest]) == 1
    out, err = capsys.readouterr()
    assert out == "" or out.strip() == "the [MASK] sat on the mat ."  # nothing scored or sampled was printed
    line = err.strip().splitlines()[-1]
    assert line.startswith(f"bertforge {verb}: error: {broken}: the model's scores are not finite (NaN or inf)")


def test_score_reads_text_flags_then_the_file(mlm_folders, tmp_path, capsys):
    from bertforge.generation import load_mlm, pseudo_log_likelihood
    ok, _ = mlm_folders
    (tmp_path / "in.txt").write_text("the dog ran .\n\n", encoding="utf-8")
    assert main(["score", "--model", str(ok), "--text", "a cat .", "--text", "the sun .", "--input",
                 str(tmp_path / "in.txt"), "--no-progress", "--device", "cpu"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    texts = ["a cat .", "the sun .", "the dog ran ."]
    model, tok = load_mlm(ok)
    want = pseudo_log_likelihood(model, tok, texts)
    assert [r["text"] for r in rows] == texts
    assert [r["pll"] for r in rows] == pytest.approx([w["pll"] for w in want], abs=1e-5)
