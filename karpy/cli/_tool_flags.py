"""What ``karpy explain`` and ``karpy simulate`` share: where they read the cluster from
(a live cluster or a snapshot), the flags they take from ``karpy run`` (the provider's
settings, the cluster name and feature gates the controllers they drive are built with,
the level of those controllers' own log lines), and how a failure to read the cluster
is reported."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from karpy.controllers.settings import Settings

__all__ = [
    "add_settings_arguments",
    "add_source_arguments",
    "report_view_error",
    "settings_from_args",
]


def add_source_arguments(cmd: argparse.ArgumentParser, *, required: bool,
                         kubeconfig_help: str) -> None:
    """Add ``--kubeconfig`` or ``--snapshot`` (one of them, ``required`` or not) and
    ``--context``."""
    source = cmd.add_mutually_exclusive_group(required=required)
    source.add_argument("--kubeconfig", help=kubeconfig_help)
    source.add_argument("--snapshot", metavar="FILE",
                        help="a snapshot file (karpy snapshot, or kubectl get -o yaml)")
    cmd.add_argument("--context", help="the kubeconfig context (default: current)")


def add_settings_arguments(cmd: argparse.ArgumentParser) -> None:
    """Add ``--provider-setting``, ``--cluster-name``, ``--feature-gates``, ``--log-level``."""
    from karpy.options import add_provider_setting_argument

    add_provider_setting_argument(
        cmd, help="a provider setting, as for karpy run (repeatable)"
    )
    cmd.add_argument("--cluster-name", default="", help="as karpy run's --cluster-name")
    cmd.add_argument("--feature-gates", metavar="NAME=BOOL,...", default="",
                     help="as karpy run's, e.g. SpotToSpotConsolidation=true")
    cmd.add_argument("--log-level", default="critical",
                     help="show the controllers' own log lines at this level (default: none)")


def settings_from_args(
    command: str, args: argparse.Namespace
) -> tuple[Settings, dict[str, str]] | None:
    """Set up ``karpy <command>``'s logging and return the controllers' settings and the
    provider's from the flags of :func:`add_settings_arguments`; None, once a one-line
    error naming the flag is printed, when a value is malformed (exit status 2)."""
    from karpy.cli._logs import configure_command_logging
    from karpy.controllers.settings import FeatureGates, Settings
    from karpy.options import ConfigError, parse_provider_settings

    configure_command_logging(args.log_level)
    try:
        provider_settings = parse_provider_settings(args.provider_setting)
        try:
            gates = FeatureGates.parse(args.feature_gates)
        except ValueError as exc:
            raise ConfigError(f"--feature-gates: {exc}") from exc
    except ConfigError as exc:
        print(f"karpy {command}: {exc}", file=sys.stderr)
        return None
    return Settings(cluster_name=args.cluster_name, feature_gates=gates), provider_settings


def report_view_error(command: str, exc: Exception) -> int:
    """Print why the cluster could not be read, on one line, and return the exit status:
    2 for a malformed snapshot or -f manifest (a malformed command), else 1."""
    from karpy.tools.view import SnapshotError

    if isinstance(exc, SnapshotError):
        print(f"karpy {command}: {' '.join(str(exc).split())}", file=sys.stderr)
        return 2
    print(f"karpy {command}: {exc}", file=sys.stderr)
    return 1
