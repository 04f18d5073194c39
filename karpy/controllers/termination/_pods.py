"""What draining needs to know about a pod, judged as Karpenter's pod utilities judge it.

A node is drained when no pod is *waiting eviction*: every pod left is terminal, is a
mirror (static) pod, tolerates the ``karpenter.sh/disrupted:NoSchedule`` taint (it chose
to stay), or has been terminating for over a minute past its deletion time. Pods with
an active ``karpenter.sh/do-not-disrupt`` annotation still count as waiting — the drain
stalls on them — but are never evicted; only the NodeClaim's terminationGracePeriod
removes them (by deleting them in time to finish before the deadline).

Eviction goes in four tiers, as the kubelet's graceful node shutdown does: non-critical
pods first, then non-critical DaemonSet pods, critical pods, critical DaemonSet pods.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta
from typing import Any, Final

from karpy.apis.annotations import ANNOTATION_DO_NOT_DISRUPT
from karpy.apis.duration import parse_duration
from karpy.apis.pods import is_active, is_owned_by_daemonset, is_owned_by_node, is_terminal
from karpy.apis.taints import DISRUPTED_NO_SCHEDULE_TAINT
from karpy.runtime import parse_time
from karpy.scheduling.taints import NodeTaint, Toleration

__all__ = [
    "CRITICAL_PRIORITY_CLASSES",
    "STUCK_TERMINATING_AFTER",
    "do_not_disrupt_active",
    "drain_tiers",
    "is_drainable",
    "is_evictable",
    "is_waiting_eviction",
    "tolerates_disrupted_taint",
]

CRITICAL_PRIORITY_CLASSES: Final = frozenset({"system-cluster-critical", "system-node-critical"})
#: A pod terminating this long past its deletion time is given up on (Karpenter: 1 min).
STUCK_TERMINATING_AFTER: Final = timedelta(minutes=1)

_DISRUPTED = NodeTaint(
    key=DISRUPTED_NO_SCHEDULE_TAINT.key, effect=DISRUPTED_NO_SCHEDULE_TAINT.effect
)

Pod = Mapping[str, Any]


def _meta(pod: Pod) -> Mapping[str, Any]:
    return pod.get("metadata") or {}


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


def _critical(pod: Pod) -> bool:
    return (pod.get("spec") or {}).get("priorityClassName") in CRITICAL_PRIORITY_CLASSES


def drain_tiers(pods: Iterable[Pod]) -> list[list[Pod]]:
    """The pods in eviction order: non-critical, non-critical DaemonSet, critical,
    critical DaemonSet (each tier keeps the given order)."""
    tiers: list[list[Pod]] = [[], [], [], []]
    for pod in pods:
        tiers[2 * _critical(pod) + is_owned_by_daemonset(pod)].append(pod)
    return tiers
