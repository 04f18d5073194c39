"""Karpenter AWS's own metrics on karpy's /metrics: launch failures per refused offering,
termination failures, and the CreateFleet batcher's window and size (against moto,
whose answers moto_harness.FleetFaults shapes, and a scripted CreateFleet)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from karpy_aws import AWSCloudProvider
from karpy_aws._batcher import CreateFleetBatcher
from karpy_aws._metrics import AWSMetrics, launch_failure_reason
from moto_harness import FleetFaults
from prometheus_client.parser import text_string_to_metric_families
from test_launch import ON_DEMAND, REF, forget_unavailable

from karpy.cloudprovider import InsufficientCapacityError
from karpy.cloudprovider.testing import make_nodeclaim, make_nodepool
from karpy.runtime.telemetry import Metrics


def samples(metrics: Metrics, name: str) -> list[tuple[dict[str, str], float]]:
    return [
        (s.labels, s.value)
        for family in text_string_to_metric_families(metrics.render().decode())
        for s in family.samples if s.name == name
    ]


@pytest.fixture
def metrics(aws_provider: AWSCloudProvider) -> Iterator[Metrics]:
    """The session's provider instrumented into a fresh registry for one test."""
    made = Metrics()
    aws_provider.instrument(made.meter("karpenter"))
    yield made
    aws_provider.metrics = aws_provider.fleets.metrics = None


async def test_each_offering_createfleet_refused_is_a_launch_failure(
    aws_provider: AWSCloudProvider, fleet_faults: FleetFaults, metrics: Metrics
) -> None:
    pool = make_nodepool(REF)
    only = {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["m5.xlarge"]}
    fleet_faults.no_capacity.add(("m5.xlarge", "*"))
    try:
        with pytest.raises(InsufficientCapacityError):
            await aws_provider.create(make_nodeclaim(pool, requirements=[ON_DEMAND, only]))
    finally:
        forget_unavailable(aws_provider)
    failures = samples(metrics, "karpenter_cloudprovider_instance_launch_failures_total")
    ec2 = boto3.client("ec2", region_name=aws_provider.settings.region,
                       endpoint_url=aws_provider.settings.endpoint_url)
    zone_ids = {z["ZoneName"]: z["ZoneId"]
                for z in ec2.describe_availability_zones()["AvailabilityZones"]}
    zones = {labels["zone"] for labels, _ in failures}
    assert len(zones) >= 2, "one per zone the fleet was refused in"
    for labels, value in failures:
        assert value == 1.0
        assert labels["capacity_type"] == "on-demand"
        # Karpenter AWS names an insufficient-capacity refusal LaunchFailed, too
        assert labels["reason"] == "LaunchFailed"
        assert labels["zone_id"] == zone_ids[labels["zone"]]


async def test_a_terminateinstances_that_fails_is_counted_with_its_zone(
    aws_provider: AWSCloudProvider, metrics: Metrics, monkeypatch: pytest.MonkeyPatch
) -> None:
    pool = make_nodepool(REF, name="terminate")
    launched = await aws_provider.create(
        make_nodeclaim(pool, requests={"cpu": "1"}, requirements=[ON_DEMAND])
    )
    ec2 = aws_provider.clients.ec2
    terminate = ec2.terminate_instances

    async def refused(**_: Any) -> Any:
        raise ClientError({"Error": {"Code": "UnauthorizedOperation", "Message": "no"}},
                          "TerminateInstances")

    monkeypatch.setattr(ec2, "terminate_instances", refused)
    with pytest.raises(ClientError):
        await aws_provider.delete(launched)
    monkeypatch.setattr(ec2, "terminate_instances", terminate)
    await aws_provider.delete(launched)
    [(labels, value)] = samples(
        metrics, "karpenter_cloudprovider_instance_termination_failures_total"
    )
    assert value == 1.0
    assert labels["zone"] == launched.metadata.labels["topology.kubernetes.io/zone"]
    assert set(labels) == {"zone", "zone_id"}


