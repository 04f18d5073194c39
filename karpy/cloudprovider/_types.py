"""Small value types shared by the protocol, its errors and the controllers, and the
Karpenter kinds (one declaration each, as :class:`karpy.runtime.Kind` descriptors)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Final, Literal, NewType, TypeAlias

from karpy.runtime import Kind

DriftReason = NewType("DriftReason", str)
"""Why a NodeClaim no longer matches what its NodePool/NodeClass would launch now
(Karpenter's reasons are CamelCase, e.g. ``"AMIDrift"``)."""


@dataclass(frozen=True, slots=True, order=True)
class OfferingKey:
    """Names one offering: an instance type in one zone with one capacity type.

    This is what :class:`~karpy.cloudprovider.InsufficientCapacityError` carries and what
    the core's unavailable-offerings cache is keyed by.
    """

    instance_type: str
    zone: str
    capacity_type: str

    def __str__(self) -> str:
        return f"{self.instance_type}/{self.zone}/{self.capacity_type}"


@dataclass(frozen=True, slots=True)
class RepairPolicy:
    """A Node condition that means "unhealthy"; the node is repaired once the condition
    has held for ``toleration`` (Karpenter's node auto-repair; fields of Karpenter
    v1.15.0's ``cloudprovider.RepairPolicy``).

    The new fields default so a v1.14-style policy (type, status, toleration) still means
    what it did: replace the node, no reason filter, priority 0, the NodeClaim's own
    drain bound.
    """

    condition_type: str
    condition_status: Literal["True", "False", "Unknown"]
    toleration: timedelta
    reason_regex: str = ""
    """A regular expression searched for in the condition's ``reason`` (Go's
    ``regexp.MatchString``: a match anywhere). Empty: the fallback, used for the
    condition when no reason-specific policy matches."""
    termination_grace_period: timedelta | None = None
    """The drain bound for repair of this condition: None inherits the NodeClaim's
    terminationGracePeriod; otherwise min(this, the NodeClaim's); zero drains forcefully."""
    priority: int = 0
    """0-100; higher repairs first (only the order matters)."""
    action: Literal["ReplaceNode", "RebootNode"] = "ReplaceNode"
    """What repair does: replace the node, or reboot it in place (a provider with the
    optional reboot ability)."""


NodeClassKind: TypeAlias = Kind
"""Deprecated: a NodeClass kind is a :class:`karpy.runtime.Kind` with
``namespaced=False`` (NodeClasses are cluster-scoped); write ``Kind(...)``. This name
stays for providers written before the two descriptors were one."""

NODE_POOL: Final = Kind(
    group="karpenter.sh", version="v1", plural="nodepools", kind="NodePool", namespaced=False
)
"""Karpenter's NodePool, for API calls and watches."""
NODE_CLAIM: Final = Kind(
    group="karpenter.sh", version="v1", plural="nodeclaims", kind="NodeClaim", namespaced=False
)
"""Karpenter's NodeClaim (providers read it too: interruption, garbage collection)."""
NODE_OVERLAY: Final = Kind(
    group="karpenter.sh",
    version="v1alpha1",
    plural="nodeoverlays",
    kind="NodeOverlay",
    namespaced=False,
)
"""Karpenter's NodeOverlay (feature gate NodeOverlay)."""
