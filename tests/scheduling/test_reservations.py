"""Reserved capacity in the simulator: NodeClaims hold a reservation's slots, are pinned
to it, and pods wait (strict) or fall back (fallback) once it is full (issue 28)."""

from __future__ import annotations

from scheduling_support import CAPACITY_TYPE, GIB, INSTANCE_TYPE, ZONES, expr, nodepool, pods

from karpy.scheduling import (
    InstanceType,
    Offering,
    Requirement,
    Requirements,
    ReservedOfferingError,
    SchedulerOptions,
    held_in_flight,
    reservation_label_keys,
)
from karpy.scheduling.reservations import without_reserved
from karpy.scheduling.simulator import Simulator

RESERVATION = "example.com/reservation-id"
STRICT = SchedulerOptions(reserved_offering_mode="Strict")


def _types(slots: int = 2, *, rid: str = "cr-1") -> list[InstanceType]:
    """"big" (4 CPU) sold on-demand in every zone and through a reservation of
    ``slots`` instances in zone-a; "small" (2 CPU) on-demand only."""
    offerings = [Offering(zone, "on-demand", 4.0) for zone in ZONES]
    offerings.append(
        Offering(
            "zone-a",
            "reserved",
            0.0004,
            requirements=Requirements([Requirement.new(RESERVATION, "In", (rid,))]),
            reservation_id=rid,
            reservation_capacity=slots,
        )
    )
    big = InstanceType.build(
        "big", capacity={"cpu": 4000, "memory": 16 * GIB, "pods": 110}, offerings=offerings
    )
    small = InstanceType.build(
        "small",
        capacity={"cpu": 2000, "memory": 8 * GIB, "pods": 110},
        offerings=[Offering(zone, "on-demand", 2.0) for zone in ZONES],
    )
    return [big, small]


def _node_each() -> list:  # type: ignore[type-arg]
    # 3 CPU: only "big" fits one, and two never share a node
    return pods(5, cpu="3", memory="1Gi")


def test_strict_two_claims_take_the_two_slots_and_the_rest_wait() -> None:
    results = Simulator([nodepool(types=_types())], options=STRICT).solve(_node_each())
    claims = results.new_nodeclaims
    assert len(claims) == 2
    for claim in claims:
        assert claim.reservation_ids == ("cr-1",)
        assert claim.requirements[CAPACITY_TYPE].values == {"reserved"}
        assert claim.requirements[RESERVATION].values == {"cr-1"}
        assert claim.instance_type_names == ["big"]
    # the other three are deferred, not unschedulable, and keep their preferences
    assert len(results.errors) == 3
    assert len(results.deferred) == 3
    assert all(isinstance(e.reason, ReservedOfferingError) for e in results.errors)
    assert results.reservations == {"cr-1": (2, 2)}


def test_fallback_launches_the_rest_on_demand() -> None:
    results = Simulator([nodepool(types=_types())]).solve(_node_each())
    assert not results.errors
    reserved = [c for c in results.new_nodeclaims if c.reservation_ids]
    others = [c for c in results.new_nodeclaims if not c.reservation_ids]
    assert len(reserved) == 2 and len(others) == 3
    for claim in others:
        assert RESERVATION not in claim.requirements


def test_slots_in_flight_are_not_handed_out_again() -> None:
    in_flight = {"cr-1": 1}
    results = Simulator([nodepool(types=_types())], options=STRICT).solve(
        _node_each(), reservations_in_flight=in_flight
    )
    assert [c.reservation_ids for c in results.new_nodeclaims] == [("cr-1",)]
    assert results.reservations == {"cr-1": (1, 1)}


def test_a_full_reservation_reported_unavailable_falls_back_in_strict_mode() -> None:
    """Once the cloud reports the reservation full (offering unavailable), pods go
    on-demand: this is the next round after a strict deferral."""
    types = _types(slots=0)
    types[0] = InstanceType.build(
        "big",
        capacity=dict(types[0].capacity),
        offerings=[
            o if not o.reserved else Offering(
                o.zone, o.capacity_type, o.price, available=False,
                requirements=o.requirements, reservation_id=o.reservation_id,
            )
            for o in types[0].offerings
        ],
    )
    results = Simulator([nodepool(types=types)], options=STRICT).solve(_node_each())
    assert not results.errors
    assert len(results.new_nodeclaims) == 5
    assert all(not c.reservation_ids for c in results.new_nodeclaims)


def test_gate_off_ignores_reservations() -> None:
    gate_off = SchedulerOptions(reserved_capacity=False, reserved_offering_mode="Strict")
    types = without_reserved(_types())
    results = Simulator([nodepool(types=types)], options=gate_off).solve(_node_each())
    assert not results.errors
    assert len(results.new_nodeclaims) == 5
    for claim in results.new_nodeclaims:
        assert claim.reservation_ids == ()
        assert "reserved" not in claim.requirements[CAPACITY_TYPE].values


def test_a_pod_that_cannot_use_the_reservation_is_not_held_back() -> None:
    """A pod restricted to on-demand never waits for the reservation."""
    pool = nodepool(types=_types(slots=0))
    many = pods(3, cpu="3", memory="1Gi",
                node_selector={CAPACITY_TYPE: "on-demand"})
    results = Simulator([pool], options=STRICT).solve(many)
    assert not results.errors
    assert all(not c.reservation_ids for c in results.new_nodeclaims)


def test_a_nodepool_restricted_to_another_zone_does_not_hold_slots() -> None:
    pool = nodepool(
        types=_types(), requirements=[expr("topology.kubernetes.io/zone", "In", "zone-b")]
    )
    results = Simulator([pool], options=STRICT).solve(_node_each())
    assert not results.errors
    assert results.reservations == {"cr-1": (0, 2)}
    assert all(c.instance_type_names[0] == "big" for c in results.new_nodeclaims)
    assert all(INSTANCE_TYPE in c.requirements for c in results.new_nodeclaims)


def test_label_keys_and_in_flight_counts() -> None:
    assert reservation_label_keys(_types()) == frozenset({RESERVATION})
    claims = [
        {"spec": {"requirements": [{"key": RESERVATION, "operator": "In", "values": ["cr-1"]}]}},
        {"spec": {"requirements": [{"key": RESERVATION, "operator": "In",
                                    "values": ["cr-1", "cr-2"]}]}},
        {"spec": {"requirements": [{"key": CAPACITY_TYPE, "operator": "In",
                                    "values": ["on-demand"]}]}},
    ]
    assert held_in_flight(claims, {RESERVATION}) == {"cr-1": 2, "cr-2": 1}


def test_a_reserved_offering_needs_its_reservation() -> None:
    try:
        Offering("zone-a", "reserved", 0.1)
    except ValueError as exc:
        assert "reservation_id" in str(exc)
    else:
        raise AssertionError("a reserved offering without a reservation was accepted")
