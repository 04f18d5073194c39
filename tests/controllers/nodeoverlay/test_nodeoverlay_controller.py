"""The nodeoverlay controller against a fake API server: overlays in force, their
ValidationSucceeded condition (Conflict, RuntimeValidation) and the overlaid catalogue
the provisioner reads."""

from __future__ import annotations

from typing import Any, cast

import pytest

from karpy.cloudprovider import UnavailableOfferings
from karpy.cloudprovider.fake import FakeCloudProvider
from karpy.controllers.inputs.instancetypes import InstanceTypeCache
from karpy.controllers.nodeoverlay import NodeOverlayController
from karpy.controllers.nodeoverlay._controller import RESYNC
from karpy.runtime import Cache, Request, Result
from karpy.runtime.testing import FakeClient, FakeClock
from karpy.state import Cluster, OverlayStore, UnevaluatedNodePoolError
from karpy.state import testing as t
from karpy.state.kinds import NODE_OVERLAY

TYPE = "node.kubernetes.io/instance-type"


class _Index:
    """The cache reads the controller makes, served from the fake API server."""

    def __init__(self, client: FakeClient) -> None:
        self._client = client

    def list(self, kind: Any, **_: Any) -> list[dict[str, Any]]:
        return self._client.objects(kind)


def overlay(name: str, types: list[str], **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "karpenter.sh/v1alpha1", "kind": "NodeOverlay",
        "metadata": {"name": name},
        "spec": {"requirements": [{"key": TYPE, "operator": "In", "values": types}], **spec},
    }


class Harness:
    def __init__(self) -> None:
        self.clock = FakeClock()
        self.client = FakeClient(clock=self.clock)
        self.cluster = Cluster(clock=self.clock)
        self.cluster.update_nodepool(t.nodepool("default"))
        self.store = OverlayStore()
        self.provider = FakeCloudProvider()
        self.types = InstanceTypeCache(self.provider, UnavailableOfferings(clock=self.clock),
                                       self.clock, overlays=self.store)
        self.triggered: list[object] = []
        self.controller = NodeOverlayController(
            client=self.client, index=cast(Cache, _Index(self.client)),
            cluster=self.cluster, store=self.store, instance_types=self.types,
            on_change=self.triggered.append, clock=self.clock,
        )

    async def reconcile(self) -> Result:
        return await self.controller.reconcile(Request("", "nodeoverlays"))

    def condition(self, name: str) -> tuple[str, str, str]:
        found = self.client.peek(NODE_OVERLAY, name)
        assert found is not None
        for c in found.get("status", {}).get("conditions", []):
            if c["type"] == "ValidationSucceeded":
                return c["status"], c["reason"], c["message"]
        raise AssertionError(f"{name}: no ValidationSucceeded")

    async def prices(self) -> dict[str, float]:
        entry = self.cluster.nodepool("default")
        assert entry is not None
        return {it.name: min(o.price for o in it.offerings)
                for it in await self.types.get(entry)}


async def test_an_overlay_in_force_reprices_the_provisioners_catalogue() -> None:
    h = Harness()
    before = await h.prices()
    h.client.add(NODE_OVERLAY, overlay("cheap", ["large-instance-type"], price="0.001"))
    await h.reconcile()
    assert h.condition("cheap") == ("True", "ValidationSucceeded", "")
    after = await h.prices()
    assert after["large-instance-type"] == 0.001
    assert {k: v for k, v in after.items() if k != "large-instance-type"} == {
        k: v for k, v in before.items() if k != "large-instance-type"}
    assert h.triggered == ["nodeoverlay"]  # pending pods are provisioned again

    h.client.remove(NODE_OVERLAY, "cheap")
    await h.reconcile()
    assert await h.prices() == before


async def test_equal_weight_conflict_is_reported_and_only_the_first_applies() -> None:
    h = Harness()
    h.client.add(NODE_OVERLAY, overlay("a", ["small-instance-type"], price="0.5", weight=2))
    h.client.add(NODE_OVERLAY, overlay("b", ["small-instance-type"], price="0.7", weight=2))
    await h.reconcile()
    assert h.condition("b")[:2] == ("True", "ValidationSucceeded")
    status, reason, message = h.condition("a")
    assert (status, reason) == ("False", "Conflict")
    assert "conflict with another overlay" in message
    found = h.client.peek(NODE_OVERLAY, "a")
    assert found is not None
    ready = next(c for c in found["status"]["conditions"] if c["type"] == "Ready")
    assert ready["status"] == "False"
    assert (await h.prices())["small-instance-type"] == 0.7


async def test_a_restricted_capacity_is_a_runtime_validation_failure() -> None:
    h = Harness()
    h.client.add(NODE_OVERLAY, overlay("cpu", ["small-instance-type"], capacity={"cpu": "4"}))
    await h.reconcile()
    status, reason, message = h.condition("cpu")
    assert (status, reason) == ("False", "RuntimeValidation")
    assert message == "invalid capacity: cpu in resource, restricted"
    assert h.store.applied == ()


async def test_with_the_gate_on_a_nodepool_offers_nothing_until_it_was_judged() -> None:
    h = Harness()
    h.store.required = True
    with pytest.raises(UnevaluatedNodePoolError, match="nodepool default has not been"):
        await h.prices()
    await h.reconcile()  # no overlays at all: the pool is judged all the same
    assert await h.prices()
    assert h.triggered == ["nodeoverlay"]  # pending pods are planned at once
    h.cluster.update_nodepool(t.nodepool("new"))
    entry = h.cluster.nodepool("new")
    assert entry is not None
    with pytest.raises(UnevaluatedNodePoolError):
        await h.types.get(entry)


async def test_a_nodepool_whose_types_cannot_be_listed_is_judged_again_soon() -> None:
    h = Harness()
    h.store.required = True
    h.cluster.update_nodepool(t.nodepool("broken"))
    h.provider.errors_for_nodepool["broken"] = RuntimeError("NodeClass not ready")
    result = await h.reconcile()
    assert result.requeue  # with the controller's backoff, not after RESYNC
    assert h.store.evaluated == {"default"}
    del h.provider.errors_for_nodepool["broken"]
    assert (await h.reconcile()).requeue_after == RESYNC
    assert h.store.evaluated == {"default", "broken"}
