"""Launching one instance for a NodeClaim with CreateFleet (type ``instant``), as
Karpenter AWS does (pkg/providers/instance/instance.go):

1. the instance types compatible with the NodeClaim that fit its requests, without
   the exotic ones and with spot offerings dearer than on-demand capped
   (:mod:`karpy_aws._launchfilters`, Karpenter's launch filters);
2. capacity type: reserved if the NodeClaim allows it and some compatible reserved
   offering (a capacity reservation with a slot left) is available, else spot likewise,
   else on-demand (Karpenter's order). A reserved launch keeps one kind of reservation
   (default ODCRs before capacity blocks, before interruptible ODCRs) and one reservation
   per instance type and zone, the one with the most instances left; each reservation
   gets its own launch template targeting it (``CapacityReservationSpecification``,
   ``capacity-reservations-only``; a capacity block also
   ``InstanceMarketOptions.MarketType: capacity-block``), and the fleet's
   ``DefaultTargetCapacityType`` is ``on-demand``, or ``capacity-block`` for blocks;
3. overrides: every available offering of that capacity type, cheapest first (at most
   60 types, Karpenter's cap), each with a subnet of its zone that is not out of
   addresses and the AMI for its architecture/accelerator (``ImageId`` in the
   override), grouped into one launch template config per (AMI, maxPods, EFA interface
   count), as Karpenter groups its launch templates: the kubelet's maxPods is the
   instance type's pod capacity, written into the template's user data, and a NodeClaim
   requesting ``vpc.amazonaws.com/efa`` gets one EFA interface per network card of the
   type, so types with different values need different templates;
4. ``lowest-price`` for on-demand, ``price-capacity-optimized`` for spot; a NodeClaim a
   NodeOverlay priced (``karpenter.sh/price-overlay-applied``) is launched
   ``prioritized`` (on-demand) or ``capacity-optimized-prioritized`` (spot), its
   overrides ranked by ``Priority`` in the order the NodeClaim lists its instance types
   (the overlaid prices, cheapest first, which EC2 does not know), as Karpenter AWS does;
5. the fleet's per-override errors with an insufficient-capacity code mark those
   offerings unavailable in the provider's cache (``InsufficientFreeAddressesInSubnet``
   marks the subnet instead, so the zone's other subnets are tried next); no instance
   at all raises InsufficientCapacityError naming them (or CreateError for other codes).
   In a reserved launch such an error marks the *reservation* out of slots instead
   (:class:`karpy_aws._reservations.CapacityReservations`), until it is described again.

The request carries only tags common to every NodeClaim of the same shape, so that
concurrent identical requests merge into one CreateFleet (:mod:`karpy_aws._batcher`);
the NodeClaim's own tags are written once the instance exists.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from karpy.apis import NodeClaim
from karpy.apis import labels as wk
from karpy.apis.annotations import (
    ANNOTATION_NODECLAIM_MIN_VALUES_RELAXED,
    ANNOTATION_PRICE_OVERLAY_APPLIED,
)
from karpy.cloudprovider import (
    CreateError,
    InstanceType,
    InsufficientCapacityError,
    Offering,
    OfferingKey,
    UnavailableOfferings,
)
from karpy.cloudprovider.launch import (
    nodeclaim_requests,
    nodeclaim_requirements,
    overlay_order,
)
from karpy.scheduling import Requirement, Requirements
from karpy.scheduling import resources as res
from karpy_aws._errors import (
    SPOT_SERVICE_LINKED_ROLE_CODE,
    SUBNET_FULL_CODE,
    is_unfulfillable_capacity,
)
from karpy_aws._launchfilters import exotic_filter, spot_price_cap
from karpy_aws._reservations import CapacityReservations
from karpy_aws.apis import labels as aws
from karpy_aws.apis.ec2nodeclass import AMI, EC2NodeClass

__all__ = [
    "MAX_INSTANCE_TYPES",
    "FleetPlan",
    "Override",
    "PlanCache",
    "TemplateKey",
    "UnexpectedInstanceTypeError",
    "fleet_context",
    "fleet_outcome",
    "fleet_request",
    "plan_fleet",
    "target_capacity_type",
]

log = logging.getLogger("karpy.aws.instance")

MAX_INSTANCE_TYPES = 60

class TemplateKey(NamedTuple):
    """What tells one launch template of a launch from another."""

    image_id: str
    max_pods: int = 0
    """The kubelet's maxPods, written into the template's user data."""
    efa_count: int = 0
    reservation_id: str = ""
    """The capacity reservation the template targets (reserved launches)."""
    market_type: str = ""
    """``capacity-block`` for a capacity block's template."""


