"""A GLUE suite's scores as records of the results store (`bertforge glue --records DIR`).

The docs publish GLUE tables from records, so the suite that measured the scores writes them: one record per
task and official metric for the model and for the majority-class floor beside it, both averages, and the
table spec of the same name that `tools/gen_results.py` renders (the `glue.md` table, model row over floor row).
The group is `glue-<output folder>`, so two suites written to one store do not replace each other's records.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from bertforge.evaluation.glue_result import GlueResult
from bertforge.evaluation.scores import DISPLAY, GLUE_TASKS, METRICS
from bertforge.tasks.glue_tasks import GLUE
from bertforge.results_store import Record, this_machine, today, write_records

__all__ = ["glue_group", "glue_records", "write_glue_records"]

def glue_group(output: str | Path) -> str:
    """The records group of a suite written to `output`: glue-<folder name, lower case>."""
    return "glue-" + (re.sub(r"[^a-z0-9]+", "-", Path(output).resolve().name.lower()).strip("-") or "suite")


def glue_records(result: GlueResult, group: str, data: str, command: str) -> tuple[list[Record], dict[str, Any]]:
    """The records of `result` under `group` and its table spec; `data` names the GLUE folder it read, `command`
    the command that ran the suite."""
    cpu, threads = this_machine()
    protocol = result.protocol.get("name", "?")
    limit = result.protocol.get("max_train_samples")
    described = f"GLUE dev sets of {data}" + (f" (at most {limit:,} training examples per task)" if limit else "")
    records: list[Record] = []

    def add(row: str, name: str, value: float, what: str, **extra: Any) -> str:
        rid = f"{group}/{row}/{name}"
        records.append(Record(id=rid, value=float(value), unit="", what=what, command=command, cpu=cpu,
                              threads=threads, date=today(), data=described, digits=1, **{"seeds": 1, **extra}))
        return "{" + rid + "}"

    tasks = [t for t in GLUE_TASKS if t in result.tasks]
    model_row, floor_row = [result.label], ["majority class"]
    for task in tasks:
        entry = result.tasks[task]
        seeds = len((entry.selected or {}).get("seeds") or []) or 1
        how = ("its majority class, not fine-tuned" if entry.method == "majority"
               else f"median of {seeds} fine-tuning seed{'s' if seeds > 1 else ''}" if seeds > 1 else "one seed")
        cells, floor = [], []
        for metric in METRICS[task]:
            value = entry.metrics.get(metric)
            cells.append("—" if value is None else add(
                "model", f"{task}-{metric}", value,
                f"{result.label} under protocol {protocol}: {DISPLAY[task]} dev {metric} ({how})",
                seeds=seeds if entry.method != "majority" else 1))
            low = (entry.majority or {}).get("metrics", {}).get(metric)
            floor.append("—" if low is None else add(
                "majority", f"{task}-{metric}", low, f"the majority-class floor on {DISPLAY[task]} dev ({metric})",
                note="the train set's most frequent label answered for every dev example"))
        model_row.append("/".join(cells) + ("" if entry.in_average else "*"))
        floor_row.append("/".join(floor))
    over = ", ".join(DISPLAY[t] for t in result.average_over)
    model_row.append("—" if result.average is None else add(
        "model", "average", result.average, f"{result.label} under protocol {protocol}: GLUE average over {over}"))
    floor_row.append("—" if result.majority_average is None else add(
        "majority", "average", result.majority_average, f"the majority-class floor's GLUE average over {over}"))
    header = ["model", *[GLUE[t].heading for t in tasks], "average"]
    spec = {"header": header, "align": ["---"] + ["---:"] * (len(header) - 1), "rows": [model_row, floor_row]}
    return records, {group: spec}


def write_glue_records(result: GlueResult, output: str | Path, data: str, command: str, store: str | Path) -> Path:
    """Write the suite's records (group `glue_group(output)`) into the results store `store`; returns its file."""
    group = glue_group(output)
    records, tables = glue_records(result, group, data, command)
    return write_records(group, records, store, tables=tables, replace=f"{group}/")
