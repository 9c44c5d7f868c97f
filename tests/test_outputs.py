"""claim_output / write_run_config: which folders a verb may write into, and how it says no."""
from __future__ import annotations

import errno
import json
import os

import pytest

from bertforge import outputs
from bertforge.outputs import OutputError, claim_output, write_run_config

from needs import skip_as_root, skip_privileged


def test_missing_folder_is_created_with_parents(tmp_path):
    out = tmp_path / "a" / "b"
    assert claim_output(out, verb="prepare", overwrite=False) == out
    assert out.is_dir() and not any(out.iterdir())  # the write probe leaves nothing behind


def test_empty_folder_is_used(tmp_path):
    assert claim_output(tmp_path, verb="vocab", overwrite=False) == tmp_path


def test_non_empty_folder_is_refused_and_left_alone(tmp_path):
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(OutputError) as err:
        claim_output(tmp_path, verb="prepare", overwrite=False)
    message = str(err.value)
    assert str(tmp_path) in message and "use --overwrite, or choose another --output" in message
    assert "\n" not in message
    assert (tmp_path / "notes.txt").read_text() == "mine"


def test_overwrite_empties_the_whole_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path.parent.parent)
    out = tmp_path / "out"
    (out / "sub").mkdir(parents=True)
    (out / "sub" / "x.bin").write_bytes(b"1")
    (out / "keep.txt").write_text("y")
    claim_output(out, verb="prepare", overwrite=True)
    assert out.is_dir() and list(out.iterdir()) == []


def test_own_resumable_run_is_continued_other_runs_are_not(tmp_path):
    write_run_config(tmp_path, "pretrain", {"lr": 1e-4, "data": tmp_path})
    (tmp_path / "step-100").mkdir()
    assert claim_output(tmp_path, verb="pretrain", overwrite=False, resumable=True) == tmp_path
    assert (tmp_path / "step-100").is_dir()
    with pytest.raises(OutputError, match="not a `bertforge distill` run"):
        claim_output(tmp_path, verb="distill", overwrite=False, resumable=True)
    with pytest.raises(OutputError, match="use --overwrite"):  # own run, but this verb cannot continue one
        claim_output(tmp_path, verb="pretrain", overwrite=False, resumable=False)


def test_overwrite_wins_over_resuming(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path.parent.parent)
    write_run_config(tmp_path, "pretrain", {})
    claim_output(tmp_path, verb="pretrain", overwrite=True, resumable=True)
    assert list(tmp_path.iterdir()) == []


def test_broken_run_config_is_not_a_run(tmp_path):
    (tmp_path / "run_config.json").write_text("{not json")
    with pytest.raises(OutputError, match="use --overwrite"):
        claim_output(tmp_path, verb="pretrain", overwrite=False, resumable=True)


def test_output_that_is_a_file(tmp_path):
    f = tmp_path / "model.bin"
    f.write_bytes(b"x")
    for overwrite in (False, True):
        with pytest.raises(OutputError, match="is a file; expected a folder"):
            claim_output(f, verb="vocab", overwrite=overwrite)
    assert f.read_bytes() == b"x"
    with pytest.raises(OutputError, match="a part of that path is a file"):
        claim_output(f / "sub", verb="vocab", overwrite=False)


def test_overwrite_refuses_the_working_folder(tmp_path, monkeypatch):
    (tmp_path / "src").mkdir()
    monkeypatch.chdir(tmp_path / "src")
    with pytest.raises(OutputError, match="current working folder"):
        claim_output(tmp_path, verb="vocab", overwrite=True)
    assert (tmp_path / "src").is_dir()