class UnexpectedInstanceTypeError(CreateError):
    """CreateFleet launched an instance of a type none of its overrides named; the
    instance exists and must be terminated by whoever catches this."""

    def __init__(self, message: str, *, instance_id: str) -> None:
        super().__init__(message, reason="UnexpectedInstanceType")
        self.instance_id = instance_id


@dataclass(frozen=True, slots=True)
class Override:
    """One (instance type, zone) the fleet may launch, with its subnet, AMI and price."""

    instance_type: InstanceType
    offering: Offering
    subnet_id: str
    image_id: str
    #: EFA interfaces to attach (the type's count when the NodeClaim requests EFA)
    efa_count: int = 0

    @property
    def key(self) -> OfferingKey:
        """The offering this override launches."""
        return OfferingKey(self.instance_type.name, self.offering.zone, self.offering.capacity_type)

    @property
    def max_pods(self) -> int:
        """The kubelet's maxPods on this instance type (its pod capacity: the ENI limit
        less reservedENIs, or kubelet.maxPods/podsPerCore)."""
        return int(self.instance_type.capacity.get(res.PODS, 0))

    @property
    def template(self) -> TemplateKey:
        """The launch template this override launches with."""
        o = self.offering
        if not o.reserved:
            return TemplateKey(self.image_id, self.max_pods, self.efa_count)
        block = _requirement_value(o.requirements, aws.LABEL_CAPACITY_RESERVATION_TYPE)
        return TemplateKey(
            self.image_id,
            self.max_pods,
            self.efa_count,
            o.reservation_id,
            "capacity-block" if block == "capacity-block" else "",
        )


@dataclass(frozen=True, slots=True)
class FleetPlan:
    """What one CreateFleet call asks for."""

    capacity_type: str
    overrides: tuple[Override, ...]
    #: a NodeOverlay priced the NodeClaim: the overrides are in launch order and EC2 is
    #: asked to follow it (see :func:`allocation`)
    prioritized: bool = False

    def templates(self) -> list[TemplateKey]:
        """The distinct launch templates, in first-use order (one config each)."""
        seen: dict[TemplateKey, None] = {}
        for o in self.overrides:
            seen.setdefault(o.template, None)
        return list(seen)


def _parsed_amis(amis: Sequence[AMI]) -> list[tuple[str, Requirements]]:
    """Each AMI's ID and requirements, parsed once per plan (not once per type)."""
    return [
        (ami.id, Requirements(Requirement.from_dict(r.to_dict()) for r in ami.requirements))
        for ami in amis
    ]


def _ami_for(instance_type: InstanceType, amis: Sequence[tuple[str, Requirements]]) -> str | None:
    """The first AMI (status order) whose requirements the instance type meets."""
    for ami, reqs in amis:
        if instance_type.requirements.intersects(reqs) is None:
            return ami
    return None


def _requirement_value(reqs: Requirements, key: str) -> str:
    """The single value ``reqs`` has for ``key`` (empty when none or several)."""
    return reqs.labels().get(key, "")


#: reserved launches keep one kind of reservation, in this order (Karpenter's
#: CapacityReservationTypeFilter): default ODCRs, capacity blocks, interruptible ODCRs
_RESERVATION_KIND_ORDER = (("default", "false"), ("capacity-block", "false"), ("default", "true"))


def _reservation_kind(offering: Offering) -> tuple[str, str]:
    return (
        _requirement_value(offering.requirements, aws.LABEL_CAPACITY_RESERVATION_TYPE),
        _requirement_value(offering.requirements, aws.LABEL_CAPACITY_RESERVATION_INTERRUPTIBLE),
    )


