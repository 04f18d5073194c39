"""Capacity reservations against moto (its gap filled at the test server, gap 13 of
moto_harness): selector terms resolved into ``status.capacityReservations``, reserved
offerings, CreateFleet launches into the reservation, and a full reservation marked
unavailable."""

from __future__ import annotations

import asyncio
import datetime
import json
import uuid
from typing import Any

import boto3
import pytest
from conftest import REGION, node_class_manifest
from karpy_aws import AWSCloudProvider
from karpy_aws._clients import AWSClients
from karpy_aws._instances import nodeclaim_from_instance
from karpy_aws._instancetypes import NodeClassShape
from karpy_aws._interruption_handler import InterruptionHandler
from karpy_aws._interruption_messages import CAPACITY_RESERVATION_INTERRUPTED, parse_message
from karpy_aws._reservation_expiration import ReservationExpirationController
from karpy_aws._reservations import ReservedSlot, reserved_offerings
from karpy_aws._resolve import resolve_status
from karpy_aws._settings import AWSSettings
from karpy_aws.apis import labels as aws
from karpy_aws.apis.ec2nodeclass import (
    CONDITION_CAPACITY_RESERVATIONS_READY,
    CapacityReservationSelectorTerm,
    EC2NodeClass,
)
from moto_harness import CLUSTER, Account, FleetFaults

from karpy.apis import NodeClaim
from karpy.apis import labels as wk
from karpy.apis.v1 import NodeClassReference
from karpy.cloudprovider import NODE_CLAIM as NODE_CLAIM_KIND
from karpy.cloudprovider import InsufficientCapacityError
from karpy.cloudprovider.testing import make_nodeclaim, make_nodepool
from karpy.runtime.testing import FakeClient, FakeEventRecorder

K8S_VERSION = "1.31"
TYPE = "m5.large"
RESERVED = {"key": wk.LABEL_CAPACITY_TYPE, "operator": "In", "values": ["reserved"]}


def _zone(account: Account) -> str:
    return sorted(account.subnets.values())[0]


async def _provider_with(
    settings: AWSSettings, clients: AWSClients, manifest: dict[str, Any]
) -> tuple[AWSCloudProvider, EC2NodeClass]:
    """A provider whose only EC2NodeClass is ``manifest``, resolved through the
    provider's own reservations (as the status controller resolves it)."""
    holder: dict[str, EC2NodeClass] = {}

    async def get(name: str) -> EC2NodeClass | None:
        return holder.get(name)

    provider = AWSCloudProvider(
        settings=settings, clients=clients, node_classes=get, owns_clients=False
    )
    node_class = EC2NodeClass.model_validate(manifest)
    resolution = await resolve_status(
        clients,
        node_class,
        cluster_name=CLUSTER,
        region=REGION,
        k8s_version=K8S_VERSION,
        reservations=provider.reservations,
    )
    node_class.status = resolution.status
    conditions = node_class.status_conditions()
    for kind, (ok, reason, message) in resolution.conditions.items():
        if ok:
            conditions.set_true(kind)
        else:
            conditions.set_false(kind, reason, message)
    node_class.status.conditions = list(conditions.list())
    holder[node_class.metadata.name or ""] = node_class
    return provider, node_class


async def _reserved_offerings(provider: AWSCloudProvider, node_class: EC2NodeClass) -> list[Any]:
    types = await provider.catalog.instance_types(NodeClassShape.of(node_class))
    return [(it.name, o) for it in types for o in it.offerings if o.reserved]


def _template_data(account: Account, name: str) -> dict[str, Any]:
    ec2 = boto3.client("ec2", region_name=REGION, endpoint_url=account.url)
    versions = ec2.describe_launch_template_versions(LaunchTemplateName=name, Versions=["$Latest"])
    return dict(versions["LaunchTemplateVersions"][0]["LaunchTemplateData"])


def _ref(name: str) -> NodeClassReference:
    return NodeClassReference(group="karpenter.k8s.aws", kind="EC2NodeClass", name=name)


