"""API-shaped objects for tests of code built on the cluster model.

Each factory returns the dict the API server would send (camelCase keys) for a Node,
NodeClaim, Pod, DaemonSet, NodePool, PersistentVolumeClaim, PersistentVolume or
StorageClass, with the fields the autoscaler reads. Feed them
to :class:`~karpy.state.Cluster`'s ``update_*`` methods to set up a scene without a
cluster.

What they do not do: apply the API server's defaulting or validation (a NodeClaim has
no ``metadata.creationTimestamp``, a Pod no default tolerations), or keep objects
consistent with each other (binding a pod does not touch its node).
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from typing import Any, Final

__all__ = [
    "GIB",
    "daemonset",
    "node",
    "nodeclaim",
    "nodepool",
    "persistent_volume",
    "persistent_volume_claim",
    "pod",
    "storage_class",
]

_uids = itertools.count(1)

GIB = 2**30
"""Bytes in a GiB (canonical memory unit)."""


def _conditions(**statuses: bool | None) -> list[dict[str, str]]:
    return [
        {"type": kind, "status": "True" if value else "False", "reason": kind,
         "message": "", "lastTransitionTime": "2024-01-01T00:00:00Z"}
        for kind, value in statuses.items()
        if value is not None
    ]


def node(
    name: str,
    *,
    provider_id: str | None = None,
    nodepool: str | None = None,
    labels: Mapping[str, str] | None = None,
    cpu: str = "4",
    memory: str = "16Gi",
    pods: str = "110",
    taints: Sequence[Mapping[str, str]] = (),
    unschedulable: bool = False,
    deleting: bool = False,
    initialized: bool = True,
) -> dict[str, Any]:
    """A Node; managed (with NodePool labels) when ``nodepool`` is given."""
    all_labels = {"kubernetes.io/hostname": name, **(labels or {})}
    if nodepool:
        all_labels["karpenter.sh/nodepool"] = nodepool
        all_labels["karpenter.sh/registered"] = "true"
        if initialized:
            all_labels["karpenter.sh/initialized"] = "true"
    meta: dict[str, Any] = {"name": name, "uid": f"node-{next(_uids)}", "labels": all_labels}
    if deleting:
        meta["deletionTimestamp"] = "2024-01-01T00:00:00Z"
    resources = {"cpu": cpu, "memory": memory, "pods": pods}
    spec: dict[str, Any] = {"taints": [dict(t) for t in taints]}
    if provider_id:
        spec["providerID"] = provider_id
    if unschedulable:
        spec["unschedulable"] = True
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": meta,
        "spec": spec,
        "status": {"capacity": resources, "allocatable": resources},
    }


def nodeclaim(
    name: str,
    *,
    nodepool: str = "default",
    provider_id: str | None = None,
    node_name: str | None = None,
    labels: Mapping[str, str] | None = None,
    cpu: str = "4",
    memory: str = "16Gi",
    launched: bool | None = None,
    registered: bool | None = None,
    initialized: bool | None = None,
    deleting: bool = False,
    taints: Sequence[Mapping[str, str]] = (),
    startup_taints: Sequence[Mapping[str, str]] = (),
) -> dict[str, Any]:
    """A NodeClaim; launched (status filled) when ``provider_id`` is given."""
    meta: dict[str, Any] = {
        "name": name,
        "uid": f"nc-{next(_uids)}",
        "labels": {"karpenter.sh/nodepool": nodepool, **(labels or {})},
    }
    if deleting:
        meta["deletionTimestamp"] = "2024-01-01T00:00:00Z"
    status: dict[str, Any] = {}
    if provider_id:
        status["providerID"] = provider_id
        resources = {"cpu": cpu, "memory": memory, "pods": "110"}
        status["capacity"] = resources
        status["allocatable"] = resources
        if launched is None:
            launched = True
    if node_name:
        status["nodeName"] = node_name
    status["conditions"] = _conditions(
        Launched=launched, Registered=registered, Initialized=initialized
    )
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodeClaim",
        "metadata": meta,
        "spec": {
            "nodeClassRef": {"group": "karpenter.test.sh", "kind": "TestNodeClass",
                             "name": "default"},
            "requirements": [],
            "taints": [dict(t) for t in taints],
            "startupTaints": [dict(t) for t in startup_taints],
        },
        "status": status,
    }


#: Owner kinds outside apps/v1 (a mirror pod's owner is a core Node), so an owner
#: reference reads as the API server writes it: ownership is judged by apiVersion and kind.
_OWNER_API_VERSIONS: Final = {"Node": "v1", "Job": "batch/v1"}


def pod(
    name: str,
    *,
    namespace: str = "default",
    cpu: str = "1",
    memory: str = "1Gi",
    node_name: str | None = None,
    unschedulable: bool = True,
    owner_kind: str | None = "ReplicaSet",
    owner_name: str = "inflate-abc",
    phase: str = "Pending",
    deleting: bool = False,
    nominated_node_name: str | None = None,
    labels: Mapping[str, str] | None = None,
    node_selector: Mapping[str, str] | None = None,
    tolerations: Sequence[Mapping[str, str]] = (),
    claims: Sequence[str] = (),
    ephemeral: Sequence[str] = (),
) -> dict[str, Any]:
    """A Pod; pending and marked Unschedulable unless ``node_name`` is given.

    It mounts the PersistentVolumeClaims named in ``claims`` (volumes ``claim-0``...)
    and an ephemeral volume (with a claim template) for each name in ``ephemeral``.
    """
    meta: dict[str, Any] = {
        "name": name,
        "namespace": namespace,
        "uid": f"pod-{next(_uids)}",
        "labels": dict(labels or {"app": "inflate"}),
    }
    if owner_kind:
        meta["ownerReferences"] = [
            {"apiVersion": _OWNER_API_VERSIONS.get(owner_kind, "apps/v1"), "kind": owner_kind,
             "name": owner_name, "uid": f"owner-{owner_name}", "controller": True}
        ]
    if deleting:
        meta["deletionTimestamp"] = "2024-01-01T00:00:00Z"
    spec: dict[str, Any] = {
        "containers": [
            {"name": "app", "image": "pause",
             "resources": {"requests": {"cpu": cpu, "memory": memory}}}
        ],
        "tolerations": [dict(t) for t in tolerations],
    }
    if node_selector:
        spec["nodeSelector"] = dict(node_selector)
    volumes: list[dict[str, Any]] = [
        {"name": f"claim-{i}", "persistentVolumeClaim": {"claimName": claim}}
        for i, claim in enumerate(claims)
    ]
    volumes += [
        {"name": volume, "ephemeral": {"volumeClaimTemplate": {"spec": {
            "accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": "1Gi"}},
        }}}}
        for volume in ephemeral
    ]
    if volumes:
        spec["volumes"] = volumes
    status: dict[str, Any] = {"phase": "Running" if node_name and phase == "Pending" else phase}
    if node_name:
        spec["nodeName"] = node_name
        status["conditions"] = [{"type": "PodScheduled", "status": "True"}]
    elif unschedulable:
        status["conditions"] = [
            {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}
        ]
    if nominated_node_name:
        status["nominatedNodeName"] = nominated_node_name
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec, "status": status}


def daemonset(
    name: str,
    *,
    namespace: str = "kube-system",
    cpu: str = "100m",
    memory: str = "128Mi",
    node_selector: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """A DaemonSet whose pods request ``cpu`` and ``memory``."""
    template_spec: dict[str, Any] = {
        "containers": [
            {"name": "agent", "image": "agent",
             "resources": {"requests": {"cpu": cpu, "memory": memory}}}
        ]
    }
    if node_selector:
        template_spec["nodeSelector"] = dict(node_selector)
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": name, "namespace": namespace, "uid": f"ds-{next(_uids)}"},
        "spec": {"template": {"metadata": {"labels": {"app": name}}, "spec": template_spec}},
    }


def nodepool(
    name: str = "default",
    *,
    weight: int | None = None,
    limits: Mapping[str, str] | None = None,
    ready: bool = True,
    requirements: Sequence[Mapping[str, Any]] = (),
    labels: Mapping[str, str] | None = None,
    taints: Sequence[Mapping[str, str]] = (),
    startup_taints: Sequence[Mapping[str, str]] = (),
    generation: int = 1,
) -> dict[str, Any]:
    """A karpenter.sh/v1 NodePool for the fake provider's TestNodeClass."""
    spec: dict[str, Any] = {
        "template": {
            "metadata": {"labels": dict(labels or {})},
            "spec": {
                "nodeClassRef": {"group": "karpenter.test.sh", "kind": "TestNodeClass",
                                 "name": "default"},
                "requirements": [dict(r) for r in requirements],
                "taints": [dict(t) for t in taints],
                "startupTaints": [dict(t) for t in startup_taints],
                "expireAfter": "720h",
            },
        },
    }
    if weight is not None:
        spec["weight"] = weight
    if limits:
        spec["limits"] = dict(limits)
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": name, "uid": f"np-{next(_uids)}", "generation": generation},
        "spec": spec,
        "status": {"conditions": _conditions(Ready=ready)},
    }


