"""Pre-training recipes: named sets of defaults for `bertforge pretrain` (`--recipe bert|fast`).

A recipe only fills in what the user left unset: a flag given on the command line (or a keyword given to
`pretrain`) always wins. `bert` is the paper's recipe. `fast` is what won the recipe race on one CPU core
(docs/RESULTS.md, "The recipe race"): the ModernBERT layout, MLM alone at a higher masking rate, no dropout,
a short warmup, a high peak learning rate, and BERT's plain weight init rather than ModernBERT's.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from bertforge.config import PRESETS
from bertforge.settings import SettingError


@dataclass(frozen=True)
class Recipe:
    name: str
    summary: str
    family: str | None                  # the layout a bare size (`--model mini`) gets; None: BERT's
    options: dict[str, Any] = field(default_factory=dict)  # PretrainConfig / TrainOptions fields
    warmup_fraction: float | None = None  # warmup as a share of --max-steps (a time budget gets `warmup_steps`)


RECIPES: dict[str, Recipe] = {
    "bert": Recipe("bert", "BERT (Devlin et al. 2019): post-LN, learned positions, MLM + NSP, 15 % masking, "
                   "dropout 0.1, lr 1e-4", family=None,
                   options={"objective": "mlm+nsp", "mask_rate": 0.15, "dropout": None, "lr": 1e-4,
                            "warmup_steps": 0}),
    "fast": Recipe("fast", "the recipe race's winner: ModernBERT layout (pre-LN, GeGLU, rotary, no biases), MLM "
                   "only, 30 % masking, dropout 0, lr 2e-3, 6 % warmup, BERT's init", family="modernbert",
                   options={"objective": "mlm", "mask_rate": 0.3, "dropout": 0.0, "lr": 2e-3, "warmup_steps": 100,
                            "init": "bert"},
                   warmup_fraction=0.06),
}
DEFAULT_RECIPE = "bert"


def layout_overrides(name: str, hidden_size: int) -> dict[str, Any]:
    """The recipe's layout as `BertConfig` options, for a model that must stay in the BERT family (an ablation
    row with a sentence-pair head, an ALBERT-style row): the options the ModernBERT layout switches on, at its
    feed-forward width ratio. Empty for the paper's recipe."""
    if RECIPES[name].family != "modernbert":
        return {}
    from bertforge.config import MODERN_OPTIONS
    from bertforge.model.modernbert import ModernBertConfig
    modern = ModernBertConfig()
    return {option: getattr(modern, option) for option in MODERN_OPTIONS} | {"intermediate_size": hidden_size * 3 // 2}


def recipe_options(name: str, given: dict[str, Any]) -> dict[str, Any]:
    """`given` (what the user set) completed by the recipe `name`; the model preset gets the recipe's layout
    when it is a bare size such as `mini`."""
    if name not in RECIPES:
        raise SettingError("{recipe} must be one of {recipes}, got {got!r}", recipes=", ".join(RECIPES), got=name)
    recipe = RECIPES[name]
    options = {**recipe.options, **given}
    model = options.get("model", "tiny")
    if recipe.family and model in PRESETS and not options.get("init_from"):
        options["model"] = f"{recipe.family}-{model}"
    if recipe.warmup_fraction is not None and "warmup_steps" not in given and options.get("max_steps"):
        options["warmup_steps"] = max(1, round(recipe.warmup_fraction * options["max_steps"]))
    return options
