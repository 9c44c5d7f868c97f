"""experiments/precision_quality.py --records writes the published group (docs/results/precision-quality.json):
each run's seconds, result and speed against fp32, read from what its `bertforge` command left in its folder.

The four `bertforge` commands (minutes of training) are stubbed: each writes the files a finished run writes
(training_summary.json, metrics.json) with known numbers, and answers a known wall time."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from published_records import assert_published

import precision_quality as pq  # noqa: E402

LOOP = {"fp32": 150.0, "bf16": 105.0}          # pre-training: the training loop's seconds (training_summary.json)
STARTUP = {"fp32": 9.0, "bf16": 14.0}          # ... and what the command costs around it (not the loop's)
FINETUNE = {"fp32": 40.0, "bf16": 29.0}        # fine-tuning: the command's wall seconds
FINAL = {"fp32": {"mlm_loss": 7.2771, "mlm_acc": 0.069}, "bf16": {"mlm_loss": 7.2770, "mlm_acc": 0.074}}
ACCURACY = {"fp32": 0.7878, "bf16": 0.789}


def fake_bertforge(calls: list):
    from bertforge.tasks.finetune_report import FinetuneReport
    from bertforge.training.run_output import write_training_summary
    from bertforge.training.summary import TrainingSummary

    def run(*args: str) -> float:
        verb, out, precision = args[0], Path(args[args.index("--output") + 1]), args[args.index("--precision") + 1]
        calls.append((verb, precision))
        out.mkdir(parents=True, exist_ok=True)
        if verb == "pretrain":
            write_training_summary(out, TrainingSummary(step=200, elapsed_seconds=LOOP[precision],
                                                        final_eval=dict(FINAL[precision])))
            return LOOP[precision] + STARTUP[precision]
        FinetuneReport(task="sst2", eval={"accuracy": ACCURACY[precision]}).to_json(out / FinetuneReport.FILE)
        return FINETUNE[precision]
    return run


@pytest.mark.slow  # machine_info imports torch and transformers
def test_records_are_the_published_ones(minilm_dir, tmp_path, monkeypatch):
    calls, sliced = [], []
    monkeypatch.setattr(pq, "bertforge", fake_bertforge(calls))
    monkeypatch.setattr("bertforge.measuring.prepare_slice",
                        lambda vocab, megabytes, workdir: sliced.append(megabytes) or workdir / "prepared")
    out, store = tmp_path / "precision", tmp_path / "store"
    argv = ["--out", str(out), "--steps", "200", "--train-samples", "1000", "--megabytes", "2"]
    assert pq.main([*argv, "--records", str(store)]) == 0
    assert sliced == [2.0] and calls == [("pretrain", "fp32"), ("pretrain", "bf16"), ("finetune", "fp32"),
                                         ("finetune", "bf16")]
    written = assert_published(store, "precision-quality/")
    for precision in ("fp32", "bf16"):
        pre, fine = f"precision-quality/runs/pretrain-{precision}", f"precision-quality/runs/finetune-{precision}"
        final = json.loads((out / f"pretrain-{precision}" / "training_summary.json").read_text())["final_eval"]
        assert written[f"{pre}/result"].value == final["mlm_loss"]
        assert written[f"{pre}/result-2"].value == final["mlm_acc"]
        assert written[f"{pre}/seconds"].value == LOOP[precision]  # the loop's seconds, as the label says
        metrics = json.loads((out / f"finetune-{precision}" / "metrics.json").read_text())
        assert written[f"{fine}/result"].value == pytest.approx(100 * metrics["eval"]["accuracy"])
        assert written[f"{fine}/seconds"].value == FINETUNE[precision]
        for base in (pre, fine):
            assert written[f"{base}/speed-vs-fp32"].value == pytest.approx(
                written[base.replace(precision, "fp32") + "/seconds"].value / written[f"{base}/seconds"].value)
    assert written["precision-quality/runs/pretrain-bf16/speed-vs-fp32"].value == pytest.approx(150 / 105)
    assert written["precision-quality/runs/finetune-fp32/speed-vs-fp32"].value == 1.0
    published = json.loads((pq.REPO / "docs" / "results" / "precision-quality.json").read_text(encoding="utf-8"))
    for record in written.values():
        assert record.threads == 2 and "--records" not in record.command
        assert record.data == published["records"][0]["data"]
    assert json.loads((store / "precision-quality.json").read_text())["tables"] == published["tables"]

    # --skip-pretrain reads the finished pre-training runs: the same loop seconds and results, no command run
    calls.clear()
    again = tmp_path / "again"
    assert pq.main([*argv, "--skip-pretrain", "--records", str(again)]) == 0
    assert calls == [("finetune", "fp32"), ("finetune", "bf16")]
    reread = assert_published(again, "precision-quality/")
    assert {rid: r.value for rid, r in reread.items()} == {rid: r.value for rid, r in written.items()}
