"""glue.json -> the table users paste (glue.md) and a bar chart (glue.png); several glue.json side by side.

Reads only the glue.json format (see `bertforge.evaluation.glue`), so results written by other tools in that
format (an experiment running transformers' Trainer, say) are drawn and compared the same way.
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Sequence

from bertforge.atomic import atomic_path, atomic_write_text
from bertforge.evaluation.glue_result import FORMAT as FORMAT  # noqa: F401  (glue.json's format, re-exported)
from bertforge.evaluation.glue_result import GLUE_JSON, GlueResult, GlueTaskResult
from bertforge.evaluation.scores import DISPLAY, GLUE_TASKS, METRICS
from bertforge.tasks.glue_tasks import GLUE

Result = GlueResult | dict[str, Any]  # a dict in glue.json's format is read through GlueResult


# ---- reading ---------------------------------------------------------------------------------------------------
def load_result(path: str | Path) -> GlueResult:
    """A glue.json, checked enough that drawing it cannot fail halfway (errors name the file and the key)."""
    return GlueResult.from_json(path)


def label(result: Result) -> str:
    return GlueResult.coerce(result).label


# ---- numbers as GLUE shows them ---------------------------------------------------------------------------------
def _num(value: float | None) -> str:
    return "—" if value is None or not math.isfinite(value) else f"{value:.1f}"


def cell(task: str, entry: GlueTaskResult | dict[str, Any] | None) -> str:
    """A task's cell as the GLUE leaderboard writes it: MRPC/QQP F1/accuracy, STS-B Pearson/Spearman, MNLI m/mm
    (`entry`: the task's entry, or its majority-class floor {"score", "metrics"})."""
    if entry is None:
        return "—"
    metrics = entry.metrics if isinstance(entry, GlueTaskResult) else entry.get("metrics") or {}
    return "/".join(_num(metrics.get(name)) for name in METRICS[task])


def header_cell(task: str) -> str:
    return GLUE[task].heading


def _columns(results: Sequence[GlueResult]) -> list[str]:
    return [t for t in GLUE_TASKS if any(t in r.tasks for r in results)]


def summary_table(results: Sequence[Result]) -> list[str]:
    """One row per result, one column per task (GLUE's order) and the average: the table people paste."""
    results = [GlueResult.coerce(r) for r in results]
    columns = _columns(results)
    lines = ["| model | " + " | ".join(header_cell(t) for t in columns) + " | average |",
             "|---|" + "---:|" * (len(columns) + 1)]
    for r in results:
        cells = [cell(t, r.tasks.get(t)) + ("*" if t in r.tasks and not r.tasks[t].in_average else "")
                 for t in columns]
        lines.append(f"| {r.label} | " + " | ".join(cells) + f" | {_num(r.average)} |")
    return lines


def floor_row(result: Result) -> str | None:
    """The majority-class row (train's most frequent label answered for every dev example), when known."""
    result = GlueResult.coerce(result)
    entries = {t: result.tasks[t].majority for t in _columns([result])}
    if not any(entries.values()):
        return None
    cells = [cell(t, e) if e else "—" for t, e in entries.items()]
    return "| majority class | " + " | ".join(cells) + f" | {_num(result.majority_average)} |"


# ---- glue.md -----------------------------------------------------------------------------------------------------
def markdown(result: Result) -> str:
    result = GlueResult.coerce(result)
    p = result.protocol
    lines = [f"## GLUE dev: {result.label}", ""]
    lines.append(f"Protocol `{p.get('name', '?')}`: {p.get('description', '')}"
                 + (f"; changed for this run: {p['changed']}" if p.get("changed") else "") + ".")
    if p.get("max_eval_samples"):
        lines.append(f"**Smoke run**: only the first {p['max_eval_samples']} dev examples of each task are scored; "
                     "these are not GLUE dev numbers.")
    lines.append("")
    lines += summary_table([result])
    floor = floor_row(result)
    if floor:
        lines.append(floor)
    lines.append("")
    lines += _notes(result, floor is not None)
    lines += ["", "### Per task", "", "| task | score | metrics | runs | lr | seeds: min–max (stdev) | train examples "
              "| train minutes |", "|---|---:|---|---:|---:|---|---:|---:|"]
    for task in _columns([result]):
        lines.append(_task_row(task, result.tasks[task]))
    model = result.model
    lines += ["", f"Model: `{model.get('path')}` ({model.get('model_type', '?')}, {model.get('fingerprint', '?')[:19]}…)."]
    if result.command:
        lines += ["", "Produced by:", "", "```bash", result.command, "```"]
    return "\n".join(lines) + "\n"


def _notes(result: GlueResult, floor: bool) -> list[str]:
    over = result.average_over
    notes = [f"Average: the mean task score (MRPC, QQP, STS-B and MNLI: the mean of their two metrics) over "
             f"{len(over)} of 8 tasks ({', '.join(DISPLAY[t] for t in over) or 'none'}); WNLI is never in it."]
    if floor:
        notes.append("Majority class: the train set's most frequent label answered for every dev example (STS-B: a "
                     "constant score has no correlation, counted as 0).")
    wnli = result.tasks.get("wnli")
    if wnli is not None:
        how = "the majority class of its train set" if wnli.method == "majority" else "fine-tuned"
        notes.append(f"*WNLI {_num(wnli.score)}: {how}, as BERT reports it, outside the average.")
    for task, reason in result.skipped.items():
        notes.append(f"Skipped {DISPLAY.get(task, task)}: {reason}.")
    for task, reason in result.failed.items():
        notes.append(f"**Failed** {DISPLAY.get(task, task)}: {reason}.")
    return [f"- {n}" for n in notes]


def _task_row(task: str, entry: GlueTaskResult) -> str:
    metrics = ", ".join(f"{name} {_num(entry.metrics.get(name))}" for name in METRICS[task])
    runs = entry.runs
    selected, spread = entry.selected or {}, entry.spread or {}
    lr = f"{selected['lr']:g}" if "lr" in selected else "—"
    seeds = (f"{_num(spread['min'])}–{_num(spread['max'])} ({spread['stdev']:.2f})" if spread.get("n", 0) > 1
             else "—")
    minutes = sum(r.get("seconds", 0.0) for r in runs) / 60
    method = "" if entry.method == "finetune" else " (majority class)"
    train = "—" if entry.train_examples is None else entry.train_examples
    return (f"| {DISPLAY[task]}{method} | {_num(entry.score)} | {metrics} | {len(runs)} | {lr} | {seeds} | "
            f"{train} | {minutes:.1f} |")


def compare_markdown(results: Sequence[Result]) -> str:
    results = [GlueResult.coerce(r) for r in results]
    names = {r.label: r.protocol.get("name") for r in results}
    lines = ["## GLUE dev, side by side", ""] + summary_table(results) + [""]
    lines.append("Protocols: " + ", ".join(f"{n}: `{p}`" for n, p in names.items()) + ". Averages over: "
                 + "; ".join(f"{r.label}: {', '.join(DISPLAY[t] for t in r.average_over)}" for r in results) + ".")
    if len(results) > 1:
        lines += ["", *difference_table(results)]
    return "\n".join(lines) + "\n"


def difference_table(results: Sequence[Result]) -> list[str]:
    """Each result minus the first, per task and for the average, with the 95 % bootstrap interval over seeds
    (`bertforge.evaluation.difference`): a difference whose interval holds 0 is within the seeds' noise."""
    from bertforge.evaluation.difference import difference
    results = [GlueResult.coerce(r) for r in results]
    base = results[0]
    diffs = [difference(base, r) for r in results[1:]]
    columns = [t for t in GLUE_TASKS if any(t in d for d in diffs)]
    lines = [f"Difference from {label(base)} (95 % bootstrap interval over the seeds; an interval holding 0 is "
             "within their noise):", "",
             "| model | " + " | ".join(DISPLAY[t] for t in columns) + " | average |",
             "|---|" + "---:|" * (len(columns) + 1)]
    notes = []
    for r, d in zip(results[1:], diffs):
        cells = [str(d[t]) if t in d else "—" for t in columns + ["average"]]
        lines.append(f"| {label(r)} | " + " | ".join(cells) + " |")
        why = next((x.why for x in d.values() if x.why), "")
        if why:
            notes.append(f"{label(r)}: no interval ({why}).")
    return lines + ([""] + notes if notes else [])


# ---- pictures ----------------------------------------------------------------------------------------------------
def _save(fig, path: Path) -> None:
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", dpi=110)


def bar_chart(results: Sequence[Result], path: str | Path, title: str) -> Path:
    """Grouped bars: each task's score (and the average) per result; whiskers span the seeds' min–max; a black
    tick marks the majority-class floor of a single result; WNLI is hatched (outside the average)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    results = [GlueResult.coerce(r) for r in results]
    columns = _columns(results)
    names = [DISPLAY[t] for t in columns] + ["average"]
    width = 0.8 / len(results)
    fig, ax = plt.subplots(figsize=(max(6.0, 1.0 + 0.9 * len(names) * max(1, len(results) / 2)), 4.2))
    for i, r in enumerate(results):
        xs = [j + (i - (len(results) - 1) / 2) * width for j in range(len(names))]
        entries = [r.tasks.get(t) for t in columns]
        values = [_value(e.score) if e else math.nan for e in entries] + [_value(r.average)]
        spreads = [(e.spread if e else None) or {} for e in entries] + [{}]
        whiskers = None
        if any(s.get("n", 0) > 1 for s in spreads):
            whiskers = [[v - _value(s.get("min", v)) for s, v in zip(spreads, values)],
                        [_value(s.get("max", v)) - v for s, v in zip(spreads, values)]]
        bars = ax.bar(xs, values, width, label=label(r), color=f"C{i}", yerr=whiskers, capsize=2,
                      error_kw={"elinewidth": 0.8})
        for bar, task in zip(bars, columns):
            if task == "wnli":
                bar.set_hatch("//")
        for x, v in zip(xs, values):
            if math.isfinite(v):
                ax.text(x, max(v, 0.0) + 0.8, f"{v:.1f}", ha="center", va="bottom", fontsize=7)
        if len(results) == 1:
            floors = [_value((r.tasks[t].majority or {}).get("score")) for t in columns]
            floors.append(_value(r.majority_average))
            ax.scatter(xs, floors, marker="_", s=500, linewidths=2, color="black", zorder=3,
                       label="majority class")
    ax.set_xticks(range(len(names)), names)
    ax.set_ylabel("dev score (points)")
    ax.set_ylim(min(0.0, ax.get_ylim()[0]), 100)
    ax.set_title(title, fontsize=10)
    ax.axhline(0, color="grey", linewidth=0.6)
    ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.09), ncol=min(4, len(results) + 1),
              frameon=False)
    fig.tight_layout()
    path = Path(path)
    _save(fig, path)
    plt.close(fig)
    return path


def _value(v: Any) -> float:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else math.nan


def write_report(result: Result, folder: str | Path) -> list[Path]:
    """glue.json, glue.md and glue.png into `folder` (each written atomically); returns their paths."""
    result = GlueResult.coerce(result)
    folder = Path(folder)
    json_path, md_path, png_path = folder / GLUE_JSON, folder / "glue.md", folder / "glue.png"
    result.to_json(json_path)
    atomic_write_text(md_path, markdown(result))
    bar_chart([result], png_path, f"GLUE dev: {result.label} (protocol {result.protocol.get('name')}, "
                                  f"average over {len(result.average_over)} tasks)")
    return [json_path, md_path, png_path]


def compare(paths: Sequence[str | Path], png: str | Path) -> tuple[Path, Path, list[GlueResult]]:
    """Several glue.json side by side: a grouped bar chart at `png` and its table beside it (same name, .md)."""
    results = [load_result(p) for p in paths]
    png = Path(png)
    md = png.with_suffix(".md")
    bar_chart(results, png, "GLUE dev, side by side")
    atomic_write_text(md, compare_markdown(results))
    return png, md, results
