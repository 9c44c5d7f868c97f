"""Pick the family from `config.json`'s `model_type`, as `transformers`' Auto classes do.

Each family module (bert, roberta, albert, distilbert, electra, modernbert, longformer, big_bird...) exposes
`FAMILY`: its config class and one model class per role. Family modules are imported only when asked for, so
`import bertforge` stays light.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bertforge.config import CONFIG_NAME, BertConfig, config_file, read_model_config

#: The model classes a family provides. A task head names the role that carries it (`tasks.heads.Head.model_role`:
#: a regression head is a sequence classifier with one output).
ROLES = ("base", "masked_lm", "pretraining", "sequence_classification", "token_classification",
         "question_answering", "multiple_choice")

# model_type -> module holding `FAMILY`
FAMILY_MODULES = {
    "bert": "bertforge.model.task_heads",
    "roberta": "bertforge.model.roberta",
    "albert": "bertforge.model.albert",
    "distilbert": "bertforge.model.distilbert",
    "electra": "bertforge.model.electra",
    "modernbert": "bertforge.model.modernbert",
    "longformer": "bertforge.model.longformer",
    "big_bird": "bertforge.model.big_bird",
    "xlnet": "bertforge.model.xlnet",
}


@dataclass(frozen=True)
class Family:
    """One member of the BERT family: how its config is read and which class plays each role."""

    config_class: type[BertConfig]
    classes: dict[str, type]

    def model_class(self, role: str) -> type:
        if role not in self.classes:
            raise ValueError(f"the {self.config_class.model_type} family has no {role!r} model; it has "
                             f"{', '.join(self.classes)}")
        return self.classes[role]


def family(model_type: str) -> Family:
    if model_type not in FAMILY_MODULES:
        raise ValueError(f"unknown model_type {model_type!r}; bertforge knows {', '.join(FAMILY_MODULES)}")
    return importlib.import_module(FAMILY_MODULES[model_type]).FAMILY


def read_model_type(path: str | Path) -> str:
    """The `model_type` of a checkpoint folder (or config.json); BERT when the field is absent, as in old dumps."""
    path = Path(path)
    try:
        data = read_model_config(path)
    except FileNotFoundError:
        from bertforge.checkpoint import CheckpointError
        raise CheckpointError(f"{path}: no {CONFIG_NAME}; cannot tell which model family this is") from None
    model_type = data.get("model_type", "bert")
    if not isinstance(model_type, str):  # named here, where the file is known
        from bertforge.checkpoint import CheckpointError
        raise CheckpointError(f"{config_file(path)}: field 'model_type' must be a name, got {model_type!r}")
    return model_type


def folder_family(path: str | Path) -> Family:
    """The encoder family of a checkpoint folder; another `model_type` (an encoder-decoder, a GPT) is refused
    naming the file. Callers that also take other folders read `read_model_type` themselves."""
    model_type = read_model_type(path)
    if model_type not in FAMILY_MODULES:
        from bertforge.checkpoint import CheckpointError
        raise CheckpointError(f"{config_file(Path(path))}: unknown model_type {model_type!r} (field 'model_type'); "
                              f"bertforge knows {', '.join(FAMILY_MODULES)}")
    return family(model_type)


def model_class_for(path: str | Path, role: str) -> type:
    return folder_family(path).model_class(role)


def preset_config(name: str, **overrides: Any) -> BertConfig:
    """A named size, optionally of a family: `mini`, `bert-base`, `albert-base`, `roberta-tiny`..."""
    family_name, _, size = name.rpartition("-")
    if family_name in FAMILY_MODULES:
        return family(family_name).config_class.preset(size, **overrides)
    return BertConfig.preset(name, **overrides)


class AutoConfig:
    @staticmethod
    def from_pretrained(path: str | Path) -> BertConfig:
        return folder_family(path).config_class.from_pretrained(path)


class _AutoModel:
    role: str = "base"

    def __init__(self) -> None:
        raise TypeError(f"{type(self).__name__} is not instantiated; use {type(self).__name__}.from_pretrained(dir)")

    @classmethod
    def from_pretrained(cls, path: str | Path, **kwargs: Any):
        """Load the folder with the class its `model_type` calls for (e.g. `RobertaForMaskedLM`)."""
        from bertforge.checkpoint import resolve_folder
        folder = resolve_folder(path)
        return model_class_for(folder, cls.role).from_pretrained(folder, **kwargs)

    @classmethod
    def from_config(cls, config: BertConfig):
        return family(config.model_type).model_class(cls.role)(config)


class AutoModel(_AutoModel):
    role = "base"


class AutoModelForMaskedLM(_AutoModel):
    role = "masked_lm"


class AutoModelForPreTraining(_AutoModel):
    role = "pretraining"


class AutoModelForSequenceClassification(_AutoModel):
    role = "sequence_classification"


class AutoModelForTokenClassification(_AutoModel):
    role = "token_classification"


class AutoModelForQuestionAnswering(_AutoModel):
    role = "question_answering"


class AutoModelForMultipleChoice(_AutoModel):
    role = "multiple_choice"
