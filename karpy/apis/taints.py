"""Taints Karpenter puts on nodes."""

from __future__ import annotations

from typing import Final

from karpy.apis.core import Taint
from karpy.apis.labels import GROUP

__all__ = [
    "DISRUPTED_NO_SCHEDULE_TAINT",
    "TAINT_DISRUPTED",
    "TAINT_UNREGISTERED",
    "UNREGISTERED_NO_EXECUTE_TAINT",
]

TAINT_DISRUPTED: Final = GROUP + "/disrupted"
TAINT_UNREGISTERED: Final = GROUP + "/unregistered"

#: Keeps new pods off a node that is being disrupted or terminated.
DISRUPTED_NO_SCHEDULE_TAINT: Final = Taint(key=TAINT_DISRUPTED, effect="NoSchedule")
#: Set at launch and removed once the node registers, so nothing runs on a half-made node.
UNREGISTERED_NO_EXECUTE_TAINT: Final = Taint(key=TAINT_UNREGISTERED, effect="NoExecute")
