"""Karpenter's pod latency metrics: how long a pod has waited to bind and to start
(ages read at scrape time), and how long it took to bind once it has."""

from __future__ import annotations

from datetime import UTC, datetime

from controllers.termination import factories as f

from karpy.controllers.instruments import KarpenterMetrics
from karpy.controllers.metrics import GaugeStore, PodMetrics
from karpy.controllers.metrics._pod import GAUGES
from karpy.runtime import Request, kinds
from karpy.runtime.telemetry import Metrics
from karpy.runtime.testing import FakeClient, FakeClock
from karpy.state.pod_scheduling import PodSchedulingTimes


def lines(registry: Metrics, name: str) -> list[str]:
    text = registry.render().decode()
    return sorted(line for line in text.splitlines()
                  if line.startswith(name + "{") or line.startswith(name + " "))


async def test_a_waiting_pod_shows_its_age_until_it_binds_and_starts() -> None:
    clock = FakeClock(start=datetime(2024, 1, 1, 0, 0, 30, tzinfo=UTC))
    kube = FakeClient(clock=clock)
    registry = Metrics()
    store = GaugeStore(GAUGES, clock=clock)
    registry.registry.register(store)
    metrics = KarpenterMetrics(registry.meter("karpenter"), registry.registry)
    controller = PodMetrics(client=kube, store=store, metrics=metrics,  # type: ignore[arg-type]
                            scheduling=PodSchedulingTimes())
    kube.add(kinds.NODE, f.node("node-a", provider_id="fake://a"))
    web = f.pod("web-1", node_name="", phase="Pending")
    web["metadata"]["creationTimestamp"] = "2024-01-01T00:00:00Z"
    kube.add(kinds.POD, web)
    request = Request("default", "web-1")

    await controller.reconcile(request)
    assert lines(registry, "karpenter_pods_unbound_time_seconds") == [
        'karpenter_pods_unbound_time_seconds{name="web-1",namespace="default"} 30.0']
    await clock.step(15)  # the age moves without a reconcile
    assert lines(registry, "karpenter_pods_unstarted_time_seconds") == [
        'karpenter_pods_unstarted_time_seconds{name="web-1",namespace="default"} 45.0']

    # Bound at 50 s, still starting.
    stored = kube.peek(kinds.POD, "web-1", "default")
    stored["spec"]["nodeName"] = "node-a"
    stored["status"] = {"phase": "Pending", "conditions": [
        {"type": "PodScheduled", "status": "True", "lastTransitionTime": "2024-01-01T00:00:50Z"}]}
    await controller.reconcile(request)
    assert lines(registry, "karpenter_pods_unbound_time_seconds") == []
    assert len(lines(registry, "karpenter_pods_unstarted_time_seconds")) == 1

    # Running and Ready at 60 s: the waits end, the durations are recorded once.
    stored["status"] = {"phase": "Running", "conditions": [
        {"type": "PodScheduled", "status": "True", "lastTransitionTime": "2024-01-01T00:00:50Z"},
        {"type": "Ready", "status": "True", "lastTransitionTime": "2024-01-01T00:01:00Z"}]}
    for _ in range(2):
        await controller.reconcile(request)
    assert lines(registry, "karpenter_pods_unstarted_time_seconds") == []
    assert lines(registry, "karpenter_pods_bound_duration_seconds_sum") == [
        "karpenter_pods_bound_duration_seconds_sum 50.0"]
    assert lines(registry, "karpenter_pods_bound_duration_seconds_count") == [
        "karpenter_pods_bound_duration_seconds_count 1.0"]
    assert lines(registry, "karpenter_pods_startup_duration_seconds_sum") == [
        "karpenter_pods_startup_duration_seconds_sum 60.0"]
