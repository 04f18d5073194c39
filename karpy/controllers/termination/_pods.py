"""The order a drain evicts pods in. Which pods a drain waits for and which it may evict
are the pod model's (:mod:`karpy.state.pods`: ``is_waiting_eviction``, ``is_evictable``).

Eviction goes in four tiers, as the kubelet's graceful node shutdown does: non-critical
pods first, then non-critical DaemonSet pods, critical pods, critical DaemonSet pods.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Final

from karpy.apis.pods import is_owned_by_daemonset

__all__ = ["CRITICAL_PRIORITY_CLASSES", "drain_tiers"]

CRITICAL_PRIORITY_CLASSES: Final = frozenset({"system-cluster-critical", "system-node-critical"})

Pod = Mapping[str, Any]


def _critical(pod: Pod) -> bool:
    return (pod.get("spec") or {}).get("priorityClassName") in CRITICAL_PRIORITY_CLASSES


def drain_tiers(pods: Iterable[Pod]) -> list[list[Pod]]:
    """The pods in eviction order: non-critical, non-critical DaemonSet, critical,
    critical DaemonSet (each tier keeps the given order)."""
    tiers: list[list[Pod]] = [[], [], [], []]
    for pod in pods:
        tiers[2 * _critical(pod) + is_owned_by_daemonset(pod)].append(pod)
    return tiers