@skip_as_root("root writes into read-only folders")
def test_read_only_folder(tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    try:
        if os.access(ro, os.W_OK):
            skip_privileged("this user can write into a chmod 555 folder")
        with pytest.raises(OutputError, match="cannot write .*permission denied"):
            claim_output(ro, verb="vocab", overwrite=False)
        with pytest.raises(OutputError, match="cannot create output folder .*permission denied"):
            claim_output(ro / "new", verb="vocab", overwrite=False)
    finally:
        ro.chmod(0o755)


def test_read_only_file_system(tmp_path, monkeypatch):
    """A read-only mount (simulated: creating any file fails with EROFS) is refused before any work."""
    def erofs(*args, **kwargs):
        raise OSError(errno.EROFS, os.strerror(errno.EROFS))
    monkeypatch.setattr(outputs.tempfile, "mkstemp", erofs)
    with pytest.raises(OutputError, match=f"cannot write {tmp_path}: read-only file system"):
        claim_output(tmp_path, verb="vocab", overwrite=False)


def test_write_run_config(tmp_path):
    target = write_run_config(tmp_path / "run", "prepare", {"vocab": tmp_path, "workers": 2, "verb": "other"})
    data = json.loads(target.read_text())
    assert data == {"verb": "prepare", "vocab": str(tmp_path), "workers": 2}
    assert sorted(p.name for p in target.parent.iterdir()) == ["run_config.json"]  # no temp file left


def test_fresh_output_removes_what_a_failed_verb_wrote(tmp_path):
    from bertforge.outputs import fresh_output
    out = tmp_path / "new"
    with pytest.raises(RuntimeError), fresh_output(out, verb="vocab", overwrite=False) as folder:
        (folder / "vocab.txt").write_text("[PAD]\n[UN")  # half written
        raise RuntimeError("disk gone")
    assert not out.exists()
    existing = tmp_path / "empty"
    existing.mkdir()
    with pytest.raises(RuntimeError), fresh_output(existing, verb="vocab", overwrite=False) as folder:
        (folder / "sub").mkdir()
        raise RuntimeError("disk gone")
    assert existing.is_dir() and list(existing.iterdir()) == []
    with fresh_output(out, verb="vocab", overwrite=False) as folder:
        (folder / "vocab.txt").write_text("ok")
    assert (out / "vocab.txt").read_text() == "ok"


def test_an_output_file_is_never_replaced_silently(tmp_path):
    from bertforge.outputs import OutputError, claim_output_file
    target = tmp_path / "predictions.jsonl"
    assert claim_output_file(target, overwrite=False) == target
    target.write_text("finished work\n")
    with pytest.raises(OutputError, match="exists; use --overwrite"):
        claim_output_file(target, overwrite=False)
    assert claim_output_file(target, overwrite=True) == target
    with pytest.raises(OutputError, match="is also the input"):
        claim_output_file(target, overwrite=True, inputs=(target,))
    with pytest.raises(OutputError, match="is a folder"):
        claim_output_file(tmp_path, overwrite=True)
    with pytest.raises(OutputError, match="does not exist"):
        claim_output_file(tmp_path / "nowhere" / "x.jsonl", overwrite=False)
    assert target.read_text() == "finished work\n"


# ---- finished work is never replaced: settings recorded, compared and marked finished ----------------------------
def test_own_run_with_other_settings_is_refused_naming_each_difference(tmp_path):
    from bertforge.outputs import mark_finished
    write_run_config(tmp_path, "finetune", {"task": "sst2", "train": {"lr": 2e-5, "progress": True}})
    for finished in (False, True):
        with pytest.raises(OutputError) as err:
            claim_output(tmp_path, verb="finetune", overwrite=False, resumable=True,
                         settings={"task": "conll2003", "train": {"lr": 3e-5, "progress": True}})
        assert "task: 'sst2' there, 'conll2003' now" in str(err.value) and "lr: 2e-05 there, 3e-05 now" in str(err.value)
        mark_finished(tmp_path)
    assert json.loads((tmp_path / "run_config.json").read_text())["status"] == "finished"


def test_the_same_finished_run_has_nothing_to_do_and_presentation_may_differ(tmp_path):
    from bertforge.outputs import RunAlreadyFinished, mark_finished
    write_run_config(tmp_path, "pretrain", {"lr": 1e-4, "data": str(tmp_path), "progress": True, "save_every": 10})
    same = {"lr": 1e-4, "data": str(tmp_path), "progress": False, "save_every": 50}
    assert claim_output(tmp_path, verb="pretrain", overwrite=False, resumable=True, settings=same) == tmp_path
    mark_finished(tmp_path)
    with pytest.raises(RunAlreadyFinished, match="already holds this finished pretrain run"):
        claim_output(tmp_path, verb="pretrain", overwrite=False, resumable=True, settings=same)


def test_a_path_spelled_another_way_is_the_same_setting(tmp_path, monkeypatch):
    from bertforge.outputs import settings_differences
    (tmp_path / "data").mkdir()
    monkeypatch.chdir(tmp_path)
    assert settings_differences({"data": str(tmp_path / "data")}, {"data": "data"}) == []
    assert settings_differences({"data": str(tmp_path / "data")}, {"data": "other"}) != []


def test_an_interrupted_run_of_a_verb_that_cannot_resume_starts_again(tmp_path):
    from bertforge.outputs import RunAlreadyFinished, fresh_output
    settings = {"vocab_size": 100}
    write_run_config(tmp_path, "vocab", settings)   # what a killed `vocab` leaves: its record, half its files
    (tmp_path / "vocab.txt").write_text("[PAD]\n[UN")
    with fresh_output(tmp_path, verb="vocab", overwrite=False, settings=settings) as folder:
        assert not (folder / "vocab.txt").exists()
        (folder / "vocab.txt").write_text("done")
    with pytest.raises(RunAlreadyFinished):
        with fresh_output(tmp_path, verb="vocab", overwrite=False, settings=settings):
            raise AssertionError("not reached: a finished run is not done again")
    assert (tmp_path / "vocab.txt").read_text() == "done"


@pytest.mark.parametrize("where", ["is", "holds", "inside"])
def test_overwrite_never_empties_an_input(tmp_path, where, monkeypatch):
    monkeypatch.chdir(tmp_path)
    model = tmp_path / "model"
    (model / "sub").mkdir(parents=True)
    (model / "config.json").write_text("{}")
    (model / "sub" / "x").write_text("y")
    output = {"is": model, "holds": tmp_path, "inside": model / "sub"}[where]
    message = {"is": "is the input", "holds": "holds the input", "inside": "lies inside the input"}[where]
    with pytest.raises(OutputError, match=message):
        claim_output(output, verb="finetune", overwrite=True, inputs=(str(model), None, "-"))
    assert (model / "config.json").exists() and (model / "sub" / "x").exists()


def test_a_refusal_says_what_the_folder_holds(tmp_path):
    (tmp_path / "task.json").write_text("{}")
    with pytest.raises(OutputError, match="holds a fine-tuned predictor, not a `bertforge export` run"):
        claim_output(tmp_path, verb="export", overwrite=False)
