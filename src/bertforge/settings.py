"""Settings: dataclass fields that say, once, what a setting means and which values it takes.

Every verb's settings are a dataclass of such fields, and every verb that trains composes the engine's
`TrainOptions` as a *part* (as transformers' trainers share `TrainingArguments`): `FinetuneSettings(model=...,
data_options=DataOptions(...), train=TrainOptions(...), epochs=3)`. The command line derives every verb's flags
from these fields (`bertforge.commands.flags`), so a setting added to `TrainOptions` is a flag of every
training verb with no other edit.

A field's metadata (all keys optional):
  help         what the setting does, in plain words (the flag's help adds the default)
  flag         the flag when it is not --field-name; a bool flag spelled --no-x turns the setting off
  metavar      what --help calls the flag's value
  positive, non_negative, choices
               the values it takes, checked when a command line is parsed and by `check_settings`
  maximum, minimum
               the largest (smallest) value a number takes (each value of a list), likewise checked; every count,
               size, rate and duration has a maximum, so that a slip such as `--epochs 1e12` stops before any work
               instead of running until killed (--help shows it)
  inf_means    what an infinite value means to code that passes one (the flag keeps its maximum)
  kind         a value the command line parses specially: "duration" (90s, 30m, 2h), "probability" ([0, 1)),
               "existing_file", "existing_dir"; "range": a whole number (or a number) within `minimum` (else 1
               when `positive`, else 0) and `maximum`, whose flag names the whole range when it refuses a value
  parse        a callable text -> value raising ValueError, for values of the field's own domain
  nargs        "+" for one or more values
  repeatable   the flag may be given again and adds its values (`--text a --text b` is `--text a b`)
  positional   the values are given without a flag (`fill-mask "a [MASK] ."`)
  deferred     the default is decided later (by a recipe, or from another input): this text stands for it in --help
  cli          False: no flag (a setting only code gives)
A part's metadata (`part(...)`) says which of its fields the verb derives itself (`hide`: no flag, not a
keyword), and what a field means for this verb when the part's own help would be wrong (`help`, `deferred`).
"""
from __future__ import annotations

import functools
import math
import string
from dataclasses import MISSING, Field, asdict, field, fields, replace
from typing import Any, Callable, Iterable, Mapping

__all__ = ["MAX_BATCH", "MAX_EPOCHS", "MAX_INTERVAL", "MAX_LENGTH", "MAX_LR", "MAX_SAMPLES", "MAX_SEED", "MAX_STEPS",
           "SettingError", "check_settings", "field_flag", "flag_of", "flat_keywords", "flatten", "part",
           "part_fields", "route_keywords", "setting", "settings_record"]

# Upper bounds that the settings (and the flags) of several verbs share, as `maximum=` in a field's metadata: far
# beyond any real run, so that they only stop slips (`--epochs 1e12`, a batch of a billion) before any work.
MAX_STEPS = 100_000_000          # optimizer steps
MAX_INTERVAL = 1_000_000_000     # steps between checkpoints, evaluations, log lines: beyond the run means never
MAX_EPOCHS = 1_000.0             # passes over a train set
MAX_BATCH = 65_536               # examples, texts or sequences in one batch
MAX_LENGTH = 32_768              # tokens of one sequence
MAX_SAMPLES = 1_000_000_000      # examples a cap keeps
MAX_SEED = 2 ** 32 - 1           # what every random generator takes
MAX_LR = 1.0                     # a peak learning rate (AdamW and LAMB; above it, only divergence)


class SettingError(ValueError):
    """A setting's value is wrong, or settings contradict each other. The message is a template that names
    settings as `{field_name}` and takes the values it shows as keywords:

        SettingError("{time_budget} must be positive, got {got}", got=0)

    `owner` is the settings class the names belong to (its parts included): read as a string, the message
    names each setting by the flag its field's metadata gives it ("--time-budget must be positive, got 0"), and
    the command line renders the flag its verb has for it (`render`). `settings` lists the names.
    """

    def __init__(self, template: str, *, owner: type | None = None, **values: Any) -> None:
        self.template, self.owner, self.values = template, owner, values
        self.settings = tuple(name for _, name, _, _ in string.Formatter().parse(template)
                              if name and name not in values)
        super().__init__(self.render(lambda name: flag_of(owner, name)))

    @property
    def setting(self) -> str | None:
        """The setting the message is about (the first it names)."""
        return self.settings[0] if self.settings else None

    def render(self, name_of: Callable[[str], str]) -> str:
        """The message with each setting named by `name_of(field_name)` (a flag, for the command line)."""
        return self.template.format(**{name: name_of(name) for name in self.settings}, **self.values)


def field_flag(f: Field) -> str:
    """The flag of the settings field `f`: its metadata's `flag`, else --field-name."""
    return f.metadata.get("flag") or "--" + f.name.replace("_", "-")


def flag_of(cls: type | None, name: str) -> str:
    """The flag of the setting `name` of the settings class `cls` or of one of its parts (--name-with-dashes for
    a name `cls` does not have)."""
    found = _find_field(cls, name) if cls is not None else None
    return field_flag(found) if found is not None else "--" + name.replace("_", "-")


