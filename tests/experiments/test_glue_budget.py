"""experiments/glue_budget.py: step budgets from the calibration, transformers' lr pick, and the floor row."""
from __future__ import annotations

import json
import sys
from argparse import Namespace
from pathlib import Path

import pytest

import glue_budget  # noqa: E402

CALIBRATION = {"seconds_per_step": {"fast": 1.5, "bert": 1.2, "transformers": 7.0}}


def test_each_budget_is_the_whole_steps_of_the_calibrated_step_time():
    args = Namespace(contenders=["fast", "bert", "transformers"], budgets=["20m", "1h", "3h"], hf_lrs=[5e-4, 1e-3],
                     max_steps_cap=None, sweep_budget="20m", hf_lr=None)
    jobs, sweep = glue_budget.plan_jobs(CALIBRATION, args)
    assert {job.name: job.steps for job in jobs} == {"fast-20m": 800, "fast-1h": 2400, "fast-3h": 7200,
                                                     "bert-20m": 1000, "bert-1h": 3000, "bert-3h": 9000}
    assert {job.name: job.steps for job in sweep} == {"transformers-20m-lr0.0005": 171, "transformers-20m-lr0.001": 171}
    capped, capped_sweep = glue_budget.plan_jobs(CALIBRATION, Namespace(**{**vars(args), "max_steps_cap": 5}))
    assert {job.steps for job in capped + capped_sweep} == {5}


def test_the_published_calibration_gives_the_published_tables_steps():
    """experiments/calibrations/ holds the step budgets of docs/RESULTS.md's table: run with it, every contender
    gets the table's steps, which the rounded step times it also holds would not give (3600 // 2.39 = 1506)."""
    cal = json.loads((Path(glue_budget.HERE) / "calibrations" / "epyc-avx2-2026-11-25.json").read_text())
    args = Namespace(contenders=["fast", "bert", "transformers"], budgets=["20m", "1h", "3h"], hf_lrs=[5e-4],
                     max_steps_cap=None, sweep_budget="20m", hf_lr=None)
    jobs, sweep = glue_budget.plan_jobs(cal, args)
    assert {job.name: job.steps for job in jobs} == {"fast-3h": 4521, "bert-3h": 6020, "fast-1h": 1507,
                                                     "bert-1h": 2006, "fast-20m": 502, "bert-20m": 668}
    assert [job.steps for job in sweep] == [149]
    assert glue_budget.budget_steps(cal, "transformers", "3h", None) == 1342
    assert glue_budget.budget_steps(cal, "transformers", "3h", 7) == 7


def test_a_given_transformers_lr_replaces_the_sweep(tmp_path):
    args = Namespace(contenders=["transformers"], budgets=["1h", "3h"], hf_lrs=[5e-4, 1e-3], max_steps_cap=None,
                     sweep_budget="20m", hf_lr=5e-4, save_every=100, model="mini")
    works, jobs, sweep = glue_budget.plan_work(tmp_path, CALIBRATION, args)
    assert sweep == [] and [job.name for job in jobs] == ["transformers-3h-lr0.0005", "transformers-1h-lr0.0005"]
    assert [w.name for w in works] == ["pre-train transformers 3h", "pre-train transformers 1h",
                                       "GLUE transformers 3h", "GLUE transformers 1h"]
    assert works[0].ready() is True  # no sweep to wait for


def test_transformers_lr_is_the_one_with_the_lowest_heldout_loss(tmp_path):
    sweep = [glue_budget.Job("transformers", "20m", 10, lr) for lr in (2.5e-4, 5e-4, 1e-3)]
    for job, loss in zip(sweep, (7.2, 6.9, 7.5)):
        folder = glue_budget.run_folder(tmp_path, job)
        folder.mkdir(parents=True)
        (folder / "pretrain_result.json").write_text(json.dumps({"heldout_mlm_loss": loss}))
    assert glue_budget.best_lr(tmp_path, sweep) == 5e-4


def test_floor_is_the_majority_class_averaged_like_glue():
    result = {"tasks": {"cola": {"majority": {"score": 0.0}}, "sst2": {"majority": {"score": 50.9}},
                        "mrpc": {"majority": {"score": 75.0}}, "wnli": {"majority": {"score": 56.3}}}}
    floor = glue_budget.floor_result(result)
    assert floor["average"] == pytest.approx((0.0 + 50.9 + 75.0) / 3)  # WNLI is never in the average
    assert floor["tasks"]["wnli"]["score"] == 56.3


