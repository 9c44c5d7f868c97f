"""`bertforge ablate TABLE`: reproduce one of the papers' ablation tables at small, equal budgets."""
from __future__ import annotations

import argparse

from bertforge.commands import add_common
from bertforge.commands.flags import add_settings_arguments, settings_from_args


def register(sub) -> None:
    from bertforge.ablation.ablate import AblationSettings
    from bertforge.ablation.tables import TABLES
    p = sub.add_parser("ablate", help="reproduce a paper's ablation table (Markdown + PNG)",
                       description="Pre-train one model per row of the table with the same budget (wall-clock, CPU "
                       "time or steps), ask every row the same held-out questions (MLM, NSP, SOP), fine-tune each "
                       "on SST-2 and MRPC (or score it with the GLUE suite), "
                       "and write TABLE.md, TABLE.png and results.json to OUTPUT. Finished rows are kept; "
                       "re-running continues. Tables: " + "; ".join(f"{t.name} ({t.paper})" for t in TABLES.values()))
    add_settings_arguments(p, AblationSettings)
    add_common(p)
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from bertforge.ablation.ablate import AblationSettings, run_ablation
    run_ablation(settings_from_args(AblationSettings, args), say=print)
    return 0
