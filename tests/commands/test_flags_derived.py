"""Every flag is a settings field, and each default is written once.

(a) No module under bertforge/commands declares a flag by hand (`add_argument`, or a helper that calls it):
every flag comes from `flags.add_settings_arguments`. (b) For every verb, each flag of its parser is a field of
the settings the verb's parser was built from, with the settings' default: a flag added by hand, or a default
that a verb (or `set_defaults`) writes a second time, fails here. (c) Where a library function keeps keyword
defaults beside the settings its verb runs on, they are the settings' defaults.
"""
from __future__ import annotations

import argparse
import ast
import functools
import importlib
import inspect
import pkgutil
from dataclasses import MISSING, fields
from pathlib import Path

import pytest

import bertforge.commands
from bertforge.commands import flags

COMMANDS = Path(bertforge.commands.__file__).parent
# helpers of commands/options.py that call add_argument for their caller
HAND_HELPERS = {"add_output_arguments", "add_text_argument"}
# argparse's own flag
COMMON = {"help"}


def _hand_declared(path: Path) -> list[str]:
    """`file:line` of each call that declares a flag by hand in the module at `path`."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None
        if name == "add_argument" or name in HAND_HELPERS:
            found.append(f"{path.name}:{node.lineno} {name}")
    return found


@pytest.mark.parametrize("path", [p for p in sorted(COMMANDS.glob("*.py")) if p.name != "flags.py"],
                         ids=lambda p: p.name)
def test_no_flag_is_declared_by_hand(path):
    assert _hand_declared(path) == []


def test_the_scan_finds_a_flag_declared_by_hand(tmp_path):
    """The scan's own check: both spellings of a hand-declared flag are found, a derived one is not."""
    module = tmp_path / "verb.py"
    module.write_text("def register(p):\n    p.add_argument('--seed', default=42)\n    add_output_arguments(p)\n"
                      "    add_settings_arguments(p, Settings)\n")
    assert _hand_declared(module) == ["verb.py:2 add_argument", "verb.py:3 add_output_arguments"]


# ---- (b) each flag's default is its settings field's ----------------------------------------------------------
def _verb_parsers(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()):
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if path and not subs:
        yield " ".join(path), parser
    for sub in subs:
        for name, child in sub.choices.items():
            yield from _verb_parsers(child, path + (name,))


@functools.cache
def _built() -> tuple[dict[str, argparse.ArgumentParser], dict[int, list[tuple]]]:
    """Every verb's parser, and per parser the settings classes its flags were derived from, with the verb's
    default instance and the names it hides (recorded by wrapping `add_settings_arguments` while building)."""
    records: dict[int, list[tuple]] = {}
    original = flags.add_settings_arguments

    def recording(parser, cls, defaults=None, **kwargs):
        records.setdefault(id(parser._actions), []).append((cls, defaults, kwargs))
        return original(parser, cls, defaults, **kwargs)

    users = [flags] + [importlib.import_module(f"bertforge.commands.{m.name}")
                       for m in pkgutil.iter_modules([str(COMMANDS)])]
    users = [m for m in users if getattr(m, "add_settings_arguments", None) is original]
    with pytest.MonkeyPatch.context() as patch:
        for module in users:
            patch.setattr(module, "add_settings_arguments", recording)
        from bertforge.cli import build_parser
        parser = build_parser()
    return dict(_verb_parsers(parser)), records


def _expected_defaults(cls: type, defaults, kwargs: dict) -> dict[str, object]:
    """dest -> the default the flag of each field of `cls` must have (a part's fields are recorded on their own)."""
    hide, include = set(kwargs.get("hide", ())), set(kwargs.get("include", ()))
    deferred = {**{f.name: f.metadata.get("deferred") for f in fields(cls)}, **dict(kwargs.get("deferred") or {})}
    out = {}
    for f in fields(cls):
        if f.metadata.get("part") or f.name in hide or (not f.metadata.get("cli", True) and f.name not in include):
            continue
        if deferred.get(f.name):
            out[f.name] = argparse.SUPPRESS
        elif defaults is not None:
            out[f.name] = getattr(defaults, f.name)
        elif f.default is not MISSING:
            out[f.name] = f.default
        elif f.default_factory is not MISSING:
            out[f.name] = f.default_factory()
        else:
            out[f.name] = None  # required: argparse's default is None
    return out


def _mismatches(parser: argparse.ArgumentParser, records: list[tuple]) -> list[str]:
    expected: dict[str, object] = {}
    for cls, defaults, kwargs in records:
        expected.update(_expected_defaults(cls, defaults, kwargs))
    wrong = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction) or action.dest in COMMON:
            continue
        shown = "/".join(action.option_strings) or action.dest
        if action.dest not in expected:
            wrong.append(f"{shown}: no settings field")
        elif action.default != expected[action.dest]:
            wrong.append(f"{shown}: default {action.default!r}, its setting's {expected[action.dest]!r}")
    return wrong


@pytest.mark.parametrize("verb", list(_built()[0]))
def test_each_flag_is_a_setting_with_the_settings_default(verb):
    parsers, records = _built()
    parser = parsers[verb]
    assert _mismatches(parser, records.get(id(parser._actions), [])) == []


def test_a_default_written_twice_is_caught():
    """Planted: glue's --seed given a second default by the verb, and a flag declared beside the settings."""
    parsers, records = _built()
    glue = parsers["glue"]
    seed = next(a for a in glue._actions if a.dest == "seed")
    assert _mismatches(glue, records[id(glue._actions)]) == []
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(seed, "default", 43)
        assert _mismatches(glue, records[id(glue._actions)]) == ["--seed: default 43, its setting's 42"]
    extra = argparse.ArgumentParser()
    extra.add_argument("--seed", type=int, default=42)
    assert _mismatches(extra, []) == ["--seed: no settings field"]


# ---- (c) library defaults beside the settings ------------------------------------------------------------------
def _library_defaults():
    from bertforge.data.prepare import prepare_corpus
    from bertforge.data.prepare_settings import PrepareSettings
    from bertforge.pretraining.distill import DistillInitSettings, init_student
    from bertforge.serving.export_settings import ExportSettings
    from bertforge.serving.onnx_export import export_onnx
    from bertforge.serving.server import serve, server_config
    from bertforge.serving.settings import ServerSettings
    return [(server_config, ServerSettings, {"app": None, "log_level": None}),
            (serve, ServerSettings, {"app": None}),
            (prepare_corpus, PrepareSettings, {"show_progress": "progress", "vocab_dir": None, "inputs": None,
                                               "output_dir": None, "shard_tokens": None, "chunk_bytes": None,
                                               "resume": None}),
            (export_onnx, ExportSettings, {"directory": None, "output": None}),
            (init_student, DistillInitSettings, {"teacher_dir": None, "output_dir": None})]


@pytest.mark.parametrize("function, cls, renamed", _library_defaults(), ids=lambda v: getattr(v, "__name__", ""))
def test_library_keyword_defaults_are_the_settings_defaults(function, cls, renamed):
    """A parameter is the field of its name (or `renamed`'s; None: not a setting); its default is the field's."""
    by_name = {f.name: f for f in fields(cls)}
    for name, parameter in inspect.signature(function).parameters.items():
        field_name = renamed.get(name, name)
        if field_name is None:
            continue
        assert field_name in by_name, f"{function.__name__}({name}): no {cls.__name__} field"
        field = by_name[field_name]
        if parameter.default is not inspect.Parameter.empty:
            assert parameter.default == field.default, f"{function.__name__}({name})"
