"""Reading and writing a NodeClaim's status conditions during termination.

Conditions are a list keyed by type; a JSON merge patch replaces the whole list, so
every condition write carries the resourceVersion it was computed from (an optimistic
lock, as Karpenter's ``MergeFromWithOptimisticLock``): a concurrent writer turns it
into ``errors.Conflict`` instead of being overwritten.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from karpy.apis import ConditionSet, NodeClaim
from karpy.apis.v1 import NodeClaimCondition
from karpy.runtime import Client, Clock, Object
from karpy.state.kinds import NODE_CLAIM

__all__ = ["conditions_of", "parse_nodeclaim", "patch_conditions", "wall_clock"]


def wall_clock(clock: Clock) -> Callable[[], datetime]:
    """``clock.now`` to the second, as Kubernetes stores condition times."""
    return lambda: clock.now().replace(microsecond=0)


def parse_nodeclaim(obj: Mapping[str, Any]) -> NodeClaim:
    """The NodeClaim model of a cached object (a copy: safe to change)."""
    return NodeClaim.from_dict(obj)


def conditions_of(nodeclaim: NodeClaim, clock: Clock) -> ConditionSet[NodeClaimCondition]:
    """The NodeClaim's condition set, timed by ``clock``."""
    return nodeclaim.status_conditions(now=wall_clock(clock))


def _dump(nodeclaim: NodeClaim) -> list[dict[str, Any]]:
    return [c.to_dict() for c in nodeclaim.status.conditions]


async def patch_conditions(
    client: Client, stored: Mapping[str, Any], nodeclaim: NodeClaim
) -> Object | None:
    """Write ``nodeclaim``'s conditions if they differ from ``stored``'s; return the
    patched object, or None when nothing changed."""
    if parse_nodeclaim(stored).status.conditions == nodeclaim.status.conditions:
        return None
    after = _dump(nodeclaim)
    meta = stored["metadata"]
    return await client.patch_status(
        NODE_CLAIM, meta["name"],
        {"metadata": {"resourceVersion": meta.get("resourceVersion")},
         "status": {"conditions": after}},
    )
