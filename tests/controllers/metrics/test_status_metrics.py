"""The operator_* metrics as operatorpkg writes them for Karpenter: per-kind families
with the configured object labels, the kind-less family labelled group/kind, ages read
at scrape time, transitions counted once, termination timed until the object is gone."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from karpy.controllers.metrics._status import (
    EXPONENTIAL_BUCKETS,
    StatusFamilies,
    StatusGauges,
    StatusMetrics,
)
from karpy.runtime import Request
from karpy.runtime.telemetry import Metrics
from karpy.runtime.testing import FakeClient, FakeClock
from karpy.state.kinds import NODE_CLAIM

T0 = "2024-01-01T00:00:00Z"


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(start=datetime(2024, 1, 1, 0, 1, tzinfo=UTC))


def lines(registry: Metrics, name: str) -> list[str]:
    text = registry.render().decode()
    return sorted(line for line in text.splitlines()
                  if line.startswith(name + "{") or line.startswith(name + " "))


def claim(ready: str = "Unknown", since: str = T0, reason: str = "Pending") -> dict[str, object]:
    return {
        "metadata": {"name": "default-abc", "labels": {
            "karpenter.sh/nodepool": "default", "karpenter.k8s.aws/ec2nodeclass": "main"}},
        "status": {"conditions": [
            {"type": "Ready", "status": ready, "reason": reason, "lastTransitionTime": since},
        ]},
    }


@pytest.fixture
def setup(clock: FakeClock) -> tuple[FakeClient, Metrics, StatusMetrics]:
    kube = FakeClient(clock=clock)
    registry = Metrics()
    gauges = StatusGauges(clock)
    registry.registry.register(gauges)
    families = StatusFamilies(
        kind=NODE_CLAIM, meter=registry.meter("operatorpkg"), gauges=gauges,
        label_keys=["karpenter.k8s.aws/ec2nodeclass", "karpenter.sh/nodepool"],
        buckets=EXPONENTIAL_BUCKETS, deprecated=True,
    )
    return kube, registry, StatusMetrics(client=kube, clock=clock, families=families)


async def test_condition_count_and_age_per_kind_and_in_the_kindless_family(
    setup: tuple[FakeClient, Metrics, StatusMetrics], clock: FakeClock
) -> None:
    kube, registry, controller = setup
    kube.add(NODE_CLAIM, claim())
    await controller.reconcile(Request("", "default-abc"))
    assert lines(registry, "operator_nodeclaim_status_condition_count") == [
        'operator_nodeclaim_status_condition_count{karpenter_k8s_aws_ec2nodeclass="main",'
        'karpenter_sh_nodepool="default",name="default-abc",namespace="",reason="Pending",'
        'status="Unknown",type="Ready"} 1.0'
    ]
    assert lines(registry, "operator_status_condition_count") == [
        'operator_status_condition_count{group="karpenter.sh",kind="NodeClaim",'
        'name="default-abc",namespace="",reason="Pending",status="Unknown",type="Ready"} 1.0'
    ]
    assert lines(registry, "operator_nodeclaim_status_condition_current_status_seconds")[
        0].endswith(" 60.0")
    await clock.step(30)  # read at scrape time, no reconcile needed
    assert lines(registry, "operator_nodeclaim_status_condition_current_status_seconds")[
        0].endswith(" 90.0")


async def test_a_transition_is_counted_once_and_its_duration_observed(
    setup: tuple[FakeClient, Metrics, StatusMetrics], clock: FakeClock
) -> None:
    kube, registry, controller = setup
    kube.add(NODE_CLAIM, claim())
    await controller.reconcile(Request("", "default-abc"))
    kube.add(NODE_CLAIM, claim("True", "2024-01-01T00:00:45Z", "Ready"))
    for _ in range(3):
        await controller.reconcile(Request("", "default-abc"))
    transitions = lines(registry, "operator_nodeclaim_status_condition_transitions_total")
    assert ('operator_nodeclaim_status_condition_transitions_total{'
            'karpenter_k8s_aws_ec2nodeclass="main",karpenter_sh_nodepool="default",'
            'reason="Ready",status="True",type="Ready"} 1.0') in transitions
    assert lines(registry, "operator_nodeclaim_status_condition_transition_seconds_sum") == [
        'operator_nodeclaim_status_condition_transition_seconds_sum{'
        'karpenter_k8s_aws_ec2nodeclass="main",karpenter_sh_nodepool="default",'
        'status="Unknown",type="Ready"} 45.0'
    ]
    # The old status's series are gone; the new one is there.
    count = lines(registry, "operator_nodeclaim_status_condition_count")
    assert len(count) == 1 and 'status="True"' in count[0]
    assert any('kind="NodeClaim"' in line for line in lines(
        registry, "operator_status_condition_transitions_total"))


async def test_termination_is_timed_until_the_object_is_gone(
    setup: tuple[FakeClient, Metrics, StatusMetrics], clock: FakeClock
) -> None:
    kube, registry, controller = setup
    deleting = claim("True", reason="Ready")
    deleting["metadata"]["deletionTimestamp"] = "2024-01-01T00:00:30Z"  # type: ignore[index]
    kube.add(NODE_CLAIM, deleting)
    await controller.reconcile(Request("", "default-abc"))
    assert lines(registry, "operator_nodeclaim_termination_current_time_seconds") == [
        'operator_nodeclaim_termination_current_time_seconds{'
        'karpenter_k8s_aws_ec2nodeclass="main",karpenter_sh_nodepool="default",'
        'name="default-abc",namespace=""} 30.0'
    ]
    await clock.step(20)
    kube.clear(NODE_CLAIM)
    await controller.reconcile(Request("", "default-abc"))
    assert lines(registry, "operator_nodeclaim_termination_current_time_seconds") == []
    assert lines(registry, "operator_nodeclaim_status_condition_count") == []
    assert lines(registry, "operator_nodeclaim_termination_duration_seconds_sum") == [
        'operator_nodeclaim_termination_duration_seconds_sum{'
        'karpenter_k8s_aws_ec2nodeclass="main",karpenter_sh_nodepool="default"} 50.0'
    ]
    assert lines(registry, "operator_termination_duration_seconds_sum") == [
        'operator_termination_duration_seconds_sum{group="karpenter.sh",kind="NodeClaim"} 50.0'
    ]
