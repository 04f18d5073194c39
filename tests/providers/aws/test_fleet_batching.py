"""CreateFleet batching, idempotency and answers EC2 can give that a launch must not
leak an instance on (against moto; moto_harness.py makes it honour ClientToken)."""

from __future__ import annotations

import asyncio
from typing import Any

import boto3
import pytest
from karpy_aws import AWSCloudProvider
from karpy_aws._batcher import CreateFleetBatcher
from karpy_aws._instances import instance_id
from moto_harness import FleetFaults

from karpy.apis import labels as wk
from karpy.apis.v1 import NodeClassReference
from karpy.cloudprovider import CreateError
from karpy.cloudprovider.testing import make_nodeclaim, make_nodepool
from karpy.runtime.testing import eventually

REF = NodeClassReference(group="karpenter.k8s.aws", kind="EC2NodeClass", name="default")
ON_DEMAND = {"key": wk.LABEL_CAPACITY_TYPE, "operator": "In", "values": ["on-demand"]}


def _ec2(provider: AWSCloudProvider) -> Any:
    return boto3.client(
        "ec2", region_name=provider.settings.region, endpoint_url=provider.settings.endpoint_url
    )


def _live_instances(provider: AWSCloudProvider, nodeclaim: str) -> list[dict[str, Any]]:
    found = _ec2(provider).describe_instances(
        Filters=[
            {"Name": "tag:karpenter.sh/nodeclaim", "Values": [nodeclaim]},
            {"Name": "instance-state-name", "Values": ["pending", "running"]},
        ]
    )["Reservations"]
    return [i for r in found for i in r["Instances"]]


async def test_a_burst_of_identical_nodeclaims_is_one_create_fleet(
    aws_provider: AWSCloudProvider, fleet_faults: FleetFaults
) -> None:
    pool = make_nodepool(REF, name="burst")
    claims = [
        make_nodeclaim(pool, requests={"cpu": "1"}, requirements=[ON_DEMAND], name=f"burst-{i}")
        for i in range(12)
    ]
    await aws_provider.get_instance_types(pool)  # the catalogue warm, as in a running operator
    before = fleet_faults.calls
    launched = await asyncio.gather(*(aws_provider.create(c) for c in claims))
    try:
        assert fleet_faults.calls - before == 1
        ids = {instance_id(nc.status.provider_id or "") for nc in launched}
        assert len(ids) == len(claims), "two NodeClaims got the same instance"
        for claim, nc in zip(claims, launched, strict=True):
            (instance,) = _live_instances(aws_provider, claim.metadata.name or "")
            assert instance["InstanceId"] == instance_id(nc.status.provider_id or "")
            tags = {t["Key"]: t["Value"] for t in instance["Tags"]}
            assert tags["Name"] == f"burst/{claim.metadata.name}"
            assert tags["karpenter.sh/nodepool"] == "burst"
    finally:
        for nc in launched:
            await aws_provider.delete(nc)


async def test_a_create_fleet_whose_answer_was_lost_is_retried_without_a_second_instance(
    aws_provider: AWSCloudProvider, fleet_faults: FleetFaults
) -> None:
    """EC2 launched but its answer was lost (RequestTimeout): the SDK's retry carries the
    call's ClientToken and EC2 answers with the first attempt's instance."""
    pool = make_nodepool(REF, name="retry")
    claim = make_nodeclaim(pool, requests={"cpu": "1"}, requirements=[ON_DEMAND])
    await aws_provider.get_instance_types(pool)
    before = fleet_faults.calls
    fleet_faults.lose_answer_next = 1
    launched = await aws_provider.create(claim)
    try:
        assert fleet_faults.lose_answer_next == 0, "the answer was not lost"
        assert fleet_faults.calls - before == 2 and fleet_faults.replayed >= 1
        (instance,) = _live_instances(aws_provider, claim.metadata.name or "")
        assert instance["InstanceId"] == instance_id(launched.status.provider_id or "")
    finally:
        await aws_provider.delete(launched)


