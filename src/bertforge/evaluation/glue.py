"""`run_glue`: fine-tune and score one checkpoint on every GLUE task whose files exist, under a named protocol.

Each task x seed x learning rate is a unit with its own folder (`units.py`), run in parallel worker processes
(`scheduler.py`); re-running the same command skips finished units and resumes an interrupted one from its
checkpoint. An OUTPUT that holds a suite with another protocol, model, data, device or precision is refused,
naming what changed (`--seeds` may change: more seeds add units). The result is `glue.json`, plus `glue.md`
and `glue.png` drawn from it (`report.py`).

glue.json (format "bertforge-glue/1"; every score and metric in points, i.e. percent, as GLUE reports them;
other tools may write it too — a script fine-tuning with transformers' Trainer, say — and `bertforge glue
--compare` draws any of them side by side; keep it stable):

    {
      "format": "bertforge-glue/1",
      "name": str,                          # the label in tables and plots
      "model": {"path": str, "model_type": str, "fingerprint": "sha256:<hex>"},   # see model_fingerprint
      "protocol": {...},                    # Protocol fields (protocols.py), "changed": overrides of the preset
      "tasks": {
        "<task>": {                         # cola sst2 mrpc stsb qqp mnli qnli rte wnli
          "score": float,                   # the task score: the mean of its metrics
          "metrics": {"<metric>": float|null},   # cola: mcc; mrpc, qqp: f1, accuracy; stsb: pearson, spearman;
                                            # mnli: accuracy_matched, accuracy_mismatched; the rest: accuracy
          "method": "finetune" | "majority",
          "in_average": bool,
          "selected": {"lr": float, "seeds": [int]} | null,    # the runs the score comes from
          "spread": {"n", "min", "max", "stdev"} | null,       # task scores over the selected lr's seeds
          "majority": {"score": float, "metrics": {...}},      # the majority-class floor on the same dev set
          "train_examples": int, "dev_examples": {"dev": int, ["dev_mismatched": int]},
          "runs": [{"task", "seed", "lr", "score", "metrics", "steps", "seconds", "train_examples",
                    "eval_examples"}]
        }
      },
      "average": float | null,              # mean task score over "average_over"
      "average_over": [task, ...],          # the tasks present of the eight besides WNLI
      "majority_average": float | null,     # the same average for the majority-class floor
      "skipped": {"<task>": "reason"},      # tasks whose files are missing
      "failed": {"<task>": "reason"},       # tasks with a unit that failed (only when some did)
      "command": str | null, "seconds": float, "created": "ISO 8601", "software": {"bertforge", "torch"}
    }

Other writers build it from their runs with `task_entry` and `assemble` (a run's "score" is
`scores.task_score` of its metrics) and write it with `report.write_report`.
"""
from __future__ import annotations

import contextlib
import datetime
import hashlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

from bertforge.checkpoint import SAFE_INDEX, SAFE_WEIGHTS
from bertforge.config import CONFIG_NAME, has_config
from bertforge.evaluation.protocols import Protocol, changed_settings, recorded_default
from bertforge.evaluation.glue_result import FORMAT, GLUE_JSON, GlueResult
from bertforge.evaluation.report import write_report
from bertforge.evaluation.scheduler import WORKERS_LOCK, Failure, run_units, workers_running
from bertforge.evaluation.scores import (AVERAGED, GLUE_TASKS, glue_average, majority_baseline, summarize_runs,
                                         task_score)
from bertforge.evaluation.settings import GlueSettings
from bertforge.evaluation.units import Unit, UnitContext, planned_steps, read_result, unit_folder
from bertforge.folder_files import WEIGHTS_MAX_BYTES, check_folder_file
from bertforge.settings import SettingError, check_settings
from bertforge.tokenization.auto import TOKENIZER_FOLDER_FILES

VERB = "glue"


class GlueError(SettingError, RuntimeError):
    """A suite that cannot run as asked; the message names the setting to change."""


@dataclass
class TaskPlan:
    """What the parent process knows about a task before fine-tuning it: its data, its size, its floor."""

    task: str
    method: str                 # "finetune" or "majority"
    train_examples: int         # after the protocol's cap
    example_length: float       # mean characters of a train example, cut where max_seq_length would cut
    dev_examples: dict[str, int]
    majority: dict[str, Any]
    fingerprint: str
    units: list[Unit] = field(default_factory=list)


# ---- fingerprints ------------------------------------------------------------------------------------------------