async def test_selector_terms_resolve_into_status_capacity_reservations(
    aws_account: Account, aws_settings: AWSSettings, aws_clients: AWSClients
) -> None:
    faults = aws_account.faults
    team = uuid.uuid4().hex[:8]
    zone = _zone(aws_account)
    end = datetime.datetime.now(datetime.UTC) + datetime.timedelta(hours=5)
    by_tag = faults.add_capacity_reservation(TYPE, zone, count=3, tags={"team": team})
    open_one = faults.add_capacity_reservation(
        "c5.large", zone, tags={"team": team}, match="open", end=end
    )
    faults.add_capacity_reservation(TYPE, zone, tags={"team": "someone-else"})
    by_id = faults.add_capacity_reservation("c5.xlarge", zone)
    ended = faults.add_capacity_reservation(
        TYPE,
        zone,
        tags={"team": team},
        end=datetime.datetime.now(datetime.UTC) - datetime.timedelta(minutes=1),
    )
    block = faults.add_capacity_reservation(
        "p5.48xlarge",
        zone,
        tags={"team": team},
        reservation_type="capacity-block",
        end=datetime.datetime.now(datetime.UTC) + datetime.timedelta(minutes=30),
    )
    missing = "cr-0123456789abcdef0"
    provider, node_class = await _provider_with(
        aws_settings,
        aws_clients,
        node_class_manifest(
            f"crs-{team}",
            capacityReservationSelectorTerms=[
                {"tags": {"team": team}},
                {"id": by_id},
                {"id": missing},  # not found: left out, not an error
            ],
        ),
    )
    status = {r.id: r for r in node_class.status.capacity_reservations}
    # the ended reservation is left out; the one owned by someone else is not selected
    assert sorted(status) == sorted([by_tag, open_one, by_id, block])
    assert ended not in status
    tagged = status[by_tag]
    assert tagged.to_dict() == {
        "availabilityZone": zone,
        "id": by_tag,
        "instanceMatchCriteria": "targeted",
        "instanceType": TYPE,
        "ownerID": "123456789012",
        "reservationType": "default",
        "interruptible": False,
        "state": "active",
    }
    assert status[open_one].instance_match_criteria == "open"
    assert status[open_one].end_time is not None
    # a capacity block 30 minutes from its end is in EC2's reclaim window
    assert status[block].reservation_type == "capacity-block"
    assert status[block].state == "expiring"
    ready = {c.type: c for c in node_class.status.conditions}
    assert ready[CONDITION_CAPACITY_RESERVATIONS_READY].status == "True"
    assert provider.reservations.available(by_tag) == 3


async def test_instance_match_criteria_term_selects_only_that_criteria(
    aws_account: Account, aws_settings: AWSSettings, aws_clients: AWSClients
) -> None:
    faults = aws_account.faults
    team = uuid.uuid4().hex[:8]
    zone = _zone(aws_account)
    targeted = faults.add_capacity_reservation(TYPE, zone, tags={"team": team})
    opened = faults.add_capacity_reservation(TYPE, zone, tags={"team": team}, match="open")
    _, node_class = await _provider_with(
        aws_settings,
        aws_clients,
        node_class_manifest(
            f"crs-{team}",
            capacityReservationSelectorTerms=[
                {"tags": {"team": team}, "instanceMatchCriteria": "open"}
            ],
        ),
    )
    assert [r.id for r in node_class.status.capacity_reservations] == [opened]
    assert targeted != opened