def _reserved_kind(
    reqs: Requirements, compatible: Sequence[InstanceType]
) -> tuple[str, str] | None:
    """The kind of reservation a reserved launch uses: the first, in Karpenter's order,
    of which some compatible offering is available; None when none is."""
    allowed = reqs.get(wk.LABEL_CAPACITY_TYPE)
    if allowed is not None and not allowed.has(wk.CAPACITY_TYPE_RESERVED):
        return None
    kinds = {
        _reservation_kind(o)
        for it in compatible
        for o in it.offerings
        if o.reserved and o.available and reqs.intersects(o.requirements) is None
    }
    return next((k for k in _RESERVATION_KIND_ORDER if k in kinds), None)


def _capacity_type(
    reqs: Requirements,
    compatible: Sequence[InstanceType],
    unavailable: UnavailableOfferings,
    spot_cap: float | None,
) -> str:
    if _reserved_kind(reqs, compatible) is not None:
        return wk.CAPACITY_TYPE_RESERVED
    allowed = reqs.get(wk.LABEL_CAPACITY_TYPE)
    if allowed is None or allowed.has(wk.CAPACITY_TYPE_SPOT):
        for it in compatible:
            for o in it.offerings:
                if (
                    o.available
                    and o.capacity_type == wk.CAPACITY_TYPE_SPOT
                    and (spot_cap is None or o.price <= spot_cap)
                    and reqs.intersects(o.requirements) is None
                    and not unavailable.is_unavailable(
                        OfferingKey(it.name, o.zone, o.capacity_type)
                    )
                ):
                    return wk.CAPACITY_TYPE_SPOT
    return wk.CAPACITY_TYPE_ON_DEMAND


def plan_fleet(
    nodeclaim: NodeClaim,
    node_class: EC2NodeClass,
    instance_types: Sequence[InstanceType],
    unavailable: UnavailableOfferings,
) -> FleetPlan:
    """Choose the capacity type and overrides for ``nodeclaim`` (pure; see module doc).

    Raises InsufficientCapacityError when nothing is left to ask for.
    """
    reqs = nodeclaim_requirements(nodeclaim)
    requests = nodeclaim_requests(nodeclaim)
    compatible = exotic_filter(
        reqs,
        [
            it
            for it in instance_types
            if reqs.intersects(it.requirements) is None and res.fits(requests, it.allocatable)
        ],
    )
    spot_cap = spot_price_cap(reqs, compatible)
    capacity_type = _capacity_type(reqs, compatible, unavailable, spot_cap)
    wants_efa = requests.get(aws.RESOURCE_EFA, 0) > 0
    subnets: dict[str, str] = {}
    full: list[str] = []
    for subnet in node_class.status.subnets:  # status order: most free addresses first
        if unavailable.is_subnet_unavailable(subnet.id):
            full.append(subnet.id)
            continue
        subnets.setdefault(subnet.zone, subnet.id)
    prioritized = ANNOTATION_PRICE_OVERLAY_APPLIED in nodeclaim.metadata.annotations
    order = overlay_order(nodeclaim)
    candidates: list[tuple[int, float, str, str, Override]] = []
    refused: list[OfferingKey] = []
    amis = _parsed_amis(node_class.status.amis)
    kind = _reserved_kind(reqs, compatible) if capacity_type == wk.CAPACITY_TYPE_RESERVED else None
    #: (type, zone) -> the reservation a reserved launch uses there: the one with the
    #: most instances left (Karpenter's ReservedOfferingFilter; the fleet's overrides
    #: name a type and zone, not a reservation)
    best: dict[tuple[str, str], Offering] = {}
    if kind is not None:
        for it in compatible:
            for o in it.offerings:
                if (
                    o.reserved
                    and o.available
                    and _reservation_kind(o) == kind
                    and reqs.intersects(o.requirements) is None
                ):
                    current = best.get((it.name, o.zone))
                    if current is None or o.reservation_capacity > current.reservation_capacity:
                        best[(it.name, o.zone)] = o
    for it in compatible:
        image = _ami_for(it, amis)
        if image is None:
            continue
        efa = it.capacity.get(aws.RESOURCE_EFA, 0) if wants_efa else 0
        for o in it.offerings:
            if o.capacity_type != capacity_type or not o.available:
                continue
            if reqs.intersects(o.requirements) is not None or o.zone not in subnets:
                continue
            if spot_cap is not None and o.capacity_type == wk.CAPACITY_TYPE_SPOT and (
                o.price > spot_cap
            ):
                continue
            if o.reserved and best.get((it.name, o.zone)) is not o:
                continue
            key = OfferingKey(it.name, o.zone, o.capacity_type)
            if not o.reserved and unavailable.is_unavailable(key):
                refused.append(key)
                continue
            override = Override(it, o, subnets[o.zone], image, efa)
            rank = order.get(it.name, len(order))
            candidates.append((rank, o.price, it.name, o.zone, override))
    candidates.sort(key=lambda c: c[:4])
    chosen_types: list[str] = []
    overrides: list[Override] = []
    for _, _, name, _, override in candidates:
        if name not in chosen_types:
            if len(chosen_types) == MAX_INSTANCE_TYPES:
                continue
            chosen_types.append(name)
        overrides.append(override)
    if not overrides:
        if refused:
            raise InsufficientCapacityError(
                f"insufficient capacity for nodeclaim {nodeclaim.metadata.name}: every "
                f"compatible {capacity_type} offering is out of capacity "
                f"({', '.join(map(str, refused[:5]))}{' ...' if len(refused) > 5 else ''})",
                offerings=refused,
            )
        raise InsufficientCapacityError(
            f"no instance type can launch nodeclaim {nodeclaim.metadata.name} with "
            f"EC2NodeClass {node_class.metadata.name}: {len(compatible)} of "
            f"{len(instance_types)} instance types match the requirements ({reqs}) and "
            f"requests ({res.describe(requests)}), none with an available {capacity_type} "
            "offering in a zone of the NodeClass's subnets and a matching AMI"
            + (f" (subnets out of free addresses: {', '.join(full)})" if full else "")
        )
    return FleetPlan(
        capacity_type=capacity_type, overrides=tuple(overrides), prioritized=prioritized
    )


