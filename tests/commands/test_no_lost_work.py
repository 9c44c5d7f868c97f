"""No finished work is replaced without --overwrite, through every verb that writes a folder or a file.

Each test runs the real command line on tiny models: the same command on a finished output has nothing to do
(exit 0, every file untouched); other settings, another verb's folder, a model or a predictor are refused with
one line; --overwrite never empties one of the verb's inputs.
"""
from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from needs import require_module  # noqa: E402
from predictor_folders import tiny_predictor  # noqa: E402


def run(capsys, *argv: str) -> tuple[int, str, str]:
    from bertforge.cli import main
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def snapshot(folder: Path) -> dict[str, tuple[int, bytes]]:
    """Every file under `folder` with its modification time and bytes: what "changes nothing" compares."""
    return {str(p.relative_to(folder)): (p.stat().st_mtime_ns, p.read_bytes())
            for p in sorted(folder.rglob("*")) if p.is_file()}


def assert_modes_follow_umask(folder: Path) -> None:
    """Every file as readable as a plain open() would have made it: no temporary's private 0600 left behind."""
    umask = os.umask(0o022)
    os.umask(umask)
    for path in folder.rglob("*"):
        if path.is_file():
            assert stat.S_IMODE(path.stat().st_mode) == 0o666 & ~umask, path


@pytest.fixture(scope="module")
def base_model(tmp_path_factory, minilm_dir) -> Path:
    """A tiny BERT to fine-tune (its classifier is dropped by a task of another head)."""
    return tiny_predictor(tmp_path_factory.mktemp("base") / "m", minilm_dir, "sst2", "sequence_classification",
                          ["0", "1"])


def finetune_args(model: Path, out: Path, task: str, data: Path, *extra: str) -> list[str]:
    return ["finetune", "--model", str(model), "--task", task, "--data", str(data), "--output", str(out),
            "--epochs", "1", "--batch-size", "8", "--max-train-samples", "16", "--max-eval-samples", "8",
            "--device", "cpu", "--no-progress", *extra]


def test_finetune_finished_predictor_is_never_replaced(base_model, shared_data, tmp_path, capsys):
    out = tmp_path / "sst2"
    sst2 = finetune_args(base_model, out, "sst2", shared_data / "glue" / "SST-2", "--save-every", "1")
    assert run(capsys, *sst2)[0] == 0
    # the finished folder holds the predictor, not its training checkpoints, and every file is readable as the
    # umask says (no temporary's 0600 left behind)
    assert not (out / "checkpoints").exists()
    assert_modes_follow_umask(out)
    before = snapshot(out)

    code, said, _ = run(capsys, *sst2)  # the same command: nothing to do
    assert code == 0 and "already holds this finished finetune run" in said
    assert snapshot(out) == before

    # another task's fine-tuning into the finished SST-2 predictor: refused, naming what differs
    conll = finetune_args(base_model, out, "conll2003", shared_data / "conll2003")
    code, _, err = run(capsys, *conll)
    assert code == 1 and "other settings" in err and "task: 'sst2' there, 'conll2003' now" in err
    assert len(err.strip().splitlines()) == 1
    code, _, err = run(capsys, *sst2[:-2], "--lr", "3e-5")  # another lr, too
    assert code == 1 and "learning_rates: [2e-05] there, [3e-05] now" in err
    assert snapshot(out) == before


def test_finetune_interrupted_run_with_other_settings_is_refused(base_model, shared_data, tmp_path, capsys):
    """An unfinished run (killed before it wrote its predictor) is not retrained with other settings either."""
    out = tmp_path / "sst2"
    args = finetune_args(base_model, out, "sst2", shared_data / "glue" / "SST-2")
    assert run(capsys, *args)[0] == 0
    config = json.loads((out / "run_config.json").read_text())
    config.pop("status")  # as a run killed before the end leaves it
    (out / "run_config.json").write_text(json.dumps(config))
    code, _, err = run(capsys, *finetune_args(base_model, out, "mrpc", shared_data / "glue" / "MRPC"))
    assert code == 1 and "task: 'sst2' there, 'mrpc' now" in err
    assert run(capsys, *args)[0] == 0  # the same settings start it again, and finish it
    assert json.loads((out / "run_config.json").read_text())["status"] == "finished"


