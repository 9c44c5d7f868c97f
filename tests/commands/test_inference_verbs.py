"""The verbs that run a saved model (predict, evaluate, embed, features, generate, score, fill-mask) and `info` take
their flags from their settings dataclasses: every flag is a settings field, the command-line defaults are the
settings' defaults, and the flags, defaults and bounds are the ones these verbs have always had."""
from __future__ import annotations

import argparse
import functools
import re
from dataclasses import fields

import pytest

from bertforge.cli import build_parser
from bertforge.commands import CommonOptions
from bertforge.commands.flags import settings_from_args
from bertforge.commands.info import InfoSettings
from bertforge.evaluation.evaluate import EvaluateSettings
from bertforge.generation.runs import FillMaskSettings, GenerateSettings, ScoreSettings
from bertforge.serving.embed import EmbedSettings
from bertforge.tasks.feature_extraction import FeaturesSettings
from bertforge.tasks.predict import PredictSettings

VERBS = {"predict": PredictSettings, "evaluate": EvaluateSettings, "embed": EmbedSettings,
         "features": FeaturesSettings, "generate": GenerateSettings, "score": ScoreSettings,
         "fill-mask": FillMaskSettings, "info": InfoSettings}
REQUIRED = {"predict": ["--model", "m"], "evaluate": ["--model", "m"], "embed": ["--model", "m", "--output", "o.npy"],
            "features": ["--model", "m", "--output", "o.safetensors"], "generate": ["--model", "m"],
            "score": ["--model", "m"], "fill-mask": ["--model", "."], "info": ["--model", "tiny"]}
LIBRARY = {"predict": lambda: PredictSettings(model="m"), "evaluate": lambda: EvaluateSettings(model="m"),
           "embed": lambda: EmbedSettings(model="m", output="o.npy"),
           "features": lambda: FeaturesSettings(model="m", output="o.safetensors"),
           "generate": lambda: GenerateSettings(model="m"), "score": lambda: ScoreSettings(model="m"),
           "fill-mask": lambda: FillMaskSettings(model="."), "info": lambda: InfoSettings(model="tiny")}

INFERENCE = {"--device", "--precision", "--debug"}
LONG_INPUTS = {"--max-seq-length", "--long-inputs", "--chunk-stride"}  # tasks.long_inputs.LongInputOptions
FLAGS = {  # each verb's flags as its hand-written parser had them (and the long-input part of predict, evaluate, embed)
    "predict": {"--model", "--input", "--text", "--text-column", "--text-pair-column", "--output", "--overwrite",
                "--batch-size", "--max-batch-tokens", "--max-chars"} | INFERENCE | LONG_INPUTS,
    "evaluate": {"--model", "--task", "--data", "--eval", "--split", "--max-eval-samples", "--skip-bad-rows",
                 "--vectors-dir", "--corpus-chunk", "--output", "--overwrite", "--batch-size",
                 "--max-batch-tokens"} | INFERENCE | LONG_INPUTS,
    "embed": {"--model", "--input", "--text", "--output", "--overwrite", "--pooling", "--normalize", "--no-normalize",
              "--batch-size", "--backend"} | INFERENCE | LONG_INPUTS,
    "features": {"--model", "--input", "--text", "--layers", "--combine", "--max-seq-length", "--max-chars",
                 "--batch-size", "--max-batch-tokens", "--output", "--overwrite"} | INFERENCE,
    "generate": {"--model", "--source", "--input", "--length-beam", "--max-source-length", "--text", "--span-lengths",
                 "--length", "--prefix", "--sampler", "--iterations", "--num-samples", "--batch-size", "--seed",
                 "--temperature", "--top-k", "--top-p", "--burn-in", "--parallel", "--max-tokens",
                 "--no-progress"} | INFERENCE,
    "score": {"--model", "--input", "--text", "--per-token", "--max-tokens", "--no-progress"} | INFERENCE,
    "fill-mask": {"--model", "--text", "--top-k", "--targets", "--max-chars", "--device", "--debug"},
    "info": {"--model", "--seq-len", "--debug"},
}
NUMBERS = [  # verb, flag, default, largest value taken
    ("predict", "--batch-size", 64, 65_536), ("predict", "--max-batch-tokens", 16_384, 1 << 20),
    ("predict", "--max-chars", 100_000, 100_000_000), ("evaluate", "--batch-size", 64, 65_536),
    ("evaluate", "--max-batch-tokens", 16_384, 1 << 20), ("evaluate", "--corpus-chunk", 65_536, 16_777_216),
    ("evaluate", "--max-eval-samples", None, 1_000_000_000), ("embed", "--batch-size", 32, 65_536),
    ("features", "--batch-size", 32, 65_536), ("features", "--max-seq-length", 512, 32_768),
    ("features", "--max-chars", 100_000, 100_000_000), ("generate", "--length-beam", 3, 100),
    ("generate", "--max-source-length", 256, 8_192), ("generate", "--length", None, 8_192),
    ("generate", "--iterations", None, 1_000), ("generate", "--num-samples", 1, 10_000),
    ("generate", "--batch-size", 8, 1_024), ("generate", "--seed", 0, 2**32 - 1),
    ("generate", "--top-k", 0, 1_000_000), ("generate", "--burn-in", 0, 999), ("generate", "--max-tokens", 8_192, 1 << 20),
    ("score", "--max-tokens", 8_192, 1 << 20), ("fill-mask", "--top-k", 5, 1_000),
    ("fill-mask", "--max-chars", 100_000, 10_000_000), ("info", "--seq-len", 128, 32_768),
]


