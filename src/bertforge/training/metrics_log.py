"""Training metrics: appended to `metrics.jsonl` as they come, drawn into `curves.png` on request.

Each record is one JSON line `{"step": N, "split": "train"|"eval", "time": seconds, ...values}`; the file
is appended line by line so a killed run keeps everything it logged. On resume, records past the resumed
step are dropped so the curves never show the same step twice.
"""
from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any


METRICS_LOG = "metrics.jsonl"
CURVES = "curves.png"
FEW_POINTS = 50  # a train series of at most this many logged steps is drawn with its points marked


def last_logged_step(path: str | Path) -> int | None:
    """The step of the last whole record of a metrics.jsonl (read from its tail: a running run's file grows),
    or None when the file is missing or holds no whole record there."""
    try:
        with open(path, "rb") as handle:
            handle.seek(0, 2)
            handle.seek(max(0, handle.tell() - 4096))
            tail = handle.read().decode("utf-8", errors="replace").splitlines()
    except OSError:
        return None
    for line in reversed(tail):
        try:
            return int(json.loads(line)["step"])
        except (ValueError, KeyError, TypeError):
            continue  # a cut first or last line
    return None


def read_metrics_log(folder: str | Path) -> list[dict[str, Any]]:
    """The records of the metrics.jsonl in run folder `folder`, in order ([] when it has none); a line cut by a
    kill is left out."""
    try:
        lines = (Path(folder) / METRICS_LOG).read_text(encoding="utf-8").splitlines()
    except OSError:
        return []
    records = []
    for line in lines:
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return records


class MetricsLog:
    def __init__(self, path: str | Path, png_path: str | Path | None = None, resume_step: int | None = None) -> None:
        self.path = Path(path)
        self.png_path = Path(png_path) if png_path else self.path.with_name(CURVES)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.records: list[dict[str, Any]] = []
        if self.path.exists():
            for line in self.path.read_text(encoding="utf-8").splitlines():
                try:
                    record = json.loads(line)
                except json.JSONDecodeError:
                    continue  # a line cut by a kill
                if resume_step is None or record.get("step", 0) <= resume_step:
                    self.records.append(record)
            self.path.write_text("".join(json.dumps(r) + "\n" for r in self.records), encoding="utf-8")
        self._start = time.time()

    def log(self, step: int, split: str = "train", **values: Any) -> dict[str, Any]:
        record = {"step": int(step), "split": split, "time": round(time.time() - self._start, 3)}
        record.update({k: (float(v) if hasattr(v, "__float__") and not isinstance(v, (int, str)) else v)
                       for k, v in values.items()})
        self.records.append(record)
        with open(self.path, "a", encoding="utf-8") as handle:
            handle.write(json.dumps(record) + "\n")
        return record

    def series(self, key: str, split: str | None = None) -> tuple[list[int], list[float]]:
        steps, values = [], []
        for r in self.records:
            if key in r and (split is None or r["split"] == split) and isinstance(r[key], (int, float)):
                steps.append(r["step"])
                values.append(r[key])
        return steps, values

    def plot(self, keys: list[str] | None = None, title: str = "") -> Path | None:
        """One panel per metric, train and eval overlaid. Returns the PNG path (None without matplotlib)."""
        try:
            import matplotlib
            matplotlib.use("Agg")
            import matplotlib.pyplot as plt
        except ImportError:
            return None
        if keys is None:
            seen: list[str] = []
            for r in self.records:
                for k, v in r.items():
                    if k not in ("step", "split", "time") and isinstance(v, (int, float)) and k not in seen:
                        seen.append(k)
            keys = seen
        if not keys:
            return None
        cols = min(3, len(keys))
        rows = (len(keys) + cols - 1) // cols
        fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, 3.0 * rows), squeeze=False)
        for ax, key in zip(axes.flat, keys):
            for split in ("train", "eval"):
                steps, values = self.series(key, split)
                if steps:  # points marked where they are few: a line through one or two points is not seen
                    marker = "o" if split == "eval" or len(steps) <= FEW_POINTS else None
                    ax.plot(steps, values, "-", marker=marker, label=split, markersize=3)
            ax.set_title(key)
            ax.set_xlabel("step")
            ax.grid(alpha=0.3)
            ax.legend(fontsize=7)
        for ax in list(axes.flat)[len(keys):]:
            ax.axis("off")
        if title:
            fig.suptitle(title)
        fig.tight_layout()
        tmp = self.png_path.with_name(self.png_path.name + ".tmp.png")
        fig.savefig(tmp, dpi=90)
        plt.close(fig)
        tmp.replace(self.png_path)
        return self.png_path