def test_overwrite_never_empties_an_input(base_model, shared_data, tmp_path, capsys):
    model = tmp_path / "model"
    tiny_predictor(model, base_model, "sst2", "sequence_classification", ["0", "1"])
    before = snapshot(model)
    sst2 = shared_data / "glue" / "SST-2"
    for output in (model, tmp_path):  # the model itself; a folder that holds it
        code, _, err = run(capsys, *finetune_args(model, output, "sst2", sst2, "--overwrite"))
        assert code == 1 and f"{output}" in err and "the input" in err, err
    inside = model / "sub"
    inside.mkdir()
    (inside / "x.txt").write_text("user file")
    code, _, err = run(capsys, *finetune_args(model, inside, "sst2", sst2, "--overwrite"))
    assert code == 1 and "lies inside the input" in err
    assert (inside / "x.txt").read_text() == "user file"
    (inside / "x.txt").unlink()
    inside.rmdir()
    assert snapshot(model) == before


def test_vocab_input_folder_and_rerun(tmp_path, capsys):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    text = corpus / "a.txt"
    text.write_text("the cat sat on the mat .\nthe dog sat on the log .\n" * 50)
    code, _, err = run(capsys, "vocab", "--input", str(text), "--output", str(corpus), "--overwrite",
                       "--vocab-size", "120", "--no-progress")
    assert code == 1 and "holds the input" in err and text.exists()
    out = tmp_path / "vocab"
    args = ["vocab", "--input", str(text), "--output", str(out), "--vocab-size", "120", "--no-progress"]
    assert run(capsys, *args)[0] == 0
    before = snapshot(out)
    code, said, _ = run(capsys, *args)
    assert code == 0 and "already holds this finished vocab run" in said
    code, _, err = run(capsys, *args[:-3], "--vocab-size", "130", "--no-progress")
    assert code == 1 and "vocab_size: 120 there, 130 now" in err
    assert snapshot(out) == before


def test_export_refuses_another_model_folder_and_leaves_no_stale_files(base_model, tmp_path, capsys):
    require_module("onnxruntime")
    other = tmp_path / "other-model"
    tiny_predictor(other, base_model, "mrpc", "sequence_classification", ["0", "1"], seed=1)
    before = snapshot(other)
    code, _, err = run(capsys, "export", "--model", str(base_model), "--output", str(other))
    assert code == 1 and "holds a fine-tuned predictor" in err
    assert snapshot(other) == before

    out = tmp_path / "onnx"
    args = ["export", "--model", str(base_model), "--output", str(out)]
    assert run(capsys, *args)[0] == 0 and (out / "task.json").exists()
    assert_modes_follow_umask(out)
    exported = snapshot(out)
    code, said, _ = run(capsys, *args)
    assert code == 0 and "already holds this finished export run" in said and snapshot(out) == exported
    code, _, err = run(capsys, *args, "--quantize", "int8")
    assert code == 1 and "quantize: None there, 'int8' now" in err
    # an encoder (no task.json) exported over the predictor's export with --overwrite: nothing stale is left
    encoder = tmp_path / "encoder"
    from bertforge import BertModel
    BertModel.from_pretrained(base_model).save_pretrained(encoder)
    from bertforge.tokenization import load_tokenizer
    load_tokenizer(base_model).save_pretrained(encoder)
    assert run(capsys, "export", "--model", str(encoder), "--output", str(out), "--overwrite")[0] == 0
    assert not (out / "task.json").exists()


