"""``static.provisioning``: a static NodePool below ``spec.replicas`` gets NodeClaims.

Karpenter's static provisioning controller: NodeClaims being replaced by a drift command
count as present (their replacement is on its way), ``limits.nodes`` caps what is
created ("nodepool node limit reached"), and nothing is created until the NodePool is
Ready and the cluster model has listed every NodeClaim (else a restart would count too
few and launch too many). NodeClaims it creates are in the model at once, launched or
not, so a second reconcile never creates them again.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Final

from karpy.controllers.provisioning import PROVISIONED_REASON, Provisioner
from karpy.controllers.static._count import count_replicas, node_limit
from karpy.controllers.static._plan import static_plan
from karpy.runtime import Request, Result
from karpy.state import Cluster

__all__ = ["StaticProvisioning"]

log = logging.getLogger("controller")

_RESYNC: Final = 60.0
_NOT_SYNCED: Final = 1.0
_AT_LIMIT: Final = 30.0


class StaticProvisioning:
    """The ``static.provisioning`` reconciler, keyed by NodePool (see the module doc)."""

    name = "static.provisioning"

    def __init__(self, *, cluster: Cluster, provisioner: Provisioner) -> None:
        self._cluster = cluster
        self._provisioner = provisioner

    async def reconcile(self, request: Request) -> Result:
        """Create the NodeClaims the NodePool lacks."""
        entry = self._cluster.nodepool(request.name)
        if (entry is None or entry.model is None or entry.replicas is None or entry.deleting
                or not entry.ready):
            return Result()
        if not self._cluster.listed:
            return Result(requeue_after=_NOT_SYNCED)
        count = count_replicas(self._cluster, entry.name)
        desired = entry.replicas
        # Scale-down is static.deprovisioning's; drifted machines being replaced count.
        if count.total >= desired:
            return Result(requeue_after=_RESYNC)
        wanted = min(desired - count.active, node_limit(entry) - count.total)
        if wanted <= 0:
            log.info("nodepool node limit reached", extra={"NodePool": {"name": entry.name}})
            return Result(requeue_after=_AT_LIMIT)
        log.info(
            "provisioning nodeclaims to satisfy replica count",
            extra={"NodePool": {"name": entry.name}, "current": count.active,
                   "desired": desired, "provision-count": wanted},
        )  # fmt: skip
        plan = static_plan(entry)
        outcomes = await asyncio.gather(
            *(self._provisioner.create(plan, reason=PROVISIONED_REASON) for _ in range(wanted)),
            return_exceptions=True,
        )
        for outcome in outcomes:
            if isinstance(outcome, BaseException):
                raise outcome  # retried with the controller's backoff
        return Result(requeue_after=_RESYNC)
