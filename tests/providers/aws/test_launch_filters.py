"""The launch choices Karpenter AWS makes before CreateFleet: exotic types left out
unless needed, spot offerings dearer than on-demand left out, and a subnet out of
addresses avoided without giving up its zone."""

from __future__ import annotations

from typing import Any

import boto3
import pytest
from conftest import DISCOVERY, node_class_manifest, resolved
from karpy_aws import AWSCloudProvider, AWSSettings
from karpy_aws._clients import AWSClients
from karpy_aws._fleet import PlanCache, plan_fleet
from karpy_aws.apis import EC2NodeClass
from moto_harness import Account, FleetFaults

from karpy.apis import labels as wk
from karpy.apis.v1 import NodeClassReference
from karpy.cloudprovider import (
    InstanceType,
    InsufficientCapacityError,
    Offering,
    UnavailableOfferings,
)
from karpy.cloudprovider.testing import make_nodeclaim, make_nodepool

REF = NodeClassReference(group="karpenter.k8s.aws", kind="EC2NodeClass", name="default")
ON_DEMAND = {"key": wk.LABEL_CAPACITY_TYPE, "operator": "In", "values": ["on-demand"]}


def families(*names: str) -> dict[str, Any]:
    return {"key": "karpenter.k8s.aws/instance-family", "operator": "In", "values": list(names)}


async def _overrides(provider: AWSCloudProvider, claim: Any) -> list[str]:
    node_class = await provider._ready_node_class(claim)
    types = await provider.get_instance_types(make_nodepool(REF))
    plan = plan_fleet(claim, node_class, types, provider.unavailable)
    return sorted({o.instance_type.name for o in plan.overrides})


async def test_metal_sizes_are_left_out_unless_only_they_fit(
    aws_provider: AWSCloudProvider,
) -> None:
    pool = make_nodepool(REF)
    generic = make_nodeclaim(pool, requests={"cpu": "1"}, requirements=[ON_DEMAND, families("m5")])
    names = await _overrides(aws_provider, generic)
    assert "m5.large" in names and not any("metal" in n for n in names), names
    big = {"key": wk.LABEL_INSTANCE_TYPE, "operator": "In", "values": ["m5.large", "m5.metal"]}
    needs_metal = make_nodeclaim(pool, requests={"cpu": "60"}, requirements=[ON_DEMAND, big])
    assert await _overrides(aws_provider, needs_metal) == ["m5.metal"]


def test_gpu_types_are_left_out_unless_the_pods_request_gpus() -> None:
    gpu = _type("gpu.xlarge", 0.05, 0.05, gpus=1)
    plain = _type("plain.xlarge", 0.20, 0.20)
    pool = make_nodepool(REF)
    claim = make_nodeclaim(pool, requests={"cpu": "1"}, requirements=[ON_DEMAND])
    plan = plan_fleet(claim, _node_class(), [gpu, plain], UnavailableOfferings())
    # the GPU type is cheaper, but a pod that asks for no GPU does not get one
    assert [o.instance_type.name for o in plan.overrides] == ["plain.xlarge"]
    wants_gpu = make_nodeclaim(
        pool, requests={"cpu": "1", "nvidia.com/gpu": "1"}, requirements=[ON_DEMAND]
    )
    plan = plan_fleet(wants_gpu, _node_class(), [gpu, plain], UnavailableOfferings())
    assert [o.instance_type.name for o in plan.overrides] == ["gpu.xlarge"]


def _node_class() -> EC2NodeClass:
    manifest: dict[str, Any] = node_class_manifest("synthetic")
    manifest["status"] = {
        "subnets": [{"id": "subnet-a1", "zone": "test-1a"}, {"id": "subnet-a2", "zone": "test-1a"}],
        "amis": [{"id": "ami-1", "requirements": []}],
    }
    return EC2NodeClass.model_validate(manifest)


def _type(name: str, on_demand: float, spot: float, *, gpus: int = 0) -> InstanceType:
    capacity = {"cpu": 4000, "memory": 16 * 2**30, "pods": 50}
    if gpus:
        capacity["nvidia.com/gpu"] = gpus
    return InstanceType.build(
        name,
        capacity=capacity,
        offerings=[Offering("test-1a", "on-demand", on_demand), Offering("test-1a", "spot", spot)],
    )


def test_spot_offerings_dearer_than_the_cheapest_on_demand_are_not_asked_for() -> None:
    types = [_type("cheap.large", 0.10, 0.04), _type("pricey.large", 0.20, 0.15)]
    pool = make_nodepool(REF)
    claim = make_nodeclaim(pool)  # spot or on-demand
    plan = plan_fleet(claim, _node_class(), types, UnavailableOfferings())
    assert plan.capacity_type == "spot"
    # pricey.large's spot ($0.15) costs more than cheap.large on demand ($0.10)
    assert [o.instance_type.name for o in plan.overrides] == ["cheap.large"]
    # every spot offering dearer than on-demand: on-demand, not a fleet with nothing in it
    dear_spot = [_type("cheap.large", 0.10, 0.12), _type("pricey.large", 0.20, 0.25)]
    plan = plan_fleet(claim, _node_class(), dear_spot, UnavailableOfferings())
    assert plan.capacity_type == "on-demand"
    assert [o.instance_type.name for o in plan.overrides] == ["cheap.large", "pricey.large"]
    only_spot = make_nodeclaim(
        pool, requirements=[{"key": wk.LABEL_CAPACITY_TYPE, "operator": "In", "values": ["spot"]}]
    )
    plan = plan_fleet(only_spot, _node_class(), types, UnavailableOfferings())
    assert sorted(o.instance_type.name for o in plan.overrides) == ["cheap.large", "pricey.large"]


