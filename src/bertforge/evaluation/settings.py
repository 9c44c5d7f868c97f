"""`GlueSettings`: what one GLUE suite runs, each setting declared once (its default, range and help), for
`run_glue` and for the `bertforge glue` flags derived from it."""
from __future__ import annotations

import shlex
from dataclasses import dataclass, fields
from typing import Any, Sequence

from bertforge.device import device_setting, precision_setting
from bertforge.evaluation.protocols import PROTOCOLS, Protocol, get_protocol
from bertforge.tasks.glue_tasks import GLUE
from bertforge.settings import (MAX_BATCH, MAX_EPOCHS, MAX_LENGTH, MAX_LR, MAX_SAMPLES, MAX_SEED, MAX_STEPS,
                                field_flag, setting)

__all__ = ["GlueCompare", "GlueSettings"]

# settings that change how a suite runs, not what it scores: left out of the command glue.md records
_NOT_RECORDED = ("model", "data", "output", "protocol", "jobs", "save_every", "keep_predictors", "overwrite",
                 "progress", "command", "records")
_REQUIRED = "required, unless --compare"


def _names(text: str) -> list[str]:
    """'sst2, mrpc' -> ['sst2', 'mrpc']."""
    names = [t.strip() for t in text.split(",") if t.strip()]
    if not names:
        raise ValueError(f"expected comma-separated task names such as sst2,mrpc, got {text!r}")
    return names


def _rates(text: str) -> list[float]:
    """'5e-5,3e-5' -> [5e-05, 3e-05], each positive."""
    try:
        rates = [float(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise ValueError(f"expected learning rates such as 5e-5,3e-5, got {text!r}") from None
    if not rates or any(not r > 0 for r in rates):
        raise ValueError(f"expected positive learning rates, got {text!r}")
    return rates


@dataclass
class GlueSettings:
    """One GLUE suite: which checkpoint, which data, which protocol (with overrides), how to run it."""

    model: str = setting(help="the checkpoint folder (any family bertforge loads, HF layout)", metavar="DIR",
                         deferred=_REQUIRED)
    data: str = setting(help="folder holding CoLA/, SST-2/, MRPC/, STS-B/, QQP/, MNLI/, QNLI/, RTE/, WNLI/ "
                        "(e.g. ../shared/data/glue)", metavar="GLUE_DIR", deferred=_REQUIRED)
    output: str = setting(help="folder for the suite (an earlier run of the same suite there is continued); with "
                          "--compare, the PNG to write (its table goes beside it, .md)", metavar="DIR")
    protocol: str = setting("sane", "fine-tuning protocol", choices=tuple(sorted(PROTOCOLS)))
    tasks: Sequence[str] | None = setting(
        None, f"only these tasks ({', '.join(GLUE)}); each must have its files "
        "(default: every task found)", parse=_names, metavar="TASK[,TASK]")
    seeds: int | None = setting(None, "runs per task and lr (default: the protocol's)", positive=True, maximum=100)
    seed: int = setting(42, "the first seed; the others follow it", non_negative=True, maximum=MAX_SEED)
    jobs: int | None = setting(None, "runs at once, each in its own process (default: one per core, or per GPU), "
                               "with cores / jobs threads each", positive=True, maximum=1_024)
    # protocol overrides (None: the protocol's)
    learning_rates: Sequence[float] | None = setting(None, "learning rate(s) to try", flag="--lr", parse=_rates,
                                                     maximum=MAX_LR, metavar="LR[,LR]")
    epochs: float | None = setting(None, "passes over each train set", positive=True, maximum=MAX_EPOCHS)
    batch_size: int | None = setting(None, "examples per step", positive=True, maximum=MAX_BATCH)
    max_seq_length: int | None = setting(None, "tokens per example", positive=True, maximum=MAX_LENGTH)
    max_train_samples: int | None = setting(
        None, "train on a seeded sample of at most N examples per task (quick and smoke runs)", positive=True,
        maximum=MAX_SAMPLES)
    max_eval_samples: int | None = setting(
        None, "score only the first N dev examples of each task: smoke runs only, the numbers are then not GLUE "
        "dev numbers", positive=True, maximum=MAX_SAMPLES)
    wnli: str | None = setting(None, "WNLI as its majority class (the protocols' way) or fine-tuned; never in the "
                               "average", choices=("majority", "finetune"))
    batch_order: str | None = setting(None, "training batches of similar length (default: least padding) or random "
                                      "(as transformers' Trainer)", choices=("length", "random"))
    # running
    device: str = device_setting()
    precision: str = precision_setting()
    save_every: int = setting(100, "steps between checkpoints of a run, so an interrupted run resumes (0: it "
                              "restarts)", non_negative=True, maximum=MAX_STEPS)
    keep_predictors: bool = setting(False, "keep every run's fine-tuned predictor (units/<task>/<run>/run/; the "
                                    "weights are deleted by default)")
    name: str | None = setting(None, "the model's label in tables and plots (default: its folder)")
    overwrite: bool = setting(False, "empty --output first (a finished suite there is lost)")
    records: str | None = setting(None, "also write the scores as records of the results store in this folder "
                                  "(group glue-<output folder>, with the table of model and majority floor)",
                                  metavar="DIR")
    progress: bool = setting(True, "a progress line a minute instead of a bar (for logs)", flag="--no-progress")
    command: str | None = setting(None, "the command line that asked for this, for glue.md", cli=False)

    def resolve_protocol(self) -> Protocol:
        return get_protocol(self.protocol, seeds=self.seeds, epochs=self.epochs, batch_size=self.batch_size,
                            learning_rates=self.learning_rates, max_seq_length=self.max_seq_length,
                            max_train_samples=self.max_train_samples, max_eval_samples=self.max_eval_samples,
                            wnli=self.wnli, batch_order=self.batch_order)

    def command_line(self) -> str:
        """The command, in a canonical spelling: the suite's inputs and protocol, then each setting that decides
        the scores and differs from its default."""
        parts = ["bertforge", "glue", "--model", self.model, "--data", self.data, "--output", self.output,
                 "--protocol", self.protocol]
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name in _NOT_RECORDED or value == f.default:
                continue
            parts += [field_flag(f), _spelled(value)]
        return shlex.join(str(p) for p in parts)


def _spelled(value: Any) -> str:
    if isinstance(value, (list, tuple)):
        return ",".join(_spelled(v) for v in value)
    return f"{value:g}" if isinstance(value, float) else str(value)


@dataclass
class GlueCompare:
    """`bertforge glue --compare`: draw finished suites side by side instead of running one."""

    compare: Sequence[str] | None = setting(
        None, "draw these glue.json files side by side into --output (PNG) instead of running a suite",
        kind="existing_file", nargs="+", metavar="GLUE_JSON")
