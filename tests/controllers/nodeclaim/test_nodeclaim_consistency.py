"""nodeclaim.consistency: a Node smaller than its NodeClaim expected gets Karpenter's
FailedConsistencyCheck Warning and ConsistentStateFound=False; a matching one True."""

from __future__ import annotations

from typing import Any

from nodeclaim_factories import nodeclaim_manifest

from karpy.cloudprovider.fake import FakeCloudProvider
from karpy.controllers.nodeclaim.consistency import SCAN_PERIOD, Consistency
from karpy.runtime import EventRecorder, Request, kinds
from karpy.runtime.testing import FakeClient, FakeClock
from karpy.state.kinds import NODE_CLAIM

REQUEST = Request("", "default-a")


def nodeclaim(*, initialized: bool = True) -> dict[str, Any]:
    claim = nodeclaim_manifest("default-a", finalizer=True)
    claim["spec"]["resources"] = {"requests": {"cpu": "1", "memory": "1Gi", "pods": "5"}}
    claim["status"] = {
        "nodeName": "node-a", "providerID": "fake://a",
        "capacity": {"cpu": "4", "memory": "16Gi", "pods": "110"},
        "conditions": [{"type": "Initialized", "status": "True" if initialized else "Unknown",
                        "reason": "Initialized", "lastTransitionTime": "2024-01-01T00:00:00Z"}],
    }
    return claim


def node(memory: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-a"},
            "spec": {"providerID": "fake://a"},
            "status": {"capacity": {"cpu": "4", "memory": memory, "pods": "110"}}}


def controller(kube: FakeClient, recorder: EventRecorder, clock: FakeClock) -> Consistency:
    return Consistency(client=kube, cloud_provider=FakeCloudProvider(),  # type: ignore[arg-type]
                       recorder=recorder, clock=clock)


def condition(kube: FakeClient) -> dict[str, Any]:
    conds = kube.peek(NODE_CLAIM, "default-a")["status"]["conditions"]
    return next(c for c in conds if c["type"] == "ConsistentStateFound")


async def test_a_smaller_node_fails_the_check_with_karpenters_event_and_condition(
    kube: FakeClient, recorder: EventRecorder, events: Any, clock: FakeClock, logs: Any
) -> None:
    await kube.create(NODE_CLAIM, nodeclaim())
    await kube.create(kinds.NODE, node("12Gi"))
    check = controller(kube, recorder, clock)
    assert (await check.reconcile(REQUEST)).requeue_after == SCAN_PERIOD
    issue = "expected 16Gi of resource memory, but found 12Gi (75.0% of expected)"
    all_events = await events.all()
    assert [(e["type"], e["reason"], e["message"]) for e in all_events
            if e["reason"] == "FailedConsistencyCheck"] == [("Warning", "FailedConsistencyCheck",
                                                              issue)]
    assert [r["issue"] for r in logs.messages("failed consistency check")] == [issue]
    assert (condition(kube)["status"], condition(kube)["reason"],
            condition(kube)["message"]) == (
        "False", "ConsistencyCheckFailed", "Consistency Check Failed")

    # Checked again only after the scan period.
    stored = kube.peek(kinds.NODE, "node-a")
    stored["status"]["capacity"]["memory"] = "16Gi"
    assert (await check.reconcile(REQUEST)).requeue_after is not None
    assert condition(kube)["status"] == "False"
    await clock.step(SCAN_PERIOD)
    await check.reconcile(REQUEST)
    assert condition(kube)["status"] == "True"


async def test_a_node_within_ten_percent_or_a_claim_not_initialized_passes(
    kube: FakeClient, recorder: EventRecorder, events: Any, clock: FakeClock
) -> None:
    await kube.create(NODE_CLAIM, nodeclaim(initialized=False))
    await kube.create(kinds.NODE, node("1Gi"))
    await controller(kube, recorder, clock).reconcile(REQUEST)
    assert "FailedConsistencyCheck" not in await events.reasons()

    kube.peek(NODE_CLAIM, "default-a")["status"] = nodeclaim()["status"]
    kube.peek(kinds.NODE, "node-a")["status"]["capacity"]["memory"] = "15Gi"  # 93.75 %
    await controller(kube, recorder, clock).reconcile(REQUEST)
    assert "FailedConsistencyCheck" not in await events.reasons()
    assert condition(kube)["status"] == "True"
