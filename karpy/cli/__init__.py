"""The ``karpy`` command line: one module per subcommand, each with an ``add(commands)``
that declares its parser and sets ``func`` to the function that runs it."""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from karpy import __version__
from karpy.cli import convert, crds, explain, providers, run, simulate, snapshot, top

__all__ = ["build_parser", "main"]

_COMMANDS = (run, providers, crds, convert, simulate, snapshot, explain, top)
"""The subcommand modules, in the order ``karpy --help`` lists them."""


def build_parser() -> argparse.ArgumentParser:
    """Return the argument parser of the ``karpy`` command (one subcommand per job)."""
    parser = argparse.ArgumentParser(
        prog="karpy",
        description="A Kubernetes node autoscaler that speaks Karpenter's v1 API.",
    )
    parser.add_argument("--version", action="version", version=f"karpy {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    for command in _COMMANDS:
        command.add(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``karpy`` command; return its exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 0
    func = getattr(args, "func", None)
    if func is not None:
        return int(func(args))
    return 0