def test_distill_init_refuses_a_model_folder(base_model, tmp_path, capsys):
    other = tmp_path / "model"
    tiny_predictor(other, base_model, "sst2", "sequence_classification", ["0", "1"], seed=2)
    before = snapshot(other)
    code, _, err = run(capsys, "distill", "init", "--teacher", str(base_model), "--output", str(other))
    assert code == 1 and "holds a fine-tuned predictor" in err and snapshot(other) == before


def test_evaluate_output_folder_rerun(base_model, shared_data, tmp_path, capsys):
    out = tmp_path / "eval"
    args = ["evaluate", "--model", str(base_model), "--data", str(shared_data / "glue" / "SST-2"),
            "--max-eval-samples", "8", "--output", str(out), "--device", "cpu"]
    assert run(capsys, *args)[0] == 0
    before = snapshot(out)
    code, said, _ = run(capsys, *args)
    assert code == 0 and "already holds this finished evaluate run" in said and snapshot(out) == before
    code, _, err = run(capsys, *args[:-2], "--max-eval-samples", "4", "--device", "cpu")
    assert code == 1 and "max_eval_samples: 8 there, 4 now" in err and snapshot(out) == before


def test_embed_never_replaces_an_output_file(base_model, tmp_path, capsys):
    target = tmp_path / "vectors.npy"
    target.write_bytes(b"finished work")
    code, _, err = run(capsys, "embed", "--model", str(base_model), "--text", "hello", "--output", str(target),
                       "--device", "cpu")
    assert code == 1 and "exists; use --overwrite" in err and target.read_bytes() == b"finished work"
    assert run(capsys, "embed", "--model", str(base_model), "--text", "hello", "--output", str(target),
               "--device", "cpu", "--overwrite")[0] == 0
    import numpy as np
    assert np.load(target).shape[0] == 1


def test_pretrain_without_checkpoints_is_not_retrained_with_other_settings(train_data, vocab_dir, tmp_path, capsys):
    out = tmp_path / "run"
    args = ["pretrain", "--data", str(train_data), "--vocab", str(vocab_dir), "--output", str(out),
            "--batch-size", "4", "--max-steps", "2", "--seq-len-schedule", "64:1", "--eval-batches", "0",
            "--save-every", "1", "--no-progress", "--device", "cpu"]
    assert run(capsys, *args)[0] == 0
    assert not (out / "checkpoints").exists()  # finished: the model is in OUTPUT, the checkpoints are gone
    assert_modes_follow_umask(out)
    before = snapshot(out)
    code, said, _ = run(capsys, *args)
    assert code == 0 and "nothing to train" in said and snapshot(out) == before
    code, _, err = run(capsys, *args, "--objective", "mlm")
    assert code == 1 and "objective: 'mlm+nsp' there, 'mlm' now" in err and snapshot(out) == before
    kept = tmp_path / "kept"
    assert run(capsys, *[a if a != str(out) else str(kept) for a in args], "--keep-checkpoints-at-end")[0] == 0
    assert (kept / "checkpoints" / "step-2").is_dir()


def test_prepare_rerun_and_other_settings(vocab_dir, tmp_path, capsys):
    text = tmp_path / "corpus.txt"
    text.write_text("".join(f"Sentence {i} of document {d} is here.\n" + ("\n" if i == 4 else "")
                            for d in range(20) for i in range(5)))
    out = tmp_path / "prepared"
    args = ["prepare", "--input", str(text), "--vocab", str(vocab_dir), "--output", str(out), "--workers", "0",
            "--no-progress"]
    assert run(capsys, *args)[0] == 0 and (out / "manifest.json").is_file()
    before = snapshot(out)
    code, said, _ = run(capsys, *args)
    assert code == 0 and "already holds this finished prepare run" in said and snapshot(out) == before
    code, _, err = run(capsys, *args, "--max-seq-length", "64")
    assert code == 1 and "max_seq_length: 128 there, 64 now" in err and snapshot(out) == before


