"""node.health: a node unhealthy past its repair policy's toleration is replaced, unless
more than 20 % of its NodePool is unhealthy."""

from __future__ import annotations

import logging
import math
from datetime import timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from nodeclaim_factories import nodeclaim_manifest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from karpy.cloudprovider import RepairPolicy
from karpy.cloudprovider.fake import FakeCloudProvider
from karpy.controllers import nodehealth
from karpy.controllers.deps import Deps
from karpy.controllers.instruments import KarpenterMetrics
from karpy.controllers.nodehealth.repair import (
    CONDITIONS_CHANGED,
    NodeHealth,
    allowed_unhealthy,
)
from karpy.controllers.settings import FeatureGates, Settings
from karpy.runtime import EventRecorder, Request, Result, kinds
from karpy.runtime.kinds import EVENT
from karpy.runtime.testing import FakeClient, FakeClock
from karpy.state.kinds import NODE_CLAIM

T0 = "2024-01-01T00:00:00Z"
TOLERATION = timedelta(minutes=10)
ANNOTATION = "karpenter.sh/nodeclaim-termination-timestamp"


class Metrics:
    def __init__(self) -> None:
        self.reader = InMemoryMetricReader()
        self.instruments = KarpenterMetrics(
            MeterProvider(metric_readers=[self.reader]).get_meter("karpenter"))

    def value(self, name: str, **labels: str) -> float:
        data = self.reader.get_metrics_data()
        total = 0.0
        for rm in data.resource_metrics if data else ():
            for sm in rm.scope_metrics:
                for metric in sm.metrics:
                    if metric.name == name:
                        for point in metric.data.data_points:  # type: ignore[union-attr]
                            attrs = dict(point.attributes or {})
                            if all(attrs.get(k) == v for k, v in labels.items()):
                                total += point.value  # type: ignore[union-attr]
        return total


def node(
    name: str, *, ready: str = "True", since: str = T0, pool: str = "default"
) -> dict[str, Any]:
    return {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": {"karpenter.sh/nodepool": pool,
                                              "karpenter.sh/capacity-type": "spot"}},
        "spec": {"providerID": f"fake://{name}"},
        "status": {"conditions": [{"type": "Ready", "status": ready,
                                   "lastTransitionTime": since,
                                   "lastHeartbeatTime": since}]},
    }


async def add_node(kube: FakeClient, name: str, **kw: Any) -> None:
    await kube.create(kinds.NODE, node(name, **kw))
    claim = nodeclaim_manifest(f"claim-{name}", finalizer=True,
                               labels={"karpenter.sh/nodepool": kw.get("pool", "default")})
    claim["status"] = {"providerID": f"fake://{name}", "nodeName": name, "imageID": "img-1"}
    await kube.create(NODE_CLAIM, claim)


@pytest.fixture
def metrics() -> Metrics:
    return Metrics()


@pytest.fixture
def recorder(kube: FakeClient, clock: FakeClock) -> EventRecorder:
    return EventRecorder(kube, component="karpenter", host="t", clock=clock)  # type: ignore[arg-type]


@pytest.fixture
def health(
    kube: FakeClient, recorder: EventRecorder, metrics: Metrics, clock: FakeClock
) -> NodeHealth:
    provider = FakeCloudProvider(repair_policies=[
        RepairPolicy("Ready", "False", TOLERATION), RepairPolicy("Ready", "Unknown", TOLERATION)])
    return NodeHealth(client=kube, index=kube, cloud_provider=provider,  # type: ignore[arg-type]
                      recorder=recorder, metrics=metrics.instruments, clock=clock)


def deleting(kube: FakeClient, name: str) -> bool:
    return bool(kube.peek(NODE_CLAIM, f"claim-{name}")["metadata"].get("deletionTimestamp"))


async def test_an_unhealthy_node_is_replaced_once_its_toleration_has_passed(
    kube: FakeClient, health: NodeHealth, clock: FakeClock, metrics: Metrics,
    caplog: pytest.LogCaptureFixture,
) -> None:
    for i in range(5):
        await add_node(kube, f"n{i}", ready="False" if i == 0 else "True")
    for name, node_name in (("web", "n0"), ("api", "n0"), ("other", "n1")):
        await kube.create(kinds.POD, {
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"nodeName": node_name, "containers": [{"name": "c", "image": "i"}]},
            "status": {"phase": "Running"}})
    await clock.step(300)
    assert await health.reconcile(Request("", "n0")) == Result(requeue_after=300.0)
    assert not deleting(kube, "n0")
    await clock.step(300)
    caplog.set_level(logging.INFO)
    assert await health.reconcile(Request("", "n0")) == Result()
    assert deleting(kube, "n0")
    annotations = kube.peek(NODE_CLAIM, "claim-n0")["metadata"]["annotations"]
    assert annotations[ANNOTATION] == "2024-01-01T00:10:00Z"  # forced out at once
    assert metrics.value("karpenter_nodeclaims_disrupted_total", reason="unhealthy",
                         nodepool="default", capacity_type="spot", consolidation_policy="",
                         termination_mode="graceful") == 1
    assert metrics.value("karpenter_nodeclaims_unhealthy_disrupted_total", condition="ready",
                         image_id="img-1", termination_mode="graceful") == 1
    assert metrics.value("karpenter_pods_disruption_initiated_total", reason="unhealthy") == 2
    assert "deleting unhealthy node" in caplog.messages
    for i in range(1, 5):
        assert await health.reconcile(Request("", f"n{i}")) == Result()
        assert not deleting(kube, f"n{i}")


