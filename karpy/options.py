"""How karpy is configured: the :class:`Options` value and ``karpy run``'s flags.

Every flag falls back to an environment variable with Karpenter's name
(BATCH_IDLE_DURATION, BATCH_MAX_DURATION, CLUSTER_NAME, METRICS_PORT, ...), so a
Deployment written for Karpenter configures karpy the same way. :data:`SETTINGS` is the
one table of them: the flags, ``karpy run --help`` and the settings table of
docs/install.md are all made from it. A bad value raises :class:`ConfigError`, whose
one-line message names the flag, the environment variable and what is expected.
"""

from __future__ import annotations

import argparse
import os
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from karpy.apis.duration import parse_duration
from karpy.apis.strconv import parse_go_bool, parse_go_int
from karpy.cloudprovider.registry import CLOUD_PROVIDER_ENV, installed_providers
from karpy.controllers.settings import FeatureGates, Settings
from karpy.scheduling.defaultspread import SchedulerConfig, parse_scheduler_config
from karpy.scheduling.simulator import IMPROVEMENT_BUDGET

__all__ = [
    "SETTINGS",
    "ConfigError",
    "Options",
    "Setting",
    "add_provider_setting_argument",
    "add_run_arguments",
    "options_from_args",
    "parse_provider_settings",
]


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
    """The Lease's name (LEADER_ELECTION_NAME), Karpenter's default."""
    leader_election_namespace: str = "kube-system"
    """The Lease's namespace: LEADER_ELECTION_NAMESPACE, or when that is empty (Karpenter's
    default) the system namespace (SYSTEM_NAMESPACE, which the chart sets to the pod's)."""
    metrics_bind_address: str = ":8080"
    health_probe_bind_address: str = ":8081"
    graceful_shutdown_timeout: float = 30.0
    request_timeout: float = 30.0
    kube_client_qps: float = 200.0
    """Requests per second to the API server, sustained (KUBE_CLIENT_QPS)."""
    kube_client_burst: int = 300
    """Requests to the API server at once after a lull (KUBE_CLIENT_BURST)."""
    log_level: str = "info"
    """debug, info, warn or error (LOG_LEVEL): the level of karpy's and its providers'
    loggers."""
    sdk_log_level: str = "warn"
    """The level of every other logger — the cloud SDKs', aiohttp's (SDK_LOG_LEVEL)."""
    log_output_paths: tuple[str, ...] = ("stderr",)
    """Where log lines go: stdout, stderr or files (LOG_OUTPUT_PATHS; Karpenter's)."""
    log_error_output_paths: tuple[str, ...] = ("stderr",)
    """Where the logger's own errors go (LOG_ERROR_OUTPUT_PATHS; Karpenter's)."""


class ConfigError(ValueError):
    """A setting of ``karpy run`` is malformed or missing; the message is one line naming
    the flag, its environment variable and what is expected."""


# -- the settings table ------------------------------------------------------------------


def _duration(text: str) -> float:
    seconds = parse_duration(text).total_seconds()
    if seconds < 0:
        raise ValueError(f"{text!r} is negative (expected e.g. 30s, 15m, 1h30m)")
    return seconds


def _positive_duration(text: str) -> float:
    # A period or a time limit of zero is a busy loop or a deletion at once, never what
    # an operator meant: refuse it at start-up rather than act on it.
    seconds = _duration(text)
    if seconds <= 0:
        raise ValueError(f"{text!r} must be longer than zero (e.g. 30s, 15m, 1h30m)")
    return seconds


# Numbers are read as Karpenter reads its environment (strconv.Atoi / ParseBool, Go's
# int64): Python's int() and float() would also take " 8080", "1_000" and full-width or
# Arabic-Indic digits, and int() has no bound (KUBE_CLIENT_BURST=10^30).


def _go_int(text: str) -> int | None:
    try:
        return parse_go_int(text)
    except ValueError:
        return None


def _port(text: str) -> int:
    port = _go_int(text)
    if port is None:
        port = -1
    if not 0 <= port <= 65535:
        raise ValueError(f"{text!r} is not a port number (expected 0-65535)")
    return port


