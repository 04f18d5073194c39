"""`karpy snapshot`: write a cluster's objects to a file for `karpy simulate`."""

from __future__ import annotations

import argparse
import sys


def add(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    cmd = commands.add_parser(
        "snapshot",
        help="write the objects karpy reads from a live cluster to a file (read-only)",
        description="List the Pods, Nodes, NodeClaims, NodePools, NodeClasses, DaemonSets, "
        "PDBs, volumes and Namespaces karpy reads (get/list only) and write them as one "
        "YAML List, for karpy simulate --snapshot.",
    )
    cmd.add_argument("--kubeconfig", help="kubeconfig path (default: $KUBECONFIG)")
    cmd.add_argument("--context", help="the kubeconfig context (default: current)")
    cmd.add_argument("-o", "--output", required=True, metavar="FILE",
                     help="where to write the snapshot ('-' for standard output)")
    cmd.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    import asyncio
    from pathlib import Path

    from karpy.tools.simulate import load_live
    from karpy.tools.view import SnapshotError, ViewError

    try:
        snapshot = asyncio.run(load_live(args.kubeconfig, args.context))
    except (SnapshotError, ViewError) as exc:
        print(f"karpy snapshot: {exc}", file=sys.stderr)
        return 1
    text = snapshot.dump()
    if args.output == "-":
        sys.stdout.write(text)
    else:
        try:
            Path(args.output).write_text(text, encoding="utf-8")
        except OSError as exc:
            print(f"karpy snapshot: cannot write {args.output}: {exc}", file=sys.stderr)
            return 1
    counts = ", ".join(f"{n} {kind}" for kind, n in snapshot.count().items())
    print(f"karpy snapshot: wrote {counts or 'nothing'} to {args.output}", file=sys.stderr)
    return 0
