"""`karpy simulate`: a dry run of provisioning and consolidation (docs/tools.md)."""

from __future__ import annotations

import argparse

from karpy.cli._tool_flags import (
    add_settings_arguments,
    add_source_arguments,
    report_view_error,
    settings_from_args,
)


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
    add_source_arguments(cmd, required=True,
                         kubeconfig_help="a live cluster (read with get/list only)")
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

    from karpy.tools.simulate import SimulateOptions, render, run_simulation
    from karpy.tools.view import SnapshotError, ViewError

    prepared = settings_from_args("simulate", args)
    if prepared is None:
        return 2
    settings, provider_settings = prepared
    options = SimulateOptions(
        snapshot=args.snapshot, kubeconfig=args.kubeconfig, context=args.context,
        what_if=tuple(args.filename), provider=args.cloud_provider,
        provider_settings=provider_settings, settings=settings,
    )
    try:
        report = asyncio.run(run_simulation(options))
    except (SnapshotError, ViewError) as exc:
        return report_view_error("simulate", exc)
    if args.output == "json":
        print(json.dumps(report.to_json(), indent=2))
    else:
        render(report, Console())
    return 0