def persistent_volume_claim(
    name: str,
    *,
    namespace: str = "default",
    volume_name: str | None = None,
    storage_class: str | None = None,
    owner: Mapping[str, Any] | None = None,
    bind_completed: bool | None = None,
    deleting: bool = False,
    phase: str | None = None,
) -> dict[str, Any]:
    """A PersistentVolumeClaim; bound (annotated as the PV controller does, phase
    Bound) when ``volume_name`` is given, unless ``bind_completed`` says otherwise.
    ``owner`` (a pod) makes it that pod's ephemeral volume claim."""
    bound = bool(volume_name) if bind_completed is None else bind_completed
    meta: dict[str, Any] = {"name": name, "namespace": namespace,
                            "uid": f"pvc-{next(_uids)}", "annotations": {}}
    if bound:
        meta["annotations"]["pv.kubernetes.io/bind-completed"] = "yes"
    if owner is not None:
        meta["ownerReferences"] = [
            {"apiVersion": "v1", "kind": "Pod", "name": owner["metadata"]["name"],
             "uid": owner["metadata"]["uid"], "controller": True}
        ]
    if deleting:
        meta["deletionTimestamp"] = "2024-01-01T00:00:00Z"
    spec: dict[str, Any] = {"accessModes": ["ReadWriteOnce"],
                            "resources": {"requests": {"storage": "1Gi"}}}
    if volume_name:
        spec["volumeName"] = volume_name
    if storage_class is not None:
        spec["storageClassName"] = storage_class
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": meta,
        "spec": spec,
        "status": {"phase": phase or ("Bound" if bound else "Pending")},
    }


