"""`RunLog`: what a run records about itself — rank 0 only, curves redrawn at most once a minute while it runs."""
from __future__ import annotations

from bertforge.training.metrics_log import CURVES, METRICS_LOG, read_metrics_log
from bertforge.training.run_log import PLOT_EVERY, RunLog


def test_rank_zero_records_train_and_eval_lines_and_other_ranks_write_nothing(tmp_path):
    main, other = tmp_path / "main", tmp_path / "other"
    main.mkdir(), other.mkdir()
    for folder, is_main in ((main, True), (other, False)):
        log = RunLog(folder, "run", resume_step=0, tensorboard=False, main=is_main)
        log.add("train", 1, {"loss": 2.5, "lr": 1e-3})
        log.add("eval", 1, {"mlm_loss": 2.0})
        log.draw_final()
        log.close()
    records = read_metrics_log(main)
    assert [(r["step"], r["split"]) for r in records] == [(1, "train"), (1, "eval")]
    assert records[0]["loss"] == 2.5 and records[1]["mlm_loss"] == 2.0
    assert (main / CURVES).is_file()
    assert not (other / METRICS_LOG).exists() and not (other / CURVES).exists()


def test_curves_are_redrawn_only_once_the_interval_passed(tmp_path):
    log = RunLog(tmp_path, "run", resume_step=0, tensorboard=False, main=True)
    log.add("train", 1, {"loss": 1.0})
    start = log.last_plot
    log.refresh_curves(start + PLOT_EVERY / 2)
    assert not (tmp_path / CURVES).exists()
    log.refresh_curves(start + PLOT_EVERY + 1)
    assert (tmp_path / CURVES).is_file() and log.last_plot == start + PLOT_EVERY + 1


def test_a_resumed_log_drops_records_past_the_resumed_step(tmp_path):
    first = RunLog(tmp_path, "run", resume_step=0, tensorboard=False, main=True)
    for step in (1, 2, 3):
        first.add("train", step, {"loss": float(step)})
    RunLog(tmp_path, "run", resume_step=2, tensorboard=False, main=True).add("train", 3, {"loss": 9.0})
    assert [(r["step"], r["loss"]) for r in read_metrics_log(tmp_path)] == [(1, 1.0), (2, 2.0), (3, 9.0)]