def _find_field(cls: type, name: str) -> Field | None:
    for f in fields(cls):
        if f.metadata.get("part"):
            inner = _find_field(f.metadata["part"], name)
            if inner is not None:
                return inner
        elif f.name == name:
            return f
    return None


def setting(default: Any = MISSING, help: str = "", *, default_factory: Any = MISSING, **meta: Any) -> Any:
    """A dataclass field with the metadata above (no default: the setting is required)."""
    return field(default=default, default_factory=default_factory, metadata={"help": help, "cli": True, **meta})


def part(cls: type, default_factory: Callable[[], Any] | None = None, *, title: str, hide: Iterable[str] = (),
         help: Mapping[str, str] | None = None, deferred: Mapping[str, str] | None = None) -> Any:
    """A field holding the settings dataclass `cls` (its flags form the group `title`); `default_factory` is
    this verb's default instance (none: the part is required, built from its own fields)."""
    meta = {"part": cls, "title": title, "hide": tuple(hide), "help": dict(help or {}),
            "deferred": dict(deferred or {})}
    if default_factory is None:
        return field(metadata=meta)
    return field(default_factory=default_factory, metadata=meta)


def part_fields(cls: type) -> list:
    """The fields of `cls` that hold a part."""
    return [f for f in fields(cls) if f.metadata.get("part")]


def _part_default(f) -> Any:
    return f.default_factory() if f.default_factory is not MISSING else None


def route_keywords(cls: type, given: Mapping[str, Any]) -> dict[str, Any]:
    """Keywords for `cls` from settings given by their own names: a field of `cls` keeps its name; a field of one
    of its parts (`seed`, `device`, `task`...) goes into that part, on top of the part given or its default."""
    own = {f.name for f in fields(cls)}
    out = {k: v for k, v in given.items() if k in own}
    into: dict[str, dict[str, Any]] = {}
    for name, value in given.items():
        if name in own:
            continue
        owner = next((p for p in part_fields(cls) if name in {f.name for f in fields(p.metadata["part"])}), None)
        if owner is None:
            raise TypeError(f"{cls.__name__} has no setting {name!r}")
        if name in owner.metadata["hide"]:
            raise TypeError(f"{cls.__name__} sets {owner.name}.{name} itself; {name!r} is not one of its settings")
        into.setdefault(owner.name, {})[name] = value
    for f in part_fields(cls):
        if f.name in into:
            base = out.get(f.name) or _part_default(f)
            out[f.name] = replace(base, **into[f.name]) if base is not None else f.metadata["part"](**into[f.name])
    return out


def flat_keywords(cls: type) -> type:
    """Class decorator: the dataclass also takes its parts' settings by their own names, so
    `FinetuneSettings(model=..., output=..., task="sst2", seed=1)` fills `data_options.task` and `train.seed`."""
    init = cls.__init__

    @functools.wraps(init)
    def __init__(self, *args: Any, **given: Any) -> None:
        init(self, *args, **route_keywords(cls, given))

    cls.__init__ = __init__
    return cls


def check_settings(settings: Any) -> None:
    """Every value within what its field's metadata allows (parts included), else a `SettingError`."""
    for f in fields(settings):
        value = getattr(settings, f.name)
        if f.metadata.get("part"):
            check_settings(value)
            continue
        if value is None:
            continue
        meta, name = f.metadata, "{" + f.name + "}"
        if meta.get("positive") and not value > 0:
            raise SettingError(name + " must be positive, got {got}", owner=type(settings), got=value)
        if meta.get("non_negative") and value < 0:
            raise SettingError(name + " must be 0 or more, got {got}", owner=type(settings), got=value)
        _check_range(settings, f, value)
        if meta.get("choices") and value not in meta["choices"]:
            raise SettingError(name + " must be one of {choices}, got {got!r}", owner=type(settings),
                               choices=", ".join(meta["choices"]), got=value)


def _check_range(settings: Any, f: Field, value: Any) -> None:
    """Each number of `value` (one, or a list's) within the field's `minimum` and `maximum`."""
    low, high = f.metadata.get("minimum"), f.metadata.get("maximum")
    for each in value if isinstance(value, (list, tuple)) else (value,):
        if not isinstance(each, (int, float)) or isinstance(each, bool):
            continue
        if each == math.inf and "inf_means" in f.metadata:
            continue
        if (high is not None and not each <= high) or (low is not None and not each >= low):
            bounds = (f"at least {low:,}" if high is None else f"at most {high:,}" if low is None
                      else f"from {low:,} to {high:,}")
            raise SettingError("{" + f.name + "} must be " + bounds + ", got {got}", owner=type(settings), got=each)


def settings_record(settings: Any) -> dict[str, Any]:
    """What a run folder records of its settings (run_config.json): every field, parts as nested objects,
    without the part fields the verb derives itself (`hide`)."""
    record = asdict(settings)
    for f in part_fields(type(settings)):
        for name in f.metadata["hide"]:
            record[f.name].pop(name, None)
    return record


def flatten(record: Mapping[str, Any]) -> dict[str, Any]:
    """A recorded settings object with its parts' settings lifted to the top, by their own names."""
    out: dict[str, Any] = {}
    for key, value in record.items():
        if isinstance(value, Mapping):
            out.update(flatten(value))
        else:
            out[key] = value
    return out
