"""One module per CLI verb: `register(subparsers)` declares its flags, `run(args)` calls the library."""
import argparse


def add_common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--debug", action="store_true", help="show full tracebacks on errors")