class PlanCache:
    """Plans of the last few NodeClaim shapes, reused while nothing they depend on has
    changed: a burst of identical NodeClaims is planned once instead of once each
    (planning scans every instance type, tens of milliseconds for the full catalogue).

    An entry holds for ``ttl`` seconds at most and only while the instance-type list is
    the same object (the catalogue rebuilds it when prices or offerings change), the
    unavailable cache's generation is the same, and the class's subnets and AMIs are.
    """

    def __init__(self, *, size: int = 32, ttl: float = 10.0) -> None:
        self._size = size
        self._ttl = ttl
        self._entries: dict[tuple[object, ...], tuple[float, Sequence[InstanceType], FleetPlan]]
        self._entries = {}

    def plan(
        self,
        nodeclaim: NodeClaim,
        node_class: EC2NodeClass,
        instance_types: Sequence[InstanceType],
        unavailable: UnavailableOfferings,
        *,
        now: float,
    ) -> FleetPlan:
        """:func:`plan_fleet`, from the cache when an equal plan is fresh."""
        status = node_class.status
        key: tuple[object, ...] = (
            nodeclaim_requirements(nodeclaim),
            tuple(sorted(nodeclaim_requests(nodeclaim).items())),
            ANNOTATION_PRICE_OVERLAY_APPLIED in nodeclaim.metadata.annotations,
            tuple(overlay_order(nodeclaim)),
            unavailable.generation,
            tuple((s.id, s.zone) for s in status.subnets),
            tuple((a.id, repr([r.to_dict() for r in a.requirements])) for a in status.amis),
        )
        hit = self._entries.get(key)
        if hit is not None and hit[1] is instance_types and now - hit[0] < self._ttl:
            return hit[2]
        plan = plan_fleet(nodeclaim, node_class, instance_types, unavailable)
        if len(self._entries) >= self._size:
            self._entries.pop(next(iter(self._entries)))
        self._entries[key] = (now, instance_types, plan)
        return plan