def _bool(text: str) -> bool:
    return parse_go_bool(text)


_LOG_LEVELS = ("debug", "info", "warn", "error")


def _log_level(text: str) -> str:
    value = text.strip().lower()
    if value == "warning":
        value = "warn"
    if value not in _LOG_LEVELS:
        raise ValueError(f"{text!r} is not a log level (expected one of {', '.join(_LOG_LEVELS)})")
    return value


# karpy takes a fractional QPS where Karpenter's flag is an int; the text is still ASCII
# decimal, never "inf", "nan", "1_0" or full-width digits.
_DECIMAL = re.compile(r"[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][+-]?[0-9]{1,3})?", re.ASCII)


def _qps(text: str) -> float:
    qps = float(text) if _DECIMAL.fullmatch(text) else -1.0
    if not 0 < qps < float("inf"):
        raise ValueError(f"{text!r} is not a number of requests per second > 0 (e.g. 200)")
    return qps


def _burst(text: str) -> int:
    burst = _go_int(text) or 0
    if burst < 1:
        raise ValueError(f"{text!r} is not a whole number >= 1 and <= 2^63-1 (e.g. 300)")
    return burst


def _provider(text: str) -> str:
    installed = installed_providers()
    if text not in installed:
        raise ValueError(
            f"no cloud provider named {text!r} is installed (installed: "
            f"{', '.join(installed) or 'none'}); pick one of those or install its package"
        )
    return text


def _gates(text: str) -> FeatureGates:
    return FeatureGates.parse(text)


def _scheduler_config(text: str) -> SchedulerConfig:
    """SCHEDULER_CONFIG (Karpenter v1.15.0, pkg/operator/options ParseSchedulerConfiguration):
    a YAML/JSON document whose field ``podTopologySpread.defaultConstraints`` are the
    default scheduler's default spread constraints, and karpy's own ``profiles`` those
    of other schedulers (:mod:`karpy.scheduling.defaultspread`). Unknown fields are
    refused, as Karpenter's strict decoding does."""
    return parse_scheduler_config(text)


def _budget(text: str) -> int:
    budget = _go_int(text)
    if budget is None:
        budget = -1
    if budget < 0:
        raise ValueError(
            f"{text!r} is not a whole number >= 0 (0 turns the cost-improvement stage off)"
        )
    return budget


def _choice(*allowed: str) -> Callable[[str], str]:
    """A parser taking exactly one of ``allowed`` (Karpenter's spelling)."""

    def parse(text: str) -> str:
        value = text.strip()
        if value not in allowed:
            raise ValueError(f"{value!r} is not one of {', '.join(allowed)}")
        return value

    return parse


def _text(text: str) -> str:
    return text.strip()


# Lease names are DNS-1123 subdomains and namespaces DNS-1123 labels (apimachinery's
# validation); checked here so a typo is one line at start-up, not a refused Lease later.
_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")


def _lease_name(text: str) -> str:
    value = text.strip()
    labels = value.split(".")
    if len(value) > 253 or not all(_DNS_LABEL.fullmatch(p) and len(p) <= 63 for p in labels):
        raise ValueError(
            f"{value!r} is not a Lease name (lower-case letters, digits, '-' and '.', "
            "starting and ending with a letter or digit, at most 253 characters)"
        )
    return value


def _namespace(text: str) -> str:
    value = text.strip()
    if len(value) > 63 or not _DNS_LABEL.fullmatch(value):
        raise ValueError(
            f"{value!r} is not a namespace name (lower-case letters, digits and '-', "
            "starting and ending with a letter or digit, at most 63 characters)"
        )
    return value


def _namespace_or_empty(text: str) -> str:
    return _namespace(text) if text.strip() else ""


def _paths(text: str) -> tuple[str, ...]:
    paths = tuple(p.strip() for p in text.split(",") if p.strip())
    if not paths:
        raise ValueError(f"{text!r} names no path (expected stdout, stderr or file paths)")
    return paths


