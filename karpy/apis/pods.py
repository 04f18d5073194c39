"""Where a pod is in its life and who owns it, read straight from the API object.

The one home of these predicates, judged as Karpenter's pod utilities (pkg/utils/pod)
judge them: *terminal* is a phase (Succeeded or Failed), *terminating* a requested
deletion, *active* neither; ownership compares an owner reference's ``apiVersion`` and
``kind`` together, so a mirror pod is one owned by a core (``v1``) Node and a DaemonSet
pod one owned by an ``apps/v1`` DaemonSet. They sit at the bottom of karpy's layers so
scheduling, state, the controllers and the tools all read a pod the same way.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = [
    "controller_reference",
    "daemonset_reference",
    "has_dra_requirements",
    "is_active",
    "is_owned_by",
    "is_owned_by_daemonset",
    "is_owned_by_node",
    "is_owned_by_statefulset",
    "is_terminal",
    "is_terminating",
    "owner_reference",
]

Pod = Mapping[str, Any]


def _meta(pod: Pod) -> Mapping[str, Any]:
    return pod.get("metadata") or {}


def is_terminal(pod: Pod) -> bool:
    """Succeeded or Failed: the pod has finished and holds nothing on its node."""
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")


def is_terminating(pod: Pod) -> bool:
    """Deletion was requested (it still holds its node's resources until it is gone)."""
    return bool(_meta(pod).get("deletionTimestamp"))


def has_dra_requirements(pod: Pod | None) -> bool:
    """Whether ``pod`` references a ResourceClaim, itself or in any container
    (Karpenter's HasDRARequirements)."""
    spec = (pod or {}).get("spec") or {}
    if spec.get("resourceClaims"):
        return True
    containers = [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]
    return any(((c.get("resources") or {}).get("claims")) for c in containers)


def is_active(pod: Pod) -> bool:
    """Neither terminal nor terminating."""
    return not is_terminal(pod) and not is_terminating(pod)


def owner_reference(pod: Pod, api_version: str, kind: str) -> Mapping[str, Any] | None:
    """The pod's first owner reference naming ``api_version`` and ``kind``, or None."""
    for ref in _meta(pod).get("ownerReferences") or ():
        if ref.get("apiVersion") == api_version and ref.get("kind") == kind:
            return ref  # type: ignore[no-any-return]
    return None


def controller_reference(obj: Pod) -> Mapping[str, Any] | None:
    """The object's owner reference marked ``controller: true`` (its managing
    controller: a pod's ReplicaSet, a ReplicaSet's Deployment), or None."""
    for ref in _meta(obj).get("ownerReferences") or ():
        if ref.get("controller"):
            return ref  # type: ignore[no-any-return]
    return None


def is_owned_by(pod: Pod, api_version: str, kind: str) -> bool:
    """Whether an owner reference of the pod names ``api_version`` and ``kind``."""
    return owner_reference(pod, api_version, kind) is not None


def daemonset_reference(pod: Pod) -> Mapping[str, Any] | None:
    """The owner reference to the pod's apps/v1 DaemonSet, or None."""
    return owner_reference(pod, "apps/v1", "DaemonSet")


def is_owned_by_daemonset(pod: Pod) -> bool:
    """Owned by an apps/v1 DaemonSet (its controller places it, not kube-scheduler)."""
    return daemonset_reference(pod) is not None


def is_owned_by_statefulset(pod: Pod) -> bool:
    """Owned by an apps/v1 StatefulSet (its replacement comes back under the same name)."""
    return is_owned_by(pod, "apps/v1", "StatefulSet")


def is_owned_by_node(pod: Pod) -> bool:
    """A mirror (static) pod: the kubelet owns it, it exists only on its node and the
    API cannot remove it."""
    return is_owned_by(pod, "v1", "Node")
