"""Builders for scheduling tests: instance types, NodePools, pods and nodes in a line.

Pods are built as Kubernetes dicts and parsed with ``Pod.from_dict``, so tests go
through the same edge the provisioner uses.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from karpy.scheduling import (
    ExistingNode,
    InstanceType,
    NodePoolTemplate,
    NodeTaint,
    Offering,
    Overhead,
    Pod,
    Requirements,
    Results,
    SharedLimit,
)
from karpy.scheduling.resources import parse_resource_list

ZONE = "topology.kubernetes.io/zone"
HOSTNAME = "kubernetes.io/hostname"
CAPACITY_TYPE = "karpenter.sh/capacity-type"
INSTANCE_TYPE = "node.kubernetes.io/instance-type"
ARCH = "kubernetes.io/arch"
ZONES = ("zone-a", "zone-b", "zone-c")
GIB = 1 << 30

_names = itertools.count(1)


def itype(
    name: str,
    cpu: float,
    memory_gib: float,
    *,
    pods: int = 110,
    zones: Sequence[str] = ZONES,
    capacity_types: Sequence[str] = ("on-demand",),
    price: float | None = None,
    arch: str = "amd64",
    extra: Mapping[str, int] | None = None,
    unavailable: Iterable[tuple[str, str]] = (),
    labels: Mapping[str, str] | None = None,
) -> InstanceType:
    """An instance type; price defaults to cpu + memory/4 (spot at 70%)."""
    base = price if price is not None else cpu + memory_gib / 4
    blocked = set(unavailable)
    offerings = [
        Offering(
            zone,
            ct,
            base * (0.7 if ct == "spot" else 1.0),
            available=(zone, ct) not in blocked,
        )
        for zone in zones
        for ct in capacity_types
    ]
    capacity = {"cpu": int(cpu * 1000), "memory": int(memory_gib * GIB), "pods": pods}
    capacity.update(extra or {})
    reqs = Requirements.from_labels(labels or {})
    return InstanceType.build(
        name,
        capacity=capacity,
        offerings=offerings,
        architecture=arch,
        requirements=reqs.values(),
    )


def standard_types() -> list[InstanceType]:
    """small (2 CPU/4 GiB), medium (4/16), large (8/32), xlarge (16/64)."""
    return [
        itype("small", 2, 4),
        itype("medium", 4, 16),
        itype("large", 8, 32),
        itype("xlarge", 16, 64),
    ]


def nodepool(
    name: str = "default",
    types: Sequence[InstanceType] | None = None,
    *,
    weight: int = 0,
    labels: Mapping[str, str] | None = None,
    requirements: Sequence[Mapping[str, Any]] = (),
    taints: Sequence[Mapping[str, str]] = (),
    startup_taints: Sequence[Mapping[str, str]] = (),
    limits: Mapping[str, str] | None = None,
    usage: Mapping[str, int] | None = None,
    shared_limits: Sequence[SharedLimit] = (),
) -> NodePoolTemplate:
    """A NodePool built from a v1 NodePool dict (``shared_limits``: the ClusterLimits
    covering it)."""
    spec: dict[str, Any] = {
        "weight": weight,
        "template": {
            "metadata": {"labels": dict(labels or {})},
            "spec": {
                "requirements": list(requirements),
                "taints": list(taints),
                "startupTaints": list(startup_taints),
            },
        },
    }
    if limits is not None:
        spec["limits"] = dict(limits)
    return NodePoolTemplate.from_nodepool_dict(
        {"metadata": {"name": name}, "spec": spec},
        types if types is not None else standard_types(),
        usage=usage,
        shared_limits=shared_limits,
    )


def pod_dict(
    name: str | None = None,
    *,
    cpu: str = "100m",
    memory: str = "128Mi",
    namespace: str = "default",
    labels: Mapping[str, str] | None = None,
    node_selector: Mapping[str, str] | None = None,
    required_terms: Sequence[Sequence[Mapping[str, Any]]] | None = None,
    preferred_terms: Sequence[tuple[int, Sequence[Mapping[str, Any]]]] = (),
    tolerations: Sequence[Mapping[str, Any]] = (),
    spread: Sequence[Mapping[str, Any]] = (),
    affinity: Sequence[Mapping[str, Any]] = (),
    anti_affinity: Sequence[Mapping[str, Any]] = (),
    preferred_affinity: Sequence[tuple[int, Mapping[str, Any]]] = (),
    preferred_anti_affinity: Sequence[tuple[int, Mapping[str, Any]]] = (),
    host_ports: Sequence[int] = (),
    extra_requests: Mapping[str, str] | None = None,
    node_name: str = "",
) -> dict[str, Any]:
    """A pod as the API server returns it."""
    name = name or f"pod-{next(_names)}"
    requests = {"cpu": cpu, "memory": memory, **(extra_requests or {})}
    container: dict[str, Any] = {"name": "app", "image": "app", "resources": {"requests": requests}}
    if host_ports:
        container["ports"] = [{"containerPort": p, "hostPort": p} for p in host_ports]
    spec: dict[str, Any] = {"containers": [container]}
    if node_selector:
        spec["nodeSelector"] = dict(node_selector)
    if node_name:
        spec["nodeName"] = node_name
    node_affinity: dict[str, Any] = {}
    if required_terms is not None:
        node_affinity["requiredDuringSchedulingIgnoredDuringExecution"] = {
            "nodeSelectorTerms": [{"matchExpressions": list(t)} for t in required_terms]
        }
    if preferred_terms:
        node_affinity["preferredDuringSchedulingIgnoredDuringExecution"] = [
            {"weight": w, "preference": {"matchExpressions": list(t)}} for w, t in preferred_terms
        ]
    pod_affinity: dict[str, Any] = {}
    if affinity:
        pod_affinity["requiredDuringSchedulingIgnoredDuringExecution"] = list(affinity)
    if preferred_affinity:
        pod_affinity["preferredDuringSchedulingIgnoredDuringExecution"] = [
            {"weight": w, "podAffinityTerm": t} for w, t in preferred_affinity
        ]
    pod_anti: dict[str, Any] = {}
    if anti_affinity:
        pod_anti["requiredDuringSchedulingIgnoredDuringExecution"] = list(anti_affinity)
    if preferred_anti_affinity:
        pod_anti["preferredDuringSchedulingIgnoredDuringExecution"] = [
            {"weight": w, "podAffinityTerm": t} for w, t in preferred_anti_affinity
        ]
    affinity_block = {
        k: v
        for k, v in {
            "nodeAffinity": node_affinity,
            "podAffinity": pod_affinity,
            "podAntiAffinity": pod_anti,
        }.items()
        if v
    }
    if affinity_block:
        spec["affinity"] = affinity_block
    if tolerations:
        spec["tolerations"] = list(tolerations)
    if spread:
        spec["topologySpreadConstraints"] = list(spread)
    return {
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": f"uid-{name}",
            "labels": dict(labels or {}),
        },
        "spec": spec,
    }


def pod(name: str | None = None, **kwargs: Any) -> Pod:
    """A parsed pod; see :func:`pod_dict` for the arguments."""
    return Pod.from_dict(pod_dict(name, **kwargs))


def pods(count: int, prefix: str = "p", **kwargs: Any) -> list[Pod]:
    """``count`` identical pods named ``prefix-0`` ..."""
    return [pod(f"{prefix}-{i}", **kwargs) for i in range(count)]


def spread(
    key: str,
    labels: Mapping[str, str],
    *,
    max_skew: int = 1,
    when: str = "DoNotSchedule",
    **extra: Any,
) -> dict[str, Any]:
    """A topology spread constraint selecting ``labels``."""
    return {
        "maxSkew": max_skew,
        "topologyKey": key,
        "whenUnsatisfiable": when,
        "labelSelector": {"matchLabels": dict(labels)},
        **extra,
    }


def term(key: str, labels: Mapping[str, str], **extra: Any) -> dict[str, Any]:
    """A pod (anti-)affinity term selecting ``labels`` on ``key``."""
    return {"labelSelector": {"matchLabels": dict(labels)}, "topologyKey": key, **extra}


def expr(key: str, operator: str, *values: str) -> dict[str, Any]:
    """A node-selector requirement."""
    out: dict[str, Any] = {"key": key, "operator": operator}
    if values:
        out["values"] = list(values)
    return out


def node(
    name: str,
    *,
    cpu: float = 4,
    memory_gib: float = 16,
    pods_capacity: int = 110,
    labels: Mapping[str, str] | None = None,
    zone: str = "zone-a",
    taints: Sequence[Mapping[str, str]] = (),
    bound: Sequence[Pod] = (),
) -> ExistingNode:
    """An existing, initialized node."""
    allocatable = {
        "cpu": str(cpu),
        "memory": f"{int(memory_gib * 1024)}Mi",
        "pods": str(pods_capacity),
    }
    return ExistingNode.from_node_dict(
        {
            "metadata": {
                "name": name,
                "labels": {HOSTNAME: name, ZONE: zone, **(labels or {})},
            },
            "spec": {"taints": list(taints)},
            "status": {"allocatable": allocatable, "capacity": allocatable},
        },
        bound,
    )


def taint(key: str, effect: str = "NoSchedule", value: str = "") -> dict[str, str]:
    """A taint dict."""
    out = {"key": key, "effect": effect}
    if value:
        out["value"] = value
    return out


def toleration(key: str = "", operator: str = "Exists", **extra: str) -> dict[str, str]:
    """A toleration dict."""
    out = {"key": key, "operator": operator}
    out.update(extra)
    return out


def placement(results: Results) -> dict[str, str]:
    """Pod name to ``new:<index>`` / node name."""
    return {key.split("/", 1)[1]: where for key, where in results.placements().items()}


def claim_of(results: Results, pod_name: str) -> Any:
    """The NodeClaimPlan holding the pod named ``pod_name``."""
    for claim in results.new_nodeclaims:
        if any(p.name == pod_name for p in claim.pods):
            return claim
    raise AssertionError(f"{pod_name} is on no new NodeClaim")


def domain_of(results: Results, pod_name: str, key: str) -> str | None:
    """The single value of ``key`` on the NodeClaim holding the pod, if narrowed."""
    requirement = claim_of(results, pod_name).requirements.get(key)
    return None if requirement is None else requirement.single()


def resources(**amounts: str) -> dict[str, int]:
    """Canonical resource list from quantity strings."""
    return parse_resource_list(amounts)


__all__ = [
    "ARCH",
    "CAPACITY_TYPE",
    "GIB",
    "HOSTNAME",
    "INSTANCE_TYPE",
    "ZONE",
    "ZONES",
    "NodeTaint",
    "Overhead",
    "claim_of",
    "domain_of",
    "expr",
    "itype",
    "node",
    "nodepool",
    "placement",
    "pod",
    "pod_dict",
    "pods",
    "resources",
    "spread",
    "standard_types",
    "taint",
    "term",
    "toleration",
]
