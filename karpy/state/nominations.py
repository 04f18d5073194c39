"""Pods the provisioner expects to land on capacity that is not ready yet.

When the provisioner plans a pod onto a new NodeClaim (or onto a node that has not
taken it yet), it *nominates* the pod there. Until the nomination lapses the pod is not
provisioned again, and its requests count against the target's room, so a second batch
neither buys a second node for the same pod nor packs other pods into space it will use.

This module only keeps the book (by pod and by target); whether a nomination still
holds depends on the target's state and is decided by :class:`~karpy.state.Cluster`.
"""

from __future__ import annotations

from dataclasses import dataclass

from karpy.scheduling import Pod

__all__ = ["Nomination", "Nominations", "node_target", "nodeclaim_target"]


def nodeclaim_target(name: str) -> str:
    """The target key of a NodeClaim."""
    return f"nodeclaim/{name}"


def node_target(name: str) -> str:
    """The target key of a Node without a NodeClaim."""
    return f"node/{name}"


@dataclass(slots=True)
class Nomination:
    """``pod`` is expected on ``target`` (a :func:`nodeclaim_target` or
    :func:`node_target` key) at least until ``until`` (monotonic seconds)."""

    pod: Pod
    target: str
    until: float
    ttl: float


class Nominations:
    """Nominations indexed by pod key and by target."""

    __slots__ = ("_by_pod", "_by_target")

    def __init__(self) -> None:
        self._by_pod: dict[str, Nomination] = {}
        self._by_target: dict[str, dict[str, Nomination]] = {}

    def __len__(self) -> int:
        return len(self._by_pod)

    def add(self, nomination: Nomination) -> None:
        """Record ``nomination``, replacing any earlier one of the same pod."""
        self.drop(nomination.pod.key)
        self._by_pod[nomination.pod.key] = nomination
        self._by_target.setdefault(nomination.target, {})[nomination.pod.key] = nomination

    def get(self, pod_key: str) -> Nomination | None:
        """The nomination of pod ``namespace/name``, if any."""
        return self._by_pod.get(pod_key)

    def drop(self, pod_key: str) -> Nomination | None:
        """Forget the pod's nomination; return it if there was one."""
        nomination = self._by_pod.pop(pod_key, None)
        if nomination is not None:
            bucket = self._by_target.get(nomination.target)
            if bucket is not None:
                bucket.pop(pod_key, None)
                if not bucket:
                    del self._by_target[nomination.target]
        return nomination

    def drop_target(self, target: str) -> list[Nomination]:
        """Forget every nomination to ``target``; return them."""
        bucket = self._by_target.pop(target, None)
        if not bucket:
            return []
        for key in bucket:
            self._by_pod.pop(key, None)
        return list(bucket.values())

    def for_target(self, target: str) -> list[Nomination]:
        """The nominations to ``target``."""
        bucket = self._by_target.get(target)
        return list(bucket.values()) if bucket else []

    def targets(self) -> list[str]:
        """Every target with at least one nomination."""
        return list(self._by_target)
