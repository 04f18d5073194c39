"""``nodeclaim.expiration``: a NodeClaim older than its ``expireAfter`` is deleted.

Karpenter's ``nodeclaim/expiration``: at ``creationTimestamp + spec.expireAfter`` the
NodeClaim is deleted outright. Expiration is not voluntary disruption: no budget, no
``karpenter.sh/do-not-disrupt`` and no PodDisruptionBudget holds it back for longer
than the NodeClaim's ``terminationGracePeriod`` (termination drains the node, and forces
out what still blocks when that period ends). The pods go pending and the provisioner
launches their new home, as for any deleted node. ``expireAfter: Never`` never expires.

Each expiry is logged ("deleting expired nodeclaim", debug level as in Karpenter) and
counted in ``karpenter_nodeclaims_disrupted_total{reason="expired"}`` (and its pods in
``karpenter_pods_disruption_initiated_total``). Until then the
reconcile is simply requeued for the moment of expiry.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any, Final

from karpy.apis import NodeClaim
from karpy.cloudprovider import CloudProvider
from karpy.controllers.disrupted import disrupted_labels
from karpy.controllers.instruments import KarpenterMetrics
from karpy.controllers.nodeclaim._managed import is_managed
from karpy.controllers.nodeclaim.lifecycle._base import log
from karpy.controllers.reschedulable import reschedulable_pods
from karpy.runtime import (
    Client,
    Clock,
    Request,
    Result,
    errors,
    logging_context,
)
from karpy.state.kinds import NODE_CLAIM

__all__ = ["EXPIRED_REASON", "Expiration"]

EXPIRED_REASON: Final = "expired"
"""The ``reason`` label of ``karpenter_nodeclaims_disrupted_total`` (Karpenter's)."""
_REMEMBER: Final = timedelta(minutes=5)


class Expiration:
    """The ``nodeclaim.expiration`` reconciler (see the module docs)."""

    name = "nodeclaim.expiration"

    def __init__(
        self,
        *,
        client: Client,
        cloud_provider: CloudProvider,
        metrics: KarpenterMetrics,
        clock: Clock,
    ) -> None:
        self._client = client
        self._provider = cloud_provider
        self._metrics = metrics
        self._clock = clock
        # uid -> when this process deleted it: a cache that has not caught up yet must
        # not make it count twice. Entries older than _REMEMBER are dropped.
        self._deleted: dict[str, datetime] = {}

    async def reconcile(self, request: Request) -> Result:
        """Delete the NodeClaim if it has expired; otherwise look again when it will."""
        try:
            obj = await self._client.get(NODE_CLAIM, request.name)
        except errors.NotFound:
            return Result()
        if (obj.get("spec") or {}).get("expireAfter") == "Never":
            return Result()  # never expires: not worth parsing on each of its updates
        nodeclaim = NodeClaim.from_dict(obj)
        uid = nodeclaim.metadata.uid or ""
        if nodeclaim.metadata.deletion_timestamp is not None or uid in self._deleted:
            return Result()
        if not is_managed(nodeclaim, self._provider):
            return Result()
        try:
            expire_after = nodeclaim.spec.expire_after_timedelta
        except ValueError as err:
            # Beyond Go's limit (only a NodeClaim written by hand can carry one: NodePools
            # refuse it): fail closed, this NodeClaim is never expired.
            log.error("ignoring expireAfter", extra={
                "NodeClaim": {"name": request.name}, "error": str(err)})
            return Result()
        created = nodeclaim.metadata.creation_timestamp
        if expire_after is None or created is None:
            return Result()
        remaining = (created + expire_after - self._clock.now()).total_seconds()
        if remaining > 0:
            return Result(requeue_after=remaining)
        fields: dict[str, Any] = {
            "controllerGroup": NODE_CLAIM.group, "controllerKind": NODE_CLAIM.kind,
            "NodeClaim": {"name": request.name},
        }
        if nodeclaim.status.node_name:
            fields["Node"] = {"name": nodeclaim.status.node_name}
        with logging_context(**fields):
            try:
                # The uid precondition: never delete a newer NodeClaim of the same name.
                await self._client.delete(NODE_CLAIM, request.name, uid=uid or None)
            except (errors.NotFound, errors.Conflict):
                return Result()
            now = self._clock.now()
            self._deleted = {u: t for u, t in self._deleted.items() if now - t < _REMEMBER}
            self._deleted[uid] = now
            log.debug("deleting expired nodeclaim")
            labels = disrupted_labels(EXPIRED_REASON, nodeclaim.metadata.labels,
                                      nodeclaim.spec.termination_grace_period_timedelta)
            self._metrics.nodeclaims_disrupted.add(1, labels)
            # Pods not yet drained still show on the node: the state before the disruption.
            self._metrics.pods_disruption_initiated.add(
                await reschedulable_pods(self._client, nodeclaim.status.node_name), labels)
        return Result()
