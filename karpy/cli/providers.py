"""`karpy providers`: the installed cloud providers."""

from __future__ import annotations

import argparse


def add(
    commands: argparse._SubParsersAction[argparse.ArgumentParser],
) -> None:
    cmd = commands.add_parser(
        "providers",
        help="list the installed cloud providers (entry-point group karpy.cloudproviders)",
    )
    cmd.set_defaults(func=_run_providers)


def _run_providers(args: argparse.Namespace) -> int:
    from karpy.cloudprovider.registry import installed_providers

    for name, target in sorted(installed_providers().items()):
        print(f"{name}\t{target}")
    return 0
