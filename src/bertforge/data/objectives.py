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
    permuted: bool = False  # XLNet: a factorisation order per sequence, its last 1/K predicted (data/permutation.py)
    diffusion: bool = False  # MDLM: a mask rate t per sequence, all chosen tokens [MASK], loss weighted 1/t
    mix: str | None = None  # causal and masked batches: "phase" (causal first, then masked) or "batch" (drawn)

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
    Objective("plm", permuted=True, reads="ltr"),  # XLNet: the corpus's unmasked ltr rows, orders drawn per batch
    Objective("mdlm", diffusion=True, reads="ltr"),  # masked diffusion on the unmasked rows (data/diffusion.py)
    Objective("causal-then-masked", mix="phase", reads="ltr"),  # ltr for --causal-fraction of the run, then MLM
    Objective("hybrid", mix="batch", reads="ltr"),  # each batch ltr with probability --causal-fraction, else MLM
)}


def get_objective(name: str) -> Objective:
    try:
        return OBJECTIVE_TABLE[name]
    except KeyError:
        raise ValueError(f"objective must be one of {', '.join(OBJECTIVE_TABLE)}, got {name!r}") from None
