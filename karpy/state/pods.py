"""What a pod is, as the autoscaler sorts pods: read straight from the API object.

These predicates follow Karpenter's (pkg/utils/pod): a pod is *provisionable* when
kube-scheduler tried and failed to place it and nothing else will; *terminal* when it
has finished and no longer holds resources on its node.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = [
    "failed_to_schedule",
    "is_daemonset_pod",
    "is_owned_by_node",
    "is_preempting",
    "is_provisionable",
    "is_reschedulable",
    "is_terminal",
    "is_terminating",
    "pod_key",
]


def pod_key(pod: Mapping[str, Any]) -> str:
    """``namespace/name``."""
    meta = pod["metadata"]
    return f"{meta.get('namespace') or 'default'}/{meta['name']}"


def failed_to_schedule(pod: Mapping[str, Any]) -> bool:
    """kube-scheduler marked the pod PodScheduled=False with reason Unschedulable."""
    for condition in (pod.get("status") or {}).get("conditions") or ():
        if condition.get("type") == "PodScheduled" and condition.get("reason") == "Unschedulable":
            return True
    return False


def is_preempting(pod: Mapping[str, Any]) -> bool:
    """kube-scheduler is evicting lower-priority pods to make room for this one."""
    return bool((pod.get("status") or {}).get("nominatedNodeName"))


def _owner_kinds(pod: Mapping[str, Any]) -> list[str]:
    return [ref.get("kind", "") for ref in pod["metadata"].get("ownerReferences") or ()]


def is_daemonset_pod(pod: Mapping[str, Any]) -> bool:
    """Owned by a DaemonSet (the DaemonSet controller places it, not kube-scheduler)."""
    return "DaemonSet" in _owner_kinds(pod)


def is_owned_by_node(pod: Mapping[str, Any]) -> bool:
    """A static (mirror) pod: it exists only on its node."""
    return "Node" in _owner_kinds(pod)


def is_terminal(pod: Mapping[str, Any]) -> bool:
    """Succeeded or Failed: the pod no longer holds resources on its node."""
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")


def is_terminating(pod: Mapping[str, Any]) -> bool:
    """Being deleted (it still holds its node's resources until it is gone)."""
    return bool(pod["metadata"].get("deletionTimestamp"))


def is_provisionable(pod: Mapping[str, Any]) -> bool:
    """Needs new capacity: unbound, marked Unschedulable by kube-scheduler, not
    preempting, not a DaemonSet or static pod, not terminating or terminal."""
    return (
        not (pod.get("spec") or {}).get("nodeName")
        and failed_to_schedule(pod)
        and not is_preempting(pod)
        and not is_daemonset_pod(pod)
        and not is_owned_by_node(pod)
        and not is_terminating(pod)
        and not is_terminal(pod)
    )


def is_reschedulable(pod: Mapping[str, Any]) -> bool:
    """Would need a new home if its node went away: active (or a terminating
    StatefulSet pod) and not tied to the node (Karpenter's IsReschedulable).

    A StatefulSet pod is deleted before its replacement, with the same name, is
    created: while it terminates, the replacement is about to need room."""
    active = not (is_terminal(pod) or is_terminating(pod))
    returning = is_terminating(pod) and "StatefulSet" in _owner_kinds(pod)
    return (active or returning) and not is_daemonset_pod(pod) and not is_owned_by_node(pod)
