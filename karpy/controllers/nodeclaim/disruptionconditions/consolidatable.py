"""``Consolidatable``: the NodeClaim may be consolidated now.

Karpenter's ``nodeclaim/disruption/consolidation.go`` (v1.14.1). The condition is True
once the NodeClaim is Initialized and its NodePool's ``consolidateAfter`` has passed
since its ``status.lastPodEventTime`` (a pod bound to, finishing on or leaving the node,
see ``nodeclaim.podevents``) — or, when it has had no pod event, since its Initialized
transition — the same clock disruption applies to destination nodes
(``settling_machines``, Karpenter's IsUnderConsolidateAfter). It is removed (not set
False) while that is not so, and when ``consolidateAfter`` is ``Never``. The step asks
to be run again at the moment the condition will turn True.
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
        # Karpenter: the last pod event when there was one, else the initialization
        # (pods bound while the node initialized count from their own event, too).
        last_pod_event = nodeclaim.status.last_pod_event_time
        since = last_pod_event if last_pod_event is not None else initialized.last_transition_time
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
