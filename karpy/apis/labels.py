"""Well-known node labels: Karpenter's own, the Kubernetes ones it schedules on, their
deprecated aliases, and the label domains a NodePool may not set.

Plain constants and frozensets only, so that the pure scheduling package can use them.
Cloud providers add their own labels (``karpenter.k8s.aws/instance-*``,
``karpenter.azure.com/sku-*``) in their packages and announce them through their
``APIExtension`` (see ``karpy.apis.extension``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Final

__all__ = [
    "ARCHITECTURE_AMD64",
    "ARCHITECTURE_ARM64",
    "CAPACITY_TYPE_ON_DEMAND",
    "CAPACITY_TYPE_RESERVED",
    "CAPACITY_TYPE_SPOT",
    "COMPATIBILITY_GROUP",
    "GROUP",
    "KUBERNETES_IO_ALLOWED_LABELS",
    "LABEL_ARCH",
    "LABEL_ARCH_BETA",
    "LABEL_CAPACITY_TYPE",
    "LABEL_DOMAIN_EXCEPTIONS",
    "LABEL_DO_NOT_SYNC_TAINTS",
    "LABEL_HOSTNAME",
    "LABEL_INITIALIZED",
    "LABEL_INSTANCE_TYPE",
    "LABEL_INSTANCE_TYPE_BETA",
    "LABEL_NODEPOOL",
    "LABEL_OS",
    "LABEL_OS_BETA",
    "LABEL_REGION",
    "LABEL_REGION_BETA",
    "LABEL_REGISTERED",
    "LABEL_WINDOWS_BUILD",
    "LABEL_ZONE",
    "LABEL_ZONE_BETA",
    "NORMALIZED_LABELS",
    "RESTRICTED_LABELS",
    "RESTRICTED_LABEL_DOMAINS",
    "WELL_KNOWN_LABELS",
    "WELL_KNOWN_LABELS_FOR_OFFERINGS",
    "WELL_KNOWN_RESOURCES",
    "WELL_KNOWN_VALUES_FOR_REQUIREMENTS",
    "label_domain",
    "nodeclass_label_key",
    "normalize_label",
    "restricted_label_reason",
]

#: Karpenter's API group and label domain.
GROUP: Final = "karpenter.sh"
#: The group of Karpenter's compatibility annotations.
COMPATIBILITY_GROUP: Final = "compatibility." + GROUP

# Karpenter's labels.
LABEL_NODEPOOL: Final = GROUP + "/nodepool"
LABEL_CAPACITY_TYPE: Final = GROUP + "/capacity-type"
LABEL_REGISTERED: Final = GROUP + "/registered"
LABEL_INITIALIZED: Final = GROUP + "/initialized"
LABEL_DO_NOT_SYNC_TAINTS: Final = GROUP + "/do-not-sync-taints"

# Kubernetes' well-known labels (k8s.io/api/core/v1 well_known_labels.go).
LABEL_HOSTNAME: Final = "kubernetes.io/hostname"
LABEL_ZONE: Final = "topology.kubernetes.io/zone"
LABEL_REGION: Final = "topology.kubernetes.io/region"
LABEL_INSTANCE_TYPE: Final = "node.kubernetes.io/instance-type"
LABEL_ARCH: Final = "kubernetes.io/arch"
LABEL_OS: Final = "kubernetes.io/os"
LABEL_WINDOWS_BUILD: Final = "node.kubernetes.io/windows-build"

# Deprecated aliases that pods still use; normalized to the labels above.
LABEL_ZONE_BETA: Final = "failure-domain.beta.kubernetes.io/zone"
LABEL_REGION_BETA: Final = "failure-domain.beta.kubernetes.io/region"
LABEL_INSTANCE_TYPE_BETA: Final = "beta.kubernetes.io/instance-type"
LABEL_ARCH_BETA: Final = "beta.kubernetes.io/arch"
LABEL_OS_BETA: Final = "beta.kubernetes.io/os"

# Well-known values.
ARCHITECTURE_AMD64: Final = "amd64"
ARCHITECTURE_ARM64: Final = "arm64"
CAPACITY_TYPE_SPOT: Final = "spot"
CAPACITY_TYPE_ON_DEMAND: Final = "on-demand"
CAPACITY_TYPE_RESERVED: Final = "reserved"

#: Label domains a NodePool may not label nodes in (the kubelet refuses to set most
#: kubernetes.io and k8s.io labels; karpenter.sh is Karpenter's own), except for the
#: well-known keys and the sub-domains of :data:`LABEL_DOMAIN_EXCEPTIONS`.
RESTRICTED_LABEL_DOMAINS: Final = frozenset({"kubernetes.io", "k8s.io", GROUP})

#: Sub-domains of the restricted domains that NodePools may still use: the kubelet
#: sets them (node.kubernetes.io, node-restriction.kubernetes.io) or other software
#: owns them (kops.k8s.io).
LABEL_DOMAIN_EXCEPTIONS: Final = frozenset(
    {"kops.k8s.io", "node.kubernetes.io", "node-restriction.kubernetes.io"}
)

#: The keys of the kubernetes.io domain a NodePool may use, in the order of Karpenter's
#: CEL rule: the well-known ones and their deprecated aliases.
KUBERNETES_IO_ALLOWED_LABELS: Final = (
    "beta.kubernetes.io/instance-type",
    "failure-domain.beta.kubernetes.io/region",
    "beta.kubernetes.io/os",
    "beta.kubernetes.io/arch",
    "failure-domain.beta.kubernetes.io/zone",
    "topology.kubernetes.io/zone",
    "topology.kubernetes.io/region",
    "node.kubernetes.io/instance-type",
    "kubernetes.io/arch",
    "kubernetes.io/os",
    "node.kubernetes.io/windows-build",
)

#: Labels Karpenter schedules on and that NodePools and pods may narrow down.
WELL_KNOWN_LABELS: Final = frozenset(
    {
        LABEL_NODEPOOL,
        LABEL_ZONE,
        LABEL_REGION,
        LABEL_INSTANCE_TYPE,
        LABEL_ARCH,
        LABEL_OS,
        LABEL_CAPACITY_TYPE,
        LABEL_WINDOWS_BUILD,
    }
)

#: Labels that would interfere with provisioning if a NodePool set them.
RESTRICTED_LABELS: Final = frozenset({LABEL_HOSTNAME})

#: Labels whose values come from the offerings (zone x capacity type) of an instance type.
WELL_KNOWN_LABELS_FOR_OFFERINGS: Final = frozenset({LABEL_ZONE, LABEL_CAPACITY_TYPE})

#: Labels with a closed set of meaningful values.
WELL_KNOWN_VALUES_FOR_REQUIREMENTS: Final[Mapping[str, frozenset[str]]] = {
    LABEL_CAPACITY_TYPE: frozenset(
        {CAPACITY_TYPE_ON_DEMAND, CAPACITY_TYPE_SPOT, CAPACITY_TYPE_RESERVED}
    ),
}

#: Resources every instance type is expected to report.
WELL_KNOWN_RESOURCES: Final = frozenset({"cpu", "memory", "ephemeral-storage", "pods"})

#: Deprecated label keys and the well-known key each one means.
NORMALIZED_LABELS: Final[Mapping[str, str]] = {
    LABEL_ZONE_BETA: LABEL_ZONE,
    LABEL_REGION_BETA: LABEL_REGION,
    LABEL_INSTANCE_TYPE_BETA: LABEL_INSTANCE_TYPE,
    LABEL_ARCH_BETA: LABEL_ARCH,
    LABEL_OS_BETA: LABEL_OS,
}


def label_domain(key: str) -> str:
    """The prefix of a label key before '/', or '' when it has none."""
    prefix, sep, _ = key.partition("/")
    return prefix if sep else ""


def normalize_label(key: str) -> str:
    """The well-known key a deprecated alias stands for; other keys unchanged."""
    return NORMALIZED_LABELS.get(key, key)


def nodeclass_label_key(group: str, kind: str) -> str:
    """The label naming a node's NodeClass, e.g. ``karpenter.k8s.aws/ec2nodeclass``."""
    return f"{group}/{kind.lower()}"


def restricted_label_reason(
    key: str,
    *,
    well_known: Iterable[str] = WELL_KNOWN_LABELS,
    restricted_domains: Iterable[str] = RESTRICTED_LABEL_DOMAINS,
    restricted: Iterable[str] = RESTRICTED_LABELS,
    exceptions: Iterable[str] = LABEL_DOMAIN_EXCEPTIONS,
) -> str | None:
    """Why a NodePool may not use label ``key``, or None when it may.

    Providers widen ``well_known`` and ``restricted_domains`` with their own labels.
    A domain ending in one of ``exceptions`` is never restricted.
    """
    well_known = frozenset(well_known)
    if key in well_known or key in KUBERNETES_IO_ALLOWED_LABELS:
        return None
    domain = label_domain(key)
    if any(domain.endswith(exception) for exception in exceptions):
        return None
    for restricted_domain in sorted(restricted_domains):
        if domain == restricted_domain or domain.endswith("." + restricted_domain):
            return (
                f"label {key} is not allowed: domain {restricted_domain!r} is reserved; "
                f"use a well-known label ({', '.join(sorted(well_known))}) or a custom domain"
            )
    if key in frozenset(restricted):
        return f"label {key} is not allowed: it would interfere with provisioning"
    return None
