"""Settings of the AWS provider: Karpenter AWS's options, under the same names.

Each setting comes from ``karpy run --provider-setting KEY=VALUE`` (the key in the
first column) or, when that is not given, from Karpenter's environment variable (the
second column), so a Karpenter deployment's environment works unchanged:

=========================  ============================  =====================================
setting                    environment                   meaning
=========================  ============================  =====================================
(core ``--cluster-name``)  ``CLUSTER_NAME``              required; tags and discovery
``clusterEndpoint``        ``CLUSTER_ENDPOINT``          API server URL the nodes join
``clusterCABundle``        ``CLUSTER_CA_BUNDLE``         base64 CA bundle written to user data
``clusterCIDR``            ``KARPY_CLUSTER_CIDR``        the cluster's service CIDR (nodeadm's
                                                         ``cidr``); else EKS DescribeCluster
``interruptionQueue``      ``INTERRUPTION_QUEUE``        SQS queue name; empty disables it
``reservedENIs``           ``RESERVED_ENIS``             ENIs kept out of max-pods (int >= 0)
``vmMemoryOverheadPercent`` ``VM_MEMORY_OVERHEAD_PERCENT`` memory lost to the hypervisor
                                                         (0 <= x < 1, default 0.075)
``isolatedVPC``            ``ISOLATED_VPC``              no Pricing API calls (true/false)
``region``                 ``AWS_REGION`` /              the region (else the AWS config
                           ``AWS_DEFAULT_REGION``        chain's)
``endpointURL``            ``AWS_ENDPOINT_URL``          one endpoint for every AWS service
                                                         (moto in tests; a VPC endpoint)
``pricingEndpointURL``     ``AWS_ENDPOINT_URL_PRICING``  the Pricing API's endpoint only
``offline``                ``KARPY_OFFLINE``             price only, from the shipped tables:
                                                         no AWS client, no call (true/false)
``offlineZones``           ``KARPY_OFFLINE_ZONES``       offline: the zones of an EC2NodeClass
                                                         whose status lists no subnets
``disableDryRun``          ``DISABLE_DRY_RUN``           skip the EC2NodeClass dry-run
                                                         validation (true/false)
``amiRefreshInterval``     ``AMI_REFRESH_INTERVAL``      how long resolved AMIs are reused (Go
                                                         duration >= 1m, default 1m)
``subnetRefreshInterval``  ``SUBNET_REFRESH_INTERVAL``   how long resolved subnets are reused
                                                         (Go duration >= 1m, default 1m)
``securityGroupRefreshInterval`` ``SECURITY_GROUP_REFRESH_INTERVAL`` how long resolved security
                                                         groups are reused (>= 1m, default 1m)
``eksControlPlane``        ``EKS_CONTROL_PLANE``         the Kubernetes version comes from EKS
                                                         DescribeCluster (true/false)
``enableZonalShift``       ``ENABLE_ZONAL_SHIFT``        ARC zonal shift; karpy-aws refuses true
``awsFeatureGates``        ``AWS_FEATURE_GATES``         ``NodeClassCEL=false,DRANVIDIAGPU=
                                                         false,DRAEFA=false,RebootForRepair=
                                                         false``; karpy-aws refuses
                                                         ``NodeClassCEL=true``
=========================  ============================  =====================================

The last seven are Karpenter AWS's options (pkg/operator/options, v1.15.2) with its
defaults.
``disableDryRun`` makes ``ValidationSucceeded`` True without the CreateLaunchTemplate /
CreateFleet / RunInstances dry runs, as Karpenter does. The two refresh intervals are
the lifetimes of the provider's AMI and subnet resolution caches (Karpenter's
``cache.New(interval)``): a longer one makes fewer DescribeImages / SSM / DescribeSubnets
calls and sees a new AMI or retagged subnet later; the security group interval
(Karpenter AWS v1.15.2) does the same for DescribeSecurityGroups. ``enableZonalShift=true`` and
``NodeClassCEL=true`` ask for features karpy-aws does not have (Karpenter's ARC zonal
shift controller; CEL expressions in ``spec.kubelet``, which karpy's CRD refuses), so
they fail at start-up rather than being silently ignored. The gates ``DRANVIDIAGPU``,
``DRAEFA`` and ``RebootForRepair`` (Karpenter AWS v1.15.2) are accepted so its values
file starts karpy-aws; karpy-aws has none of their features yet, and each one turned on
is named once in a start-up warning (:data:`UNIMPLEMENTED_AWS_GATES`; docs/operating.md).
Other unknown gate names are ignored, as upstream's parser does.

``offline`` is for ``karpy simulate``/``explain``/``top`` on a machine without AWS
access (see :mod:`karpy_aws._offline`): instance types come from the tables shipped in
``karpy_aws/data``, and nothing can be launched. The cluster name is not needed then.

Unknown keys and malformed values raise :class:`AWSSettingsError` naming the key, the
value and what is expected, so a typo fails at start-up.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final
from urllib.parse import urlsplit

from karpy.apis.duration import parse_duration
from karpy.cloudprovider import CloudProviderError, ProviderSetting

__all__ = [
    "PROVIDER_SETTINGS",
    "SETTINGS",
    "UNIMPLEMENTED_AWS_GATES",
    "AWSSettings",
    "AWSSettingsError",
    "check_settings",
]

#: setting key -> environment variable consulted when the key is not set
SETTINGS: Final = {
    "clusterEndpoint": "CLUSTER_ENDPOINT",
    "clusterCABundle": "CLUSTER_CA_BUNDLE",
    "clusterCIDR": "KARPY_CLUSTER_CIDR",
    "interruptionQueue": "INTERRUPTION_QUEUE",
    "reservedENIs": "RESERVED_ENIS",
    "vmMemoryOverheadPercent": "VM_MEMORY_OVERHEAD_PERCENT",
    "isolatedVPC": "ISOLATED_VPC",
    "region": "AWS_REGION",
    "endpointURL": "AWS_ENDPOINT_URL",
    "pricingEndpointURL": "AWS_ENDPOINT_URL_PRICING",
    "offline": "KARPY_OFFLINE",
    "offlineZones": "KARPY_OFFLINE_ZONES",
    "disableDryRun": "DISABLE_DRY_RUN",
    "amiRefreshInterval": "AMI_REFRESH_INTERVAL",
    "subnetRefreshInterval": "SUBNET_REFRESH_INTERVAL",
    "securityGroupRefreshInterval": "SECURITY_GROUP_REFRESH_INTERVAL",
    "eksControlPlane": "EKS_CONTROL_PLANE",
    "enableZonalShift": "ENABLE_ZONAL_SHIFT",
    "awsFeatureGates": "AWS_FEATURE_GATES",
}
#: Karpenter AWS v1.15.2's gates (pkg/operator/options ParseFeatureGates) karpy-aws
#: accepts without having their feature: gate -> what does not happen when it is on.
UNIMPLEMENTED_AWS_GATES: Final = {
    "DRANVIDIAGPU": "karpy-aws publishes no DRA devices for NVIDIA GPUs; gpu.nvidia.com "
    "claims are not sized for",
    "DRAEFA": "karpy-aws publishes no DRA devices for EFA interfaces; dra.net claims are "
    "not sized for",
    "RebootForRepair": "node repair replaces nodes with GPU faults instead of rebooting them",
}
#: Karpenter AWS's default and floor for the refresh intervals (seconds)
DEFAULT_REFRESH_INTERVAL: Final = 60.0
_TRUE = {"true", "1", "yes", "on"}
#: An AWS region's name: partition prefix, words, number (us-east-1, us-gov-west-1,
#: cn-north-1, us-isob-east-1, ap-southeast-4).
_REGION = re.compile(r"^[a-z]{2}(-[a-z]+)+-[0-9]{1,2}$")
_FALSE = {"false", "0", "no", "off", ""}


class AWSSettingsError(CloudProviderError):
    """An AWS provider setting is missing, unknown or malformed; the message names it."""


@dataclass(frozen=True, kw_only=True)
class AWSSettings:
    """The AWS provider's settings (see the module docstring for each one)."""

    cluster_name: str
    region: str
    cluster_endpoint: str = ""
    cluster_ca_bundle: str = ""
    cluster_cidr: str = ""
    interruption_queue: str = ""
    reserved_enis: int = 0
    vm_memory_overhead_percent: float = 0.075
    isolated_vpc: bool = False
    endpoint_url: str | None = None
    pricing_endpoint_url: str | None = None
    offline: bool = False
    offline_zones: tuple[str, ...] = ()
    disable_dry_run: bool = False
    ami_refresh_interval: float = DEFAULT_REFRESH_INTERVAL
    subnet_refresh_interval: float = DEFAULT_REFRESH_INTERVAL
    security_group_refresh_interval: float = DEFAULT_REFRESH_INTERVAL
    eks_control_plane: bool = False
    feature_gates: Mapping[str, bool] = field(default_factory=dict)
    """The AWS_FEATURE_GATES karpy-aws knows, as given (absent: Karpenter's default,
    off)."""

    def unimplemented_gates_on(self) -> tuple[str, ...]:
        """The gates turned on that karpy-aws accepts but does not implement."""
        return tuple(g for g in UNIMPLEMENTED_AWS_GATES if self.feature_gates.get(g, False))

    @classmethod
    def from_settings(
        cls,
        settings: Mapping[str, str],
        *,
        cluster_name: str,
        environ: Mapping[str, str],
        default_region: str | None = None,
    ) -> AWSSettings:
        """Parse the operator's string settings, falling back to ``environ``.

        ``default_region`` is the AWS config chain's region (profile files), used when
        neither the ``region`` setting nor ``AWS_REGION``/``AWS_DEFAULT_REGION`` is set.
        """
        unknown = sorted(set(settings) - set(SETTINGS))
        if unknown:
            raise AWSSettingsError(
                f"unknown aws provider setting(s) {', '.join(unknown)}; "
                f"known: {', '.join(sorted(SETTINGS))}"
            )

        def get(key: str) -> str:
            if key in settings:
                return settings[key].strip()
            return environ.get(SETTINGS[key], "").strip()

        offline = _bool(get("offline"), "offline")
        # offline, nothing is tagged or discovered: the name is not needed
        if not cluster_name and not offline:
            raise AWSSettingsError(
                "the aws provider needs the cluster name: set --cluster-name or CLUSTER_NAME "
                "(it tags every instance and finds the cluster's subnets and security groups)"
            )
        region = get("region") or environ.get("AWS_DEFAULT_REGION", "") or default_region or ""
        if not region:
            raise AWSSettingsError(
                "no AWS region: set --provider-setting region=<region>, AWS_REGION, or a "
                "region in the AWS config file"
            )
        if not _REGION.match(region):
            raise AWSSettingsError(
                f"aws setting region={region!r} (env AWS_REGION) is not an AWS region name "
                "(e.g. us-east-1, eu-central-2, us-gov-west-1)"
            )
        for key in ("endpointURL", "pricingEndpointURL"):
            _check_url(key, get(key))
        endpoint = get("clusterEndpoint")
        if endpoint and not endpoint.startswith("https://"):
            raise AWSSettingsError(
                f"aws setting clusterEndpoint={endpoint!r} (env CLUSTER_ENDPOINT) must be an "
                "https:// URL"
            )
        if _bool(get("enableZonalShift"), "enableZonalShift"):
            raise AWSSettingsError(
                "aws setting enableZonalShift=true (env ENABLE_ZONAL_SHIFT): karpy-aws has no "
                "ARC zonal shift support (Karpenter's zonalshift controller); set it to false"
            )
        gates = _feature_gates(get("awsFeatureGates"))
        return cls(
            cluster_name=cluster_name,
            region=region,
            cluster_endpoint=endpoint,
            cluster_ca_bundle=get("clusterCABundle"),
            cluster_cidr=_cidr(get("clusterCIDR")),
            interruption_queue=get("interruptionQueue"),
            reserved_enis=_int(get("reservedENIs"), "reservedENIs"),
            vm_memory_overhead_percent=_percent(get("vmMemoryOverheadPercent")),
            isolated_vpc=_bool(get("isolatedVPC"), "isolatedVPC"),
            endpoint_url=get("endpointURL") or None,
            pricing_endpoint_url=get("pricingEndpointURL") or None,
            offline=offline,
            offline_zones=tuple(
                sorted({z.strip() for z in get("offlineZones").split(",") if z.strip()})
            ),
            disable_dry_run=_bool(get("disableDryRun"), "disableDryRun"),
            ami_refresh_interval=_interval(get("amiRefreshInterval"), "amiRefreshInterval"),
            subnet_refresh_interval=_interval(
                get("subnetRefreshInterval"), "subnetRefreshInterval"
            ),
            security_group_refresh_interval=_interval(
                get("securityGroupRefreshInterval"), "securityGroupRefreshInterval"
            ),
            eks_control_plane=_bool(get("eksControlPlane"), "eksControlPlane"),
            feature_gates=gates,
        )


