"""Instance types and their offerings, as plain immutable data.

A cloud provider describes what it can launch with these: an :class:`InstanceType` has
requirements defining every well-known label (instance type, zone, capacity type,
architecture, OS ...), capacity, the overhead the kubelet reserves and the
:class:`Offering` s (zone x capacity type, price, availability) it is sold as. The
CloudProvider protocol re-exports these types.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from karpy.apis.labels import (
    CAPACITY_TYPE_RESERVED,
    LABEL_ARCH,
    LABEL_CAPACITY_TYPE,
    LABEL_INSTANCE_TYPE,
    LABEL_OS,
    LABEL_ZONE,
)
from karpy.scheduling import resources as res
from karpy.scheduling.devices import ResourceSliceTemplate
from karpy.scheduling.requirements import IN, Requirement, Requirements

__all__ = ["InstanceType", "Offering", "Overhead"]


@dataclass(frozen=True, slots=True, eq=False)
class Offering:
    """One way to buy an instance type: a zone and capacity type at a price per hour.

    ``requirements`` holds the offering's labels (zone and capacity type, plus anything
    a provider adds such as a reservation ID); it is derived from ``zone`` and
    ``capacity_type`` when not given.

    A ``reserved`` offering (capacity the user already pays for: an EC2 capacity
    reservation, a capacity block) names its reservation in ``reservation_id``, carries
    the provider's reservation-ID label in ``requirements``, and says in
    ``reservation_capacity`` how many more instances the reservation takes now
    (Karpenter's ``Offering.ReservationCapacity``); the simulator hands those slots out
    one per NodeClaim (:mod:`karpy.scheduling.reservations`).
    """

    zone: str
    capacity_type: str
    price: float
    available: bool = True
    requirements: Requirements = field(default_factory=Requirements)
    overlay: str = ""
    """The NodeOverlay that set ``price`` (empty: the provider's price)."""
    reservation_id: str = ""
    reservation_capacity: int = 0

    def __post_init__(self) -> None:
        base = Requirements(
            (
                Requirement.new(LABEL_ZONE, IN, (self.zone,)),
                Requirement.new(LABEL_CAPACITY_TYPE, IN, (self.capacity_type,)),
            )
        )
        object.__setattr__(self, "requirements", base.intersect(self.requirements))
        if self.capacity_type == CAPACITY_TYPE_RESERVED and not self.reservation_id:
            raise ValueError(
                f"a reserved offering ({self.zone}) needs a reservation_id naming its reservation"
            )

    @property
    def reserved(self) -> bool:
        """Capacity type ``reserved``: it launches into a reservation."""
        return self.capacity_type == CAPACITY_TYPE_RESERVED

    def __repr__(self) -> str:
        state = "" if self.available else ", unavailable"
        if self.reserved:
            state += f", {self.reservation_id} x{self.reservation_capacity}"
        return f"Offering({self.zone}/{self.capacity_type} ${self.price:g}/h{state})"


@dataclass(frozen=True, slots=True, eq=False)
class Overhead:
    """What a node keeps for itself: kube-reserved, system-reserved and the eviction
    threshold (canonical resource lists)."""

    kube_reserved: Mapping[str, int] = field(default_factory=dict)
    system_reserved: Mapping[str, int] = field(default_factory=dict)
    eviction_threshold: Mapping[str, int] = field(default_factory=dict)

    def total(self) -> res.ResourceList:
        """The sum of the three."""
        return res.add(self.kube_reserved, self.system_reserved, self.eviction_threshold)


@dataclass(frozen=True, slots=True, eq=False)
class InstanceType:
    """A machine shape a cloud sells. ``allocatable`` is ``capacity - overhead``
    (computed, never negative)."""

    name: str
    requirements: Requirements
    offerings: tuple[Offering, ...]
    capacity: Mapping[str, int]
    overhead: Overhead = field(default_factory=Overhead)
    capacity_overlays: tuple[str, ...] = ()
    """The NodeOverlays that added extended resources to ``capacity``."""
    resource_slice_templates: tuple[ResourceSliceTemplate, ...] = ()
    """The DRA devices a node of this type publishes once running (Karpenter's
    cloudprovider.DynamicResources.ResourceSliceTemplates); none by default."""
    volume_attachment_limits: Mapping[str, int] = field(default_factory=dict)
    """How many volumes of each CSI driver a node of this type can attach (Karpenter
    v1.15's InstanceType.VolumeAttachmentLimits); a driver not listed is unbounded."""
    allocatable: Mapping[str, int] = field(init=False)

    def __post_init__(self) -> None:
        allocatable = res.subtract(self.capacity, self.overhead.total())
        object.__setattr__(
            self, "allocatable", MappingProxyType({k: max(v, 0) for k, v in allocatable.items()})
        )
        object.__setattr__(self, "capacity", MappingProxyType(dict(self.capacity)))
        object.__setattr__(self, "offerings", tuple(self.offerings))
        object.__setattr__(
            self, "volume_attachment_limits", MappingProxyType(dict(self.volume_attachment_limits))
        )

    @classmethod
    def build(
        cls,
        name: str,
        *,
        capacity: Mapping[str, int],
        offerings: Iterable[Offering],
        overhead: Overhead | None = None,
        architecture: str = "amd64",
        operating_systems: Iterable[str] = ("linux",),
        requirements: Iterable[Requirement] = (),
        volume_attachment_limits: Mapping[str, int] | None = None,
    ) -> InstanceType:
        """An instance type whose requirements define the well-known labels: its name,
        the zones and capacity types of its available offerings, architecture and OS,
        narrowed further by ``requirements`` (a provider's own labels)."""
        offerings = tuple(offerings)
        available = [o for o in offerings if o.available]
        reqs = Requirements(
            (
                Requirement.new(LABEL_INSTANCE_TYPE, IN, (name,)),
                Requirement.new(LABEL_ARCH, IN, (architecture,)),
                Requirement.new(LABEL_OS, IN, tuple(operating_systems)),
                Requirement.new(LABEL_ZONE, IN, {o.zone for o in available}),
                Requirement.new(LABEL_CAPACITY_TYPE, IN, {o.capacity_type for o in available}),
                *requirements,
            )
        )
        return cls(
            name=name,
            requirements=reqs,
            offerings=offerings,
            capacity=capacity,
            overhead=overhead or Overhead(),
            volume_attachment_limits=volume_attachment_limits or {},
        )

    def cheapest_price(self, requirements: Requirements | None = None) -> float | None:
        """The lowest price of an available offering compatible with ``requirements``."""
        best: float | None = None
        for offering in self.offerings:
            if not offering.available:
                continue
            if requirements is not None and not requirements.overlaps(offering.requirements):
                continue
            if best is None or offering.price < best:
                best = offering.price
        return best

    def __repr__(self) -> str:
        return f"InstanceType({self.name})"
