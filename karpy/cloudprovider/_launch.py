"""Choosing what to launch for a NodeClaim, and describing the launched NodeClaim.

Every provider answers the same two questions in ``create``: which instance type and
offering satisfy the NodeClaim (requirements, requests, availability), and which labels
and resources the launched NodeClaim reports. These helpers answer them the way
Karpenter's providers do, so that a provider only adds what is specific to its cloud.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from karpy.apis import NodeClaim
from karpy.apis.annotations import ANNOTATION_PRICE_OVERLAY_APPLIED
from karpy.apis.labels import LABEL_INSTANCE_TYPE
from karpy.cloudprovider._types import OfferingKey
from karpy.cloudprovider.errors import InsufficientCapacityError
from karpy.scheduling import InstanceType, Offering, Requirement, Requirements
from karpy.scheduling import resources as res


def offering_key(instance_type: InstanceType, offering: Offering) -> OfferingKey:
    """The key naming ``offering`` of ``instance_type``."""
    return OfferingKey(instance_type.name, offering.zone, offering.capacity_type)


def nodeclaim_requirements(nodeclaim: NodeClaim) -> Requirements:
    """The NodeClaim's ``spec.requirements`` as a :class:`Requirements` value."""
    return Requirements(
        Requirement.new(r.key, r.operator, r.values, r.min_values)
        for r in nodeclaim.spec.requirements
    )


def nodeclaim_requests(nodeclaim: NodeClaim) -> res.ResourceList:
    """The NodeClaim's ``spec.resources.requests`` in canonical units."""
    return res.parse_resource_list(nodeclaim.spec.resources.requests)


@dataclass(frozen=True, slots=True)
class LaunchChoice:
    """The instance type and offering chosen for a NodeClaim."""

    instance_type: InstanceType
    offering: Offering

    @property
    def key(self) -> OfferingKey:
        """The chosen offering's key."""
        return offering_key(self.instance_type, self.offering)


def _never(_: OfferingKey) -> bool:
    return False


def choose_launch(
    nodeclaim: NodeClaim,
    instance_types: Sequence[InstanceType],
    *,
    refuse: Callable[[OfferingKey], bool] = _never,
) -> LaunchChoice:
    """The cheapest available offering, of an instance type compatible with the
    NodeClaim's requirements whose allocatable fits its requests.

    A NodeClaim priced by a NodeOverlay (``karpenter.sh/price-overlay-applied``) ranks
    its instance types in the order it lists them first (the overlaid prices, cheapest
    first). ``refuse`` names offerings the cloud has no capacity for right now. Ties in price go
    to the smaller name, zone and capacity type, so the choice is deterministic.

    Raises InsufficientCapacityError: carrying the refused offerings when they were all
    that was left, and with no offerings (and a message saying what ruled the instance
    types out) when nothing is compatible at all.
    """
    reqs = nodeclaim_requirements(nodeclaim)
    requests = nodeclaim_requests(nodeclaim)
    priority = overlay_order(nodeclaim)
    best: tuple[int, float, str, str, str] | None = None
    choice: LaunchChoice | None = None
    refused: list[OfferingKey] = []
    incompatible = too_small = unavailable = 0
    for it in instance_types:
        if reqs.intersects(it.requirements) is not None:
            incompatible += 1
            continue
        if not res.fits(requests, it.allocatable):
            too_small += 1
            continue
        found = False
        for offering in it.offerings:
            if not offering.available or reqs.intersects(offering.requirements) is not None:
                continue
            key = offering_key(it, offering)
            if refuse(key):
                refused.append(key)
                continue
            found = True
            rank = (priority.get(it.name, 0), offering.price, it.name, offering.zone,
                    offering.capacity_type)
            if best is None or rank < best:
                best, choice = rank, LaunchChoice(it, offering)
        if not found:
            unavailable += 1
    if choice is not None:
        return choice
    if refused:
        raise InsufficientCapacityError(
            f"insufficient capacity for nodeclaim {nodeclaim.metadata.name}: every "
            f"compatible offering is out of capacity ({', '.join(map(str, refused[:5]))}"
            f"{' ...' if len(refused) > 5 else ''})",
            offerings=refused,
        )
    raise InsufficientCapacityError(
        f"no instance type can launch nodeclaim {nodeclaim.metadata.name}: of "
        f"{len(instance_types)} instance types, {incompatible} do not match the "
        f"requirements ({reqs}), {too_small} are too small for the requests "
        f"({res.describe(requests)}) and {unavailable} have no available offering that "
        "matches"
    )


def overlay_order(nodeclaim: NodeClaim) -> dict[str, int]:
    """The launch rank of each instance type the NodeClaim lists, when a NodeOverlay
    priced it (``karpenter.sh/price-overlay-applied`` set; Karpenter's providers test the
    key's presence): the core lists them cheapest first at the overlay's prices, which
    the cloud does not know, so their order ranks before the cloud's price (Karpenter's
    providers launch such a NodeClaim prioritized). Empty otherwise, or when the
    NodeClaim lists no instance types."""
    if ANNOTATION_PRICE_OVERLAY_APPLIED not in nodeclaim.metadata.annotations:
        return {}
    for r in nodeclaim.spec.requirements:
        if r.key == LABEL_INSTANCE_TYPE and r.operator == "In":
            return {name: i for i, name in enumerate(r.values)}
    return {}


def launched_labels(nodeclaim: NodeClaim, choice: LaunchChoice) -> dict[str, str]:
    """The labels of the launched NodeClaim (and its Node).

    In increasing precedence: the NodeClaim's labels, its single-valued requirements,
    then what the launch resolved: the instance type's single-valued labels (name,
    architecture, OS, provider labels) and the offering's (zone, capacity type).
    """
    labels = dict(nodeclaim.metadata.labels)
    labels.update(nodeclaim_requirements(nodeclaim).labels())
    labels.update(choice.instance_type.requirements.labels())
    labels.update(choice.offering.requirements.labels())
    return labels


def launched_nodeclaim(
    nodeclaim: NodeClaim,
    choice: LaunchChoice,
    *,
    provider_id: str,
    labels: dict[str, str] | None = None,
    image_id: str | None = None,
) -> NodeClaim:
    """A copy of ``nodeclaim`` as launched: resolved labels, ``status.providerID``,
    capacity and allocatable of the chosen instance type."""
    launched = nodeclaim.model_copy(deep=True)
    launched.metadata.labels = labels if labels is not None else launched_labels(nodeclaim, choice)
    launched.status.provider_id = provider_id
    launched.status.capacity = dict(res.format_resource_list(choice.instance_type.capacity))
    launched.status.allocatable = dict(
        res.format_resource_list(choice.instance_type.allocatable)
    )
    if image_id is not None:
        launched.status.image_id = image_id
    return launched
