"""Karpenter's state gauges as /metrics shows them: names, labels, units, and series
that disappear with their objects."""

from __future__ import annotations

import logging
from datetime import UTC, datetime

import pytest
from controllers.termination import factories as f

from karpy.controllers.instruments import KarpenterMetrics
from karpy.controllers.metrics import (
    GAUGES,
    ClusterStateMetrics,
    GaugeStore,
    NodeMetrics,
    NodePoolMetrics,
    PodMetrics,
)
from karpy.runtime import Request, kinds
from karpy.runtime.telemetry import Metrics
from karpy.runtime.testing import FakeClient, FakeClock
from karpy.state.cluster import Cluster
from karpy.state.kinds import NODE_CLAIM, NODE_POOL
from karpy.state.pod_scheduling import PodSchedulingTimes


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(start=datetime(2024, 1, 1, 0, 10, tzinfo=UTC))


@pytest.fixture
def kube(clock: FakeClock) -> FakeClient:
    return FakeClient(clock=clock)


@pytest.fixture
def registry() -> Metrics:
    return Metrics()


def lines(registry: Metrics, name: str) -> list[str]:
    text = registry.render().decode()
    return sorted(line for line in text.splitlines()
                  if line.startswith(name + "{") or line.startswith(name + " "))


def store(registry: Metrics) -> GaugeStore:
    gauges = GaugeStore(GAUGES)
    registry.registry.register(gauges)
    return gauges


async def test_nodepool_usage_and_limit_in_karpenters_units(
    kube: FakeClient, registry: Metrics
) -> None:
    gauges = store(registry)
    pool = {"metadata": {"name": "default"}, "spec": {"limits": {"cpu": "1000", "memory": "1Ti"}},
            "status": {"resources": {"cpu": "2500m", "memory": "4Gi", "nodes": "2",
                                     "ephemeral-storage": "0"}}}
    kube.add(NODE_POOL, pool)
    controller = NodePoolMetrics(client=kube, store=gauges)  # type: ignore[arg-type]
    await controller.reconcile(Request("", "default"))
    assert lines(registry, "karpenter_nodepools_usage") == [
        'karpenter_nodepools_usage{nodepool="default",resource_type="cpu"} 2.5',
        'karpenter_nodepools_usage{nodepool="default",resource_type="ephemeral_storage"} 0.0',
        'karpenter_nodepools_usage{nodepool="default",resource_type="memory"} 4.294967296e+09',
        'karpenter_nodepools_usage{nodepool="default",resource_type="nodes"} 2.0',
    ]
    assert lines(registry, "karpenter_nodepools_limit") == [
        'karpenter_nodepools_limit{nodepool="default",resource_type="cpu"} 1000.0',
        'karpenter_nodepools_limit{nodepool="default",resource_type="memory"} 1.099511627776e+12',
    ]
    kube.clear(NODE_POOL)  # the NodePool is deleted: its series go too
    await controller.reconcile(Request("", "default"))
    assert lines(registry, "karpenter_nodepools_usage") == []


async def test_pod_state_and_startup_recorded_once_per_pod_seen_pending(
    kube: FakeClient, registry: Metrics, clock: FakeClock
) -> None:
    gauges = store(registry)
    kube.add(kinds.NODE, f.node("node-a", provider_id="fake://a"))
    metrics = KarpenterMetrics(registry.meter("karpenter"), registry.registry)
    controller = PodMetrics(client=kube, store=gauges, metrics=metrics,  # type: ignore[arg-type]
                            scheduling=PodSchedulingTimes())
    pending = f.pod("web-1", node_name="", phase="Pending")
    pending["metadata"]["creationTimestamp"] = "2024-01-01T00:00:00Z"
    kube.add(kinds.POD, pending)
    kube.add(kinds.POD, f.pod("old-1", node_name="node-a"))  # running before we looked

    await controller.reconcile(Request("default", "web-1"))
    await controller.reconcile(Request("default", "old-1"))
    state = lines(registry, "karpenter_pods_state")
    assert any('name="web-1"' in s and 'phase="Pending"' in s and 'scheduled="false"' in s
               for s in state)
    assert any('name="old-1"' in s and 'nodepool="default"' in s and 'managed="true"' in s
               and 'ready="true"' in s and 'zone="test-zone-a"' in s
               and 'owner="/apis/apps/v1/namespaces/default/replicasets/owner"' in s
               for s in state)

    # web-1 binds and turns Ready 42 s after it was created.
    stored = kube.peek(kinds.POD, "web-1", "default")
    assert stored is not None
    stored["spec"]["nodeName"] = "node-a"
    stored["status"] = {"phase": "Running", "conditions": [
        {"type": "Ready", "status": "True", "lastTransitionTime": "2024-01-01T00:00:42Z"}]}
    for _ in range(3):  # later events must not record it again
        await controller.reconcile(Request("default", "web-1"))
    assert "karpenter_pods_startup_duration_seconds_count 1.0" in lines(
        registry, "karpenter_pods_startup_duration_seconds_count")
    assert lines(registry, "karpenter_pods_startup_duration_seconds_sum") == [
        "karpenter_pods_startup_duration_seconds_sum 42.0"]

    kube.clear(kinds.POD)
    await controller.reconcile(Request("default", "web-1"))
    await controller.reconcile(Request("default", "old-1"))
    assert lines(registry, "karpenter_pods_state") == []


