"""NodeOverlays applied to a NodePool's instance types: pure, so the provisioner, the
disruption simulator, ``karpy simulate`` and ``karpy explain`` all see one catalogue.

Karpenter's semantics (pkg/controllers/nodeoverlay): an overlay selects an instance type
when the type's requirements, plus the NodePool's name and template labels, are
compatible with the overlay's requirements, and then those of its offerings that are
compatible too. Overlays apply in :func:`order` (weight descending, then name
descending); per offering the first overlay that sets a price wins, per extended
resource the first that sets it wins. Two overlays of the same weight that both price
one offering, or both set one resource of one instance type, conflict: the one later in
that order is not applied at all (:func:`evaluate`), and reports so on its status.

A price is ``price`` (absolute) or ``priceAdjustment`` (``+0.5``, ``-0.2``, ``+10%``,
``-15%``); an adjusted price never goes below 0.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from karpy.apis.labels import LABEL_NODEPOOL
from karpy.apis.v1alpha1 import NodeOverlay
from karpy.scheduling import resources as res
from karpy.scheduling.instancetype import InstanceType, Offering
from karpy.scheduling.requirements import Requirement, Requirements

__all__ = [
    "Overlay",
    "PoolTypes",
    "adjusted_price",
    "apply_overlays",
    "evaluate",
    "order",
]


@dataclass(frozen=True, slots=True)
class Overlay:
    """A parsed NodeOverlay: what it selects and what it changes."""

    name: str
    requirements: Requirements
    weight: int = 0
    price: str | None = None
    """``price`` or ``priceAdjustment`` as written (the CRD allows only one)."""
    capacity: Mapping[str, int] = field(default_factory=dict)
    """Extended resources to add, canonical amounts."""

    @classmethod
    def from_model(cls, overlay: NodeOverlay) -> Overlay:
        """From the API model. Raises ValueError naming the field for a requirement or
        quantity the schema let through but that cannot be read."""
        spec = overlay.spec
        name = overlay.metadata.name or ""
        requirements = []
        for i, r in enumerate(spec.requirements):
            try:
                requirements.append(Requirement.new(r.key, r.operator, r.values))
            except ValueError as err:
                raise ValueError(f"spec.requirements[{i}]: {err}") from err
        try:
            capacity = res.parse_resource_list(spec.capacity)
        except ValueError as err:
            raise ValueError(f"spec.capacity: {err}") from err
        return cls(
            name=name,
            requirements=Requirements(requirements),
            weight=spec.weight or 0,
            price=spec.price if spec.price is not None else spec.price_adjustment,
            capacity=capacity,
        )


def order(overlays: Iterable[Overlay]) -> list[Overlay]:
    """Precedence order: higher weight first, equal weights by name descending
    (Karpenter's OrderByWeight)."""
    by_name = sorted(overlays, key=lambda o: o.name, reverse=True)
    return sorted(by_name, key=lambda o: -o.weight)  # stable: names stay descending


def adjusted_price(price: float, change: str | None) -> float:
    """``price`` changed by ``change``: an absolute price, a signed amount or a signed
    percentage; never below 0."""
    if not change:
        return price
    if change[0] not in "+-":
        return float(change)
    if change.endswith("%"):
        adjusted = price * (1 + float(change[:-1]) / 100)
    else:
        adjusted = price + float(change)
    return max(adjusted, 0.0)


@dataclass(frozen=True, slots=True)
class PoolTypes:
    """One NodePool's instance types and what overlays select them by."""

    nodepool: str
    labels: Mapping[str, str]
    instance_types: Sequence[InstanceType]


def _selected(
    overlay: Overlay, pool: PoolTypes, it: InstanceType
) -> tuple[Offering, ...]:
    """The offerings of ``it`` that ``overlay`` selects (none: it does not select it)."""
    type_reqs = it.requirements.add(
        Requirement.new(LABEL_NODEPOOL, "In", (pool.nodepool,)),
        *(Requirement.new(k, "In", (v,)) for k, v in pool.labels.items()),
    )
    if type_reqs.compatible(overlay.requirements) is not None:
        return ()
    return tuple(
        o for o in it.offerings if overlay.requirements.intersects(o.requirements) is None
    )


@dataclass(slots=True)
class _Claims:
    """Who set what so far, per NodePool and instance type: the weights that priced each
    offering and the weights that set each resource."""

    prices: dict[tuple[str, str, Requirements], set[int]] = field(default_factory=dict)
    resources: dict[tuple[str, str, str], set[int]] = field(default_factory=dict)


def evaluate(
    overlays: Iterable[Overlay], pools: Sequence[PoolTypes]
) -> tuple[list[Overlay], dict[str, str]]:
    """Which overlays apply, in precedence order, and why each other one does not
    (name -> message): Karpenter's conflict rule (see the module docstring)."""
    applied: list[Overlay] = []
    conflicts: dict[str, str] = {}
    claims = _Claims()
    for overlay in order(overlays):
        touched_prices: list[tuple[str, str, Requirements]] = []
        touched_resources: list[tuple[str, str, str]] = []
        conflict: str | None = None
        for pool in pools:
            for it in pool.instance_types:
                offerings = _selected(overlay, pool, it)
                if not offerings:
                    continue
                if overlay.price is not None:
                    for offering in offerings:
                        key = (pool.nodepool, it.name, offering.requirements)
                        if overlay.weight in claims.prices.get(key, ()):
                            conflict = conflict or (
                                f"conflict with another overlay: the price of {it.name} "
                                f"{offering.zone}/{offering.capacity_type} in NodePool "
                                f"{pool.nodepool} is set by another overlay of weight "
                                f"{overlay.weight}"
                            )
                        touched_prices.append(key)
                for resource in overlay.capacity:
                    rkey = (pool.nodepool, it.name, resource)
                    if overlay.weight in claims.resources.get(rkey, ()):
                        conflict = conflict or (
                            f"conflict with another overlay: {resource} of {it.name} in "
                            f"NodePool {pool.nodepool} is set by another overlay of weight "
                            f"{overlay.weight}"
                        )
                    touched_resources.append(rkey)
        if conflict is not None:
            conflicts[overlay.name] = conflict
            continue
        for key in touched_prices:
            claims.prices.setdefault(key, set()).add(overlay.weight)
        for rkey in touched_resources:
            claims.resources.setdefault(rkey, set()).add(overlay.weight)
        applied.append(overlay)
    return applied, conflicts


def apply_overlays(overlays: Sequence[Overlay], pool: PoolTypes) -> tuple[InstanceType, ...]:
    """``pool``'s instance types with ``overlays`` (in precedence order, conflicts
    already removed by :func:`evaluate`) applied. Types no overlay selects are returned
    as they are; a changed offering names its overlay in ``Offering.overlay`` and a type
    with added capacity lists them in ``InstanceType.capacity_overlays``."""
    if not overlays:
        return tuple(pool.instance_types)
    out = []
    for it in pool.instance_types:
        prices: dict[int, tuple[str, str]] = {}
        capacity: dict[str, int] = {}
        by: list[str] = []
        for overlay in overlays:
            offerings = _selected(overlay, pool, it)
            if not offerings:
                continue
            if overlay.price is not None:
                chosen = {id(o) for o in offerings}
                for index, offering in enumerate(it.offerings):
                    if id(offering) in chosen and index not in prices:
                        prices[index] = (overlay.price, overlay.name)
            added = [r for r in overlay.capacity if r not in capacity]
            for resource in added:
                capacity[resource] = overlay.capacity[resource]
            if added:
                by.append(overlay.name)
        if not prices and not capacity:
            out.append(it)
            continue
        offerings = tuple(
            replace(o, price=adjusted_price(o.price, prices[i][0]), overlay=prices[i][1])
            if i in prices
            else o
            for i, o in enumerate(it.offerings)
        )
        out.append(
            replace(
                it,
                offerings=offerings,
                capacity={**it.capacity, **capacity},
                capacity_overlays=(*it.capacity_overlays, *by),
            )
        )
    return tuple(out)