@dataclass(frozen=True)
class Setting:
    """One setting of ``karpy run``: its flag, its environment variable (Karpenter's
    name), its default as text, what it means, and how its text is parsed."""

    flag: str
    env: str
    default: str
    help: str
    parse: Callable[[str], Any] = _text
    metavar: str = "VALUE"

    @property
    def dest(self) -> str:
        """The argparse attribute of the flag."""
        return self.flag.removeprefix("--").replace("-", "_")


def _default_gates() -> str:
    return ",".join(f"{name}={str(on).lower()}" for name, on in FeatureGates().as_mapping().items())


SETTINGS: tuple[Setting, ...] = (
    Setting("--cloud-provider", CLOUD_PROVIDER_ENV, "kwok",
            "the provider's entry-point name (`karpy providers` lists them)", _provider, "NAME"),
    Setting("--cluster-name", "CLUSTER_NAME", "",
            "the cluster's name; the aws and azure providers require it", _text, "NAME"),
    Setting("--batch-idle-duration", "BATCH_IDLE_DURATION", "1s",
            "a provisioning batch ends after this long without a new pending pod",
            _positive_duration, "DURATION"),
    Setting("--batch-max-duration", "BATCH_MAX_DURATION", "10s",
            "a provisioning batch ends after this long in all", _positive_duration, "DURATION"),
    Setting("--feature-gates", "FEATURE_GATES", _default_gates(),
            "Karpenter's feature gates, NAME=BOOL,...", _gates, "NAME=BOOL,..."),
    Setting("--legacy-node-repair", "LEGACY_NODE_REPAIR", "false",
            "with the NodeRepair gate, run Karpenter v1.14's node repair controller instead "
            "of repair as a disruption method", _bool, "BOOL"),
    Setting("--scheduler-config", "SCHEDULER_CONFIG", "",
            "kube-scheduler settings to mirror: podTopologySpread.defaultConstraints (the "
            "default scheduler's) and karpy's profiles[] (other schedulers')",
            _scheduler_config, "YAML"),
    Setting("--log-level", "LOG_LEVEL", "info",
            "debug, info, warn or error: the level of karpy's and its providers' loggers",
            _log_level, "LEVEL"),
    Setting("--sdk-log-level", "SDK_LOG_LEVEL", "warn",
            "karpy only: the level of every other logger (botocore, azure, aiohttp ...); "
            "at debug the cloud SDKs log request parameters, user data and credentials",
            _log_level, "LEVEL"),
    Setting("--log-output-paths", "LOG_OUTPUT_PATHS", "stderr",
            "comma-separated stdout, stderr or files that get every log line "
            "(Karpenter's default is stdout)", _paths, "PATHS"),
    Setting("--log-error-output-paths", "LOG_ERROR_OUTPUT_PATHS", "stderr",
            "comma-separated stdout, stderr or files that get the logger's own errors",
            _paths, "PATHS"),
    Setting("--kube-client-qps", "KUBE_CLIENT_QPS", "200",
            "the smoothed rate of requests per second to the kube-apiserver", _qps, "QPS"),
    Setting("--kube-client-burst", "KUBE_CLIENT_BURST", "300",
            "the maximum allowed burst of requests to the kube-apiserver", _burst, "N"),
    Setting("--metrics-port", "METRICS_PORT", "8080", "port of /metrics", _port, "PORT"),
    Setting("--health-probe-port", "HEALTH_PROBE_PORT", "8081",
            "port of /healthz and /readyz", _port, "PORT"),
    Setting("--disable-leader-election", "DISABLE_LEADER_ELECTION", "false",
            "run the controllers without the leader-election Lease", _bool, "BOOL"),
    Setting("--leader-election-name", "LEADER_ELECTION_NAME", "karpenter-leader-election",
            "name of the leader-election Lease", _lease_name, "NAME"),
    Setting("--leader-election-namespace", "LEADER_ELECTION_NAMESPACE", "",
            "namespace of the leader-election Lease; empty: the system namespace",
            _namespace_or_empty, "NAMESPACE"),
    Setting("--system-namespace", "SYSTEM_NAMESPACE", "kube-system",
            "karpy's own namespace (the chart sets the pod's): the leader-election Lease's "
            "unless --leader-election-namespace names another", _namespace, "NAMESPACE"),
    Setting("--launch-ttl", "LAUNCH_TTL", "5m",
            "a NodeClaim not launched within this long is deleted", _positive_duration, "DURATION"),
    Setting("--registration-ttl", "REGISTRATION_TTL", "15m",
            "a launched NodeClaim whose Node has not registered within this long is deleted",
            _positive_duration, "DURATION"),
    Setting("--insufficient-capacity-ttl", "INSUFFICIENT_CAPACITY_TTL", "3m",
            "how long an offering that ran out of capacity is not tried",
            _positive_duration, "DURATION"),
    Setting("--garbage-collection-grace", "GARBAGE_COLLECTION_GRACE", "30s",
            "a cloud instance with no NodeClaim is deleted once older than this",
            _positive_duration, "DURATION"),
    Setting("--disruption-validation-delay", "DISRUPTION_VALIDATION_DELAY", "15s",
            "a disruption command is re-checked after this long before it runs",
            _duration, "DURATION"),
    Setting("--disruption-replacement-timeout", "DISRUPTION_REPLACEMENT_TIMEOUT", "10m",
            "a disruption whose replacements are not initialized by then is rolled back",
            _positive_duration, "DURATION"),
    Setting("--disruption-poll-period", "DISRUPTION_POLL_PERIOD", "10s",
            "how often disruption looks for nodes to remove", _positive_duration, "DURATION"),
    Setting("--preference-policy", "PREFERENCE_POLICY", "Respect",
            "Respect or Ignore: whether the scheduler honours preferred (anti-)affinities "
            "and ScheduleAnyway topology spreads", _choice("Respect", "Ignore"), "POLICY"),
    Setting("--min-values-policy", "MIN_VALUES_POLICY", "Strict",
            "Strict or BestEffort: BestEffort launches when minValues cannot be met, "
            "lowers it on the NodeClaim and annotates it "
            "karpenter.sh/nodeclaim-min-values-relaxed", _choice("Strict", "BestEffort"),
            "POLICY"),
    Setting("--ignore-dra-requests", "IGNORE_DRA_REQUESTS", "true",
            "pods with Dynamic Resource Allocation claims get a FailedScheduling event and no "
            "capacity; false: their claims are allocated against the instance types' device "
            "templates and the nodes' ResourceSlices", _bool, "BOOL"),
    Setting("--disable-cluster-state-observability", "DISABLE_CLUSTER_STATE_OBSERVABILITY",
            "false", "no pod, node and NodePool state metrics, no operator_* status metrics",
            _bool, "BOOL"),
    Setting("--cost-improvement-budget", "COST_IMPROVEMENT_BUDGET", str(IMPROVEMENT_BUDGET),
            "karpy only: work the scheduler may spend after first fit making new NodeClaims "
            "cheaper, in evaluations per pod; 0 turns the cost-improvement stage off",
            _budget, "N"),
)  # fmt: skip
"""Every setting ``karpy run`` reads, in the order ``--help`` lists them."""

