"""`karpy convert`: v1beta1/v1alpha5 manifests to v1."""

from __future__ import annotations

import argparse
import sys


def add(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
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
        # Malformed input: one line, and the status argparse gives a malformed command.
        print(f"karpy convert: {' '.join(str(err).split())}", file=sys.stderr)
        return 2
    sys.stdout.write(dump_documents(result.documents))
    for note in result.notes:
        print(note, file=sys.stderr)
    return 0
