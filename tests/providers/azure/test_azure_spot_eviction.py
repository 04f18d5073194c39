"""Spot eviction: the Node condition AKS's node-problem-detector sets when Azure schedules
a Spot VM's preemption (``PreemptionScheduled=True``, reason ``SpotEvictionIncoming``)
makes karpy's node repair replace the node at once, through the Azure provider's repair
policies (as Karpenter-Azure registers that condition)."""

from __future__ import annotations

from typing import Any

from karpy_azure import AzureCloudProvider
from karpy_azure._offline import OfflineAzureCloudProvider
from karpy_azure._repair import REPAIR_POLICIES
from opentelemetry.sdk.metrics import MeterProvider

from karpy.cloudprovider.fake import FakeCloudProvider
from karpy.controllers.indexes import (
    INDEX_PROVIDER_ID,
    index_node_provider_id,
    index_nodeclaim_provider_id,
)
from karpy.controllers.instruments import KarpenterMetrics
from karpy.controllers.nodehealth.repair import NodeHealth
from karpy.runtime import EventRecorder, Request, kinds
from karpy.runtime.testing import FakeClient, FakeClock
from karpy.state.kinds import NODE_CLAIM

T0 = "2024-01-01T00:00:00Z"


def node(name: str, *, preempt: bool) -> dict[str, Any]:
    conditions = [{"type": "Ready", "status": "True", "lastTransitionTime": T0}]
    if preempt:
        conditions.append({
            "type": "PreemptionScheduled", "status": "True", "reason": "SpotEvictionIncoming",
            "message": "Preempt Scheduled: Mon, 01 Jan 2024 00:00:30 GMT.",
            "lastTransitionTime": T0,
        })
    return {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": {"karpenter.sh/nodepool": "default",
                                              "karpenter.sh/capacity-type": "spot"}},
        "spec": {"providerID": f"fake://{name}"},
        "status": {"conditions": conditions},
    }


async def test_a_scheduled_spot_eviction_replaces_the_node_at_once() -> None:
    clock = FakeClock()
    kube = FakeClient(clock=clock, indexers={
        (NODE_CLAIM, INDEX_PROVIDER_ID): index_nodeclaim_provider_id,
        (kinds.NODE, INDEX_PROVIDER_ID): index_node_provider_id,
    })
    for i in range(10):
        name = f"n{i}"
        await kube.create(kinds.NODE, node(name, preempt=i == 0))
        await kube.create(NODE_CLAIM, {
            "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
            "metadata": {"name": f"claim-{name}", "labels": {"karpenter.sh/nodepool": "default"},
                         "finalizers": ["karpenter.sh/termination"]},
            # the fake provider (carrying Azure's repair policies) serves TestNodeClass
            "spec": {"nodeClassRef": {"group": "karpenter.test.sh", "kind": "TestNodeClass",
                                      "name": "default"}, "requirements": []},
            "status": {"providerID": f"fake://{name}", "nodeName": name},
        })
    health = NodeHealth(
        client=kube, index=kube,  # type: ignore[arg-type]
        cloud_provider=FakeCloudProvider(repair_policies=list(REPAIR_POLICIES)),
        recorder=EventRecorder(kube, component="karpenter", host="t", clock=clock),  # type: ignore[arg-type]
        metrics=KarpenterMetrics(MeterProvider().get_meter("karpenter")), clock=clock,
    )
    await clock.step(1)  # the condition is a second old
    await health.reconcile(Request("", "n0"))
    assert kube.peek(NODE_CLAIM, "claim-n0")["metadata"].get("deletionTimestamp")
    await health.reconcile(Request("", "n1"))
    assert not kube.peek(NODE_CLAIM, "claim-n1")["metadata"].get("deletionTimestamp")


def test_the_online_and_offline_providers_share_the_policies() -> None:
    assert AzureCloudProvider.repair_policies.__doc__
    assert OfflineAzureCloudProvider.repair_policies(None) == REPAIR_POLICIES  # type: ignore[arg-type]
