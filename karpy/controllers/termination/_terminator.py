"""Tainting a node and draining it: the two steps node termination repeats until the
node holds no pod that has to leave.

The drain does not evict by itself: it decides which pods must go, in which order, and
hands them to the :class:`~karpy.controllers.termination._eviction.EvictionQueue`.
Pods past the point where the NodeClaim's terminationGracePeriod forces them out are
queued at once, whatever their tier; the others one tier at a time (non-critical
before critical, DaemonSet pods last), so a DaemonSet that serves the node's workloads
(logging, networking) outlives them.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from datetime import datetime
from typing import Any, Final

from karpy.apis.taints import DISRUPTED_NO_SCHEDULE_TAINT, TAINT_DISRUPTED, has_disrupted_taint
from karpy.controllers.indexes import Index
from karpy.controllers.termination._eviction import EvictionQueue, needs_force_delete
from karpy.controllers.termination._objects import pods_on_node
from karpy.controllers.termination._pods import drain_tiers
from karpy.runtime import Client, Clock, kinds
from karpy.state.pods import is_waiting_eviction

__all__ = ["LABEL_EXCLUDE_BALANCERS", "DrainError", "Terminator"]

log = logging.getLogger("controller")

#: Keeps the node out of load balancers' target groups while it drains.
LABEL_EXCLUDE_BALANCERS: Final = "node.kubernetes.io/exclude-from-external-load-balancers"
_EFFECT: Final = DISRUPTED_NO_SCHEDULE_TAINT.effect


class DrainError(Exception):
    """The node still holds pods waiting to be evicted (not a failure: try again)."""


class Terminator:
    """Taints and drains nodes (see the module docs)."""

    def __init__(
        self, *, client: Client, index: Index, queue: EvictionQueue, clock: Clock
    ) -> None:
        self._client = client
        self._index = index
        self.queue = queue
        self._clock = clock

    async def taint(self, node: Mapping[str, Any]) -> None:
        """Add ``karpenter.sh/disrupted:NoSchedule`` (replacing another effect of that key)
        and the exclude-from-load-balancers label; a no-op when both are there.

        The taint list is replaced as a whole, so the patch carries the node's
        resourceVersion: ``errors.Conflict`` if the node changed since it was read.
        """
        meta = node["metadata"]
        labels = meta.get("labels") or {}
        taints = [dict(t) for t in (node.get("spec") or {}).get("taints") or ()]
        tainted = has_disrupted_taint(node)
        if tainted and labels.get(LABEL_EXCLUDE_BALANCERS) == "karpenter":
            return
        patch: dict[str, Any] = {
            "metadata": {
                "resourceVersion": meta.get("resourceVersion"),
                "labels": {LABEL_EXCLUDE_BALANCERS: "karpenter"},
            },
        }
        if not tainted:
            taints = [t for t in taints if t.get("key") != TAINT_DISRUPTED]
            taints.append({"key": TAINT_DISRUPTED, "effect": _EFFECT})
            patch["spec"] = {"taints": taints}
        await self._client.patch(kinds.NODE, meta["name"], patch)
        log.info("tainted node", extra={
            "taint.Key": TAINT_DISRUPTED, "taint.Value": "", "taint.Effect": _EFFECT,
        })

    def drain(self, node: Mapping[str, Any], termination_time: datetime | None) -> None:
        """Queue the pods that must leave next; raise :class:`DrainError` while any pod
        is still waiting, return once none is."""
        name = node["metadata"]["name"]
        now = self._clock.now()
        waiting = [p for p in pods_on_node(self._index, name) if is_waiting_eviction(p, now)]
        forced = [p for p in waiting if needs_force_delete(p, termination_time, now)]
        forced_keys = {id(p) for p in forced}
        graceful = [p for p in waiting if id(p) not in forced_keys]
        if forced:
            # Past the deadline every tier goes at once: a PDB on a non-critical pod must
            # not hold up the forced removal of a critical one.
            self.queue.add(forced, termination_time, name)
        for tier in drain_tiers(graceful):
            if tier:
                self.queue.add(tier, termination_time, name)
                break
        if waiting:
            raise DrainError(f"{len(waiting)} pods are waiting to be evicted")