_DURATION_FIELDS = {
    "--batch-idle-duration": "batch_idle_duration",
    "--batch-max-duration": "batch_max_duration",
    "--launch-ttl": "launch_ttl",
    "--registration-ttl": "registration_ttl",
    "--insufficient-capacity-ttl": "insufficient_capacity_ttl",
    "--garbage-collection-grace": "garbage_collection_grace",
    "--disruption-validation-delay": "disruption_validation_delay",
    "--disruption-replacement-timeout": "disruption_replacement_timeout",
    "--disruption-poll-period": "disruption_poll_period",
}


def add_provider_setting_argument(parser: argparse.ArgumentParser, help: str) -> None:
    """Add the repeatable ``--provider-setting KEY=VALUE`` flag (read it with
    :func:`parse_provider_settings`): ``karpy run`` and the tools that build a provider
    take it alike."""
    parser.add_argument(
        "--provider-setting", action="append", default=[], metavar="KEY=VALUE", help=help
    )


def parse_provider_settings(items: Iterable[str]) -> dict[str, str]:
    """The ``--provider-setting`` values as a mapping (a later KEY replaces an earlier).

    Raises ConfigError naming the flag and the value that is not ``KEY=VALUE``.
    """
    settings: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ConfigError(f"--provider-setting {item!r}: expected KEY=VALUE")
        settings[key] = value
    return settings


