"""EC2 capacity reservations (On-Demand Capacity Reservations and Capacity Blocks for
ML): which ones an EC2NodeClass selects, how many instances each still takes, and the
``reserved`` offerings they add to its instance types, as Karpenter AWS has them
(pkg/providers/capacityreservation, pkg/providers/instancetype/offering).

* Selection: each ``capacityReservationSelectorTerms`` term becomes up to two
  DescribeCapacityReservations queries (by ``id``; by ``tags`` / ``ownerID`` /
  ``instanceMatchCriteria``), always filtered to ``state=active``; the terms are ORed,
  duplicates dropped, and reservations already past their end time left out.
  :func:`reservation_status` turns one into its ``status.capacityReservations`` entry;
  a capacity block is ``expiring`` from 40 minutes before its end (EC2 reclaims its
  instances in that window, so karpy launches nothing more into it and drains its
  nodes).
* Availability: :class:`CapacityReservations` keeps each reservation's
  ``AvailableInstanceCount`` as last described, counts it down for every launch into
  it and up for every termination (EC2 reports the change only later), and sets it to
  zero when a launch into it failed for lack of capacity, until the next describe.
  ``generation`` changes with every change, so the catalogue knows to rebuild.
* Offerings: one ``reserved`` offering per reservation of the instance type
  (:func:`reserved_offerings`), priced at the on-demand price / 10,000,000 (free, yet
  ordered like on-demand for consolidation), carrying the labels
  ``karpenter.k8s.aws/capacity-reservation-id``, ``-type`` and ``-interruptible``;
  available while the reservation has a slot, is in a zone of the class and is not
  expiring.

Not supported: interruptible ODCRs are selected and reported (``interruptible``), and
their offerings are never available: launching into them takes CreateFleet's
``ReservedCapacityOptions`` and the ``interruptible-capacity-reservation`` market type,
which the botocore karpy is built with does not know yet (see docs/providers/aws.md).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Final

from karpy.apis import labels as wk
from karpy.cloudprovider import Offering
from karpy.runtime import parse_time
from karpy.scheduling import Requirement, Requirements
from karpy_aws._clients import AWSClients
from karpy_aws._errors import is_not_found
from karpy_aws.apis import labels as aws
from karpy_aws.apis.ec2nodeclass import CapacityReservation, CapacityReservationSelectorTerm

__all__ = [
    "EXPIRATION_WINDOW",
    "CapacityReservations",
    "ReservationQuery",
    "ReservedSlot",
    "next_reservation_change",
    "queries_from_terms",
    "reservation_status",
    "reservation_template_data",
    "reserved_offerings",
]

log = logging.getLogger("karpy.aws.capacityreservation")

#: a capacity block is ``expiring`` this long before its end (Karpenter's window)
EXPIRATION_WINDOW: Final = timedelta(minutes=40)
#: how long one DescribeCapacityReservations answer is reused (Karpenter polls each minute)
QUERY_TTL: Final = 60.0
#: the reserved price is the on-demand price divided by this: free, but still ordered
RESERVED_PRICE_DIVISOR: Final = 10_000_000.0


@dataclass(frozen=True, slots=True)
class ReservationQuery:
    """One DescribeCapacityReservations query a selector term asks for."""

    id: str = ""
    owner_id: str = ""
    tags: tuple[tuple[str, str], ...] = ()
    instance_match_criteria: str = ""

    def describe_input(self) -> dict[str, Any]:
        """The DescribeCapacityReservations parameters (active reservations only)."""
        filters: list[dict[str, Any]] = [{"Name": "state", "Values": ["active"]}]
        if self.id:
            # MaxResults cannot be given with IDs
            return {"CapacityReservationIds": [self.id], "Filters": filters}
        if self.owner_id:
            filters.append({"Name": "owner-id", "Values": [self.owner_id]})
        for key, value in self.tags:
            filters.append(
                {"Name": "tag-key", "Values": [key]}
                if value == "*"
                else {"Name": f"tag:{key}", "Values": [value]}
            )
        if self.instance_match_criteria:
            filters.append(
                {"Name": "instance-match-criteria", "Values": [self.instance_match_criteria]}
            )
        return {"Filters": filters, "MaxResults": 1000}


def queries_from_terms(terms: Iterable[CapacityReservationSelectorTerm]) -> list[ReservationQuery]:
    """The queries of the terms, as Karpenter AWS makes them: one by ``id`` when set,
    one by tags/owner/match criteria when tags or match criteria are set."""
    out: list[ReservationQuery] = []
    for term in terms:
        if term.id:
            out.append(ReservationQuery(id=term.id))
        if term.tags or term.instance_match_criteria:
            out.append(
                ReservationQuery(
                    owner_id=term.owner_id or "",
                    tags=tuple(sorted(term.tags.items())),
                    instance_match_criteria=term.instance_match_criteria or "",
                )
            )
    return out


def _end(reservation: Mapping[str, Any]) -> datetime | None:
    # botocore gives a datetime; a string (a test double's JSON) parses the same way
    return parse_time(reservation.get("EndDate"))


def reservation_status(reservation: Mapping[str, Any], now: datetime) -> CapacityReservation:
    """The ``status.capacityReservations`` entry of an EC2 reservation.

    Raises ValueError for an instance match criteria or reservation type karpy does not
    know (EC2 may add some; such a reservation is left out and logged, as Karpenter
    does)."""
    rid = str(reservation.get("CapacityReservationId", ""))
    criteria = reservation.get("InstanceMatchCriteria")
    if criteria not in ("open", "targeted"):
        raise ValueError(
            f"capacity reservation {rid}: unsupported instance match criteria {criteria!r}"
        )
    kind = reservation.get("ReservationType") or "default"
    if kind not in ("default", "capacity-block"):
        raise ValueError(f"capacity reservation {rid}: unsupported reservation type {kind!r}")
    end = _end(reservation)
    expiring = kind == "capacity-block" and end is not None and now >= end - EXPIRATION_WINDOW
    return CapacityReservation.model_validate(
        {
            "availabilityZone": reservation["AvailabilityZone"],
            "endTime": end,
            "id": rid,
            "instanceMatchCriteria": criteria,
            "instanceType": reservation["InstanceType"],
            "ownerID": reservation["OwnerId"],
            "reservationType": kind,
            "interruptible": bool(reservation.get("Interruptible", False)),
            "state": "expiring" if expiring else "active",
        }
    )


class CapacityReservations:
    """What DescribeCapacityReservations said, and each reservation's slots left.

    ``wall`` is the wall clock (end times are wall times); ``monotonic`` times the
    query cache."""

    def __init__(
        self,
        clients: AWSClients,
        *,
        wall: Callable[[], datetime] = lambda: datetime.now(UTC),
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._clients = clients
        self.wall = wall
        self._monotonic = monotonic
        self._lock = asyncio.Lock()
        self._queries: dict[ReservationQuery, tuple[float, list[dict[str, Any]]]] = {}
        self._available: dict[str, int] = {}
        self.generation = 0

    async def select(
        self, terms: Sequence[CapacityReservationSelectorTerm]
    ) -> list[dict[str, Any]]:
        """The active reservations the terms select, not yet ended, by ID; each query's
        answer is reused for a minute."""
        found: dict[str, dict[str, Any]] = {}
        async with self._lock:
            for query in queries_from_terms(terms):
                cached = self._queries.get(query)
                if cached is not None and self._monotonic() - cached[0] < QUERY_TTL:
                    answer = cached[1]
                else:
                    answer = await self._describe(query)
                    self._queries[query] = (self._monotonic(), answer)
                    self._sync({r["CapacityReservationId"]: r for r in answer})
                for reservation in answer:
                    found.setdefault(reservation["CapacityReservationId"], reservation)
        now = self.wall()
        return [r for rid, r in sorted(found.items()) if (end := _end(r)) is None or end > now]

    async def _describe(self, query: ReservationQuery) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        paginator = self._clients.ec2.get_paginator("describe_capacity_reservations")
        try:
            async for page in paginator.paginate(**query.describe_input()):
                out.extend(page.get("CapacityReservations", []))
        except Exception as exc:
            # asked by ID, a reservation that does not exist (any longer) is not found
            if query.id and is_not_found(exc):
                return []
            raise
        return out

    def _sync(self, reservations: Mapping[str, Mapping[str, Any]]) -> None:
        changed = False
        for rid, reservation in reservations.items():
            count = int(reservation.get("AvailableInstanceCount", 0))
            if self._available.get(rid) != count:
                self._available[rid] = count
                changed = True
        if changed:
            self.generation += 1

    def available(self, reservation_id: str) -> int:
        """Instances the reservation still takes (0 for one never described)."""
        return self._available.get(reservation_id, 0)

    def _set(self, reservation_id: str, count: int) -> None:
        if reservation_id in self._available and self._available[reservation_id] != count:
            self._available[reservation_id] = count
            self.generation += 1

    def mark_launched(self, reservation_id: str) -> None:
        """One instance launched into the reservation."""
        self._set(reservation_id, max(self.available(reservation_id) - 1, 0))

    def mark_terminated(self, reservation_id: str) -> None:
        """One instance of the reservation is being terminated: its slot comes back."""
        self._set(reservation_id, self.available(reservation_id) + 1)

    def mark_unavailable(self, *reservation_ids: str) -> None:
        """EC2 refused a launch into these reservations for lack of capacity: no slot
        until the next describe says otherwise."""
        for rid in reservation_ids:
            log.debug("marking capacity reservation unavailable", extra={"id": rid})
            self._set(rid, 0)
        # the next select() describes again rather than trusting a cached count
        self._queries = {
            q: v
            for q, v in self._queries.items()
            if not any(r["CapacityReservationId"] in reservation_ids for r in v[1])
        }


@dataclass(frozen=True, slots=True)
class ReservedSlot:
    """What of a ``status.capacityReservations`` entry shapes an instance type's
    offerings (hashable: part of the catalogue's cache key)."""

    id: str
    instance_type: str
    zone: str
    reservation_type: str = "default"
    interruptible: bool = False
    expiring: bool = False

    @classmethod
    def of(cls, reservation: CapacityReservation) -> ReservedSlot:
        """The slot of a resolved reservation."""
        return cls(
            id=reservation.id,
            instance_type=reservation.instance_type,
            zone=reservation.availability_zone,
            reservation_type=reservation.reservation_type,
            interruptible=bool(reservation.interruptible),
            expiring=reservation.state == "expiring",
        )

    @property
    def market_type(self) -> str | None:
        """The launch template's ``InstanceMarketOptions.MarketType``, if any."""
        return "capacity-block" if self.reservation_type == "capacity-block" else None


def reserved_offerings(
    instance_type: str,
    slots: Iterable[ReservedSlot],
    *,
    zones: Mapping[str, str],
    offered_zones: Iterable[str],
    on_demand_price: float | None,
    capacity: Callable[[str], int],
) -> list[Offering]:
    """The ``reserved`` offerings of ``instance_type``: one per reservation of that
    type. ``zones`` maps the class's zones to their zone IDs; ``capacity(id)`` is the
    reservation's slots left."""
    offered = set(offered_zones)
    out: list[Offering] = []
    for slot in slots:
        if slot.instance_type != instance_type:
            continue
        left = capacity(slot.id)
        reqs = [
            Requirement.new(aws.LABEL_CAPACITY_RESERVATION_ID, "In", (slot.id,)),
            Requirement.new(aws.LABEL_CAPACITY_RESERVATION_TYPE, "In", (slot.reservation_type,)),
            Requirement.new(
                aws.LABEL_CAPACITY_RESERVATION_INTERRUPTIBLE,
                "In",
                (str(slot.interruptible).lower(),),
            ),
        ]
        if zones.get(slot.zone):
            reqs.append(Requirement.new(aws.LABEL_TOPOLOGY_ZONE_ID, "In", (zones[slot.zone],)))
        out.append(
            Offering(
                zone=slot.zone,
                capacity_type=wk.CAPACITY_TYPE_RESERVED,
                price=(on_demand_price or 0.0) / RESERVED_PRICE_DIVISOR,
                # interruptible ODCRs need a fleet option the EC2 API karpy is built
                # with does not have yet: offered (and reported), never launched into
                available=(
                    left > 0
                    and slot.zone in zones
                    and slot.zone in offered
                    and not slot.expiring
                    and not slot.interruptible
                ),
                requirements=Requirements(reqs),
                reservation_id=slot.id,
                reservation_capacity=left,
            )
        )
    return out


def next_reservation_change(
    reservations: Iterable[CapacityReservation], now: datetime, poll: float
) -> float:
    """Seconds until the status must be resolved again: ``poll``, or sooner when a
    capacity block turns ``expiring`` or a reservation ends before then (Karpenter
    requeues at the nearest end time)."""
    soonest = poll
    for reservation in reservations:
        end = parse_time(reservation.end_time)
        if end is None:
            continue
        moments = [end]
        if reservation.reservation_type == "capacity-block":
            moments.append(end - EXPIRATION_WINDOW)
        for moment in moments:
            left = (moment - now).total_seconds()
            if left > 0:
                soonest = min(soonest, left)
    return max(soonest, 1.0)


def reservation_template_data(
    reservation_id: str, market_type: str, *, targeted: bool = True
) -> dict[str, Any]:
    """The launch template fields for capacity reservations, as Karpenter AWS writes them
    in its targeted launch mode (the ReservedCapacity gate, on by default): a launch into
    ``reservation_id`` has the reservation as its only target (and the capacity-block
    market type for a capacity block); any other launch opts out of open ODCRs
    (preference ``none``), so on-demand and spot instances never take a reservation's
    slots behind karpy's count. With the gate off (``targeted=False``): nothing, and EC2
    places on-demand launches into open ODCRs as it likes."""
    if not targeted:
        return {}
    if not reservation_id:
        return {"CapacityReservationSpecification": {"CapacityReservationPreference": "none"}}
    data: dict[str, Any] = {
        "CapacityReservationSpecification": {
            "CapacityReservationPreference": "capacity-reservations-only",
            "CapacityReservationTarget": {"CapacityReservationId": reservation_id},
        }
    }
    if market_type:
        data["InstanceMarketOptions"] = {"MarketType": market_type}
    return data
