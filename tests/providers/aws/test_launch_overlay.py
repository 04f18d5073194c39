"""A NodeClaim a NodeOverlay priced (``karpenter.sh/price-overlay-applied``) launches
through CreateFleet as Karpenter AWS launches it: ``prioritized`` on-demand or
``capacity-optimized-prioritized`` spot, each override's ``Priority`` following the
order in which the NodeClaim lists its instance types (the overlaid prices, which EC2
does not know), not the cloud's price."""

from __future__ import annotations

from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from karpy_aws import AWSCloudProvider

from karpy.apis import labels as wk
from karpy.apis.v1 import NodeClassReference
from karpy.cloudprovider.testing import make_nodeclaim, make_nodepool

REF = NodeClassReference(group="karpenter.k8s.aws", kind="EC2NodeClass", name="default")
#: listed as the core lists them after an overlay made the larger type the cheaper
LISTED = ["m5.xlarge", "c5.large"]
OVERLAID = {"karpenter.sh/price-overlay-applied": "true"}


async def launch(
    provider: AWSCloudProvider, capacity_type: str, annotations: dict[str, str]
) -> tuple[dict[str, Any], str]:
    """The CreateFleet request for a NodeClaim listing LISTED, and the type launched."""
    sent: list[dict[str, Any]] = []
    original = provider.clients.ec2.create_fleet

    async def record(**kwargs: Any) -> Any:
        sent.append(kwargs)
        return await original(**kwargs)

    asked = make_nodeclaim(
        make_nodepool(REF, name="overlaid"),
        requests={"cpu": "1"},
        requirements=[
            {"key": wk.LABEL_CAPACITY_TYPE, "operator": "In", "values": [capacity_type]},
            {"key": wk.LABEL_INSTANCE_TYPE, "operator": "In", "values": LISTED},
        ],
    )
    asked.metadata.annotations.update(annotations)
    provider.clients.ec2.create_fleet = record
    try:
        launched = await provider.create(asked)
    finally:
        provider.clients.ec2.create_fleet = original
    await provider.delete(launched)
    (request,) = sent
    return request, launched.metadata.labels[wk.LABEL_INSTANCE_TYPE]


def priorities(request: dict[str, Any]) -> list[tuple[float, str]]:
    return sorted(
        (o["Priority"], o["InstanceType"])
        for c in request["LaunchTemplateConfigs"]
        for o in c["Overrides"]
    )


async def test_an_overlaid_on_demand_nodeclaim_launches_prioritized_in_listed_order(
    aws_provider: AWSCloudProvider,
) -> None:
    plain, plain_type = await launch(aws_provider, "on-demand", {})
    assert plain["OnDemandOptions"] == {"AllocationStrategy": "lowest-price"}
    assert plain_type == "c5.large"  # the cloud's cheapest

    request, launched = await launch(aws_provider, "on-demand", OVERLAID)
    assert request["OnDemandOptions"] == {"AllocationStrategy": "prioritized"}
    assert "SpotOptions" not in request
    ranked = [name for _, name in priorities(request)]
    # every m5.xlarge override (each zone) ranks before every c5.large one
    assert ranked == sorted(ranked, key=LISTED.index)
    assert len({p for p, _ in priorities(request)}) == len(ranked), "priorities tie"
    # EC2 (moto, gap 11) launches the highest-priority override: the listed-first type
    assert launched == "m5.xlarge"


async def test_an_overlaid_spot_nodeclaim_launches_capacity_optimized_prioritized(
    aws_provider: AWSCloudProvider,
) -> None:
    plain, _ = await launch(aws_provider, "spot", {})
    assert plain["SpotOptions"] == {"AllocationStrategy": "price-capacity-optimized"}

    request, launched = await launch(aws_provider, "spot", OVERLAID)
    assert request["SpotOptions"] == {"AllocationStrategy": "capacity-optimized-prioritized"}
    assert "OnDemandOptions" not in request
    ranked = [name for _, name in priorities(request)]
    assert ranked == sorted(ranked, key=LISTED.index)
    assert launched == "m5.xlarge"


def test_the_moto_harness_refuses_an_allocation_strategy_ec2_does_not_know(
    aws_provider: AWSCloudProvider,
) -> None:
    ec2 = boto3.client(
        "ec2",
        region_name=aws_provider.settings.region,
        endpoint_url=aws_provider.settings.endpoint_url,
    )
    with pytest.raises(ClientError) as info:
        ec2.create_fleet(
            Type="instant",
            LaunchTemplateConfigs=[
                {"LaunchTemplateSpecification": {"LaunchTemplateName": "absent", "Version": "1"}}
            ],
            TargetCapacitySpecification={
                "TotalTargetCapacity": 1,
                "DefaultTargetCapacityType": "on-demand",
            },
            OnDemandOptions={"AllocationStrategy": "cheapest-first"},
        )
    assert info.value.response["Error"]["Code"] == "InvalidParameterValue"
