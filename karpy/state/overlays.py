"""The NodeOverlays in force: what the nodeoverlay controller last judged applicable.

The controller replaces the whole set at once (:meth:`OverlayStore.update`) after
judging every overlay against every NodePool's catalogue, so a reader never sees half an
evaluation; ``seq`` increases on every change so the instance-type cache rebuilds its
overlaid copies only then.

With the ``NodeOverlay`` gate on the store is ``required``: a NodePool the controller
has not judged yet (karpy just started, or the pool is new) has no instance types to
offer, as in Karpenter (its UnevaluatedNodePoolError), so nothing is launched at a price
an overlay would have changed. With the gate off nothing updates the store and it stays
empty.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from karpy.apis import NodeClaim
from karpy.apis.labels import LABEL_NODEPOOL
from karpy.scheduling import InstanceType
from karpy.scheduling.overlay import Overlay, PoolTypes, apply_overlays

if TYPE_CHECKING:
    from karpy.cloudprovider import LaunchOverlays

__all__ = ["OverlayStore", "UnevaluatedNodePoolError"]


class UnevaluatedNodePoolError(Exception):
    """The NodePool's instance types are not yet judged against the NodeOverlays."""


class OverlayStore:
    """The applicable overlays, in precedence order (see the module docstring)."""

    def __init__(self, *, required: bool = False) -> None:
        self.required = required
        """Readers must wait until a NodePool has been judged (the gate is on)."""
        self.applied: tuple[Overlay, ...] = ()
        self.evaluated: frozenset[str] = frozenset()
        """The NodePools the last judgement covered."""
        self.seq = 0
        # (nodepool, labels) -> (the raw list, seq, its overlaid copy): the same input
        # gives the same object back, so a provider's plan caches keep hitting
        self._launch: dict[tuple[str, frozenset[tuple[str, str]]],
                           tuple[Sequence[InstanceType], int, Sequence[InstanceType]]] = {}

    def update(self, applied: Sequence[Overlay], evaluated: Iterable[str] = ()) -> bool:
        """Put ``applied`` in force for the NodePools ``evaluated``; returns whether
        either changed (pending pods may then be planned anew)."""
        pools = frozenset(evaluated)
        new = tuple(applied)
        changed = pools != self.evaluated
        self.evaluated = pools
        if new != self.applied:
            self.applied = new
            self.seq += 1
            changed = True
        return changed

    def check(self, nodepool: str) -> None:
        """Raise :class:`UnevaluatedNodePoolError` when ``nodepool`` must wait."""
        if self.required and nodepool not in self.evaluated:
            raise UnevaluatedNodePoolError(
                f"nodepool {nodepool} has not been evaluated against the NodeOverlays yet"
            )

    def apply(
        self, nodeclaim: NodeClaim, instance_types: Sequence[InstanceType]
    ) -> Sequence[InstanceType]:
        """``instance_types`` with the overlays in force applied for ``nodeclaim``'s
        NodePool (its labels select, as the NodePool template's do when the core plans):
        what a provider's ``create`` launches from (karpy.cloudprovider.LaunchOverlays).
        A NodeClaim of no NodePool gets none, as in Karpenter."""
        labels = dict(nodeclaim.metadata.labels)
        pool = labels.get(LABEL_NODEPOOL, "")
        if not self.applied or not pool:
            return instance_types
        key = (pool, frozenset(labels.items()))
        hit = self._launch.get(key)
        if hit is not None and hit[0] is instance_types and hit[1] == self.seq:
            return hit[2]
        overlaid = apply_overlays(self.applied, PoolTypes(pool, labels, instance_types))
        if len(self._launch) >= 64:
            self._launch.pop(next(iter(self._launch)))
        self._launch[key] = (instance_types, self.seq, overlaid)
        return overlaid


if TYPE_CHECKING:  # mypy proves the store is what a provider's create applies

    def _conforms(store: OverlayStore) -> LaunchOverlays:
        return store