def _interval(text: str, key: str) -> float:
    """A refresh interval in seconds: a Go duration of at least 1m, as Karpenter AWS's
    options validation demands."""
    if not text:
        return DEFAULT_REFRESH_INTERVAL
    try:
        seconds = parse_duration(text).total_seconds()
    except ValueError:
        seconds = -1.0
    if seconds < DEFAULT_REFRESH_INTERVAL:
        raise AWSSettingsError(
            f"aws setting {key}={text!r} (env {SETTINGS[key]}) must be a duration of at "
            "least 1m (e.g. 1m, 5m, 1h)"
        )
    return seconds


#: Every gate Karpenter AWS v1.15.2 knows, in its default string's order.
_AWS_GATES: Final = ("NodeClassCEL", "DRANVIDIAGPU", "DRAEFA", "RebootForRepair")


def _feature_gates(text: str) -> dict[str, bool]:
    """Karpenter AWS's ``Name=bool,...`` gates, those it knows by name; unknown names are
    ignored, as upstream. ``NodeClassCEL=true`` is refused: karpy-aws does not evaluate
    CEL in spec.kubelet."""
    gates: dict[str, bool] = {}
    for item in text.split(","):
        if not item.strip():
            continue
        name, sep, value = item.partition("=")
        name, value = name.strip(), value.strip().lower()
        if not sep or not name or value not in ("true", "false"):
            raise AWSSettingsError(
                f"aws setting awsFeatureGates={text!r} (env AWS_FEATURE_GATES): {item.strip()!r} "
                "is not Name=true|false (e.g. NodeClassCEL=false)"
            )
        if name == "NodeClassCEL" and value == "true":
            raise AWSSettingsError(
                "aws setting awsFeatureGates (env AWS_FEATURE_GATES) NodeClassCEL=true: "
                "karpy-aws does not evaluate CEL expressions in an EC2NodeClass's "
                "spec.kubelet; set NodeClassCEL=false"
            )
        if name in _AWS_GATES:
            gates[name] = value == "true"
    return gates


