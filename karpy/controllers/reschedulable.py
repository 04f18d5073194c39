"""How many pods a disruption sends looking for a new home (for
``karpenter_pods_disruption_initiated_total``)."""

from __future__ import annotations

import logging

from karpy.runtime import Client, errors, kinds
from karpy.state.pods import is_reschedulable

__all__ = ["reschedulable_pods"]

log = logging.getLogger("controller")


async def reschedulable_pods(client: Client, node_name: str | None) -> int:
    """The pods bound to ``node_name`` that would need a new node if it went (not
    DaemonSet or mirror pods, not terminal or terminating). A failed read counts 0 and
    is logged: the metric must never fail the disruption it describes."""
    if not node_name:
        return 0
    try:
        pods = await client.list(kinds.POD, field_selector=f"spec.nodeName={node_name}")
    except errors.ApiError as err:
        log.debug("listing reschedulable pods for disruption metric",
                  extra={"error": str(err)})
        return 0
    return sum(1 for p in pods
               if (p.get("spec") or {}).get("nodeName") == node_name and is_reschedulable(p))
