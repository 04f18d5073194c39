"""The flags ``karpy explain`` and ``karpy simulate`` share with ``karpy run``: the
provider's settings, the cluster name and feature gates the controllers they drive are
built with, and the level of those controllers' own log lines."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from karpy.controllers.settings import Settings

__all__ = ["add_settings_arguments", "settings_from_args"]


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


def settings_from_args(args: argparse.Namespace) -> tuple[Settings, dict[str, str]]:
    """The controllers' settings and the provider's, from the flags of
    :func:`add_settings_arguments`.

    Raises :class:`karpy.options.ConfigError` naming the flag of a malformed value.
    """
    from karpy.controllers.settings import FeatureGates, Settings
    from karpy.options import ConfigError, parse_provider_settings

    provider_settings = parse_provider_settings(args.provider_setting)
    try:
        gates = FeatureGates.parse(args.feature_gates)
    except ValueError as exc:
        raise ConfigError(f"--feature-gates: {exc}") from exc
    return Settings(cluster_name=args.cluster_name, feature_gates=gates), provider_settings
