"""Objects for termination and NodePool unit tests: NodeClaims, Nodes and pods shaped as
the API server returns them, managed by the fake provider's TestNodeClass."""

from __future__ import annotations

from typing import Any

from karpy.apis.annotations import ANNOTATION_DO_NOT_DISRUPT, FINALIZER_TERMINATION
from karpy.apis.labels import (
    LABEL_CAPACITY_TYPE,
    LABEL_INSTANCE_TYPE,
    LABEL_NODEPOOL,
    LABEL_ZONE,
    nodeclass_label_key,
)
from karpy.cloudprovider.fake import FAKE_NODE_CLASS

NODECLASS_LABEL = nodeclass_label_key(FAKE_NODE_CLASS.group, FAKE_NODE_CLASS.kind)
T0 = "2024-01-01T00:00:00Z"


def nodeclaim(
    name: str,
    *,
    provider_id: str = "",
    node_name: str = "",
    nodepool: str = "default",
    termination_grace_period: str | None = None,
    registered: bool = True,
    finalizer: bool = True,
    managed: bool = True,
    capacity: dict[str, str] | None = None,
    conditions: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """A launched (and by default registered) NodeClaim of ``nodepool``."""
    spec: dict[str, Any] = {
        "nodeClassRef": {
            "group": FAKE_NODE_CLASS.group if managed else "karpenter.k8s.aws",
            "kind": FAKE_NODE_CLASS.kind if managed else "EC2NodeClass",
            "name": "default",
        },
        "requirements": [{"key": LABEL_NODEPOOL, "operator": "In", "values": [nodepool]}],
        "resources": {"requests": {"cpu": "1"}},
    }
    if termination_grace_period is not None:
        spec["terminationGracePeriod"] = termination_grace_period
    status: dict[str, Any] = {}
    if provider_id:
        status["providerID"] = provider_id
        status["capacity"] = capacity or {"cpu": "4", "memory": "16Gi", "pods": "110"}
        conds = [{"type": "Launched", "status": "True", "reason": "Launched",
                  "lastTransitionTime": T0}]
        if registered:
            conds.append({"type": "Registered", "status": "True", "reason": "Registered",
                          "lastTransitionTime": T0})
        status["conditions"] = conds + list(conditions or ())
    if node_name:
        status["nodeName"] = node_name
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodeClaim",
        "metadata": {
            "name": name,
            "labels": {
                LABEL_NODEPOOL: nodepool, LABEL_ZONE: "test-zone-a",
                LABEL_CAPACITY_TYPE: "on-demand", LABEL_INSTANCE_TYPE: "default-instance-type",
                NODECLASS_LABEL: "default",
            },
            "finalizers": [FINALIZER_TERMINATION] if finalizer else [],
        },
        "spec": spec,
        "status": status,
    }


def node(
    name: str,
    *,
    provider_id: str,
    nodepool: str | None = "default",
    ready: bool = True,
    finalizer: bool = True,
    capacity: dict[str, str] | None = None,
    taints: list[dict[str, str]] | None = None,
) -> dict[str, Any]:
    """A registered Node of ``nodepool`` (None: a node karpy does not manage)."""
    labels = {LABEL_ZONE: "test-zone-a", "kubernetes.io/hostname": name}
    if nodepool is not None:
        labels |= {LABEL_NODEPOOL: nodepool, NODECLASS_LABEL: "default"}
    cap = capacity or {"cpu": "4", "memory": "16Gi", "pods": "110"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": labels,
            "finalizers": [FINALIZER_TERMINATION] if finalizer else [],
        },
        "spec": {"providerID": provider_id, "taints": list(taints or ())},
        "status": {
            "capacity": cap,
            "allocatable": cap,
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        },
    }


def pod(
    name: str,
    *,
    node_name: str,
    namespace: str = "default",
    labels: dict[str, str] | None = None,
    owner: tuple[str, str] | None = ("apps/v1", "ReplicaSet"),
    priority_class: str | None = None,
    do_not_disrupt: str | None = None,
    tolerations: list[dict[str, str]] | None = None,
    phase: str = "Running",
    grace_seconds: int = 30,
    cpu: str = "1",
) -> dict[str, Any]:
    """A pod bound to ``node_name`` (Running and Ready by default)."""
    meta: dict[str, Any] = {"name": name, "namespace": namespace, "labels": dict(labels or {})}
    if owner is not None:
        meta["ownerReferences"] = [{"apiVersion": owner[0], "kind": owner[1], "name": "owner",
                                    "uid": f"owner-{owner[1]}", "controller": True}]
    if do_not_disrupt is not None:
        meta["annotations"] = {ANNOTATION_DO_NOT_DISRUPT: do_not_disrupt}
    spec: dict[str, Any] = {
        "nodeName": node_name,
        "terminationGracePeriodSeconds": grace_seconds,
        "containers": [{"name": "c", "image": "pause",
                        "resources": {"requests": {"cpu": cpu}}}],
    }
    if priority_class:
        spec["priorityClassName"] = priority_class
    if tolerations:
        spec["tolerations"] = tolerations
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": spec,
        "status": {
            "phase": phase,
            "startTime": T0,
            "conditions": [{"type": "Ready", "status": "True" if phase == "Running" else "False",
                            "lastTransitionTime": T0}],
        },
    }


def pdb(name: str, labels: dict[str, str], *, min_available: int,
        namespace: str = "default") -> dict[str, Any]:
    """A PodDisruptionBudget keeping ``min_available`` of the pods labelled ``labels``."""
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"minAvailable": min_available, "selector": {"matchLabels": dict(labels)}},
    }