async def test_reserved_offerings_carry_the_reservation_count_and_labels(
    aws_account: Account, aws_settings: AWSSettings, aws_clients: AWSClients
) -> None:
    faults = aws_account.faults
    team = uuid.uuid4().hex[:8]
    zone = _zone(aws_account)
    rid = faults.add_capacity_reservation(TYPE, zone, count=2, tags={"team": team})
    block = faults.add_capacity_reservation(
        "c5.large",
        zone,
        tags={"team": team},
        reservation_type="capacity-block",
        end=datetime.datetime.now(datetime.UTC) + datetime.timedelta(minutes=30),
    )
    provider, node_class = await _provider_with(
        aws_settings,
        aws_clients,
        node_class_manifest(
            f"crs-{team}", capacityReservationSelectorTerms=[{"tags": {"team": team}}]
        ),
    )
    offerings = dict(await _reserved_offerings(provider, node_class))
    reserved = offerings[TYPE]
    assert (reserved.zone, reserved.reservation_id, reserved.reservation_capacity) == (zone, rid, 2)
    assert reserved.available
    labels = reserved.requirements.labels()
    assert labels[aws.LABEL_CAPACITY_RESERVATION_ID] == rid
    assert labels[aws.LABEL_CAPACITY_RESERVATION_TYPE] == "default"
    assert labels[aws.LABEL_CAPACITY_RESERVATION_INTERRUPTIBLE] == "false"
    assert labels[wk.LABEL_CAPACITY_TYPE] == "reserved"
    # already paid for: far below the on-demand price, yet not zero
    on_demand = provider.pricing.price(TYPE, zone, wk.CAPACITY_TYPE_ON_DEMAND)
    assert on_demand is not None and 0 < reserved.price < on_demand / 1000
    # a capacity block in its last 40 minutes takes no new instance
    assert offerings["c5.large"].reservation_id == block
    assert not offerings["c5.large"].available


async def test_a_reserved_nodeclaim_launches_into_its_reservation(
    aws_account: Account, aws_settings: AWSSettings, aws_clients: AWSClients
) -> None:
    faults: FleetFaults = aws_account.faults
    team = uuid.uuid4().hex[:8]
    zone = _zone(aws_account)
    rid = faults.add_capacity_reservation(TYPE, zone, count=2, tags={"team": team})
    name = f"crs-{team}"
    provider, _ = await _provider_with(
        aws_settings,
        aws_clients,
        node_class_manifest(name, capacityReservationSelectorTerms=[{"tags": {"team": team}}]),
    )
    pool = make_nodepool(_ref(name), name="team-a")
    asked = make_nodeclaim(
        pool,
        requests={"cpu": "1"},
        requirements=[
            RESERVED,
            {"key": aws.LABEL_CAPACITY_RESERVATION_ID, "operator": "In", "values": [rid]},
        ],
    )
    before = len(faults.requests)
    launched = await provider.create(asked)
    (request,) = faults.requests[before:]
    target = request["target_capacity_specification"]
    assert target["DefaultTargetCapacityType"] == "on-demand"
    assert request["on_demand_options"] == {"AllocationStrategy": "lowest-price"}
    (config,) = request["launch_template_configs"]
    assert {(o["InstanceType"], o["AvailabilityZone"]) for o in config["Overrides"]} == {
        (TYPE, zone)
    }
    data = _template_data(aws_account, config["LaunchTemplateSpecification"]["LaunchTemplateName"])
    assert data["CapacityReservationSpecification"] == {
        "CapacityReservationPreference": "capacity-reservations-only",
        "CapacityReservationTarget": {"CapacityReservationId": rid},
    }
    assert "InstanceMarketOptions" not in data
    labels = launched.metadata.labels
    assert labels[wk.LABEL_CAPACITY_TYPE] == "reserved"
    assert labels[aws.LABEL_CAPACITY_RESERVATION_ID] == rid
    assert labels[aws.LABEL_CAPACITY_RESERVATION_TYPE] == "default"
    assert labels[aws.LABEL_CAPACITY_RESERVATION_INTERRUPTIBLE] == "false"
    assert labels[wk.LABEL_INSTANCE_TYPE] == TYPE
    # the slot is counted at once, before EC2 is described again
    assert provider.reservations.available(rid) == 1
    assert faults.capacity_reservations[rid]["AvailableInstanceCount"] == 1
    # read back from EC2, the instance is in the reservation
    described = await provider.get(launched.status.provider_id or "")
    assert described.metadata.labels[wk.LABEL_CAPACITY_TYPE] == "reserved"
    assert described.metadata.labels[aws.LABEL_CAPACITY_RESERVATION_ID] == rid
    assert described.metadata.labels[aws.LABEL_CAPACITY_RESERVATION_TYPE] == "default"
    # terminating it gives the slot back, in EC2 and at once in karpy's count
    await provider.delete(launched)
    assert faults.capacity_reservations[rid]["AvailableInstanceCount"] == 2
    assert provider.reservations.available(rid) == 2


