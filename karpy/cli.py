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
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    _add_run_command(commands)
    _add_providers_command(commands)
    _add_crds_command(commands)
    _add_convert_command(commands)
    return parser


# `karpy run` (the autoscaler) ------------------------------------------------------------


def _add_run_command(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
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


def _add_providers_command(
    commands: argparse._SubParsersAction[argparse.ArgumentParser],
) -> None:
    cmd = commands.add_parser(
        "providers",
        help="list the installed cloud providers (entry-point group karpy.cloudproviders)",
    )
    cmd.set_defaults(func=_run_providers)


def _run_providers(args: argparse.Namespace) -> int:
    from karpy.cloudprovider import installed_providers

    for name, target in sorted(installed_providers().items()):
        print(f"{name}\t{target}")
    return 0


# `karpy crds` and `karpy convert` (the API's commands) ----------------------------------


def _add_crds_command(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
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


def _add_convert_command(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    cmd = commands.add_parser(
        "convert",
        help="convert v1beta1 (and v1alpha5) Karpenter manifests to v1",
        description="Read Karpenter v1beta1 NodePool/NodeClaim/NodeClass (and v1alpha5 "
        "Provisioner/AWSNodeTemplate) manifests, write v1 manifests to stdout and report "
        "every field dropped or changed on stderr.",
    )
    cmd.add_argument("files", nargs="*", default=["-"], help="YAML files; '-' or none: stdin")
    cmd.add_argument(
        "--default-nodeclass",
        metavar="KIND.GROUP",
        help="NodeClass for old references that name no kind (e.g. EC2NodeClass.karpenter.k8s.aws)",
    )
    cmd.set_defaults(func=_run_convert)


def _run_convert(args: argparse.Namespace) -> int:
    from karpy.apis.convert import (
        ConversionError,
        convert_documents,
        dump_documents,
        load_documents,
        parse_nodeclass,
    )

    try:
        default = parse_nodeclass(args.default_nodeclass) if args.default_nodeclass else None
        documents = load_documents(args.files, stdin=sys.stdin)
        result = convert_documents(documents, default_nodeclass=default)
    except ConversionError as err:
        print(f"karpy convert: {err}", file=sys.stderr)
        return 1
    sys.stdout.write(dump_documents(result.documents))
    for note in result.notes:
        print(note, file=sys.stderr)
    return 0


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


if __name__ == "__main__":
    sys.exit(main())