def test_sweep_runs_at_the_sweep_budget():
    args = Namespace(contenders=["fast", "transformers"], budgets=["20m"], hf_lrs=[5e-4, 1e-3], max_steps_cap=None,
                     sweep_budget="5m", hf_lr=None)
    jobs, sweep = glue_budget.plan_jobs(CALIBRATION, args)
    assert {job.name: job.steps for job in jobs} == {"fast-20m": 800}
    assert {job.name: job.steps for job in sweep} == {"transformers-5m-lr0.0005": 42, "transformers-5m-lr0.001": 42}


def test_a_waiting_work_lets_the_next_take_the_core_and_a_failed_input_stops_its_followers():
    order = []

    def work(name, fail=False, after=None):
        def run(core):
            order.append(name)
            if fail:
                raise RuntimeError(f"{name} broke")
        ready = (lambda: True) if after is None else (
            lambda: (None if after.name in failed_names else True) if after.done.is_set() else False)
        return glue_budget.Work(name, run, ready)

    failed_names = set()
    a = work("a", fail=True)
    needs_a = work("needs-a", after=a)
    b = work("b")
    needs_b = work("needs-b", after=b)
    c = work("c")
    original_run = a.run
    a.run = lambda core: (failed_names.add("a"), original_run(core))
    failures = glue_budget.schedule([needs_b, b, needs_a, a, c], cores=[0])
    assert order == ["b", "needs-b", "a", "c"]  # one core: b first (needs-b waits), then needs-b once b is done
    assert set(failures) == {"a", "needs-a"} and "broke" in failures["a"]


def _finish(out: Path, job, suite: dict | None = None, heldout: float | None = None) -> None:
    """Plant what a finished run (and optionally its GLUE suite) leaves in OUT."""
    folder = glue_budget.run_folder(out, job)
    folder.mkdir(parents=True)
    if job.contender == "transformers":
        (folder / "pretrain_result.json").write_text(json.dumps({"heldout_mlm_loss": heldout}))
    else:
        (folder / "training_summary.json").write_text("{}")
        (folder / "model.safetensors").write_bytes(b"")
    if suite is not None:
        (out / "glue" / job.name).mkdir(parents=True)
        whole = {"model": {"path": "m"}, "protocol": {"name": "cpu"}, "average": None, "average_over": [],
                 "skipped": {}, **suite}  # a glue.json as `bertforge glue` writes it, with the suite's entries
        (out / "glue" / job.name / "glue.json").write_text(json.dumps(whole))


def test_report_keeps_the_rows_whose_run_and_suite_are_finished_and_names_the_rest(tmp_path):
    sweep = [glue_budget.Job("transformers", "5m", 3, lr, sweep=True) for lr in (5e-4, 1e-3)]
    _finish(tmp_path, sweep[0], heldout=7.1)
    _finish(tmp_path, sweep[1], heldout=6.8)
    done = glue_budget.Job("fast", "1h", 10)
    _finish(tmp_path, done, suite={"tasks": {}, "average": 40.0})
    suite_failed = glue_budget.Job("bert", "1h", 10)
    _finish(tmp_path, suite_failed, suite={"tasks": {}, "failed": {"cola": "boom"}})
    no_suite = glue_budget.Job("bert", "20m", 5)
    _finish(tmp_path, no_suite)
    running = glue_budget.Job("fast", "3h", 30)
    hf = glue_budget.Job("transformers", "1h", 4)  # gets the sweep's lr, 1e-3
    _finish(tmp_path, glue_budget.Job("transformers", "1h", 4, 1e-3), suite={"tasks": {}, "average": 36.0}, heldout=7.4)

    ready, missing = glue_budget.report_jobs(tmp_path, [done, suite_failed, no_suite, running, hf], sweep)
    assert [job.name for job in ready] == ["fast-1h", "transformers-1h-lr0.001"]
    assert missing == ["bert-1h (its GLUE suite)", "bert-20m (its GLUE suite)", "fast-3h"]


