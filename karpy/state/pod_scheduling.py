"""When karpy first saw a pending pod, first decided about it, and first found it a
place: Karpenter's state.Cluster pod acks and scheduling decisions.

Three moments per pod, each kept the first time it happens (a later round does not move
it), so the pod latency metrics measure from a point in karpy's memory rather than from
the pod's creation (which may predate karpy, or a NodePool the pod could use):

* acknowledged: the cluster model first saw the pod provisionable (Karpenter's AckPods);
* decided: a scheduling round first reached a verdict on it, a place or an error
  (``podsSchedulingAttempted``); the wait between the two is
  karpenter_pods_scheduling_decision_duration_seconds;
* schedulable: a round first found it a place (``podsSchedulableTimes``), forgotten
  again when a later round finds none, so a pod that lost its place measures from the
  round that found it one again.

The moments are forgotten when the pod is deleted, or when the pod metrics controller
has recorded the pod's start (Karpenter's ClearPodSchedulingMappings).
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

__all__ = ["PodSchedulingTimes"]


class PodSchedulingTimes:
    """The three moments of each pod, by ``namespace/name`` (see the module docstring)."""

    __slots__ = ("_acked", "_decided", "_schedulable")

    def __init__(self) -> None:
        self._acked: dict[str, datetime] = {}
        self._decided: dict[str, datetime] = {}
        self._schedulable: dict[str, datetime] = {}

    def ack(self, key: str, now: datetime) -> None:
        """The pod was seen provisionable (only the first time counts)."""
        self._acked.setdefault(key, now)

    def mark_decisions(
        self, now: datetime, *, failed: Iterable[str], placed: Iterable[str]
    ) -> list[float]:
        """A round's verdicts: ``failed`` pods found no place, ``placed`` pods (not yet
        bound) found one. Returns, for each pod decided here for the first time that was
        acknowledged, the seconds from its acknowledgement to now."""
        waits: list[float] = []
        for key in failed:
            self._schedulable.pop(key, None)
            self._first_decision(key, now, waits)
        for key in placed:
            self._schedulable.setdefault(key, now)
            self._first_decision(key, now, waits)
        return waits

    def _first_decision(self, key: str, now: datetime, waits: list[float]) -> None:
        if key in self._decided:
            return
        self._decided[key] = now
        acked = self._acked.get(key)
        if acked is not None:
            waits.append(max((now - acked).total_seconds(), 0.0))

    def acked(self, key: str) -> datetime | None:
        """When the pod was first seen provisionable, if it was."""
        return self._acked.get(key)

    def decided(self, key: str) -> datetime | None:
        """When a round first reached a verdict on the pod, if one did."""
        return self._decided.get(key)

    def schedulable(self, key: str) -> datetime | None:
        """When a round first found the pod a place (since it last found none)."""
        return self._schedulable.get(key)

    def clear(self, key: str) -> None:
        """Forget the pod (it is gone, or its start has been recorded)."""
        self._acked.pop(key, None)
        self._decided.pop(key, None)
        self._schedulable.pop(key, None)

    def __len__(self) -> int:
        return len(self._acked.keys() | self._decided.keys() | self._schedulable.keys())
