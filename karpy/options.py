"""How karpy is configured: the :class:`Options` value and ``karpy run``'s flags.

Every flag falls back to an environment variable with Karpenter's name
(BATCH_IDLE_DURATION, BATCH_MAX_DURATION, CLUSTER_NAME, METRICS_PORT, ...), so a
Deployment written for Karpenter configures karpy the same way.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from karpy.apis.duration import parse_duration
from karpy.cloudprovider import CLOUD_PROVIDER_ENV
from karpy.controllers.settings import FeatureGates, Settings

__all__ = ["Options", "add_run_arguments", "options_from_args"]


@dataclass(frozen=True, kw_only=True)
class Options:
    """How to run karpy: where the cluster is, which provider, the controllers' settings."""

    cloud_provider: str = "kwok"
    provider_settings: Mapping[str, str] = field(default_factory=dict)
    kubeconfig: str | None = None
    """None: in-cluster configuration in a pod, else ``$KUBECONFIG`` / ``~/.kube/config``."""
    settings: Settings = field(default_factory=Settings)
    leader_elect: bool = True
    leader_election_name: str = "karpenter-leader-election"
    leader_election_namespace: str = "kube-system"
    metrics_bind_address: str = ":8080"
    health_probe_bind_address: str = ":8081"
    graceful_shutdown_timeout: float = 30.0
    request_timeout: float = 30.0


# -- flags and environment (``karpy run``) ---------------------------------------------

# flag, environment variable (Karpenter's name), Settings field, default as text
_DURATION_FLAGS = (
    ("--batch-idle-duration", "BATCH_IDLE_DURATION", "batch_idle_duration", "1s"),
    ("--batch-max-duration", "BATCH_MAX_DURATION", "batch_max_duration", "10s"),
    ("--launch-ttl", "LAUNCH_TTL", "launch_ttl", "5m"),
    ("--registration-ttl", "REGISTRATION_TTL", "registration_ttl", "15m"),
    ("--insufficient-capacity-ttl", "INSUFFICIENT_CAPACITY_TTL", "insufficient_capacity_ttl", "3m"),
    ("--garbage-collection-grace", "GARBAGE_COLLECTION_GRACE", "garbage_collection_grace", "30s"),
    ("--disruption-validation-delay", "DISRUPTION_VALIDATION_DELAY",
     "disruption_validation_delay", "15s"),
    ("--disruption-replacement-timeout", "DISRUPTION_REPLACEMENT_TIMEOUT",
     "disruption_replacement_timeout", "10m"),
    ("--disruption-poll-period", "DISRUPTION_POLL_PERIOD", "disruption_poll_period", "10s"),
)


def _env_bool(environ: Mapping[str, str], name: str, default: bool) -> bool:
    text = environ.get(name)
    if text is None:
        return default
    return text.strip().lower() in ("1", "true", "yes", "on")


def add_run_arguments(parser: argparse.ArgumentParser) -> None:
    """Add ``karpy run``'s flags; each defaults to its environment variable, if set."""
    parser.add_argument(
        "--cloud-provider",
        help=f"the provider's entry-point name (env {CLOUD_PROVIDER_ENV}; default: kwok)",
    )
    parser.add_argument(
        "--provider-setting", action="append", default=[], metavar="KEY=VALUE",
        help="a setting passed to the provider (repeatable)",
    )
    parser.add_argument("--kubeconfig", help="kubeconfig path (default: in-cluster or $KUBECONFIG)")
    parser.add_argument("--cluster-name", help="env CLUSTER_NAME")
    for flag, env, _, default in _DURATION_FLAGS:
        parser.add_argument(flag, metavar="DURATION", help=f"env {env}; default {default}")
    parser.add_argument(
        "--disable-leader-election", action="store_true", default=None,
        help="run controllers without a Lease (env DISABLE_LEADER_ELECTION)",
    )
    parser.add_argument("--metrics-port", type=int, help="env METRICS_PORT; default 8080")
    parser.add_argument("--health-probe-port", type=int, help="env HEALTH_PROBE_PORT; default 8081")
    parser.add_argument("--log-level", help="env LOG_LEVEL; default info")
    parser.add_argument(
        "--feature-gates", metavar="NAME=BOOL,...",
        help="env FEATURE_GATES, e.g. SpotToSpotConsolidation=true,NodeRepair=true",
    )


def options_from_args(
    args: argparse.Namespace, environ: Mapping[str, str] | None = None
) -> Options:
    """Turn parsed ``karpy run`` flags (falling back to the environment) into Options.

    Raises ValueError naming the flag for a malformed value.
    """
    env = os.environ if environ is None else environ
    # Any: the durations go to Settings by field name, next to fields of other types.
    durations: dict[str, Any] = {}
    for flag, name, attr, default in _DURATION_FLAGS:
        text = getattr(args, flag[2:].replace("-", "_")) or env.get(name) or default
        try:
            durations[attr] = parse_duration(text).total_seconds()
        except ValueError as exc:
            raise ValueError(f"{flag} (env {name}): {exc}") from exc
    provider_settings: dict[str, str] = {}
    for item in args.provider_setting:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ValueError(f"--provider-setting {item!r}: expected KEY=VALUE")
        provider_settings[key] = value
    metrics_port = args.metrics_port if args.metrics_port is not None else int(
        env.get("METRICS_PORT", "8080"))
    health_port = args.health_probe_port if args.health_probe_port is not None else int(
        env.get("HEALTH_PROBE_PORT", "8081"))
    disable_le = (
        args.disable_leader_election
        if args.disable_leader_election is not None
        else _env_bool(env, "DISABLE_LEADER_ELECTION", False)
    )
    gates_text = getattr(args, "feature_gates", None) or env.get("FEATURE_GATES", "")
    try:
        gates = FeatureGates.parse(gates_text)
    except ValueError as exc:
        raise ValueError(f"--feature-gates (env FEATURE_GATES): {exc}") from exc
    return Options(
        cloud_provider=args.cloud_provider or env.get(CLOUD_PROVIDER_ENV) or "kwok",
        provider_settings=provider_settings,
        kubeconfig=args.kubeconfig,
        settings=Settings(cluster_name=args.cluster_name or env.get("CLUSTER_NAME", ""),
                          feature_gates=gates, **durations),
        leader_elect=not disable_le,
        leader_election_namespace=env.get("SYSTEM_NAMESPACE", "kube-system"),
        metrics_bind_address=f":{metrics_port}",
        health_probe_bind_address=f":{health_port}",
    )