async def test_the_batcher_records_its_window_and_size() -> None:
    metrics = Metrics()

    async def create_fleet(**request: Any) -> dict[str, Any]:
        n = request["TargetCapacitySpecification"]["TotalTargetCapacity"]
        return {"Instances": [{"InstanceIds": [f"i-{i}" for i in range(n)]}]}

    batcher = CreateFleetBatcher(create_fleet, idle=0.02, max_wait=5.0)
    batcher.metrics = AWSMetrics(metrics.meter("karpenter"))
    request = {"TargetCapacitySpecification": {"TotalTargetCapacity": 1}}
    await asyncio.gather(*(batcher.create_fleet(request, nodeclaim=f"n{i}") for i in range(3)))
    await batcher.aclose()
    batcher_label = {"batcher": "create_fleet"}
    size = dict((s[0]["le"], s[1]) for s in samples(
        metrics, "karpenter_cloudprovider_batcher_batch_size_bucket"))
    assert size["2.0"] == 0.0 and size["4.0"] == 1.0, "one batch of 3 requests"
    [(labels, seconds)] = samples(metrics, "karpenter_cloudprovider_batcher_batch_time_seconds_sum")
    assert labels == batcher_label and 0.02 <= seconds < 5.0, "the idle window, at least"


@pytest.mark.parametrize(("code", "message", "reason"), [
    ("InsufficientInstanceCapacity", "no capacity", "LaunchFailed"),
    ("UnauthorizedOperation", "You are not authorized", "Unauthorized"),
    ("AuthFailure", "Not authorized for images: [ami-1]", "AMIAuthorizationFailure"),
    ("AuthFailure.ServiceLinkedRoleCreationNotPermitted", "x", "SpotSLRCreationFailed"),
    ("InvalidParameter", "sg-1 and subnet-2 belong to different networks",
     "SecurityGroupSubnetVPCMismatch"),
    ("MaxSpotInstanceCountExceeded", "quota", "SpotQuotaExceeded"),
    ("VcpuLimitExceeded", "quota", "VCPULimitExceeded"),
    ("InsufficientFreeAddressesInSubnet", "full", "InsufficientFreeAddressesInSubnet"),
])  # fmt: skip
def test_launch_failure_reasons_are_karpenter_awss(code: str, message: str, reason: str) -> None:
    assert launch_failure_reason(code, message) == reason


def sdk_samples(metrics: Metrics, name: str, action: str) -> dict[str, float]:
    """``code`` -> value of one EC2 action's samples named ``name``."""
    return {
        labels["code"]: value for labels, value in samples(metrics, name)
        if labels.get("service") == "EC2" and labels.get("action") == action
    }


async def test_sdk_calls_are_counted_per_call_and_per_attempt(
    aws_provider: AWSCloudProvider, fleet_faults: FleetFaults, metrics: Metrics
) -> None:
    """Karpenter AWS's aws_sdk_go_* series: a throttled CreateFleet retried twice is one
    request (its final code), three attempts (each its own code) and two retries."""
    pool = make_nodepool(REF, name="sdk")
    await aws_provider.get_instance_types(pool)
    fleet_faults.throttle_next = 2
    launched = await aws_provider.create(
        make_nodeclaim(pool, requests={"cpu": "1"}, requirements=[ON_DEMAND])
    )
    try:
        with pytest.raises(ClientError):
            await aws_provider.clients.ec2.describe_instances(InstanceIds=["i-nothere"])
    finally:
        await aws_provider.delete(launched)
    assert sdk_samples(metrics, "aws_sdk_go_request_total", "CreateFleet") == {"200": 1.0}
    assert sdk_samples(metrics, "aws_sdk_go_request_attempt_total", "CreateFleet") == {
        "400": 2.0, "200": 1.0,
    }
    assert sdk_samples(metrics, "aws_sdk_go_request_retry_count_sum", "CreateFleet") == {
        "200": 2.0
    }
    assert sdk_samples(metrics, "aws_sdk_go_request_attempt_duration_seconds_count",
                       "CreateFleet") == {"200": 3.0}
    # a refused call counts under the code EC2 answered with
    assert sdk_samples(metrics, "aws_sdk_go_request_total", "DescribeInstances")["400"] == 1.0
    assert sdk_samples(metrics, "aws_sdk_go_request_duration_seconds_count",
                       "TerminateInstances") == {"200": 1.0}