def _hash_files(paths: Sequence[Path], base: Path | None = None) -> str:
    digest = hashlib.sha256()
    for path in paths:
        digest.update(str(path.relative_to(base) if base else path.name).encode() + b"\0")
        with open(path, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
        digest.update(b"\0")
    return "sha256:" + digest.hexdigest()


def _shards(index: Path) -> list[str]:
    """The shard files a weights index names, or one line saying what is wrong with the index."""
    try:
        data = json.loads(index.read_text(encoding="utf-8"))
    except (ValueError, RecursionError) as err:
        raise ValueError(f"{index}: not valid JSON ({err})") from None
    weight_map = data.get("weight_map") if isinstance(data, dict) else None
    if not isinstance(weight_map, dict) or not all(isinstance(v, str) for v in weight_map.values()):
        got = type(data).__name__ if not isinstance(data, dict) else type(weight_map).__name__ if weight_map is not \
            None else "nothing"
        raise ValueError(f"{index}: field 'weight_map' must be an object mapping tensor names to shard file names, "
                         f"got {got}")
    return sorted(set(weight_map.values()))


def model_fingerprint(folder: str | Path) -> str:
    """sha256 over the files that decide a checkpoint's GLUE numbers: config.json, the weights (single or
    sharded safetensors, else PyTorch) and the tokenizer files present, by name and content."""
    folder = Path(folder)
    if not has_config(folder):
        raise FileNotFoundError(f"{folder}: not a model folder (no config.json)")
    weights: list[Path] = []
    for single, index in ((SAFE_WEIGHTS, SAFE_INDEX),
                          ("pytorch_model.bin", "pytorch_model.bin.index.json")):
        if (folder / single).is_file():
            weights = [folder / single]
        elif (folder / index).is_file():
            weights = [folder / index] + [folder / s for s in _shards(folder / index)]
        if weights:
            break
    if not weights:
        raise FileNotFoundError(f"{folder}: no weights file (model.safetensors or pytorch_model.bin)")
    tokenizer = [folder / n for n in TOKENIZER_FOLDER_FILES if (folder / n).is_file()]
    files = [folder / CONFIG_NAME, *weights, *tokenizer]
    for path in files:  # hashed only as files of the folder: no link out of it, FIFO or device
        check_folder_file(folder, str(path.relative_to(folder)), WEIGHTS_MAX_BYTES)
    return _hash_files(files, folder)


# ---- planning ----------------------------------------------------------------------------------------------------
def _missing(spec, data: Path) -> str | None:
    """Why a task cannot run from `data`, or None."""
    folder = Path(spec.folder).name
    if not ((data / folder).is_dir() or (data / spec.folder).is_dir()):
        return f"no {folder}/ folder in {data}"
    for split in ("train", "dev"):
        try:
            spec.files(data, split)
        except FileNotFoundError:
            names = {"train": spec.train_files, "dev": spec.dev_files}[split]
            return f"{folder}/ has no {split} file ({', '.join(names)})"
    return None


def plan_tasks(settings: GlueSettings, protocol: Protocol) -> tuple[list[TaskPlan], dict[str, str]]:
    """The tasks to run (in GLUE's order) with their data read and checked, and the skipped ones with a reason."""
    from bertforge.tasks.registry import get_task
    data = Path(settings.data)
    if not data.is_dir():
        raise FileNotFoundError(f"{data}: no such GLUE data folder (expected glue_data/<TASK>/train.tsv, dev.tsv)")
    asked = list(GLUE_TASKS) if settings.tasks is None else [_task_name(t) for t in settings.tasks]
    plans, skipped = [], {}
    for task in [t for t in GLUE_TASKS if t in asked]:
        spec = get_task(task)
        reason = _missing(spec, data)
        if reason is not None:
            if settings.tasks is not None:
                raise FileNotFoundError(f"task {task}: {reason}")
            skipped[task] = reason
            continue
        plans.append(_plan_task(task, spec, data, protocol))
    if not plans:
        raise FileNotFoundError(f"{data}: none of the GLUE tasks has its files there ("
                                + "; ".join(f"{t}: {r}" for t, r in skipped.items()) + ")")
    return plans, skipped


def _task_name(name: str) -> str:
    key = name.lower().replace("-", "").replace("_", "")
    if key not in GLUE_TASKS:
        raise ValueError(f"unknown GLUE task {name!r}; the tasks are {', '.join(GLUE_TASKS)}")
    return key


def _plan_task(task: str, spec, data: Path, protocol: Protocol) -> TaskPlan:
    train = spec.read(data, "train")[0]
    devs = spec.read(data, "dev")
    cap = protocol.max_eval_samples
    dev_labels = [[ex.label for ex in r.examples][:cap] for r in devs]
    dev_names = ["dev", "dev_mismatched"][:len(devs)]
    majority = majority_baseline(task, [ex.label for ex in train.examples],
                                 (dev_labels[0], dev_labels[1]) if task == "mnli" else dev_labels[0])
    method = "majority" if task == "wnli" and protocol.wnli == "majority" else "finetune"
    n_train = len(train.examples)
    if protocol.max_train_samples is not None and method == "finetune":  # the majority class counts every label
        n_train = min(n_train, protocol.max_train_samples)
    files = spec.files(data, "train") + spec.files(data, "dev")
    cut = 6 * protocol.max_seq_length  # about six characters a WordPiece token in English
    length = sum(min(cut, len(ex.text) + len(ex.text_pair or "")) for ex in train.examples) / max(1, len(train.examples))
    return TaskPlan(task, method, n_train, length, dict(zip(dev_names, map(len, dev_labels))),
                    {"score": task_score(task, majority), "metrics": majority}, _hash_files(files))


def plan_units(plans: Sequence[TaskPlan], protocol: Protocol, output: Path, first_seed: int) -> list[Unit]:
    units = []
    for plan in plans:
        if plan.method != "finetune":
            continue
        steps = planned_steps(plan.train_examples, protocol)
        plan.units = [Unit(plan.task, seed, float(lr), str(unit_folder(output, plan.task, seed, lr)),
                           plan.train_examples, steps, plan.example_length)
                      for seed in range(first_seed, first_seed + protocol.seeds) for lr in protocol.learning_rates]
        units += plan.units
    return units


# ---- the output folder -------------------------------------------------------------------------------------------
def claim_suite_output(settings: GlueSettings, record: dict[str, Any]) -> Path:
    """Claim OUTPUT for this suite: new, empty, or a suite with the same settings (then continued); anything that
    would change a finished unit's numbers is refused, naming it. The record keeps the data of every task run."""
    from bertforge.outputs import claim_output, read_run_config, write_run_config
    if settings.overwrite:  # --overwrite empties OUTPUT: never under a suite, or workers, still writing into it
        _refuse_if_in_use(Path(settings.output))
    # the checkpoint and the data are inputs: --overwrite must never empty a folder that is, holds or lies in one
    out = claim_output(settings.output, verb=VERB, overwrite=settings.overwrite, resumable=True,
                       inputs=(settings.model, settings.data))
    earlier = read_run_config(out)
    if earlier is not None:
        changed = _changes(earlier, record)
        if changed:
            raise SettingError("{out} holds a GLUE suite with other settings ({changed}); re-run with the same "
                               "settings, use {overwrite} to start again, or choose another {output}",
                               owner=GlueSettings, out=out, changed="; ".join(changed))
        record = {**record, "data": {**earlier.get("data", {}), **record["data"]}}
    write_run_config(out, VERB, record)
    return out


def _changes(earlier: dict[str, Any], now: dict[str, Any]) -> list[str]:
    changed = []
    was_protocol, protocol = earlier.get("protocol", {}), now["protocol"]
    for key in protocol:
        was = was_protocol.get(key, recorded_default(key))
        if key not in ("seeds", "description", "source") and was != protocol[key]:
            changed.append(f"protocol {key}: {was!r} there, {protocol[key]!r} now")
    for key in ("model", "device", "precision", "seed"):
        if earlier.get(key) != now[key]:
            changed.append(f"{key}: {earlier.get(key)!r} there, {now[key]!r} now")
    for task, fingerprint in now["data"].items():
        was = earlier.get("data", {}).get(task)
        if was is not None and was != fingerprint:
            changed.append(f"{task} data files: other contents than there")
    return changed


def _refuse_if_in_use(out: Path) -> None:
    """Refuse, in one line, an OUTPUT that a running suite holds (its `.glue.lock`) or that workers of an earlier
    one still write into; files that are not there are not created (the folder may be anything)."""
    lock, workers = out / ".glue.lock", out / WORKERS_LOCK
    if lock.is_file():
        try:
            import fcntl
        except ImportError:  # not POSIX: no lock to ask
            return
        with open(lock, encoding="utf-8") as handle:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                holder = handle.read().strip() or "another process"
                raise GlueError("{out} is in use by another bertforge glue ({holder}); {overwrite} would empty it "
                                "under that run: wait for it to end, or choose another {output}", out=out,
                                holder=holder) from None
            fcntl.flock(handle, fcntl.LOCK_UN)
    if workers.is_file() and workers_running(workers):
        raise GlueError("{out} still has fine-tuning processes of an earlier bertforge glue writing into it; wait "
                        "for them to end before {overwrite}, or choose another {output}", out=out)


@contextlib.contextmanager
def suite_lock(out: Path) -> Iterator[None]:
    """Hold OUTPUT for this process: a second suite started on the same folder stops at once instead of running
    the same units beside the first one, and so does one started while workers of an earlier suite are still
    alive (its process killed a moment ago: they end within a second, `lifeline`)."""
    try:
        import fcntl
    except ImportError:  # not POSIX: no lock
        yield
        return
    with open(out / ".glue.lock", "a+", encoding="utf-8") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            handle.seek(0)
            holder = handle.read().strip() or "another process"
            raise GlueError("{out} is in use by another bertforge glue ({holder}); wait for it to end, or choose "
                            "another {output}", out=out, holder=holder) from None
        if workers_running(out / WORKERS_LOCK):
            raise GlueError("{out} still has fine-tuning processes of an earlier bertforge glue writing into it; "
                            "wait for them to end, or choose another {output}", out=out)
        handle.seek(0)
        handle.truncate()
        handle.write(f"pid {os.getpid()}\n")
        handle.flush()
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


# ---- the suite ---------------------------------------------------------------------------------------------------
def run_glue(settings: GlueSettings, say: Callable[[str], None] | None = None, hooks: Any = None) -> GlueResult:
    """Run (or continue) the suite and write glue.json, glue.md and glue.png into OUTPUT; returns glue.json's
    contents as a `GlueResult`. Raises RuntimeError after writing them when some units failed (the others' results
    are kept)."""
    say = say or (lambda _line: None)
    check_settings(settings)
    if int(os.environ.get("WORLD_SIZE", "1")) > 1:
        raise GlueError("bertforge glue runs its own processes ({jobs}); start it without torchrun")
    protocol = settings.resolve_protocol()
    model_type = _model_type(settings.model)
    fingerprint = model_fingerprint(settings.model)
    plans, skipped = plan_tasks(settings, protocol)
    device, cuda_devices = _device(settings.device)
    record = {"protocol": protocol.record(), "model": fingerprint, "device": device, "precision": settings.precision,
              "seed": settings.seed, "data": {p.task: p.fingerprint for p in plans}}
    out = claim_suite_output(settings, record)
    units = plan_units(plans, protocol, out, settings.seed)
    for task, reason in skipped.items():
        say(f"skipping {task}: {reason}")
    with suite_lock(out):
        failures = _fine_tune(settings, protocol, units, out, cuda_devices, say, hooks)
        failed = {f.unit.task: f"{f.unit.label}: {f.reason}" for f in reversed(failures)}
        result = GlueResult.coerce(build_result(settings, protocol, plans, skipped, failed, fingerprint, model_type))
        write_report(result, out)
    if settings.records and not failures:
        from bertforge.evaluation.glue_records import write_glue_records
        command = settings.command or settings.command_line()
        say(f"records: {write_glue_records(result, out, settings.data, command, settings.records)}")
    if failures:
        raise RuntimeError(f"{len(failures)} of {len(units)} fine-tuning runs failed (first: {failures[0].unit.label}: "
                           f"{failures[0].reason}); {out / GLUE_JSON} has the other tasks; re-run to retry")
    return result


def _fine_tune(settings: GlueSettings, protocol: Protocol, units: list[Unit], out: Path, cuda_devices: int,
               say: Callable[[str], None], hooks: Any) -> list[Failure]:
    finished = sum(read_result(u) is not None for u in units)
    jobs, threads = _jobs(settings.jobs, len(units) - finished, cuda_devices)
    say(f"GLUE, protocol {protocol.name}: {len({u.task for u in units})} tasks to fine-tune, {len(units)} runs "
        f"({finished} done earlier), {jobs} at a time with {threads} torch thread{'s' if threads > 1 else ''} each, "
        f"into {out}")
    ctx = UnitContext(model=settings.model, data=settings.data, protocol=protocol, device=settings.device,
                      precision=settings.precision, save_every=settings.save_every,
                      keep_predictors=settings.keep_predictors)
    return run_units(units, ctx, jobs=jobs, threads=threads, progress=settings.progress, hooks=hooks,
                     cuda_devices=cuda_devices, workers_lock=out / WORKERS_LOCK,
                     on_done=lambda unit, r: say(f"  {unit.label}: score {r['score']:.2f} ({r['seconds']:.0f}s)"))


def _model_type(model: str) -> str:
    from bertforge.model.auto import model_class_for
    cls = model_class_for(model, "sequence_classification")  # refuses a folder no family reads, before any work
    from bertforge.tokenization.auto import tokenizer_class_for
    tokenizer_class_for(model)
    from bertforge.config import read_model_config
    config = read_model_config(model)
    return str(config.get("model_type") or cls.__name__)


def _device(requested: str) -> tuple[str, int]:
    """The device type the suite runs on and how many GPUs the jobs share (0 on CPU)."""
    import torch

    from bertforge.device import resolve_device
    device = resolve_device(requested)  # the one rule: "auto" is CUDA when present
    return device.type, torch.cuda.device_count() if device.type == "cuda" else 0


def _jobs(asked: int | None, todo: int, cuda_devices: int) -> tuple[int, int]:
    """(parallel jobs, torch threads per job). By default one job per core (per GPU on CUDA), each with cores / jobs
    threads: fine-tuning a small model on a CPU scales badly over threads (small matrices, many short ops), so
    independent runs side by side get more done than one run on every core; and jobs x threads never exceeds the
    cores, since oversubscribed threads only wait for each other."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    jobs = asked or (cuda_devices or cores)
    jobs = max(1, min(jobs, max(todo, 1)))
    return jobs, max(1, cores // jobs)


def build_result(settings: GlueSettings, protocol: Protocol, plans: Sequence[TaskPlan], skipped: dict[str, str],
                 failed: dict[str, str], fingerprint: str, model_type: str) -> dict[str, Any]:
    """glue.json's contents from the finished units (read back from their result files)."""
    tasks: dict[str, Any] = {}
    for plan in plans:
        if plan.task in failed:
            continue
        if plan.method == "majority":
            runs: list[dict[str, Any]] = []
        else:
            runs = [read_result(u) for u in plan.units]
            if any(r is None for r in runs):
                continue
        tasks[plan.task] = task_entry(plan.task, runs, protocol.select, majority=plan.majority,
                                      train_examples=plan.train_examples, dev_examples=plan.dev_examples)
    model = {"path": str(settings.model), "model_type": model_type, "fingerprint": fingerprint}
    return assemble(settings.name or default_name(settings.model), model, protocol, tasks, skipped, failed,
                    settings.command)


def task_entry(task: str, runs: Sequence[dict[str, Any]], select: str, *, majority: dict[str, Any] | None = None,
               train_examples: int | None = None, dev_examples: dict[str, int] | None = None) -> dict[str, Any]:
    """One task of glue.json from its runs ({"seed", "lr", "score", "metrics", "seconds", ...}, metrics in points);
    no runs: the task is the majority class (`majority`, as `majority_baseline` gives it, with its score)."""
    entry: dict[str, Any] = {"method": "finetune" if runs else "majority", "in_average": task in AVERAGED,
                             "majority": majority, "train_examples": train_examples, "dev_examples": dev_examples}
    if runs:
        entry.update(summarize_runs(task, runs, select), runs=list(runs))
    elif majority is not None:
        entry.update(score=majority["score"], metrics=majority["metrics"], selected=None, spread=None, runs=[])
    else:
        raise ValueError(f"{task}: neither runs nor a majority-class result")
    return entry


def assemble(name: str, model: dict[str, Any], protocol: Protocol, tasks: dict[str, dict[str, Any]],
             skipped: dict[str, str], failed: dict[str, str] | None = None, command: str | None = None) -> dict[str, Any]:
    """The whole glue.json: the task entries, their average (WNLI excluded), the floor's average, the record."""
    average, over = glue_average({t: e["score"] for t, e in tasks.items()})
    floors = [tasks[t]["majority"]["score"] for t in over if tasks[t].get("majority")]
    record = protocol.record()
    record["changed"] = ", ".join(f"{k}={v}" for k, v in changed_settings(protocol).items())
    seconds = sum(float(r.get("seconds", 0.0)) for e in tasks.values() for r in e.get("runs", []))
    return {"format": FORMAT, "name": name, "model": model, "protocol": record, "tasks": tasks,
            "average": average, "average_over": over,
            "majority_average": sum(floors) / len(floors) if floors and len(floors) == len(over) else None,
            "skipped": dict(skipped), **({"failed": dict(failed)} if failed else {}), "command": command,
            "seconds": round(seconds, 1),
            "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "software": _software()}


def default_name(model: str | Path) -> str:
    """The model folder's name, or its parent's when the folder has a generic name (`.../minilm/model`)."""
    path = Path(model).resolve()
    return path.parent.name if path.name.lower() in ("model", "models", "checkpoint", "final", "best") else path.name


def _software() -> dict[str, str]:
    from bertforge.version import __version__
    versions = {"bertforge": __version__}
    try:
        import torch
        versions["torch"] = torch.__version__
    except ImportError:  # pragma: no cover - torch is a dependency
        pass
    return versions
