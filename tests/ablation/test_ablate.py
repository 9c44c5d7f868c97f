"""`bertforge ablate`: a table runs end to end, scores every row on the same probes, and resumes."""
from __future__ import annotations

import dataclasses
import json
import shlex
import statistics

import pytest

from bertforge.ablation.ablate import AblationSettings, budget_text, probe, row_options, run_table
from bertforge.ablation.tables import slug
from bertforge.cli import build_parser
from bertforge.commands.flags import settings_from_args
from bertforge.results_store import read_store, render
from bertforge.settings import SettingError
from bertforge.ablation.tables import TABLES


def test_every_table_names_distinct_rows_and_known_options():
    from bertforge.pretraining.pretrain import PretrainConfig
    fields = set(PretrainConfig.__dataclass_fields__)
    for table in TABLES.values():
        names = [v.name for v in table.variants]
        assert len(set(names)) == len(names), table.name
        for v in table.variants:
            assert set(v.options) <= fields, (table.name, v.name)
            if v.kind == "distill":
                assert v.teacher in names[: names.index(v.name)], "a student's teacher must run before it"


@pytest.mark.slow
def test_objectives_table_end_to_end(train_data, shared_data, tmp_path, capsys):
    settings = AblationSettings(table="bert-objectives", data=str(train_data), output=str(tmp_path / "t"),
                                steps=2, model="tiny", glue=str(shared_data / "glue"), tasks=("sst2",),
                                finetune_samples=48, finetune_epochs=1, batch_size=8, eval_batches=2,
                                finetune_seeds=2)
    result = run_table(settings, say=lambda _m: None)
    rows = {r["name"]: r for r in result["rows"]}
    assert list(rows) == ["MLM + NSP", "MLM, no NSP", "LTR, no NSP"]
    for name, row in rows.items():
        assert 0.0 <= row["nsp_acc"] <= 1.0 and 0.0 <= row["sop_acc"] <= 1.0
        assert 0.0 <= row["sst2_accuracy"] <= 1.0
        assert row["parameters"] > 0
    assert "perplexity" in rows["MLM + NSP"] and "ltr_perplexity" not in rows["MLM + NSP"]
    runs = json.loads((tmp_path / "t" / "mlm-nsp" / "finetune-sst2" / "metrics.json").read_text())["runs"]
    assert [r["seed"] for r in runs] == [0, 1]  # one fine-tuning run per seed, the table shows their median
    assert rows["MLM + NSP"]["sst2_accuracy"] == pytest.approx(statistics.median(r["eval"]["accuracy"] for r in runs))
    assert "ltr_perplexity" in rows["LTR, no NSP"] and "perplexity" not in rows["LTR, no NSP"]

    table_md = (tmp_path / "t" / "bert-objectives.md").read_text()
    assert table_md.count("\n| ") == 4 and "2 steps" in table_md  # header + 3 rows
    assert (tmp_path / "t" / "bert-objectives.png").stat().st_size > 1000

    # the probes are the same questions every time: asking again gives the same scores
    again = probe(tmp_path / "t" / "mlm-nsp", settings)
    assert again["perplexity"] == pytest.approx(rows["MLM + NSP"]["perplexity"], rel=1e-6)
    assert again["nsp_acc"] == rows["MLM + NSP"]["nsp_acc"]

    # finished rows are kept: a re-run trains nothing and reports the same table
    messages: list[str] = []
    second = run_table(settings, say=messages.append)
    assert sum("done earlier" in m for m in messages) == 3
    assert json.dumps(second["rows"]) == json.dumps(result["rows"])


def test_unknown_table_is_a_clear_error(tmp_path):
    with pytest.raises(ValueError, match="unknown table 'nope'"):
        run_table(AblationSettings(table="nope", data=str(tmp_path), output=str(tmp_path / "o")))


def test_a_cpu_budget_reaches_every_rows_pretraining_instead_of_the_wall_clock(tmp_path):
    table = TABLES["xlnet-plm"]
    settings = AblationSettings(table="xlnet-plm", data=str(tmp_path), output=str(tmp_path / "o"), cpu_budget=600.0)
    for variant in table.variants:
        options = row_options(table, variant, settings)
        assert options["cpu_budget"] == 600.0 and "time_budget" not in options and "max_steps" not in options
    assert budget_text(settings) == "10 CPU-min"
    with pytest.raises(SettingError, match="steps.*cpu-budget.*not both"):
        run_table(dataclasses.replace(settings, steps=10))