def test_glue_overwrite_never_empties_the_model_or_the_data(base_model, shared_data, tmp_path, capsys):
    """An --output equal to --model, to --data, or to a folder holding either is refused before any unit runs."""
    model = tmp_path / "models" / "model"
    tiny_predictor(model, base_model, "sst2", "sequence_classification", ["0", "1"])
    data = tmp_path / "glue"
    (data / "SST-2").mkdir(parents=True)
    for name in ("train.tsv", "dev.tsv"):
        lines = (shared_data / "glue" / "SST-2" / name).read_text(encoding="utf-8").splitlines(keepends=True)
        (data / "SST-2" / name).write_text("".join(lines[:21]), encoding="utf-8")
    before = {folder: snapshot(folder) for folder in (model, data)}
    for output in (model, model.parent, data, data / "SST-2", tmp_path):
        code, _, err = run(capsys, "glue", "--model", str(model), "--data", str(data), "--output", str(output),
                           "--tasks", "sst2", "--protocol", "cpu", "--overwrite", "--no-progress")
        assert code == 1 and str(output) in err and "input" in err, err
        assert len(err.strip().splitlines()) == 1, err
        assert {folder: snapshot(folder) for folder in (model, data)} == before, f"--output {output} emptied an input"


def test_overwrite_never_empties_an_input_read_indirectly(train_data, vocab_dir, tmp_path, capsys):
    """The vocabulary a prepared corpus names (pretrain without --vocab) and the files a prepare glob matches
    are inputs too: --overwrite refuses to empty them, and the message names the output, not the victim."""
    import shutil
    vocab = tmp_path / "vocab"
    vocab.mkdir()
    shutil.copy(vocab_dir / "vocab.txt", vocab / "vocab.txt")
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for i in range(2):
        (corpus / f"part-{i}.txt").write_text("".join(f"Sentence {j} of document {d} of part {i}.\n"
                                                      + ("\n" if j == 4 else "") for d in range(10) for j in range(5)))
    prepared = tmp_path / "prepared"
    prepare = ["prepare", "--input", str(corpus / "*.txt"), "--vocab", str(vocab), "--output", str(prepared),
               "--workers", "0", "--no-progress"]
    assert run(capsys, *prepare)[0] == 0
    kept = {folder: snapshot(folder) for folder in (vocab, corpus, prepared)}

    # pretrain without --vocab reads the vocab prepare recorded: OUTPUT may not be it, nor hold it
    for output in (vocab, tmp_path):
        code, _, err = run(capsys, "pretrain", "--data", str(prepared), "--output", str(output), "--overwrite",
                           "--batch-size", "4", "--max-steps", "2", "--eval-batches", "0", "--no-progress",
                           "--device", "cpu")
        assert code == 1 and "input" in err and str(output) in err, err
    # prepare's pattern matches the files inside corpus/: OUTPUT may not be that folder
    code, _, err = run(capsys, *prepare[:5], "--output", str(corpus), "--workers", "0", "--no-progress", "--overwrite")
    assert code == 1 and "input" in err and str(corpus) in err, err
    assert {folder: snapshot(folder) for folder in (vocab, corpus, prepared)} == kept


def test_seq2seq_overwrite_never_empties_its_init_from_folder(tmp_path, capsys):
    from tests.generation.seq2seq_task import reversal_pairs, tiny_bert, train, write_jsonl
    pairs = write_jsonl(tmp_path / "pairs.jsonl", reversal_pairs(64, seed=0))
    first = tmp_path / "first"
    train(first, tiny_bert(tmp_path / "bert"), pairs, steps=2)
    before = snapshot(first)
    code, _, err = run(capsys, "seq2seq", "--init-from", str(first), "--train", str(pairs), "--output", str(first),
                       "--overwrite", "--max-steps", "2", "--no-progress", "--device", "cpu")
    assert code == 1 and "input" in err and str(first) in err, err
    assert snapshot(first) == before
