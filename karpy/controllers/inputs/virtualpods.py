"""What the provisioner asks of a source of virtual pods (CapacityBuffer headroom).

Virtual pods are scheduled with the pending ones in every round, onto existing capacity
or new NodeClaims, so their capacity is bought and kept; they are never nominated and
never get events (there is no such pod). :mod:`karpy.controllers.capacitybuffer`
provides the one implementation; the provisioner and disruption's what-if only see this.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from karpy.scheduling import Pod, Results

__all__ = ["VirtualPodSource"]


class VirtualPodSource(Protocol):
    """Pods that stand for capacity to keep free (Karpenter's virtual pod cache)."""

    def pods(self) -> Sequence[Pod]:
        """Every virtual pod now."""
        ...

    def is_virtual(self, pod_key: str) -> bool:
        """Whether ``namespace/name`` is one of :meth:`pods`."""
        ...

    def observe(self, results: Results) -> None:
        """Where a provisioning round placed the virtual pods (for their status)."""
        ...
