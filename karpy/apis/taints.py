"""Taints Karpenter puts on nodes."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from karpy.apis.core import Taint
from karpy.apis.labels import GROUP

__all__ = [
    "DISRUPTED_NO_SCHEDULE_TAINT",
    "TAINT_DISRUPTED",
    "TAINT_UNREGISTERED",
    "UNREGISTERED_NO_EXECUTE_TAINT",
    "has_disrupted_taint",
]

TAINT_DISRUPTED: Final = GROUP + "/disrupted"
TAINT_UNREGISTERED: Final = GROUP + "/unregistered"

#: Keeps new pods off a node that is being disrupted or terminated.
DISRUPTED_NO_SCHEDULE_TAINT: Final = Taint(key=TAINT_DISRUPTED, effect="NoSchedule")
#: Set at launch and removed once the node registers, so nothing runs on a half-made node.
UNREGISTERED_NO_EXECUTE_TAINT: Final = Taint(key=TAINT_UNREGISTERED, effect="NoExecute")


def has_disrupted_taint(node: Mapping[str, Any] | None) -> bool:
    """Whether the Node (an API object) carries ``karpenter.sh/disrupted:NoSchedule``.

    Key and effect are matched, as Karpenter's ``MatchTaint`` does: the one test of "is
    this node being disrupted" that provisioning, disruption and termination share.
    """
    if node is None:
        return False
    return any(
        t.get("key") == TAINT_DISRUPTED and t.get("effect") == DISRUPTED_NO_SCHEDULE_TAINT.effect
        for t in (node.get("spec") or {}).get("taints") or ()
    )
