"""Launching one instance for a NodeClaim with CreateFleet (type ``instant``), as
Karpenter AWS does (pkg/providers/instance/instance.go):

1. capacity type: spot if the NodeClaim allows it and some compatible spot offering is
   available, else on-demand;
2. overrides: every available offering of that capacity type, of every instance type
   compatible with the NodeClaim that fits its requests, cheapest first (at most 60
   types, Karpenter's cap), each with its zone's subnet and the AMI for its
   architecture/accelerator (``ImageId`` in the override), grouped into one launch
   template config per AMI and max-pods value (the kubelet's maxPods is the instance
   type's pod capacity, written into the template's user data, as Karpenter groups
   its launch templates);
3. ``lowest-price`` for on-demand, ``price-capacity-optimized`` for spot;
4. the fleet's per-override errors with an insufficient-capacity code mark those
   offerings unavailable in the provider's cache; no instance at all raises
   InsufficientCapacityError naming them (or CreateError for other codes).

karpy sends one CreateFleet per NodeClaim; it does not batch them as Karpenter's
CreateFleet batcher does (see docs/providers/aws.md).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from karpy.apis import NodeClaim
from karpy.apis import labels as wk
from karpy.cloudprovider import (
    CreateError,
    InstanceType,
    InsufficientCapacityError,
    Offering,
    OfferingKey,
)
from karpy.cloudprovider.launch import nodeclaim_requests, nodeclaim_requirements
from karpy.scheduling import Requirement, Requirements
from karpy.scheduling import resources as res
from karpy_aws._errors import SPOT_SERVICE_LINKED_ROLE_CODE, is_unfulfillable_capacity
from karpy_aws._unavailable import UnavailableOfferings
from karpy_aws.apis.ec2nodeclass import AMI, EC2NodeClass

__all__ = [
    "MAX_INSTANCE_TYPES",
    "FleetPlan",
    "Override",
    "TemplateKey",
    "fleet_outcome",
    "fleet_request",
    "plan_fleet",
]

log = logging.getLogger("karpy.aws.instance")

MAX_INSTANCE_TYPES = 60

TemplateKey = tuple[str, int]
"""What distinguishes the launch templates of one launch: (AMI, the kubelet's maxPods)."""


@dataclass(frozen=True, slots=True)
class Override:
    """One (instance type, zone) the fleet may launch, with its subnet, AMI and price."""

    instance_type: InstanceType
    offering: Offering
    subnet_id: str
    image_id: str

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
    def template_key(self) -> TemplateKey:
        """The launch template this override uses."""
        return (self.image_id, self.max_pods)


@dataclass(frozen=True, slots=True)
class FleetPlan:
    """What one CreateFleet call asks for."""

    capacity_type: str
    overrides: tuple[Override, ...]

    def images(self) -> list[str]:
        """The distinct AMIs, in first-use order."""
        seen: dict[str, None] = {}
        for o in self.overrides:
            seen.setdefault(o.image_id, None)
        return list(seen)

    def template_keys(self) -> list[TemplateKey]:
        """The distinct (AMI, maxPods), in first-use order (one launch template config
        each)."""
        seen: dict[TemplateKey, None] = {}
        for o in self.overrides:
            seen.setdefault(o.template_key, None)
        return list(seen)


def _ami_for(instance_type: InstanceType, amis: Sequence[AMI]) -> str | None:
    """The first AMI (status order) whose requirements the instance type meets."""
    for ami in amis:
        reqs = Requirements(Requirement.from_dict(r.to_dict()) for r in ami.requirements)
        if instance_type.requirements.intersects(reqs) is None:
            return ami.id
    return None


def _capacity_type(
    reqs: Requirements, compatible: Sequence[InstanceType], unavailable: UnavailableOfferings
) -> str:
    allowed = reqs.get(wk.LABEL_CAPACITY_TYPE)
    if allowed is None or allowed.has(wk.CAPACITY_TYPE_SPOT):
        for it in compatible:
            for o in it.offerings:
                if (
                    o.available
                    and o.capacity_type == wk.CAPACITY_TYPE_SPOT
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
    compatible = [
        it
        for it in instance_types
        if reqs.intersects(it.requirements) is None and res.fits(requests, it.allocatable)
    ]
    capacity_type = _capacity_type(reqs, compatible, unavailable)
    subnets: dict[str, str] = {}
    for subnet in node_class.status.subnets:  # status order: most free addresses first
        subnets.setdefault(subnet.zone, subnet.id)
    candidates: list[tuple[float, str, str, Override]] = []
    refused: list[OfferingKey] = []
    for it in compatible:
        image = _ami_for(it, node_class.status.amis)
        if image is None:
            continue
        for o in it.offerings:
            if o.capacity_type != capacity_type or not o.available:
                continue
            if reqs.intersects(o.requirements) is not None or o.zone not in subnets:
                continue
            key = OfferingKey(it.name, o.zone, o.capacity_type)
            if unavailable.is_unavailable(key):
                refused.append(key)
                continue
            candidates.append((o.price, it.name, o.zone, Override(it, o, subnets[o.zone], image)))
    candidates.sort(key=lambda c: c[:3])
    chosen_types: list[str] = []
    overrides: list[Override] = []
    for _, name, _, override in candidates:
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
        )
    return FleetPlan(capacity_type=capacity_type, overrides=tuple(overrides))


def fleet_request(
    plan: FleetPlan, templates: Mapping[TemplateKey, str], tags: Mapping[str, str]
) -> dict[str, Any]:
    """The CreateFleet input for ``plan``; ``templates`` maps each of
    :meth:`FleetPlan.template_keys` to its launch template's name."""
    configs = []
    for key in plan.template_keys():
        configs.append(
            {
                "LaunchTemplateSpecification": {
                    "LaunchTemplateName": templates[key],
                    "Version": "$Latest",
                },
                "Overrides": [
                    {
                        "InstanceType": o.instance_type.name,
                        "SubnetId": o.subnet_id,
                        "ImageId": o.image_id,
                        "AvailabilityZone": o.offering.zone,
                        "Priority": float(o.offering.price),
                    }
                    for o in plan.overrides
                    if o.template_key == key
                ],
            }
        )
    tag_list = [{"Key": k, "Value": v} for k, v in tags.items()]
    request: dict[str, Any] = {
        "Type": "instant",
        "LaunchTemplateConfigs": configs,
        "TargetCapacitySpecification": {
            "TotalTargetCapacity": 1,
            "DefaultTargetCapacityType": plan.capacity_type,
        },
        "TagSpecifications": [
            {"ResourceType": "instance", "Tags": tag_list},
            {"ResourceType": "volume", "Tags": tag_list},
            {"ResourceType": "fleet", "Tags": tag_list},
        ],
    }
    if plan.capacity_type == wk.CAPACITY_TYPE_SPOT:
        request["SpotOptions"] = {"AllocationStrategy": "price-capacity-optimized"}
    else:
        request["OnDemandOptions"] = {"AllocationStrategy": "lowest-price"}
    return request


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
) -> FleetOutcome:
    """Read CreateFleet's answer: mark refused offerings unavailable and return the
    launched instance, or raise InsufficientCapacityError / CreateError."""
    by_key = {(o.instance_type.name, o.offering.zone): o for o in plan.overrides}
    by_type_subnet = {(o.instance_type.name, o.subnet_id): o for o in plan.overrides}
    marked: list[OfferingKey] = []
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
        if override is None:  # the fleet chose something we did not ask for: take the type's first
            override = next(o for o in plan.overrides if o.instance_type.name == name)
        return FleetOutcome(instance_id=str(ids[0]), override=override)
    detail = "; ".join(sorted(messages)) or "CreateFleet launched no instance and gave no reason"
    if marked or (codes and all(is_unfulfillable_capacity(c) for c in codes)):
        raise InsufficientCapacityError(
            f"insufficient capacity for nodeclaim {nodeclaim.metadata.name}: {detail}",
            offerings=marked,
        )
    raise CreateError(
        f"creating fleet for nodeclaim {nodeclaim.metadata.name}: {detail}",
        reason="FleetLaunchFailed",
    )