def test_report_names_transformers_rows_while_the_sweep_runs(tmp_path):
    sweep = [glue_budget.Job("transformers", "5m", 3, lr, sweep=True) for lr in (5e-4, 1e-3)]
    _finish(tmp_path, sweep[0], heldout=7.1)  # the 1e-3 run is still going
    ready, missing = glue_budget.report_jobs(tmp_path, [glue_budget.Job("transformers", "1h", 4)], sweep)
    assert ready == [] and missing == ["transformers-1h (its lr sweep is not finished)"]


def test_report_on_a_folder_without_a_calibration_says_so_and_runs_nothing(tmp_path, monkeypatch):
    for name in ("corpus.txt", "glue", "vocab", "ceiling"):
        (tmp_path / name).mkdir() if "." not in name else (tmp_path / name).write_text("x\n")
    out = tmp_path / "budget"
    monkeypatch.setattr(sys, "argv", ["glue_budget.py", "--out", str(out), "--report", "--corpus",
                                      str(tmp_path / "corpus.txt"), "--glue", str(tmp_path / "glue"), "--vocab",
                                      str(tmp_path / "vocab"), "--ceiling", str(tmp_path / "ceiling")])
    with pytest.raises(SystemExit, match="budget has no calibration.json; run without --report first"):
        glue_budget.main()
    assert not out.exists()


def _row(contender, budget, steps, lr=None, average=40.0):
    return {"contender": contender, "budget": budget, "steps": steps, "lr": lr, "seconds_per_step": 1.0,
            "heldout": {"mlm_loss": 7.0}, "glue": {"tasks": {}, "average": average}}


def test_include_adds_the_earlier_rows_this_folder_lacks_and_keeps_its_own(tmp_path):
    earlier = tmp_path / "earlier.json"
    earlier.write_text(json.dumps({"protocol": "cpu", "rows": [
        _row("fast", "1h", 2400, average=41.0), _row("fast", "3h", 7200, average=99.0),
        _row("transformers", "1h", 514, 1e-3), _row("transformers", "1h", 514, 5e-4, average=1.0)]}))
    here = [_row("fast", "3h", 7200, average=44.0), _row("transformers", "1h", 514, 5e-4, average=36.0)]
    rows = glue_budget.include_rows(here, [str(earlier)], CALIBRATION, "cpu")
    assert [(r["contender"], r["budget"], r["lr"], r["glue"]["average"], r.get("from")) for r in rows] == [
        ("fast", "3h", None, 44.0, None),  # this folder's run, not the earlier 99.0
        ("fast", "1h", None, 41.0, str(earlier)),
        ("transformers", "1h", 5e-4, 36.0, None),
        ("transformers", "1h", 1e-3, 40.0, str(earlier))]
    # --report names what is not finished by run name; an included row is not missing
    missing = glue_budget.report_jobs(tmp_path, [glue_budget.Job("transformers", "1h", 514, 1e-3)], [])[1]
    assert missing == [glue_budget.run_name(rows[3])] == ["transformers-1h-lr0.001"]
    table = glue_budget.results_table(rows, {"tasks": {}, "average": 60.0}, {"tasks": {}, "average": 35.0}, [])
    assert table.count(" * |") == 2 and f"included from: {earlier}" in table


def test_include_refuses_another_protocol_or_another_budget(tmp_path):
    other_protocol = tmp_path / "bert.json"
    other_protocol.write_text(json.dumps({"protocol": "bert", "rows": [_row("fast", "1h", 2400)]}))
    with pytest.raises(SystemExit, match="bert.json: scored with --protocol bert, this table with cpu"):
        glue_budget.include_rows([], [str(other_protocol)], CALIBRATION, "cpu")
    other_steps = tmp_path / "steps.json"
    other_steps.write_text(json.dumps({"protocol": "cpu", "rows": [_row("fast", "1h", 1507)]}))
    with pytest.raises(SystemExit, match="fast at 1h made 1507 steps, this calibration gives it 2400"):
        glue_budget.include_rows([], [str(other_steps)], CALIBRATION, "cpu")
    included = {**_row("fast", "1h", 2400), "from": "earlier.json"}
    included["glue"]["average_over"] = ["rte", "sst2"]
    glue_budget.check_included_tasks([included, _row("bert", "1h", 3000)], {"average_over": ["sst2", "rte"]})
    with pytest.raises(SystemExit, match=r"fast-1h \(earlier.json\) averages over rte,sst2, this table over cola,rte,sst2"):
        glue_budget.check_included_tasks([included], {"average_over": ["cola", "sst2", "rte"]})
    broken = tmp_path / "broken.json"
    broken.write_text("{")
    with pytest.raises(SystemExit, match="broken.json: not a glue_budget.py results.json"):
        glue_budget.include_rows([], [str(broken)], CALIBRATION, "cpu")


