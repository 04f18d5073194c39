"""The eviction queue's answers to what the Eviction API says."""

from __future__ import annotations

from datetime import timedelta

from controllers.termination import factories as f
from controllers.termination.rigging import Rig

from karpy.runtime import Request, Result, kinds
from karpy.state.kinds import NODE_CLAIM


async def test_evicted_pods_are_reported_with_the_nodeclaims_disruption_reason(rig: Rig) -> None:
    rig.kube.add(NODE_CLAIM, f.nodeclaim("nc", provider_id="fake://a", conditions=[
        {"type": "DisruptionReason", "status": "True", "reason": "Underutilized",
         "lastTransitionTime": f.T0}]))
    rig.kube.add(kinds.NODE, f.node("a", provider_id="fake://a"))
    pod = rig.kube.add(kinds.POD, f.pod("web", node_name="a"))
    rig.queue.add([pod], None, "a")
    assert rig.queued == [Request("default", "web")]
    assert await rig.queue.reconcile(Request("default", "web")) == Result()
    assert rig.recorder.events[-1].message == "Evicted pod: Underutilized"
    evict = next(c for c in rig.kube.calls if c.verb == "evict")
    assert evict.body["deleteOptions"] == {"preconditions": {"uid": pod["metadata"]["uid"]}}
    assert rig.metric("karpenter_pods_drained_total") == [
        'karpenter_pods_drained_total{reason="Underutilized"} 1.0']


async def test_a_pod_recreated_under_the_same_name_is_not_evicted(rig: Rig) -> None:
    old = rig.kube.add(kinds.POD, f.pod("web-0", node_name="a"))
    rig.queue.add([old], None, "a")
    rig.kube.clear(kinds.POD)
    rig.kube.add(kinds.POD, f.pod("web-0", node_name="b"))  # a StatefulSet's new pod
    assert await rig.queue.reconcile(Request("default", "web-0")) == Result()
    assert not [c for c in rig.kube.calls if c.verb == "evict"]
    assert rig.kube.peek(kinds.POD, "web-0", "default") is not None


async def test_a_vanished_pod_leaves_the_queue(rig: Rig) -> None:
    pod = rig.kube.add(kinds.POD, f.pod("web", node_name="a"))
    rig.queue.add([pod], None, "a")
    rig.kube.clear(kinds.POD)
    assert await rig.queue.reconcile(Request("default", "web")) == Result()
    assert len(rig.queue) == 0


async def test_two_pdbs_on_one_pod_are_reported_and_retried(rig: Rig) -> None:
    rig.kube.add(kinds.NODE, f.node("a", provider_id="fake://a"))
    pod = rig.kube.add(kinds.POD, f.pod("web", node_name="a", labels={"app": "web"}))
    rig.kube.add(kinds.POD_DISRUPTION_BUDGET, f.pdb("web", {"app": "web"}, min_available=0))
    rig.kube.add(kinds.POD_DISRUPTION_BUDGET, f.pdb("all", {}, min_available=0))
    rig.queue.add([pod], None, "a")
    assert await rig.queue.reconcile(Request("default", "web")) == Result(requeue_after=5.0)
    assert rig.recorder.events[-1].message == (
        "Failed to drain node, eviction does not support multiple PDBs")
    assert rig.recorder.events[-1].name == "a"
    assert rig.queue.has(pod)


async def test_a_readded_pod_keeps_the_earlier_deadline(rig: Rig) -> None:
    pod = rig.kube.add(kinds.POD, f.pod("web", node_name="a", do_not_disrupt="true",
                                        grace_seconds=10))
    soon = rig.clock.now() + timedelta(seconds=40)
    rig.queue.add([pod], soon, "a")
    rig.queue.add([pod], None, "a")  # a later drain without a deadline cannot relax it
    assert rig.queued == [Request("default", "web")]  # queued once
    await rig.clock.step(31.0)  # 40 s deadline - 10 s grace = 30 s
    assert await rig.queue.reconcile(Request("default", "web")) == Result()
    assert rig.kube.peek(kinds.POD, "web", "default") is None
