"""``static.deprovisioning``: a static NodePool above ``spec.replicas`` loses NodeClaims.

Karpenter's static deprovisioning controller picks, in order: NodeClaims that have not
launched yet, then empty machines (DaemonSet pods only), then the machines with the
fewest pods to move. Only running NodeClaims count, not those a drift command is
replacing, so a scale-down never races a replacement into an undershoot. Deleting a
NodeClaim hands its machine to termination (drain, then the cloud delete).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, Final

from karpy.controllers.static._count import count_replicas
from karpy.runtime import Client, Request, Result, errors, freeze
from karpy.state import NODE_CLAIM, Cluster
from karpy.state.statenode import StateNode

__all__ = ["StaticDeprovisioning"]

log = logging.getLogger("controller")

_RESYNC: Final = 60.0


class StaticDeprovisioning:
    """The ``static.deprovisioning`` reconciler, keyed by NodePool (see the module doc)."""

    name = "static.deprovisioning"

    def __init__(self, *, client: Client, cluster: Cluster) -> None:
        self._client = client
        self._cluster = cluster

    async def reconcile(self, request: Request) -> Result:
        """Delete the NodeClaims the NodePool has beyond its replicas."""
        entry = self._cluster.nodepool(request.name)
        if entry is None or entry.replicas is None or entry.deleting:
            return Result()
        count = count_replicas(self._cluster, entry.name)
        excess = count.active - entry.replicas
        if excess <= 0:
            return Result(requeue_after=_RESYNC)
        log.info(
            "deprovisioning nodeclaims to satisfy replica count",
            extra={"NodePool": {"name": entry.name}, "current": count.active,
                   "desired": entry.replicas, "deprovision-count": excess},
        )  # fmt: skip
        unlaunched = sorted(count.unlaunched, key=lambda c: str(c["metadata"]["name"]))
        victims = [str(c["metadata"]["name"]) for c in unlaunched[:excess]]
        if len(victims) < excess:
            running = sorted(count.running, key=lambda s: (self._workload(s), s.name))
            victims += [s.nodeclaim_name for s in running[: excess - len(victims)]]
        for name in victims:
            await self._delete(name)
        return Result(requeue_after=_RESYNC)

    def _workload(self, state: StateNode) -> int:
        """The pods that would have to move (DaemonSet pods stay with the node)."""
        return sum(1 for pod in self._cluster.pods_on(state.node_name) if not pod.is_daemon)

    async def _delete(self, name: str) -> None:
        try:
            deleted: Any = await self._client.delete(NODE_CLAIM, name)
        except errors.NotFound:
            return
        log.debug("deleting nodeclaim", extra={"NodeClaim": {"name": name}})
        # The finalizer holds the NodeClaim: its deletionTimestamp goes into the model now,
        # so a reconcile before the watch catches up does not delete one more.
        if isinstance(deleted, Mapping) and deleted.get("kind") == "NodeClaim":
            self._cluster.update_nodeclaim(freeze(deleted))
        else:  # gone already (no finalizer)
            self._cluster.delete_nodeclaim(freeze({"metadata": {"name": name}}))
