"""An ablation table's numbers as records of the results store (`bertforge ablate --records DIR`).

The docs publish ablation tables from records, never from a pasted TABLE.md, so the process that ran the table
writes them: one record per cell (row x column of TABLE.md), plus each row's pre-training steps (under a CPU or
wall-clock budget the rows' step counts differ, and a reader needs them), and the table spec
`results-ablate-TABLE` that `tools/gen_results.py` renders into RESULTS.md.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from bertforge.ablation.tables import COLUMNS, Table, slug
from bertforge.results_store import Record, this_machine, today, write_records

GROUP = "results-ablations"


def _digits(fmt: str) -> int:
    return int(fmt.split(".")[1][0]) if "." in fmt else 0


def _seed_spread(glue_dir: Path) -> tuple[float, float] | None:
    """The lowest and highest GLUE average over fine-tuning seeds (the i-th run of every task), when a row's suite
    ran more than one seed; None otherwise."""
    from bertforge.evaluation.glue_result import GlueResult
    from bertforge.evaluation.scores import seed_averages
    path = glue_dir / GlueResult.FILE
    if not path.exists():
        return None
    suite = GlueResult.from_json(path)
    averages = seed_averages({t: e.runs for t, e in suite.tasks.items() if e.in_average and e.runs})
    return (min(averages), max(averages)) if len(averages) > 1 else None


def _steps(row_dir: Path) -> int | None:
    from bertforge.training.summary import TrainingSummary
    path = row_dir / TrainingSummary.FILE
    return TrainingSummary.from_json(path).step if path.exists() else None


def table_records(table: Table, result: dict[str, Any], folder: Path, command: str,
                  group: str = GROUP) -> tuple[list[Record], dict[str, Any]]:
    """The records of `result` (an ablate results.json whose rows live in `folder`) and the table spec that shows
    them; `command` is the command that ran the table."""
    settings, rows = result["settings"], result["rows"]
    cpu, threads = this_machine()
    if os.environ.get("OMP_NUM_THREADS"):
        command = f"OMP_NUM_THREADS={threads} {command}"
    seeds = int(settings.get("finetune_seeds") or 1)
    protocol = settings.get("glue_protocol")
    model = settings.get("model") or table.model
    data = (f"{result['budget']} of pre-training per row on the corpus {settings['data']} (batch "
            f"{settings['batch_size']}, the `{result['recipe']}` recipe, peak lr {result['lr']:g}); held-out probes on "
            "its held-out documents" + (f"; GLUE dev of {settings['glue']}" if settings.get("glue") else ""))
    # a sentence-task probe is news only in a table where some row trains that task (elsewhere it is chance)
    trained = " ".join(str(v.options.get("objective", "mlm+nsp")) for v in table.variants)
    untrained = {f"{task}_acc" for task in ("nsp", "sop") if task not in trained}
    columns = [(key, label, fmt) for key, label, fmt in COLUMNS
               if key not in untrained and any(key in r for r in rows)]
    base = f"{group}/ablate-{table.name}"
    records: list[Record] = []
    spec_rows = []

    def add(row: str, name: str, value: float, what: str, digits: int, **extra: Any) -> str:
        rid = f"{base}/{slug(row)}/{name}"
        records.append(Record(id=rid, value=value, unit="", what=what, command=command, cpu=cpu, threads=threads,
                              date=today(), data=data, digits=digits, **{"seeds": 1, **extra}))
        return "{" + rid + ("|full}" if extra.get("spread") else "}")

    for row in rows:
        where = f"{table.paper} at {model}, {result['budget']} per row: {row['name']}"
        cells = [row["name"]]
        steps = _steps(folder / slug(row["name"]))
        cells.append("—" if steps is None else
                     add(row["name"], "steps", steps, f"{where}, pre-training steps", 0).replace("}", "|bare}"))
        for key, label, fmt in columns:
            if key not in row:
                cells.append("—")
                continue
            glue = key.startswith("glue_")
            extra: dict[str, Any] = {}
            if glue:
                extra["seeds"] = seeds
                if key == "glue_average":
                    spread = _seed_spread(folder / slug(row["name"]) / "glue")
                    if spread:
                        extra["spread"] = spread
            how = f" (--protocol {protocol}, median of {seeds} fine-tuning seeds)" if glue and protocol else ""
            cells.append(add(row["name"], slug(label), float(row[key]), f"{where}, {label}{how}", _digits(fmt),
                             **extra))
        spec_rows.append(cells)
    header = ["row", "pre-training steps", *[label + (" (median, seed range)" if key == "glue_average" else "")
                                             for key, label, _ in columns]]
    spec = {"header": header, "align": ["---"] + ["---:"] * (len(header) - 1), "rows": spec_rows}
    return records, {f"results-ablate-{table.name}": spec}


def write_table_records(table: Table, result: dict[str, Any], folder: Path, command: str, store: str | Path,
                        group: str = GROUP) -> Path:
    """Write `table_records` into the results store `store`; returns the store file's path."""
    records, tables = table_records(table, result, folder, command, group)
    return write_records(group, records, store, tables=tables)
