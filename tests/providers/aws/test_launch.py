"""Launching through CreateFleet against moto: the request's shape, tags, capacity
errors (injected at the test server) and throttling."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import boto3
import pytest
from iam_check import IAMCheck
from karpy_aws import AWSCloudProvider
from karpy_aws._clients import AWSClients
from karpy_aws._instances import instance_id, nodepool_tags
from karpy_aws._launchtemplates import LaunchTemplates
from moto_harness import CLUSTER, FleetFaults

from karpy.apis import labels as wk
from karpy.apis.v1 import NodeClassReference
from karpy.cloudprovider import (
    InsufficientCapacityError,
    NodeClassNotReadyError,
    OfferingKey,
)
from karpy.cloudprovider.testing import make_nodeclaim, make_nodepool

REF = NodeClassReference(group="karpenter.k8s.aws", kind="EC2NodeClass", name="default")
ON_DEMAND = {"key": wk.LABEL_CAPACITY_TYPE, "operator": "In", "values": ["on-demand"]}


def forget_unavailable(provider: AWSCloudProvider) -> None:
    """Clear the provider's unavailable-offerings cache (the provider is session-wide)."""
    for key in provider.unavailable.marked():
        provider.unavailable._until.pop(key, None)
    provider.unavailable.generation += 1


def _ec2(provider: AWSCloudProvider) -> Any:
    return boto3.client(
        "ec2", region_name=provider.settings.region, endpoint_url=provider.settings.endpoint_url
    )


async def test_create_fleet_request_has_the_overrides_and_tags(
    aws_provider: AWSCloudProvider,
) -> None:
    sent: list[dict[str, Any]] = []
    original = aws_provider.clients.ec2.create_fleet

    async def record(**kwargs: Any) -> Any:
        sent.append(kwargs)
        return await original(**kwargs)

    aws_provider.clients.ec2.create_fleet = record
    try:
        pool = make_nodepool(REF, name="team-a")
        asked = make_nodeclaim(
            pool,
            requests={"cpu": "1", "memory": "2Gi"},
            requirements=[
                ON_DEMAND,
                {
                    "key": "karpenter.k8s.aws/instance-family",
                    "operator": "In",
                    "values": ["m5", "c5"],
                },
            ],
        )
        launched = await aws_provider.create(asked)
    finally:
        aws_provider.clients.ec2.create_fleet = original
    try:
        (request,) = sent
        assert request["Type"] == "instant"
        assert request["OnDemandOptions"] == {"AllocationStrategy": "lowest-price"}
        assert request["TargetCapacitySpecification"]["DefaultTargetCapacityType"] == "on-demand"
        overrides = [o for c in request["LaunchTemplateConfigs"] for o in c["Overrides"]]
        assert {o["InstanceType"].split(".")[0] for o in overrides} == {"m5", "c5"}
        assert all(o["ImageId"].startswith("ami-") and o["SubnetId"] for o in overrides)
        prices = [o["Priority"] for o in overrides]
        assert prices == sorted(prices), "overrides are not cheapest first"
        # the cheapest fitting m5/c5 on-demand: c5.large at $0.085
        assert launched.metadata.labels[wk.LABEL_INSTANCE_TYPE] == "c5.large"
        instance = _ec2(aws_provider).describe_instances(
            InstanceIds=[instance_id(launched.status.provider_id or "")]
        )["Reservations"][0]["Instances"][0]
        tags = {t["Key"]: t["Value"] for t in instance["Tags"]}
        assert tags["karpenter.sh/nodepool"] == "team-a"
        assert tags["karpenter.sh/nodeclaim"] == asked.metadata.name
        assert tags["karpenter.k8s.aws/ec2nodeclass"] == "default"
        assert tags["eks:eks-cluster-name"] == "karpy-test"
        assert tags["kubernetes.io/cluster/karpy-test"] == "owned"
        assert launched.metadata.labels["karpenter.k8s.aws/ec2nodeclass"] == "default"
        assert launched.metadata.annotations["karpenter.k8s.aws/ec2nodeclass-hash"]
    finally:
        await aws_provider.delete(launched)