def test_fast_recipe_rows_keep_the_table_objective_in_the_modern_layout(train_data, tmp_path):
    """`--recipe fast`: every row is a BERT-family model in the ModernBERT layout, so a row that asks for NSP
    still has its head, and the rows train with the recipe's masking rate, dropout and schedule."""
    import torch

    from bertforge.ablation.ablate import _write_config, recipe_training, row_schedule
    from bertforge.model.auto import family, read_model_type
    from bertforge.model.modernbert import ModernBertConfig

    fast = AblationSettings(table="bert-objectives", data=str(train_data), output=str(tmp_path), steps=1000,
                            model="tiny", recipe="fast")
    path = _write_config("tiny", {}, fast, tmp_path / "row")
    config = family(read_model_type(path)).config_class.from_json_file(path)
    modern = ModernBertConfig()
    assert read_model_type(path) == "bert" and config.type_vocab_size == 2
    assert (config.pre_norm, config.feed_forward_glu, config.rope_theta, config.attention_bias) == \
        (modern.pre_norm, modern.feed_forward_glu, modern.rope_theta, modern.attention_bias)
    assert config.intermediate_size == config.hidden_size * 3 // 2
    model = family("bert").model_class("pretraining")(config)
    ids = torch.randint(5, config.vocab_size, (2, 16))
    out = model(input_ids=ids, token_type_ids=torch.zeros_like(ids))
    assert hasattr(model, "nsp") and torch.isfinite(out.prediction_logits).all()
    assert row_schedule(fast) == (2e-3, 60)  # the recipe's peak, 6 % of the 1,000 steps
    assert recipe_training("fast") == {"mask_rate": 0.3, "dropout": 0.0}

    paper = AblationSettings(table="bert-objectives", data=str(train_data), output=str(tmp_path), steps=1000)
    plain = _write_config("tiny", {}, paper, tmp_path / "plain")
    assert not family("bert").config_class.from_json_file(plain).pre_norm
    assert row_schedule(paper) == (1e-3, 200)
    assert row_schedule(AblationSettings(table="t", data="d", output="o", lr=5e-4, warmup_steps=7,
                                         recipe="fast")) == (5e-4, 7)


def test_rows_picks_rows_by_name_or_slug_and_brings_a_students_teacher():
    from bertforge.ablation.ablate import select_rows
    from bertforge.ablation.tables import TABLES
    assert select_rows(TABLES["albert-sharing"], None) == [v.name for v in TABLES["albert-sharing"].variants]
    assert select_rows(TABLES["albert-sharing"], ("not-shared", "Shared-FFN")) == ["shared-FFN", "not-shared"]
    assert select_rows(TABLES["distilbert"], ("student-distilled-l-2",)) == ["teacher (L=4)", "student, distilled (L=2)"]
    with pytest.raises(ValueError, match="--rows: no row 'all' in table albert-sharing; its rows are all-shared"):
        select_rows(TABLES["albert-sharing"], ("all",))


def test_two_processes_with_different_rows_make_one_table(train_data, tmp_path):
    """`--rows` splits a table across processes (one per core); each writes the table with every row finished
    in the folder so far, so the last one to finish writes the whole table."""
    common = dict(table="bert-objectives", data=str(train_data), output=str(tmp_path / "t"), steps=2, model="tiny",
                  batch_size=8, eval_batches=2)
    first = run_table(AblationSettings(**common, rows=("mlm-no-nsp",)), say=lambda _m: None)
    assert [r["name"] for r in first["rows"]] == ["MLM, no NSP"]
    assert not (tmp_path / "t" / "mlm-nsp").exists() and not (tmp_path / "t" / "ltr-no-nsp").exists()
    second = run_table(AblationSettings(**common, rows=("MLM + NSP",)), say=lambda _m: None)
    assert [r["name"] for r in second["rows"]] == ["MLM + NSP", "MLM, no NSP"]  # in the table's order
    assert second["rows"][1] == first["rows"][0]
    assert (tmp_path / "t" / "bert-objectives.md").read_text().count("\n| ") == 3  # header + 2 rows


def test_cli_rejects_an_unknown_row_before_writing(tmp_path, train_data, capsys):
    from bertforge.cli import main
    code = main(["ablate", "albert-sop", "--data", str(train_data), "--output", str(tmp_path / "o"),
                 "--rows", "none,sbo"])
    assert code != 0
    assert "--rows: no row 'sbo' in table albert-sop; its rows are none, nsp, sop" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


