"""``Consolidatable``: the NodeClaim may be consolidated now.

Karpenter's ``nodeclaim/disruption/consolidation.go``. The condition is True once the
NodeClaim is Initialized and its NodePool's ``consolidateAfter`` has passed since the
later of the NodeClaim's initialization and its ``status.lastPodEventTime`` (a pod
bound to, finishing on or leaving the node, see ``nodeclaim.podevents``). It is removed
(not set False) while that is not so, and when ``consolidateAfter`` is ``Never``. The
step asks to be run again at the moment the condition will turn True.

Karpenter counts from ``lastPodEventTime`` alone when it is set; karpy counts from the
later of the two, so pods bound while the node was still initializing do not shorten
the wait after it is ready.
"""

from __future__ import annotations

from karpy.apis import NodeClaim, NodePool
from karpy.apis.v1.nodeclaim import CONDITION_CONSOLIDATABLE, CONDITION_INITIALIZED
from karpy.controllers.nodeclaim.disruptionconditions._step import conditions, log
from karpy.runtime import Clock

__all__ = ["Consolidatable"]


class Consolidatable:
    """The ``Consolidatable`` step (see the module docs)."""

    def __init__(self, *, clock: Clock) -> None:
        self._clock = clock

    async def reconcile(self, nodepool: NodePool, nodeclaim: NodeClaim) -> float | None:
        """Set or clear Consolidatable; the seconds until it turns True, if it will."""
        conds = conditions(nodeclaim, self._clock)
        present = conds.get(CONDITION_CONSOLIDATABLE) is not None
        consolidate_after = nodepool.spec.disruption.consolidate_after_timedelta
        if consolidate_after is None:
            if present:
                conds.clear(CONDITION_CONSOLIDATABLE)
                log.debug("removing consolidatable status condition",
                          extra={"reason": "consolidation is disabled"})
            return None
        initialized = conds.get(CONDITION_INITIALIZED)
        if initialized is None or initialized.status != "True":
            if present:
                conds.clear(CONDITION_CONSOLIDATABLE)
                log.debug("removing consolidatable status condition",
                          extra={"reason": "nodeclaim isn't initialized"})
            return None
        since = initialized.last_transition_time
        last_pod_event = nodeclaim.status.last_pod_event_time
        if last_pod_event is not None and last_pod_event > since:
            since = last_pod_event
        now = self._clock.now()
        consolidatable_at = since + consolidate_after
        if now < consolidatable_at:
            if present:
                conds.clear(CONDITION_CONSOLIDATABLE)
                log.debug("removing consolidatable status condition", extra={
                    "reason": "consolidateAfter window not yet elapsed",
                    "lastPodEventTime": since.isoformat(),
                    "consolidateAfter": nodepool.spec.disruption.consolidate_after,
                    "timeSincePodEvent": str(now - since),
                })
            return (consolidatable_at - now).total_seconds()
        conds.set_true(CONDITION_CONSOLIDATABLE)
        if not present:
            log.debug("marking consolidatable")
        return None