async def test_insufficient_capacity_marks_the_offering_and_the_next_launch_avoids_it(
    aws_provider: AWSCloudProvider, fleet_faults: FleetFaults
) -> None:
    pool = make_nodepool(REF)
    family = {
        "key": "node.kubernetes.io/instance-type",
        "operator": "In",
        "values": ["c5.large", "m5.large"],
    }
    fleet_faults.no_capacity.add(("c5.large", "*"))
    launched = await aws_provider.create(
        make_nodeclaim(pool, requests={"cpu": "1"}, requirements=[ON_DEMAND, family])
    )
    try:
        # the fleet refused c5.large in every zone and launched the next cheapest
        assert launched.metadata.labels[wk.LABEL_INSTANCE_TYPE] == "m5.large"
        marked = {k for k in aws_provider.unavailable.marked() if k.instance_type == "c5.large"}
        assert (
            OfferingKey("c5.large", launched.metadata.labels[wk.LABEL_ZONE], "on-demand") in marked
        )
        types = {it.name: it for it in await aws_provider.get_instance_types(pool)}
        c5 = [o for o in types["c5.large"].offerings if o.capacity_type == "on-demand"]
        assert c5 and not any(o.available for o in c5)
        # only c5.large allowed now: nothing to ask for, a typed error naming offerings
        fleet_faults.no_capacity.add(("m5.large", "*"))
        only_c5 = {
            "key": "node.kubernetes.io/instance-type",
            "operator": "In",
            "values": ["c5.large"],
        }
        with pytest.raises(InsufficientCapacityError) as info:
            await aws_provider.create(
                make_nodeclaim(pool, requests={"cpu": "1"}, requirements=[ON_DEMAND, only_c5])
            )
        assert "c5.large" in str(info.value)
    finally:
        await aws_provider.delete(launched)
        forget_unavailable(aws_provider)


async def test_fleet_without_instances_raises_insufficient_capacity(
    aws_provider: AWSCloudProvider, fleet_faults: FleetFaults
) -> None:
    pool = make_nodepool(REF)
    only = {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["m5.xlarge"]}
    fleet_faults.no_capacity.add(("m5.xlarge", "*"))
    try:
        with pytest.raises(InsufficientCapacityError) as info:
            await aws_provider.create(make_nodeclaim(pool, requirements=[ON_DEMAND, only]))
        assert {k.instance_type for k in info.value.offerings} == {"m5.xlarge"}
        assert "InsufficientInstanceCapacity" in str(info.value)
    finally:
        forget_unavailable(aws_provider)


async def test_throttled_create_fleet_is_retried_and_launches_exactly_one_instance(
    aws_provider: AWSCloudProvider, fleet_faults: FleetFaults
) -> None:
    pool = make_nodepool(REF)
    fleet_faults.throttle_next = 2
    before = fleet_faults.calls
    asked = make_nodeclaim(pool, requirements=[ON_DEMAND])
    launched = await aws_provider.create(asked)
    try:
        assert fleet_faults.calls - before == 3  # two RequestLimitExceeded, then launched
        found = _ec2(aws_provider).describe_instances(
            Filters=[
                {"Name": "tag:karpenter.sh/nodeclaim", "Values": [asked.metadata.name or ""]},
                {"Name": "instance-state-name", "Values": ["pending", "running"]},
            ]
        )["Reservations"]
        assert sum(len(r["Instances"]) for r in found) == 1
    finally:
        await aws_provider.delete(launched)


async def test_a_missing_or_unready_node_class_is_not_ready(aws_provider: AWSCloudProvider) -> None:
    pool = make_nodepool(NodeClassReference(group=REF.group, kind=REF.kind, name="absent"))
    with pytest.raises(NodeClassNotReadyError, match="'absent' does not exist"):
        await aws_provider.create(make_nodeclaim(pool))
    # not an empty list, which the core would cache past the NodeClass becoming Ready
    with pytest.raises(NodeClassNotReadyError, match="'absent' does not exist"):
        await aws_provider.get_instance_types(pool)