async def test_a_capacity_block_launches_with_the_capacity_block_market_type(
    aws_account: Account, aws_settings: AWSSettings, aws_clients: AWSClients
) -> None:
    faults: FleetFaults = aws_account.faults
    team = uuid.uuid4().hex[:8]
    zone = _zone(aws_account)
    rid = faults.add_capacity_reservation(
        TYPE,
        zone,
        tags={"team": team},
        reservation_type="capacity-block",
        end=datetime.datetime.now(datetime.UTC) + datetime.timedelta(hours=3),
    )
    name = f"crs-{team}"
    provider, _ = await _provider_with(
        aws_settings,
        aws_clients,
        node_class_manifest(name, capacityReservationSelectorTerms=[{"tags": {"team": team}}]),
    )
    asked = make_nodeclaim(
        make_nodepool(_ref(name), name="team-a"), requests={"cpu": "1"}, requirements=[RESERVED]
    )
    before = len(faults.requests)
    launched = await provider.create(asked)
    (request,) = faults.requests[before:]
    assert request["target_capacity_specification"]["DefaultTargetCapacityType"] == (
        "capacity-block"
    )
    assert not request.get("on_demand_options")
    (config,) = request["launch_template_configs"]
    data = _template_data(aws_account, config["LaunchTemplateSpecification"]["LaunchTemplateName"])
    assert data["InstanceMarketOptions"] == {"MarketType": "capacity-block"}
    assert data["CapacityReservationSpecification"]["CapacityReservationTarget"] == {
        "CapacityReservationId": rid
    }
    assert launched.metadata.labels[aws.LABEL_CAPACITY_RESERVATION_TYPE] == "capacity-block"
    described = await provider.get(launched.status.provider_id or "")
    assert described.metadata.labels[aws.LABEL_CAPACITY_RESERVATION_TYPE] == "capacity-block"
    assert described.metadata.labels[wk.LABEL_CAPACITY_TYPE] == "reserved"
    await provider.delete(launched)


async def test_a_full_reservation_is_marked_unavailable_not_the_instance_type(
    aws_account: Account, aws_settings: AWSSettings, aws_clients: AWSClients
) -> None:
    faults: FleetFaults = aws_account.faults
    team = uuid.uuid4().hex[:8]
    zone = _zone(aws_account)
    rid = faults.add_capacity_reservation(TYPE, zone, count=1, tags={"team": team})
    name = f"crs-{team}"
    provider, node_class = await _provider_with(
        aws_settings,
        aws_clients,
        node_class_manifest(name, capacityReservationSelectorTerms=[{"tags": {"team": team}}]),
    )
    # someone else took the last instance since karpy described the reservation
    faults.capacity_reservations[rid]["AvailableInstanceCount"] = 0
    asked = make_nodeclaim(
        make_nodepool(_ref(name), name="team-a"), requests={"cpu": "1"}, requirements=[RESERVED]
    )
    with pytest.raises(InsufficientCapacityError) as raised:
        await provider.create(asked)
    assert "ReservationCapacityExceeded" in str(raised.value)
    # the core must not mark the type's on-demand offerings unavailable for it
    assert raised.value.offerings == ()
    assert provider.reservations.available(rid) == 0
    assert not provider.unavailable.marked()
    types = await provider.catalog.instance_types(NodeClassShape.of(node_class))
    (it,) = [it for it in types if it.name == TYPE]
    (reserved,) = [o for o in it.offerings if o.reserved]
    assert not reserved.available
    assert any(o.available and o.capacity_type == "on-demand" for o in it.offerings)