async def test_a_later_launch_of_the_same_nodeclaim_never_gets_a_collected_instance_back(
    aws_provider: AWSCloudProvider, fleet_faults: FleetFaults
) -> None:
    """A process killed between CreateFleet and the status write leaves an orphan, which
    garbage collection terminates; the restarted launch of the same NodeClaim with the
    same request must get a live instance, not the orphan again (issue 24)."""
    pool = make_nodepool(REF, name="relaunch")
    claim = make_nodeclaim(pool, requests={"cpu": "1"}, requirements=[ON_DEMAND])
    orphan = await aws_provider.create(claim)  # its answer "never reached the status"
    await aws_provider.delete(orphan)  # garbage collection's doing
    again = await aws_provider.create(claim)
    try:
        assert again.status.provider_id != orphan.status.provider_id
        (instance,) = _live_instances(aws_provider, claim.metadata.name or "")
        assert instance["InstanceId"] == instance_id(again.status.provider_id or "")
    finally:
        await aws_provider.delete(again)


async def test_an_instance_of_a_type_not_asked_for_is_terminated_not_leaked(
    aws_provider: AWSCloudProvider,
) -> None:
    original = aws_provider.clients.ec2.create_fleet
    launched_ids: list[str] = []

    async def answer_with_another_type(**kwargs: Any) -> Any:
        answer = dict(await original(**kwargs))
        instances = [dict(i, InstanceType="x9.imaginary") for i in answer.get("Instances", [])]
        for i in instances:
            i.pop("LaunchTemplateAndOverrides", None)
            launched_ids.extend(i.get("InstanceIds") or [])
        answer["Instances"] = instances
        return answer

    aws_provider.clients.ec2.create_fleet = answer_with_another_type
    pool = make_nodepool(REF, name="surprise")
    claim = make_nodeclaim(pool, requests={"cpu": "1"}, requirements=[ON_DEMAND])
    try:
        with pytest.raises(CreateError, match=r"x9\.imaginary"):
            await aws_provider.create(claim)
    finally:
        aws_provider.clients.ec2.create_fleet = original
    (iid,) = launched_ids
    state = _ec2(aws_provider).describe_instances(InstanceIds=[iid])["Reservations"][0][
        "Instances"
    ][0]["State"]["Name"]
    assert state in ("shutting-down", "terminated")


async def test_the_batcher_splits_a_partial_answer_and_shares_exceptions() -> None:
    calls: list[dict[str, Any]] = []

    async def create_fleet(**request: Any) -> dict[str, Any]:
        calls.append(request)
        if request["LaunchTemplateConfigs"] == "boom":
            raise RuntimeError("throttled for good")
        return {
            "FleetId": "fleet-1",
            "Instances": [{"InstanceIds": ["i-1", "i-2"], "InstanceType": "m5.large"}],
            "Errors": [{"ErrorCode": "InsufficientInstanceCapacity", "ErrorMessage": "none"}],
        }

    batcher = CreateFleetBatcher(create_fleet)
    request = {
        "LaunchTemplateConfigs": "x",
        "TargetCapacitySpecification": {"TotalTargetCapacity": 1},
    }
    shares = await asyncio.gather(
        *(batcher.create_fleet(request, nodeclaim=f"n{i}") for i in range(3))
    )
    (call,) = calls
    assert call["TargetCapacitySpecification"]["TotalTargetCapacity"] == 3
    # the SDK gives each call its own token; one made from the request would replay an
    # earlier launch's (possibly collected) instances to a later one
    assert "ClientToken" not in call
    assert [s["Instances"][0]["InstanceIds"] for s in shares[:2]] == [["i-1"], ["i-2"]]
    assert shares[2]["Instances"] == []
    assert shares[2]["Errors"][0]["ErrorCode"] == "InsufficientInstanceCapacity"
    # a different request is another batch; an exception reaches each of its callers
    boom = {**request, "LaunchTemplateConfigs": "boom"}
    results = await asyncio.gather(
        batcher.create_fleet(boom, nodeclaim="a"),
        batcher.create_fleet(boom, nodeclaim="b"),
        return_exceptions=True,
    )
    assert all(isinstance(r, RuntimeError) for r in results)
    assert len(calls) == 2
    await batcher.aclose()


