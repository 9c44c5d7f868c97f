"""GLUE fine-tuning protocols: named, documented presets, all in one table (`PROTOCOLS`).

A protocol fixes everything that decides a checkpoint's GLUE numbers besides the checkpoint: the learning
rates tried, batch size, epochs, schedule, how many seeds, and how a task's runs become its score. Two
checkpoints are only comparable under one protocol, so `glue.json` records the whole protocol, and a run
with another protocol is refused in an existing output folder.

- `bert`: the BERT paper (Devlin et al. 2019, §4.1 and Appendix A.3): batch 32, 3 epochs, the lr among
  5e-5, 4e-5, 3e-5, 2e-5 that is best on dev, per task.
- `sane`: Cramming's "GLUE-sane" (Geiping & Goldstein 2023; `eval=GLUE_sane` in their code): one setting for
  every task — lr 4e-5, batch 16, 5 epochs, 10 % warmup, no weight decay, no gradient clipping, the last
  epoch scored — and the median over 5 seeds. Two details differ from their code, because bertforge's
  fine-tuning engine has one schedule and one AdamW: the lr decays linearly (Cramming: cosine) and AdamW's
  beta2 is 0.999 (Cramming: 0.98).
- `cpu`: a budget for a CPU: one setting for every task (lr 1e-4, batch 32, 3 epochs) on a seeded sample of at
  most 2,000 training examples per task, one seed. The sample is 80 % of RTE, 55 % of MRPC, 23 % of CoLA and
  3 % of SST-2, so these are not the full protocol's numbers, but they rank checkpoints cheaply; docs/GLUE.md
  gives the cost.

WNLI, in all three: not fine-tuned and not in the average. Its dev set is adversarial to its train set (some
dev examples share a sentence with a train example but have the other label, so fitting the train set costs
accuracy on dev); BERT excluded it from its average and submitted the majority class, and Cramming leaves it
out. It is reported as the majority class of its train set scored on dev (`wnli="majority"`);
`wnli="finetune"` fine-tunes it like the other tasks, still outside the average.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, fields, replace
from typing import Any, Literal

Select = Literal["best", "median"]


@dataclass(frozen=True)
class Protocol:
    """How every GLUE task is fine-tuned and scored. Numbers that are None are "no limit" / "none"."""

    name: str
    description: str
    learning_rates: tuple[float, ...]
    batch_size: int
    epochs: float
    seeds: int                              # fine-tuning runs per (task, lr), seeds seed, seed+1, ...
    select: Select                          # best: the best run on dev; median: the median run over seeds
    warmup_fraction: float = 0.1
    weight_decay: float = 0.01
    max_grad_norm: float | None = 1.0       # None: no clipping
    max_seq_length: int = 128
    max_train_samples: int | None = None    # a seeded sample of each task's train set
    max_eval_samples: int | None = None     # the first N dev examples: smoke runs only (not GLUE numbers)
    wnli: Literal["majority", "finetune"] = "majority"
    batch_order: Literal["length", "random"] = "length"  # length-bucketed batches, or random as the Trainer's
    source: str = ""                        # where the numbers come from, and where they differ from it

    def check(self) -> None:
        """Raise ValueError naming the first setting out of range."""
        checks = {
            "learning_rates": bool(self.learning_rates) and all(lr > 0 for lr in self.learning_rates),
            "batch_size": self.batch_size > 0, "epochs": self.epochs > 0, "seeds": self.seeds > 0,
            "select": self.select in ("best", "median"), "warmup_fraction": 0 <= self.warmup_fraction < 1,
            "weight_decay": self.weight_decay >= 0,
            "max_grad_norm": self.max_grad_norm is None or self.max_grad_norm > 0,
            "max_seq_length": self.max_seq_length > 0,
            "max_train_samples": self.max_train_samples is None or self.max_train_samples > 0,
            "max_eval_samples": self.max_eval_samples is None or self.max_eval_samples > 0,
            "wnli": self.wnli in ("majority", "finetune"),
            "batch_order": self.batch_order in ("length", "random"),
        }
        for name, ok in checks.items():
            if not ok:
                raise ValueError(f"protocol {self.name}: {name} = {getattr(self, name)!r} is out of range")

    def record(self) -> dict[str, Any]:
        """The protocol as glue.json and the output folder's record keep it (JSON types only)."""
        data = asdict(self)
        data["learning_rates"] = list(self.learning_rates)
        return data

    @property
    def is_smoke(self) -> bool:
        """Whether dev sets are cut: then the numbers are not GLUE dev numbers at all."""
        return self.max_eval_samples is not None


