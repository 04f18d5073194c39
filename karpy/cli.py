"""The ``karpy`` command line."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from karpy import __version__


def build_parser() -> argparse.ArgumentParser:
    """Return the argument parser of the ``karpy`` command (one subcommand per job)."""
    parser = argparse.ArgumentParser(
        prog="karpy",
        description="A Kubernetes node autoscaler that speaks Karpenter's v1 API.",
    )
    parser.add_argument("--version", action="version", version=f"karpy {__version__}")
    parser.add_subparsers(dest="command", metavar="COMMAND")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``karpy`` command; return its exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
