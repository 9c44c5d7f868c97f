"""Run one ablation table: equal-budget pre-training per row, the same held-out probes, the same fine-tuning.

Every row is scored on the *same* held-out questions, whatever it was trained on: MLM accuracy and
perplexity (15% masking, FULL-SENTENCES), NSP accuracy and SOP accuracy (segment pairs) — so a model
trained without NSP is still asked NSP, as in ALBERT's Table 5. Then each row is fine-tuned on the same
GLUE subsets. Rows that finished are not run again (`row.json`), and a killed pre-training run resumes
from its checkpoint, so the command can simply be re-run. A row that another table already ran with the same
settings (`row_fingerprint`) is copied from that table's folder (`reuse`) instead of run again. Writes
`TABLE.md`, `TABLE.png`, `results.json`.
"""
from __future__ import annotations

import hashlib
import json
import logging
import os
import shlex
import shutil
import statistics
import time
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any, Callable, Sequence

from bertforge.allocator import release_freed_memory
from bertforge.atomic import atomic_write_text
from bertforge.config import CONFIG_NAME, has_config
from bertforge.settings import (MAX_BATCH, MAX_EPOCHS, MAX_LR, MAX_SAMPLES, MAX_SEED, MAX_STEPS, SettingError,
                                check_settings, field_flag, setting)
from bertforge.ablation.tables import COLUMNS, TABLES, Table, Variant, slug
from bertforge.evaluation.protocols import PROTOCOLS

PROBES = ("mlm", "nsp", "sop")  # held-out questions every row answers
FINETUNE_TASKS = {"sst2": "SST-2", "mrpc": "MRPC"}


def _names(text: str) -> tuple[str, ...]:
    """'sst2,mrpc' -> ('sst2', 'mrpc')."""
    names = tuple(t.strip() for t in text.split(",") if t.strip())
    if not names:
        raise ValueError(f"expected comma-separated names, got {text!r}")
    return names