def test_the_published_rows_agree_with_their_calibration_and_their_averages():
    """docs/results/glue-budget.json (the table's rows, for --include) made the published calibration's steps, and
    each average is GLUE's average of its task scores (to the rounding of one decimal on both)."""
    from bertforge.evaluation.scores import glue_average
    repo = Path(glue_budget.REPO)
    published = json.loads((repo / "docs" / "results" / "glue-budget.json").read_text())
    cal = json.loads((repo / published["calibration_file"]).read_text())
    rows = glue_budget.include_rows([], [str(repo / "docs" / "results" / "glue-budget.json")], cal, "cpu")
    assert len(rows) == len(published["rows"])
    glue_budget.check_included_tasks(rows, {"average_over": ["cola", "sst2", "mrpc", "stsb", "rte"]})
    for row in rows:
        tasks = row["glue"]["tasks"]
        for name in ("mrpc", "stsb"):  # two-metric tasks: their score is the mean of the two
            assert tasks[name]["score"] == pytest.approx(sum(tasks[name]["metrics"].values()) / 2, abs=0.01)
        assert row["glue"]["average"] == pytest.approx(glue_average({t: e["score"] for t, e in tasks.items()})[0],
                                                       abs=0.1)  # 0.05 from the scores, 0.05 its own


def test_the_machine_record_stays_out_of_the_run_folder(tmp_path):
    """bertforge refuses an --output folder holding files of no run of its own, so the record of the machine a
    run is made on lives beside the run folders, and says whether the CPU has AVX-512."""
    job = glue_budget.Job("fast", "1h", 10)
    glue_budget.write_machine(tmp_path, job.name)
    assert not glue_budget.run_folder(tmp_path, job).exists()
    record = json.loads(glue_budget.machine_path(tmp_path, job.name).read_text())
    assert isinstance(record["avx512"], bool) and record["cpu"] and "torch threads" not in record


def test_export_keeps_the_scores_and_drops_every_path_and_command(tmp_path):
    """--export writes what a repository may keep (no machine paths) and what --include reads back."""
    glue = {"tasks": {"rte": {"score": 47.7, "metrics": {"accuracy": 47.7}, "in_average": True,
                              "runs": [{"seed": 42, "lr": 1e-4, "score": 47.7, "metrics": {"accuracy": 47.7},
                                        "steps": 27, "seconds": 3.0, "train_examples": 2000}]}},
            "average": 47.7, "average_over": ["rte"], "protocol": "cpu", "created": "2026-11-26T23:00:00+00:00",
            "model": {"path": str(tmp_path / "runs" / "fast-1h"), "fingerprint": "sha256:ab"},
            "command": f"bertforge glue --model {tmp_path}/runs/fast-1h --data {tmp_path}/glue"}
    record = {"rows": [{**_row("fast", "1h", 2400), "glue": glue}], "protocol": "cpu", "sweep": None, "hf_lr": 5e-4,
              "calibration": {"seconds_per_step": {"fast": 1.5}, "steps": {"fast": {"1h": 2400}}},
              "ceiling": {**glue, "average": 60.0}, "command": f"glue_budget.py --out {tmp_path}"}
    exported = glue_budget.export_record(record)
    text = json.dumps(exported)
    assert str(tmp_path) not in text and "command" not in text
    assert exported["rows"][0]["glue"]["tasks"]["rte"]["runs"][0]["score"] == 47.7
    assert exported["rows"][0]["glue"]["model"] == {"fingerprint": "sha256:ab"}
    path = tmp_path / "exported.json"
    path.write_text(text)
    rows = glue_budget.include_rows([], [str(path)], CALIBRATION, "cpu")
    assert [(r["contender"], r["glue"]["average"], r["from"]) for r in rows] == [("fast", 47.7, str(path))]