def _claim(name: str, rid: str, reservation_type: str = "default") -> dict[str, Any]:
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodeClaim",
        "metadata": {
            "name": name,
            "finalizers": ["karpenter.sh/termination"],
            "labels": {
                wk.LABEL_NODEPOOL: "team-a",
                wk.LABEL_CAPACITY_TYPE: "reserved",
                aws.LABEL_CAPACITY_RESERVATION_ID: rid,
                aws.LABEL_CAPACITY_RESERVATION_TYPE: reservation_type,
            },
        },
        "spec": {"nodeClassRef": _ref("default").to_dict(), "requirements": []},
        "status": {"providerID": f"aws:///us-east-1a/i-{uuid.uuid4().hex[:17]}"},
    }


async def test_a_capacity_block_about_to_end_has_its_nodeclaims_deleted(
    aws_account: Account, aws_settings: AWSSettings, aws_clients: AWSClients
) -> None:
    faults = aws_account.faults
    zone = _zone(aws_account)
    now = datetime.datetime.now(datetime.UTC)
    ending = faults.add_capacity_reservation(
        TYPE, zone, reservation_type="capacity-block", end=now + datetime.timedelta(minutes=39)
    )
    later = faults.add_capacity_reservation(
        TYPE, zone, reservation_type="capacity-block", end=now + datetime.timedelta(minutes=41)
    )
    odcr = faults.add_capacity_reservation(TYPE, zone, end=now + datetime.timedelta(minutes=5))
    provider = AWSCloudProvider(
        settings=aws_settings, clients=aws_clients, node_classes=_none, owns_clients=False
    )
    client = FakeClient()
    client.add(NODE_CLAIM_KIND, _claim("in-ending-block", ending, "capacity-block"))
    client.add(NODE_CLAIM_KIND, _claim("in-later-block", later, "capacity-block"))
    client.add(NODE_CLAIM_KIND, _claim("in-odcr", odcr))
    result = await ReservationExpirationController(provider.reservations, client).reconcile()
    deleted = {c.name for c in client.calls if c.verb == "delete"}
    # drained 40 minutes before the end (termination cordons and drains a deleted
    # NodeClaim's node), not before; an ODCR ending is not a capacity block
    assert deleted == {"in-ending-block"}
    ended = client.peek(NODE_CLAIM_KIND, "in-ending-block")
    assert ended is not None and ended["metadata"].get("deletionTimestamp")
    assert result.requeue_after == 60.0


async def test_the_capacity_reservation_interruption_warning_deletes_the_nodeclaim(
    aws_account: Account, aws_settings: AWSSettings, aws_clients: AWSClients
) -> None:
    faults = aws_account.faults
    rid = faults.add_capacity_reservation(TYPE, _zone(aws_account), count=4)
    provider = AWSCloudProvider(
        settings=aws_settings, clients=aws_clients, node_classes=_none, owns_clients=False
    )
    await provider.reservations.select(
        [CapacityReservationSelectorTerm.model_validate({"id": rid})]
    )
    assert provider.reservations.available(rid) == 4
    client = FakeClient()
    claim = client.add(NODE_CLAIM_KIND, _claim("interrupted", rid))
    iid = claim["status"]["providerID"].rsplit("/", 1)[-1]
    message = parse_message(
        json.dumps(
            {
                "version": "0",
                "id": str(uuid.uuid4()),
                "detail-type": "EC2 Capacity Reservation Instance Interruption Warning",
                "source": "aws.ec2",
                "time": "2026-11-23T19:00:00Z",
                "region": REGION,
                "detail": {"instance-id": iid, "instance-action": "terminate"},
            }
        )
    )
    assert (message.kind, message.instance_ids) == (CAPACITY_RESERVATION_INTERRUPTED, (iid,))
    recorder = FakeEventRecorder()
    found = await InterruptionHandler(provider, client, recorder).act(
        message.kind, message.instance_ids
    )
    assert found == ["interrupted"]
    stored = client.peek(NODE_CLAIM_KIND, "interrupted")
    assert stored is not None and stored["metadata"].get("deletionTimestamp")
    assert "CapacityReservationInstanceInterrupted" in recorder.reasons("interrupted")
    # the owner takes the capacity back: no launch into it until it is described again
    assert provider.reservations.available(rid) == 0


async def _none(_: str) -> EC2NodeClass | None:
    return None