async def test_the_batch_window_closes_after_the_idle_time() -> None:
    calls: list[int] = []

    async def create_fleet(**request: Any) -> dict[str, Any]:
        n = request["TargetCapacitySpecification"]["TotalTargetCapacity"]
        calls.append(n)
        return {"Instances": [{"InstanceIds": [f"i-{i}" for i in range(n)]}]}

    batcher = CreateFleetBatcher(create_fleet, idle=0.02, max_wait=5.0)
    request = {"TargetCapacitySpecification": {"TotalTargetCapacity": 1}}
    first = asyncio.ensure_future(batcher.create_fleet(request, nodeclaim="a"))
    await first
    second = await batcher.create_fleet(request, nodeclaim="b")
    assert calls == [1, 1]  # the first batch had closed: the second is its own call
    assert second["Instances"][0]["InstanceIds"] == ["i-0"]
    await batcher.aclose()


async def test_an_instance_launched_for_a_cancelled_launch_is_terminated_at_once(
    aws_provider: AWSCloudProvider,
) -> None:
    # Left to garbage collection, the instance would run unowned for 30 s at least.
    original = aws_provider.clients.ec2.create_fleet
    entered, answer = asyncio.Event(), asyncio.Event()
    launched_ids: list[str] = []

    async def slow_create_fleet(**kwargs: Any) -> Any:
        entered.set()
        await answer.wait()
        result = await original(**kwargs)
        for i in result.get("Instances") or []:
            launched_ids.extend(i.get("InstanceIds") or [])
        return result

    aws_provider.clients.ec2.create_fleet = slow_create_fleet
    pool = make_nodepool(REF, name="cancelled")
    claim = make_nodeclaim(pool, requests={"cpu": "1"}, requirements=[ON_DEMAND])
    try:
        launch = asyncio.create_task(aws_provider.create(claim))
        await asyncio.wait_for(entered.wait(), 30)
        launch.cancel()  # e.g. the NodeClaim was deleted, or the operator shuts down
        await asyncio.gather(launch, return_exceptions=True)
        answer.set()

        def state() -> str:
            (iid,) = launched_ids
            return str(_ec2(aws_provider).describe_instances(InstanceIds=[iid])[
                "Reservations"][0]["Instances"][0]["State"]["Name"])  # fmt: skip

        await eventually(lambda: bool(launched_ids) and state() in ("shutting-down",
                                                                     "terminated"), within=10)
    finally:
        aws_provider.clients.ec2.create_fleet = original
    assert aws_provider.fleets.unreleased == set()


async def test_a_failed_release_is_kept_and_handed_over_with_the_next_answer() -> None:
    released: list[list[str]] = []
    fail = [True]

    async def release(ids: list[str]) -> None:
        if fail[0]:
            raise RuntimeError("throttled")
        released.append(ids)

    gate, entered = asyncio.Event(), asyncio.Event()
    counter = iter(range(100))

    async def create_fleet(**request: Any) -> dict[str, Any]:
        entered.set()
        await gate.wait()
        return {"Instances": [{"InstanceIds": [f"i-{next(counter)}"]}]}

    batcher = CreateFleetBatcher(create_fleet, idle=0.01, release=release)
    request = {"TargetCapacitySpecification": {"TotalTargetCapacity": 1}}
    waiting = asyncio.ensure_future(batcher.create_fleet(request, nodeclaim="a"))
    await entered.wait()  # the batch window closed and the call is in flight
    waiting.cancel()
    gate.set()
    await asyncio.gather(waiting, return_exceptions=True)
    await eventually(lambda: batcher.unreleased == {"i-0"})
    fail[0] = False
    share = await batcher.create_fleet(request, nodeclaim="b")
    assert share["Instances"][0]["InstanceIds"] == ["i-1"]  # b's own instance is b's
    assert released == [["i-0"]] and batcher.unreleased == set()
    await batcher.aclose()
