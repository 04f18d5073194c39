"""The allocation tracker of one solve: which devices each node and each planned
NodeClaim has left, so a device handed to one pod is not handed to another.

Existing nodes (and in-flight NodeClaims the cluster model shows as nodes) start from
their ResourceSlices, less what allocated claims hold. A NodeClaim the solve plans may
still become any of its instance types, so its devices are tracked per instance type:
placing a DRA pod keeps only the types whose slice templates can give the pod its
devices beside those of the pods placed before (Karpenter's per-instance-type
allocation state in allocationtracker.go, where a released type returns its devices).

A claim shared by several pods is allocated once, where the first of them goes; the
others can only follow it there.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from karpy.scheduling.catalog import iter_bits
from karpy.scheduling.deviceallocation import Allocation, Allocator, Inventory, Usage
from karpy.scheduling.devices import DeviceClaim, DeviceClass, DeviceRequest
from karpy.scheduling.instancetype import InstanceType
from karpy.scheduling.pod import Pod

__all__ = ["DeviceInputs", "DeviceTracker"]


@dataclass(frozen=True)
class DeviceInputs:
    """What the cluster says about devices: DeviceClasses, each node's inventory (from
    its ResourceSlices, by node name) and the claims already allocated."""

    classes: Mapping[str, DeviceClass] = field(default_factory=dict)
    nodes: Mapping[str, Inventory] = field(default_factory=dict)
    allocated: Sequence[DeviceClaim] = ()


class DeviceTracker:
    """Devices left per node and per planned NodeClaim in one solve."""

    def __init__(self, inputs: DeviceInputs) -> None:
        self.allocator = Allocator(inputs.classes)
        self._inventories = inputs.nodes
        self._allocated = inputs.allocated
        self._node_usage: dict[str, Usage] = {}
        self._claim_usage: dict[tuple[int, int], Usage] = {}
        self._templates: dict[int, Inventory] = {}
        self._fresh_by_shape: dict[tuple[object, ...], dict[int, bool]] = {}
        """claim shape -> template inventory id -> fits an empty node of that type."""
        self._held: list[object] = []
        self._drivers: dict[str, set[str]] = {}
        self._dead: dict[tuple[int, tuple[object, ...]], int] = {}
        """(planned NodeClaim id, claim shape) -> instance type bits that cannot take it."""
        self._located: dict[str, str] = {}
        """claim key -> where it is allocated: a node name, or "claim:<id>"."""
        for claim in inputs.allocated:
            if claim.node:
                self._located[claim.key] = claim.node

    # -- existing nodes ---------------------------------------------------------------

    def _usage(self, node: str) -> Usage:
        usage = self._node_usage.get(node)
        if usage is None:
            usage = self._node_usage[node] = Usage()
            usage.holding(self._allocated, self._inventories.get(node, Inventory()))
            usage.claims.update(c.key for c in self._allocated if c.node == node)
        return usage

    def _follows(self, pod: Pod, where: str) -> str | None:
        for claim in pod.device_claims:
            at = self._located.get(claim.key)
            if at is not None and at != where:
                return f"claim {claim.key} is allocated elsewhere"
        return None

    def check_node(self, pod: Pod, node: str) -> Allocation | str:
        """The devices ``pod`` gets on existing node ``node``, or why none."""
        reason = self._follows(pod, node)
        if reason is not None:
            return reason
        return self.allocator.allocate(
            pod.device_claims, self._inventories.get(node, Inventory()), self._usage(node))

    def commit_node(self, pod: Pod, node: str, allocation: Allocation) -> None:
        self._usage(node).commit(allocation)
        for key in allocation.claims:
            self._located[key] = node

    # -- planned NodeClaims -----------------------------------------------------------

    def _template(self, it: InstanceType) -> Inventory:
        inventory = self._templates.get(id(it))
        if inventory is None:
            inventory = self._templates[id(it)] = Inventory.of(it.resource_slice_templates)
        return inventory

    def check_claim(
        self, pod: Pod, claim: object, types: Sequence[InstanceType], mask: int
    ) -> tuple[int, dict[int, Allocation]] | str:
        """The instance types of ``mask`` (bits into ``types``) on which planned
        NodeClaim ``claim`` can give ``pod`` its devices, with the allocation for each;
        or why none can."""
        # Keyed by id(): held here so no id is reused by a later NodeClaim in the solve.
        self._held.append(claim)
        where = f"claim:{id(claim)}"
        reason = self._follows(pod, where)
        if reason is not None:
            return reason
        kept = 0
        allocations: dict[int, Allocation] = {}
        shape = tuple(_shape(c) for c in pod.device_claims if not c.allocated)
        fresh = self._fresh_by_shape.setdefault(shape, {})
        # Within a solve a NodeClaim's devices only get fewer: a type that could not
        # take this shape of claims once never can again (checked once, then skipped).
        dead_key = (id(claim), shape)
        dead = self._dead.get(dead_key, 0)
        tried = -1
        for bit in iter_bits(mask & ~dead):
            inventory = self._template(types[bit])
            if fresh.get(id(inventory)) is False:
                dead |= 1 << bit
                continue  # cannot fit on an empty node of this type: not on this one
            usage = self._claim_usage.get((id(claim), bit))
            answer = self.allocator.allocate(pod.device_claims, inventory,
                                             usage or Usage(), explain=False)
            if usage is None:
                fresh[id(inventory)] = not isinstance(answer, str)
            tried = bit
            if isinstance(answer, str):
                dead |= 1 << bit
                continue
            kept |= 1 << bit
            allocations[bit] = answer
        self._dead[dead_key] = dead
        if not kept:
            if tried < 0:
                tried = next(iter(iter_bits(mask)), -1)
            if tried < 0:
                return "no instance type offers the devices"
            # the reason for the last type tried, spelled out once
            usage = self._claim_usage.get((id(claim), tried)) or Usage()
            answer = self.allocator.allocate(pod.device_claims, self._template(types[tried]),
                                             usage)
            return answer if isinstance(answer, str) else "cannot allocate all claims"
        return kept, allocations



    def drivers(self, hostname: str) -> tuple[str, ...]:
        """The drivers whose devices pods were allocated on planned NodeClaim
        ``hostname`` (sorted)."""
        return tuple(sorted(self._drivers.get(hostname, ())))

    def commit_claim(
        self, claim: object, allocations: Mapping[int, Allocation], hostname: str
    ) -> None:
        """Record ``allocations`` (per instance type bit) on planned NodeClaim ``claim``
        (placeholder ``hostname``); the types left out return what they held (their
        usage is dropped)."""
        drivers = self._drivers.setdefault(hostname, set())
        for allocation in allocations.values():
            drivers.update(p.device.id.driver for p in allocation.picks)
        for bit, allocation in allocations.items():
            key = (id(claim), bit)
            usage = self._claim_usage.get(key)
            if usage is None:
                usage = self._claim_usage[key] = Usage()
            usage.commit(allocation)
            for name in allocation.claims:
                self._located[name] = f"claim:{id(claim)}"
        for key in [k for k in self._claim_usage if k[0] == id(claim) and k[1] not in allocations]:
            del self._claim_usage[key]


def _shape(claim: DeviceClaim) -> object:
    """What decides where ``claim`` fits, without its name."""
    def request(r: DeviceRequest) -> object:
        return (r.device_class, r.selectors, r.count, r.all, tuple(sorted(r.capacity.items())),
                tuple(request(s) for s in r.first_available))
    return (tuple(request(r) for r in claim.requests), claim.constraints)