def add_run_arguments(parser: argparse.ArgumentParser) -> None:
    """Add ``karpy run``'s flags; each defaults to its environment variable, if set.

    Values are parsed by :func:`options_from_args`, not by argparse, so a bad one gets a
    one-line error naming the flag and the variable rather than a usage dump.
    """
    add_provider_setting_argument(
        parser,
        help="a setting passed to the provider (repeatable); each provider's settings "
        "and their environment variables are listed below",
    )
    parser.add_argument(
        "--kubeconfig", metavar="PATH",
        help="kubeconfig to use (env KUBECONFIG); default: in a pod, its service account "
        "(KUBERNETES_SERVICE_HOST/PORT and the token), else ~/.kube/config",
    )  # fmt: skip
    for setting in SETTINGS:
        text = f"{setting.help} (env {setting.env}; default {setting.default or '(none)'})"
        if setting.flag == "--disable-leader-election":
            # Karpenter's form: the bare flag means true.
            parser.add_argument(setting.flag, nargs="?", const="true", metavar=setting.metavar,
                                help=text)  # fmt: skip
            continue
        parser.add_argument(setting.flag, metavar=setting.metavar, help=text)


def _value(setting: Setting, args: argparse.Namespace, env: Mapping[str, str]) -> Any:
    given = getattr(args, setting.dest, None)
    text = given if given is not None else (env.get(setting.env) or "").strip() or setting.default
    try:
        return setting.parse(str(text))
    except ValueError as exc:
        source = f"{setting.flag}" if given is not None else f"{setting.env} (flag {setting.flag})"
        raise ConfigError(f"{source}: {' '.join(str(exc).split())}") from exc


def options_from_args(
    args: argparse.Namespace, environ: Mapping[str, str] | None = None
) -> Options:
    """Turn parsed ``karpy run`` flags (falling back to the environment) into Options.

    Raises ConfigError naming the flag and its environment variable for a bad value.
    """
    env = os.environ if environ is None else environ
    values = {s.flag: _value(s, args, env) for s in SETTINGS}
    provider_settings = parse_provider_settings(args.provider_setting)
    settings = Settings(
        cluster_name=values["--cluster-name"],
        feature_gates=values["--feature-gates"],
        legacy_node_repair=values["--legacy-node-repair"],
        scheduler_config=values["--scheduler-config"],
        improvement_budget=values["--cost-improvement-budget"],
        preference_policy=values["--preference-policy"],
        min_values_policy=values["--min-values-policy"],
        ignore_dra_requests=values["--ignore-dra-requests"],
        disable_cluster_state_observability=values["--disable-cluster-state-observability"],
        **{name: values[flag] for flag, name in _DURATION_FIELDS.items()},
    )
    return Options(
        cloud_provider=values["--cloud-provider"],
        provider_settings=provider_settings,
        kubeconfig=args.kubeconfig,
        settings=settings,
        leader_elect=not values["--disable-leader-election"],
        leader_election_name=values["--leader-election-name"],
        leader_election_namespace=values["--leader-election-namespace"]
        or values["--system-namespace"],
        metrics_bind_address=f":{values['--metrics-port']}",
        health_probe_bind_address=f":{values['--health-probe-port']}",
        log_level=values["--log-level"],
        sdk_log_level=values["--sdk-log-level"],
        log_output_paths=values["--log-output-paths"],
        log_error_output_paths=values["--log-error-output-paths"],
        kube_client_qps=values["--kube-client-qps"],
        kube_client_burst=values["--kube-client-burst"],
    )