@dataclass
class AblationSettings:
    """One ablation table at a small, equal budget per row: what `run_ablation` runs and `bertforge ablate`'s
    flags (each default, range and help written here once)."""

    table: str = setting(help="one of: " + ", ".join(TABLES), positional=True, choices=tuple(sorted(TABLES)),
                         metavar="TABLE")
    data: str = setting(help="a corpus folder written by `bertforge prepare`", kind="existing_dir", metavar="DIR")
    output: str = setting(help="folder for the table; an earlier run of the same table there is continued",
                          metavar="DIR")
    budget: float = setting(600.0, "pre-training wall-clock seconds per row (e.g. 90s, 10m, 1h)", kind="duration",
                            maximum=86_400.0)
    steps: int | None = setting(None, "pre-training steps per row instead of a wall-clock budget (fair on a busy "
                                "machine)", positive=True, maximum=MAX_STEPS)
    cpu_budget: float | None = setting(None, "pre-training CPU seconds per row (the process's CPU time, e.g. 10m) "
                                       "instead of --budget's wall clock: equal CPU time however busy the machine",
                                       kind="duration", positive=True, maximum=86_400.0)
    model: str | None = setting(None, "size for every row instead of the table's own (tiny, mini...)")
    glue: str | None = setting(None, "folder holding SST-2/ and MRPC/ (e.g. ../shared/data/glue); omit to skip "
                               "fine-tuning", kind="existing_dir", metavar="DIR")
    tasks: Sequence[str] = setting(("sst2", "mrpc"), "comma-separated fine-tuning tasks", parse=_names)
    finetune_samples: int = setting(4000, "train examples per task (MRPC has 3,668)", positive=True,
                                    maximum=MAX_SAMPLES)
    finetune_epochs: float = setting(2.0, "epochs of each probe fine-tuning", positive=True, maximum=MAX_EPOCHS)
    # small models from short runs want a larger lr than the paper's 2e-5
    finetune_lr: float = setting(1e-4, "learning rate of each probe fine-tuning", positive=True, maximum=MAX_LR)
    finetune_seeds: int = setting(1, "fine-tuning runs per task and row (seeds --seed, --seed+1, ...); the table "
                                  "shows medians", positive=True, maximum=100)
    glue_protocol: str | None = setting(
        None, "score each row with the GLUE suite (`bertforge glue`) under this protocol on --tasks (e.g. "
        "cola,sst2,mrpc,stsb,rte) and --finetune-seeds seeds per task instead of the probe fine-tuning; the table "
        "gains the suite's average",
        choices=tuple(sorted(PROTOCOLS)))
    batch_size: int = setting(64, "pre-training batch size of every row", positive=True, maximum=MAX_BATCH)
    lr: float | None = setting(None, "peak lr (default: 1e-3; 2e-3 with --recipe fast)", positive=True,
                               maximum=MAX_LR)
    warmup_steps: int | None = setting(None, "default: 200; with --recipe fast, 6 % of --steps (100 under a time "
                                       "budget)", non_negative=True, maximum=MAX_STEPS)
    recipe: str = setting("bert", "fast: every row in the ModernBERT layout (pre-LN, GeGLU, rotary, no biases; "
                          "BERT's segment embeddings and NSP head kept where a row asks for them), 30 % masking, "
                          "dropout 0", choices=("bert", "fast"))
    eval_batches: int = setting(20, "held-out batches per probe", positive=True, maximum=1_000_000)
    seed: int = setting(0, "seed of every row's pre-training", non_negative=True, maximum=MAX_SEED)
    extra: dict[str, Any] = setting(default_factory=dict, help="any other PretrainConfig field for every row",
                                    cli=False)
    rows: Sequence[str] | None = setting(
        None, "run only these rows (slugs as in the output folder, e.g. mlm-nsp); other rows finished there still "
        "appear in the table, so one process per core can each take different rows", parse=_names,
        metavar="ROW[,ROW]")
    reuse: Sequence[str] = setting(
        default_factory=list, help="another table's output folder (repeatable): a row finished there with exactly "
        "this row's pre-training, corpus, probes and fine-tuning is copied instead of run again (e.g. RoBERTa "
        "Table 2's SEGMENT-PAIR + NSP row is BERT Table 5's MLM + NSP row)", kind="existing_dir", nargs="+", repeatable=True,
        metavar="DIR")
    overwrite: bool = setting(False, "empty an existing, non-empty --output folder first (default: continue the "
                              "same table there, refuse anything else)")
    records: str | None = setting(None, "also write the table's numbers as records of the results store in this "
                                  "folder (the docs' is docs/results): one per cell and each row's steps, and the "
                                  "table results-ablate-TABLE", metavar="DIR")

    def command_line(self) -> str:
        """The command that runs the whole table, in a canonical spelling: the table, its inputs, then each setting
        that decides the numbers and differs from its default (not --rows, --reuse, --records or --overwrite: a
        row copied from a twin is the row this command runs)."""
        words = ["bertforge", "ablate", self.table]
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name in ("table", "rows", "reuse", "records", "overwrite", "extra") or value in (None, [], ()) or (
                    value == f.default and f.name not in ("data", "output")) or (
                    f.name == "budget" and (self.steps or self.cpu_budget)):
                continue
            if f.metadata.get("kind") == "duration":
                value = duration_text(value)
            elif isinstance(value, (list, tuple)):
                value = ",".join(map(str, value))
            elif isinstance(value, float):
                value = f"{value:g}"
            words += [field_flag(f), str(value)]
        return shlex.join(words)


