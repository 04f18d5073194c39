"""Builders for the NodeClaim controller tests: NodeClaims as the provisioner creates them
and Nodes as a kubelet (or kwok) registers them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from karpy.apis.annotations import FINALIZER_TERMINATION
from karpy.apis.labels import LABEL_NODEPOOL
from karpy.apis.taints import UNREGISTERED_NO_EXECUTE_TAINT

__all__ = ["node_manifest", "nodeclaim_manifest"]


def nodeclaim_manifest(
    name: str = "default-abcde",
    *,
    requests: Mapping[str, str] | None = None,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    taints: list[dict[str, str]] | None = None,
    startup_taints: list[dict[str, str]] | None = None,
    requirements: list[dict[str, Any]] | None = None,
    node_class_group: str = "karpenter.test.sh",
    node_class_kind: str = "TestNodeClass",
    finalizer: bool = False,
) -> dict[str, Any]:
    """A NodeClaim as the provisioner would create it (for the fake provider by default)."""
    meta: dict[str, Any] = {
        "name": name,
        "labels": {LABEL_NODEPOOL: "default", **(labels or {})},
        "annotations": dict(annotations or {}),
    }
    if finalizer:
        meta["finalizers"] = [FINALIZER_TERMINATION]
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodeClaim",
        "metadata": meta,
        "spec": {
            "requirements": requirements or [],
            "resources": {"requests": dict(requests or {"cpu": "1", "memory": "1Gi"})},
            "nodeClassRef": {"group": node_class_group, "kind": node_class_kind,
                             "name": "default"},
            "taints": list(taints or []),
            "startupTaints": list(startup_taints or []),
        },
    }


def node_manifest(
    name: str,
    provider_id: str,
    *,
    ready: bool = True,
    taints: list[dict[str, str]] | None = None,
    unregistered_taint: bool = True,
    labels: Mapping[str, str] | None = None,
    allocatable: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """A Node as a kubelet (or kwok) registers it: the unregistered taint by default."""
    all_taints = list(taints or [])
    if unregistered_taint:
        all_taints.append(UNREGISTERED_NO_EXECUTE_TAINT.to_dict())
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name,
                                              **(labels or {})}},
        "spec": {"providerID": provider_id, "taints": all_taints},
        "status": {
            "allocatable": dict(allocatable or {"cpu": "3900m", "memory": "15Gi",
                                                "pods": "110"}),
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        },
    }