async def test_node_gauges_and_cluster_state_node_count(
    kube: FakeClient, registry: Metrics, clock: FakeClock
) -> None:
    gauges = store(registry)
    cluster = Cluster(clock=clock)
    claim = f.nodeclaim("default-abc", provider_id="fake://a", node_name="node-a")
    claim["status"]["conditions"].append(
        {"type": "Initialized", "status": "True", "reason": "Initialized",
         "lastTransitionTime": f.T0})
    cluster.update_nodeclaim(kube.add(NODE_CLAIM, claim))
    node = f.node("node-a", provider_id="fake://a",
                  capacity={"cpu": "4", "memory": "16Gi", "pods": "110"})
    node["status"]["allocatable"] = {"cpu": "3900m", "memory": "15Gi", "pods": "110"}
    node["metadata"]["creationTimestamp"] = "2024-01-01T00:00:00Z"
    cluster.update_node(node)
    cluster.update_pod(f.pod("web-1", node_name="node-a", cpu="1950m"))
    cluster.update_nodeclaim(kube.add(NODE_CLAIM, f.nodeclaim("other", provider_id="fake://b")))

    await NodeMetrics(cluster=cluster, store=gauges, clock=clock).reconcile()
    await ClusterStateMetrics(cluster=cluster, store=gauges).reconcile()
    allocatable = lines(registry, "karpenter_nodes_allocatable")
    cpu = next(s for s in allocatable if 'resource_type="cpu"' in s)
    assert cpu.endswith(" 3.9")
    for label in ('node_name="node-a"', 'nodepool="default"', 'zone="test-zone-a"',
                  'instance_type=""', 'capacity_type=""', 'managed="true"', 'phase=""'):
        assert label in cpu
    overhead = lines(registry, "karpenter_nodes_system_overhead")
    assert next(s for s in overhead if 'resource_type="memory"' in s).endswith(
        " 1.073741824e+09")
    requests = lines(registry, "karpenter_nodes_total_pod_requests")
    assert next(s for s in requests if 'resource_type="cpu"' in s).endswith(" 1.95")
    assert lines(registry, "karpenter_nodes_current_lifetime_seconds")[0].endswith(" 600.0")
    assert 'karpenter_cluster_utilization_percent{resource_type="cpu"} 50.0' in lines(
        registry, "karpenter_cluster_utilization_percent")
    assert lines(registry, "karpenter_cluster_state_node_count") == [
        "karpenter_cluster_state_node_count 2.0"]


async def test_node_limits_gauges_sum_the_bound_pods_limits(
    registry: Metrics, clock: FakeClock
) -> None:
    """karpenter_nodes_total_pod_limits / _total_daemon_limits: what a node's pods (and
    its DaemonSet pods) may burst to, following pods as they come and go."""
    gauges = store(registry)
    cluster = Cluster(clock=clock)
    cluster.update_node(f.node("node-a", provider_id="fake://a", capacity={"cpu": "4"}))
    web = f.pod("web-1", node_name="node-a", cpu="500m")
    web["spec"]["containers"][0]["resources"]["limits"] = {"cpu": "2", "memory": "1Gi"}
    agent = f.pod("agent-x", node_name="node-a", owner=("apps/v1", "DaemonSet"), cpu="100m")
    agent["spec"]["containers"][0]["resources"]["limits"] = {"cpu": "250m"}
    unlimited = f.pod("batch-1", node_name="node-a", cpu="1")
    for pod in (web, agent, unlimited):
        cluster.update_pod(pod)
    metrics = NodeMetrics(cluster=cluster, store=gauges, clock=clock)
    await metrics.reconcile()

    def values(name: str) -> dict[str, str]:
        return {s.split('resource_type="')[1].split('"')[0]: s.rsplit(" ", 1)[1]
                for s in lines(registry, name) if 'node_name="node-a"' in s}

    assert values("karpenter_nodes_total_pod_limits") == {
        "cpu": "2.25", "memory": "1.073741824e+09"}
    assert values("karpenter_nodes_total_daemon_limits") == {"cpu": "0.25"}
    cluster.delete_pod(web)
    await metrics.reconcile()
    assert values("karpenter_nodes_total_pod_limits") == {"cpu": "0.25"}