@functools.cache
def parser() -> argparse.ArgumentParser:
    return build_parser()


def verb_parser(verb: str) -> argparse.ArgumentParser:
    sub = next(a for a in parser()._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices[verb]


def setting_names(cls: type) -> set[str]:
    names = set()
    for f in fields(cls):
        names |= setting_names(f.metadata["part"]) if f.metadata.get("part") else {f.name}
    return names


@pytest.mark.parametrize("verb", VERBS)
def test_every_flag_is_a_setting_and_the_flags_are_the_verbs_own(verb):
    """No flag declared beside the settings (a hand-added `add_argument` fails this), and none lost or renamed."""
    options = [a for a in verb_parser(verb)._actions if a.option_strings and a.dest != "help"]
    assert {a.dest for a in options} <= setting_names(VERBS[verb]) | setting_names(CommonOptions), verb
    assert {flag for a in options for flag in a.option_strings} == FLAGS[verb]


@pytest.mark.parametrize("verb", VERBS)
def test_command_line_defaults_are_the_library_defaults(verb):
    """Each default is written once: a verb run with no optional flag runs its settings class's defaults."""
    args = parser().parse_args([verb, *REQUIRED[verb]])
    assert settings_from_args(VERBS[verb], args) == LIBRARY[verb]()


@pytest.mark.parametrize("verb, flag, default, most", NUMBERS, ids=[f"{v} {f}" for v, f, _, _ in NUMBERS])
def test_each_number_keeps_its_default_and_its_bound(verb, flag, default, most, capsys):
    action = verb_parser(verb)._option_string_actions[flag]
    assert action.default in (default, argparse.SUPPRESS if default is None else default)
    assert action.type(str(most)) == most
    with pytest.raises(SystemExit) as refused:
        parser().parse_args([verb, *REQUIRED[verb], flag, str(most + 1)])
    assert refused.value.code == 2 and f"argument {flag}: expected" in capsys.readouterr().err


def test_one_parenthetical_says_the_default_and_the_bound():
    helps = [a.help for verb in VERBS for a in verb_parser(verb)._actions if a.help]
    assert not [h for h in helps if re.search(r"\(default[^()]*\) \((default|at most|from) ", h)]
    by_flag = verb_parser("predict")._option_string_actions
    assert by_flag["--batch-size"].help.endswith("(default: 64; at most 65,536)")
    assert verb_parser("evaluate")._option_string_actions["--max-eval-samples"].help.endswith(
        "(default: all; at most 1,000,000,000)")


def test_repeated_and_positional_values_are_collected():
    args = parser().parse_args(["generate", "--model", "m", "--source", "a b", "--source", "c",
                                "--text", "x [MASK]", "--text", "y [MASK]", "z [MASK]"])
    s = settings_from_args(GenerateSettings, args)
    assert (s.source, s.text) == (["a b", "c"], ["x [MASK]", "y [MASK]", "z [MASK]"])
    fill = settings_from_args(FillMaskSettings, parser().parse_args(["fill-mask", "--model", ".", "a [MASK]",
                                                                     "b [MASK]", "--text", "c [MASK]"]))
    assert (fill.sentences, fill.text) == (["a [MASK]", "b [MASK]"], ["c [MASK]"])