def _cidr(text: str) -> str:
    if not text:
        return ""
    try:
        return str(ipaddress.ip_network(text, strict=True))
    except ValueError as exc:
        raise AWSSettingsError(
            f"aws setting clusterCIDR={text!r} (env KARPY_CLUSTER_CIDR) must be the "
            f"cluster's service CIDR, e.g. 10.100.0.0/16 or fd00::/108 ({exc})"
        ) from None


def _check_url(key: str, url: str) -> None:
    if not url:
        return
    parts = urlsplit(url)
    try:
        parts.port  # noqa: B018 - raises ValueError on a port that is not a number
    except ValueError:
        parts = urlsplit("")
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise AWSSettingsError(
            f"aws setting {key}={url!r} (env {SETTINGS[key]}) is not an http(s) URL "
            "(e.g. http://127.0.0.1:5000 for a test endpoint)"
        )


def _int(text: str, key: str) -> int:
    if not text:
        return 0
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise AWSSettingsError(
            f"aws setting {key}={text!r} (env {SETTINGS[key]}) must be a whole number >= 0"
        )
    return value


def _percent(text: str) -> float:
    if not text:
        return 0.075
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 <= value < 1:
        raise AWSSettingsError(
            f"aws setting vmMemoryOverheadPercent={text!r} (env VM_MEMORY_OVERHEAD_PERCENT) "
            "must be a fraction in [0, 1) "
            "(0.075 means 7.5%)"
        )
    return value


