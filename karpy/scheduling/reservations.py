"""Reserved capacity in one solve: who holds which reservation's slots.

A ``reserved`` offering (:attr:`Offering.reserved`) can take only
:attr:`Offering.reservation_capacity` more instances. The simulator hands those slots
out as Karpenter's ReservationManager does: a planned NodeClaim holds one slot of every
reservation it could still launch into (pessimistically, as it does not know which
one the cloud will pick), gives back those its narrowed requirements rule out, and is
finally pinned to what it holds (``karpenter.sh/capacity-type In [reserved]`` and the
reservation-ID label ``In`` its reservations), so that it cannot over-launch a
reservation. Slots taken by NodeClaims created in earlier rounds but not launched yet
(``in_flight``) are not counted by the provider and are taken off here.

The provisioner runs the simulator in Karpenter's strict mode: a pod that could use a
reservation but finds it full is not sent to on-demand in the same solve; it gets a
:class:`ReservedOfferingError` and waits for the next round, when the reservation has
either a slot again or is reported exhausted (and its offering unavailable).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from karpy.apis.labels import LABEL_CAPACITY_TYPE, LABEL_ZONE
from karpy.scheduling.instancetype import InstanceType, Offering

__all__ = [
    "ReservationManager",
    "ReservedOfferingError",
    "held_in_flight",
    "reservation_label_keys",
    "without_reserved",
]


class ReservedOfferingError(str):
    """Why a pod waits instead of being placed: it could use reserved capacity whose
    slots the NodeClaims of this solve (or in flight) already hold. The pod is not
    relaxed and does not fall back to a lower-weight NodePool (Karpenter's
    ReservedOfferingError); it is tried again in the next round."""

    __slots__ = ()


class ReservationManager:
    """Slots per reservation and the reservations each planned NodeClaim holds.

    ``capacity`` starts as the smallest ``reservation_capacity`` any offering of a
    reservation reports (NodePools sharing one reservation may have read it at
    different times) minus the slots ``in_flight`` NodeClaims hold.
    """

    __slots__ = ("capacity", "held", "initial")

    def __init__(
        self, instance_types: Iterable[InstanceType], in_flight: Mapping[str, int] | None = None
    ) -> None:
        capacity: dict[str, int] = {}
        for it in instance_types:
            for offering in it.offerings:
                if not offering.reserved:
                    continue
                current = capacity.get(offering.reservation_id)
                if current is None or offering.reservation_capacity < current:
                    capacity[offering.reservation_id] = offering.reservation_capacity
        for rid, used in (in_flight or {}).items():
            if rid in capacity:
                capacity[rid] = max(capacity[rid] - used, 0)
        self.capacity = capacity
        self.initial = dict(capacity)
        self.held: dict[str, set[str]] = {}

    def can_reserve(self, hostname: str, offering: Offering) -> bool:
        """Whether ``hostname`` holds, or could take, a slot of the offering's
        reservation."""
        rid = offering.reservation_id
        if rid in self.held.get(hostname, ()):
            return True
        return self.capacity.get(rid, 0) > 0

    def reserve(self, hostname: str, offerings: Iterable[Offering]) -> None:
        """Take one slot of each offering's reservation for ``hostname`` (idempotent)."""
        held = self.held.setdefault(hostname, set())
        for offering in offerings:
            rid = offering.reservation_id
            if rid in held:
                continue
            if self.capacity.get(rid, 0) <= 0:
                raise ValueError(f"reservation {rid!r} has no slot left for {hostname}")
            self.capacity[rid] -= 1
            held.add(rid)

    def release(self, hostname: str, keep: Iterable[str] = ()) -> None:
        """Give back every slot ``hostname`` holds except those of ``keep``."""
        held = self.held.get(hostname)
        if not held:
            return
        keep = set(keep)
        for rid in list(held):
            if rid not in keep:
                held.discard(rid)
                self.capacity[rid] += 1

    def holds(self, hostname: str) -> frozenset[str]:
        """The reservations ``hostname`` holds a slot of."""
        return frozenset(self.held.get(hostname, ()))

    def used(self) -> dict[str, tuple[int, int]]:
        """Per reservation: (slots the plan takes, slots there were), for reports."""
        return {
            rid: (self.initial[rid] - self.capacity[rid], self.initial[rid])
            for rid in sorted(self.capacity)
        }


def reservation_label_keys(instance_types: Iterable[InstanceType]) -> frozenset[str]:
    """The labels naming a reservation in these offerings (the provider's reservation-ID
    label, e.g. ``karpenter.k8s.aws/capacity-reservation-id``): the keys of a reserved
    offering's requirements that are ``In`` exactly its reservation ID."""
    keys: set[str] = set()
    for it in instance_types:
        for offering in it.offerings:
            if not offering.reserved:
                continue
            for key, requirement in offering.requirements.items():
                if key in (LABEL_ZONE, LABEL_CAPACITY_TYPE) or requirement.complement:
                    continue
                if requirement.values == {offering.reservation_id}:
                    keys.add(key)
    return frozenset(keys)


def held_in_flight(
    nodeclaims: Iterable[Mapping[str, Any]], label_keys: Sequence[str] | frozenset[str]
) -> dict[str, int]:
    """Slots held by NodeClaims that are not launched yet: one per reservation each
    names in an ``In`` requirement on a reservation-ID label (the cloud does not count
    them until they launch). NodeClaims being deleted will not launch and hold none."""
    held: dict[str, int] = {}
    for nodeclaim in nodeclaims:
        if (nodeclaim.get("metadata") or {}).get("deletionTimestamp"):
            continue
        for requirement in (nodeclaim.get("spec") or {}).get("requirements") or ():
            if requirement.get("key") in label_keys and requirement.get("operator") == "In":
                for rid in set(requirement.get("values") or ()):
                    held[rid] = held.get(rid, 0) + 1
    return held


def without_reserved(instance_types: Sequence[InstanceType]) -> Sequence[InstanceType]:
    """The instance types with their reserved offerings unavailable: what the simulator
    sees with the ReservedCapacity gate off."""
    out: list[InstanceType] = []
    for it in instance_types:
        if not any(o.reserved and o.available for o in it.offerings):
            out.append(it)
            continue
        offerings = tuple(replace(o, available=False) if o.reserved else o for o in it.offerings)
        out.append(
            replace(it, offerings=offerings)
        )
    return out
