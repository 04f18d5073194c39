"""An in-memory CloudProvider for unit tests of controllers.

:class:`FakeCloudProvider` keeps its instances in a dict, records every call, and fails
the next call of a kind when told to (``next_create_error`` and friends are one-shot).
It chooses instance types the way real providers do (cheapest available offering
compatible with the NodeClaim's requirements whose allocatable fits its requests) and
raises InsufficientCapacityError for offerings in ``unavailable``.

What it does not do:

- talk to an API server: no Node objects appear, so nothing ever registers by itself;
  a test that needs a Node creates one;
- take time: ``create`` and ``delete`` finish at once (``delete`` removes the instance
  and the next ``delete`` raises NodeClaimNotFoundError), there is no eventual
  consistency to wait for;
- look at NodeClasses: it declares ``node_classes`` but never reads them, so it never
  raises NodeClassNotReadyError unless a test sets it as the next error;
- compute drift: ``is_drifted`` returns whatever ``drifted`` is set to.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from datetime import timedelta

from karpy.apis import NodeClaim, NodePool
from karpy.apis import labels as wk
from karpy.cloudprovider._launch import choose_launch, launched_nodeclaim
from karpy.cloudprovider._types import DriftReason, OfferingKey, RepairPolicy
from karpy.cloudprovider.errors import NodeClaimNotFoundError
from karpy.runtime import Kind
from karpy.scheduling import InstanceType, Offering, Overhead, Requirement
from karpy.scheduling import resources as res

__all__ = ["FAKE_NODE_CLASS", "FakeCloudProvider", "default_instance_types"]

FAKE_NODE_CLASS = Kind(
    group="karpenter.test.sh", version="v1alpha1", kind="TestNodeClass", plural="testnodeclasses",
    namespaced=False,
)
ZONES = ("test-zone-a", "test-zone-b", "test-zone-c")
GIB = 2**30


def _offerings(price: float) -> list[Offering]:
    return [
        Offering(
            zone=zone, capacity_type=ct, price=price * (0.7 if ct == wk.CAPACITY_TYPE_SPOT else 1.0)
        )
        for zone in ZONES
        for ct in (wk.CAPACITY_TYPE_SPOT, wk.CAPACITY_TYPE_ON_DEMAND)
    ]


def default_instance_types() -> list[InstanceType]:
    """A handful of instance types: small/default/large amd64, an arm64 one and one
    with GPUs, each spot and on-demand in three zones, priced by size."""
    overhead = Overhead(kube_reserved={res.CPU: 100, res.MEMORY: 10 * 2**20})

    def build(
        name: str, cpu: int, memory_gib: int, *, arch: str = "amd64", gpus: int = 0
    ) -> InstanceType:
        capacity = {
            res.CPU: cpu * 1000,
            res.MEMORY: memory_gib * GIB,
            res.PODS: 110,
            res.EPHEMERAL_STORAGE: 20 * GIB,
        }
        if gpus:
            capacity["nvidia.com/gpu"] = gpus
        return InstanceType.build(
            name,
            capacity=capacity,
            offerings=_offerings(0.025 * cpu + 0.001 * memory_gib + 0.5 * gpus),
            overhead=overhead,
            architecture=arch,
            requirements=[Requirement.new("karpenter.test.sh/cpu", "In", (str(cpu),))],
        )

    return [
        build("small-instance-type", 2, 4),
        build("default-instance-type", 4, 16),
        build("large-instance-type", 16, 64),
        build("arm-instance-type", 8, 32, arch="arm64"),
        build("gpu-instance-type", 8, 64, gpus=2),
    ]


class FakeCloudProvider:
    """An in-memory :class:`~karpy.cloudprovider.CloudProvider` that records its calls.

    Set ``next_create_error`` / ``next_delete_error`` / ``next_get_error`` to make the
    next such call raise (once). Read ``create_calls``, ``delete_calls`` and
    ``get_calls`` to assert on what a controller did; ``instances`` maps provider IDs to
    the launched NodeClaims. ``reset()`` forgets everything.
    """

    def __init__(
        self,
        *,
        instance_types: Sequence[InstanceType] | None = None,
        name: str = "fake",
        node_classes: Sequence[Kind] = (FAKE_NODE_CLASS,),
        repair_policies: Sequence[RepairPolicy] | None = None,
    ) -> None:
        self._name = name
        self._default_types = (
            list(instance_types) if instance_types is not None else default_instance_types()
        )
        self._node_classes = tuple(node_classes)
        self._repair_policies = (
            tuple(repair_policies)
            if repair_policies is not None
            else (RepairPolicy("BadNode", "False", timedelta(minutes=30)),)
        )
        self._ids = itertools.count(1)
        self.reset()

    def reset(self) -> None:
        """Forget instances, recorded calls, injected errors and per-NodePool settings."""
        self.instance_types: list[InstanceType] = list(self._default_types)
        self.instance_types_for_nodepool: dict[str, list[InstanceType]] = {}
        self.errors_for_nodepool: dict[str, Exception] = {}
        self.instances: dict[str, NodeClaim] = {}
        self.create_calls: list[NodeClaim] = []
        self.delete_calls: list[NodeClaim] = []
        self.get_calls: list[str] = []
        self.list_calls = 0
        self.next_create_error: Exception | None = None
        self.next_delete_error: Exception | None = None
        self.next_get_error: Exception | None = None
        self.allowed_create_calls: int | None = None
        self.unavailable: set[OfferingKey] = set()
        self.drifted: DriftReason | None = None

    @property
    def name(self) -> str:
        """The provider's name (``"fake"`` unless given)."""
        return self._name

    async def create(self, nodeclaim: NodeClaim) -> NodeClaim:
        """Record the call, then launch in memory (or raise the injected error)."""
        self.create_calls.append(nodeclaim.model_copy(deep=True))
        if self.next_create_error is not None:
            error, self.next_create_error = self.next_create_error, None
            raise error
        if self.allowed_create_calls is not None and (
            len(self.create_calls) > self.allowed_create_calls
        ):
            raise RuntimeError(
                f"create call {len(self.create_calls)} exceeds allowed_create_calls="
                f"{self.allowed_create_calls}"
            )
        pool = nodeclaim.metadata.labels.get("karpenter.sh/nodepool", "")
        choice = choose_launch(
            nodeclaim, self._types_for(pool), refuse=self.unavailable.__contains__
        )
        provider_id = f"fake://{nodeclaim.metadata.name or 'nodeclaim'}-{next(self._ids):04d}"
        launched = launched_nodeclaim(nodeclaim, choice, provider_id=provider_id)
        self.instances[provider_id] = launched
        return launched.model_copy(deep=True)

    async def delete(self, nodeclaim: NodeClaim) -> None:
        """Record the call and remove the instance; NodeClaimNotFoundError if absent."""
        self.delete_calls.append(nodeclaim.model_copy(deep=True))
        if self.next_delete_error is not None:
            error, self.next_delete_error = self.next_delete_error, None
            raise error
        provider_id = nodeclaim.status.provider_id or ""
        if self.instances.pop(provider_id, None) is None:
            raise NodeClaimNotFoundError(
                f"no instance with provider ID {provider_id!r}", provider_id=provider_id
            )

    async def get(self, provider_id: str) -> NodeClaim:
        """Record the call and return the instance; NodeClaimNotFoundError if absent."""
        self.get_calls.append(provider_id)
        if self.next_get_error is not None:
            error, self.next_get_error = self.next_get_error, None
            raise error
        found = self.instances.get(provider_id)
        if found is None:
            raise NodeClaimNotFoundError(
                f"no instance with provider ID {provider_id!r}", provider_id=provider_id
            )
        return found.model_copy(deep=True)

    async def list(self) -> Sequence[NodeClaim]:
        """Every instance, as launched."""
        self.list_calls += 1
        return [nc.model_copy(deep=True) for nc in self.instances.values()]

    async def get_instance_types(self, nodepool: NodePool) -> Sequence[InstanceType]:
        """``instance_types_for_nodepool[name]`` if set, else ``instance_types``; raises
        ``errors_for_nodepool[name]`` if set."""
        pool = nodepool.metadata.name or ""
        if pool in self.errors_for_nodepool:
            raise self.errors_for_nodepool[pool]
        return list(self._types_for(pool))

    def _types_for(self, pool: str) -> Sequence[InstanceType]:
        return self.instance_types_for_nodepool.get(pool, self.instance_types)

    async def is_drifted(self, nodeclaim: NodeClaim) -> DriftReason | None:
        """Whatever ``drifted`` is set to."""
        return self.drifted

    def repair_policies(self) -> Sequence[RepairPolicy]:
        """One policy: condition ``BadNode`` False for 30 minutes (unless given)."""
        return self._repair_policies

    def supported_node_classes(self) -> Sequence[Kind]:
        """``node_classes`` as given (default: TestNodeClass)."""
        return self._node_classes
