"""``clusterlimit.status``: keeps each ClusterLimit's status equal to what the NodePools
it selects add up to.

``status.nodePools`` lists the pools its selector picks; ``status.resources`` sums their
usage as the NodePool counter sums each pool's (the cluster model's
:meth:`~karpy.state.Cluster.cluster_limit_usage`, the numbers provisioning checks
against); ``Ready`` says whether the object was read, ``LimitReached`` whether a limit is
used up, naming the resources. NodePool labels and machines change what it covers, so
the controller also runs on those events and every minute.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from karpy.apis.conditions import set_condition
from karpy.apis.karpydev import CONDITION_LIMIT_REACHED, CONDITION_READY
from karpy.controllers.nodepool._counter import status_resources
from karpy.runtime import Client, Clock, Request, Result, errors, format_time
from karpy.scheduling import resources as res
from karpy.state.cluster import Cluster
from karpy.state.clusterlimits import CLUSTER_LIMIT, ClusterLimitEntry

__all__ = ["ClusterLimitStatus", "reached"]

_RESYNC: Final = 60.0


def reached(limits: Mapping[str, int], usage: Mapping[str, int]) -> list[str]:
    """The resources whose usage has reached their limit, as "cpu 40/40" phrases."""
    return [
        f"{name} {res.format_quantity(name, usage.get(name, 0))}/"
        f"{res.format_quantity(name, limit)}"
        for name, limit in sorted(limits.items())
        if usage.get(name, 0) >= limit
    ]


class ClusterLimitStatus:
    """The ``clusterlimit.status`` reconciler (see the module docs)."""

    name = "clusterlimit.status"

    def __init__(self, *, client: Client, cluster: Cluster, clock: Clock) -> None:
        self._client = client
        self._cluster = cluster
        self._clock = clock

    async def reconcile(self, request: Request) -> Result:
        """Patch the ClusterLimit's status if it is stale."""
        entry = self._cluster.cluster_limits.get(request.name)
        if entry is None:
            return Result()
        status = self._status(entry)
        stored = entry.raw.get("status") or {}
        if {k: stored.get(k) for k in status} == status:
            return Result(requeue_after=_RESYNC)
        # A merge patch merges maps: resources that disappeared must be nulled out.
        resources: dict[str, Any] = {
            name: None for name in stored.get("resources") or {}
            if name not in status["resources"]
        }
        resources.update(status["resources"])
        try:
            await self._client.patch_status(
                CLUSTER_LIMIT, request.name, {"status": {**status, "resources": resources}}
            )
        except errors.NotFound:
            return Result()
        return Result(requeue_after=_RESYNC)

    def _status(self, entry: ClusterLimitEntry) -> dict[str, Any]:
        stored = entry.raw.get("status") or {}
        conditions = [dict(c) for c in stored.get("conditions") or ()]
        generation = int(entry.raw["metadata"].get("generation") or 0)
        now = format_time(self._clock.now())
        if entry.error is not None:
            set_condition(conditions, CONDITION_READY, "False", "InvalidSpec", entry.error,
                          generation=generation, now=now)
            return {"nodePools": [], "resources": status_resources({}),
                    "conditions": conditions}
        pools, usage = self._cluster.cluster_limit_usage(entry)
        set_condition(conditions, CONDITION_READY, "True", "Ready", "",
                      generation=generation, now=now)
        full = reached(entry.limits, usage)
        if full:
            set_condition(conditions, CONDITION_LIMIT_REACHED, "True", "LimitReached",
                          "limits reached: " + ", ".join(full) + "; no NodeClaim of "
                          + ", ".join(pools) + " that needs more is created",
                          generation=generation, now=now)
        else:
            set_condition(conditions, CONDITION_LIMIT_REACHED, "False", "WithinLimits", "",
                          generation=generation, now=now)
        return {"nodePools": pools, "resources": status_resources(usage),
                "conditions": conditions}
