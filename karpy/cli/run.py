"""`karpy run`: the autoscaler."""

from __future__ import annotations

import argparse
import sys


def add(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from karpy.options import add_run_arguments

    cmd = commands.add_parser(
        "run",
        help="run the autoscaler (controllers + the chosen cloud provider)",
        description="Run karpy's controllers against the cluster with the chosen provider. "
        "Every flag falls back to its environment variable (Karpenter's names).",
    )
    add_run_arguments(cmd)
    cmd.set_defaults(func=_run_operator)


def _run_operator(args: argparse.Namespace) -> int:
    import os

    from karpy.operator import run_operator
    from karpy.options import options_from_args
    from karpy.runtime import configure_logging, run

    configure_logging((args.log_level or os.environ.get("LOG_LEVEL", "info")).upper())
    try:
        options = options_from_args(args)
    except ValueError as err:
        print(f"karpy run: {err}", file=sys.stderr)
        return 2
    run(run_operator(options))
    return 0
