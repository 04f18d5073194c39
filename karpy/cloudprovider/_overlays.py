"""The NodeOverlays in force, as a provider's ``create`` sees them.

The core plans with its instance types after NodeOverlays changed their prices and added
capacity (extended resources the cloud does not report, such as hugepages or a device
plugin's resources). A provider that re-reads its own catalogue in ``create`` to choose
what to launch must apply the same overlays, or a NodeClaim that asks for an overlay's
resource fits no instance type there: Karpenter AWS's ``Create`` applies the NodeOverlay
store to its catalogue by the NodeClaim's NodePool for the same reason (standalone
NodeClaims, with no NodePool, get none). The operator passes the store it keeps in force
as :attr:`ProviderContext.overlays`; the default applies nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from karpy.apis import NodeClaim
from karpy.scheduling import InstanceType

__all__ = ["LaunchOverlays", "NoOverlays"]


@runtime_checkable
class LaunchOverlays(Protocol):
    """Applies the NodeOverlays in force to a provider's instance types for one NodeClaim."""

    def apply(
        self, nodeclaim: NodeClaim, instance_types: Sequence[InstanceType]
    ) -> Sequence[InstanceType]:
        """``instance_types`` as the core saw them for ``nodeclaim``'s NodePool: prices
        and capacity overlaid. The same sequence when nothing applies; an equal input
        (the same object, the same overlays) gives the same object back, so a provider's
        caches keyed on the list's identity keep working."""
        ...


class NoOverlays:
    """No NodeOverlays: the instance types as they are (the default)."""

    def apply(
        self, nodeclaim: NodeClaim, instance_types: Sequence[InstanceType]
    ) -> Sequence[InstanceType]:
        """``instance_types`` unchanged."""
        return instance_types
