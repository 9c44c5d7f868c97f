"""The run skeleton every training verb shares: a `Session`, OUTPUT claimed for the verb (its settings recorded,
a finished run recognised, a failed fresh run cleaned up), the verb's stage built inside it, `fit`, the result.
A verb supplies only what it trains (`build_stage`); its settings hold `output`, `overwrite` and `train`."""
from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

from bertforge.training.engine import FaultHooks, FitResult, Session, Stage, fit
from bertforge.training.options import TrainOptions
from bertforge.training.run_output import claim_run_output


@dataclass
class Built:
    """What a verb's `build_stage` returns when a bare `Stage` is not all: the options it decided (e.g. epochs
    turned into steps), notes for the result before and after the engine's, and `finish`: what the verb writes
    from the engine's result (a report), run while OUTPUT is still claimed, so before it is marked finished."""

    stage: Stage
    options: TrainOptions | None = None
    notes: list[str] = field(default_factory=list)
    notes_after: list[str] = field(default_factory=list)
    finish: Callable[[FitResult], None] | None = None


@contextmanager
def claimed_run(settings: Any, verb: str, inputs: Iterable[str | Path | None] = ()) -> Iterator[tuple[Session, Path]]:
    """The session and OUTPUT claimed for `verb` under `settings` (`output`, `overwrite`, `train`): what every
    training verb runs inside, `train` for one `fit`, fine-tuning for its grid of runs. `inputs` are resolved
    before OUTPUT is claimed, so `--overwrite` never empties one of them."""
    opts: TrainOptions = settings.train
    with Session(opts.device, opts.dist_timeout) as session, \
            claim_run_output(settings.output, verb, settings, session, overwrite=settings.overwrite,
                             inputs=tuple(inputs), keep_checkpoints=opts.keep_checkpoints_at_end) as out:
        yield session, out


def train(settings: Any, build_stage: Callable[[Session, Path], Stage | Built], *, verb: str,
          inputs: Iterable[str | Path | None] = (), hooks: FaultHooks | None = None,
          say: Callable[[str], None] | None = None) -> FitResult:
    """Train what `build_stage(session, output)` builds in `settings.output` under `settings.train`. `inputs`:
    the paths the run reads, resolved before OUTPUT is claimed (so `--overwrite` never empties one of them)."""
    opts: TrainOptions = settings.train  # checked by `fit`, once `build_stage` has decided the run's options
    with claimed_run(settings, verb, inputs) as (session, out):
        built = build_stage(session, out)
        built = built if isinstance(built, Built) else Built(built)
        result = fit(built.stage, built.options or opts, session, out, hooks=hooks, say=say)
        result.notes[:0] = built.notes
        result.notes.extend(built.notes_after)
        if built.finish is not None:
            built.finish(result)
    return result
