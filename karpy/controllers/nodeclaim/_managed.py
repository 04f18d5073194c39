"""Which NodeClaims the NodeClaim controllers act on: those whose NodeClass the cloud
provider serves."""

from __future__ import annotations

from karpy.apis import NodeClaim
from karpy.cloudprovider import CloudProvider

__all__ = ["is_managed"]


def is_managed(nodeclaim: NodeClaim, provider: CloudProvider) -> bool:
    """Whether ``provider`` serves the NodeClaim's NodeClass (Karpenter's IsManaged):
    NodeClaims for another provider's NodeClass are left alone."""
    ref = nodeclaim.spec.node_class_ref
    return any(
        (kind.group, kind.kind) == (ref.group, ref.kind)
        for kind in provider.supported_node_classes()
    )