def _fingerprints(train_data, **changes) -> dict[tuple[str, str], str | None]:
    from bertforge.ablation.ablate import row_fingerprint
    out = {}
    for table in TABLES.values():
        settings = AblationSettings(table=table.name, data=str(train_data), output="unused", steps=600,
                                    batch_size=32, recipe="fast", **changes)
        for v in table.variants:
            out[table.name, v.name] = row_fingerprint(table, v, settings)
    return out


def test_the_same_run_in_two_tables_has_one_fingerprint(train_data):
    """The rows the papers share (BERT Table 5's MLM + NSP is RoBERTa Table 2's SEGMENT-PAIR row; ALBERT's
    all-shared E = 128 NSP model sits in three tables) are recognised as one run, and nothing else is."""
    mini = _fingerprints(train_data, model="mini")
    albert = _fingerprints(train_data, model="albert-mini")
    sizes = _fingerprints(train_data)  # bert-sizes names its own sizes
    assert mini["bert-objectives", "MLM + NSP"] == mini["roberta-inputs", "SEGMENT-PAIR + NSP"]
    assert mini["bert-objectives", "MLM + NSP"] == mini["roberta-masking", "dynamic (RoBERTa)"]
    assert mini["bert-objectives", "MLM + NSP"] == sizes["bert-sizes", "mini (L=4, H=256)"]
    assert mini["bert-objectives", "MLM, no NSP"] == mini["roberta-inputs", "FULL-SENTENCES"]
    assert (albert["albert-sop", "NSP"] == albert["albert-embedding", "E = 128"]
            == albert["albert-sharing", "all-shared"])
    assert mini["distilbert", "student, distilled (L=2)"] is None  # depends on its teacher row, never reused
    for fingerprints in (mini, albert):
        for table in TABLES.values():  # within a table every row is a different run
            own = [fingerprints[table.name, v.name] for v in table.variants if v.kind == "pretrain"]
            assert len(set(own)) == len(own), table.name
    # anything that changes the numbers changes the fingerprint
    row = ("bert-objectives", "MLM + NSP")
    for change in ({"model": "mini", "seed": 1}, {"model": "mini", "finetune_lr": 3e-4}, {"model": "tiny"}):
        assert _fingerprints(train_data, **change)[row] != mini[row], change


def test_reuse_copies_a_finished_twin_row_and_runs_the_others(train_data, tmp_path, monkeypatch):
    from bertforge.ablation import ablate
    common = dict(data=str(train_data), steps=2, model="tiny", batch_size=8, eval_batches=2)
    source = run_table(AblationSettings(table="bert-objectives", output=str(tmp_path / "bert"), rows=("mlm-nsp",),
                                        **common), say=lambda _m: None)["rows"][0]
    trained: list[str] = []
    real_train_row = ablate.train_row
    monkeypatch.setattr(ablate, "train_row", lambda table, variant, *a: (trained.append(variant.name),
                                                                        real_train_row(table, variant, *a)))
    messages: list[str] = []
    result = run_table(AblationSettings(table="roberta-inputs", output=str(tmp_path / "roberta"),
                                        rows=("segment-pair-nsp", "doc-sentences"), reuse=(str(tmp_path / "bert"),),
                                        **common), say=messages.append)
    assert trained == ["DOC-SENTENCES"]  # SEGMENT-PAIR + NSP was not trained again
    copied = tmp_path / "roberta" / "segment-pair-nsp"
    assert any(f"the same run as {tmp_path / 'bert' / 'mlm-nsp'}: copied" in m for m in messages)
    row = {r["name"]: r for r in result["rows"]}["SEGMENT-PAIR + NSP"]
    assert row["perplexity"] == source["perplexity"] and row["run"] == source["run"]
    assert row["dir"] == str(copied) and row["copied_from"] == str(tmp_path / "bert" / "mlm-nsp")
    weights = "model.safetensors"
    assert (copied / weights).read_bytes() == (tmp_path / "bert" / "mlm-nsp" / weights).read_bytes()
    assert not (copied / "checkpoints").exists() and not list((tmp_path / "roberta").glob("*.copying"))
    # a different seed is a different run: nothing to copy
    trained.clear()
    run_table(AblationSettings(table="roberta-inputs", output=str(tmp_path / "seed1"), rows=("segment-pair-nsp",),
                               reuse=(str(tmp_path / "bert"),), seed=1, **common), say=lambda _m: None)
    assert trained == ["SEGMENT-PAIR + NSP"]


