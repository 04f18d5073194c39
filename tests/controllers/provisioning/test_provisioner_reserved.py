"""The provisioner and reserved capacity (issue 28): NodeClaims launched into a
reservation are pinned to it, pods that find it full wait (no FailedScheduling), slots
of NodeClaims not launched yet are not handed out again, and the ReservedCapacity gate
turns it all off."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from provisioning_support import Harness, build

from karpy.apis import NodeClaim
from karpy.cloudprovider import InstanceType, Offering
from karpy.cloudprovider.fake import ZONES
from karpy.controllers.disruption import DisruptionController
from karpy.controllers.settings import FeatureGates, Settings
from karpy.scheduling import Requirement, Requirements
from karpy.state.testing import nodepool, pod

RESERVATION = "karpenter.test.sh/reservation-id"
CAPACITY_TYPE = "karpenter.sh/capacity-type"


def _types(slots: int, *, available: bool = True) -> list[InstanceType]:
    offerings = [Offering(zone, "on-demand", 0.2) for zone in ZONES]
    offerings.append(Offering(
        ZONES[0], "reserved", 0.00000002, available=available,
        requirements=Requirements([Requirement.new(RESERVATION, "In", ("cr-1",))]),
        reservation_id="cr-1", reservation_capacity=slots,
    ))
    return [InstanceType.build(
        "big", capacity={"cpu": 4000, "memory": 16 * 2**30, "pods": 110},
        offerings=offerings,
    )]


def _harness(settings: Settings | None = None) -> Harness:
    h = build(settings)
    h.provider.instance_types = _types(2)
    h.cluster.update_nodepool(nodepool())
    for i in range(5):  # 3 CPU each: one per node
        h.cluster.update_pod(pod(f"app-{i}", cpu="3", memory="256Mi"))
    return h


def _requirement(claim: dict[str, Any], key: str) -> list[str] | None:
    for r in claim["spec"]["requirements"]:
        if r["key"] == key:
            return list(r.get("values") or [])
    return None


async def test_two_claims_on_the_reservation_and_the_rest_wait_without_failing(
    caplog: pytest.LogCaptureFixture,
) -> None:
    h = _harness()
    caplog.set_level(logging.DEBUG, "controller")
    assert await h.provisioner.provision() == 0
    claims = h.client.created
    assert len(claims) == 2
    for claim in claims:
        assert _requirement(claim, CAPACITY_TYPE) == ["reserved"]
        assert _requirement(claim, RESERVATION) == ["cr-1"]
    # the three others are deferred: no FailedScheduling, Karpenter's log line
    assert h.recorder.reasons("FailedScheduling") == []
    assert any(r.getMessage().startswith("deferring scheduling decision") for r in caplog.records)

    # NodeClaims created but not launched hold their slots: nothing more this round
    for claim in claims:
        h.cluster.update_nodeclaim(claim)
    await h.provisioner.provision()
    assert len(h.client.created) == 2

    # launched: the cloud now reports the reservation full, and the rest go on-demand
    for claim in list(claims):
        launched = await h.provider.create(NodeClaim.from_dict(claim))
        assert launched.metadata.labels[RESERVATION] == "cr-1"
        h.cluster.update_nodeclaim(launched.to_dict())
    h.provider.instance_types = _types(0, available=False)
    await h.provisioner.provision()
    rest = h.client.created[2:]
    assert len(rest) == 3
    for claim in rest:
        assert "reserved" not in (_requirement(claim, CAPACITY_TYPE) or [])
        assert _requirement(claim, RESERVATION) is None


async def test_the_gate_off_launches_nothing_into_the_reservation() -> None:
    h = _harness(Settings(feature_gates=FeatureGates(reserved_capacity=False)))
    await h.provisioner.provision()
    assert len(h.client.created) == 5
    for claim in h.client.created:
        assert "reserved" not in (_requirement(claim, CAPACITY_TYPE) or [])
        assert _requirement(claim, RESERVATION) is None


async def test_instance_types_with_reservations_are_fetched_every_round() -> None:
    """A reservation's free slots change with every launch: a cached count would plan
    into a full reservation."""
    h = _harness()
    await h.provisioner.provision()
    await h.provisioner.provision()
    assert h.provisioner.inputs.instance_types.fetches == 2


async def test_disruption_what_ifs_fall_back_when_a_reservation_is_full() -> None:
    """Disruption simulates as Karpenter's does, with reserved-capacity fallback: a
    pod that finds the reservation full is placed on-demand, not left unplaced (which
    would make every consolidation command touching it fail)."""
    h = _harness()
    controller = DisruptionController(
        client=h.client, cache=None, cluster=h.cluster,  # type: ignore[arg-type]
        scheduling=h.provisioner.inputs, cloud_provider=h.provider, queue=None,  # type: ignore[arg-type]
        events=None, clock=h.clock, settings=Settings(), metrics=None,  # type: ignore[arg-type]
    )
    whatif = await controller.whatif()
    results = whatif.simulator.solve(list(whatif.pending))
    assert not results.errors, [str(e) for e in results.errors]
    assert sorted(len(c.reservation_ids) for c in results.new_nodeclaims) == [0, 0, 0, 1, 1]
