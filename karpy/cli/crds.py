"""`karpy crds`: the CustomResourceDefinitions, one set per provider."""

from __future__ import annotations

import argparse
import sys


def add(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    cmd = commands.add_parser(
        "crds",
        help="write the CustomResourceDefinitions (one set per installed provider)",
        description="Write the CRDs generated from karpy's API models and the installed "
        "providers' NodeClass models: for each provider a set of Karpenter's NodePool and "
        "NodeClaim (Karpenter's label rules plus that provider's) and the provider's "
        "NodeClass, in OUTPUT/<provider>/; with --provider, that one set in OUTPUT.",
    )
    cmd.add_argument(
        "--output",
        "-o",
        default=None,
        help="directory to write, or '-' for one YAML stream on stdout (with --provider); "
        "default: crds (crds/<provider> with --provider)",
    )
    cmd.add_argument(
        "--provider",
        metavar="NAME",
        help="only the set of this provider (aws, azure, kwok, ...: an installed one)",
    )
    cmd.add_argument(
        "--docs",
        metavar="FILE",
        help="also write the API reference (markdown) to FILE, e.g. docs/api.md",
    )
    cmd.add_argument(
        "--check",
        action="store_true",
        help="write nothing; exit 1 if the CRDs (and --docs FILE) are missing or out of date",
    )
    cmd.set_defaults(func=_run_crds)


def _run_crds(args: argparse.Namespace) -> int:
    from pathlib import Path

    from karpy.apis import crdgen

    provider: str | None = args.provider
    if provider is not None:
        try:
            crdgen.provider_extensions(provider)
        except ValueError as err:
            print(f"karpy crds: --provider: {err}", file=sys.stderr)
            return 2
    if args.output == "-":
        if provider is None or args.check or args.docs:
            print(
                "karpy crds: --output - prints one provider's set: add --provider NAME "
                "(and no --check or --docs)",
                file=sys.stderr,
            )
            return 2
        sys.stdout.write("".join(crdgen.generate(provider=provider).values()))
        return 0
    default = "crds" if provider is None else f"crds/{provider}"
    directory = Path(args.output or default)
    docs = Path(args.docs) if args.docs else None
    if args.check:
        stale = [str(directory / name) for name in crdgen.stale(directory, provider=provider)]
        if docs is not None and (
            not docs.exists() or docs.read_text(encoding="utf-8") != crdgen.api_reference()
        ):
            stale.append(str(docs))
        for name in stale:
            print(f"{name} is out of date; run `karpy crds`", file=sys.stderr)
        return 1 if stale else 0
    for path in crdgen.write(directory, provider=provider):
        print(path)
    if docs is not None:
        docs.parent.mkdir(parents=True, exist_ok=True)
        docs.write_text(crdgen.api_reference(), encoding="utf-8")
        print(docs)
    return 0