def test_a_full_subnet_is_skipped_for_another_of_its_zone() -> None:
    types = [_type("cheap.large", 0.10, 0.04)]
    claim = make_nodeclaim(make_nodepool(REF), requirements=[ON_DEMAND])
    unavailable = UnavailableOfferings()
    assert {
        o.subnet_id for o in plan_fleet(claim, _node_class(), types, unavailable).overrides
    } == {"subnet-a1"}
    unavailable.mark_subnet("subnet-a1")
    plan = plan_fleet(claim, _node_class(), types, unavailable)
    assert {o.subnet_id for o in plan.overrides} == {"subnet-a2"}
    assert unavailable.marked() == []  # no offering given up
    unavailable.mark_subnet("subnet-a2")
    with pytest.raises(InsufficientCapacityError, match="subnet-a1, subnet-a2"):
        plan_fleet(claim, _node_class(), types, unavailable)


async def test_insufficient_free_addresses_marks_the_subnet_and_the_next_launch_uses_another(
    aws_settings: AWSSettings,
    aws_clients: AWSClients,
    aws_account: Account,
    fleet_faults: FleetFaults,
) -> None:
    ec2 = boto3.client("ec2", region_name=aws_settings.region, endpoint_url=aws_account.url)
    first, zone = next(iter(aws_account.subnets.items()))
    vpc = ec2.describe_subnets(SubnetIds=[first])["Subnets"][0]["VpcId"]
    # a small subnet sorts after the account's large ones (fewest free addresses last)
    cidrs = {s["CidrBlock"] for s in ec2.describe_subnets()["Subnets"]}
    cidr = next(f"172.31.{n}.0/28" for n in range(200, 255) if f"172.31.{n}.0/28" not in cidrs)
    second = ec2.create_subnet(VpcId=vpc, CidrBlock=cidr, AvailabilityZone=zone)["Subnet"][
        "SubnetId"
    ]
    ec2.create_tags(Resources=[second], Tags=[{"Key": "karpy-test/extra-subnet", "Value": "1"}])
    node_class = await resolved(
        aws_clients,
        node_class_manifest(
            "two-subnets",
            subnetSelectorTerms=[{"tags": DISCOVERY}, {"tags": {"karpy-test/extra-subnet": "1"}}],
        ),
    )
    assert [s.id for s in node_class.status.subnets if s.zone == zone] == [first, second]

    async def get(name: str) -> EC2NodeClass | None:
        return node_class

    provider = AWSCloudProvider(
        settings=aws_settings, clients=aws_clients, node_classes=get, owns_clients=False
    )
    pool = make_nodepool(
        NodeClassReference(group=REF.group, kind=REF.kind, name="two-subnets"), name="subnets"
    )
    in_zone = {"key": wk.LABEL_ZONE, "operator": "In", "values": [zone]}
    fleet_faults.full_subnets.add(first)
    try:
        with pytest.raises(InsufficientCapacityError, match="InsufficientFreeAddressesInSubnet"):
            await provider.create(make_nodeclaim(pool, requirements=[ON_DEMAND, in_zone]))
        assert provider.unavailable.is_subnet_unavailable(first)
        assert provider.unavailable.marked() == []  # the zone's offerings stay available
        launched = await provider.create(make_nodeclaim(pool, requirements=[ON_DEMAND, in_zone]))
        iid = launched.status.provider_id.rsplit("/", 1)[-1]  # type: ignore[union-attr]
        instance = ec2.describe_instances(InstanceIds=[iid])["Reservations"][0]["Instances"][0]
        assert instance["SubnetId"] == second
        assert launched.metadata.labels[wk.LABEL_ZONE] == zone
        await provider.delete(launched)
    finally:
        await provider.aclose()
        ec2.delete_subnet(SubnetId=second)


def test_a_cached_plan_is_dropped_once_an_offering_it_used_is_marked() -> None:
    types = [_type("cheap.large", 0.10, 0.04), _type("pricey.large", 0.20, 0.15)]
    claim = make_nodeclaim(make_nodepool(REF), requirements=[ON_DEMAND])
    unavailable = UnavailableOfferings()
    plans = PlanCache()
    first = plans.plan(claim, _node_class(), types, unavailable, now=0.0)
    assert plans.plan(claim, _node_class(), types, unavailable, now=1.0) is first
    unavailable.mark(first.overrides[0].key, reason="InsufficientInstanceCapacity")
    again = plans.plan(claim, _node_class(), types, unavailable, now=2.0)
    assert [o.instance_type.name for o in again.overrides] == ["pricey.large"]
