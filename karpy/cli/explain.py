"""`karpy explain`: why a pod is pending, why a node is or is not disrupted
(docs/tools.md)."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from karpy.cli._tool_flags import (
    add_settings_arguments,
    add_source_arguments,
    report_view_error,
    settings_from_args,
)

if TYPE_CHECKING:
    from karpy.controllers.settings import Settings
    from karpy.tools.explain import NodeExplanation, PodExplanation


def add(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    cmd = commands.add_parser(
        "explain",
        help="explain why a pod is pending or why a node is (not) disrupted (read-only)",
        description="Read a live cluster or a snapshot into karpy's own model and explain "
        "one object with the provisioner's and disruption's code, writing nothing: "
        "'pod NS/NAME' names, for every NodePool, why it cannot host the pod (or where the "
        "pod is); 'node NAME' says for which disruption methods the node is a candidate, "
        "or every reason it is not.",
    )
    cmd.add_argument("what", choices=("pod", "node"), help="what to explain")
    cmd.add_argument("name", help="NS/NAME of a pod (NAME alone: namespace default), or "
                     "a node's NAME")
    add_source_arguments(cmd, required=False, kubeconfig_help="a live cluster (default: "
                         "$KUBECONFIG or ~/.kube/config; read with get/list/watch only)")
    cmd.add_argument("-o", "--output", choices=("text", "json"), default="text",
                     help="text (default) or json (docs/tools.md has the schema)")
    cmd.add_argument("--cloud-provider", metavar="NAME",
                     help="whose catalogue to use (default: the provider serving the "
                     "NodePools' NodeClasses, else kwok)")
    add_settings_arguments(cmd)
    cmd.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    import asyncio
    import json

    from karpy.tools.view import SnapshotError, ViewError

    prepared = settings_from_args("explain", args)
    if prepared is None:
        return 2
    settings, provider_settings = prepared
    try:
        answer = asyncio.run(_explain(args, settings, provider_settings))
    except (SnapshotError, ViewError) as exc:
        return report_view_error("explain", exc)
    if args.output == "json":
        print(json.dumps(answer.to_dict(), indent=2, sort_keys=False))
    else:
        from karpy.tools.explain import NodeExplanation, render_node, render_pod

        sys.stdout.write(render_node(answer) if isinstance(answer, NodeExplanation)
                         else render_pod(answer))
    from karpy.tools.explain import NodeExplanation as _Node

    found = answer.found if isinstance(answer, _Node) else answer.status != "not-found"
    return 0 if found else 3


async def _explain(
    args: argparse.Namespace, settings: Settings, provider_settings: dict[str, str]
) -> PodExplanation | NodeExplanation:
    from karpy.tools.explain import explain_node_in, explain_pod_in
    from karpy.tools.view import LiveCluster, Snapshot, open_view

    source = (Snapshot.load(args.snapshot) if args.snapshot
              else LiveCluster(kubeconfig=args.kubeconfig, context=args.context))
    async with open_view(source, provider=args.cloud_provider,
                         provider_settings=provider_settings, settings=settings) as view:
        if args.what == "pod":
            return await explain_pod_in(view, args.name)
        return await explain_node_in(view, args.name)
