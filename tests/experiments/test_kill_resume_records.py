"""kill_resume --records writes the published table's records (docs/results/results-kill-resume.json): per verb the
trials bitwise equal of the trials run, the trials killed at least once, and the trials and kills inside a save.
The training runs and the kills are stubbed (the real ones take minutes): the reference and each resumed run
write their weights, and each kill attempt reports a scripted outcome the counts must follow."""
from __future__ import annotations

from pathlib import Path

import pytest

from published_records import assert_published

import kill_resume  # noqa: E402

WEIGHTS = "model.safetensors"


@pytest.mark.slow
def test_records_are_the_published_ones_and_count_the_trials(tmp_path, monkeypatch):
    keys = ("vocab", "data", "teacher", "student", "encoder", "sst2", "unlabeled", "predictor")
    monkeypatch.setattr(kill_resume, "setup", lambda root: {key: root / key for key in keys})
    attempts: dict[tuple[str, str], list[str]] = {}

    def output(cmd: list[str]) -> Path:
        return Path(cmd[cmd.index("--output") + 1])

    def sh(cmd, **kw):  # a run to the end: finetune's trial-1 ends with other weights (a planted failed resume)
        out = output(cmd)
        out.mkdir(parents=True, exist_ok=True)
        differs = (out.parent.name, out.name) == ("finetune", "trial-1")
        (out / WEIGHTS).write_bytes(b"other" if differs else b"reference")

    def run_until_killed(cmd, delay, in_save):  # distill task's runs outside a save finish before the kill
        out = output(cmd)
        what = "killed in a save" if in_save else "finished first" if out.parent.name == "distill-task" else "killed"
        attempts.setdefault((out.parent.name, out.name), []).append(what)
        return what

    monkeypatch.setattr(kill_resume, "sh", sh)
    monkeypatch.setattr(kill_resume, "run_until_killed", run_until_killed)
    from bertforge.checkpoint import SAFE_WEIGHTS
    assert SAFE_WEIGHTS == WEIGHTS
    assert kill_resume.main(["--trials", "8", "--out", str(tmp_path / "runs"), "--records", str(tmp_path / "store")]) == 1
    written = assert_published(tmp_path / "store", "results-kill-resume/")
    from bertforge.results_store import read_store
    assert read_store(tmp_path / "store").tables == {"results-kill-resume": read_store().tables["results-kill-resume"]}
    for verb in kill_resume.VERBS:
        base, slug = f"results-kill-resume/{verb.replace(' ', '-')}", verb.replace(" ", "-")
        trials = [attempts[(slug, f"trial-{t}")] for t in range(8)]
        assert [len(kills) for kills in trials] == [1, 2] * 4  # every other trial is killed twice
        assert written[f"{base}/trials-bitwise-equal/2"].value == 8
        assert written[f"{base}/trials-bitwise-equal/1"].value == (7 if verb == "finetune" else 8)
        assert written[f"{base}/trials-killed"].value == sum(any(k != "finished first" for k in ks) for ks in trials)
        assert written[f"{base}/trials-killed-inside-a-save/1"].value == 2  # trials 3 and 7
        assert written[f"{base}/trials-killed-inside-a-save/2"].value == 4  # each killed twice
    assert written["results-kill-resume/pretrain/trials-killed"].value == 8
    assert written["results-kill-resume/distill-task/trials-killed"].value == 2
    record = written["results-kill-resume/pretrain/trials-killed"]
    assert "--records" not in record.command and record.threads == 1
    assert record.data == "a Wikipedia slice and SST-2, tiny models, the MiniLM vocabulary"


def test_records_are_refused_with_torchrun(tmp_path):
    with pytest.raises(SystemExit):
        kill_resume.main(["--torchrun", "--out", str(tmp_path), "--records", str(tmp_path / "store")])