PROTOCOLS: dict[str, Protocol] = {p.name: p for p in (
    Protocol(
        name="bert", description="BERT paper: lr grid 5e-5/4e-5/3e-5/2e-5, batch 32, 3 epochs, best dev run per task",
        learning_rates=(5e-5, 4e-5, 3e-5, 2e-5), batch_size=32, epochs=3.0, seeds=1, select="best",
        source="Devlin et al. 2019, §4.1 and Appendix A.3 (AdamW, 10 % linear warmup, linear decay, weight decay "
               "0.01, max length 128); with --seeds N the best of all lr x seed runs, as the paper's restarts"),
    Protocol(
        name="sane", description="Cramming's GLUE-sane: lr 4e-5, batch 16, 5 epochs for every task, median of 5 seeds",
        learning_rates=(4e-5,), batch_size=16, epochs=5.0, seeds=5, select="median", weight_decay=0.0,
        max_grad_norm=None,
        source="Geiping & Goldstein 2023 (Cramming, eval=GLUE_sane): last epoch scored, 10 % warmup, no weight "
               "decay, no clipping, max length 128; differs in the lr decay (linear here, cosine there) and AdamW "
               "beta2 (0.999 here, 0.98 there)"),
    Protocol(
        name="cpu", description="CPU budget: lr 1e-4, batch 32, 3 epochs on at most 2,000 train examples per task, "
                                "1 seed",
        learning_rates=(1e-4,), batch_size=32, epochs=3.0, seeds=1, select="median", max_train_samples=2000,
        source="bertforge's cheap preset for ranking checkpoints on a CPU; not the full protocol's numbers"),
)}

#: Protocol settings a user may override from the command line (each one is recorded in glue.json).
OVERRIDABLE = ("learning_rates", "batch_size", "epochs", "seeds", "max_seq_length", "max_train_samples",
               "max_eval_samples", "wnli", "batch_order")


def get_protocol(name: str, **overrides: Any) -> Protocol:
    """The named protocol with `overrides` (None values ignored) applied and checked."""
    if name not in PROTOCOLS:
        raise ValueError(f"unknown GLUE protocol {name!r}; choose one of {', '.join(PROTOCOLS)}")
    given = {k: v for k, v in overrides.items() if v is not None}
    unknown = sorted(set(given) - set(OVERRIDABLE))
    if unknown:
        raise ValueError(f"protocol setting {unknown[0]!r} cannot be overridden; these can: {', '.join(OVERRIDABLE)}")
    if "learning_rates" in given:  # each lr once: a unit's folder is named by its lr
        given["learning_rates"] = tuple(dict.fromkeys(float(lr) for lr in given["learning_rates"]))
    protocol = replace(PROTOCOLS[name], **given)
    protocol.check()
    return protocol


def recorded_default(key: str) -> Any:
    """The value a protocol setting had in suites recorded before the setting existed (its field default)."""
    return next((f.default for f in fields(Protocol) if f.name == key), None)


def changed_settings(protocol: Protocol) -> dict[str, Any]:
    """The settings in which `protocol` differs from the preset of its name (what glue.md lists)."""
    base = PROTOCOLS.get(protocol.name)
    if base is None:
        return {}
    return {f.name: getattr(protocol, f.name) for f in fields(Protocol)
            if getattr(protocol, f.name) != getattr(base, f.name)}
