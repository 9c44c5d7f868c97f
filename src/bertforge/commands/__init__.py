"""One module per CLI verb: `register(subparsers)` derives its flags from the verb's settings, `run(args)` builds
the settings back (`commands.flags.settings_from_args`) and calls the library."""
import argparse
from dataclasses import dataclass

from bertforge.settings import setting


@dataclass
class CommonOptions:
    """What every verb takes beside its own settings: how an error is shown."""

    debug: bool = setting(False, "show full tracebacks on errors")


def add_common(parser: argparse.ArgumentParser) -> None:
    """The `CommonOptions` flags (--debug) of one verb's parser."""
    from bertforge.commands.flags import add_settings_arguments
    add_settings_arguments(parser, CommonOptions)