async def test_of_two_reservations_in_one_zone_the_launch_targets_the_fuller(
    aws_account: Account, aws_settings: AWSSettings, aws_clients: AWSClients
) -> None:
    faults: FleetFaults = aws_account.faults
    team = uuid.uuid4().hex[:8]
    zone = _zone(aws_account)
    faults.add_capacity_reservation(TYPE, zone, count=1, tags={"team": team})
    fuller = faults.add_capacity_reservation(TYPE, zone, count=3, tags={"team": team})
    name = f"crs-{team}"
    provider, _ = await _provider_with(
        aws_settings,
        aws_clients,
        node_class_manifest(name, capacityReservationSelectorTerms=[{"tags": {"team": team}}]),
    )
    asked = make_nodeclaim(
        make_nodepool(_ref(name), name="team-a"), requests={"cpu": "1"}, requirements=[RESERVED]
    )
    before = len(faults.requests)
    launched = await provider.create(asked)
    (request,) = faults.requests[before:]
    # the fleet names a type and zone, not a reservation: one reservation per pool, the
    # one with the most instances left (Karpenter's ReservedOfferingFilter)
    (config,) = request["launch_template_configs"]
    data = _template_data(aws_account, config["LaunchTemplateSpecification"]["LaunchTemplateName"])
    target = data["CapacityReservationSpecification"]["CapacityReservationTarget"]
    assert target == {"CapacityReservationId": fuller}
    assert launched.metadata.labels[aws.LABEL_CAPACITY_RESERVATION_ID] == fuller


def test_an_interruptible_reservation_is_offered_but_never_available() -> None:
    # karpy's EC2 API has no ReservedCapacityOptions yet: launching into an interruptible
    # ODCR as into a default one would be refused, so its offering is never available
    slots = [
        ReservedSlot(id="cr-1", instance_type=TYPE, zone="us-east-1a"),
        ReservedSlot(id="cr-2", instance_type=TYPE, zone="us-east-1a", interruptible=True),
    ]
    offerings = reserved_offerings(
        TYPE,
        slots,
        zones={"us-east-1a": "use1-az1"},
        offered_zones=["us-east-1a"],
        on_demand_price=0.096,
        capacity=lambda _: 3,
    )
    available = {o.reservation_id: o.available for o in offerings}
    assert available == {"cr-1": True, "cr-2": False}
    (interruptible,) = [o for o in offerings if o.reservation_id == "cr-2"]
    assert interruptible.requirements.labels()[aws.LABEL_CAPACITY_RESERVATION_INTERRUPTIBLE] == (
        "true"
    )


async def test_two_launches_into_a_reservation_with_one_instance_left_launch_one(
    aws_account: Account, aws_settings: AWSSettings, aws_clients: AWSClients
) -> None:
    faults: FleetFaults = aws_account.faults
    team = uuid.uuid4().hex[:8]
    rid = faults.add_capacity_reservation(TYPE, _zone(aws_account), count=1, tags={"team": team})
    name = f"crs-{team}"
    provider, _ = await _provider_with(
        aws_settings,
        aws_clients,
        node_class_manifest(name, capacityReservationSelectorTerms=[{"tags": {"team": team}}]),
    )
    pool = make_nodepool(_ref(name), name="team-a")
    # identical NodeClaims: their CreateFleet calls are merged into one of capacity 2
    claims = [
        make_nodeclaim(pool, requests={"cpu": "1"}, requirements=[RESERVED]) for _ in range(2)
    ]
    outcomes = await asyncio.gather(*(provider.create(c) for c in claims), return_exceptions=True)
    launched = [o for o in outcomes if not isinstance(o, BaseException)]
    refused = [o for o in outcomes if isinstance(o, BaseException)]
    assert len(launched) == 1 and len(refused) == 1, outcomes
    assert isinstance(refused[0], InsufficientCapacityError)
    assert faults.capacity_reservations[rid]["AvailableInstanceCount"] == 0
    assert provider.reservations.available(rid) == 0
    for claim in launched:
        assert isinstance(claim, NodeClaim)
        await provider.delete(claim)


