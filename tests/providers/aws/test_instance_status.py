"""DescribeInstanceStatus health checks (Karpenter AWS's interruption.instancestatus)
against moto, whose status checks moto_harness.InstanceHealth makes fail on demand."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import pytest_asyncio
from botocore.exceptions import ClientError
from karpy_aws import AWSCloudProvider
from karpy_aws._instances import instance_id
from karpy_aws._instancestatus import InstanceStatusController, health_status
from moto_harness import InstanceHealth
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from test_interruption_queue import counter

from karpy.apis import NodeClaim
from karpy.apis import labels as wk
from karpy.apis.annotations import ANNOTATION_NODECLAIM_TERMINATION_TIMESTAMP
from karpy.apis.v1 import NodeClassReference
from karpy.cloudprovider import NODE_CLAIM as NODE_CLAIM_KIND
from karpy.cloudprovider.testing import make_nodeclaim, make_nodepool
from karpy.runtime import EventRecorder
from karpy.runtime.kinds import EVENT
from karpy.runtime.testing import FakeClient

REF = NodeClassReference(group="karpenter.k8s.aws", kind="EC2NodeClass", name="default")
ON_DEMAND = {"key": wk.LABEL_CAPACITY_TYPE, "operator": "In", "values": ["on-demand"]}
METRIC = "karpenter_interruption_instance_status_unhealthy_total"


@pytest.fixture
def instance_health() -> Iterator[InstanceHealth]:
    with InstanceHealth().installed() as health:
        yield health


@pytest_asyncio.fixture
async def launched(aws_provider: AWSCloudProvider) -> AsyncIterator[list[NodeClaim]]:
    """Four launched NodeClaims (their instances exist in moto)."""
    pool = make_nodepool(REF, name="health")
    claims = [
        make_nodeclaim(pool, requests={"cpu": "1"}, requirements=[ON_DEMAND], name=f"health-{i}")
        for i in range(4)
    ]
    done = [await aws_provider.create(c) for c in claims]
    for claim, nc in zip(claims, done, strict=True):
        nc.metadata.name = claim.metadata.name
    try:
        yield done
    finally:
        for nc in done:
            await aws_provider.delete(nc)


def _stored(client: FakeClient, nodeclaim: NodeClaim) -> dict[str, Any]:
    obj = nodeclaim.to_dict()
    obj["metadata"]["finalizers"] = ["karpenter.sh/termination"]  # stays while terminating
    return client.add(NODE_CLAIM_KIND, obj)


async def test_impaired_instances_and_scheduled_events_replace_their_nodeclaims(
    aws_provider: AWSCloudProvider,
    launched: list[NodeClaim],
    instance_health: InstanceHealth,
    caplog: pytest.LogCaptureFixture,
) -> None:
    broken, young, retiring, _unowned = launched
    ids = [instance_id(nc.status.provider_id or "") for nc in launched]
    now = datetime.now(UTC)
    instance_health.impaired[ids[0]] = {"instance": now - timedelta(minutes=5)}
    instance_health.impaired[ids[1]] = {"system": now - timedelta(seconds=30)}
    instance_health.events[ids[2]] = ["system-maintenance"]
    instance_health.impaired[ids[3]] = {"system": now - timedelta(minutes=5)}
    client = FakeClient()
    for nc in (broken, young, retiring):  # the fourth instance has no NodeClaim here
        _stored(client, nc)
    recorder = EventRecorder(client, component="karpenter")
    reader = InMemoryMetricReader()
    controller = InstanceStatusController(
        aws_provider, client, recorder,
        meter=MeterProvider(metric_readers=[reader]).get_meter("karpenter"),
    )  # fmt: skip
    with caplog.at_level(logging.INFO, logger="karpy.aws.interruption"):
        result = await controller.reconcile()
    await recorder.flush()
    assert result.requeue_after == 60.0

    def deleting(nc: NodeClaim) -> dict[str, Any] | None:
        obj = client.peek(NODE_CLAIM_KIND, nc.metadata.name or "")
        assert obj is not None
        return obj if obj["metadata"].get("deletionTimestamp") else None

    # a failed instance check for 5 minutes: replaced at once, without a graceful drain
    gone = deleting(broken)
    assert gone is not None
    assert ANNOTATION_NODECLAIM_TERMINATION_TIMESTAMP in gone["metadata"]["annotations"]
    # a scheduled maintenance: replaced, drained as usual
    gone = deleting(retiring)
    assert gone is not None
    assert ANNOTATION_NODECLAIM_TERMINATION_TIMESTAMP not in (
        gone["metadata"].get("annotations") or {}
    )
    assert deleting(young) is None, "failing for 30 s only: under the 2-minute threshold"
    reasons = {(e["involvedObject"]["name"], e["reason"]) for e in client.objects(EVENT)}
    for nc in (broken, retiring):
        assert (nc.metadata.name, "InstanceUnhealthy") in reasons
        assert (nc.metadata.name, "TerminatingOnInterruption") in reasons
    assert not any(name == young.metadata.name for name, _ in reasons)
    detected = [
        (getattr(r, "instanceID", ""), getattr(r, "category", ""))
        for r in caplog.records
        if r.getMessage() == "detected unhealthy instance owned by cluster"
    ]
    assert sorted(detected) == sorted([(ids[0], "InstanceStatus"), (ids[2], "EventStatus")])
    assert counter(reader, METRIC) == 2

    # still reported at the next poll: neither counted nor acted on twice
    writes = len(client.calls)
    await controller.reconcile()
    assert counter(reader, METRIC) == 2
    assert [c for c in client.calls[writes:] if c.verb in ("patch", "delete")] == []


async def test_a_poll_without_the_permission_turns_the_checks_off_with_karpenters_message(
    aws_provider: AWSCloudProvider, caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    calls = 0

    def refused(name: str) -> Any:
        nonlocal calls
        calls += 1
        raise ClientError(
            {"Error": {"Code": "UnauthorizedOperation", "Message": "not authorized"}},
            "DescribeInstanceStatus",
        )

    monkeypatch.setattr(aws_provider.clients.ec2, "get_paginator", refused)
    controller = InstanceStatusController(aws_provider, FakeClient())
    with caplog.at_level(logging.ERROR, logger="karpy.aws.interruption"):
        await controller.reconcile()
        await controller.reconcile()
    assert calls == 1
    assert [r.getMessage() for r in caplog.records] == [
        "ec2:DescribeInstanceStatus permission is not allowed, update the IAM policy and "
        "restart the Karpenter deployment to enable instance status health checks"
    ]


def test_a_failed_check_of_unknown_age_and_ebs_checks() -> None:
    now = datetime.now(UTC)
    failed = {"Status": "impaired", "Details": [{"Name": "reachability", "Status": "failed"}]}
    status = health_status({"InstanceId": "i-1", "SystemStatus": failed}, now)
    assert status is not None and status.categories == {"SystemStatus"}
    # EBS checks are ignored (a pod's volume may be the one failing), as in Karpenter
    assert health_status({"InstanceId": "i-1", "AttachedEbsStatus": failed}, now) is None
    # an event code that does not take the host away
    assert health_status({"InstanceId": "i-1", "Events": [{"Code": "other"}]}, now) is None
