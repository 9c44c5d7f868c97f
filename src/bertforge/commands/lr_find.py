"""`bertforge lr-find`: the learning-rate finder; prints the suggested lr and the finetune command that uses it."""
from __future__ import annotations

import argparse

from bertforge.commands import add_common
from bertforge.commands.flags import add_settings_arguments, settings_from_args


def register(sub) -> None:
    from bertforge.tasks.lr_find import LrFindSettings
    p = sub.add_parser("lr-find", help="find a fine-tuning learning rate (for --schedule onecycle)",
                       description="Fine-tune for --steps steps (one batch each) with the learning rate growing "
                                   "exponentially from --start-lr to --end-lr, the model and data built as "
                                   "`finetune` builds them; stop once the smoothed loss exceeds 4x its best. "
                                   "Writes OUTPUT/lr_find.json (the curve; the steepest descent of the smoothed "
                                   "loss and the lr of its minimum / 10; the suggested lr, the smaller of the two) "
                                   "and lr_find.png, and "
                                   "prints the `bertforge finetune` command at the suggested lr. The model folder "
                                   "is only read: the trained weights are dropped.")
    add_settings_arguments(p, LrFindSettings)
    add_common(p)
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from bertforge.tasks.lr_find import LrFindSettings, lr_find
    result = lr_find(settings_from_args(LrFindSettings, args), say=print)
    steepest = f"{result.steepest_lr:.2g}" if result.steepest_lr is not None else "none before the minimum"
    print(f"{len(result.lrs)} steps ({result.stopped_by}); suggested lr {result.suggested_lr:.2g} (the smaller of "
          f"the steepest descent, {steepest}, and the min-loss lr / 10, {result.min_loss_lr_div10:.2g}); curve in "
          f"{result.output}")
    print(result.command)
    return 0