# ---- contenders as settings files ----------------------------------------------------------------------------------------
def _verb_parser(args: tuple[str, ...]):
    """The bertforge parser of the verb (and sub-verb) that `args` begin with."""
    from bertforge.cli import build_parser
    parser = build_parser()
    words = list(args)
    while words and not words[0].startswith("-"):
        sub = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
        parser = sub.choices[words.pop(0)]
        if not any(a.__class__.__name__ == "_SubParsersAction" for a in parser._actions):
            break
    return parser


@pytest.mark.parametrize("name", sorted(glue_budget.CONTENDERS))
def test_every_contender_file_is_a_command_bertforge_accepts(name, tmp_path):
    """Each experiments/contenders/*.toml, with the driver's own flags added, parses as the bertforge verb it names
    (a misspelt flag in a settings file fails here, not an hour into a race), and spends its budget the way it
    says: a calibrated contender the calibration's steps, a CPU-budget one `--cpu-budget`."""
    spec = glue_budget.CONTENDERS[name]
    if spec.kind == "transformers":
        assert not spec.args and spec.budget == "calibrated"
        return
    args = Namespace(model="mini", teacher="teacher-dir", save_every=500)
    steps = None if spec.budget == "cpu" else 7
    command = glue_budget.pretrain_command(tmp_path, glue_budget.Job(name, "1h", steps), args)
    assert command[:3] == [sys.executable, "-m", "bertforge"]
    given = command[3:]
    parser = _verb_parser(tuple(given))
    verb_words = len([w for w in given[:2] if not w.startswith("-")])
    parsed = parser.parse_args(given[verb_words:])
    assert Path(parsed.output) == glue_budget.run_folder(tmp_path, glue_budget.Job(name, "1h", steps))
    if spec.budget == "cpu":
        assert parsed.cpu_budget == 3600 and parsed.max_steps is None
    else:
        assert parsed.max_steps == 7 and parsed.cpu_budget is None
    for placeholder_arg in given:
        assert "{" not in placeholder_arg


def test_the_tinybert_student_file_is_tinybert_4():
    """tinybert.toml's fresh student is the paper's TinyBERT-4 shape, with the teacher's vocabulary and heads."""
    config = json.loads((glue_budget.CONTENDER_DIR / "tinybert-4.json").read_text())
    assert (config["num_hidden_layers"], config["hidden_size"], config["intermediate_size"],
            config["num_attention_heads"], config["vocab_size"]) == (4, 312, 1200, 12, 30522)


def test_a_contender_file_with_an_unknown_key_is_refused_naming_it(tmp_path):
    (tmp_path / "odd.toml").write_text('label = "x"\nargs = ["pretrain"]\nbudgte = "cpu"\n')
    with pytest.raises(SystemExit, match=r"odd.toml: unknown key 'budgte'"):
        glue_budget.load_contenders(tmp_path)
    (tmp_path / "odd.toml").write_text('label = "x"\nargs = ["pretrain"]\nbudget = "wall"\n')
    with pytest.raises(SystemExit, match=r"odd.toml: .*budget calibrated or cpu"):
        glue_budget.load_contenders(tmp_path)


def test_a_cpu_budget_row_takes_its_steps_and_step_cost_from_its_own_summary(tmp_path):
    """A CPU-budget contender's row reports the steps its run made and the CPU time per step its loop spent
    (teacher included), not the calibration's; a run without CPU time is refused by name."""
    job = glue_budget.Job("tinybert", "1h", None)
    folder = glue_budget.run_folder(tmp_path, job)
    folder.mkdir(parents=True)
    (folder / "training_summary.json").write_text(json.dumps({"step": 900, "cpu_seconds": 3600.9}))
    assert glue_budget.spent(CALIBRATION, job, folder) == (900, pytest.approx(4.001))
    assert glue_budget.spent(CALIBRATION, glue_budget.Job("fast", "1h", 2400), folder) == (2400, 1.5)
    (folder / "training_summary.json").write_text(json.dumps({"step": 900}))
    with pytest.raises(SystemExit, match="no CPU time"):
        glue_budget.spent(CALIBRATION, job, folder)