def duration_text(seconds: float) -> str:
    """90 -> 90s, 600 -> 10m, 3600 -> 1h: how a duration flag is written."""
    for unit, size in (("h", 3600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{seconds / size:g}{unit}"
    return f"{seconds:g}s"


def budget_text(settings: AblationSettings) -> str:
    if settings.steps:
        return f"{settings.steps} steps"
    if settings.cpu_budget:
        return f"{settings.cpu_budget / 60:.3g} CPU-min"
    return f"{settings.budget / 60:.3g} min"


def row_budget(settings: AblationSettings) -> dict[str, Any]:
    """The one budget every row's pre-training gets: steps, else CPU time, else wall-clock time."""
    if settings.steps:
        return {"max_steps": settings.steps}
    if settings.cpu_budget:
        return {"cpu_budget": settings.cpu_budget}
    return {"time_budget": settings.budget}


def run_ablation(settings: AblationSettings, say: Callable[[str], None] | None = None) -> dict[str, Any]:
    """`bertforge ablate`: claim OUTPUT (a folder of the same table is continued, whichever rows each process
    runs), record the settings, and run the table (`run_table`)."""
    from bertforge.outputs import claim_output, read_run_config, write_run_config
    table = _checked_table(settings)
    select_rows(table, settings.rows)  # a misspelt row fails before anything is written
    recorded = {k: v for k, v in asdict(settings).items() if k != "overwrite"}
    # rows: one process each; records: where the numbers go, not what they are
    compared = {k: v for k, v in recorded.items() if k not in ("rows", "reuse", "records")}
    output = claim_output(settings.output, verb="ablate", overwrite=settings.overwrite, resumable=True,
                          settings=compared, inputs=(settings.data, settings.glue, *settings.reuse))
    earlier = read_run_config(output)
    if earlier is not None and earlier.get("table") not in (None, settings.table):
        raise SettingError("{path} holds the ablation table {earlier!r}, not {asked!r}; use {overwrite}, or choose "
                           "another {output}", owner=AblationSettings, path=str(output), earlier=earlier["table"],
                           asked=settings.table)
    write_run_config(output, "ablate", recorded)
    return _run_rows(settings, table, say)


def _checked_table(settings: AblationSettings) -> Table:
    """The table `settings` name, once its settings are checked."""
    if settings.table not in TABLES:
        raise ValueError(f"unknown table {settings.table!r}; choose one of {', '.join(TABLES)}")
    check_settings(settings)
    if settings.steps and settings.cpu_budget:
        raise SettingError("give {steps} or {cpu_budget}, not both: every row stops at one budget",
                           owner=AblationSettings)
    return TABLES[settings.table]


def run_table(settings: AblationSettings, say: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Pre-train, probe and fine-tune each selected row of the table; write its table and plot. `say`
    receives the progress lines (the command passes print; none: quiet)."""
    return _run_rows(settings, _checked_table(settings), say)


def _run_rows(settings: AblationSettings, table: Table, say: Callable[[str], None] | None) -> dict[str, Any]:
    from bertforge.data.objectives import get_objective
    say = say or (lambda msg: None)
    # heads dropped/added between pre-training and fine-tuning are expected here, not news
    logging.getLogger("bertforge.checkpoint").setLevel(logging.ERROR)
    out = Path(settings.output)
    out.mkdir(parents=True, exist_ok=True)
    selected = select_rows(table, settings.rows)
    say(f"{table.paper}: {table.title} — {len(selected)} of {len(table.variants)} rows x {budget_text(settings)} "
        f"of pre-training on {settings.data}")
    rows: dict[str, dict[str, Any]] = {}
    for variant in table.variants:
        row_dir = out / slug(variant.name)
        done = row_dir / "row.json"
        if done.exists():
            rows[variant.name] = json.loads(done.read_text(encoding="utf-8"))
            say(f"[{variant.name}] done earlier: {row_dir}")
            continue
        if variant.name not in selected:
            continue
        run = row_fingerprint(table, variant, settings)
        twin = find_twin(run, settings.reuse) if not row_dir.exists() else None
        if twin is not None:
            rows[variant.name] = copy_row(twin, row_dir, variant.name)
            say(f"[{variant.name}] the same run as {twin}: copied")
            continue
        say(f"[{variant.name}] pre-training -> {row_dir}")
        started = time.perf_counter()
        train_row(table, variant, settings, row_dir, rows)
        release_freed_memory()  # each job's free holes in the heap would otherwise add up over the table
        objective = get_objective(variant.options.get("objective", "mlm+nsp"))
        plm_k = int(variant.options.get("plm_k", 6)) if objective.permuted else None
        row = {"name": variant.name, "dir": str(row_dir),
               **probe(row_dir, settings, ltr=objective.left_to_right, plm_k=plm_k),
               "parameters": _parameters(row_dir)}
        if settings.glue and settings.glue_protocol:
            row.update(glue_row(row_dir, settings))
            release_freed_memory()
        elif settings.glue:
            for task in settings.tasks:
                row.update({f"{task}_{k}": v for k, v in finetune_row(row_dir, task, settings).items()})
                release_freed_memory()
        row["seconds"] = round(time.perf_counter() - started, 1)
        if run is not None:
            row["run"] = run
        atomic_write_text(done, json.dumps(row, indent=2) + "\n")
        rows[variant.name] = row
        say(f"[{variant.name}] " + ", ".join(f"{k} {v:.4g}" for k, v in row.items() if isinstance(v, float)))
    # rows that another process (another --rows) finished meanwhile belong in the table too
    rows = {v.name: json.loads((out / slug(v.name) / "row.json").read_text(encoding="utf-8"))
            for v in table.variants if (out / slug(v.name) / "row.json").exists()}
    result = {"table": table.name, "paper": table.paper, "title": table.title, "budget": budget_text(settings),
              "recipe": settings.recipe, "lr": row_schedule(settings)[0],
              "settings": {k: v for k, v in vars(settings).items()}, "rows": list(rows.values())}
    atomic_write_text(out / "results.json", json.dumps(result, indent=2, default=str) + "\n")
    (out / f"{table.name}.md").write_text(markdown(table, result), encoding="utf-8")
    plot(table, result, out / f"{table.name}.png")
    say(f"wrote {out / (table.name + '.md')} and {out / (table.name + '.png')}")
    if settings.records:
        from bertforge.ablation.records import write_table_records
        say(f"records: {write_table_records(table, result, out, settings.command_line(), settings.records)}")
    return result


def select_rows(table: Table, wanted: tuple[str, ...] | None) -> list[str]:
    """Names of the rows to run: all, or those `wanted` names (by name or slug; a distillation row brings its
    teacher). Rows of one table can so run as separate processes, one per core, into the same folder."""
    if not wanted:
        return [v.name for v in table.variants]
    by_key = {key: v for v in table.variants for key in (v.name.lower(), slug(v.name))}
    unknown = [w for w in wanted if w.lower() not in by_key]
    if unknown:
        raise SettingError("{rows}: no row {row!r} in table {table}; its rows are {names}", owner=AblationSettings,
                           row=unknown[0], table=table.name, names=", ".join(slug(v.name) for v in table.variants))
    names = {by_key[w.lower()].name for w in wanted}
    names |= {v.teacher for v in table.variants if v.name in names and v.teacher}
    return [v.name for v in table.variants if v.name in names]


# ---- one row -----------------------------------------------------------------------------------------------------
def row_options(table: Table, variant: Variant, settings: AblationSettings) -> dict[str, Any]:
    """The `pretrain` options of one row: the table's common settings, the recipe's, then the row's own."""
    lr, warmup_steps = row_schedule(settings)
    options: dict[str, Any] = {
        "objective": "mlm+nsp", "batch_size": settings.batch_size, "lr": lr, "warmup_steps": warmup_steps,
        "eval_batches": 0, **row_budget(settings),
        "save_every": 500, "seed": settings.seed, "progress": False, **recipe_training(settings.recipe),
        **settings.extra, **variant.options}
    options.setdefault("model", settings.model or table.model)
    return options


def train_row(table: Table, variant: Variant, settings: AblationSettings, row_dir: Path,
              rows: dict[str, dict[str, Any]]) -> None:
    from bertforge.pretraining.pretrain import pretrain
    lr, warmup_steps = row_schedule(settings)
    options = row_options(table, variant, settings)
    if variant.kind == "distill":
        teacher = rows.get(variant.teacher or "")
        if teacher is None:
            raise ValueError(f"row {variant.name!r} needs its teacher row {variant.teacher!r} to run first")
        from bertforge.pretraining.distill import distill, init_student
        student = row_dir.parent / "students" / row_dir.name  # beside the row's output, which holds only the run
        if not has_config(student):
            init_student(teacher["dir"], student)
        distill(teacher["dir"], str(student), settings.data, str(row_dir), **row_budget(settings),
                batch_size=settings.batch_size, lr=lr, warmup_steps=warmup_steps,
                seed=settings.seed, progress=False)
        return
    if variant.config or settings.recipe != "bert":
        options["model"] = str(_write_config(options["model"], variant.config, settings, row_dir))
    pretrain(settings.data, str(row_dir), **options)


def row_schedule(settings: AblationSettings) -> tuple[float, int]:
    """Peak lr and warmup steps of every row: as given, else the recipe's."""
    from bertforge.pretraining.recipes import RECIPES
    recipe = RECIPES[settings.recipe]
    if settings.recipe == "bert":
        lr, warmup = 1e-3, 200  # the paper's 1e-4 is for 256 x 512 tokens per step for days; rows get minutes
    else:
        lr, warmup = recipe.options["lr"], recipe.options["warmup_steps"]
        if settings.steps and recipe.warmup_fraction is not None:
            warmup = max(1, round(recipe.warmup_fraction * settings.steps))
    return (settings.lr if settings.lr is not None else lr,
            settings.warmup_steps if settings.warmup_steps is not None else warmup)


def recipe_training(name: str) -> dict[str, Any]:
    """What the recipe sets about training besides the schedule (masking rate, dropout); the rows' objectives
    stay the table's."""
    from bertforge.pretraining.recipes import RECIPES
    return {k: v for k, v in RECIPES[name].options.items() if k in ("mask_rate", "dropout")}


def _row_config(model: str, overrides: dict[str, Any], settings: AblationSettings) -> Any:
    """A row's model config: the size preset in the recipe's layout, with the row's changes (E, sharing, depth)."""
    from bertforge.data.shards import load_tokenizer
    from bertforge.model.auto import preset_config
    from bertforge.pretraining.pretrain import resolve_vocab
    from bertforge.pretraining.recipes import layout_overrides
    tokenizer = load_tokenizer(resolve_vocab(settings.data, None))
    config = preset_config(model, vocab_size=len(tokenizer.vocab), pad_token_id=tokenizer.pad_token_id)
    return config.replace(**layout_overrides(settings.recipe, config.hidden_size), **overrides)


def _write_config(model: str, overrides: dict[str, Any], settings: AblationSettings, row_dir: Path) -> Path:
    path = row_dir.parent / "configs" / row_dir.name / CONFIG_NAME  # beside the row's output
    _row_config(model, overrides, settings).save_pretrained(path.parent)
    return path


# ---- the same run in another table ---------------------------------------------------------------------------
def row_fingerprint(table: Table, variant: Variant, settings: AblationSettings) -> str | None:
    """What a row's numbers depend on: its pre-training options and model config, the corpus, and the probes
    and fine-tuning that score it. Rows of different tables with one fingerprint are one run (BERT Table 5's
    MLM + NSP row is RoBERTa Table 2's SEGMENT-PAIR row). None for a distilled row: it depends on its teacher."""
    if variant.kind != "pretrain":
        return None
    from bertforge.pretraining.pretrain import PretrainConfig, data_fingerprint
    options = row_options(table, variant, settings)
    resolved = asdict(PretrainConfig.from_options(data=settings.data, output="", **options))  # defaults filled in
    for unrelated in ("data", "output", "overwrite"):
        resolved.pop(unrelated)
    resolved["train"].pop("progress")
    resolved["model"] = _row_config(options["model"], variant.config, settings).to_dict()
    scoring = {"eval_batches": settings.eval_batches, "glue": settings.glue and str(Path(settings.glue).resolve()),
               "tasks": list(settings.tasks) if settings.glue else [], "finetune_samples": settings.finetune_samples,
               "finetune_epochs": settings.finetune_epochs, "finetune_lr": settings.finetune_lr,
               "finetune_seeds": settings.finetune_seeds,
               **({"glue_protocol": settings.glue_protocol} if settings.glue_protocol else {})}
    record = {"pretrain": resolved, "data": data_fingerprint(settings.data), "scoring": scoring}
    return hashlib.sha256(json.dumps(record, sort_keys=True, default=str).encode()).hexdigest()[:16]


def find_twin(run: str | None, folders: tuple[str, ...]) -> Path | None:
    """A finished row with this fingerprint in one of `folders` (other tables' outputs), if any."""
    if run is None:
        return None
    for folder in folders:
        for done in sorted(Path(folder).glob("*/row.json")):
            if done.parent.suffix == ".copying":  # a copy that was interrupted: not a finished row
                continue
            if json.loads(done.read_text(encoding="utf-8")).get("run") == run:
                return done.parent
    return None


def copy_row(source: Path, row_dir: Path, name: str) -> dict[str, Any]:
    """Copy a finished row (without its resume checkpoints) under this table's name; the folder appears whole."""
    partial = row_dir.with_name(row_dir.name + ".copying")
    shutil.rmtree(partial, ignore_errors=True)
    shutil.copytree(source, partial, ignore=shutil.ignore_patterns("checkpoints"))
    row = json.loads((partial / "row.json").read_text(encoding="utf-8"))
    row.update(name=name, dir=str(row_dir), copied_from=str(source))
    atomic_write_text(partial / "row.json", json.dumps(row, indent=2) + "\n")
    os.replace(partial, row_dir)
    return row


def probe(row_dir: Path, settings: AblationSettings, ltr: bool = False, plm_k: int | None = None) -> dict[str, float]:
    """The same held-out questions for every row: masked tokens, next sentence, sentence order.
    A left-to-right model is asked for the next token instead, and a permutation LM (`plm_k`) for the last 1/K of
    each held-out order, as it trained (neither perplexity is comparable to MLM's)."""
    import torch
    from bertforge.data import MaskingConfig, PretrainingDataset
    from bertforge.data.shards import load_tokenizer
    from bertforge.model.auto import model_class_for
    from bertforge.pretraining.pretrain import evaluate

    model = model_class_for(row_dir, "pretraining").from_pretrained(row_dir)
    tokenizer = load_tokenizer(row_dir)
    results: dict[str, float] = {}
    cpu = torch.device("cpu")
    if plm_k is not None:
        from bertforge.data.permutation import PermutationConfig
        held = PretrainingDataset(settings.data, tokenizer, objective="ltr", packing="full-sentences",
                                  batch_size=32, masking=MaskingConfig(rate=0.15), seed=1234, split="heldout")
        scores = evaluate(model, held, settings.eval_batches, cpu, "plm", _no_autocast,
                          plm=PermutationConfig(k=plm_k))
        return {"plm_acc": scores["mlm_acc"], "plm_perplexity": scores["perplexity"]}
    for task, objective in (("mlm", "ltr" if ltr else "mlm"), ("nsp", "mlm+nsp"), ("sop", "mlm+sop")):
        if task != "mlm" and not hasattr(model, "nsp"):
            continue  # no sentence-pair head to ask
        held = PretrainingDataset(settings.data, tokenizer, objective=objective, packing="full-sentences",
                                  batch_size=32, masking=MaskingConfig(rate=0.15), seed=1234, split="heldout")
        scores = evaluate(model, held, settings.eval_batches, cpu, objective, _no_autocast)
        if task == "mlm" and ltr:
            results.update(ltr_acc=scores["mlm_acc"], ltr_perplexity=scores["perplexity"])
        elif task == "mlm":
            results.update(mlm_acc=scores["mlm_acc"], perplexity=scores["perplexity"])
        else:
            results[f"{task}_acc"] = scores["nsp_acc"]
    return results


def _no_autocast():
    import contextlib
    return contextlib.nullcontext()


def _parameters(row_dir: Path) -> int:
    from bertforge.model.auto import model_class_for
    return model_class_for(row_dir, "base").from_pretrained(row_dir).num_parameters()


def finetune_row(row_dir: Path, task: str, settings: AblationSettings) -> dict[str, float]:
    from bertforge.tasks.finetune import FinetuneSettings, finetune
    report = finetune(FinetuneSettings(
        task=task, model=str(row_dir), output=str(row_dir / f"finetune-{task}"),
        data=str(Path(settings.glue) / FINETUNE_TASKS[task]), epochs=settings.finetune_epochs,
        learning_rates=(settings.finetune_lr,), max_train_samples=settings.finetune_samples,
        restarts=settings.finetune_seeds, seed=settings.seed, progress=False), say=lambda _msg: None)
    runs = [run["eval"] for run in report.runs]
    return {k: statistics.median(float(run[k]) for run in runs) for k in ("accuracy", "f1") if k in runs[0]}


def glue_row(row_dir: Path, settings: AblationSettings) -> dict[str, float]:
    """The row's GLUE suite under --glue-protocol (its folder: `glue/` inside the row): each task's score and the
    average, in points as glue.json has them."""
    from bertforge.evaluation.glue import run_glue
    from bertforge.evaluation.settings import GlueSettings
    result = run_glue(GlueSettings(model=str(row_dir), data=settings.glue, output=str(row_dir / "glue"),
                                   protocol=settings.glue_protocol, tasks=list(settings.tasks),
                                   seeds=settings.finetune_seeds, seed=settings.seed, progress=False),
                      say=lambda _msg: None)
    return {"glue_average": float(result.average),
            **{f"glue_{task}": float(entry.score) for task, entry in result.tasks.items() if task in settings.tasks}}


# ---- reporting ---------------------------------------------------------------------------------------------------


def markdown(table: Table, result: dict[str, Any]) -> str:
    rows = result["rows"]
    cols = [c for c in COLUMNS if any(c[0] in r for r in rows)]
    lines = [f"### {table.paper}: {table.title}", "",
             f"Each row: {result['budget']} of pre-training on the same corpus with the `{result['recipe']}` "
             f"recipe (batch {result['settings']['batch_size']}, peak lr {result['lr']:g}), then the same held-out "
             "probes and the same fine-tuning"
             + (f" (`bertforge glue --protocol {p}`)" if (p := result['settings'].get('glue_protocol')) else "")
             + (f" (dev scores: medians of {n} seeds)" if (n := result['settings'].get('finetune_seeds', 1)) > 1
                else "") + ".", "",
             "| row | " + " | ".join(c[1] for c in cols) + " |", "|---|" + "---:|" * len(cols)]
    for r in rows:
        cells = [fmt.format(r[key]) if key in r else "—" for key, _, fmt in cols]
        lines.append(f"| {r['name']} | " + " | ".join(cells) + " |")
    lines += ["", f"The paper: {table.expectation}", ""]
    return "\n".join(lines)


def plot(table: Table, result: dict[str, Any], path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    rows = result["rows"]
    panels = [(k, label) for k, label, _ in COLUMNS[1:] if any(k in r for r in rows)]
    ncols = min(4, len(panels))  # wrap: eight panels in one row are too wide to read
    nrows = -(-len(panels) // ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(3.2 * ncols, 3.4 * nrows), squeeze=False)
    for ax in axes.flat[len(panels):]:
        ax.set_visible(False)
    names = [r["name"] for r in rows]
    for ax, (key, label) in zip(axes.flat, panels):
        values = [r.get(key, float("nan")) for r in rows]
        ax.bar(range(len(rows)), values, color=[f"C{i}" for i in range(len(rows))])
        ax.set_title(label, fontsize=9)
        ax.set_xticks(range(len(rows)), names, rotation=30, ha="right", fontsize=7)
        if "perplexity" not in key and not key.startswith("glue_"):
            ax.set_ylim(0, 1)  # accuracies; GLUE scores are points (0-100)
    fig.suptitle(f"{table.paper}: {table.title} ({result['budget']} per row)", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
