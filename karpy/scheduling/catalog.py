"""A NodePool's instance types as bitmasks, so filtering them is integer arithmetic.

Bit ``i`` of a mask stands for the ``i``-th instance type. Everything a NodeClaim asks
of its instance types -- requirements, an available compatible offering, room for the
requests plus DaemonSet overhead, the NodePool's limits -- becomes a mask that is computed
once (and cached by value) and then ANDed: filtering 400 types for a pod costs a few
big-integer operations instead of 400 requirement checks.

Resource fit uses per-resource sorted allocatable values: the types with at least ``x``
of a resource are a precomputed suffix mask found by bisection.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from karpy.scheduling.instancetype import InstanceType, Offering
from karpy.scheduling.pod import HostPort
from karpy.scheduling.requirements import Requirement, Requirements

__all__ = ["Catalog", "DaemonGroup", "iter_bits"]


def iter_bits(mask: int) -> Iterable[int]:
    """The indexes of the set bits, lowest first."""
    while mask:
        low = mask & -mask
        yield low.bit_length() - 1
        mask ^= low


def _negative(r: Requirement) -> bool:
    return bool(r.values) if r.complement else not r.values


@dataclass(frozen=True, slots=True)
class DaemonGroup:
    """Instance types on which the same DaemonSets would run, and what those take."""

    mask: int
    overhead: tuple[int, ...]
    host_ports: tuple[HostPort, ...]
    daemonsets: tuple[str, ...]


class _ResourceIndex:
    """Types sorted by one resource; ``at_least(x)`` is the mask of types with >= x."""

    __slots__ = ("suffix", "values")

    def __init__(self, amounts: Sequence[int]) -> None:
        order = sorted(range(len(amounts)), key=lambda i: amounts[i])
        self.values = [amounts[i] for i in order]
        suffix = [0] * (len(order) + 1)
        acc = 0
        for pos in range(len(order) - 1, -1, -1):
            acc |= 1 << order[pos]
            suffix[pos] = acc
        self.suffix = suffix

    def at_least(self, amount: int) -> int:
        return self.suffix[bisect_left(self.values, amount)]


class _CapacityIndex:
    """Types sorted by capacity; ``at_most(x)`` is the mask of types with <= x."""

    __slots__ = ("order", "prefix", "values")

    def __init__(self, amounts: Sequence[int]) -> None:
        order = sorted(range(len(amounts)), key=lambda i: amounts[i])
        self.order = order
        self.values = [amounts[i] for i in order]
        prefix = [0]
        acc = 0
        for i in order:
            acc |= 1 << i
            prefix.append(acc)
        self.prefix = prefix

    def at_most(self, amount: int) -> int:
        return self.prefix[bisect_right(self.values, amount)]

    def max_in(self, mask: int) -> int:
        for pos in range(len(self.order) - 1, -1, -1):
            if mask >> self.order[pos] & 1:
                return self.values[pos]
        return 0


class _Pricing:
    """For one set of offering requirements: each type's cheapest compatible available
    offering, the types in price order, and per capacity type the types selling it."""

    __slots__ = ("capacity_types", "mask", "order", "prices")

    def __init__(self, types: Sequence[InstanceType], requirements: Requirements) -> None:
        prices: list[float | None] = []
        capacity_types: dict[str, int] = {}
        mask = 0
        for i, it in enumerate(types):
            best: float | None = None
            for offering in it.offerings:
                if not offering.available or not requirements.overlaps(offering.requirements):
                    continue
                capacity_types[offering.capacity_type] = (
                    capacity_types.get(offering.capacity_type, 0) | 1 << i
                )
                if best is None or offering.price < best:
                    best = offering.price
            prices.append(best)
            if best is not None:
                mask |= 1 << i
        self.prices = prices
        self.mask = mask
        self.capacity_types = capacity_types
        self.order = sorted(
            (i for i, p in enumerate(prices) if p is not None),
            key=lambda i: (prices[i], i),
        )


class Catalog:
    """The instance types of one NodePool, indexed for mask filtering.

    ``resource_names`` fixes the order of the request vectors the catalog is asked
    about (the simulator's resource index).
    """

    def __init__(
        self,
        instance_types: Sequence[InstanceType],
        resource_names: Sequence[str],
        well_known: frozenset[str],
    ) -> None:
        self.types = list(instance_types)
        self.resource_names = tuple(resource_names)
        self.well_known = well_known
        self.full = (1 << len(self.types)) - 1
        self._alloc = [
            _ResourceIndex([it.allocatable.get(name, 0) for it in self.types])
            for name in self.resource_names
        ]
        self._capacity: dict[str, _CapacityIndex] = {}
        self._req_key_masks: dict[Requirement, int] = {}
        self._req_masks: dict[Requirements, int] = {}
        self._offer_masks: dict[tuple[Requirement | None, ...], int] = {}
        self._pricing: dict[tuple[Requirement | None, ...], _Pricing] = {}
        keys: set[str] = set()
        for it in self.types:
            for offering in it.offerings:
                keys.update(offering.requirements)
        self._offering_keys = tuple(sorted(keys))
        # Available reserved offerings per type: the simulator hands out their slots
        # (karpy.scheduling.reservations); 0 when there are none, which costs nothing.
        self.reserved_offerings = [
            tuple(o for o in it.offerings if o.reserved and o.available) for it in self.types
        ]
        self.reserved_mask = 0
        for i, offerings in enumerate(self.reserved_offerings):
            if offerings:
                self.reserved_mask |= 1 << i
        self._defined: dict[str, int] = {}
        for i, it in enumerate(self.types):
            for key in it.requirements:
                self._defined[key] = self._defined.get(key, 0) | (1 << i)

    # -- requirements ------------------------------------------------------------------

    def _key_mask(self, requirement: Requirement) -> int:
        cached = self._req_key_masks.get(requirement)
        if cached is not None:
            return cached
        key = requirement.key
        defined = self._defined.get(key, 0)
        mask = self.full & ~defined
        negative = _negative(requirement)
        for i in iter_bits(defined):
            theirs = self.types[i].requirements[key]
            if requirement.has_intersection(theirs) or (negative and _negative(theirs)):
                mask |= 1 << i
        self._req_key_masks[requirement] = mask
        return mask

    def requirements_mask(self, requirements: Requirements) -> int:
        """Types whose requirements intersect ``requirements`` on every key both define
        (Karpenter's ``InstanceType.Requirements.Intersects``)."""
        cached = self._req_masks.get(requirements)
        if cached is not None:
            return cached
        mask = self.full
        for requirement in requirements.values():
            mask &= self._key_mask(requirement)
            if not mask:
                break
        self._req_masks[requirements] = mask
        return mask

    def offering_mask(self, requirements: Requirements) -> int:
        """Types with an available offering compatible with ``requirements``."""
        key = tuple(requirements.get(k) for k in self._offering_keys)
        cached = self._offer_masks.get(key)
        if cached is None:
            cached = self._pricing_for(key, requirements).mask
            self._offer_masks[key] = cached
        return cached

    def _pricing_for(
        self, key: tuple[Requirement | None, ...], requirements: Requirements
    ) -> _Pricing:
        pricing = self._pricing.get(key)
        if pricing is None:
            # Only the offering keys matter for offering compatibility.
            relevant = Requirements(r for r in key if r is not None)
            pricing = _Pricing(self.types, relevant)
            self._pricing[key] = pricing
        return pricing

    def pricing(self, requirements: Requirements) -> _Pricing:
        """Offering prices and capacity types under ``requirements`` (cached)."""
        key = tuple(requirements.get(k) for k in self._offering_keys)
        return self._pricing_for(key, requirements)

    def compatible_mask(self, requirements: Requirements) -> int:
        """Types meeting ``requirements`` with an available compatible offering."""
        return self.requirements_mask(requirements) & self.offering_mask(requirements)

    # -- resources ---------------------------------------------------------------------

    def fit_mask(self, requests: Sequence[int]) -> int:
        """Types whose allocatable holds ``requests`` (a vector in resource order)."""
        mask = self.full
        alloc = self._alloc
        for i, amount in enumerate(requests):
            if amount > 0:
                mask &= alloc[i].at_least(amount)
                if not mask:
                    return 0
        return mask

    def within_mask(self, remaining: Mapping[str, int]) -> int:
        """Types whose capacity does not exceed ``remaining`` (NodePool limits)."""
        mask = self.full
        for name, amount in remaining.items():
            index = self._capacity_index(name)
            mask &= index.at_most(amount)
        return mask

    def max_capacity(self, mask: int, names: Iterable[str]) -> dict[str, int]:
        """The largest capacity among the types in ``mask``, per resource."""
        return {name: self._capacity_index(name).max_in(mask) for name in names}

    def _capacity_index(self, name: str) -> _CapacityIndex:
        index = self._capacity.get(name)
        if index is None:
            index = _CapacityIndex([it.capacity.get(name, 0) for it in self.types])
            self._capacity[name] = index
        return index

    def reserved_compatible(self, mask: int, requirements: Requirements) -> list[Offering]:
        """The available reserved offerings of the types in ``mask`` compatible with
        ``requirements``, in type order."""
        out: list[Offering] = []
        for i in iter_bits(mask & self.reserved_mask):
            for offering in self.reserved_offerings[i]:
                if requirements.overlaps(offering.requirements):
                    out.append(offering)
        return out

    def reserved_types_mask(self, mask: int, requirements: Requirements) -> int:
        """The types in ``mask`` with an available reserved offering compatible with
        ``requirements``."""
        out = 0
        for i in iter_bits(mask & self.reserved_mask):
            if any(requirements.overlaps(o.requirements) for o in self.reserved_offerings[i]):
                out |= 1 << i
        return out

    # -- selection ---------------------------------------------------------------------

    def cheapest_first(self, mask: int, requirements: Requirements) -> list[int]:
        """The indexes of the types in ``mask`` that have a compatible available
        offering, cheapest offering first (ties by catalog order)."""
        order = self.pricing(requirements).order
        return [i for i in order if mask >> i & 1]

    def min_values_reason(self, requirements: Requirements, mask: int) -> str | None:
        """Why the types in ``mask`` cannot satisfy ``minValues``, or None."""
        wanted = [r for r in requirements.values() if r.min_values is not None]
        if not wanted:
            return None
        indexes = list(iter_bits(mask))
        for requirement in wanted:
            values: set[str] = set()
            for i in indexes:
                theirs = self.types[i].requirements.get(requirement.key)
                if theirs is not None and not theirs.complement:
                    # Only values the requirement allows count (Karpenter v1.15.0 /
                    # v1.14.3): a type's zones that pod constraints narrowed away
                    # cannot be the NodeClaim's.
                    values.update(v for v in theirs.values if requirement.has(v))
            if len(values) < (requirement.min_values or 0):
                return (
                    f"minValues requirement is not met for label {requirement.key!r}: "
                    f"{len(values)} distinct values among the compatible instance types, "
                    f"{requirement.min_values} required"
                )
        return None
