"""Which NodeClaims the NodeClaim controllers act on: those whose NodeClass the cloud
provider serves."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from karpy.apis import NodeClaim
from karpy.cloudprovider import CloudProvider

__all__ = ["is_managed", "is_managed_object"]


def is_managed(nodeclaim: NodeClaim, provider: CloudProvider) -> bool:
    """Whether ``provider`` serves the NodeClaim's NodeClass (Karpenter's IsManaged):
    NodeClaims for another provider's NodeClass are left alone."""
    ref = nodeclaim.spec.node_class_ref
    return any(
        (kind.group, kind.kind) == (ref.group, ref.kind)
        for kind in provider.supported_node_classes()
    )


def is_managed_object(nodeclaim: Mapping[str, Any], provider: CloudProvider) -> bool:
    """:func:`is_managed` of a NodeClaim as stored (no model parsed: for hot paths)."""
    ref = (nodeclaim.get("spec") or {}).get("nodeClassRef") or {}
    return any(
        (kind.group, kind.kind) == (ref.get("group"), ref.get("kind"))
        for kind in provider.supported_node_classes()
    )