def _small_sst2(shared_data, root):
    """SST-2 cut to its first 64 train and 32 dev lines: a GLUE folder a protocol runs through in seconds."""
    folder = root / "glue" / "SST-2"
    folder.mkdir(parents=True)
    for name, n in (("train.tsv", 65), ("dev.tsv", 33)):
        lines = (shared_data / "glue" / "SST-2" / name).read_text(encoding="utf-8").splitlines(keepends=True)
        (folder / name).write_text("".join(lines[:n]), encoding="utf-8")
    return root / "glue"


@pytest.mark.slow
def test_xlnet_plm_table_scores_mlm_and_plm_rows_with_the_glue_protocol(train_data, shared_data, tmp_path):
    glue = _small_sst2(shared_data, tmp_path)
    settings = AblationSettings(table="xlnet-plm", data=str(train_data), output=str(tmp_path / "t"), steps=2,
                                model="tiny", glue=str(glue), tasks=("sst2",), glue_protocol="cpu",
                                batch_size=8, eval_batches=2, records=str(tmp_path / "store"))
    result = run_table(settings, say=lambda _m: None)
    rows = {r["name"]: r for r in result["rows"]}
    assert list(rows) == ["MLM (BERT)", "PLM, K = 6", "PLM, K = 7"]
    out = tmp_path / "t"
    # each row was pre-trained with its own objective and K, and probed with that objective
    assert "perplexity" in rows["MLM (BERT)"] and "plm_perplexity" not in rows["MLM (BERT)"]
    for slug_, k in (("plm-k-6", 6), ("plm-k-7", 7)):
        config = json.loads((out / slug_ / "run_config.json").read_text())
        assert config["objective"] == "plm" and config["plm_k"] == k
        assert json.loads((out / slug_ / "config.json").read_text())["model_type"] == "xlnet"
    assert "plm_perplexity" in rows["PLM, K = 6"] and "perplexity" not in rows["PLM, K = 6"]
    # the GLUE columns are the suite's own glue.json, written inside each row
    for name, row in rows.items():
        suite = json.loads((out / row["dir"].rsplit("/", 1)[-1] / "glue" / "glue.json").read_text())
        assert suite["protocol"]["name"] == "cpu"
        assert row["glue_sst2"] == pytest.approx(suite["tasks"]["sst2"]["score"])
        assert row["glue_average"] == pytest.approx(suite["average"])
    table_md = (out / "xlnet-plm.md").read_text()
    assert "GLUE avg" in table_md and "held-out PLM ppl" in table_md and "--protocol cpu" in table_md
    # --records: every cell a record of the results store, each row's steps from its own training summary, and a
    # table spec that renders the same numbers
    store = read_store(tmp_path / "store")
    assert store.tables["results-ablate-xlnet-plm"]["rows"][0][0] == "MLM (BERT)"
    for name, row in rows.items():
        rid = f"results-ablations/ablate-xlnet-plm/{slug(name)}"
        summary = json.loads((out / slug(name) / "training_summary.json").read_text())
        assert store.records[f"{rid}/steps"].value == summary["step"] == 2
        assert store.records[f"{rid}/glue-avg"].value == row["glue_average"]
        assert store.records[f"{rid}/sst-2-glue"].value == row["glue_sst2"]
        ppl = "held-out-mlm-ppl" if name == "MLM (BERT)" else "held-out-plm-ppl"
        assert store.records[f"{rid}/{ppl}"].value == row[ppl.endswith("mlm-ppl") and "perplexity" or "plm_perplexity"]
    # no row trains NSP or SOP, so their chance-level probes are not columns of the published table
    assert not any("NSP" in h or "SOP" in h for h in store.tables["results-ablate-xlnet-plm"]["header"])
    last = store.tables["results-ablate-xlnet-plm"]["rows"][-1]
    assert last[0] == "PLM, K = 7" and render(store, last[-1].strip("{}")).startswith(
        f"{rows['PLM, K = 7']['glue_average']:.1f}")
    # the recorded command runs the same table: parsed back, it gives these settings
    command = store.records["results-ablations/ablate-xlnet-plm/plm-k-6/steps"].command
    words = shlex.split(command)  # "OMP_NUM_THREADS=1 bertforge ablate ..." when the run set the threads
    args = build_parser().parse_args(words[words.index("bertforge") + 1:])
    assert dataclasses.replace(settings_from_args(AblationSettings, args), records=settings.records) == settings