def test_a_row_without_heldout_questions_and_with_three_seeds_shows_both():
    glue = {"tasks": {"rte": {"score": 50.0, "runs": [{"seed": s} for s in (42, 43, 44)]}}, "average": 50.0}
    row = {**_row("tinybert", "1h", 900), "glue": glue, "heldout": None, "seconds_per_step": 4.0}
    table = glue_budget.results_table([row], {"tasks": {}, "average": 60.0}, {"tasks": {}, "average": 35.0}, ["rte"])
    line = next(line for line in table.splitlines() if "tinybert" in line)
    assert "| 900 | 4.000 | — | 3 | 50.0 |" in line


def test_records_of_the_rows_render_the_medians_and_the_seed_range(tmp_path):
    """--records: each of this folder's rows becomes records (steps, CPU-s/step, held-out loss, each task's
    metrics, the GLUE average with the lowest and highest seed's average as its spread) and a table that the
    docs generator renders to those values; an included row is not re-recorded."""
    import importlib.util

    from bertforge.results_store import read_store, write_records
    spec = importlib.util.spec_from_file_location("gen_results", Path(glue_budget.REPO) / "tools" / "gen_results.py")
    gen_results = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen_results)

    def task(metrics: dict, runs: list[float]) -> dict:
        return {"score": sorted(runs)[1], "metrics": metrics, "in_average": True,
                "runs": [{"seed": 42 + i, "score": r} for i, r in enumerate(runs)]}

    glue = {"tasks": {"rte": task({"accuracy": 52.0}, [52.0, 50.0, 55.0]),
                      "mrpc": task({"f1": 81.2, "accuracy": 68.4}, [74.8, 70.0, 76.0])},
            "average": (52.0 + 74.8) / 2}
    own = {**_row("tinybert", "1h", 900), "glue": glue, "heldout": None, "seconds_per_step": 4.0}
    included = {**_row("fast", "1h", 1507), "from": "published.json"}
    args = Namespace(model="mini", protocol="cpu")
    records, table = glue_budget.budget_records([own, included], "levers", ["mrpc", "rte"], args)
    assert {r.id.split("/", 2)[1] for r in records} == {"tinybert-1h"}
    by_id = {r.id: r for r in records}
    assert by_id["levers/tinybert-1h/steps"].value == 900
    assert by_id["levers/tinybert-1h/mrpc/f1"].value == 81.2 and by_id["levers/tinybert-1h/rte/accuracy"].seeds == 3
    assert "levers/tinybert-1h/mlm-loss" not in by_id
    # per-seed averages: (74.8+52)/2, (70+50)/2, (76+55)/2 -> the spread is 60.0-65.5
    assert by_id["levers/tinybert-1h/glue"].spread == (60.0, 65.5)
    write_records("levers", records, tmp_path, table)
    line = gen_results.render_table(read_store(tmp_path), "levers").splitlines()[2]
    assert line.startswith("| `bertforge distill pretrain --loss tinybert`")
    assert "| 900 | 4.00 | — | 81.2/68.4 | 52.0 | **63.4 (60.0-65.5)** |" in line


def test_the_recorded_command_is_the_one_that_measures():
    argv = ["experiments/glue_budget.py", "--out", "../runs/levers", "--contenders", "tinybert", "--report",
            "--records", "glue-levers", "--include=published.json", "--glue-args", "--seeds 3"]
    assert glue_budget.measuring_command(argv) == ("OMP_NUM_THREADS=1 python experiments/glue_budget.py --out "
                                                   "../runs/levers --contenders tinybert --glue-args '--seeds 3'")