def fleet_request(
    plan: FleetPlan,
    templates: Mapping[TemplateKey, str],
    tags: Mapping[str, str],
    *,
    context: str | None = None,
) -> dict[str, Any]:
    """The CreateFleet input for ``plan`` (one instance; the batcher raises the target
    when it merges requests); ``templates`` maps each template key to its name;
    ``context`` is the EC2NodeClass's ``context`` (EC2 Fleet's reserved ``Context``)."""
    configs = []
    priorities = override_priorities(plan)
    for template in plan.templates():
        configs.append(
            {
                "LaunchTemplateSpecification": {
                    "LaunchTemplateName": templates[template],
                    "Version": "$Latest",
                },
                "Overrides": [
                    {
                        "InstanceType": o.instance_type.name,
                        "SubnetId": o.subnet_id,
                        "ImageId": o.image_id,
                        "AvailabilityZone": o.offering.zone,
                        "Priority": priority,
                    }
                    for o, priority in zip(plan.overrides, priorities, strict=True)
                    if o.template == template
                ],
            }
        )
    tag_list = [{"Key": k, "Value": v} for k, v in tags.items()]
    request: dict[str, Any] = {
        "Type": "instant",
        "LaunchTemplateConfigs": configs,
        "TargetCapacitySpecification": {
            "TotalTargetCapacity": 1,
            "DefaultTargetCapacityType": target_capacity_type(plan),
        },
        "TagSpecifications": [
            {"ResourceType": "instance", "Tags": tag_list},
            {"ResourceType": "volume", "Tags": tag_list},
            {"ResourceType": "fleet", "Tags": tag_list},
        ],
    }
    if context:
        request["Context"] = context
    strategy = allocation(plan)
    target = request["TargetCapacitySpecification"]
    if plan.capacity_type == wk.CAPACITY_TYPE_SPOT:
        request["SpotOptions"] = {"AllocationStrategy": strategy}
    elif target["DefaultTargetCapacityType"] == wk.CAPACITY_TYPE_ON_DEMAND:
        request["OnDemandOptions"] = {"AllocationStrategy": strategy}
    return request


def target_capacity_type(plan: FleetPlan) -> str:
    """The fleet's ``DefaultTargetCapacityType``: the plan's capacity type, except that
    a reserved launch asks for ``on-demand`` capacity (the launch template targets the
    reservation), or ``capacity-block`` when it launches into capacity blocks."""
    if plan.capacity_type != wk.CAPACITY_TYPE_RESERVED:
        return plan.capacity_type
    if any(o.template.market_type == "capacity-block" for o in plan.overrides):
        return "capacity-block"
    return wk.CAPACITY_TYPE_ON_DEMAND


def allocation(plan: FleetPlan) -> str:
    """The fleet's allocation strategy, as Karpenter AWS's CreateFleetInputBuilder picks
    it: by price (``lowest-price`` on-demand, ``price-capacity-optimized`` spot) unless a
    NodeOverlay priced the NodeClaim, whose prices EC2 does not know: then by the
    overrides' ``Priority`` (``prioritized``, ``capacity-optimized-prioritized``)."""
    spot = plan.capacity_type == wk.CAPACITY_TYPE_SPOT
    if plan.prioritized:
        return "capacity-optimized-prioritized" if spot else "prioritized"
    return "price-capacity-optimized" if spot else "lowest-price"


def fleet_context(nodeclaim: NodeClaim, node_class: EC2NodeClass) -> str | None:
    """The fleet's ``Context`` (the EC2NodeClass's ``context``), left out for a NodeClaim
    whose minValues were relaxed (``karpenter.sh/nodeclaim-min-values-relaxed: "true"``,
    MIN_VALUES_POLICY=BestEffort), as Karpenter AWS leaves it out."""
    if nodeclaim.metadata.annotations.get(ANNOTATION_NODECLAIM_MIN_VALUES_RELAXED) == "true":
        return None
    return node_class.spec.context


def override_priorities(plan: FleetPlan) -> list[float]:
    """Each override's ``Priority`` (lower launches first): its cloud price (which EC2's
    price strategies ignore), or, when the plan is prioritized, its rank in the plan's
    order: the NodeClaim's listed instance types, then the cloud's price."""
    if plan.prioritized:
        return [float(i) for i in range(len(plan.overrides))]
    return [float(o.offering.price) for o in plan.overrides]