def persistent_volume(
    name: str,
    *,
    zones: Sequence[str] = (),
    node_selector_terms: Sequence[Sequence[Mapping[str, Any]]] = (),
    local_path: str | None = None,
    deleting: bool = False,
) -> dict[str, Any]:
    """A PersistentVolume whose node affinity requires one of ``zones`` (and/or the
    given ``node_selector_terms``); a ``local`` volume when ``local_path`` is set."""
    terms = [{"matchExpressions": [dict(e) for e in term]} for term in node_selector_terms]
    if zones:
        terms.append({"matchExpressions": [
            {"key": "topology.kubernetes.io/zone", "operator": "In", "values": list(zones)}
        ]})
    spec: dict[str, Any] = {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"]}
    if terms:
        spec["nodeAffinity"] = {"required": {"nodeSelectorTerms": terms}}
    if local_path:
        spec["local"] = {"path": local_path}
    else:
        spec["csi"] = {"driver": "test.csi.k8s.io", "volumeHandle": name}
    meta: dict[str, Any] = {"name": name, "uid": f"pv-{next(_uids)}"}
    if deleting:
        meta["deletionTimestamp"] = "2024-01-01T00:00:00Z"
    return {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": meta, "spec": spec}


def storage_class(
    name: str,
    *,
    zones: Sequence[str] = (),
    binding_mode: str = "WaitForFirstConsumer",
) -> dict[str, Any]:
    """A StorageClass; ``zones`` become its allowedTopologies."""
    out: dict[str, Any] = {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": name, "uid": f"sc-{next(_uids)}"},
        "provisioner": "test.csi.k8s.io",
        "volumeBindingMode": binding_mode,
    }
    if zones:
        out["allowedTopologies"] = [{"matchLabelExpressions": [
            {"key": "topology.kubernetes.io/zone", "values": list(zones)}
        ]}]
    return out
