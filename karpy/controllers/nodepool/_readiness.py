"""``nodepool.readiness``: the NodePool's ``NodeClassReady`` condition, from the NodeClass
its ``nodeClassRef`` names (missing, terminating, or its own Ready condition), with
Karpenter's reasons (see :func:`karpy.cloudprovider.nodeclass.node_class_readiness`)."""

from __future__ import annotations

from karpy.apis.v1 import CONDITION_NODE_CLASS_READY
from karpy.cloudprovider import CloudProvider
from karpy.cloudprovider.nodeclass import node_class_readiness
from karpy.controllers.nodepool._objects import (
    get_managed,
    parse_nodepool,
    write_conditions,
)
from karpy.runtime import Client, Clock, Object, Request, Result, errors

__all__ = ["NodePoolReadiness"]


class NodePoolReadiness:
    """The ``nodepool.readiness`` reconciler (see the module docs)."""

    name = "nodepool.readiness"

    def __init__(self, *, client: Client, cloud_provider: CloudProvider, clock: Clock) -> None:
        self._client = client
        self._provider = cloud_provider
        self._clock = clock

    async def reconcile(self, request: Request) -> Result:
        """Set NodeClassReady (and so Ready) from the referenced NodeClass."""
        found = await get_managed(self._client, self._provider, request.name)
        if found is None:
            return Result()
        stored, (kind, name) = found
        node_class: Object | None
        try:
            node_class = await self._client.get(kind, name)
        except errors.NotFound:
            node_class = None
        readiness = node_class_readiness(node_class)
        nodepool, _ = parse_nodepool(stored)  # an invalid one still gets its condition
        conditions = nodepool.status_conditions(
            now=lambda: self._clock.now().replace(microsecond=0)
        )
        if readiness.ready:
            conditions.set_true(CONDITION_NODE_CLASS_READY)
        else:
            conditions.set_false(CONDITION_NODE_CLASS_READY, readiness.reason, readiness.message)
        return await write_conditions(self._client, stored, nodepool)