@dataclass(frozen=True, slots=True)
class FleetOutcome:
    """The instance a CreateFleet call launched and the override it used."""

    instance_id: str
    override: Override


def fleet_outcome(
    nodeclaim: NodeClaim,
    plan: FleetPlan,
    response: Mapping[str, Any],
    unavailable: UnavailableOfferings,
    reservations: CapacityReservations | None = None,
) -> FleetOutcome:
    """Read CreateFleet's answer: mark refused offerings unavailable (in a reserved
    launch, their reservations out of slots in ``reservations``) and return the
    launched instance, or raise InsufficientCapacityError / CreateError."""
    by_key = {(o.instance_type.name, o.offering.zone): o for o in plan.overrides}
    by_type_subnet = {(o.instance_type.name, o.subnet_id): o for o in plan.overrides}
    marked: list[OfferingKey] = []
    reserved_refused = False
    codes: set[str] = set()
    messages: set[str] = set()
    for error in response.get("Errors", []):
        code = str(error.get("ErrorCode", ""))
        codes.add(code)
        messages.add(f"{code}: {error.get('ErrorMessage', '')}")
        overrides = (error.get("LaunchTemplateAndOverrides") or {}).get("Overrides") or {}
        if code == SPOT_SERVICE_LINKED_ROLE_CODE:
            unavailable.mark_capacity_type(wk.CAPACITY_TYPE_SPOT)
            continue
        if code == SUBNET_FULL_CODE and overrides.get("SubnetId"):
            # the subnet is out of addresses, not the zone out of capacity
            unavailable.mark_subnet(str(overrides["SubnetId"]))
            continue
        if not is_unfulfillable_capacity(code):
            continue
        name = overrides.get("InstanceType", "")
        zone = overrides.get("AvailabilityZone")
        override = (
            by_key.get((name, zone))
            if zone
            else by_type_subnet.get((name, overrides.get("SubnetId", "")))
        )
        if override is None:
            continue
        if override.offering.reserved:
            # the reservation is full (or gone), not the zone out of this type: the core
            # must not mark the type's other offerings unavailable
            log.debug(
                "marking capacity reservation unavailable",
                extra={
                    "reason": code,
                    "instance-type": override.instance_type.name,
                    "zone": override.offering.zone,
                    "capacity-reservation-id": override.offering.reservation_id,
                },
            )
            if reservations is not None:
                reservations.mark_unavailable(override.offering.reservation_id)
            reserved_refused = True
            continue
        unavailable.mark(override.key, reason=code)
        marked.append(override.key)
    for launched in response.get("Instances", []):
        ids = launched.get("InstanceIds") or []
        if not ids:
            continue
        overrides = (launched.get("LaunchTemplateAndOverrides") or {}).get("Overrides") or {}
        name = launched.get("InstanceType") or overrides.get("InstanceType", "")
        zone = overrides.get("AvailabilityZone")
        override = (
            by_key.get((name, zone))
            if zone
            else by_type_subnet.get((name, overrides.get("SubnetId", "")))
        )
        if override is None:  # the zone or subnet is not one we named: the type's first
            override = next((o for o in plan.overrides if o.instance_type.name == name), None)
        if override is None:
            raise UnexpectedInstanceTypeError(
                f"creating fleet for nodeclaim {nodeclaim.metadata.name}: EC2 launched "
                f"instance {ids[0]} of type {name!r}, which none of the fleet's overrides "
                "named; it is being terminated",
                instance_id=str(ids[0]),
            )
        return FleetOutcome(instance_id=str(ids[0]), override=override)
    detail = "; ".join(sorted(messages)) or "CreateFleet launched no instance and gave no reason"
    if marked or reserved_refused or (codes and all(is_unfulfillable_capacity(c) for c in codes)):
        raise InsufficientCapacityError(
            f"insufficient capacity for nodeclaim {nodeclaim.metadata.name}: {detail}",
            offerings=marked,
        )
    raise CreateError(
        f"creating fleet for nodeclaim {nodeclaim.metadata.name}: {detail}",
        reason="FleetLaunchFailed",
    )
