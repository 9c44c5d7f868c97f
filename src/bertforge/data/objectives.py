"""The pre-training objectives, as one table: what each trains besides the tokens and which batches it reads."""
from __future__ import annotations

from dataclasses import dataclass

__all__ = ["OBJECTIVE_TABLE", "Objective", "get_objective"]


@dataclass(frozen=True)
class Objective:
    name: str
    sentence_task: str | None = None  # "nsp" (B follows A?) or "sop" (A and B in order?), trained beside the tokens
    left_to_right: bool = False  # predicts token i + 1 under a causal mask; nothing is masked
    generator: bool = False  # ELECTRA: a small generator fills the masks, the model tells replaced tokens
    reads: str | None = None  # the objective whose batches it trains on, when not its own

    @property
    def batches(self) -> str:
        """The objective `PretrainingDataset` makes this one's batches for."""
        return self.reads or self.name


OBJECTIVE_TABLE: dict[str, Objective] = {o.name: o for o in (
    Objective("mlm+nsp", sentence_task="nsp"),  # BERT
    Objective("mlm+sop", sentence_task="sop"),  # ALBERT
    Objective("mlm"),  # RoBERTa
    Objective("ltr", left_to_right=True),  # BERT's left-to-right ablation
    Objective("electra", generator=True, reads="mlm"),
)}


def get_objective(name: str) -> Objective:
    try:
        return OBJECTIVE_TABLE[name]
    except KeyError:
        raise ValueError(f"objective must be one of {', '.join(OBJECTIVE_TABLE)}, got {name!r}") from None