@pytest.mark.parametrize("gate", [True, False], ids=["ReservedCapacity=true", "=false"])
async def test_an_on_demand_launch_opts_out_of_open_reservations_under_the_gate(
    aws_account: Account, aws_settings: AWSSettings, aws_clients: AWSClients, gate: bool
) -> None:
    # Karpenter AWS's targeted launch mode: with ReservedCapacity on, a launch that is not
    # into a reservation sets CapacityReservationPreference none, so an open ODCR never
    # absorbs it behind the reserved offerings' count; with the gate off, nothing is set.
    faults: FleetFaults = aws_account.faults
    team = uuid.uuid4().hex[:8]
    open_odcr = faults.add_capacity_reservation(TYPE, _zone(aws_account), count=2,
                                                match="open", tags={"team": team})  # fmt: skip
    name = f"od-{team}"
    provider, _ = await _provider_with(aws_settings, aws_clients, node_class_manifest(name))
    provider.reserved_capacity = gate
    pool = make_nodepool(_ref(name), name="team-od")
    asked = make_nodeclaim(pool, requests={"cpu": "1"}, requirements=[
        {"key": wk.LABEL_CAPACITY_TYPE, "operator": "In", "values": ["on-demand"]},
        {"key": wk.LABEL_INSTANCE_TYPE, "operator": "In", "values": [TYPE]},
        {"key": wk.LABEL_ZONE, "operator": "In", "values": [_zone(aws_account)]},
    ])  # fmt: skip
    before = len(faults.requests)
    launched = await provider.create(asked)
    (request,) = faults.requests[before:]
    (config,) = request["launch_template_configs"]
    data = _template_data(aws_account, config["LaunchTemplateSpecification"]["LaunchTemplateName"])
    instance_id = (launched.status.provider_id or "").rsplit("/", 1)[-1]
    # (another test's open ODCR of the same type and zone may be the one EC2 picks)
    absorbed = faults.reserved_instances.get(instance_id)
    try:
        if gate:
            assert data["CapacityReservationSpecification"] == {
                "CapacityReservationPreference": "none"
            }
            assert absorbed is None  # open ODCRs kept their slots for reserved launches
            assert faults.capacity_reservations[open_odcr]["AvailableInstanceCount"] == 2
        else:
            assert "CapacityReservationSpecification" not in data
            assert absorbed is not None  # EC2 placed the launch in an open ODCR
        # either way karpy reads it back as on-demand
        read = await provider.get(launched.status.provider_id or "")
        assert read.metadata.labels[wk.LABEL_CAPACITY_TYPE] == "on-demand"
    finally:
        await provider.delete(launched)


async def test_with_the_gate_off_no_reserved_offering_is_built_nor_read_back(
    aws_account: Account, aws_settings: AWSSettings, aws_clients: AWSClients
) -> None:
    # FEATURE_GATES=ReservedCapacity=false: Karpenter AWS's open mode, end to end
    faults: FleetFaults = aws_account.faults
    team = uuid.uuid4().hex[:8]
    rid = faults.add_capacity_reservation(TYPE, _zone(aws_account), count=2, tags={"team": team})
    terms = [{"tags": {"team": team}}]
    provider, node_class = await _provider_with(
        aws_settings, aws_clients,
        node_class_manifest(f"off-{team}", capacityReservationSelectorTerms=terms),
    )  # fmt: skip
    assert [o.reservation_id for _, o in await _reserved_offerings(provider, node_class)] == [rid]
    provider.reserved_capacity = False
    assert await _reserved_offerings(provider, node_class) == []
    instance = {"InstanceId": "i-0123456789abcdef0", "InstanceType": TYPE,
                "CapacityReservationId": rid, "Placement": {"AvailabilityZone": "us-east-1a"},
                "Tags": []}  # fmt: skip
    read = nodeclaim_from_instance(instance, None, region=REGION, reserved_capacity=False)
    assert read.metadata.labels[wk.LABEL_CAPACITY_TYPE] == "on-demand"
    assert aws.LABEL_CAPACITY_RESERVATION_ID not in read.metadata.labels