async def test_list_finds_only_this_clusters_instances(aws_provider: AWSCloudProvider) -> None:
    ec2 = _ec2(aws_provider)
    image = ec2.describe_images(Owners=["amazon"])["Images"][0]["ImageId"]
    stranger = ec2.run_instances(
        ImageId=image,
        MinCount=1,
        MaxCount=1,
        TagSpecifications=[
            {
                "ResourceType": "instance",
                "Tags": [
                    {"Key": "karpenter.sh/nodepool", "Value": "x"},
                    {"Key": "karpenter.k8s.aws/ec2nodeclass", "Value": "x"},
                    {"Key": "eks:eks-cluster-name", "Value": "another-cluster"},
                ],
            }
        ],
    )["Instances"][0]["InstanceId"]
    pool = make_nodepool(REF)
    launched = await aws_provider.create(make_nodeclaim(pool, requirements=[ON_DEMAND]))
    try:
        listed = {nc.status.provider_id: nc for nc in await aws_provider.list()}
        ids = set(listed)
        assert launched.status.provider_id in ids
        mine = listed[launched.status.provider_id]
        assert mine.metadata.name == launched.metadata.name
        assert mine.status.capacity == launched.status.capacity
        assert (
            mine.metadata.labels[wk.LABEL_INSTANCE_TYPE]
            == launched.metadata.labels[wk.LABEL_INSTANCE_TYPE]
        )
        assert not any(stranger in (i or "") for i in ids)
    finally:
        await aws_provider.delete(launched)
        ec2.terminate_instances(InstanceIds=[stranger])


async def test_launch_templates_are_made_once_and_collected_when_unused(
    aws_clients: AWSClients,
) -> None:
    now = [1000.0]
    # karpy's own cluster tag is "gc-test" so that GC sees only this test's templates;
    # the policy's tags are the test cluster's, as the IAM check requires
    templates = LaunchTemplates(aws_clients, cluster_name="gc-test", monotonic=lambda: now[0])
    tags = nodepool_tags(CLUSTER, "gc-pool", "gc-class", {})
    data = {"ImageId": "ami-12345678", "UserData": "eA=="}
    other = {"ImageId": "ami-87654321", "UserData": "eA=="}
    before = aws_clients.calls["ec2:CreateLaunchTemplate"]
    names = await asyncio.gather(*(templates.ensure(data, tags=tags) for _ in range(5)))
    assert len(set(names)) == 1
    assert aws_clients.calls["ec2:CreateLaunchTemplate"] - before == 1
    now[0] += 500
    kept = await templates.ensure(other, tags=tags)
    assert sorted(await templates.list_names()) == sorted({names[0], kept})
    now[0] += 200  # the first unused for 700 s, the second for 200 s
    assert await templates.garbage_collect(unused_for=600) == [names[0]]
    assert await templates.list_names() == [kept]
    # a collected template is made again on next use
    assert await templates.ensure(data, tags=tags) == names[0]
    now[0] += 1000
    assert sorted(await templates.garbage_collect(unused_for=600)) == sorted([names[0], kept])


async def test_gc_skips_templates_the_policy_forbids_deleting(
    aws_clients: AWSClients, aws_provider: AWSCloudProvider, iam_check: IAMCheck
) -> None:
    # one template as an older karpy tagged it (its own cluster tag only), one as now
    templates = LaunchTemplates(aws_clients, cluster_name="gc-old", monotonic=lambda: 0.0)
    old = f"karpenter.k8s.aws/old-{uuid.uuid4().hex[:6]}"
    _ec2(aws_provider).create_launch_template(
        LaunchTemplateName=old,
        LaunchTemplateData={"ImageId": "ami-12345678"},
        TagSpecifications=[
            {
                "ResourceType": "launch-template",
                "Tags": [{"Key": "karpenter.k8s.aws/cluster", "Value": "gc-old"}],
            }
        ],
    )
    tagged = await templates.ensure(
        {"ImageId": "ami-12345678"}, tags=nodepool_tags(CLUSTER, "gc-pool", "gc-class", {})
    )
    with iam_check.expecting_denials() as denials:
        assert await templates.garbage_collect(unused_for=-1) == [tagged]
    assert [d.call for d in denials] == ["ec2:DeleteLaunchTemplate"]
    assert await templates.list_names() == [old]
    _ec2(aws_provider).delete_launch_template(LaunchTemplateName=old)