def test_the_random_init_row_is_the_model_pretraining_starts_from(train_data, tmp_path, capsys):
    """The random-init contender's folder holds the model `bertforge pretrain` with the same args builds (the
    same config and tokenizer as a real run's folder, fresh weights), so the row measures GLUE without
    pre-training; it runs on no budget, once, and reports no steps."""
    from safetensors.torch import load_file

    from bertforge.cli import main as cli_main
    out = tmp_path / "race"
    (out / "corpus").parent.mkdir(parents=True)
    (out / "corpus").symlink_to(train_data, target_is_directory=True)
    args = Namespace(model="tiny", teacher=None, contenders=["random-init"], budgets=["1h", "20m"], max_steps_cap=None,
                     hf_lr=None, hf_lrs=[5e-4], sweep_budget="20m")
    jobs, sweep = glue_budget.plan_jobs(CALIBRATION, args)
    assert [(j.contender, j.budget, j.steps) for j in jobs] == [("random-init", "0", 0)] and not sweep
    job = jobs[0]
    assert not glue_budget.finished(out, job)
    glue_budget.write_random_init(out, job, args)
    folder = glue_budget.run_folder(out, job)
    assert glue_budget.finished(out, job) and glue_budget.spent(CALIBRATION, job, folder) == (0, 0.0)
    trained = tmp_path / "one-step"
    assert cli_main(["pretrain", "--recipe", "fast", "--model", "tiny", "--data", str(train_data), "--output",
                     str(trained), "--max-steps", "1", "--seed", "0", "--lr", "1e-30", "--no-progress"]) == 0
    assert json.loads((folder / "config.json").read_text()) == json.loads((trained / "config.json").read_text())
    assert (folder / "vocab.txt").read_bytes() == (trained / "vocab.txt").read_bytes()
    fresh, after = load_file(folder / "model.safetensors"), load_file(trained / "model.safetensors")
    assert set(fresh) == set(after)
    # a step at lr 1e-30 moves a weight by about 1e-30 (only zeros and tiny values show it): the run's weights are
    # its initial ones, and these are the same init from the same seed (another draw differs by about 0.02)
    moved = {k: (fresh[k] - after[k]).abs().max().item() for k in fresh}
    assert max(moved.values()) < 1e-20, moved


def test_a_row_without_glue_gives_its_records_and_no_line_and_own_scores_are_recorded():
    """`glue = false` (ltr): the run's steps, step cost and held-out perplexity are records, the table has no line
    for it; an mdlm row records its perplexity bound beside its line."""
    glue = {"tasks": {"rte": {"score": 50.0, "metrics": {"accuracy": 50.0}, "runs": [{"seed": 42, "score": 50.0}]}},
            "average": 50.0}
    ltr = {**_row("ltr", "20m", 500), "glue": None, "heldout": None, "seconds_per_step": 2.4,
           "own": {"objective": "ltr", "perplexity": 210.4}}
    mdlm = {**_row("mdlm", "20m", 400), "glue": glue, "heldout": {"mlm_loss": 6.1}, "seconds_per_step": 3.0,
            "own": {"objective": "mdlm", "perplexity_bound": 900.2}}
    records, table = glue_budget.budget_records([ltr, mdlm], "levers", ["rte"], Namespace(model="mini", protocol="cpu",
                                                                                         eval_batches=20))
    by_id = {r.id: r.value for r in records}
    assert by_id["levers/ltr-20m/perplexity"] == 210.4 and by_id["levers/ltr-20m/steps"] == 500
    assert by_id["levers/mdlm-20m/perplexity-bound"] == 900.2
    assert not any(k.startswith("levers/ltr-20m/rte") or k == "levers/ltr-20m/glue" for k in by_id)
    assert [glue_budget.row_run(cells) for cells in table["levers"]["rows"]] == ["mdlm-20m"]


def test_published_record_rows_join_the_plot_where_the_folder_has_no_run():
    """--include-records: each run of the published group becomes a row (its contender and budget read back from
    a name such as causal-then-masked-1h, its average and seed range the records'), except a run the folder has."""
    from bertforge.results_store import read_store
    store = read_store(Path(glue_budget.REPO) / "docs" / "results")
    runs = {rid.split("/")[1] for rid in store.records if rid.startswith("glue-levers/") and rid.endswith("/glue")}
    own = {**_row("fast-cpu", "20m", 600), "glue": {"tasks": {}, "average": 40.0}}
    rows = glue_budget.record_rows([own], ["glue-levers"])
    assert {glue_budget.run_name(r) for r in rows} == runs | {"fast-cpu-20m"}
    assert [r for r in rows if r["contender"] == "fast-cpu" and r["budget"] == "20m"] == [own]
    for row in rows:
        if row.get("from"):
            record = store.records[f"glue-levers/{glue_budget.run_name(row)}/glue"]
            assert row["glue"]["average"] == record.value and glue_budget.row_range(row) == tuple(record.spread)
            assert row["steps"] == store.records[f"glue-levers/{glue_budget.run_name(row)}/steps"].value
