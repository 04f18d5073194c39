"""The two marks a disruption leaves on a candidate while its command runs, and how
they are taken off again: the ``karpenter.sh/disrupted:NoSchedule`` taint on the Node
(no new pods land there) and the ``DisruptionReason`` condition on the NodeClaim.

Both are list edits, so they are written with the object's resourceVersion as an
optimistic lock: a conflict means someone else changed the object, and the caller
retries with a fresh copy rather than overwrite their change.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from karpy.apis import NodeClaim
from karpy.apis.taints import DISRUPTED_NO_SCHEDULE_TAINT, TAINT_DISRUPTED, has_disrupted_taint
from karpy.apis.v1 import CONDITION_DISRUPTION_REASON
from karpy.runtime import Client, errors
from karpy.runtime.kinds import NODE
from karpy.state.kinds import NODE_CLAIM

__all__ = [
    "DISRUPTED_TAINT",
    "has_disruption_reason",
    "set_disrupted_taint",
    "set_disruption_reason",
]

DISRUPTED_TAINT: dict[str, str] = {
    "key": TAINT_DISRUPTED, "effect": DISRUPTED_NO_SCHEDULE_TAINT.effect
}


def _taints(node: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [dict(t) for t in (node.get("spec") or {}).get("taints") or ()]


async def set_disrupted_taint(client: Client, node: Mapping[str, Any], present: bool) -> None:
    """Add or remove the disrupted taint (no-op when already so; a Node gone is fine).

    Raises errors.Conflict when the Node changed since ``node`` was read.
    """
    if has_disrupted_taint(node) == present:
        return
    taints = [t for t in _taints(node) if t.get("key") != TAINT_DISRUPTED]
    if present:
        taints.append(dict(DISRUPTED_TAINT))
    meta = node["metadata"]
    try:
        await client.patch(NODE, meta["name"], {
            "metadata": {"resourceVersion": meta.get("resourceVersion")},
            "spec": {"taints": taints},
        })
    except errors.NotFound:
        return


def has_disruption_reason(nodeclaim: Mapping[str, Any] | None) -> bool:
    """Whether the NodeClaim has a ``DisruptionReason`` condition."""
    conditions = ((nodeclaim or {}).get("status") or {}).get("conditions") or ()
    return any(c.get("type") == CONDITION_DISRUPTION_REASON for c in conditions)


async def set_disruption_reason(
    client: Client, nodeclaim: Mapping[str, Any], reason: str | None, now: datetime
) -> None:
    """Set ``DisruptionReason`` True with ``reason``, or remove it (``None``).

    Raises errors.Conflict when the NodeClaim changed since it was read.
    """
    if reason is None and not has_disruption_reason(nodeclaim):
        return
    model = NodeClaim.from_dict(nodeclaim)
    conditions = model.status_conditions(now=lambda: now)
    if reason is None:
        conditions.clear(CONDITION_DISRUPTION_REASON)
    else:
        conditions.set_true(CONDITION_DISRUPTION_REASON, reason=reason, message=reason)
    body = model.to_dict()
    try:
        await client.patch_status(NODE_CLAIM, model.metadata.name or "", {
            "metadata": {"resourceVersion": model.metadata.resource_version},
            "status": {"conditions": (body.get("status") or {}).get("conditions") or []},
        })
    except errors.NotFound:
        return
