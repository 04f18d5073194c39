"""The labels of a disrupted NodeClaim: ``karpenter_nodeclaims_disrupted_total`` and
``karpenter_pods_disruption_initiated_total`` (one set for both, as Karpenter records
them), and the termination mode of ``karpenter_nodeclaims_unhealthy_disrupted_total``.

Every controller that deletes a NodeClaim it disrupts (disruption's queue, expiration,
repair, launch and liveness, garbage collection) labels the count here, so the series
are Karpenter v1.15's: ``reason``, ``nodepool``, ``capacity_type``,
``consolidation_policy`` (the NodePool's policy snake-cased, set only by consolidation
— drift and repair also pass through the disruption queue and leave it empty) and
``termination_mode`` (from the NodeClaim's ``terminationGracePeriod``: none is
``graceful``, a positive one ``eventual``, zero ``forceful``).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta
from typing import Any, Final

from karpy.apis.duration import parse_duration
from karpy.apis.labels import LABEL_CAPACITY_TYPE, LABEL_NODEPOOL
from karpy.apis.pretty import to_snake_case

__all__ = [
    "TERMINATION_MODE_EVENTUAL",
    "TERMINATION_MODE_FORCEFUL",
    "TERMINATION_MODE_GRACEFUL",
    "disrupted_labels",
    "grace_period_of",
    "termination_mode",
]

TERMINATION_MODE_GRACEFUL: Final = "graceful"
"""No terminationGracePeriod: blocking PDBs and do-not-disrupt are respected."""
TERMINATION_MODE_EVENTUAL: Final = "eventual"
"""A positive terminationGracePeriod bounds the drain."""
TERMINATION_MODE_FORCEFUL: Final = "forceful"
"""A terminationGracePeriod of zero: the node goes without waiting."""


def termination_mode(grace_period: timedelta | None) -> str:
    """Karpenter's ``DisruptionTerminationMode`` for a NodeClaim's terminationGracePeriod
    (or for the drain bound repair applies instead of it)."""
    if grace_period is None:
        return TERMINATION_MODE_GRACEFUL
    if grace_period <= timedelta(0):
        return TERMINATION_MODE_FORCEFUL
    return TERMINATION_MODE_EVENTUAL


def grace_period_of(nodeclaim: Mapping[str, Any] | None) -> timedelta | None:
    """A raw NodeClaim's ``spec.terminationGracePeriod`` (None when unset or unparsable:
    the API server's pattern admits only durations, so that is a NodeClaim of no grace
    period as far as a label can tell)."""
    text = ((nodeclaim or {}).get("spec") or {}).get("terminationGracePeriod")
    if not isinstance(text, str):
        return None
    try:
        return parse_duration(text)
    except ValueError:
        return None


def disrupted_labels(
    reason: str,
    labels: Mapping[str, str],
    grace_period: timedelta | None,
    *,
    consolidation_policy: str = "",
) -> dict[str, str]:
    """The labels of one disrupted NodeClaim: ``labels`` are its own (or its Node's), the
    ``reason`` already as Karpenter writes it (lower case), ``consolidation_policy`` the
    NodePool's as the API spells it (``WhenEmptyOrUnderutilized``), for consolidation
    only."""
    return {
        "reason": reason,
        "nodepool": labels.get(LABEL_NODEPOOL, ""),
        "capacity_type": labels.get(LABEL_CAPACITY_TYPE, ""),
        "consolidation_policy": to_snake_case(consolidation_policy),
        "termination_mode": termination_mode(grace_period),
    }
