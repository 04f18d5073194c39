"""``nodepool.counter``: keeps ``status.resources`` and ``status.nodes`` equal to what the
NodePool's machines add up to.

The sums come from the cluster model (:meth:`karpy.state.Cluster.nodepool_usage`), the
same numbers the provisioner checks limits against: the capacity of every launched
machine of the pool that is not being deleted (the NodeClaim's estimate until its Node
is initialized), plus one ``nodes`` each. cpu, memory, pods, ephemeral-storage and
nodes are always present, zero when there is nothing (as Karpenter writes them).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from karpy.cloudprovider import CloudProvider
from karpy.controllers.nodepool._objects import get_managed
from karpy.runtime import Client, Request, Result, errors
from karpy.scheduling import resources as res
from karpy.state.cluster import Cluster
from karpy.state.kinds import NODE_POOL

__all__ = ["BASE_RESOURCES", "NodePoolCounter", "status_resources"]

#: Resources status.resources always lists.
BASE_RESOURCES: Final = ("cpu", "memory", "pods", "ephemeral-storage", "nodes")
_RESYNC: Final = 60.0


def status_resources(usage: Mapping[str, int]) -> dict[str, str]:
    """The usage as status.resources quantities, base resources included."""
    total = {name: 0 for name in BASE_RESOURCES}
    total.update(usage)
    return res.format_resource_list(total)


class NodePoolCounter:
    """The ``nodepool.counter`` reconciler (see the module docs)."""

    name = "nodepool.counter"

    def __init__(self, *, client: Client, cluster: Cluster, cloud_provider: CloudProvider) -> None:
        self._client = client
        self._cluster = cluster
        self._provider = cloud_provider

    async def reconcile(self, request: Request) -> Result:
        """Patch the NodePool's status.resources and status.nodes if they are stale."""
        found = await get_managed(self._client, self._provider, request.name)
        if found is None:
            return Result()
        nodepool, _ = found
        usage = self._cluster.nodepool_usage(request.name)
        resources = status_resources(usage)
        nodes = int(usage.get("nodes", 0))
        status = nodepool.get("status") or {}
        stored: Mapping[str, Any] = status.get("resources") or {}
        if stored == resources and status.get("nodes") == nodes:
            return Result(requeue_after=_RESYNC)
        # A merge patch merges maps: resources that disappeared must be nulled out.
        patch: dict[str, Any] = {name: None for name in stored if name not in resources}
        patch.update(resources)
        try:
            await self._client.patch_status(
                NODE_POOL, request.name, {"status": {"resources": patch, "nodes": nodes}}
            )
        except errors.NotFound:
            return Result()
        return Result(requeue_after=_RESYNC)
