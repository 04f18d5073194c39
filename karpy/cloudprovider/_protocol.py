"""The CloudProvider protocol: the one contract between karpy's core and a cloud.

It mirrors Karpenter's ``CloudProvider`` interface (pkg/cloudprovider/types.go) method
for method, in async Python. The lifecycle controller is the only caller of ``create``;
termination and garbage collection call ``delete``; the provisioner and consolidation
read ``get_instance_types``.

What a provider may do beyond the protocol is a small protocol of its own, checked with
``isinstance`` where the core uses it: :class:`ContributesControllers` and
:class:`ClosesOnShutdown` on the provider; :class:`BuildsFromContext`,
:class:`DeclaresSettings` and :class:`ChecksSettings` on the object its entry point
names (usually the provider class).
"""

from __future__ import annotations

from collections.abc import Awaitable, Mapping, Sequence
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from karpy.apis import NodeClaim, NodePool
    from karpy.cloudprovider._registry import ProviderContext
    from karpy.cloudprovider._settings import ProviderSetting
    from karpy.cloudprovider._types import DriftReason, RepairPolicy
    from karpy.runtime import Kind, Manager
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

    def supported_node_classes(self) -> Sequence[Kind]:
        """The NodeClass kinds this provider serves (cluster-scoped: ``namespaced=False``);
        the first is the default."""
        ...


@runtime_checkable
class ContributesControllers(Protocol):
    """An optional ability: a provider that runs controllers of its own.

    A provider that needs work of its own while karpy runs (a NodeClass status
    controller, an interruption-queue poller, garbage collection of its launch templates
    or NICs) implements ``register_controllers``. The operator calls it once, after the
    core controllers are registered and before the manager runs, with the manager the
    core uses; the provider adds its controllers with ``manager.controller(name)``,
    ``manager.singleton(...)`` or ``manager.add(runnable)``, built on karpy.runtime only.
    Those run only while this replica is the leader unless a runnable says otherwise,
    share the manager's cache, metrics and event recorders, and stop with it.
    """

    def register_controllers(self, manager: Manager) -> None:
        """Add this provider's controllers to ``manager`` (called once, before it runs)."""
        ...


@runtime_checkable
class ClosesOnShutdown(Protocol):
    """An optional ability: a provider that holds sessions or background tasks.

    :func:`~karpy.cloudprovider.registry.close_provider` (and so the operator, at
    shutdown) awaits ``aclose`` once.
    """

    async def aclose(self) -> None:
        """Close the provider's sessions and cancel its background tasks."""
        ...


@runtime_checkable
class BuildsFromContext(Protocol):
    """An optional ability of the object an entry point names: a factory of its own.

    When the object (typically the provider class) has ``from_context`` (typically a
    classmethod), that is the provider's factory; otherwise the object itself is called.
    It may return the provider or an awaitable of it.
    """

    def from_context(self, context: ProviderContext) -> CloudProvider | Awaitable[CloudProvider]:
        """Build the provider from what the operator gives it."""
        ...


@runtime_checkable
class DeclaresSettings(Protocol):
    """An optional ability of the object an entry point names: the provider's settings,
    listed by ``karpy run --help`` (:class:`~karpy.cloudprovider.ProviderSetting`)."""

    SETTINGS: Sequence[ProviderSetting]


@runtime_checkable
class ChecksSettings(Protocol):
    """An optional ability of the object an entry point names: refusing bad settings at
    start-up, before karpy connects to anything (parse only, no I/O)."""

    def check_settings(
        self, settings: Mapping[str, str], *, cluster_name: str, environ: Mapping[str, str]
    ) -> None:
        """Raise ValueError (or CloudProviderError) naming the setting, its environment
        variable and the fix."""
        ...
