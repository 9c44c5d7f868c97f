"""The command line: every verb has --help, errors are one readable line, the core verbs work end to end."""
from __future__ import annotations

import pytest

from bertforge.cli import VERBS, build_parser, main


def registered_verbs() -> list[str]:
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "verb")
    return sorted(sub.choices)


def test_core_verbs_are_registered():
    assert {"vocab", "prepare", "fill-mask", "info"} <= set(registered_verbs()) <= set(VERBS)


@pytest.mark.parametrize("verb", registered_verbs())
def test_every_verb_has_help(verb, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main([verb, "--help"])
    assert exit_info.value.code == 0
    assert "usage: bertforge " + verb in capsys.readouterr().out


def test_no_verb_prints_help(capsys):
    assert main([]) == 2
    assert "<verb>" in capsys.readouterr().out


def test_info_counts_a_preset(capsys):
    assert main(["info", "--model", "mini"]) == 0
    out = capsys.readouterr().out
    assert "encoder 11.17M" in out


def test_errors_are_one_line_not_a_traceback(tmp_path, capsys):
    assert main(["info", "--model", str(tmp_path / "nope")]) == 1
    err = capsys.readouterr().err
    assert err.startswith("bertforge info: error:") and "Traceback" not in err
    with pytest.raises(SystemExit) as exit_:  # a missing folder is refused while parsing: argparse's status 2
        main(["fill-mask", "--model", str(tmp_path / "missing"), "a [MASK] b"])
    assert exit_.value.code == 2
    assert "argument --model:" in capsys.readouterr().err


def test_vocab_then_fill_mask(tmp_path, capsys):
    """Train a vocabulary, save a (random) MLM model beside it, and ask it to fill a mask."""
    from bertforge import BertConfig, BertForMaskedLM
    from bertforge.tokenization import BertTokenizer
    text = tmp_path / "corpus.txt"
    text.write_text("\n".join(f"the cat number {i} sat on the mat and looked at the dog ." for i in range(300)))
    assert main(["vocab", "--input", str(text), "--output", str(tmp_path / "m"), "--vocab-size", "200",
                 "--unused", "0"]) == 0
    tok = BertTokenizer.from_pretrained(tmp_path / "m")
    BertForMaskedLM(BertConfig.preset("tiny", vocab_size=tok.vocab_size)).save_pretrained(tmp_path / "m")
    capsys.readouterr()
    assert main(["fill-mask", "--model", str(tmp_path / "m"), "--top-k", "3", "the cat [MASK] on the mat",
                 "no mask here"]) == 0
    out = capsys.readouterr().out
    assert out.count("[MASK] #1:") == 1 and "no [MASK] in this text" in out


def test_prepare_without_progress_bar(tmp_path, capsys):
    text = tmp_path / "corpus.txt"
    docs = [" ".join(f"sentence {d} {i} of the corpus ." for i in range(5)).replace(" . ", " .\n") for d in range(30)]
    text.write_text("\n\n".join(docs) + "\n")
    assert main(["vocab", "--input", str(text), "--output", str(tmp_path / "v"), "--vocab-size", "200",
                 "--unused", "0"]) == 0
    capsys.readouterr()
    assert main(["prepare", "--input", str(text), "--vocab", str(tmp_path / "v"), "--output", str(tmp_path / "s"),
                 "--format", "sentences", "--heldout-documents", "2", "--workers", "1", "--no-progress"]) == 0
    captured = capsys.readouterr()
    assert "prepared 30 documents" in captured.out and "prepare (text)" not in captured.err
    assert (tmp_path / "s" / "manifest.json").is_file()


@pytest.mark.parametrize("argv, line", [
    (["finetune", "--modle", "m"], "bertforge finetune: error: --modle is not a flag of bertforge finetune; did you "
                                   "mean --model?"),
    (["finetune", "--model", "m", "--output", "o", "--task", "sst2", "--lrr", "3e-5"],
     "bertforge finetune: error: --lrr is not a flag of bertforge finetune; did you mean --lr?"),
    (["distill", "task", "--teacherr", "t"], "bertforge distill task: error: --teacherr is not a flag of bertforge "
                                             "distill task; did you mean --teacher?"),
    (["finetnue", "--model", "m"], "bertforge: error: 'finetnue' is not a verb of bertforge; did you mean finetune?"),
    (["finetune", "--zzzqqq", "1"], "bertforge finetune: error: --zzzqqq is not a flag of bertforge finetune "),
])
def test_a_mistyped_flag_or_verb_is_named_with_the_nearest_one(argv, line, capsys):
    """Named before argparse's complaint about missing flags (which would send the user after the wrong one)."""
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith(line) and len(err.strip().splitlines()) == 1, err


def test_an_abbreviated_flag_is_not_called_mistyped(capsys):
    with pytest.raises(SystemExit):
        main(["finetune", "--mod", "m", "--output", "o"])  # --mod is argparse's prefix of --model
    assert "required: --task" in capsys.readouterr().err
