"""The CloudProvider protocol: the one contract between karpy's core and a cloud.

It mirrors Karpenter's ``CloudProvider`` interface (pkg/cloudprovider/types.go) method
for method, in async Python. The lifecycle controller is the only caller of ``create``,
termination the only caller of ``delete``; the provisioner and consolidation read
``get_instance_types``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from karpy.apis import NodeClaim, NodePool
    from karpy.cloudprovider._types import DriftReason, NodeClassKind, RepairPolicy
    from karpy.scheduling import InstanceType


@runtime_checkable
class CloudProvider(Protocol):
    """What a cloud implements so that karpy can launch and remove its machines.

    Errors: raise the types in :mod:`karpy.cloudprovider.errors` for the outcomes the
    core acts on (no capacity, instance gone, NodeClass not ready, a launch failure with
    a reason); anything else is treated as transient and retried.
    """

    @property
    def name(self) -> str:
        """The provider's name, the same as its entry point (``"kwok"``, ``"aws"``)."""
        ...

    async def create(self, nodeclaim: NodeClaim) -> NodeClaim:
        """Launch a machine for ``nodeclaim`` and return it as launched.

        The provider picks an instance type and offering compatible with the NodeClaim's
        requirements (cheapest first) that fits its ``resources.requests``. The returned
        NodeClaim carries ``status.providerID``, ``status.capacity``,
        ``status.allocatable`` and labels resolved from the launch: instance type, zone,
        capacity type, architecture and OS at least.

        Raises InsufficientCapacityError, NodeClassNotReadyError or CreateError.
        """
        ...

    async def delete(self, nodeclaim: NodeClaim) -> None:
        """Start terminating the machine with ``nodeclaim.status.providerID``.

        Returns when termination was started; raises NodeClaimNotFoundError once the
        machine is gone. The core calls it until it raises NodeClaimNotFoundError, so
        deleting something already gone must raise that error, not succeed.
        """
        ...

    async def get(self, provider_id: str) -> NodeClaim:
        """Return the machine with this provider ID as a NodeClaim (status.providerID,
        capacity, allocatable, resolved labels). Raises NodeClaimNotFoundError."""
        ...

    async def list(self) -> Sequence[NodeClaim]:
        """Return every machine this provider launched for the cluster (used to
        garbage-collect machines that have no NodeClaim)."""
        ...

    async def get_instance_types(self, nodepool: NodePool) -> Sequence[InstanceType]:
        """Return every instance type the NodePool could use, *including* those whose
        offerings are unavailable right now (marked ``available=False``)."""
        ...

    async def is_drifted(self, nodeclaim: NodeClaim) -> DriftReason | None:
        """Return why ``nodeclaim`` no longer matches its NodeClass, or None."""
        ...

    def repair_policies(self) -> Sequence[RepairPolicy]:
        """Node conditions that mean the node is unhealthy and should be replaced."""
        ...

    def supported_node_classes(self) -> Sequence[NodeClassKind]:
        """The NodeClass kinds this provider serves; the first is the default."""
        ...
