"""`karpy simulate`: a dry run of provisioning and consolidation (docs/tools.md)."""

from __future__ import annotations

import argparse
import sys

from karpy.cli._tool_settings import add_settings_arguments


def add(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    cmd = commands.add_parser(
        "simulate",
        help="show what provisioning and consolidation would do (read-only dry run)",
        description="Run karpy's provisioner and disruption controller on a live cluster "
        "or a snapshot without writing anything, and show the NodeClaims it would create, "
        "the pods that would stay pending, the consolidation it would start and the $/h "
        "before and after. -f replaces or adds objects (usually NodePools) to ask "
        "'what if'; the output then shows the difference.",
    )
    source = cmd.add_mutually_exclusive_group(required=True)
    source.add_argument("--kubeconfig", help="a live cluster (read with get/list only)")
    source.add_argument("--snapshot", metavar="FILE",
                        help="a snapshot file (karpy snapshot, or kubectl get -o yaml)")
    cmd.add_argument("--context", help="the kubeconfig context (default: current)")
    cmd.add_argument("-f", "--filename", action="append", default=[], metavar="FILE",
                     help="objects replacing or adding to the cluster's, e.g. a changed "
                     "NodePool (repeatable)")
    cmd.add_argument("-o", "--output", choices=("table", "json"), default="table",
                     help="table (default) or json (docs/tools.md has the schema)")
    cmd.add_argument("--cloud-provider", metavar="NAME",
                     help="whose catalogue to price with (default: the provider serving the "
                     "NodePools' NodeClasses, else kwok)")
    add_settings_arguments(cmd)
    cmd.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    import asyncio
    import json

    from rich.console import Console

    from karpy.cli._logs import configure_command_logging
    from karpy.cli._tool_settings import settings_from_args
    from karpy.options import ConfigError
    from karpy.tools.simulate import SimulateOptions, render, run_simulation
    from karpy.tools.view import SnapshotError, ViewError

    configure_command_logging(args.log_level)
    try:
        settings, provider_settings = settings_from_args(args)
    except ConfigError as exc:
        print(f"karpy simulate: {exc}", file=sys.stderr)
        return 2
    options = SimulateOptions(
        snapshot=args.snapshot, kubeconfig=args.kubeconfig, context=args.context,
        what_if=tuple(args.filename), provider=args.cloud_provider,
        provider_settings=provider_settings, settings=settings,
    )
    try:
        report = asyncio.run(run_simulation(options))
    except SnapshotError as exc:
        # A malformed snapshot or -f manifest: one line, the status of a malformed command.
        print(f"karpy simulate: {' '.join(str(exc).split())}", file=sys.stderr)
        return 2
    except ViewError as exc:
        print(f"karpy simulate: {exc}", file=sys.stderr)
        return 1
    if args.output == "json":
        print(json.dumps(report.to_json(), indent=2))
    else:
        render(report, Console())
    return 0
