"""The run skeleton every training verb shares: a `Session`, OUTPUT claimed for the verb (its settings recorded,
a finished run recognised, a failed fresh run cleaned up), the verb's stage built inside it, `fit`, the result.
A verb supplies only what it trains (`build_stage`); its settings hold `output`, `overwrite` and `train`."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

from bertforge.training.engine import FaultHooks, FitResult, Session, Stage, fit
from bertforge.training.options import TrainOptions
from bertforge.training.run_output import claim_run_output


@dataclass
class Built:
    """What a verb's `build_stage` returns when a bare `Stage` is not all: the options it decided (e.g. epochs
    turned into steps), and notes for the result before and after the engine's."""

    stage: Stage
    options: TrainOptions | None = None
    notes: list[str] = field(default_factory=list)
    notes_after: list[str] = field(default_factory=list)


def train(settings: Any, build_stage: Callable[[Session, Path], Stage | Built], *, verb: str,
          inputs: Iterable[str | Path | None] = (), hooks: FaultHooks | None = None,
          say: Callable[[str], None] | None = None) -> FitResult:
    """Train what `build_stage(session, output)` builds in `settings.output` under `settings.train`. `inputs`:
    the paths the run reads, resolved before OUTPUT is claimed (so `--overwrite` never empties one of them)."""
    opts: TrainOptions = settings.train  # checked by `fit`, once `build_stage` has decided the run's options
    inputs = tuple(inputs)
    with Session(opts.device, opts.dist_timeout) as session, \
            claim_run_output(settings.output, verb, settings, session, overwrite=settings.overwrite, inputs=inputs,
                             keep_checkpoints=opts.keep_checkpoints_at_end) as out:
        built = build_stage(session, out)
        built = built if isinstance(built, Built) else Built(built)
        result = fit(built.stage, built.options or opts, session, out, hooks=hooks, say=say)
        result.notes[:0] = built.notes
        result.notes.extend(built.notes_after)
    return result