async def test_node_gauges_follow_changes_between_rounds_and_rebuild_only_changed_nodes(
    registry: Metrics, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    from karpy.controllers.metrics import _node

    gauges = store(registry)
    cluster = Cluster(clock=clock)
    for name in ("node-a", "node-b"):
        node = f.node(name, provider_id=f"fake://{name}", capacity={"cpu": "4", "pods": "110"})
        node["metadata"]["creationTimestamp"] = "2024-01-01T00:00:00Z"
        cluster.update_node(node)
    metrics = NodeMetrics(cluster=cluster, store=gauges, clock=clock)
    await metrics.reconcile()

    built: list[str] = []
    real_build = _node._build
    monkeypatch.setattr(_node, "_build", lambda state, node: (
        built.append(state.node_name), real_build(state, node))[1])
    cluster.update_pod(f.pod("web-1", node_name="node-a", cpu="1500m"))
    relabelled = f.node("node-b", provider_id="fake://node-b", capacity={"cpu": "4", "pods": "110"})
    relabelled["metadata"]["creationTimestamp"] = "2024-01-01T00:00:00Z"
    relabelled["metadata"]["labels"]["topology.kubernetes.io/zone"] = "test-zone-z"
    await clock.step(60)
    await metrics.reconcile()
    requests = lines(registry, "karpenter_nodes_total_pod_requests")
    assert any('node_name="node-a"' in s and 'resource_type="cpu"' in s and s.endswith(" 1.5")
               for s in requests)
    assert sorted(built) == ["node-a"]  # node-b unchanged so far: reused

    cluster.update_node(relabelled)
    built.clear()
    await clock.step(60)
    await metrics.reconcile()
    assert sorted(built) == ["node-b"]
    assert any('node_name="node-b"' in s and 'zone="test-zone-z"' in s
               for s in lines(registry, "karpenter_nodes_allocatable"))
    lifetimes = lines(registry, "karpenter_nodes_current_lifetime_seconds")
    assert len(lifetimes) == 2 and all(s.endswith(" 720.0") for s in lifetimes)


async def test_a_model_unsynced_for_long_says_so_naming_the_nodeclaims_it_waits_on(
    registry: Metrics, clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    """Karpenter's "cluster is waiting on sync for extended duration": after 30 s
    unsynced, at most every 10 s, with the unlaunched NodeClaims named; nothing once
    synced again."""
    cluster = Cluster(clock=clock)
    cluster.update_nodeclaim(f.nodeclaim("stuck-1"))
    metrics = ClusterStateMetrics(cluster=cluster, store=store(registry), clock=clock)
    message = "cluster is waiting on sync for extended duration"

    def logged() -> list[logging.LogRecord]:
        return [r for r in caplog.records if r.getMessage() == message]

    with caplog.at_level(logging.ERROR, logger="controller"):
        for _ in range(12):  # 0 to 55 s, a reconcile every 5 s
            await metrics.reconcile()
            clock.advance(5)
        # first past 30 s, then once more than 10 s later
        assert [getattr(r, "duration", "") for r in logged()] == ["35s", "50s"]
        assert logged()[0].nodeclaims == ["stuck-1"]  # type: ignore[attr-defined]
        assert lines(registry, "karpenter_cluster_state_synced") == [
            "karpenter_cluster_state_synced 0.0"]
        cluster.delete_nodeclaim(f.nodeclaim("stuck-1"))
        caplog.clear()
        for _ in range(10):
            await metrics.reconcile()
            clock.advance(5)
        assert logged() == []
