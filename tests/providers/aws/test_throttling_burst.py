"""A burst of EC2 throttling (RequestLimitExceeded) while several NodeClaims launch at
once: botocore's adaptive retries carry every launch through, each NodeClaim gets
exactly one instance, and no instance is left without a NodeClaim."""

from __future__ import annotations

import asyncio

import boto3
from karpy_aws import AWSCloudProvider
from karpy_aws._instances import instance_id
from moto_harness import FleetFaults
from test_launch import ON_DEMAND, REF

from karpy.cloudprovider.testing import make_nodeclaim, make_nodepool

LAUNCHES = 6
# Concurrent identical launches are merged into one CreateFleet (karpy_aws._batcher), so
# the burst lands on that one call: at most botocore's 10 attempts less one.
BURST = 9


async def test_a_burst_of_request_limit_exceeded_leaks_and_doubles_nothing(
    aws_provider: AWSCloudProvider, fleet_faults: FleetFaults
) -> None:
    ec2 = boto3.client("ec2", region_name=aws_provider.settings.region,
                       endpoint_url=aws_provider.settings.endpoint_url)  # fmt: skip
    before = {i["InstanceId"] for r in ec2.describe_instances()["Reservations"]
              for i in r["Instances"] if i["State"]["Name"] != "terminated"}  # fmt: skip
    pool = make_nodepool(REF, name="throttled")
    fleet_faults.throttle_next = BURST
    calls, sent = fleet_faults.calls, aws_provider.fleets.calls
    launched = await asyncio.gather(*(
        aws_provider.create(make_nodeclaim(pool, requests={"cpu": "1"},
                                           requirements=[ON_DEMAND]))
        for _ in range(LAUNCHES)
    ))  # fmt: skip
    assert fleet_faults.throttle_next == 0, "the burst was not all served"
    merged = aws_provider.fleets.calls - sent
    assert fleet_faults.calls - calls == merged + BURST  # each throttled call retried once
    ids = {instance_id(nc.status.provider_id or "") for nc in launched}
    assert len(ids) == LAUNCHES
    now = {i["InstanceId"] for r in ec2.describe_instances()["Reservations"]
           for i in r["Instances"] if i["State"]["Name"] != "terminated"}  # fmt: skip
    assert now - before == ids, "an instance without a NodeClaim"
    ec2.terminate_instances(InstanceIds=sorted(ids))
