"""What a pod is, as the autoscaler sorts pods: read straight from the API object.

These predicates follow Karpenter's (pkg/utils/pod): a pod is *provisionable* when
kube-scheduler tried and failed to place it and nothing else will; *reschedulable* when
it would need a new home if its node went away. Where a pod is in its life (terminal,
terminating) and who owns it are read with :mod:`karpy.apis.pods`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from karpy.apis.pods import (
    is_active,
    is_owned_by_daemonset,
    is_owned_by_node,
    is_owned_by_statefulset,
    is_terminal,
    is_terminating,
)

__all__ = [
    "failed_to_schedule",
    "is_preempting",
    "is_provisionable",
    "is_reschedulable",
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


def is_provisionable(pod: Mapping[str, Any]) -> bool:
    """Needs new capacity: unbound, marked Unschedulable by kube-scheduler, not
    preempting, not a DaemonSet or static pod, not terminating or terminal."""
    return (
        not (pod.get("spec") or {}).get("nodeName")
        and failed_to_schedule(pod)
        and not is_preempting(pod)
        and not is_owned_by_daemonset(pod)
        and not is_owned_by_node(pod)
        and not is_terminating(pod)
        and not is_terminal(pod)
    )


def is_reschedulable(pod: Mapping[str, Any]) -> bool:
    """Would need a new home if its node went away: active (or a terminating
    StatefulSet pod) and not tied to the node (Karpenter's IsReschedulable).

    A StatefulSet pod is deleted before its replacement, with the same name, is
    created: while it terminates, the replacement is about to need room."""
    returning = is_terminating(pod) and is_owned_by_statefulset(pod)
    return (
        (is_active(pod) or returning)
        and not is_owned_by_daemonset(pod)
        and not is_owned_by_node(pod)
    )
