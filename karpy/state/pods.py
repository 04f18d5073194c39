"""What a pod is, as the autoscaler sorts pods: read straight from the API object.

These predicates follow Karpenter's (pkg/utils/pod): a pod is *provisionable* when
kube-scheduler tried and failed to place it and nothing else will; *reschedulable* when
it would need a new home if its node went away. Where a pod is in its life (terminal,
terminating) and who owns it are read with :mod:`karpy.apis.pods`.

Draining and disruption read the same model. A node is drained when no pod is *waiting
eviction*: every pod left is terminal, is a mirror (static) pod, tolerates the
``karpenter.sh/disrupted:NoSchedule`` taint (it chose to stay), or has been terminating
for over a minute past its deletion time. Pods with an active
``karpenter.sh/do-not-disrupt`` annotation still count as waiting (the drain stalls on
them) but are never *evictable*: only the NodeClaim's terminationGracePeriod removes
them, by deleting them in time to finish before the deadline.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any, Final

from karpy.apis.annotations import ANNOTATION_DO_NOT_DISRUPT
from karpy.apis.duration import parse_duration
from karpy.apis.pods import (
    is_active,
    is_owned_by_daemonset,
    is_owned_by_node,
    is_owned_by_statefulset,
    is_terminal,
    is_terminating,
)
from karpy.apis.taints import DISRUPTED_NO_SCHEDULE_TAINT
from karpy.runtime import parse_time
from karpy.scheduling.taints import NodeTaint, Toleration

__all__ = [
    "STUCK_TERMINATING_AFTER",
    "do_not_disrupt_active",
    "failed_to_schedule",
    "is_drainable",
    "is_evictable",
    "is_preempting",
    "is_provisionable",
    "is_reschedulable",
    "is_stuck_terminating",
    "is_waiting_eviction",
    "pod_key",
    "tolerates_disrupted_taint",
]

#: A pod terminating this long past its deletion time is given up on (Karpenter: 1 min).
STUCK_TERMINATING_AFTER: Final = timedelta(minutes=1)

_DISRUPTED = NodeTaint(
    key=DISRUPTED_NO_SCHEDULE_TAINT.key, effect=DISRUPTED_NO_SCHEDULE_TAINT.effect
)

Pod = Mapping[str, Any]


def _meta(pod: Pod) -> Mapping[str, Any]:
    return pod.get("metadata") or {}


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


def tolerates_disrupted_taint(pod: Pod) -> bool:
    """Whether the pod tolerates ``karpenter.sh/disrupted:NoSchedule`` (so it stays)."""
    tolerations = (pod.get("spec") or {}).get("tolerations") or ()
    return any(Toleration.from_dict(t).tolerates(_DISRUPTED) for t in tolerations)


def is_stuck_terminating(pod: Pod, now: datetime) -> bool:
    """Terminating for over a minute past its deletion time."""
    deleted = parse_time(_meta(pod).get("deletionTimestamp"))
    return deleted is not None and now - deleted > STUCK_TERMINATING_AFTER


def is_drainable(pod: Pod, now: datetime) -> bool:
    """A pod termination waits for: not tolerating the disrupted taint, not stuck
    terminating, not a mirror pod."""
    return (
        not tolerates_disrupted_taint(pod)
        and not is_stuck_terminating(pod, now)
        and not is_owned_by_node(pod)
    )


def is_waiting_eviction(pod: Pod, now: datetime) -> bool:
    """Still to leave the node before it is drained."""
    return not is_terminal(pod) and is_drainable(pod, now)


def do_not_disrupt_active(pod: Pod, now: datetime) -> bool:
    """Whether ``karpenter.sh/do-not-disrupt`` protects the pod now.

    "true" protects it for good; a duration ("30m") protects it for that long after it
    started. Any other value is ignored, as Karpenter ignores it.
    """
    value = (_meta(pod).get("annotations") or {}).get(ANNOTATION_DO_NOT_DISRUPT)
    if value is None:
        return False
    if value == "true":
        return True
    try:
        duration = parse_duration(value)
    except ValueError:
        return False
    if duration <= timedelta(0):
        return False
    started = parse_time((pod.get("status") or {}).get("startTime"))
    if started is None:
        return True  # cannot tell how long it has run: stay safe
    return now - started < duration


def is_evictable(pod: Pod, now: datetime) -> bool:
    """Whether the eviction API may be asked to remove the pod now."""
    return (
        is_active(pod)
        and not tolerates_disrupted_taint(pod)
        and not is_owned_by_node(pod)
        and not do_not_disrupt_active(pod, now)
    )