async def test_nothing_is_repaired_when_over_a_fifth_of_the_pool_is_unhealthy(
    kube: FakeClient, health: NodeHealth, clock: FakeClock, recorder: EventRecorder,
) -> None:
    for i in range(5):
        await add_node(kube, f"n{i}", ready="Unknown" if i < 2 else "True")
    await add_node(kube, "other", pool="other")  # other pools do not count
    await clock.step(3600)
    assert await health.reconcile(Request("", "n0")) == Result(requeue_after=300.0)
    assert await health.reconcile(Request("", "n0")) == Result(requeue_after=300.0)
    assert not deleting(kube, "n0") and not deleting(kube, "n1")
    await recorder.flush()
    blocked = [e for e in kube.objects(EVENT) if e["reason"] == "NodeRepairBlocked"]
    assert [(e["involvedObject"]["name"], e["type"], e["message"]) for e in blocked] == [
        ("n0", "Warning", "more than 20% nodes are unhealthy in the nodepool")]


@pytest.mark.parametrize(("nodes", "unhealthy", "repaired"), [
    (3, 1, True), (5, 1, True), (5, 2, False), (10, 2, True), (10, 3, False), (1, 1, True)])
async def test_the_threshold_rounds_up(
    kube: FakeClient, health: NodeHealth, clock: FakeClock, nodes: int, unhealthy: int,
    repaired: bool,
) -> None:
    for i in range(nodes):
        await add_node(kube, f"n{i}", ready="False" if i < unhealthy else "True")
    await clock.step(3600)
    await health.reconcile(Request("", "n0"))
    assert deleting(kube, "n0") is repaired


@settings(max_examples=200)
@given(st.integers(0, 10_000))
def test_a_fifth_rounded_up_may_be_unhealthy(total: int) -> None:
    assert allowed_unhealthy(total) == math.ceil(total / 5)


async def test_an_earlier_termination_time_is_kept_and_healthy_or_foreign_nodes_untouched(
    kube: FakeClient, health: NodeHealth, clock: FakeClock,
) -> None:
    await add_node(kube, "sick", ready="False")
    kube.peek(NODE_CLAIM, "claim-sick")["metadata"]["annotations"] = {ANNOTATION: T0}
    await add_node(kube, "fine")
    await kube.create(kinds.NODE, {**node("foreign", ready="False"),
                                   "spec": {"providerID": "other://x"}})
    for _ in range(4):
        await add_node(kube, f"filler-{_}")
    await clock.step(3600)
    await health.reconcile(Request("", "sick"))
    assert kube.peek(NODE_CLAIM, "claim-sick")["metadata"]["annotations"][ANNOTATION] == T0
    assert deleting(kube, "sick")
    for name in ("fine", "foreign", "missing"):
        assert await health.reconcile(Request("", name)) == Result()
    assert not deleting(kube, "fine")


def test_heartbeats_do_not_wake_the_controller_but_condition_changes_do() -> None:
    old = node("n")
    beat = node("n")
    beat["status"]["conditions"][0]["lastHeartbeatTime"] = "2024-01-01T00:01:00Z"
    assert not CONDITIONS_CHANGED.update(old, beat)
    flipped = node("n", ready="False", since="2024-01-01T00:01:00Z")
    assert CONDITIONS_CHANGED.update(old, flipped)
    more = node("n")
    more["status"]["conditions"].append({"type": "DiskPressure", "status": "False"})
    assert CONDITIONS_CHANGED.update(old, more)


def test_the_controller_exists_only_behind_the_node_repair_gate_and_legacy_repair() -> None:
    """Karpenter v1.15.0 controllers.go: node.health (now legacyrepair) runs only with
    NodeRepair on and --legacy-node-repair; otherwise repair is a disruption method."""
    off = Deps(manager=None, client=None, cloud_provider=None, cluster=None,  # type: ignore[arg-type]
               unavailable_offerings=None, recorder=None, clock=None,  # type: ignore[arg-type]
               settings=Settings(), metrics=None, scheduling=None,  # type: ignore[arg-type]
               overlays=None)  # type: ignore[arg-type]
    nodehealth.register(off)  # touches nothing: the manager is not even there
    fields = {f: getattr(off, f) for f in off.__dataclass_fields__}
    new_default = Deps(**{**fields,  # type: ignore[arg-type]
                          "settings": Settings(feature_gates=FeatureGates(node_repair=True))})
    nodehealth.register(new_default)  # the disruption method repairs: nothing here
    on = Deps(**{**fields,  # type: ignore[arg-type]
                 "settings": Settings(feature_gates=FeatureGates(node_repair=True),
                                      legacy_node_repair=True)})
    with pytest.raises(AttributeError):
        nodehealth.register(on)