def _bool(text: str, key: str) -> bool:
    lowered = text.lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    raise AWSSettingsError(
        f"aws setting {key}={text!r} (env {SETTINGS[key]}) must be true or false"
    )


#: The settings as ``karpy run --help`` lists them (the module docstring's table).
PROVIDER_SETTINGS: Final = (
    ProviderSetting("clusterEndpoint", "CLUSTER_ENDPOINT", "",
                    "API server URL the nodes join (https://...)"),
    ProviderSetting("clusterCABundle", "CLUSTER_CA_BUNDLE", "",
                    "base64 CA bundle written to the nodes' user data"),
    ProviderSetting("clusterCIDR", "KARPY_CLUSTER_CIDR", "",
                    "the cluster's service CIDR for nodeadm (else EKS DescribeCluster)"),
    ProviderSetting("interruptionQueue", "INTERRUPTION_QUEUE", "",
                    "SQS queue of interruption events; empty disables it"),
    ProviderSetting("reservedENIs", "RESERVED_ENIS", "0", "ENIs kept out of max-pods"),
    ProviderSetting("vmMemoryOverheadPercent", "VM_MEMORY_OVERHEAD_PERCENT", "0.075",
                    "memory lost to the hypervisor, a fraction in [0, 1)"),
    ProviderSetting("isolatedVPC", "ISOLATED_VPC", "false", "no Pricing API calls"),
    ProviderSetting("region", "AWS_REGION", "", "the region (else AWS_DEFAULT_REGION or "
                    "the AWS config file); required"),
    ProviderSetting("endpointURL", "AWS_ENDPOINT_URL", "", "one endpoint for every AWS service"),
    ProviderSetting("pricingEndpointURL", "AWS_ENDPOINT_URL_PRICING", "",
                    "the Pricing API's endpoint only"),
    ProviderSetting("offline", "KARPY_OFFLINE", "false",
                    "price from the shipped tables only: no AWS client, no launches "
                    "(karpy simulate/explain/top)"),
    ProviderSetting("offlineZones", "KARPY_OFFLINE_ZONES", "",
                    "offline: comma-separated zones for an EC2NodeClass whose status lists "
                    "no subnets"),
    ProviderSetting("disableDryRun", "DISABLE_DRY_RUN", "false",
                    "skip the EC2NodeClass dry-run validation (ValidationSucceeded is True)"),
    ProviderSetting("amiRefreshInterval", "AMI_REFRESH_INTERVAL", "1m",
                    "how long resolved AMIs are reused (>= 1m)"),
    ProviderSetting("subnetRefreshInterval", "SUBNET_REFRESH_INTERVAL", "1m",
                    "how long resolved subnets are reused (>= 1m)"),
    ProviderSetting("securityGroupRefreshInterval", "SECURITY_GROUP_REFRESH_INTERVAL", "1m",
                    "how long resolved security groups are reused (>= 1m)"),
    ProviderSetting("eksControlPlane", "EKS_CONTROL_PLANE", "false",
                    "read the Kubernetes version from EKS DescribeCluster"),
    ProviderSetting("enableZonalShift", "ENABLE_ZONAL_SHIFT", "false",
                    "ARC zonal shift: not supported, true is refused"),
    ProviderSetting("awsFeatureGates", "AWS_FEATURE_GATES",
                    "NodeClassCEL=false,DRANVIDIAGPU=false,DRAEFA=false,RebootForRepair=false",
                    "AWS feature gates; NodeClassCEL=true is refused (no CEL in spec.kubelet); "
                    "DRANVIDIAGPU, DRAEFA and RebootForRepair are accepted but not implemented "
                    "(a warning names each one turned on)"),
)  # fmt: skip


def check_settings(
    settings: Mapping[str, str], *, cluster_name: str, environ: Mapping[str, str]
) -> None:
    """Parse the settings as the provider will, without opening any AWS client; raise
    AWSSettingsError naming a bad one. ``karpy run`` calls it, so ``offline`` is refused."""
    import botocore.session

    region = botocore.session.get_session().get_config_variable("region")
    parsed = AWSSettings.from_settings(
        settings, cluster_name=cluster_name, environ=environ, default_region=region
    )
    if parsed.offline:
        raise AWSSettingsError(
            "aws setting offline=true (env KARPY_OFFLINE) is for karpy simulate, explain "
            "and top: an offline provider cannot launch nodes; unset it for karpy run"
        )
