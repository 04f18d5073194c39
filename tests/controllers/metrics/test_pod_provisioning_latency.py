"""Karpenter's pod provisioning latencies: measured from when karpy first saw a pending
pod and from the round that first found it a place, not from the pod's creation (a pod
created before karpy started, or before a NodePool it can use, is not karpy's delay)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from controllers.provisioning.provisioning_support import Harness, build

from karpy.controllers.metrics import GaugeStore, PodMetrics
from karpy.controllers.metrics._pod import GAUGES
from karpy.runtime import Request, kinds
from karpy.runtime.testing import FakeClient
from karpy.state.testing import nodepool, pod

CREATED = "2023-12-31T23:00:00Z"
"""An hour before karpy's clock starts: the creation-based metrics would say 3600 s."""


def lines(h: Harness, name: str) -> list[str]:
    text = h.metrics.render().decode()
    return sorted(line for line in text.splitlines()
                  if line.startswith(name + "{") or line.startswith(name + " "))


def at(h: Harness, seconds: float) -> str:
    """The harness clock's start plus ``seconds``, as the API writes times."""
    start = datetime.fromtimestamp(h.clock.now().timestamp() - h.clock.monotonic(),
                                   tz=h.clock.now().tzinfo)
    return datetime.fromtimestamp(start.timestamp() + seconds, tz=start.tzinfo).isoformat()


def waiting(name: str, **kw: Any) -> dict[str, Any]:
    obj = pod(name, memory="256Mi", **kw)
    obj["metadata"]["creationTimestamp"] = CREATED
    return obj


async def test_a_pod_is_timed_from_when_karpy_saw_it_and_first_found_it_a_place() -> None:
    h = build()
    kube = FakeClient(clock=h.clock)
    store = GaugeStore(GAUGES, clock=h.clock)
    h.metrics.registry.register(store)
    controller = PodMetrics(client=kube, store=store,
                            metrics=h.provisioner.metrics,
                            scheduling=h.cluster.pod_scheduling)
    h.cluster.update_nodepool(nodepool("default"))
    web = waiting("web-1", cpu="1")
    huge = waiting("huge", cpu="100000")
    for obj in (web, huge):
        h.cluster.update_pod(obj)  # karpy sees both pending at 0 s
        kube.add(kinds.POD, obj)
    web_key, huge_key = Request("default", "web-1"), Request("default", "huge")
    await controller.reconcile(web_key)
    await controller.reconcile(huge_key)

    # 4 s later no round has run yet: both are undecided for 4 s (not an hour)
    await h.clock.step(4)
    assert lines(h, "karpenter_pods_provisioning_scheduling_undecided_time_seconds") == [
        'karpenter_pods_provisioning_scheduling_undecided_time_seconds'
        '{name="huge",namespace="default"} 4.0',
        'karpenter_pods_provisioning_scheduling_undecided_time_seconds'
        '{name="web-1",namespace="default"} 4.0',
    ]
    assert lines(h, "karpenter_pods_provisioning_unbound_time_seconds") == []

    # The round decides both (web-1 gets a NodeClaim, huge fits nowhere): 4 s each to
    # the first decision; the undecided ages vanish without a pod event.
    await h.provisioner.provision()
    assert lines(h, "karpenter_pods_scheduling_decision_duration_seconds_count") == [
        "karpenter_pods_scheduling_decision_duration_seconds_count 2.0"]
    assert lines(h, "karpenter_pods_scheduling_decision_duration_seconds_sum") == [
        "karpenter_pods_scheduling_decision_duration_seconds_sum 8.0"]
    assert lines(h, "karpenter_pods_provisioning_scheduling_undecided_time_seconds") == []
    # a later round does not decide "for the first time" again
    await h.clock.step(1)
    await h.provisioner.provision()
    assert lines(h, "karpenter_pods_scheduling_decision_duration_seconds_count") == [
        "karpenter_pods_scheduling_decision_duration_seconds_count 2.0"]

    # web-1 has waited 10 s since the round that found it a place (at 4 s); huge, which
    # has no place, shows no provisioning wait
    await h.clock.step(9)
    assert lines(h, "karpenter_pods_provisioning_unbound_time_seconds") == [
        'karpenter_pods_provisioning_unbound_time_seconds{name="web-1",namespace="default"}'
        ' 10.0']
    assert lines(h, "karpenter_pods_provisioning_unstarted_time_seconds") == [
        'karpenter_pods_provisioning_unstarted_time_seconds{name="web-1",namespace="default"}'
        ' 10.0']

    # Bound at 34 s, Ready at 44 s: 30 s and 40 s after the place was found
    stored = kube.peek(kinds.POD, "web-1", "default")
    stored["spec"]["nodeName"] = "node-a"
    stored["status"] = {"phase": "Running", "conditions": [
        {"type": "PodScheduled", "status": "True", "lastTransitionTime": at(h, 34)},
        {"type": "Ready", "status": "True", "lastTransitionTime": at(h, 44)}]}
    await controller.reconcile(web_key)
    assert lines(h, "karpenter_pods_provisioning_bound_duration_seconds_sum") == [
        "karpenter_pods_provisioning_bound_duration_seconds_sum 30.0"]
    assert lines(h, "karpenter_pods_provisioning_startup_duration_seconds_sum") == [
        "karpenter_pods_provisioning_startup_duration_seconds_sum 40.0"]
    assert lines(h, "karpenter_pods_provisioning_unbound_time_seconds") == []
    assert lines(h, "karpenter_pods_provisioning_unstarted_time_seconds") == []
    # its moments are forgotten once recorded; huge's are kept until it goes away
    assert h.cluster.pod_scheduling.acked("default/web-1") is None
    assert h.cluster.pod_scheduling.acked("default/huge") is not None
    h.cluster.delete_pod(huge)
    assert len(h.cluster.pod_scheduling) == 0


async def test_a_pod_without_a_nodepool_is_timed_from_the_round_that_finds_it_one() -> None:
    """No NodePool is a decision too (nowhere to go); the provisioning wait starts when
    a round first finds the pod a place."""
    h = build()
    h.cluster.update_pod(waiting("web-1", cpu="1"))
    await h.clock.step(2)
    await h.provisioner.provision()
    times = h.cluster.pod_scheduling
    decided = times.decided("default/web-1")
    assert decided == h.clock.now()
    assert times.schedulable("default/web-1") is None
    assert lines(h, "karpenter_pods_scheduling_decision_duration_seconds_sum") == [
        "karpenter_pods_scheduling_decision_duration_seconds_sum 2.0"]

    await h.clock.step(10)
    h.cluster.update_nodepool(nodepool("default"))
    await h.provisioner.provision()
    assert times.schedulable("default/web-1") == h.clock.now()
    assert times.decided("default/web-1") == decided  # the first decision stays
    assert lines(h, "karpenter_pods_scheduling_decision_duration_seconds_count") == [
        "karpenter_pods_scheduling_decision_duration_seconds_count 1.0"]
